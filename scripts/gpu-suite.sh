#!/usr/bin/env bash
# gpu-suite.sh: the luacoll GPU checks, on a machine with GPUs and no Go.
# Build first (make build gpu-bins), carry bin/, then run:
#   bash scripts/gpu-suite.sh [N]      N ranks (default 2)
# STEPS=REGEX runs only the steps whose name matches (grep -E), e.g.
# STEPS='^(kernels-tests|agp.*|bench-ag.*)$'; a failing kernels-tests step
# stops the run (nothing else can work without the kernels).
# Logs go to $OUT (or ./gpu-suite-out). Builds nothing. Never uses NVLink
# multicast (NCCL_NVLS_ENABLE=0).
set -uo pipefail
export NCCL_NVLS_ENABLE=0
n="${1:-2}"
out="${OUT:-./gpu-suite-out}"
mkdir -p "$out"
bin=bin/luacoll
status=0
steps="${STEPS:-.}"
step() {
	local name="$1"; shift
	echo "$name" | grep -Eq "$steps" || return 0
	echo "== $name: $*"
	local t0=$(date +%s%N)
	"$@" >"$out/$name.log" 2>&1
	local rc=$?
	tail -n 40 "$out/$name.log"
	echo "== $name: exit $rc, $(( ($(date +%s%N) - t0) / 1000000 )) ms"
	[ $rc -eq 0 ] || status=1
	if [ $rc -ne 0 ] && [ "$name" = kernels-tests ]; then
		echo "== the kernels fail: stopping"
		exit 1
	fi
}
leaks() {
	echo "== leftovers after $1: /dev/shm: $(ls /dev/shm | grep -c '^luacoll-' || true) segments;" \
		"GPU processes: $(nvidia-smi --query-compute-apps=pid --format=csv,noheader | wc -l)"
}
step info $bin info
for t in kernels cuda gpu; do
	[ -x bin/$t.test ] && step $t-tests timeout 300 bin/$t.test -test.count=1
done
# --trace on CUDA: timing events behind every operation, anchored to the host clock.
[ -x bin/transport.test ] && step trace-stamps timeout 120 bin/transport.test -test.run 'Stamps' -test.v
step trace-suite timeout -s QUIT -k 20 300 $bin run -n "$n" --device cuda --trace "$out/trace-suite.json" tests/suite.lua
step trace-agp timeout -s QUIT -k 20 300 $bin run -n "$n" --device cuda --trace "$out/trace-agp.json" tests/agp.lua 100
[ -x bin/trace.test ] && step trace-check env LUACOLL_CHECK_TRACES="$out/trace-suite.json $out/trace-agp.json" \
	bin/trace.test -test.run TestCheckTraceFiles -test.v
