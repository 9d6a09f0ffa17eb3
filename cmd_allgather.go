package main

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"strings"
	"time"

	"github.com/luacoll/luacoll/cuda"
	"github.com/luacoll/luacoll/engine"
	"github.com/luacoll/luacoll/engine/bench"
	"github.com/luacoll/luacoll/engine/bench/plot"
	"github.com/luacoll/luacoll/engine/launch"
	"github.com/luacoll/luacoll/engine/plan/cost"
	"github.com/luacoll/luacoll/luabind"
)

const benchAllgatherUsage = `luacoll bench allgather [-n N] [--device host|cuda] [flags]

  The persistent all-gather (lc.allgather_persistent) for sizes -b..-e (x -f),
  size = total output bytes (nccl-tests convention: each rank sends size/N),
  time = average per exec of --iters execs enqueued back to back after -w
  warmup ones (on CUDA the first timed run of ours and of each baseline
  gets more: the GPU kept busy for 50 ms, then 100 execs and more up to
  200 ms, so that no first row pays for an idle GPU or a lazy set-up);
  algbw = size/time, busbw = algbw*(N-1)/N. Every timed run is checked:
  each rank compares every chunk with its sender's checksum.
  With --vs nccl on CUDA, ncclAllGather runs on the same buffers in the same
  processes and run (captured in a CUDA graph too with --graph). With a Lua
  schedule (--algo lua:ring) --vs direct measures the built-in all-gather
  beside it; --vs direct,nccl puts all three in one table. With --vs mpi on
  the host, under Open MPI's mpirun, MPI_Allgather runs on the same buffers
  in the same processes (` + "`" + `mpirun -np 4 luacoll bench allgather --vs mpi` + "`" + `).
  A ratio column is the baseline's time over this run's (above 1: faster
  than the baseline). The last columns say how each size ran: the built-in
  all-gather's protocol (lines, staged, kernel, ce+kernel, ce, proxy, host,
  ...); with --plan the cost model's prediction, its ratio to the measured
  time, and the mode the size's plans replayed in (host, device, stream,
  graph).`

// agFlags are the flags of bench allgather.
type agFlags struct {
	rank           rankFlags
	minS, maxS     string
	factor         int
	iters, warmup  int
	rounds         int
	algo, vs, path string
	graph, stress  bool
	inPlace, plan  bool
	planMode       string
	model          string
	// vsNCCL, vsNCCLSym, vsDirect, vsMPI: the baselines named by --vs.
	vsNCCL, vsNCCLSym, vsDirect, vsMPI bool
	jsonOut, plot                      string
	cmdline                            string
	// skipped are the sizes below one chunk a rank (bench.AGChunkAlign).
	skipped []uint64
}

