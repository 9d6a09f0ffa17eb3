#!/usr/bin/env bash
# lent-many.sh: what a machine of 4 or 8 GPUs (lent only at times) is for,
# in one call of about seven minutes: the suite's checks at N ranks, the
# all-gather's defaults beside NCCL (plain and symmetric), the reductions'
# goal sweeps (f32), the all-gather across two logical nodes (N/2 GPUs a
# node, and one GPU a node), the shipped cost model against N-rank plans,
# device-mode plans of 64 KiB steps on one block against the default
# spread, small plans with and without lines, and the step mixes of 16
# KiB plans. On the GPU machine,
# after `make build gpu-bins` here and with bin/ carried:
#   bash scripts/bench/lent-many.sh [N]      N ranks (default: every GPU)
# Logs and JSON rows go to $OUT (or ./lent-many-out), then into
# $OUT/all.tar (the files themselves are removed, so that one file comes
# back). Builds nothing; never uses NVLink multicast (NCCL_NVLS_ENABLE=0).
# Exits non-zero when a step fails.
set -uo pipefail
export NCCL_NVLS_ENABLE=0
n="${1:-$(nvidia-smi -L | grep -c '^GPU')}"
top="${OUT:-./lent-many-out}"
out="$top/lent"
mkdir -p "$out"
bin=bin/luacoll
status=0
t0=$(date +%s)
step() { # step NAME CMD...: one step, its output to $out/NAME.log
	local name="$1"; shift
	echo "== $name ($(( $(date +%s) - t0 )) s)"
	"$@" >"$out/$name.log" 2>&1
	local rc=$?
	grep -E '^ +[0-9]|passed|FAIL|rror' "$out/$name.log" | tail -n 40
	[ $rc -eq 0 ] || { echo "== $name: exit $rc"; status=1; }
}
nvidia-smi -L >"$out/gpus.txt"
nvidia-smi topo -m >>"$out/gpus.txt"
step suite env OUT="$out/suite" \
	STEPS='^(info|kernels-tests|gpu-tests|trace-.*|suite.*|agp.*|symmetric.*|plan.*|reduce|tour|fail|kill.*)$' \
	timeout -s QUIT 330 bash scripts/gpu-suite.sh "$n"
step ag-auto env OUT="$out" timeout -s QUIT 300 bash scripts/bench/ag-auto.sh "$n"
step reductions env OUT="$out" timeout -s QUIT 300 bash scripts/bench/reductions.sh "$n" "" f32
half=$((n / 2))
for g in "" --graph; do
	step "nodes-${half}x2$g" timeout -s QUIT -k 20 150 $bin bench allgather -n "$n" --nodes 2 --device cuda --timeout 30s $g \
		--vs nccl -b 1K -e 64M -f 8 --iters 20 -w 5 --rounds 3 --json "$out/nodes-${half}x2$g.jsonl"
	step "nodes-1x2$g" timeout -s QUIT -k 20 150 $bin bench allgather -n 2 --nodes 2 --gpus 0,1 --device cuda --timeout 30s $g \
		--vs nccl -b 1K -e 64M -f 8 --iters 20 -w 5 --rounds 3 --json "$out/nodes-1x2$g.jsonl"
done
for a in ring direct hier; do
	step "cost-$a" timeout -s QUIT -k 20 150 $bin bench allgather -n "$n" --device cuda --timeout 30s --algo "lua:$a" --plan \
		--plan-mode auto -b 1K -e 256M -f 4 --rounds 3 --iters 20 -w 5 --json "$out/cost-$a-$n.jsonl"
done
# Device-mode plans whose widest step is 64 KiB: on one block (served by
# the waiting kernel) against the default spread (launched), in turn.
for b in default 1 default 1; do
	e=""
	[ $b = 1 ] && e=LUACOLL_PLAN_BLOCKS=1
	step "blocks-$b" env X=1 $e bash -c "$bin bench allreduce -n $n --device cuda --timeout 30s --algo lua:auto --plan --vs nccl -b 32K -e 256K -f 2 --iters 200 -w 20 --rounds 3 &&
		$bin bench allgather -n $n --device cuda --timeout 30s --algo lua:direct --plan -b $((64 * n))K -e $((256 * n))K -f 2 --iters 200 -w 20 --rounds 3"
done
# Lines at N ranks: the step mixes of small plans, and 1-2 KiB all-gather
# and all-reduce plans, with put_signals of up to 1 KiB in lines (the
# default above 2 ranks) and with none.
for l in default 0; do
	e=""
	[ $l = 0 ] && e=LUACOLL_PLAN_LINES=0
	step "lines-$l" env X=1 $e bash -c "$bin run -n $n --device cuda bench/plan_steps.lua 2000 &&
		$bin bench allgather -n $n --device cuda --timeout 30s --algo lua:direct --plan -b $n""K -e $((2 * n))K -f 2 --iters 200 -w 20 --rounds 3 &&
		$bin bench allreduce -n $n --device cuda --timeout 30s --algo lua:auto --plan --vs nccl -b 1K -e 2K -f 2 --iters 200 -w 20 --rounds 3"
done
# The step mixes at 16 KiB: where a small reduction's replay goes at N
# ranks (its exchange against its fold on one block).
step steps-16k $bin run -n "$n" --device cuda bench/plan_steps.lua 2000 device 16384
echo "== done ($(( $(date +%s) - t0 )) s)"
(cd "$top" && tar cf all.tar lent && rm -rf lent)
exit $status
