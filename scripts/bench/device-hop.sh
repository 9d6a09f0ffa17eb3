#!/usr/bin/env bash
# device-hop.sh: device put_signal hop latency, A/B of the orderings and
# the plan interpreter's settings, on a GPU machine (builds nothing).
#   bash scripts/bench/device-hop.sh [ROUNDS] [ITERS]
# Each round runs `luacoll bench pingpong -n 2 --device cuda` once per
# setting; the raw flag ping-pong of the same run is each row's ceiling.
# LUACOLL_ORDERING picks the device loop's ordering (signal_put.cu),
# LUACOLL_PLAN_POLL and LUACOLL_PLAN_PREFETCH the plan interpreter's.
set -uo pipefail
export NCCL_NVLS_ENABLE=0
rounds="${1:-2}"
iters="${2:-5000}"
bin=bin/luacoll
ord="${ORDERINGS:-9 10}"
for r in $(seq "$rounds"); do
	for v in $ord; do
		for pl in "acquire 1" "relaxed 1" "acquire 0" "relaxed 0"; do
			set -- $pl
			echo "== round $r: LUACOLL_ORDERING=$v LUACOLL_PLAN_POLL=$1 LUACOLL_PLAN_PREFETCH=$2"
			LUACOLL_ORDERING=$v LUACOLL_PLAN_POLL=$1 LUACOLL_PLAN_PREFETCH=$2 \
				timeout -s QUIT -k 10 100 $bin bench pingpong -n 2 --device cuda --iters "$iters" 2>&1 | grep -v '^#' | grep -i 'ping-pong\|error\|fail'
		done
	done
done
