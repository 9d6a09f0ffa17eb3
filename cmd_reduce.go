package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"math"
	"strings"
	"time"

	"github.com/luacoll/luacoll/engine"
	"github.com/luacoll/luacoll/engine/bench"
	"github.com/luacoll/luacoll/engine/bench/plot"
	"github.com/luacoll/luacoll/luabind"
	"github.com/luacoll/luacoll/transport"
	"github.com/luacoll/luacoll/window"
)

const benchReduceUsage = `luacoll bench reduce_scatter|allreduce [-n N] [--device host|cuda] [flags]

  A reduction schedule of scripts/lib (reduce_scatter.lua, all_reduce.lua)
  for sizes -b..-e (x -f), nccl-tests columns plus type and redop: size =
  each rank's input bytes (reduce_scatter: each rank keeps size/N of it),
  time = average per call of --iters calls back to back after -w warmup
  ones (on CUDA more for the first timed run of ours and of each baseline,
  as in bench allgather), algbw = size/time, busbw = algbw*2(N-1)/N
  (allreduce) or algbw*(N-1)/N (reduce_scatter). Schedules run in place on
  a window; after each round's timed calls one call on fresh input is
  checked against a host reference (integers, min and max exactly; float
  sums and products within the type's rounding over N ranks): #wrong counts
  the elements off.
  With --vs mpi on the host, under Open MPI's mpirun, MPI_Allreduce or
  MPI_Reduce_scatter_block runs in place on the same window in the same
  processes; with --vs nccl on CUDA, ncclAllReduce or ncclReduceScatter
  (captured in a CUDA graph with --graph). A ratio column is the baseline's
  time over the schedule's (above 1: faster than the baseline). With
  --algo lua:auto a schedule column names the schedule each size ran (the
  module's pick); with --plan a mode column the mode its plans replayed in.`

// redFlags are the flags of bench reduce_scatter and bench allreduce.
type redFlags struct {
	rank            rankFlags
	coll            string
	minS, maxS      string
	factor          int
	iters, warmup   int
	rounds          int
	algo, vs        string
	dtype, op       string
	graph, plan     bool
	planMode        string
	path            string
	vsNCCL, vsMPI   bool
	jsonOut, plot   string
	cmdline         string
	sizes           []uint64
	parsedT         transport.DType
	parsedOp        transport.RedOp
	module, schedFn string
}

// redAlgos are the schedules of each collective: module and functions.
var redAlgos = map[string]struct {
	module string
	fns    []string
}{
	bench.CollReduceScatter: {"reduce_scatter", []string{"auto", "ring", "direct", "push"}},
	bench.CollAllReduce:     {"all_reduce", []string{"auto", "ring", "one_shot", "two_shot", "one_shot_pull", "two_shot_pull"}},
}

