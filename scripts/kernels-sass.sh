#!/usr/bin/env bash
# kernels-sass.sh: what ptxas makes of the luacoll kernels on the GPU
# machine (its nvcc; the build machine has no CUDA): registers, stack
# frame and spills of every kernel, and the SASS of one.
#   bash scripts/kernels-sass.sh [KERNEL]     (default lc_plan)
# The source is kernels/*.cu concatenated in name order, as kernels.Source
# gives NVRTC. Writes src.cu, ptxas.txt and KERNEL.sass to $OUT (or
# ./kernels-sass-out) and prints KERNEL's ptxas lines. Builds nothing of
# luacoll's.
set -euo pipefail
k="${1:-lc_plan}"
out="${OUT:-./kernels-sass-out}"
nvcc="${NVCC:-/usr/local/cuda/bin/nvcc}"
cuobjdump="$(dirname "$nvcc")/cuobjdump"
mkdir -p "$out"
cap=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -1 | tr -d .)
for f in $(LC_ALL=C ls kernels/*.cu); do
	echo "// ---- $(basename "$f") ----"
	cat "$f"
	echo
done >"$out/src.cu"
"$nvcc" --cubin -arch="sm_$cap" -std=c++17 -Xptxas -v "$out/src.cu" -o "$out/kernels.cubin" 2>"$out/ptxas.txt"
grep -A3 "entry function '$k'" "$out/ptxas.txt"
"$cuobjdump" -sass -fun "$k" "$out/kernels.cubin" >"$out/$k.sass"
echo "$(wc -l <"$out/$k.sass") lines of SASS in $out/$k.sass"
