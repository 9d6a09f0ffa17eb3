#!/usr/bin/env bash
# gpu-tune.sh: measurement sweeps behind the defaults of the all-gather on
# path "sm", on a GPU machine with 2 or more GPUs (builds nothing; carry
# bin/). Each sweep is one `luacoll bench allgather` per setting, so every
# table has NCCL measured in the same run where --vs nccl is given.
#   bash scripts/gpu-tune.sh [N]       N ranks (default 2)
# Settings (environment variables read when an all-gather is created):
#   LUACOLL_AGP_LL_VARIANT  0-127 how flagged lines are stored and polled
#                           (bits: kernels.AGPKernels.LL; 4 is a diagnostic)
#   LUACOLL_AGP_LLMAX       bytes per rank sent as flagged lines (0: none)
#   LUACOLL_AGP_CE_MIN      bytes per rank from which the puts use the copy
#                           engines and the own chunk the SMs (0: never)
#   LUACOLL_AGP_BLOCKS_PER_SM  grid cap of the one-kernel exec
#   LUACOLL_AGP_CE_SHARE    percent of each put that the copy engines move (default 0)
#                           beside the put kernel (execs >= 8 MiB per rank)
#   LUACOLL_AGP_GRAPH_COPY_MAX  largest memcpy node of a captured exec (0: one
#                           node per copy)
#   LUACOLL_AGP_FENCES      system fences of the ready and done kernels (0-3)
#   LUACOLL_AGP_TRACE=1     the ready and done kernels' phase medians at destroy
# SWEEP="ll grid large small graphcopy llfence fences own" picks the sweeps
# (default: the first four).
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
sweep="${SWEEP:-ll grid large small}"
case " $sweep " in *" ll "*)
	for v in 0 1 2 3 4 8 16 32; do
		run ll-v$v-graph LUACOLL_AGP_LL_VARIANT=$v $ag --graph -b 1K -e 64K -f 2 --iters 1000 -w 50
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
	for c in 0 20 35 50; do
		run large-share$c LUACOLL_AGP_CE_SHARE=$c $ag -b 64M -e 1G -f 4 --iters 20 -w 5
	done
	;;
esac
case " $sweep " in *" graphcopy "*)
	# path ce in graph mode with memcpy nodes of at most 8 MiB .. 256 MiB
	# and one node per copy (0), then eager for reference; one node per copy is the
	# default.
	ce="bin/luacoll bench allgather -n $n --device cuda --timeout 30s --path ce"
	for m in 0 8 16 32 64 128 256; do
		run ce-graph-max${m}m LUACOLL_AGP_GRAPH_COPY_MAX=$((m << 20)) $ce --graph --vs nccl -b 256M -e 1G -f 2 --iters 20 -w 5
	done
	run ce-eager LUACOLL_NOTHING=1 $ce --vs nccl -b 256M -e 1G -f 2 --iters 20 -w 5
	;;
esac
case " $sweep " in *" llfence "*)
	# flagged lines without (0) and with (64) the last block's system fence
	for v in 0 64 0 64; do
		run ll-v$v-graph-nccl LUACOLL_AGP_LL_VARIANT=$v $ag --graph --vs nccl -b 1K -e 64K -f 4 --iters 1000 -w 50
	done
	;;
esac
case " $sweep " in *" fences "*)
	# ready and done kernels without (0) and with (3) their system fences
	ce="bin/luacoll bench allgather -n $n --device cuda --timeout 30s --path ce"
	for f in 0 3 0 3; do
		run fences$f-sm LUACOLL_AGP_FENCES=$f $ag -b 256M -e 1G -f 4 --iters 30 -w 5
		run fences$f-ce LUACOLL_AGP_FENCES=$f $ce -b 4M -e 1G -f 4 --iters 30 -w 5
	done
	;;
esac
case " $sweep " in *" small "*)
	run small-graph LUACOLL_NOTHING=1 $ag --graph --vs nccl -b 1K -e 64K -f 4 --iters 1000 -w 50
	run small-eager LUACOLL_NOTHING=1 $ag --vs nccl -b 1K -e 64K -f 4 --iters 1000 -w 50
	;;
esac
case " $sweep " in *" own "*)
	# the own chunk's copy at 256 MiB / 1 GiB total: in place (no own copy)
	# against out of place, paths sm and ce, NCCL in the same run; then the
	# own copy kernel's grid (path sm: one block in 8 of BLOCKS_PER_SM per SM)
	ce="bin/luacoll bench allgather -n $n --device cuda --timeout 30s --path ce"
	for r in 1 2; do
		run own-sm-inplace$r LUACOLL_AGP_TRACE=1 $ag --inplace --vs nccl -b 256M -e 1G -f 4 --iters 100 -w 10
		run own-sm-outplace$r LUACOLL_AGP_TRACE=1 $ag --vs nccl -b 256M -e 1G -f 4 --iters 100 -w 10
		run own-ce-inplace$r LUACOLL_NOTHING=1 $ce --inplace -b 256M -e 1G -f 4 --iters 100 -w 10
		run own-ce-outplace$r LUACOLL_NOTHING=1 $ce -b 256M -e 1G -f 4 --iters 100 -w 10
	done
	for k in 1 2 4 8; do
		run own-grid-k$k LUACOLL_AGP_BLOCKS_PER_SM=$k $ag -b 256M -e 256M --iters 200 -w 10
	done
	;;
esac
