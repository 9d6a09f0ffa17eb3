#!/usr/bin/env bash
# net-lanes.sh: how much TCP bandwidth one UCX worker per rank gets
# against several, on loopback (two logical nodes of one machine).
# ucx_perftest pairs run at once, in one or both directions, beside
# luacoll's put (one direction) and all-gather (both) between two logical
# nodes. Builds nothing; PERFTEST names ucx_perftest (default: the one in
# bin/ucx, with its libraries).
#   bash scripts/bench/net-lanes.sh [SIZE]
set -uo pipefail
size="${1:-16777216}"
pt="${PERFTEST:-bin/ucx/ucx_perftest}"
[ -x "$pt" ] && [ "$pt" = bin/ucx/ucx_perftest ] && export LD_LIBRARY_PATH="$PWD/bin/ucx${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export UCX_TLS=tcp
pairs() { # COUNT: COUNT client->server pairs at once, -n 100 each
	local pids=() port
	for i in $(seq "$1"); do
		port=$((20000 + RANDOM % 20000))
		$pt -p $port >/dev/null 2>&1 &
		pids+=($!)
		sleep 0.3
		$pt 127.0.0.1 -p $port -t ucp_am_bw -s "$size" -n 100 2>&1 | grep '^Final' | awk -v i=$i '{print "  pair " i ": " $0}' &
	done
	wait
}
for c in 1 2 4; do echo "== $c ucp_am_bw pairs at once, $size B"; pairs $c; done
echo "== luacoll bench put (one direction), host windows, 2 logical nodes"
bin/luacoll bench put -n 2 --nodes 2 -b "$size" -e "$size" --iters 20 2>&1 | grep -E "^ +[0-9]+ "
echo "== luacoll bench allgather (both directions), host windows, 2 logical nodes, $((2 * size)) B"
bin/luacoll bench allgather -n 2 --nodes 2 -b $((2 * size)) -e $((2 * size)) --iters 10 -w 2 2>&1 | grep -E "^ +[0-9]+ "
