#!/usr/bin/env bash
# reductions.sh: the reductions' goal sweeps (docs/results/reductions.md)
# beside NCCL in the same processes: plans of lua:auto, all-reduce and
# reduce-scatter, 1 KiB - 64 KiB eager (200 calls a run, 20 warm-up) and
# 64 MiB - 1 GiB eager and in graph mode, medians of 3 rounds, for each
# TYPE (default f32 and bf16); then tests/reduce.lua. On the GPU machine,
# after `make build` here and with bin/ carried:
#   bash scripts/bench/reductions.sh N [GPUS] [TYPES]    N ranks; GPUS e.g. 0,0,1,1 (MPS); TYPES e.g. f32,bf16
# Rows go to $OUT/reductions-N-{small,large,graph}-COLL-TYPE.jsonl. Never
# uses NVLink multicast. Exits non-zero when a run fails or a row holds a
# wrong element.
set -uo pipefail
export NCCL_NVLS_ENABLE=0
n="${1:-2}"
gpus="${2:-}"
types="${3:-f32,bf16}"
out="${OUT:-./reductions-out}"
mkdir -p "$out"
g=""
[ -n "$gpus" ] && g="--gpus $gpus"
base="bin/luacoll bench COLL -n $n $g --device cuda --timeout 30s --algo lua:auto --plan --vs nccl"
status=0
run() { # run NAME COLL TYPE ARGS...: one sweep, its rows to $out
	local name=$1 coll=$2 t=$3
	shift 3
	echo "== $coll $t $name"
	timeout -s QUIT -k 20 240 ${base/COLL/$coll} --type "$t" "$@" --json "$out/reductions-$n-$name-$coll-$t.jsonl" ||
		status=1
}
for t in ${types//,/ }; do
	for c in allreduce reduce_scatter; do
		run small "$c" "$t" -b 1K -e 64K -f 4 --iters 200 -w 20 --rounds 3
		run large "$c" "$t" -b 64M -e 1G -f 4 --iters 20 -w 5 --rounds 3
		run graph "$c" "$t" --plan-mode graph --graph -b 64M -e 1G -f 4 --iters 20 -w 5 --rounds 3
	done
done
echo "== tests/reduce.lua"
timeout -s QUIT -k 20 120 bin/luacoll run -n "$n" $g --device cuda tests/reduce.lua device || status=1
# A row with a wrong element (luacoll's or a baseline's) fails the sweep.
if grep -l '"wrong":[1-9]' "$out"/reductions-"$n"-*.jsonl 2>/dev/null; then
	echo "reductions.sh: wrong results in the files above" >&2
	status=1
fi
exit $status