func cmdBenchReduce(coll string, args []string, stdout, stderr io.Writer) int {
	prog := "bench " + coll
	fs := newFlagSet(prog, benchReduceUsage, stderr)
	f := redFlags{coll: coll}
	f.rank.register(fs, 2)
	fs.StringVar(&f.minS, "b", "1K", "smallest size (each rank's input bytes)")
	fs.StringVar(&f.maxS, "e", "", "largest size (default 1G on cuda, 64M on host)")
	fs.IntVar(&f.factor, "f", 4, "size multiplication factor")
	fs.IntVar(&f.iters, "iters", 20, "timed calls per size and round")
	fs.IntVar(&f.warmup, "w", 5, "warmup calls per size and round")
	fs.IntVar(&f.warmup, "warmup", 5, "warmup calls per size and round")
	fs.IntVar(&f.rounds, "rounds", 1, "timed runs per size, in turn with the baselines; the table has the medians")
	fs.StringVar(&f.dtype, "type", "f32", "element type: f32, f64, f16, bf16, i32, i64, u32 or u64")
	fs.StringVar(&f.op, "op", "sum", "reduction: sum, prod, min or max")
	fs.StringVar(&f.algo, "algo", "lua:auto", "the schedule: lua:auto (by size), lua:ring, lua:direct or lua:push (reduce_scatter); lua:auto (by size), lua:ring, lua:one_shot, lua:two_shot, lua:one_shot_pull or lua:two_shot_pull (allreduce)")
	fs.StringVar(&f.vs, "vs", "", "baselines, comma-separated: nccl (needs --device cuda), mpi (host, under Open MPI's mpirun)")
	fs.BoolVar(&f.graph, "graph", false, "capture the NCCL baseline in a CUDA graph, replayed per call")
	fs.BoolVar(&f.plan, "plan", false, "record the schedule once per size into a plan (lc.plan), verified, and replay it with no Lua per call")
	fs.StringVar(&f.planMode, "plan-mode", "", "with --plan (implied): how the plan replays: auto (host on the host backend, stream on CUDA), host, stream (the interpreter between the reduce kernel's launches), device (one kernel runs the whole op list, reductions included) or graph (one CUDA graph a replay)")
	fs.StringVar(&f.path, "path", "auto", "the window's path on CUDA: auto, ce (copy engines for its puts) or sm (kernels for its puts)")
	fs.StringVar(&f.jsonOut, "json", "", "write the rows and the run's metadata as JSON Lines to FILE")
	fs.StringVar(&f.plot, "plot", "", "write a plot of busbw against size to FILE.svg or FILE.png")
	if code, ok := parse(fs, args, stdout); !ok {
		return code
	}
	f.cmdline = "luacoll " + prog + " " + strings.Join(args, " ")
	fail := func(code int, err error) int {
		fmt.Fprintf(stderr, "luacoll %s: %v\n", prog, err)
		return code
	}
	if err := f.check(); err != nil {
		return fail(2, err)
	}
	ctx, stop := signalContext()
	defer stop()
	env, isRank, err := jobEnv(func() error { return checkOutFiles(f.plot, f.jsonOut) })
	if err != nil {
		return fail(2, err)
	}
	if f.vsMPI && !underMPIRun(env, isRank, f.rank.n, coll, args, stderr) {
		return 2
	}
	job := launchJob{prog: prog, sayInterrupt: true, defaultN: 2, args: append([]string{"bench", coll}, args...), progress: true, at: &benchAt{what: prog}}
	if f.vsNCCL {
		job.extraEnv = func(int) []string { return []string{"NCCL_NVLS_ENABLE=0"} }
	}
	return f.rank.launchOrRun(ctx, job, env, isRank, stdout, stderr, func(ctx context.Context, c *engine.Comm) error {
		return runBenchReduce(ctx, c, f, stdout, stderr)
	})
}

// check validates the flags and works out the sizes.
func (f *redFlags) check() error {
	if err := f.rank.check(); err != nil {
		return err
	}
	var err error
	if f.parsedT, err = transport.ParseDType(f.dtype); err != nil {
		return fmt.Errorf("--type: %w", err)
	}
	if f.parsedOp, err = transport.ParseRedOp(f.op); err != nil {
		return fmt.Errorf("--op: %w", err)
	}
	if f.maxS == "" {
		f.maxS = "64M"
		if f.rank.device == "cuda" {
			f.maxS = "1G"
		}
	}
	lo, err := parseSize(f.minS)
	if err != nil {
		return fmt.Errorf("-b: %w", err)
	}
	hi, err := parseSize(f.maxS)
	if err != nil {
		return fmt.Errorf("-e: %w", err)
	}
	switch {
	case hi < lo:
		return fmt.Errorf("-e %s is smaller than -b %s", f.maxS, f.minS)
	case f.factor < 2:
		return fmt.Errorf("-f %d: want 2 or more", f.factor)
	case f.iters < 1:
		return fmt.Errorf("--iters %d: want 1 or more", f.iters)
	case f.rounds < 1:
		return fmt.Errorf("--rounds %d: want 1 or more", f.rounds)
	case f.warmup < 0:
		return fmt.Errorf("-w %d: must not be negative", f.warmup)
	case f.graph && f.rank.device != "cuda":
		return fmt.Errorf("--graph needs --device cuda")
	case f.path != "auto" && f.path != "ce" && f.path != "sm":
		return fmt.Errorf("--path %q: want auto, ce or sm", f.path)
	case f.path != "auto" && f.rank.device != "cuda":
		return fmt.Errorf("--path %s needs --device cuda", f.path)
	case (f.planMode == "device" || f.planMode == "stream" || f.planMode == "graph") && f.rank.device != "cuda":
		return fmt.Errorf("--plan-mode %s needs --device cuda (plans on --device %s replay in mode host)", f.planMode, f.rank.device)
	}
	switch f.planMode {
	case "":
	case "auto", "host", "stream", "device", "graph":
		f.plan = true
	default:
		return fmt.Errorf("--plan-mode %q: want auto, host, stream, device or graph", f.planMode)
	}
	for _, b := range strings.Split(f.vs, ",") {
		switch strings.TrimSpace(b) {
		case "":
		case "nccl":
			f.vsNCCL = true
		case "mpi":
			f.vsMPI = true
		default:
			return fmt.Errorf("--vs %q: unknown baseline %q (want nccl, mpi, comma-separated)", f.vs, b)
		}
	}
	if f.vsNCCL && f.rank.device != "cuda" {
		return fmt.Errorf("--vs nccl: NCCL runs on GPUs: it needs --device cuda (this run is on --device %s)", f.rank.device)
	}
	if f.vsMPI && f.rank.device != "host" {
		return fmt.Errorf("--vs mpi: MPI is measured on the host backend only (--device host)")
	}
	if err := f.checkAlgo(); err != nil {
		return err
	}
	if f.plan && f.rank.n == 1 {
		return fmt.Errorf("--plan with -n 1: on one rank the schedules have nothing to send or reduce, so there is no plan to record (run without --plan, or with -n 2 or more)")
	}
	f.sizes = nil
	for s := lo; s <= hi; s *= uint64(f.factor) {
		f.sizes = append(f.sizes, s)
	}
	// The ranks skip sizes below one element (a reduce-scatter: one
	// element a rank, at the -n in force); a sweep whose largest size is
	// below that is refused here, once, before any rank starts.
	unit, why := f.parsedT.Size(), fmt.Sprintf("one %s", f.parsedT)
	if f.coll == bench.CollReduceScatter {
		unit *= uint64(f.rank.n)
		why = fmt.Sprintf("one %s a rank at -n %d", f.parsedT, f.rank.n)
	}
	if most := f.sizes[len(f.sizes)-1]; unit > 0 && most < unit {
		return fmt.Errorf("-b %s -e %s -f %d: every size is below %d bytes (%s)", f.minS, f.maxS, f.factor, unit, why)
	}
	return nil
}

