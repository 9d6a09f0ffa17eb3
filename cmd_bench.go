package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/luacoll/luacoll/engine"
	"github.com/luacoll/luacoll/engine/bench"
	"github.com/luacoll/luacoll/engine/launch"
	"github.com/luacoll/luacoll/transport"
)

const benchUsage = `luacoll bench put|pingpong|barrier|allgather|reduce_scatter|allreduce [-n N] [flags]

  put       put bandwidth rank 0 -> rank 1 for sizes -b..-e (x -f), with a plain
            in-process copy of each size measured in the same run as the ceiling
  pingpong  8-byte put_signal -> wait ping-pong between ranks 0 and 1: median one-way latency
  barrier   window barrier latency over all N ranks (median of batches of 100);
            --vs mpi, under Open MPI's mpirun: MPI_Barrier beside it
  allgather the persistent all-gather, nccl-tests columns, --vs nccl on CUDA,
            --vs direct beside a Lua schedule ('luacoll bench allgather --help')
  reduce_scatter, allreduce
            a reduction schedule of scripts/lib, nccl-tests columns plus type and
            redop, checked; --vs mpi on the host, --vs nccl on CUDA ('--help')

Every rank is a process, as with 'luacoll run'. Rank 0 prints the table.
--trace FILE writes every rank's timeline, as with 'luacoll run'. A bench that
hangs: Ctrl-\ (SIGQUIT to the launcher) makes every rank say which benchmark
(and, for put, which size) it was measuring and the wait it was in, write its Go
stacks to a file it names, and exit. Ctrl-C stops every rank's waits at once and
exits 130 (SIGTERM 143).`

// parseSize reads a positive size for -b and -e (transport.ParseSize).
func parseSize(s string) (uint64, error) {
	v, ok := transport.ParseSize(s)
	if !ok || v == 0 {
		return 0, fmt.Errorf("size %q: want a positive integer with an optional K, M or G suffix", s)
	}
	return v, nil
}

// benchOpts holds the checked flags of bench put, pingpong and barrier.
type benchOpts struct {
	what          string
	lo, hi        uint64
	factor, iters int
	path          string
	bidir         bool
	mode          string
	symModes      []string
	vsMPI         bool
	jsonOut       string
}

func cmdBench(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprintln(stdout, "Usage: "+benchUsage)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	what := args[0]
	switch what {
	case "allgather":
		return cmdBenchAllgather(args[1:], stdout, stderr)
	case "reduce_scatter", "allreduce":
		return cmdBenchReduce(what, args[1:], stdout, stderr)
	case "put", "pingpong", "barrier":
	default:
		fmt.Fprintf(stderr, "luacoll bench: unknown benchmark %q\n\nUsage: %s\n", what, benchUsage)
		return 2
	}
	f, o, code, ok := parseBenchFlags(what, args[1:], stdout, stderr)
	if !ok {
		return code
	}
	ctx, stop := signalContext()
	defer stop()
	env, isRank, err := jobEnv(func() error {
		if o.jsonOut == "" {
			return nil
		}
		// Rank 0 writes it after the run: refuse a name it cannot write now.
		if err := checkWritable(o.jsonOut); err != nil {
			return fmt.Errorf("--json %w", err)
		}
		return nil
	})
	if err != nil {
		fmt.Fprintf(stderr, "luacoll bench: %v\n", err)
		return 2
	}
	if o.vsMPI && !underMPIRun(env, isRank, f.n, "barrier", args[1:], stderr) {
		return 2
	}
	at := &benchAt{what: "bench " + what}
	job := launchJob{prog: "bench", sayInterrupt: true, failProg: "bench " + what, defaultN: 2, args: append([]string{"bench"}, args...), progress: true, at: at}
	return f.launchOrRun(ctx, job, env, isRank, stdout, stderr, func(ctx context.Context, c *engine.Comm) error {
		return runBench(ctx, c, o, at, stdout, stderr)
	})
}