func cmdBenchAllgather(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("bench allgather", benchAllgatherUsage, stderr)
	var f agFlags
	f.rank.register(fs, 2)
	fs.StringVar(&f.minS, "b", "", "smallest total size (default 1K)")
	fs.StringVar(&f.maxS, "e", "", "largest total size (default 1G on cuda, 64M on host)")
	fs.IntVar(&f.factor, "f", 4, "size multiplication factor")
	fs.IntVar(&f.iters, "iters", 20, "timed execs per size")
	fs.IntVar(&f.rounds, "rounds", 1, "timed runs per size (each of --iters execs), in turn with --vs mpi's and --vs direct's (the built-in and the schedule swap places every round); the table has the medians")
	fs.IntVar(&f.warmup, "w", 5, "warmup execs per size")
	fs.IntVar(&f.warmup, "warmup", 5, "warmup execs per size")
	fs.StringVar(&f.algo, "algo", "auto", "auto, direct, ring, hier (pipeline is hier), or a schedule of scripts/lib/allgather.lua run through Lua: lua:ring, lua:direct, lua:hier (ring and direct stage chunks of up to 16 KiB per rank in the window instead of starting with a barrier, as the built-in does)")
	fs.StringVar(&f.path, "path", "auto", "data path on CUDA: auto (the fastest protocol for each size: flagged lines, one kernel, or copy-engine puts for the largest; ag:info() and each row name it), sm (the same protocols, the window's put and copy operations by kernels too) or ce (copy engines only: SM-free replay)")
	fs.BoolVar(&f.stress, "stress", false, "after each size's timed execs, --iters more with new data each time, every one checked, rank 1 delayed at random")
	fs.BoolVar(&f.inPlace, "inplace", false, "in-place execs (nccl-tests' in-place column): each rank's chunk starts in the window at rank*n, no own copy; NCCL in place too")
	fs.BoolVar(&f.graph, "graph", false, "CUDA graph mode: the first exec is captured, later execs replay it")
	fs.StringVar(&f.planMode, "plan-mode", "", "with --plan (implied): how the plan replays: auto (host on the host backend; on CUDA device where no copy exceeds 256 KiB, else stream), host, stream, device (one kernel runs the whole op list) or graph (one CUDA graph launch per replay)")
	fs.StringVar(&f.model, "model", "", "with --plan: the cost model the pred(us) column comes from: host or cuda (the shipped ones) or a JSON file luacoll calibrate wrote (default: the one shipped for the backend; \"-\" where it has no model of the plan's replay mode)")
	fs.BoolVar(&f.plan, "plan", false, "with --algo lua:*: record the schedule once per size into a plan (lc.plan), verify it as an all-gather, and replay it with no Lua per exec (a staged schedule's plan holds two execs, one per staging half)")
	fs.StringVar(&f.vs, "vs", "", "baselines, comma-separated: nccl (needs --device cuda), nccl-sym (NCCL's symmetric kernels: ncclAllGather on buffers from ncclMemAlloc registered as a symmetric window, NCCL 2.27 and later), direct (the built-in all-gather beside a Lua schedule), mpi (MPI_Allgather; host, under Open MPI's mpirun)")
	fs.StringVar(&f.jsonOut, "json", "", "write the rows and the run's metadata as JSON Lines to FILE")
	fs.StringVar(&f.plot, "plot", "", "write a plot of busbw against size to FILE.svg or FILE.png")
	if code, ok := parse(fs, args, stdout); !ok {
		return code
	}
	f.cmdline = "luacoll bench allgather " + strings.Join(args, " ")
	sizes, err := f.check()
	if err != nil {
		fmt.Fprintf(stderr, "luacoll bench allgather: %v\n", err)
		return 2
	}
	ctx, stop := signalContext()
	defer stop()
	env, isRank, err := jobEnv(f.checkFiles)
	n := f.rank.n
	if n == 0 {
		n = 2
	}
	if err == nil && isRank {
		n = env.Size
	}
	if err == nil {
		sizes, err = f.dropTiny(sizes, n)
	}
	if err != nil {
		fmt.Fprintf(stderr, "luacoll bench allgather: %v\n", err)
		return 2
	}
	if f.vsMPI && !underMPIRun(env, isRank, f.rank.n, "allgather", args, stderr) {
		return 2
	}
	job := launchJob{prog: "bench allgather", sayInterrupt: true, defaultN: 2, args: append([]string{"bench", "allgather"}, args...), progress: true,
		at: &benchAt{what: "bench allgather"}}
	if f.vsNCCL || f.vsNCCLSym {
		job.extraEnv = func(int) []string { return []string{"NCCL_NVLS_ENABLE=0"} }
	}
	return f.rank.launchOrRun(ctx, job, env, isRank, stdout, stderr, func(ctx context.Context, c *engine.Comm) error {
		return runBenchAllgather(ctx, c, f, sizes, stdout, stderr)
	})
}