// checkAlgo resolves --algo to a module and function of scripts/lib.
func (f *redFlags) checkAlgo() error {
	a := redAlgos[f.coll]
	name, ok := strings.CutPrefix(f.algo, "lua:")
	for _, fn := range a.fns {
		if ok && name == fn {
			f.module, f.schedFn = a.module, fn
			return nil
		}
	}
	return fmt.Errorf("--algo %q: want lua:%s", f.algo, strings.Join(a.fns, ", lua:"))
}

// checkOutFiles refuses a --plot or --json name that cannot be written
// before anything is measured.
func checkOutFiles(plotPath, jsonPath string) error {
	if plotPath != "" {
		if err := plot.CheckPath(plotPath); err != nil {
			return fmt.Errorf("--plot %w", err)
		}
		if err := checkWritable(plotPath); err != nil {
			return fmt.Errorf("--plot %w", err)
		}
	}
	if jsonPath != "" {
		if err := checkWritable(jsonPath); err != nil {
			return fmt.Errorf("--json %w", err)
		}
	}
	return nil
}

// scratchNeed is how many scratch bytes schedule fn of N ranks needs for
// inputs of up to maxIn bytes a rank (see scripts/lib/all_reduce.lua).
func scratchNeed(fn string, N, esz uint64) func(maxIn uint64) uint64 {
	return func(maxIn uint64) uint64 {
		chunk := (maxIn/esz + N - 1) / N * esz // all_reduce's largest chunk
		switch fn {
		case "one_shot":
			return (2*N + 1) * maxIn
		case "two_shot":
			return (2*N + 1) * chunk
		case "push":
			return (2*N + 1) * (maxIn / N)
		case "ring":
			return 2 * max(chunk, maxIn/N)
		case "auto": // the small schedules up to their limits (scripts/lib), the ring above
			// one_shot's limit is 64 KiB off the host (4 KiB there).
			small := min(maxIn, 256<<10)
			return max((2*N+1)*min(maxIn, 64<<10), (2*N+1)*small/N+(2*N+1)*esz, 2*max(chunk, maxIn/N))
		case "two_shot_pull", "direct":
			return 0
		}
		return maxIn
	}
}