// parseBenchFlags reads and checks the flags of bench put, pingpong or
// barrier (args after the benchmark's name). When ok is false, the
// caller returns code: the error or help has been printed.
func parseBenchFlags(what string, args []string, stdout, stderr io.Writer) (f rankFlags, o benchOpts, code int, ok bool) {
	fs := newFlagSet("bench "+what, benchUsage, stderr)
	f.register(fs, 2)
	minS := fs.String("b", "1M", "smallest size (put)")
	maxS := fs.String("e", "256M", "largest size (put)")
	factor := fs.Int("f", 4, "size multiplication factor (put)")
	iters := fs.Int("iters", 0, "iterations per measurement (default: put 5, pingpong 20000, barrier 5000)")
	jsonOut := fs.String("json", "", "also write the rows as JSON Lines to FILE")
	path := fs.String("path", "auto", "window path on CUDA: auto, ce (copy engines) or sm (kernels)")
	bidir := fs.Bool("bidir", false, "put: ranks 0 and 1 put to each other at once (figures per direction)")
	mode := fs.String("mode", "push", "put: push (puts) or pull (gets from the peer's window)")
	vs := fs.String("vs", "", "barrier: mpi measures MPI_Barrier in the same processes (host, under Open MPI's mpirun)")
	if code, ok := parse(fs, args, stdout); !ok {
		return f, o, code, false
	}
	// --symmetric both (put, pingpong): the same measurements with
	// symmetric and with asymmetric windows, in one table.
	symModes := []string{""}
	if f.symmetric == "both" {
		if what == "barrier" {
			fmt.Fprintf(stderr, "luacoll bench: --symmetric both: only put and pingpong compare the window modes\n")
			return f, o, 2, false
		}
		symModes = []string{"on", "off"}
		f.symmetric = "auto"
	}
	if err := f.check(); err != nil {
		fmt.Fprintf(stderr, "luacoll bench: %v\n", err)
		return f, o, 2, false
	}
	// Only put sweeps sizes: pingpong times 8-byte messages and barrier
	// none, so a size flag there is refused rather than ignored.
	var sizeFlags []string
	itersSet := false
	fs.Visit(func(fl *flag.Flag) {
		if fl.Name == "b" || fl.Name == "e" || fl.Name == "f" || fl.Name == "bidir" || fl.Name == "mode" {
			sizeFlags = append(sizeFlags, "-"+fl.Name)
		}
		itersSet = itersSet || fl.Name == "iters"
	})
	lo, err := parseSize(*minS)
	if what != "put" && len(sizeFlags) > 0 {
		err = fmt.Errorf("%s: bench %s sweeps no sizes (pingpong times 8-byte messages, barrier none); -b, -e, -f, --bidir and --mode are bench put's", strings.Join(sizeFlags, ", "), what)
	}
	if err == nil {
		var hi uint64
		hi, err = parseSize(*maxS)
		if err == nil && hi < lo {
			err = fmt.Errorf("-e %s is smaller than -b %s", *maxS, *minS)
		}
		if err == nil && *factor < 2 {
			err = fmt.Errorf("-f %d: want 2 or more", *factor)
		}
		if err == nil && *path != "auto" && *path != "ce" && *path != "sm" {
			err = fmt.Errorf("--path %q: want auto, ce or sm", *path)
		}
		if err == nil && *mode != "push" && *mode != "pull" {
			err = fmt.Errorf("--mode %q: want push or pull", *mode)
		}
		if err == nil && (*iters < 0 || (*iters == 0 && itersSet)) {
			err = fmt.Errorf("--iters %d: must be positive", *iters)
		}
		if err == nil && f.n == 1 && what != "barrier" {
			err = fmt.Errorf("-n 1: bench %s needs at least 2 ranks (rank 0 and rank 1 trade messages)", what)
		}
		if err == nil && *vs != "" && (*vs != "mpi" || what != "barrier") {
			err = fmt.Errorf("--vs %q: bench %s has no such baseline (bench barrier takes --vs mpi)", *vs, what)
		}
		if err == nil && *vs == "mpi" && f.device != "host" {
			err = fmt.Errorf("--vs mpi: MPI_Barrier is measured on the host backend only (--device host)")
		}
		if err == nil {
			*maxS = fmt.Sprint(hi)
		}
	}
	if err != nil {
		fmt.Fprintf(stderr, "luacoll bench: %v\n", err)
		return f, o, 2, false
	}
	hi, _ := strconv.ParseUint(*maxS, 10, 64)
	o = benchOpts{what: what, lo: lo, hi: hi, factor: *factor, iters: *iters, path: *path, bidir: *bidir,
		mode: *mode, symModes: symModes, vsMPI: *vs == "mpi", jsonOut: *jsonOut}
	return f, o, 0, true
}

