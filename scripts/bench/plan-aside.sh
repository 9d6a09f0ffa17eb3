#!/usr/bin/env bash
# plan-aside.sh: how a plan whose peers are on other GPUs copies its own
# chunk beside the puts (LUACOLL_PLAN_ASIDE kernel, ce or off), ring and
# direct in stream and graph mode, 16 and 64 MiB, beside the built-in in
# the same run. Builds nothing; needs 2 GPUs (one rank each).
#   bash scripts/bench/plan-aside.sh [ROUNDS]
# Each line: size: plan us vs built-in us (busbw ratio) wrong N.
set -uo pipefail
export NCCL_NVLS_ENABLE=0
nvidia-smi -L
for r in $(seq "${1:-2}"); do
	for x in kernel ce off; do
		for a in ring direct; do
			for m in stream graph; do
				echo "== $x lua:$a $m: $(LUACOLL_PLAN_ASIDE=$x timeout -s QUIT -k 10 150 bin/luacoll bench allgather -n 2 --device cuda \
					--timeout 30s --algo lua:$a --plan-mode $m --vs direct -b 16M -e 64M -f 4 --iters 20 -w 3 --rounds 3 2>&1 |
					grep -E '^ +[0-9]+ |rror' | awk '{printf "%s: %s vs %s (%s) wrong %s | ", $1, $4, $8, $NF, $7}')"
			done
		done
	done
done