// redMeta is the first JSON line: the run's metadata.
type redMeta struct {
	Kind       string   `json:"kind"`
	Collective string   `json:"collective"`
	Command    string   `json:"command"`
	Version    string   `json:"luacoll_version"`
	Revision   string   `json:"git_revision"`
	Backend    string   `json:"backend"`
	Ranks      int      `json:"ranks"`
	Iters      int      `json:"iters"`
	Warmup     int      `json:"warmup"`
	Rounds     int      `json:"rounds"`
	Algo       string   `json:"algo"`
	Plan       bool     `json:"plan"`
	Type       string   `json:"type"`
	RedOp      string   `json:"redop"`
	Graph      bool     `json:"graph"`
	Path       string   `json:"path"`
	Skipped    []uint64 `json:"skipped_sizes,omitempty"`
	CPUs       []string `json:"cpus"`
	CPUBind    string   `json:"cpu_bind"`
	NCCL       string   `json:"nccl"`
	MPI        string   `json:"mpi"`
	Time       string   `json:"time"`
}

func runBenchReduce(ctx context.Context, c *engine.Comm, f redFlags, stdout, stderr io.Writer) error {
	st := luabind.New(c, stdout)
	defer st.Close()
	schedule, algo := st.ReduceSchedule, f.algo
	if f.plan {
		// auto on CUDA takes stream mode for plans with reductions.
		st.PlanMode = f.planMode
		schedule, algo = st.ReduceSchedulePlan, f.algo+" (plan, mode "+st.Mode()+")"
	}
	sched, err := schedule(f.module, f.schedFn)
	if err != nil {
		return err
	}
	call := func(n, scratch uint64) luabind.ReduceCall {
		return luabind.ReduceCall{N: n, Type: f.parsedT, Op: f.parsedOp, Scratch: scratch, Coll: f.coll}
	}
	cfg := bench.RedBenchConfig{Coll: f.coll, Sizes: f.sizes, Iters: f.iters, Warmup: f.warmup, Rounds: f.rounds,
		Type: f.parsedT, Op: f.parsedOp, Path: f.path, MPI: f.vsMPI, NCCL: f.vsNCCL, Graph: f.graph, Progress: progressWriter(c.Env.Rank, stderr),
		ScheduleName: algo, ScratchBytes: scratchNeed(f.schedFn, uint64(c.Env.Size), f.parsedT.Size()),
		Schedule: func(w *window.Window, n, scratch uint64) error { return sched(w, call(n, scratch)) }}
	if pick := st.ReducePick(f.module, f.schedFn); pick != nil {
		cfg.Pick = func(w *window.Window, n, scratch uint64) (string, error) { return pick(w, call(n, scratch)) }
	}
	cpuPlace, cpus, err := c.Placement(ctx)
	if err != nil {
		return err
	}
	res, err := bench.BenchReduce(ctx, c, cfg)
	if err != nil {
		return err
	}
	if f.plan {
		for i, r := range res.Rows {
			n := r.Bytes // the schedule's n: the chunk of a reduce-scatter
			if f.coll == bench.CollReduceScatter {
				n /= uint64(c.Env.Size)
			}
			res.Rows[i].PlanMode = st.PlanModes[n]
		}
	}
	if c.Env.Rank != 0 {
		return nil
	}
	meta := redMeta{Kind: "meta", Collective: f.coll, Command: f.cmdline, Version: versionString(), Revision: buildRevision(),
		Backend: c.Backend.Name(), Ranks: c.Env.Size, Iters: f.iters, Warmup: f.warmup, Rounds: f.rounds, Algo: f.algo, Plan: f.plan,
		Type: f.parsedT.String(), RedOp: f.parsedOp.String(), Graph: f.graph, Path: f.path, Skipped: res.Skipped, CPUs: cpus,
		CPUBind: c.Opts.CPUBind, NCCL: res.NCCL, MPI: res.MPI, Time: time.Now().UTC().Format(time.RFC3339)}
	printReduceTable(stdout, f, c, res, cpuPlace)
	if f.jsonOut != "" {
		if err := writeRedJSON(f.jsonOut, meta, res.Rows); err != nil {
			return err
		}
	}
	if f.plot != "" {
		title := fmt.Sprintf("%s busbw, %d ranks, %s, %s %s", f.coll, c.Env.Size, c.Backend.Name(), f.parsedT, f.parsedOp)
		if err := redChart(title, f.algo, res).Write(f.plot); err != nil {
			return fmt.Errorf("--plot: %w", err)
		}
	}
	return nil
}

