#!/usr/bin/env bash
# ag-check.sh: the all-gather checks that go beside ag-auto.sh on the GPU
# machine (bin/ carried, nothing built there):
#  - 4 ranks on 2 GPUs under MPS: tests/agp.lua on paths auto and sm, and a
#    --stress sweep (functional only: two ranks share each GPU);
#  - the 1 GiB all-gather beside `bench put`'s copy-engine ceiling, both
#    directions busy, in the same call;
#  - two logical nodes, one GPU each (--nodes 2, UCX over TCP): eager and
#    graph beside NCCL.
#   bash scripts/bench/ag-check.sh [STEPS-REGEX]
set -uo pipefail
export NCCL_NVLS_ENABLE=0
steps="${1:-.}"
bin=bin/luacoll
status=0
step() {
	local name="$1"; shift
	echo "$name" | grep -Eq "$steps" || return 0
	echo "== $name: $*"
	"$@" 2>&1 | grep -v "^\[[0-9]*\] \|^# \(GPUs\|CPUs\|luacoll bench\)" | tail -30 || true
	[ "${PIPESTATUS[0]}" -eq 0 ] || status=1
}
step agp4-auto timeout -s QUIT -k 20 200 $bin run -n 4 --gpus 0,0,1,1 --device cuda tests/agp.lua 100
step agp4-sm timeout -s QUIT -k 20 200 $bin run -n 4 --gpus 0,0,1,1 --device cuda tests/agp.lua 100 sm
step stress4 timeout -s QUIT -k 20 200 $bin bench allgather -n 4 --gpus 0,0,1,1 --device cuda --timeout 30s --stress -b 1K -e 64M -f 4 --iters 10 -w 2
step ceiling timeout -s QUIT -k 20 200 $bin bench put -n 2 --device cuda -b 512M -e 512M --path ce --bidir --iters 9
step ag-1g timeout -s QUIT -k 20 200 $bin bench allgather -n 2 --device cuda -b 1G -e 1G --iters 20 -w 5 --rounds 3
step nodes-eager timeout -s QUIT -k 20 200 $bin bench allgather -n 2 --nodes 2 --gpus 0,1 --device cuda --timeout 30s --vs nccl -b 1K -e 64M -f 8 --iters 20 -w 5 --rounds 3
step nodes-graph timeout -s QUIT -k 20 200 $bin bench allgather -n 2 --nodes 2 --gpus 0,1 --device cuda --timeout 30s --graph --vs nccl -b 1K -e 64M -f 8 --iters 20 -w 5 --rounds 3
exit $status
