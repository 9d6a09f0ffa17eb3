#!/usr/bin/env bash
# nodes-ab.sh: the all-gather across two logical nodes of a GPU machine
# (1 GPU under MPS, UCX over TCP), beside NCCL, with and without staging
# (LUACOLL_AGP_NET_EAGER_MAX); builds nothing. First the nodes-* correctness
# steps.
#   bash scripts/bench/nodes-ab.sh
set -uo pipefail
export NCCL_NVLS_ENABLE=0
g2="--gpus 0,0"
[ "$(nvidia-smi -L | wc -l)" -ge 2 ] && g2="--gpus 0,1"
ag="bin/luacoll bench allgather -n 2 --nodes 2 --device cuda $g2 --vs nccl"
rows() { grep -E "^ +[0-9]+ |rror"; }
OUT=${OUT:-/tmp/nodes-ab} STEPS='^nodes-(suite|suite4|agp|agp4|agp-refused|plan|kill)$' bash scripts/gpu-suite.sh 2 2>&1 | grep -E "^== .*exit|FAIL|rror" | head -30
for r in 1 2; do
	echo "== round $r: eager"
	timeout 200 $ag -b 1K -e 64K -f 8 --iters 50 -w 5 2>&1 | rows
	for em in "" 0; do
		echo "== round $r: graph, LUACOLL_AGP_NET_EAGER_MAX=${em:-default}"
		LUACOLL_AGP_NET_EAGER_MAX=$em timeout 200 $ag --graph -b 1K -e 64K -f 8 --iters 50 -w 5 2>&1 | rows
	done
done
echo "== large, eager"
timeout 200 $ag -b 512K -e 32M -f 4 --iters 10 -w 2 2>&1 | rows
echo "== large, graph"
timeout 200 $ag --graph -b 512K -e 32M -f 4 --iters 10 -w 2 2>&1 | rows