// check validates the flags and returns the sizes.
func (f *agFlags) check() ([]uint64, error) {
	if err := f.rank.check(); err != nil {
		return nil, err
	}
	switch f.planMode {
	case "":
	case "auto", "host", "stream", "device", "graph":
		f.plan = true
	default:
		return nil, fmt.Errorf("--plan-mode %q: want auto, host, stream, device or graph", f.planMode)
	}
	if (f.planMode == "device" || f.planMode == "stream" || f.planMode == "graph") && f.rank.device != "cuda" {
		return nil, fmt.Errorf("--plan-mode %s needs --device cuda (plans on --device %s replay in mode host)", f.planMode, f.rank.device)
	}
	if err := f.checkModel(); err != nil {
		return nil, err
	}
	if f.minS == "" {
		f.minS = "1K"
	}
	if f.maxS == "" {
		f.maxS = "64M"
		if f.rank.device == "cuda" {
			f.maxS = "1G"
		}
	}
	lo, err := parseSize(f.minS)
	if err != nil {
		return nil, fmt.Errorf("-b: %w", err)
	}
	hi, err := parseSize(f.maxS)
	if err != nil {
		return nil, fmt.Errorf("-e: %w", err)
	}
	switch {
	case hi < lo:
		return nil, fmt.Errorf("-e %s is smaller than -b %s", f.maxS, f.minS)
	case f.factor < 2:
		return nil, fmt.Errorf("-f %d: want 2 or more", f.factor)
	case f.iters < 1:
		return nil, fmt.Errorf("--iters %d: want 1 or more", f.iters)
	case f.rounds < 1:
		return nil, fmt.Errorf("--rounds %d: want 1 or more", f.rounds)
	case f.warmup < 0:
		return nil, fmt.Errorf("-w %d: must not be negative", f.warmup)
	case f.graph && f.rank.device != "cuda":
		return nil, fmt.Errorf("--graph needs --device cuda")
	}
	if f.vs != "" {
		for _, b := range strings.Split(f.vs, ",") {
			switch strings.TrimSpace(b) {
			case "nccl":
				f.vsNCCL = true
			case "nccl-sym":
				f.vsNCCLSym = true
			case "direct":
				f.vsDirect = true
			case "mpi":
				f.vsMPI = true
			default:
				return nil, fmt.Errorf("--vs %q: unknown baseline %q (want nccl, nccl-sym, direct, mpi, comma-separated)", f.vs, b)
			}
		}
	}
	if (f.vsNCCL || f.vsNCCLSym) && f.rank.device != "cuda" {
		return nil, fmt.Errorf("--vs %s: NCCL runs on GPUs: it needs --device cuda (this run is on --device %s)", f.vs, f.rank.device)
	}
	if f.vsMPI && f.rank.device != "host" {
		return nil, fmt.Errorf("--vs mpi: MPI_Allgather is measured on the host backend only (--device host)")
	}
	if f.vsDirect && !strings.HasPrefix(f.algo, "lua:") {
		return nil, fmt.Errorf("--vs direct: compares a Lua schedule (--algo lua:ring, lua:direct or lua:hier) with the built-in all-gather; --algo is %s", f.algo)
	}
	if f.path != "ce" && f.path != "sm" && f.path != "auto" {
		return nil, fmt.Errorf("--path %q: want ce, sm or auto", f.path)
	}
	switch f.algo {
	case "auto", "direct", "ring", "hier", "pipeline":
		if f.plan {
			return nil, fmt.Errorf("--plan: records a Lua schedule (--algo lua:ring, lua:direct or lua:hier); --algo is %s", f.algo)
		}
	case "lua:ring", "lua:direct", "lua:hier":
		if f.graph {
			return nil, fmt.Errorf("--algo %s: graph mode works with the built-in algorithms only", f.algo)
		}
		if f.inPlace {
			return nil, fmt.Errorf("--algo %s: --inplace works with the built-in algorithms only", f.algo)
		}
	default:
		return nil, fmt.Errorf("--algo %q: want auto, direct, ring, hier, lua:ring, lua:direct or lua:hier", f.algo)
	}
	var sizes []uint64
	for s := lo; s <= hi; s *= uint64(f.factor) {
		sizes = append(sizes, s)
	}
	return sizes, nil
}

// dropTiny drops the sizes below one chunk a rank for n ranks (they
// would measure nothing) and keeps them in f.skipped; none left is an
// error.
func (f *agFlags) dropTiny(sizes []uint64, n int) ([]uint64, error) {
	var kept []uint64
	f.skipped = nil
	for _, s := range sizes {
		if bench.AGChunk(s, uint64(n)) == 0 {
			f.skipped = append(f.skipped, s)
		} else {
			kept = append(kept, s)
		}
	}
	if len(kept) == 0 {
		return nil, fmt.Errorf("-b %s -e %s: every size is below %d bytes, the smallest all-gather of %d ranks (%d bytes a rank)",
			f.minS, f.maxS, n*bench.AGChunkAlign, n, bench.AGChunkAlign)
	}
	return kept, nil
}

// checkModel refuses a --model that cannot give the pred(us) column: one
// without --plan, one that does not load, and on the host backend one
// without the host mode its plans replay in (a CUDA plan's mode is known
// once it is made: a model without it leaves the column "-").
func (f *agFlags) checkModel() error {
	if f.model == "" {
		return nil
	}
	if !f.plan {
		return fmt.Errorf("--model %s: the model predicts plans' times: it needs --plan", f.model)
	}
	m, err := cost.Load(f.model)
	if err != nil {
		return fmt.Errorf("--model %w", err)
	}
	if _, ok := m.Modes["host"]; !ok && f.rank.device != "cuda" {
		return fmt.Errorf("--model %s has no mode host (it has %v): plans on --device %s replay in mode host", f.model, m.ModeNames(), f.rank.device)
	}
	return nil
}

