#!/usr/bin/env bash
# nodes-graph.sh: the all-gather in graph mode across two logical nodes of
# a GPU machine (1 GPU under MPS), beside NCCL's graph in the same run,
# after the nodes-* steps that run graph mode; builds nothing.
#   bash scripts/bench/nodes-graph.sh
set -uo pipefail
export NCCL_NVLS_ENABLE=0
g2="--gpus 0,0"
[ "$(nvidia-smi -L | wc -l)" -ge 2 ] && g2="--gpus 0,1"
OUT=${OUT:-/tmp/nodes-graph} STEPS='^nodes-(agp|agp4|agp-refused|kill)$' bash scripts/gpu-suite.sh 2 2>&1 | grep -E "^== .*exit|FAIL|rror|graph" | head -30
ag="bin/luacoll bench allgather -n 2 --nodes 2 --device cuda $g2 --vs nccl"
for r in 1 2; do
	echo "== graph round $r"
	timeout 200 $ag --graph -b 1K -e 64K -f 8 --iters 50 -w 5 2>&1 | grep -E "^ +[0-9]+ |rror|graph_nodes"
done
echo "== graph large"
timeout 200 $ag --graph -b 512K -e 32M -f 4 --iters 10 -w 2 2>&1 | grep -E "^ +[0-9]+ |rror"
