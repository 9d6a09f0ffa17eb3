#!/usr/bin/env bash
# plan-paths.sh: a plan's wide copies by the copy engines (path auto) or by
# put kernels (path sm), side by side in one call, to set the size up to
# which plans on path auto should take the kernels
# (docs/results/reductions.md, "The puts by kernels"): the all-gather's
# plans (lua:direct and lua:ring, stream and graph mode, beside the
# built-in) and the reductions' (lua:auto, all-reduce and reduce-scatter,
# stream and graph mode, beside NCCL), 256 KiB - 1 GiB, medians of 3
# rounds, the two paths in turn. On the GPU machine, after `make build`
# here and with bin/ carried:
#   bash scripts/bench/plan-paths.sh N [GPUS] [MODES] [PATHS]   N ranks; GPUS e.g. 0,1;
#   MODES "stream graph" (the default), or one of them; PATHS "auto sm"
#   (the default), or one of them
# Prints each table; every row, with the run's metadata, goes to
# $OUT/plan-paths-N-MODES-PATHS.jsonl (one file: the device tool brings back few).
# Never uses NVLink multicast.
set -uo pipefail
export NCCL_NVLS_ENABLE=0
n="${1:-2}"
gpus="${2:-}"
modes="${3:-stream graph}"
paths="${4:-auto sm}"
out="${OUT:-./plan-paths-out}"
mkdir -p "$out"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
g=""
[ -n "$gpus" ] && g="--gpus $gpus"
common="-n $n $g --device cuda --timeout 30s --plan --rounds 3 -w 3"
status=0
k=0
sweep() { # sweep LABEL ARGS...: one bench run, its table printed
	local label=$1
	shift
	k=$((k + 1))
	echo "== $label"
	timeout -s QUIT -k 20 240 bin/luacoll bench "$@" --json "$tmp/$(printf %02d $k).jsonl" | grep -Ev "^# (CPUs|GPUs|baseline)" ||
		status=1
}
for mode in $modes; do
	gm="" # the reductions' NCCL captured too (the all-gather's built-in follows the plan's mode)
	[ $mode = graph ] && gm="--graph"
	for path in $paths; do
		for a in direct ring; do
			sweep "allgather lua:$a $mode path $path" allgather $common --algo lua:$a --plan-mode $mode --path $path \
				--vs direct -b 256K -e 1G -f 4 --iters 20
		done
		for c in allreduce reduce_scatter; do
			sweep "$c lua:auto $mode path $path" $c $common --algo lua:auto --plan-mode $mode $gm --path $path \
				--vs nccl -b 256K -e 1G -f 4 --iters 20
		done
	done
done
cat "$tmp"/*.jsonl >"$out/plan-paths-$n-${modes// /-}-${paths// /-}.jsonl" 2>/dev/null
exit $status