step suite timeout -s QUIT -k 20 300 $bin run -n "$n" --device cuda tests/suite.lua
leaks suite
# windows shared as VMM memory passed as file descriptors (--ipc vmm)
step suite-vmm timeout -s QUIT -k 20 300 $bin run -n "$n" --device cuda --ipc vmm tests/suite.lua
step agp-vmm timeout -s QUIT -k 20 300 $bin run -n "$n" --device cuda --ipc vmm tests/agp.lua 100
leaks suite-vmm
# symmetric windows (the default wherever every rank can map one), side by
# side with asymmetric ones; with --ipc legacy, auto falls back and says why
step symmetric timeout -s QUIT -k 20 300 $bin run -n "$n" --device cuda tests/symmetric.lua
step symmetric-fallback timeout -s QUIT -k 20 300 $bin run -n "$n" --device cuda --ipc legacy tests/symmetric.lua fallback
step suite-asym timeout -s QUIT -k 20 300 $bin run -n "$n" --device cuda --symmetric off tests/suite.lua
leaks symmetric
step agp timeout -s QUIT -k 20 300 $bin run -n "$n" --device cuda tests/agp.lua 1000
step agp-sm timeout -s QUIT -k 20 300 $bin run -n "$n" --device cuda tests/agp.lua 1000 sm
# path sm with the copy-engine puts from 1 MiB per rank, so that the
# back-to-back execs of tests/agp.lua share their done+ready launches there too
step agp-sm-ce timeout -s QUIT -k 20 300 env LUACOLL_AGP_PROTOCOL=ce+kernel $bin run -n "$n" --device cuda tests/agp.lua 100 sm
# every protocol forced in turn over the suite's sizes
step agp-protocols timeout -s QUIT -k 20 300 bash -c "for p in lines staged kernel; do LUACOLL_AGP_PROTOCOL=\$p $bin run -n $n --device cuda tests/agp.lua 100 || exit 1; done"
step agp-mismatch timeout -s QUIT -k 20 120 bash -c "$bin run -n $n --device cuda tests/agp_mismatch.lua ce && $bin run -n $n --device cuda tests/agp_mismatch.lua sm"
step agp-refused timeout -s QUIT -k 20 120 bash -c "$bin run -n $n --device cuda tests/agp_refused.lua ce && $bin run -n $n --device cuda tests/agp_refused.lua sm"
leaks agp
# plans (lc.plan) of lib/allgather.lua, every replay checked: mode "auto"
# (device here: no copy above 256 KiB), "device", "stream" and "graph"
# forced; a plan whose wait nobody satisfies fails with its line, in each
step plan timeout -s QUIT -k 20 300 $bin run -n "$n" --device cuda tests/plan.lua 1000
step plan-device-sm timeout -s QUIT -k 20 300 $bin run -n "$n" --device cuda tests/plan.lua 100 sm device
step plan-stream timeout -s QUIT -k 20 300 $bin run -n "$n" --device cuda tests/plan.lua 300 - stream
step plan-stream-sm timeout -s QUIT -k 20 300 $bin run -n "$n" --device cuda tests/plan.lua 100 sm stream
step plan-graph timeout -s QUIT -k 20 300 $bin run -n "$n" --device cuda tests/plan.lua 300 - graph
step plan-graph-sm timeout -s QUIT -k 20 300 $bin run -n "$n" --device cuda tests/plan.lua 100 sm graph
step plan-fail timeout -s QUIT -k 20 120 bash -c "for m in device stream graph; do $bin run -n $n --device cuda tests/plan_fail.lua \$m || exit 1; done"
# a billion replays stop at their first failed wait, and at Ctrl-C (exit
# 130 within 5 s of the signal), in each mode
step plan-stop timeout -s QUIT -k 20 120 bash -c "for m in device stream graph; do $bin run -n $n --device cuda tests/plan_stop.lua \$m || exit 1; done"
step plan-interrupt timeout -s QUIT -k 20 120 bash -c "for m in device stream graph; do $bin run -n $n --device cuda tests/plan_stop.lua \$m forever & p=\$!; sleep 5; s=\$SECONDS; kill -INT \$p; wait \$p; c=\$?; echo mode \$m: exit \$c after \$((SECONDS - s)) s; [ \$c = 130 ] && [ \$((SECONDS - s)) -le 5 ] || exit 1; done"
leaks plan
# reductions: the schedules of lib/reduce_scatter.lua and lib/all_reduce.lua,
# eager and as plans, in each plan mode (device: the interpreter's reduce
# step, reduce_from reading the peer over NVLink); every result checked
step reduce timeout -s QUIT -k 20 300 bash -c "for m in auto stream graph device; do $bin run -n $n --device cuda tests/reduce.lua \$m || exit 1; done"
# small all-reduces and reduce-scatters as plans in device and stream mode
# beside NCCL (every round's result checked against the host reference)
step bench-red-plan-small timeout -s QUIT -k 20 300 bash -c "for m in device stream; do for a in lua:one_shot lua:two_shot lua:one_shot_pull; do $bin bench allreduce -n $n --device cuda --algo \$a --plan-mode \$m --vs nccl -b 1K -e 64K -f 4 --iters 200 -w 20 --rounds 3 || exit 1; done; $bin bench reduce_scatter -n $n --device cuda --algo lua:push --plan-mode \$m --vs nccl -b 1K -e 64K -f 4 --iters 200 -w 20 --rounds 3 || exit 1; done"
# where a small plan call's time goes: one plan, two in turn, one launch of
# many replays; and the GPU time of small step mixes (docs/results/reductions.md)
step plan-floor timeout -s QUIT -k 20 120 $bin run -n "$n" --device cuda bench/plan_floor.lua device 2000
step plan-steps timeout -s QUIT -k 20 120 $bin run -n "$n" --device cuda bench/plan_steps.lua 2000
leaks reduce
step tour timeout -s QUIT -k 20 120 $bin run -n "$n" --device cuda
step fail timeout -s QUIT -k 20 120 bash -c "$bin run -n $n --device cuda --timeout 60s tests/fail_wait.lua; echo launcher exit \$?"
leaks fail
kill_test() { # extra flags for luacoll run, e.g. --ipc vmm
	$bin run -n 2 --device cuda --timeout 60s "$@" tests/kill_wait.lua &
	local launcher=$!
	sleep 4
	for p in $(pgrep -f "luacoll run -n 2 --device cuda"); do
		if tr '\0' '\n' </proc/$p/environ 2>/dev/null | grep -qx LUACOLL_RANK=1; then
			echo "killing rank 1 (pid $p) with SIGKILL"; kill -9 $p
		fi
	done
	local t0=$(date +%s%N)
	wait $launcher
	echo "launcher exit $? after $(( ($(date +%s%N) - t0) / 1000000 )) ms"
}
step kill timeout -s QUIT -k 20 120 bash -c "$(declare -f kill_test); bin=$bin; kill_test"
leaks kill
step kill-vmm timeout -s QUIT -k 20 120 bash -c "$(declare -f kill_test); bin=$bin; kill_test --ipc vmm"
leaks kill-vmm
for p in auto ce sm; do
	step bench-put-$p timeout 200 $bin bench put -n 2 --device cuda -b 1M -e 256M --path $p