// checkFiles refuses a --plot or --json name that cannot be written, so
// that the run fails before it measures anything rather than after (rank 0
// writes them, at the end).
func (f *agFlags) checkFiles() error {
	if f.plot != "" {
		if err := plot.CheckPath(f.plot); err != nil {
			return fmt.Errorf("--plot %w", err)
		}
		if err := checkWritable(f.plot); err != nil {
			return fmt.Errorf("--plot %w", err)
		}
	}
	if f.jsonOut != "" {
		if err := checkWritable(f.jsonOut); err != nil {
			return fmt.Errorf("--json %w", err)
		}
	}
	return nil
}

// agMeta is the first JSON line: the run's metadata.
type agMeta struct {
	Kind     string         `json:"kind"`
	Command  string         `json:"command"`
	Version  string         `json:"luacoll_version"`
	Revision string         `json:"git_revision"`
	Backend  string         `json:"backend"`
	Ranks    int            `json:"ranks"`
	Iters    int            `json:"iters"`
	Warmup   int            `json:"warmup"`
	Rounds   int            `json:"rounds"`
	Algo     string         `json:"algo"`
	Graph    bool           `json:"graph"`
	InPlace  bool           `json:"in_place"`
	Stress   bool           `json:"stress"`
	Skipped  []uint64       `json:"skipped_sizes,omitempty"`
	Driver   int            `json:"cuda_driver,omitempty"`
	GPUs     []string       `json:"gpus,omitempty"`
	CPUs     []string       `json:"cpus"` // per rank
	CPUBind  string         `json:"cpu_bind"`
	Topology [][]string     `json:"topology,omitempty"`
	NCCL     string         `json:"nccl"`
	NCCLSym  string         `json:"nccl_sym"`
	MPI      string         `json:"mpi"`
	Info     map[string]any `json:"allgather_info"`
	Time     string         `json:"time"`
}

func runBenchAllgather(ctx context.Context, c *engine.Comm, f agFlags, sizes []uint64, stdout, stderr io.Writer) error {
	me := c.Env.Rank
	progress := progressWriter(me, stderr)
	cfg := bench.AGBenchConfig{Sizes: sizes, Iters: f.iters, Warmup: f.warmup, Rounds: f.rounds,
		Algo: f.algo, Graph: f.graph, NCCL: f.vsNCCL, NCCLSym: f.vsNCCLSym, MPI: f.vsMPI, Builtin: f.vsDirect, Path: f.path, Stress: f.stress, InPlace: f.inPlace, Progress: progress}
	var st *luabind.State
	if name, ok := strings.CutPrefix(f.algo, "lua:"); ok {
		// The schedule of scripts/lib/allgather.lua, run through Lua.
		st = luabind.New(c, stdout)
		defer st.Close()
		schedule, what := st.Schedule, f.algo
		if f.plan {
			st.PlanMode = f.planMode
			if f.model != "" {
				m, err := cost.Load(f.model)
				if err != nil {
					return fmt.Errorf("--model %w", err)
				}
				st.CostModel = m
			}
			cfg.BuiltinGraph = f.planMode == "graph"
			schedule, what = st.SchedulePlan, f.algo+" (plan, mode "+st.Mode()+")"
		}
		sched, err := schedule("allgather", name)
		if err != nil {
			return err
		}
		cfg.Schedule, cfg.ScheduleName = sched, what
	}
	cpuPlace, cpus, err := c.Placement(ctx)
	if err != nil {
		return err
	}
	// Rank 0 prints the header with the first row and every row as soon
	// as it is measured: a sweep that fails later keeps its finished rows.
	var meta agMeta
	cfg.OnRow = func(res *bench.AGBenchResult, r bench.AGBenchRow) error {
		if st != nil && f.plan {
			n := r.Bytes / uint64(c.Env.Size)
			r.PredictedSec, r.PlanMode = st.PlanPredicted[n], st.PlanModes[n]
			res.Rows[len(res.Rows)-1].PredictedSec = r.PredictedSec
			res.Rows[len(res.Rows)-1].PlanMode = r.PlanMode
		}
		if len(res.Rows) == 1 {
			planInfo(res, f, st, c)
			meta = agHeader(stdout, c, f, res, cpuPlace, cpus)
		}
		agRow(stdout, res, r, f.plan)
		return nil
	}
	res, err := bench.BenchAllGather(ctx, c, cfg)
	if err != nil {
		return err
	}
	planInfo(res, f, st, c)
	if me != 0 {
		return nil
	}
	meta.Info = res.Info
	if f.jsonOut != "" {
		if err := writeAGJSON(f.jsonOut, meta, res.Rows); err != nil {
			return err
		}
	}
	if f.plot != "" {
		title := fmt.Sprintf("all-gather busbw, %d ranks, %s", c.Env.Size, c.Backend.Name())
		if f.graph {
			title += ", CUDA graphs"
		}
		if err := agChart(title, f.algo, res.Rows, res.HaveBuiltin, res.HaveNCCL, res.HaveMPI).Write(f.plot); err != nil {
			return fmt.Errorf("--plot: %w", err)
		}
	}
	return nil
}

