#!/usr/bin/env bash
# host-spread.sh: issue 22's spread figure on the host backend: SETS sets
# of five 20-exec runs of a 1 KiB all-gather, luacoll and Open MPI's
# MPI_Allgather in the same processes and runs (--vs mpi under mpirun);
# each line gives both sets of five times (us) and their max / min.
#   bash scripts/bench/host-spread.sh [RANKS] [SETS]
set -uo pipefail
n="${1:-2}"
sets="${2:-5}"
port=$((29000 + RANDOM % 1000))
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
uptime
for s in $(seq "$sets"); do
	lc="" mpi=""
	for i in 1 2 3 4 5; do
		row=$(timeout 60 mpirun --oversubscribe ${MPIRUN_ARGS:-} -np "$n" -x LUACOLL_ADDR=127.0.0.1:$((port + s * 10 + i)) bin/luacoll bench allgather \
			--vs mpi -b 1K -e 1K --iters 20 -w 5 2>&1 | grep -E '^ +1024 ')
		lc="$lc $(echo "$row" | awk '{print $4}')"
		mpi="$mpi $(echo "$row" | awk '{print $8}')"
	done
	spread() { echo "$1" | awk '{mn=1e9;mx=0;for(i=1;i<=NF;i++){if($i<mn)mn=$i;if($i>mx)mx=$i}; printf "%s (%.2f)", $0, mx/mn}'; }
	echo "set $s, $n ranks: luacoll$(spread "$lc") | MPI$(spread "$mpi")"
done