done
for p in auto ce sm; do
	step bench-pingpong-$p timeout 100 $bin bench pingpong -n 2 --device cuda --iters 2000 --path $p
	step bench-barrier-$p timeout 100 $bin bench barrier -n 2 --device cuda --iters 2000 --path $p
done
step bench-symmetric timeout -s QUIT -k 20 200 bash -c "$bin bench pingpong -n 2 --device cuda --iters 2000 --symmetric both && $bin bench put -n 2 --device cuda -b 8 -e 8 --iters 200 --symmetric both && $bin bench put -n 2 --device cuda -b 256M -e 256M --symmetric both"
# --cpu-bind auto (the default) against none: the ranks' CPUs are in the output
step lua-pingpong timeout -s QUIT -k 20 150 bash -c "for r in 1 2 3 4; do for b in auto none; do $bin run -n 2 --device cuda --cpu-bind \$b bench/pingpong.lua 5000; done; done"
step bench-put-large timeout -s QUIT -k 20 200 bash -c "for p in ce sm; do $bin bench put -n 2 --device cuda -b 256M -e 1G --path \$p --iters 9; done"
step bench-put-bidir timeout -s QUIT -k 20 200 bash -c "for p in ce sm; do $bin bench put -n 2 --device cuda -b 128M -e 1G -f 2 --path \$p --bidir --iters 7; done"
[ -x bin/cuda.test ] && step probe-bidir env LUACOLL_PROBE=1 timeout 200 bin/cuda.test -test.run '^TestProbe' -test.v
ag="$bin bench allgather -n $n --device cuda --timeout 30s"
step bench-ag-sm-stress timeout -s QUIT -k 20 200 bash -c "$ag --path sm --stress -b 1K -e 16M -f 4 --iters 300 -w 3 && $ag --path sm --graph --stress -b 1K -e 16M -f 4 --iters 300 -w 3"
step bench-ag-sm timeout -s QUIT -k 20 200 $ag --path sm --vs nccl -b 1K -e 1G -f 4 --iters 20 -w 5 --json "$out/ag-sm.jsonl"
step bench-ag-sm-graph timeout -s QUIT -k 20 200 $ag --path sm --graph --vs nccl -b 1K -e 1G -f 4 --iters 20 -w 5 --json "$out/ag-sm-graph.jsonl" --plot "$out/ag-sm-graph.svg"
step bench-ag-ce-graph timeout -s QUIT -k 20 200 $ag --path ce --graph --vs nccl -b 1K -e 1G -f 4 --iters 20 -w 5
step bench-ag-large timeout -s QUIT -k 20 200 bash -c "$ag --path sm --vs nccl -b 256M -e 1G -f 4 --iters 50 -w 5 && $ag --path ce --vs nccl -b 256M -e 1G -f 4 --iters 50 -w 5"
step bench-ag-8m timeout -s QUIT -k 20 200 bash -c "$ag --path sm --vs nccl -b 8M -e 8M --iters 200 -w 20 && $ag --path sm --graph --vs nccl -b 8M -e 8M --iters 200 -w 20"
step bench-ag-small timeout -s QUIT -k 20 200 bash -c "$ag --path sm --graph --vs nccl -b 1K -e 64K -f 4 --iters 1000 -w 50 && $ag --path sm --vs nccl -b 1K -e 64K -f 4 --iters 1000 -w 50"
step bench-ag-plan timeout -s QUIT -k 20 300 bash -c "for a in lua:ring lua:direct; do $ag --algo \$a --plan --vs direct -b 1K -e 64M -f 65536 --iters 50 -w 5 --rounds 5 && $ag --algo \$a --vs direct -b 1K -e 64M -f 65536 --iters 50 -w 5 --rounds 5; done"
# plans in device and stream mode beside the built-in, small sizes
step bench-ag-plan-large timeout -s QUIT -k 20 300 bash -c "for a in lua:ring lua:direct; do for m in graph stream; do $ag --algo \$a --plan-mode \$m --vs direct -b 64M -e 64M --iters 20 -w 3 --rounds 3 || exit 1; done; done"
step bench-ag-plan-modes timeout -s QUIT -k 20 300 bash -c "for a in lua:ring lua:direct; do for m in device graph stream; do $ag --algo \$a --plan-mode \$m --vs direct -b 1K -e 256K -f 16 --iters 200 -w 20 --rounds 3 || exit 1; done; done"
leaks benches
# Several ranks on one GPU under the job's own MPS daemon (--mps); after
# each step no nvidia-cuda-mps process may be left, a killed rank included.
mps_gone() { step "mps-gone-after-$1" bash -c '! pgrep -r D,R,S,T -l nvidia-cuda-mps'; }
if ! command -v nvidia-cuda-mps-control >/dev/null; then
	echo "== mps steps skipped: no nvidia-cuda-mps-control"