func printReduceTable(out io.Writer, f redFlags, c *engine.Comm, res *bench.RedBenchResult, cpuPlace string) {
	fmt.Fprintf(out, "# luacoll bench %s: %s backend, %d ranks, luacoll %s\n", f.coll, c.Backend.Name(), c.Env.Size, versionString())
	how := "run through Lua every call"
	if f.plan {
		how = "recorded once per size into a plan, replayed"
	}
	fmt.Fprintf(out, "# algo %s (scripts/lib/%s.lua, %s), in place, %d warmup + %d timed calls back to back per size and round\n",
		f.algo, f.module, how, f.warmup, f.iters)
	if f.rank.device == "cuda" {
		fmt.Fprintf(out, "# window path %s\n", f.path)
	}
	if f.rounds > 1 {
		fmt.Fprintf(out, "# %d rounds per size (luacoll and the baselines in turn): median times, #wrong over all rounds\n", f.rounds)
	}
	fmt.Fprintf(out, "# CPUs: %s (--cpu-bind %s)\n", cpuPlace, c.Opts.CPUBind)
	if res.NCCLNodes != "" {
		fmt.Fprintf(out, "# NCCL graph nodes per op: %s\n", res.NCCLNodes)
	}
	fmt.Fprintf(out, "# baseline: %s\n# baseline: %s\n", res.NCCL, res.MPI)
	if len(res.Skipped) > 0 {
		fmt.Fprintf(out, "# skipped sizes below one element a rank: %v\n", res.Skipped)
	}
	fmt.Fprintf(out, "%12s %12s %6s %6s %10s %8s %8s %7s", "size", "count", "type", "redop", "time(us)", "algbw", "busbw", "#wrong")
	if res.HaveNCCL {
		fmt.Fprintf(out, " %10s %8s %7s %7s", "nccl(us)", "busbw", "#wrong", "ratio")
	}
	if res.HaveMPI {
		fmt.Fprintf(out, " %10s %8s %7s %7s", "mpi(us)", "busbw", "#wrong", "ratio")
	}
	picked := len(res.Rows) > 0 && res.Rows[0].Schedule != ""
	if picked {
		fmt.Fprintf(out, "  schedule")
	}
	if f.plan {
		fmt.Fprintf(out, "  mode")
	}
	fmt.Fprintln(out)
	for _, r := range res.Rows {
		fmt.Fprintf(out, "%12d %12d %6s %6s %10.2f %8.2f %8.2f %7d", r.Bytes, r.Count, r.Type, r.RedOp, r.Seconds*1e6, r.AlgBW, r.BusBW, r.Wrong)
		if res.HaveNCCL {
			fmt.Fprintf(out, " %10.2f %8.2f %7d %7.2f", r.NCCLSec*1e6, r.NCCLBusBW, r.NCCLWrong, r.Ratio)
		}
		if res.HaveMPI {
			fmt.Fprintf(out, " %10.2f %8.2f %7d %7.2f", r.MPISec*1e6, r.MPIBusBW, r.MPIWrong, r.MPIRatio)
		}
		if picked {
			fmt.Fprintf(out, "  %s", r.Schedule)
		}
		if f.plan {
			fmt.Fprintf(out, "  %s", cmp.Or(r.PlanMode, "-"))
		}
		fmt.Fprintln(out)
	}
}

func writeRedJSON(path string, meta redMeta, rows []bench.RedBenchRow) error {
	lines := make([]any, len(rows))
	for i, r := range rows {
		lines[i] = struct {
			Kind string `json:"kind"`
			bench.RedBenchRow
		}{"row", r}
	}
	return writeJSONLines(path, meta, lines)
}

// redChart is busbw against size for the schedule and the baselines.
func redChart(title, algo string, res *bench.RedBenchResult) plot.Chart {
	c := plot.Chart{Title: title, XLabel: "size (input bytes a rank)", YLabel: "busbw (GB/s)"}
	own := plot.Series{Name: "luacoll " + algo, Color: plot.Blue}
	ref := plot.Series{Name: "NCCL", Color: plot.Red}
	mref := plot.Series{Name: "Open MPI", Color: plot.Orange}
	for _, r := range res.Rows {
		c.X = append(c.X, math.Log2(float64(r.Bytes)))
		c.XTicks = append(c.XTicks, humanBytes(r.Bytes))
		own.Y = append(own.Y, r.BusBW)
		ref.Y = append(ref.Y, r.NCCLBusBW)
		mref.Y = append(mref.Y, r.MPIBusBW)
	}
	c.Series = append(c.Series, own)
	if res.HaveNCCL {
		c.Series = append(c.Series, ref)
	}
	if res.HaveMPI {
		c.Series = append(c.Series, mref)
	}
	return c
}