// runBench measures bench o.what on this rank; rank 0 prints its table
// and writes the rows to o.jsonOut when that is set.
func runBench(ctx context.Context, c *engine.Comm, o benchOpts, at *benchAt, stdout, stderr io.Writer) error {
	var rows []bench.BenchRow
	place, cpus, err := c.Placement(ctx)
	if err != nil {
		return err
	}
	header := fmt.Sprintf("# luacoll bench %s: %s backend, %d ranks, luacoll %s\n# CPUs: %s (--cpu-bind %s)",
		o.what, c.Backend.Name(), c.Env.Size, versionString(), place, c.Opts.CPUBind)
	iters := o.iters
	switch o.what {
	case "put":
		if iters == 0 {
			iters = 5
		}
		rows, err = benchPutTable(ctx, c, header, o.lo, o.hi, o.factor, iters, o.path, o.bidir, o.mode, o.symModes, at, stdout, stderr)
	case "pingpong":
		if iters == 0 {
			iters = 20000
		}
		rows, err = benchPingPongTable(ctx, c, header, iters, o.path, o.symModes, stdout)
	case "barrier":
		if iters == 0 {
			iters = 5000
		}
		rows, err = benchBarrierTable(ctx, c, header, iters, o.path, o.vsMPI, stdout)
	}
	if err != nil {
		return err
	}
	if c.Env.Rank == 0 && o.jsonOut != "" {
		return writeBenchJSON(o.jsonOut, o.what, c, cpus, rows)
	}
	return nil
}

// benchPingPongTable runs bench pingpong (host-issued and device rows,
// once per window mode in symModes) and prints its table on rank 0.
func benchPingPongTable(ctx context.Context, c *engine.Comm, header string, iters int, path string, symModes []string, stdout io.Writer) ([]bench.BenchRow, error) {
	me := c.Env.Rank
	var rows []bench.BenchRow
	var r bench.BenchRow
	var dev []bench.BenchRow
	for _, sm := range symModes {
		got, err := withSymmetric(c, sm, func() ([]bench.BenchRow, error) {
			h, err := bench.BenchPingPong(ctx, c, iters, path)
			if err != nil {
				return nil, err
			}
			d, err := bench.BenchDevicePingPong(ctx, c, iters)
			return append([]bench.BenchRow{h}, d...), err
		})
		if err != nil {
			return nil, err
		}
		if sm != "" {
			for i := range got {
				got[i].Name += " [sym " + sm + "]"
			}
			got[0].Name = "host-issued put_signal + wait [sym " + sm + "]"
		}
		if len(rows) == 0 {
			r = got[0]
		}
		rows = append(rows, got...)
		dev = append(dev, got[1:]...)
	}
	if me == 0 {
		fmt.Fprintln(stdout, header)
		fmt.Fprintf(stdout, "# 8-byte put_signal -> wait_signal_from ping-pong between ranks 0 and 1, window path %s; one-way latency = median round trip / 2;\n", path)
		fmt.Fprintf(stdout, "# #wrong: after the run, ranks 0 and 1 each check the 8 bytes they received (the same every round trip)\n")
		if len(dev) > 0 {
			fmt.Fprintf(stdout, "# device rows: one kernel per rank, device clock; ratio = time / the raw flag's (which moves no payload)\n")
		}
		if len(symModes) > 1 {
			fmt.Fprintf(stdout, "# [sym on]: symmetric windows (one flat range), [sym off]: separate mappings; each ratio is to the raw flag of its own pass\n")
		}
		fmt.Fprintf(stdout, "# %-38s %8s %8s %11s %11s %7s %7s\n", "how", "size(B)", "iters", "one-way(us)", "rtt(us)", "ratio", "#wrong")
		if len(symModes) == 1 {
			pingRow(stdout, "host-issued put_signal + wait", r, iters, true)
			for _, d := range dev {
				pingRow(stdout, d.Name, d, iters, !strings.HasPrefix(d.Name, "raw flag"))
			}
		} else {
			for _, d := range rows {
				pingRow(stdout, d.Name, d, iters, !strings.HasPrefix(d.Name, "raw flag"))
			}
		}
		fmt.Fprintf(stdout, "# rank 0, host-issued round trip (medians): enqueue %.2f us, sync %.2f us; one store to its own slot + sync: %.2f us\n", r.Enqueue*1e6, r.Sync*1e6, r.Ref*1e6)
	}
	return rows, nil
}

