#!/usr/bin/env bash
# nodes-stripes.sh: mid-size all-gathers across two logical nodes beside
# NCCL, A/B of the smallest put cut into stripes (LUACOLL_NET_STRIPE_MIN)
# and of how long an idle lane spins (LUACOLL_NET_LANE_SPIN_US); builds
# nothing. MINS and SPINS list the values (bytes, us).
set -uo pipefail
export NCCL_NVLS_ENABLE=0
g2="--gpus 0,0"
[ "$(nvidia-smi -L | wc -l)" -ge 2 ] && g2="--gpus 0,1"
rows() { grep -E "^ +[0-9]+ |rror"; }
ag="bin/luacoll bench allgather -n 2 --nodes 2 --device cuda $g2 --vs nccl"
for r in 1 2; do
	for m in ${MINS:-1048576 262144}; do
		for s in ${SPINS:-200 2000}; do
			echo "== round $r: eager, LUACOLL_NET_STRIPE_MIN=$m LUACOLL_NET_LANE_SPIN_US=$s"
			LUACOLL_NET_STRIPE_MIN=$m LUACOLL_NET_LANE_SPIN_US=$s timeout 200 $ag -b 64K -e 8M -f 2 --iters 20 -w 3 2>&1 | rows
		done
	done
done
if [ -n "${GRAPH:-}" ]; then
	echo "== graph, defaults"
	timeout 200 $ag --graph -b 1K -e 32M -f 4 --iters 20 -w 3 2>&1 | rows
	echo "== eager, defaults"
	timeout 200 $ag -b 1K -e 32M -f 4 --iters 20 -w 3 2>&1 | rows
fi
