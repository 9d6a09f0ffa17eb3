#!/usr/bin/env bash
# ag-auto.sh: the persistent all-gather with the default settings (path auto)
# beside NCCL (plain and on symmetric registered buffers), eager and graph, 200 execs a
# run (20 let one host hiccup of 100 us add 5 us to a small size), medians of 3 rounds, every size from 1 KiB to
# 1 GiB; then --stress over the same sizes (every exec checked, rank 1 delayed
# at random). On the GPU machine, after `make build` here and with bin/ carried:
#   bash scripts/bench/ag-auto.sh N [GPUS]     N ranks; GPUS e.g. 0,0,1,1 (MPS)
# Rows go to $OUT/ag-auto-N-{eager,graph}.jsonl. Never uses NVLink multicast.
set -uo pipefail
export NCCL_NVLS_ENABLE=0
n="${1:-2}"
gpus="${2:-}"
out="${OUT:-./ag-auto-out}"
mkdir -p "$out"
ag="bin/luacoll bench allgather -n $n --device cuda --timeout 30s"
[ -n "$gpus" ] && ag="$ag --gpus $gpus"
status=0
for mode in eager graph; do
	g=""; [ $mode = graph ] && g="--graph"
	echo "== $mode"
	timeout -s QUIT -k 20 240 $ag $g --vs nccl,nccl-sym -b 1K -e 1G -f 4 --iters 200 -w 20 --rounds 3 \
		--json "$out/ag-auto-$n-$mode.jsonl" || status=1
done
echo "== stress"
timeout -s QUIT -k 20 240 $ag --stress -b 1K -e 256M -f 4 --iters 20 -w 2 || status=1
exit $status