// planInfo says in res.Info how a plan schedule ran (bench allgather
// --plan): the mode's path and the modes auto picked.
func planInfo(res *bench.AGBenchResult, f agFlags, st *luabind.State, c *engine.Comm) {
	if !f.plan || st == nil {
		return
	}
	res.Info["path"] = map[string]string{
		"host":   "a recorded plan replayed by a Go loop over the window operations",
		"stream": "a recorded plan replayed as launches on the CUDA stream (the plan interpreter over runs of ops; copies above 64 KiB and reductions as launches of their own, a chunk's copies to several peers one launch; op by op where the interpreter cannot run them)",
		"device": "a recorded plan run by one kernel per call (the plan interpreter)",
		"graph":  "a recorded plan captured into a CUDA graph, one launch per replay",
	}[st.Mode()]
	if res.Info["path"] == "" {
		res.Info["path"] = "a recorded plan, in the mode auto picks for each size (plan_modes)"
	}
	res.Info["path"] = res.Info["path"].(string) + " (" + c.Backend.Name() + ")"
	if len(st.PlanModes) > 0 {
		res.Info["plan_modes"] = st.PlanModes
	}
}

// agHeader prints the table's comment lines and column names (rank 0,
// with the first row) and returns the run's metadata for --json.
func agHeader(stdout io.Writer, c *engine.Comm, f agFlags, res *bench.AGBenchResult, cpuPlace string, cpus []string) agMeta {
	meta := agMeta{Kind: "meta", Command: f.cmdline,
		Version: versionString(), Revision: buildRevision(), Backend: c.Backend.Name(), Ranks: c.Env.Size,
		Iters: f.iters, Warmup: f.warmup, Rounds: f.rounds, Algo: f.algo, Graph: f.graph, InPlace: f.inPlace, Stress: f.stress, Skipped: f.skipped, NCCL: res.NCCL, NCCLSym: res.NCCLSym, MPI: res.MPI, Info: res.Info,
		CPUs: cpus, CPUBind: c.Opts.CPUBind, Time: time.Now().UTC().Format(time.RFC3339)}
	if c.Opts.Device == "cuda" {
		pi := cuda.Probe()
		meta.Driver, meta.Topology = pi.DriverVersion, pi.Topology
		for _, d := range pi.Devices {
			meta.GPUs = append(meta.GPUs, d.Name)
		}
	}
	fmt.Fprintf(stdout, "# luacoll bench allgather: %s backend, %d ranks, luacoll %s\n", c.Backend.Name(), c.Env.Size, versionString())
	place := "out of place"
	if f.inPlace {
		place = "in place"
	}
	fmt.Fprintf(stdout, "# algo %s (runs %s, path %s), graph %v, %s, %d warmup + %d timed execs back to back per size\n",
		f.algo, res.Info["algo"], res.Info["path"], f.graph, place, f.warmup, f.iters)
	if f.rounds > 1 {
		turn := "luacoll"
		if f.vsDirect {
			turn += ", the built-in (after the schedule in rounds 1, 3, ..., before it in rounds 2, 4, ...)"
		}
		if f.vsMPI {
			turn += ", MPI"
		}
		fmt.Fprintf(stdout, "# %d rounds per size (%s in turn): median times, #wrong over all rounds\n", f.rounds, turn)
	}
	if nodes, _ := res.Info["graph_nodes"].(string); nodes != "" {
		fmt.Fprintf(stdout, "# luacoll graph nodes per exec: %s\n", nodes)
	}
	if len(f.skipped) > 0 {
		list := make([]string, len(f.skipped))
		for i, v := range f.skipped {
			list[i] = fmt.Sprint(v)
		}
		fmt.Fprintf(stdout, "# skipped sizes below %d bytes (%d bytes a rank at least): %s\n",
			uint64(c.Env.Size)*bench.AGChunkAlign, bench.AGChunkAlign, strings.Join(list, ", "))
	}
	if res.NCCLNodes != "" {
		fmt.Fprintf(stdout, "# NCCL graph nodes per op: %s\n", res.NCCLNodes)
	}
	if meta.GPUs != nil {
		fmt.Fprintf(stdout, "# GPUs: %s; driver %d\n", strings.Join(meta.GPUs, ", "), meta.Driver)
	}
	fmt.Fprintf(stdout, "# CPUs: %s (--cpu-bind %s)\n", cpuPlace, c.Opts.CPUBind)
	if res.HaveBuiltin {
		how := "eager"
		if f.planMode == "graph" {
			how = "graph mode (as the plan)"
		}
		fmt.Fprintf(stdout, "# baseline: built-in direct all-gather (path %s), %s, same window and buffers\n", res.Info["builtin_path"], how)
	}
	if f.vsNCCL {
		fmt.Fprintf(stdout, "# baseline: %s\n", res.NCCL)
	}
	if f.vsNCCLSym {
		fmt.Fprintf(stdout, "# baseline (sym): %s; its result is copied into the window to be checked\n", res.NCCLSym)
	}
	switch {
	case f.vsNCCL || f.vsNCCLSym:
	case !res.HaveBuiltin && !res.HaveMPI:
		fmt.Fprintf(stdout, "# baseline: none (--vs nccl, mpi or direct adds one)\n")
	}
	if res.HaveMPI {
		fmt.Fprintf(stdout, "# baseline: MPI_Allgather, %s, same buffers and processes\n", res.MPI)
	}
	if note, _ := res.Info["note"].(string); note != "" {
		fmt.Fprintf(stdout, "# note: %s\n", note)
	}
	fmt.Fprintf(stdout, "# %12s %12s %6s %10s %8s %8s %7s", "size(B)", "count", "type", "time(us)", "algbw", "busbw", "#wrong")
	if res.HaveBuiltin {
		fmt.Fprintf(stdout, " %10s %8s %7s %7s", "direct(us)", "d.busbw", "#wrong", "ratio")
	}
	if res.HaveNCCL {
		fmt.Fprintf(stdout, " %10s %8s %7s %7s", "nccl(us)", "n.busbw", "#wrong", "ratio")
	}
	if res.HaveNCCLSym {
		fmt.Fprintf(stdout, " %10s %8s %7s %7s", "sym(us)", "s.busbw", "#wrong", "ratio")
	}
	if res.HaveMPI {
		fmt.Fprintf(stdout, " %10s %8s %7s %7s", "mpi(us)", "m.busbw", "#wrong", "ratio")
	}
	if f.plan {
		fmt.Fprintf(stdout, " %10s %6s  %s", "pred(us)", "p/m", "mode")
	}
	if f.algo == "" || !strings.HasPrefix(f.algo, "lua:") {
		fmt.Fprintf(stdout, "  %s", "protocol")
	}
	fmt.Fprintln(stdout)
	return meta
}