elif pgrep -r D,R,S,T -l nvidia-cuda-mps; then
	echo "== mps steps skipped: MPS is already running"
else
	step mps-job timeout -s QUIT -k 20 120 $bin run -n 2 --device cuda --gpus 0,0 --mps on tests/mps.lua job
	mps_gone mps-job
	step mps-suite timeout -s QUIT -k 20 300 $bin run -n 2 --device cuda --gpus 0,0 tests/suite.lua
	mps_gone mps-suite
	# Prelaunching on (the default with one rank per GPU) with both ranks on
	# one GPU: a 1-GPU machine runs the 2-GPU path's stream code (a wait
	# that times out used to deadlock the stream there).
	step mps-suite-prelaunch timeout -s QUIT -k 20 300 env LUACOLL_PRELAUNCH=1 $bin run -n 2 --device cuda --gpus 0,0 tests/suite.lua
	mps_gone mps-suite-prelaunch
	step mps-suite3 timeout -s QUIT -k 20 300 $bin run -n 3 --device cuda --gpus 0,0,0 tests/suite.lua
	step mps-pingpong timeout -s QUIT -k 20 100 $bin bench pingpong -n 2 --device cuda --gpus 0,0 --iters 2000
	step mps-ag4 timeout -s QUIT -k 20 200 $bin bench allgather -n 4 --device cuda --gpus 0,0,0,0 -b 1K -e 1M --iters 20 -w 3
	mps_gone mps-bench
	step mps-fail timeout -s QUIT -k 20 120 bash -c "$bin run -n 2 --device cuda --gpus 0,0 --timeout 60s tests/fail_wait.lua; echo launcher exit \$?"
	mps_gone mps-fail
	step mps-kill timeout -s QUIT -k 20 120 bash -c "$(declare -f kill_test); bin=$bin; kill_test --gpus 0,0 --mps on"
	mps_gone mps-kill
	step mps-interrupt timeout -s QUIT -k 20 120 bash -c "$bin run -n 2 --device cuda --gpus 0,0 --mps on --timeout 60s tests/kill_wait.lua & l=\$!; sleep 4; kill -INT \$l; wait \$l; echo launcher exit \$?"
	mps_gone mps-interrupt
	# Without MPS the launcher names the ranks that share GPU 0 before the run.
	step mps-off timeout -s QUIT -k 20 120 bash -c "$bin run -n 2 --device cuda --gpus 0,0 --mps off --timeout 5s tests/mps.lua off; echo launcher exit \$?"
	leaks mps
fi
# Two logical nodes on this machine (--nodes 2: each its own host to the
# job, UCX over TCP between them, NCCL told of two hosts): CUDA windows
# whose peers are reached over the network, the host running the network
# operations (the proxy path), beside host windows in the same run.
if ! $bin info | grep -q "^network peers: UCX"; then
	echo "== nodes steps skipped: no UCX ($($bin info | grep -i 'network peers'))"