// benchBarrierTable runs bench barrier (host-issued, MPI_Barrier when
// vsMPI, and the device loop where there is one) and prints its table
// on rank 0.
func benchBarrierTable(ctx context.Context, c *engine.Comm, header string, iters int, path string, vsMPI bool, stdout io.Writer) ([]bench.BenchRow, error) {
	me := c.Env.Rank
	br, err := bench.BenchBarrierVs(ctx, c, iters, path, vsMPI)
	if err != nil {
		return nil, err
	}
	r := br.Row
	rows := []bench.BenchRow{r}
	if br.HaveMPI {
		rows = append(rows, br.MPIRow)
	}
	dr, ok, err := bench.BenchDeviceBarrier(ctx, c, iters)
	if err != nil {
		return nil, err
	}
	if ok {
		rows = append(rows, dr)
	}
	if me == 0 {
		fmt.Fprintln(stdout, header)
		fmt.Fprintf(stdout, "# window barrier over every rank, path %s; host-issued: median per barrier over batches of 100\n", path)
		if ok {
			fmt.Fprintf(stdout, "# device loop: every barrier in one kernel per rank, device clock\n")
		}
		if br.HaveMPI {
			fmt.Fprintf(stdout, "# baseline: MPI_Barrier, %s, same processes, batches of 100 in turn with the window barrier's; ratio = MPI's time / the window barrier's\n", br.MPI)
		}
		if br.HaveMPI {
			fmt.Fprintf(stdout, "# %-30s %8s %8s %11s %7s\n", "how", "ranks", "iters", "time(us)", "ratio")
			fmt.Fprintf(stdout, "  %-30s %8d %8d %11.2f %7s\n", "host-issued window barrier", c.Env.Size, iters, r.Seconds*1e6, "-")
			fmt.Fprintf(stdout, "  %-30s %8d %8d %11.2f %7.2f\n", "MPI_Barrier", c.Env.Size, iters, br.MPIRow.Seconds*1e6, br.MPIRow.Ratio)
		} else {
			fmt.Fprintf(stdout, "# %-30s %8s %8s %11s\n", "how", "ranks", "iters", "time(us)")
			fmt.Fprintf(stdout, "  %-30s %8d %8d %11.2f\n", "host-issued window barrier", c.Env.Size, iters, r.Seconds*1e6)
		}
		if ok {
			fmt.Fprintf(stdout, "  %-30s %8d %8d %11.3f\n", dr.Name, c.Env.Size, iters, dr.Seconds*1e6)
		}
	}
	return rows, nil
}

// writeBenchJSON writes rows to path as JSON Lines, each with the
// bench's name, backend, ranks, version and CPUs.
func writeBenchJSON(path, what string, c *engine.Comm, cpus []string, rows []bench.BenchRow) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	enc := json.NewEncoder(f)
	for _, r := range rows {
		if err := enc.Encode(struct {
			Bench   string   `json:"bench"`
			Backend string   `json:"backend"`
			Ranks   int      `json:"ranks"`
			Version string   `json:"version"`
			CPUs    []string `json:"cpus"`
			bench.BenchRow
		}{what, c.Backend.Name(), c.Env.Size, versionString(), cpus, r}); err != nil {
			return err
		}
	}
	return nil
}

// benchPutTable runs bench put and prints its table on rank 0: the header
// first, then each row as soon as it is measured, so a sweep that fails
// at a later size keeps the rows it finished.
func benchPutTable(ctx context.Context, c *engine.Comm, header string, lo, hi uint64, factor, iters int, path string, bidir bool, mode string, symModes []string, at *benchAt, stdout, stderr io.Writer) ([]bench.BenchRow, error) {
	me := c.Env.Rank
	var sizes []uint64
	for s := lo; s <= hi; s *= uint64(factor) {
		sizes = append(sizes, s)
	}
	at.sizes = sizes
	if me == 0 {
		fmt.Fprintln(stdout, header)
		ref := "ref = in-process copy of the same size, as the host stream copies"
		switch {
		case c.Opts.Device == "cuda" && c.Rank.Topo.AnyNet():
			ref = "peers over the network: the host runs the puts (proxy path), timed by the wall clock; ref = in-process copy of the same size, as the host stream copies"
		case c.Opts.Device == "cuda":
			ref = "ref = cuMemcpyAsync of the same bytes to the peer's memory (peer copy); both timed by events on the device"
		}
		dir := "rank 0 -> rank 1"
		if bidir {
			dir = "ranks 0 <-> 1 at once (per direction)"
		}
		dir += ", mode " + mode
		fmt.Fprintf(stdout, "# %s, window path %s, median of %d iterations, alternating; %s, same run\n", dir, path, iters, ref)
		if len(symModes) > 1 {
			fmt.Fprintf(stdout, "# symmetric: on = every rank's part in one flat range, off = separate mappings; ratio to the ref of the same pass\n")
			fmt.Fprintf(stdout, "# %-9s %12s %10s %10s %10s %7s %7s\n", "symmetric", "size(B)", "time(us)", "put GB/s", "ref GB/s", "ratio", "#wrong")
		} else {
			fmt.Fprintf(stdout, "# %12s %10s %10s %10s %7s %7s\n", "size(B)", "time(us)", "put GB/s", "ref GB/s", "ratio", "#wrong")
		}
	}
	progress := progressWriter(me, stderr)
	var rows []bench.BenchRow
	for _, sm := range symModes {
		at.newPass("")
		if len(symModes) > 1 {
			at.newPass("symmetric " + sm)
		}
		putRow := func(r bench.BenchRow) error {
			at.done++
			switch {
			case me != 0:
			case len(symModes) > 1:
				fmt.Fprintf(stdout, "  %-9s %12d %10.1f %10.2f %10.2f %7.3f %7d\n", sm, r.Bytes, r.Seconds*1e6, r.GBps, r.Ref, r.Ratio, r.Wrong)
			default:
				fmt.Fprintf(stdout, "  %12d %10.1f %10.2f %10.2f %7.3f %7d\n", r.Bytes, r.Seconds*1e6, r.GBps, r.Ref, r.Ratio, r.Wrong)
			}
			return nil
		}
		r, err := withSymmetric(c, sm, func() ([]bench.BenchRow, error) {
			return bench.BenchPut(ctx, c, sizes, iters, path, bidir, mode, progress, putRow)
		})
		if err != nil {
			return nil, err
		}
		rows = append(rows, r...)
	}
	return rows, nil
}