// agRow prints one row of the table.
// With plan, the cost model's prediction and its ratio to the measured
// time follow ("-" without one).
func agRow(stdout io.Writer, res *bench.AGBenchResult, r bench.AGBenchRow, plan bool) {
	fmt.Fprintf(stdout, "  %12d %12d %6s %10.2f %8.2f %8.2f %7d", r.Bytes, r.Count, r.Type, r.Seconds*1e6, r.AlgBW, r.BusBW, r.Wrong)
	if res.HaveBuiltin {
		fmt.Fprintf(stdout, " %10.2f %8.2f %7d %7.2f", r.BuiltinSec*1e6, r.BuiltinBusBW, r.BuiltinWrong, r.BuiltinRatio)
	}
	if res.HaveNCCL {
		fmt.Fprintf(stdout, " %10.2f %8.2f %7d %7.2f", r.NCCLSec*1e6, r.NCCLBusBW, r.NCCLWrong, r.Ratio)
	}
	if res.HaveNCCLSym {
		fmt.Fprintf(stdout, " %10.2f %8.2f %7d %7.2f", r.NCCLSymSec*1e6, r.NCCLSymBusBW, r.NCCLSymWrong, r.RatioSym)
	}
	if res.HaveMPI {
		fmt.Fprintf(stdout, " %10.2f %8.2f %7d %7.2f", r.MPISec*1e6, r.MPIBusBW, r.MPIWrong, r.MPIRatio)
	}
	switch {
	case plan && r.PredictedSec > 0 && r.Seconds > 0:
		fmt.Fprintf(stdout, " %10.2f %6.2f", r.PredictedSec*1e6, r.PredictedSec/r.Seconds)
	case plan:
		fmt.Fprintf(stdout, " %10s %6s", "-", "-")
	}
	if plan {
		fmt.Fprintf(stdout, "  %s", cmp.Or(r.PlanMode, "-"))
	}
	if r.Protocol != "" {
		fmt.Fprintf(stdout, "  %s", r.Protocol)
	}
	fmt.Fprintln(stdout)
}