else
	ngpu=$(nvidia-smi -L | wc -l)
	g2="--gpus 0,0"; g4="--gpus 0,0,0,0"
	[ "$ngpu" -ge 2 ] && g2="--gpus 0,1" && g4="--gpus 0,0,1,1"
	step nodes-suite timeout -s QUIT -k 20 300 $bin run -n 2 --nodes 2 --device cuda $g2 tests/suite.lua
	step nodes-suite4 timeout -s QUIT -k 20 300 $bin run -n 4 --nodes 2 --device cuda $g4 tests/suite.lua
	step nodes-agp timeout -s QUIT -k 20 300 $bin run -n 2 --nodes 2 --device cuda $g2 tests/agp.lua 100
	step nodes-agp4 timeout -s QUIT -k 20 300 bash -c "for a in auto direct ring hier; do $bin run -n 4 --nodes 2 --device cuda $g4 tests/agp.lua 20 auto \$a || exit 1; done"
	step nodes-agp-refused timeout -s QUIT -k 20 120 bash -c "$bin run -n 2 --nodes 2 --device cuda $g2 tests/agp_refused.lua && $bin run -n 2 --nodes 2 --device cuda $g2 tests/agp_refused.lua '' graph && $bin run -n 2 --nodes 2 --device cuda $g2 tests/agp_refused.lua '' '' 4096 && $bin run -n 4 --nodes 2 --device cuda $g4 tests/agp_refused.lua '' '' 4096"
	step nodes-plan timeout -s QUIT -k 20 300 $bin run -n 2 --nodes 2 --device cuda $g2 tests/plan.lua 100
	step nodes-kill timeout -s QUIT -k 20 120 bash -c "$(declare -f kill_test); bin=$bin; kill_test --nodes 2 $g2"
	leaks nodes
	for d in cuda host; do
		step nodes-put-$d timeout -s QUIT -k 20 200 $bin bench put -n 2 --nodes 2 --device $d $g2 -b 8 -e 64M -f 8 --iters 20
		step nodes-pingpong-$d timeout -s QUIT -k 20 100 $bin bench pingpong -n 2 --nodes 2 --device $d $g2 --iters 2000
	done
	# the ceiling: ucx_perftest between two processes of this machine, TCP
	# (PERFTEST names another build, e.g. one carried in bin/ with its
	# libraries on LD_LIBRARY_PATH)
	perftest=${PERFTEST:-ucx_perftest}
	perf_pair() { # TEST SIZE ITERS
		local port=$((20000 + RANDOM % 20000))
		UCX_TLS=tcp $perftest -p $port >/dev/null 2>&1 & local srv=$!
		sleep 1
		UCX_TLS=tcp $perftest 127.0.0.1 -p $port -t $1 -s $2 -n $3 2>&1 | grep '^Final' | sed "s/^/$1 $2: /"
		wait $srv
	}
	command -v $perftest >/dev/null && step nodes-perftest timeout 200 bash -c "$(declare -f perf_pair); perftest=$perftest; perf_pair ucp_put_lat 8 20000; perf_pair ucp_am_lat 8 20000; for s in 262144 2097152 16777216; do perf_pair ucp_put_bw \$s 200; perf_pair ucp_am_bw \$s 200; done"
	step nodes-ag timeout -s QUIT -k 20 300 bash -c "$bin bench allgather -n 2 --nodes 2 --device cuda $g2 --vs nccl -b 1K -e 64M -f 8 --iters 20 -w 3 && $bin bench allgather -n 4 --nodes 2 --device cuda $g4 -b 1K -e 64M -f 8 --iters 20 -w 3"
	step nodes-ag-graph timeout -s QUIT -k 20 300 $bin bench allgather -n 2 --nodes 2 --device cuda $g2 --graph --vs nccl -b 1K -e 64M -f 8 --iters 20 -w 3
	step nodes-ag-host timeout -s QUIT -k 20 300 bash -c "$bin bench allgather -n 2 --nodes 2 -b 1K -e 64M -f 8 --iters 20 -w 3 && $bin bench allgather -n 4 --nodes 2 -b 1K -e 64M -f 8 --iters 20 -w 3"
	leaks nodes-bench
fi
if [ "${SUITE_WIDE:-0}" = 1 ]; then
	step suite4 timeout -s QUIT -k 20 300 $bin run -n 4 --device cuda tests/suite.lua
	step symmetric3 timeout -s QUIT -k 20 300 $bin run -n 3 --device cuda tests/symmetric.lua
	step symmetric4 timeout -s QUIT -k 20 300 $bin run -n 4 --device cuda tests/symmetric.lua
	leaks suite4
fi
exit $status