// reportRankFailure prints why a bench rank failed, once, and returns its
// exit status. The rank is named once; a timeout says which flag sets it;
// a rank stopped by another rank's failure says nothing under luacoll's
// launcher (which shows that rank's own report) and one line under
// another, and gives way to it (launch.ExitPeerFailed).
func reportRankFailure(stderr io.Writer, prog string, env launch.RankEnv, comm *engine.Comm, err error, timeout time.Duration) int {
	other := engine.OtherRanksFailure(err, env.Rank)
	if other < 0 {
		other = engine.OtherRanksFailure(comm.Abort.Err(), env.Rank)
	}
	if other >= 0 {
		if env.Source != launch.SourceLuacoll {
			fmt.Fprintf(stderr, "%s: rank %d: stopped: rank %d failed\n", prog, env.Rank, other)
		}
		return launch.ExitPeerFailed
	}
	fmt.Fprintf(stderr, "%s: %s\n", prog, engine.RankMessage(err, env.Rank))
	if hint := engine.TimeoutHint(err, timeout); hint != "" {
		fmt.Fprintf(stderr, "%s: %s\n", prog, hint)
	}
	return 1
}

// pingRow prints one ping-pong row (r.Seconds is the one-way latency;
// checked: the row's payload was checked).
func pingRow(w io.Writer, how string, r bench.BenchRow, iters int, checked bool) {
	ratio, wrong := "-", "-"
	if r.Ratio > 0 {
		ratio = fmt.Sprintf("%.2f", r.Ratio)
	}
	if checked {
		wrong = fmt.Sprint(r.Wrong)
	}
	fmt.Fprintf(w, "  %-38s %8d %8d %11.3f %11.3f %7s %7s\n", how, r.Bytes, iters, r.Seconds*1e6, 2*r.Seconds*1e6, ratio, wrong)
}

// checkWritable returns an error unless path's folder exists and a new
// file can be made there (it makes one and removes it): files written
// after a run are checked before it.
func checkWritable(path string) error {
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		return fmt.Errorf("%q is a directory: name a file", path)
	}
	f, err := os.CreateTemp(filepath.Dir(path), ".luacoll-check-*")
	if err != nil {
		return fmt.Errorf("%q: cannot write there: %w", path, err)
	}
	name := f.Name()
	f.Close()
	return os.Remove(name)
}

// terminalOf returns w as a file when it is a terminal, else nil.
func terminalOf(w io.Writer) *os.File {
	if f, ok := w.(*os.File); ok && launch.IsTerminal(f) {
		return f
	}
	return nil
}

// progressWriter is where rank me draws a benchmark's progress line: on
// rank 0, the terminal its launcher handed over or its own stderr when
// that is one; nil (no progress) otherwise.
func progressWriter(me int, stderr io.Writer) io.Writer {
	if me != 0 {
		return nil
	}
	if f := launch.ProgressFile(os.Getenv, terminalOf(stderr)); f != nil {
		return f
	}
	return nil
}

// withSymmetric runs measure with the job's symmetric default set to mode
// ("on" or "off"; "" leaves it) and marks the rows with it.
func withSymmetric(c *engine.Comm, mode string, measure func() ([]bench.BenchRow, error)) ([]bench.BenchRow, error) {
	if mode == "" {
		return measure()
	}
	old := c.Opts.Symmetric
	c.Opts.Symmetric = mode
	defer func() { c.Opts.Symmetric = old }()
	rows, err := measure()
	for i := range rows {
		rows[i].Symmetric = mode
	}
	return rows, err
}
