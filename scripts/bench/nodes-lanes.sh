#!/usr/bin/env bash
# nodes-lanes.sh: large all-gathers across two logical nodes of a GPU
# machine beside NCCL, with 0, 2 and 4 network lanes (LUACOLL_NET_LANES);
# builds nothing. First the nodes-* correctness steps with the default.
set -uo pipefail
export NCCL_NVLS_ENABLE=0
g2="--gpus 0,0"
[ "$(nvidia-smi -L | wc -l)" -ge 2 ] && g2="--gpus 0,1"
rows() { grep -E "^ +[0-9]+ |rror"; }
OUT=${OUT:-/tmp/nodes-lanes} STEPS='^nodes-(suite|suite4|agp|agp4|agp-refused|plan|kill)$' bash scripts/gpu-suite.sh 2 2>&1 | grep -E "^== .*exit|FAIL|rror" | head -30
for r in 1 2; do
	for l in 0 2 4; do
		echo "== round $r: cuda, LUACOLL_NET_LANES=$l"
		LUACOLL_NET_LANES=$l timeout 200 bin/luacoll bench allgather -n 2 --nodes 2 --device cuda $g2 --vs nccl -b 512K -e 32M -f 4 --iters 10 -w 2 2>&1 | rows
	done
done
for l in 0 2 4; do
	echo "== cuda graph, LUACOLL_NET_LANES=$l"
	LUACOLL_NET_LANES=$l timeout 200 bin/luacoll bench allgather -n 2 --nodes 2 --device cuda $g2 --graph --vs nccl -b 512K -e 32M -f 4 --iters 10 -w 2 2>&1 | rows
	echo "== host windows, LUACOLL_NET_LANES=$l"
	LUACOLL_NET_LANES=$l timeout 200 bin/luacoll bench allgather -n 2 --nodes 2 -b 512K -e 32M -f 4 --iters 10 -w 2 2>&1 | rows
done
echo "== 4 ranks (2 a node), cuda, default lanes"
timeout 200 bin/luacoll bench allgather -n 4 --nodes 2 --device cuda --gpus 0,0,0,0 -b 1K -e 32M -f 8 --iters 10 -w 2 2>&1 | rows
