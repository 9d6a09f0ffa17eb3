#!/usr/bin/env bash
# gpu-tune.sh: measurement sweeps behind the defaults of the all-gather on
# path "sm", on a GPU machine with 2 or more GPUs (builds nothing; carry
# bin/). Each sweep is one `luacoll bench allgather` per setting, so every
# table has NCCL measured in the same run where --vs nccl is given.
#   bash scripts/gpu-tune.sh [N]       N ranks (default 2)
# Settings (environment variables read when an all-gather is created):
#   LUACOLL_AGP_LL_VARIANT  0-15 how flagged lines are stored and polled
#                           (bits: kernels.AGPKernels.LL; 4 is a diagnostic)
#   LUACOLL_AGP_LLMAX       bytes per rank sent as flagged lines (0: none)
#   LUACOLL_AGP_CE_MIN      bytes per rank from which the puts use the copy
#                           engines and the own chunk the SMs (0: never)
#   LUACOLL_AGP_BLOCKS_PER_SM  grid cap of the one-kernel exec
# SWEEP="ll grid large" picks the sweeps (default: all three).
# Logs go to $OUT (or ./gpu-tune-out). Never uses NVLink multicast.
set -uo pipefail
export NCCL_NVLS_ENABLE=0
n="${1:-2}"
out="${OUT:-./gpu-tune-out}"
mkdir -p "$out"
ag="bin/luacoll bench allgather -n $n --device cuda --timeout 30s --path sm"
run() {
	local name="$1"; shift
	echo "== $name: $*"
	timeout 200 env "$@" >"$out/$name.log" 2>&1
	echo "== $name: exit $?"
	grep -v '^# \(luacoll\|GPUs\|baseline\)' "$out/$name.log" | tail -n 20
}
sweep="${SWEEP:-ll grid large}"
case " $sweep " in *" ll "*)
	for v in 0 1 2 3 4 8; do
		run ll-v$v-graph LUACOLL_AGP_LL_VARIANT=$v $ag --graph -b 1K -e 64K -f 2 --iters 200 -w 20
	done
	run one-small-graph LUACOLL_AGP_LLMAX=0 $ag --graph -b 1K -e 256K -f 4 --iters 200 -w 20
	;;
esac
case " $sweep " in *" grid "*)
	for k in 2 4 8; do
		run 8m-k$k LUACOLL_AGP_BLOCKS_PER_SM=$k $ag --vs nccl -b 8M -e 8M --iters 100 -w 10
		run large-k$k LUACOLL_AGP_BLOCKS_PER_SM=$k $ag -b 256M -e 1G -f 4 --iters 20 -w 5
	done
	;;
esac
case " $sweep " in *" large "*)
	for m in 0 1048576; do
		run large-cemin$m LUACOLL_AGP_CE_MIN=$m $ag --vs nccl -b 4M -e 1G -f 4 --iters 20 -w 5
	done
	;;
esac
