#!/usr/bin/env bash
# The persistent all-gather across two "hosts" beside Open MPI's
# MPI_Allgather, in the same processes and the same run: network namespaces
# joined by a veth pair (scripts/netns.sh), PER ranks in each, launched by
# mpirun (its rsh agent enters the namespace), luacoll's network peers on
# UCX over TCP, shared memory inside a host. Open MPI (its UCX pml) gets
# UCX_TLS=tcp,sm,self: TCP between the hosts, shared memory inside one.
#
#   scripts/nodes-bench.sh            # needs root, iproute2, util-linux, UCX, Open MPI
#
# Environment: LUACOLL (bin/luacoll), PER ("2 4": ranks per host, one job
# each), ALGOS ("direct ring hier"), SMALL ("-b 1K -e 64K -f 4 --iters 200
# -w 20") and LARGE ("-b 256K -e 64M -f 4 --iters 5 -w 2": the bench's
# size flags), CPUS0 / CPUS1 (taskset lists of the two hosts; default: the
# two halves of this process's CPUs), OUT (raw outputs).
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$(pwd)
LUACOLL=$(realpath "${LUACOLL:-bin/luacoll}")
PER=${PER:-"2 4"}
ALGOS=${ALGOS:-"direct ring hier"}
SMALL=${SMALL:-"-b 1K -e 64K -f 4 --iters 200 -w 20"}
LARGE=${LARGE:-"-b 256K -e 64M -f 4 --iters 5 -w 2"}
OUT=${OUT:-$(mktemp -d)}
NAME=${NAME:-lcn$$}
NAME=${NAME:0:8}
command -v mpirun >/dev/null || { echo "nodes-bench.sh: mpirun not found (Debian: apt-get install openmpi-bin)" >&2; exit 2; }
mkdir -p "$OUT"
if [ -z "${CPUS0:-}" ]; then
  read -r CPUS0 CPUS1 < <(scripts/cpu-halves.sh)
fi

# The rsh agent: "NAME-K CMD..." runs CMD in host K, on its CPUs, with UCX
# on that host's veth.
agent=$OUT/agent.sh
cat >"$agent" <<EOF
#!/bin/sh
host=\$1; shift
k=\${host##*-}
if [ "\$k" = 0 ]; then c=$CPUS0; else c=$CPUS1; fi
exec $REPO/scripts/netns.sh node $NAME "\$k" taskset -c "\$c" sh -c "export UCX_NET_DEVICES=$NAME-v\$k,lo; \$*"
EOF
chmod +x "$agent"

echo "# nodes-bench: 2 hosts (network namespaces $NAME-0/1 over a veth pair), host 0 on CPUs $CPUS0, host 1 on CPUs $CPUS1, raw outputs in $OUT"
echo "# $("$LUACOLL" version 2>/dev/null | head -1); $(mpirun --version 2>/dev/null | head -1); UCX $(ucx_info -v 2>/dev/null | sed -n 's/# Version //p')"

scripts/netns.sh up "$NAME"
trap 'scripts/netns.sh down "$NAME"' EXIT
port=$((20000 + $$ % 10000))

# job PER OUTFILE ARGS...: luacoll ARGS on 2 x PER ranks, launched by mpirun
# from host 0.
job() {
  local per=$1 out=$2
  shift 2
  "$agent" "$NAME-0" OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 UCX_TLS=tcp,sm,self \
    mpirun --host "$NAME-0:$per,$NAME-1:$per" -np $((2 * per)) --bind-to none \
    --mca plm_rsh_agent "$agent" --mca oob_tcp_if_include 10.231.7.0/24 --mca btl_tcp_if_include 10.231.7.0/24 \
    -x UCX_TLS -x LUACOLL_ADDR=10.231.7.1:$port "$LUACOLL" "$@" >"$out" 2>&1 || echo "job failed: see $out" >&2
  port=$((port + 1))
  grep -v '^# \(CPUs\|baseline: not\)' "$out" || true
}

for per in $PER; do
  for algo in $ALGOS; do
    echo
    echo "## 2 hosts x $per ranks, --algo $algo"
    # shellcheck disable=SC2086
    job "$per" "$OUT/ag-$per-$algo-small.txt" bench allgather --algo "$algo" --vs mpi $SMALL
    # shellcheck disable=SC2086
    job "$per" "$OUT/ag-$per-$algo-large.txt" bench allgather --algo "$algo" --vs mpi $LARGE | grep -v '^#'
  done
done
