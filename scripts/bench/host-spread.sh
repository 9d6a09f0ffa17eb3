#!/usr/bin/env bash
# host-spread.sh: issue 22's spread figure on the host backend: SETS sets
# of five 20-exec runs of a 1 KiB all-gather, luacoll and Open MPI's
# MPI_Allgather in the same processes and runs (--vs mpi under mpirun);
# each line gives both sets of five times (us) and their max / min, and
# the machine's own CPU 0 <-> CPU 1 round trip (cpu-pingpong.c, when gcc
# is here) before and after the set: when that moves, so does everything;
# and "C": five runs of 20 exchanges of 512 bytes between two C processes
# on CPUs 0 and 1, each after both slept 20 ms, and their max / min (what
# the machine gives a plain program run the way these runs are).
# With ALONE=1 the runs are luacoll's own (its launcher, no MPI loaded:
# Open MPI's helper threads and mpirun's take the CPUs now and then).
#   bash scripts/bench/host-spread.sh [RANKS] [SETS]
set -uo pipefail
n="${1:-2}"
sets="${2:-5}"
port=$((29000 + RANDOM % 1000))
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
probe=""
if gcc -O2 -o /tmp/cpu-pingpong "$(dirname "$0")/cpu-pingpong.c" 2>/dev/null; then
	probe=/tmp/cpu-pingpong
fi
rtt() { [ -n "$probe" ] && "$probe" 20000 | awk '{print $4}'; }
floor() { [ -n "$probe" ] && "$probe" 20 512 5; }
uptime
for s in $(seq "$sets"); do
	before=$(rtt)
	lc="" mpi=""
	for i in 1 2 3 4 5; do
		if [ -n "${ALONE:-}" ]; then
			row=$(timeout 60 bin/luacoll bench allgather -n "$n" -b 1K -e 1K --iters 20 -w 5 2>&1 | grep -E '^ +1024 ')
		else
			row=$(timeout 60 mpirun --oversubscribe ${MPIRUN_ARGS:-} -np "$n" -x LUACOLL_ADDR=127.0.0.1:$((port + s * 10 + i)) bin/luacoll bench allgather \
				--vs mpi -b 1K -e 1K --iters 20 -w 5 2>&1 | grep -E '^ +1024 ')
		fi
		lc="$lc $(echo "$row" | awk '{print $4}')"
		mpi="$mpi $(echo "$row" | awk '{print $8}')"
	done
	spread() { echo "$1" | awk '{mn=1e9;mx=0;for(i=1;i<=NF;i++){if($i<mn)mn=$i;if($i>mx)mx=$i}; printf "%s (%.2f)", $0, mx/mn}'; }
	what="luacoll$(spread "$lc") | MPI$(spread "$mpi")"
	[ -n "${ALONE:-}" ] && what="luacoll alone$(spread "$lc")"
	echo "set $s, $n ranks: $what${probe:+ | round trip $before -> $(rtt) us | C $(floor)}"
done
