#!/usr/bin/env bash
# line-hop.sh: the device put_signal hop three ways in one run of
# `luacoll bench pingpong` (release-ordered, the raw flag ceiling, the
# 16-byte line), ROUNDS times, then the plans' 64 MiB busbw beside the
# built-in (ring and direct, stream and graph). Builds nothing; on a
# 2-GPU machine the ranks take one GPU each.
#   bash scripts/bench/line-hop.sh [ROUNDS]
set -uo pipefail
export NCCL_NVLS_ENABLE=0
rounds="${1:-3}"
bin=bin/luacoll
nvidia-smi -L
for r in $(seq "$rounds"); do
	echo "== round $r"
	timeout -s QUIT -k 10 100 $bin bench pingpong -n 2 --device cuda --iters 5000 2>&1 | grep -v '^#' | grep -iE 'device|raw|plan|error|fail'
done
for a in ring direct; do
	for m in stream graph; do
		echo "== lua:$a plan-mode $m, 64 MiB"
		timeout -s QUIT -k 10 150 $bin bench allgather -n 2 --device cuda --timeout 30s --algo lua:$a --plan-mode $m \
			--vs direct -b 16M -e 64M -f 4 --iters 20 -w 3 --rounds 5 2>&1 | grep -E '^# (algo|how)|^ +[0-9]+ |rror'
	done
done
