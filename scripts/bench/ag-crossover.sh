#!/usr/bin/env bash
# ag-crossover.sh: where the all-gather's protocols take over from one
# another. Each protocol is forced in turn (LUACOLL_AGP_PROTOCOL) and swept
# from 1 KiB to 512 MiB (x2; lines to 1 MiB, staged to 64 MiB), eager,
# medians of 3 rounds; NCCL runs beside the default. Prints one table: time
# per exec (us) per size.
# On the GPU machine, after `make build` here and with bin/ carried:
#   bash scripts/bench/ag-crossover.sh N [GPUS] [MAXSIZE]
set -uo pipefail
export NCCL_NVLS_ENABLE=0
n="${1:-2}"
gpus="${2:-}"
e="${3:-512M}"
out="${OUT:-./ag-crossover-out}"
mkdir -p "$out"
ag="bin/luacoll bench allgather -n $n --device cuda --timeout 30s -b 1K -e $e -f 2 --iters 20 -w 5 --rounds 3"
[ -n "$gpus" ] && ag="$ag --gpus $gpus"
run() { # name env... -- extra flags
	local name="$1"; shift
	local envs=()
	while [ "$1" != "--" ]; do envs+=("$1"); shift; done; shift
	env "${envs[@]}" timeout -s QUIT -k 20 200 $ag "$@" --json "$out/x-$n-$name.jsonl" >"$out/x-$n-$name.log" 2>&1 ||
		{ echo "== $name failed"; tail -5 "$out/x-$n-$name.log"; }
}
run auto X=1 -- --vs nccl
run lines LUACOLL_AGP_PROTOCOL=lines -- -e 1M
run staged LUACOLL_AGP_PROTOCOL=staged -- -e 64M
run kernel LUACOLL_AGP_PROTOCOL=kernel --
run ce+kernel LUACOLL_AGP_PROTOCOL=ce+kernel --
run ce X=1 -- --path ce
[ -n "${AGAIN:-}" ] && run auto2 X=1 -- --vs nccl
python3 - "$out" "$n" <<'PY'
import json, sys, glob, os
out, n = sys.argv[1], sys.argv[2]
names = ["auto", "lines", "staged", "kernel", "ce+kernel", "ce", "auto2"]
t = {}
for nm in names:
    f = os.path.join(out, f"x-{n}-{nm}.jsonl")
    if not os.path.exists(f): continue
    for l in open(f):
        d = json.loads(l)
        if d.get("kind") != "row": continue
        t.setdefault(d["size"], {})[nm] = d["time_s"] * 1e6
        if "nccl_time_s" in d: t[d["size"]]["nccl"] = d["nccl_time_s"] * 1e6
cols = names + ["nccl"]
print("%12s" % "size" + "".join("%10s" % c for c in cols))
for s in sorted(t):
    print("%12d" % s + "".join("%10.2f" % t[s][c] if c in t[s] else "%10s" % "-" for c in cols))
PY
