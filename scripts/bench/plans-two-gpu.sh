#!/usr/bin/env bash
# plans-two-gpu.sh: issue 19's and 20's device figures on a 2-GPU machine
# (one rank a GPU), in one call: the device put_signal hop (release-
# ordered, 16-byte line, raw flag, the plan's with and without lines),
# then the plans beside the built-in at small sizes (every mode) and at
# 64 MiB (stream and graph). Builds nothing.
#   bash scripts/bench/plans-two-gpu.sh [ROUNDS]
set -uo pipefail
export NCCL_NVLS_ENABLE=0
rounds="${1:-3}"
bin=bin/luacoll
nvidia-smi -L
for r in $(seq "$rounds"); do
	echo "== hop, round $r"
	timeout -s QUIT -k 10 100 $bin bench pingpong -n 2 --device cuda --iters 5000 2>&1 | grep -v '^#' | grep -iE 'device|raw|plan|error|fail'
done
ag="$bin bench allgather -n 2 --device cuda --timeout 30s"
for a in ring direct; do
	for m in device graph stream; do
		echo "== lua:$a plan-mode $m, 1 KiB .. 256 KiB: size: plan us vs built-in us (ratio) wrong"
		timeout -s QUIT -k 10 150 $ag --algo lua:$a --plan-mode $m --vs direct -b 1K -e 256K -f 16 --iters 200 -w 20 --rounds 3 2>&1 |
			grep -E '^ +[0-9]+ |rror' | awk '{printf "%s: %s vs %s (%s) w%s | ", $1, $4, $8, $NF, $7}'
		echo
	done
	for m in stream graph; do
		echo "== lua:$a plan-mode $m, 16 and 64 MiB"
		timeout -s QUIT -k 10 150 $ag --algo lua:$a --plan-mode $m --vs direct -b 16M -e 64M -f 4 --iters 20 -w 3 --rounds 3 2>&1 |
			grep -E '^ +[0-9]+ |rror' | awk '{printf "%s: %s vs %s (%s) w%s | ", $1, $4, $8, $NF, $7}'
		echo
	done
done
