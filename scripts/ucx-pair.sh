#!/usr/bin/env bash
# ucx-pair.sh TEST SIZE ITERS [more ucx_perftest flags]: ucx_perftest
# between two processes of this machine over TCP on loopback (the ceiling
# for luacoll's logical nodes, --nodes); prints the client's Final line.
# PERFTEST names the binary (default ucx_perftest). Every process is
# bounded by a timeout, so a server left without a client cannot hang.
set -u
perftest=${PERFTEST:-ucx_perftest}
t=$1 s=$2 n=$3
shift 3
port=$((20000 + RANDOM % 20000))
UCX_TLS=tcp timeout 60 "$perftest" -p "$port" >/dev/null 2>&1 &
srv=$!
sleep 1
UCX_TLS=tcp timeout 60 "$perftest" 127.0.0.1 -p "$port" -t "$t" -s "$s" -n "$n" "$@" 2>&1 | grep '^Final' | sed "s/^/$t $s $*: /"
wait "$srv"