func writeAGJSON(path string, meta agMeta, rows []bench.AGBenchRow) error {
	lines := make([]any, len(rows))
	for i, r := range rows {
		lines[i] = struct {
			Kind string `json:"kind"`
			bench.AGBenchRow
		}{"row", r}
	}
	return writeJSONLines(path, meta, lines)
}

// writeJSONLines writes meta, then each row, as JSON lines to path (the
// --json file of the all-gather and reduction benchmarks).
func writeJSONLines(path string, meta any, rows []any) error {
	fh, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("--json: %w", err)
	}
	enc := json.NewEncoder(fh)
	err = enc.Encode(meta)
	for _, r := range rows {
		if err == nil {
			err = enc.Encode(r)
		}
	}
	if cerr := fh.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("--json %s: %w", path, err)
	}
	return nil
}

// agChart is busbw (GB/s) against size (log2 axis) for luacoll (its line
// named after algo when that is a Lua schedule) and, when present, the
// built-in all-gather, NCCL and MPI.
func agChart(title, algo string, rows []bench.AGBenchRow, builtin, nccl, mpi bool) plot.Chart {
	c := plot.Chart{Title: title, XLabel: "size (total output bytes)", YLabel: "busbw (GB/s)"}
	name := "luacoll"
	if strings.HasPrefix(algo, "lua:") {
		name = "luacoll " + algo
	}
	own := plot.Series{Name: name, Color: plot.Blue}
	base := plot.Series{Name: "luacoll built-in direct", Color: plot.Green}
	ref := plot.Series{Name: "NCCL", Color: plot.Red}
	mref := plot.Series{Name: "Open MPI", Color: plot.Orange}
	for _, r := range rows {
		c.X = append(c.X, math.Log2(float64(r.Bytes)))
		c.XTicks = append(c.XTicks, humanBytes(r.Bytes))
		own.Y = append(own.Y, r.BusBW)
		base.Y = append(base.Y, r.BuiltinBusBW)
		ref.Y = append(ref.Y, r.NCCLBusBW)
		mref.Y = append(mref.Y, r.MPIBusBW)
	}
	c.Series = append(c.Series, own)
	if builtin {
		c.Series = append(c.Series, base)
	}
	if nccl {
		c.Series = append(c.Series, ref)
	}
	if mpi {
		c.Series = append(c.Series, mref)
	}
	return c
}

// mpirunCommand is the command that runs bench what under Open MPI's
// mpirun with np ranks (4 when not given) and args less -n.
func mpirunCommand(np int, what string, args []string) string {
	if np == 0 {
		np = 4
	}
	var rest []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "-n" || a == "--n":
			i++
			continue
		case strings.HasPrefix(a, "-n=") || strings.HasPrefix(a, "--n="):
			continue
		}
		rest = append(rest, a)
	}
	return fmt.Sprintf("mpirun -np %d -x %s=127.0.0.1:29500 luacoll bench %s %s", np, launch.EnvAddr, what, strings.Join(rest, " "))
}

func humanBytes(n uint64) string {
	switch {
	case n >= 1<<30 && n%(1<<30) == 0:
		return fmt.Sprintf("%dG", n>>30)
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%dM", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%dK", n>>10)
	}
	return fmt.Sprint(n)
}
