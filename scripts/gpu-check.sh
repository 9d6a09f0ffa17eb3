#!/usr/bin/env bash
# gpu-check.sh: run luacoll's prebuilt CUDA test binaries on a GPU machine.
#
# It builds nothing (the GPU machine needs no Go). Build the binaries first,
# on a machine with Go:
#   go test -c -o bin/cuda.test ./cuda
#   go test -c -o bin/kernels.test ./kernels
#
# Usage: scripts/gpu-check.sh [OUT_DIR] [--headers]
#   OUT_DIR    where logs go (default: $OUT, else ./gpu-check-out)
#   --headers  also copy cuda.h, cudaTypedefs.h and nvrtc.h from
#              $CUDA_HOME/include (default /usr/local/cuda/include), to
#              check the hand-written struct layouts and enum values
#
# Writes OUT_DIR/system.txt (nvidia-smi, nvidia-smi topo -m, toolkit and
# library facts), OUT_DIR/cuda.log and OUT_DIR/kernels.log. Exits non-zero
# if a test binary fails or is missing.
set -uo pipefail

out="${OUT:-./gpu-check-out}"
headers=0
for arg in "$@"; do
	case "$arg" in
	--headers) headers=1 ;;
	-h | --help)
		sed -n '2,20p' "$0"
		exit 0
		;;
	*) out="$arg" ;;
	esac
done
mkdir -p "$out"
root="$(cd "$(dirname "$0")/.." && pwd)"
cuda_home="${CUDA_HOME:-/usr/local/cuda}"

# NVLink multicast stays off for anything NCCL-based that might start.
export NCCL_NVLS_ENABLE=0

{
	echo "== date: $(date -u +%Y-%m-%dT%H:%M:%SZ)  host: $(uname -srm)"
	echo "== nvidia-smi"
	nvidia-smi 2>&1
	echo "== nvidia-smi topo -m"
	nvidia-smi topo -m 2>&1
	echo "== nvcc"
	"$cuda_home/bin/nvcc" --version 2>&1 | tail -2
	echo "== libraries"
	ldconfig -p 2>/dev/null | grep -E 'libcuda\.so|libnvrtc|libnccl|libnvidia-ml' || true
	ls -l "$cuda_home"/lib64/libnvrtc* 2>/dev/null || true
} >"$out/system.txt" 2>&1
cat "$out/system.txt"

if [ "$headers" = 1 ]; then
	for h in cuda.h cudaTypedefs.h nvrtc.h; do
		if [ -f "$cuda_home/include/$h" ]; then
			cp "$cuda_home/include/$h" "$out/$h"
		else
			echo "gpu-check: $cuda_home/include/$h not found" >&2
		fi
	done
fi

rc=0
for pkg in cuda kernels; do
	bin="$root/bin/$pkg.test"
	if [ ! -x "$bin" ]; then
		echo "gpu-check: $bin missing: build it with: go test -c -o bin/$pkg.test ./$pkg" | tee "$out/$pkg.log"
		rc=1
		continue
	fi
	echo "== $pkg.test"
	# Run from the package directory, as go test does.
	(cd "$root/$pkg" && timeout 150 "$bin" -test.v -test.timeout 140s) 2>&1 | tee "$out/$pkg.log"
	st=${PIPESTATUS[0]}
	if [ "$st" != 0 ]; then
		echo "gpu-check: $pkg.test exited $st"
		rc=1
	fi
done
echo "== summary"
grep -hE '^(--- FAIL|FAIL|ok|PASS)' "$out"/cuda.log "$out"/kernels.log 2>/dev/null
grep -h 'MEASURED' "$out"/cuda.log "$out"/kernels.log 2>/dev/null | sed 's/^ *//'
exit "$rc"
