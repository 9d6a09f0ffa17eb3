#!/usr/bin/env bash
# Network peers measured beside ucx_perftest in one run: two "hosts" made of
# network namespaces joined by a veth pair (scripts/netns.sh), rank 0 in
# one and rank 1 in the other, UCX over TCP; then the same between logical
# nodes (--nodes 2) over loopback. Every figure of a pair is taken with the
# same CPUs, one after the other.
#
#   scripts/net-bench.sh                 # needs root, iproute2, util-linux, UCX and ucx_perftest
#
# Environment: LUACOLL (bin/luacoll), PERFTEST (ucx_perftest), SIZES (put
# sizes in bytes), ITERS_BW, ITERS_LAT, CPUS0 / CPUS1 (taskset lists of the
# two hosts; default: the two halves of this process's CPUs), OUT (where the
# raw outputs go).
set -euo pipefail
cd "$(dirname "$0")/.."
LUACOLL=$(realpath "${LUACOLL:-bin/luacoll}")
PERFTEST=$(command -v "${PERFTEST:-ucx_perftest}")
SIZES=${SIZES:-"65536 262144 1048576 4194304 16777216 67108864"}
ITERS_BW=${ITERS_BW:-100}
ITERS_LAT=${ITERS_LAT:-20000}
OUT=${OUT:-$(mktemp -d)}
NAME=${NAME:-lcb$$}
NAME=${NAME:0:8}
export UCX_TLS=${UCX_TLS:-tcp}
mkdir -p "$OUT"
if [ -z "${CPUS0:-}" ]; then
  read -r CPUS0 CPUS1 < <(scripts/cpu-halves.sh)
fi
echo "# net-bench: UCX_TLS=$UCX_TLS, host 0 on CPUs $CPUS0, host 1 on CPUs $CPUS1, raw outputs in $OUT"
echo "# $("$LUACOLL" version 2>/dev/null | head -1); UCX $(ucx_info -v 2>/dev/null | sed -n 's/# Version //p')"

scripts/netns.sh up "$NAME"
trap 'scripts/netns.sh down "$NAME"' EXIT
port=$((20000 + $$ % 10000))

# host K CMD...: CMD in host K, on its CPUs and its veth only.
host() {
  local k=$1 c
  shift
  if [ "$k" = 0 ]; then c=$CPUS0; else c=$CPUS1; fi
  scripts/netns.sh node "$NAME" "$k" env UCX_NET_DEVICES="$NAME-v$k" taskset -c "$c" "$@"
}

# perf TEST SIZE ITERS [ADDR]: ucx_perftest server in host 1, client in host 0;
# prints the client's Final line.
perf() {
  host 1 "$PERFTEST" -p "$port" >"$OUT/perf-server.txt" 2>&1 &
  local srv=$!
  sleep 1
  host 0 "$PERFTEST" 10.231.7.2 -p "$port" -t "$1" -s "$2" -n "$3" >"$OUT/perf-$1-$2.txt" 2>&1 || true
  wait "$srv" || true
  port=$((port + 1))
  grep '^Final' "$OUT/perf-$1-$2.txt" || echo "Final: failed"
}

# lc NAME ARGS...: luacoll ARGS as rank 0 in host 0 and rank 1 in host 1;
# rank 0's output goes to $OUT/NAME.txt.
lc() {
  local name=$1
  shift
  local env=(LUACOLL_SIZE=2 LUACOLL_ADDR=10.231.7.1:$port LUACOLL_JOB_SECRET=net-bench-$$ LUACOLL_LOCAL_RANK=0 LUACOLL_LOCAL_SIZE=1)
  host 1 env "${env[@]}" LUACOLL_RANK=1 "$LUACOLL" "$@" >"$OUT/$name-rank1.txt" 2>&1 &
  local r1=$!
  host 0 env "${env[@]}" LUACOLL_RANK=0 "$LUACOLL" "$@" >"$OUT/$name.txt" 2>&1 || echo "luacoll $name failed: see $OUT/$name.txt" >&2
  wait "$r1" || true
  port=$((port + 1))
}

# gbps FILE SIZE: put GB/s of SIZE in a luacoll --json file.
gbps() { grep "\"bytes\":$2," "$1" | sed 's/.*"gbps":\([0-9.e+-]*\).*/\1/' | head -1; }

echo
echo "## put bandwidth, rank 0 -> rank 1 across the hosts (GB/s = 1e9 bytes/s)"
echo "| size (B) | luacoll put | ucx_perftest ucp_put_bw | ratio | ucx_perftest ucp_am_bw | ratio |"
echo "|---:|---:|---:|---:|---:|---:|"
for s in $SIZES; do
  lc "put-$s" bench put -b "$s" -e "$s" --iters "$ITERS_BW" --cpu-bind none --json "$OUT/put-$s.json"
  ours=$(gbps "$OUT/put-$s.json" "$s")
  theirs=$(perf ucp_put_bw "$s" "$ITERS_BW" | awk '{printf "%.4f", $7 * 1048576 / 1e9}')
  am=$(perf ucp_am_bw "$s" "$ITERS_BW" | awk '{printf "%.4f", $7 * 1048576 / 1e9}')
  awk -v s="$s" -v a="$ours" -v b="$theirs" -v c="$am" 'BEGIN { printf "| %d | %.3f | %.3f | %.2f | %.3f | %.2f |\n", s, a, b, (b > 0 ? a / b : 0), c, (c > 0 ? a / c : 0) }'
done

echo
echo "## 8-byte put_signal -> wait one way across the hosts (median, us)"
lc pingpong bench pingpong --iters "$ITERS_LAT" --cpu-bind none --json "$OUT/pingpong.json"
ours=$(sed 's/.*"seconds":\([0-9.e+-]*\).*/\1/' "$OUT/pingpong.json" | awk '{printf "%.2f", $1 * 1e6}')
theirs=$(perf ucp_put_lat 8 "$ITERS_LAT" | awk '{printf "%.2f", $3}')
echo "| luacoll put_signal -> wait | ucx_perftest ucp_put_lat (50%ile) | ratio |"
echo "|---:|---:|---:|"
awk -v a="$ours" -v b="$theirs" 'BEGIN { printf "| %.2f | %.2f | %.2f |\n", a, b, (b > 0 ? a / b : 0) }'
grep "round trip" "$OUT/pingpong.txt" || true

echo
echo "## the same between logical nodes of this machine (--nodes 2, loopback)"
"$LUACOLL" bench put -n 2 --nodes 2 -b 1M -e 64M --iters "$ITERS_BW" --json "$OUT/nodes-put.json" >"$OUT/nodes-put.txt" 2>&1 || true
"$LUACOLL" bench pingpong -n 2 --nodes 2 --iters "$ITERS_LAT" --json "$OUT/nodes-pingpong.json" >"$OUT/nodes-pingpong.txt" 2>&1 || true
cat "$OUT/nodes-put.txt" "$OUT/nodes-pingpong.txt"
