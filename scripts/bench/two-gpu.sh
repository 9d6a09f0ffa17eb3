#!/usr/bin/env bash
# two-gpu.sh: what only two GPUs show, in one call of the device tool on
# a 2-GPU machine: the nodes-* steps with one GPU a logical node, the
# all-gather across the nodes beside NCCL (eager and graph), the device
# hop between the GPUs and the plans' modes beside the built-in. Builds
# nothing.
set -uo pipefail
export NCCL_NVLS_ENABLE=0
nvidia-smi -L
OUT=${OUT:-/tmp/two-gpu} STEPS='^(nodes-suite|nodes-agp|nodes-agp4|nodes-agp-refused|nodes-kill|bench-pingpong-auto|bench-ag-plan-modes|bench-ag-plan-large)$' \
	bash scripts/gpu-suite.sh 2 > /tmp/two-gpu-suite.txt 2>&1
grep -E "^== .*exit" /tmp/two-gpu-suite.txt | awk '{print $2, $4}' | tr '\n' ' '; echo
grep -E "ping-pong|raw flag" /tmp/two-gpu-suite.txt
grep -E "^# algo|^ +[0-9]+ " /tmp/two-gpu-suite.txt | grep -A3 "plan-mode\|plan, mode" | head -40
ag="bin/luacoll bench allgather -n 2 --nodes 2 --device cuda --gpus 0,1 --vs nccl"
for m in "" "--graph"; do
	echo "== across nodes, one GPU each '$m'"
	timeout 250 $ag $m -b 1K -e 64M -f 4 --iters 20 -w 3 --rounds 3 2>&1 | grep -E "^ +[0-9]+ |rror"
done
