package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/luacoll/luacoll/engine"
)

const benchUsage = `luacoll bench put|pingpong|barrier|allgather [-n N] [flags]

  put       put bandwidth rank 0 -> rank 1 for sizes -b..-e (x -f), with a plain
            in-process copy of each size measured in the same run as the ceiling
  pingpong  8-byte put_signal -> wait ping-pong between ranks 0 and 1: median one-way latency
  barrier   window barrier latency over all N ranks (median of batches of 100)
  allgather the persistent all-gather, nccl-tests columns, --vs nccl on CUDA,
            --vs direct beside a Lua schedule ('luacoll bench allgather --help')

Every rank is a process, as with 'luacoll run'. Rank 0 prints the table.`

func parseSize(s string) (uint64, error) {
	mult := uint64(1)
	u := strings.ToUpper(strings.TrimSpace(s))
	for _, suf := range []struct {
		s string
		m uint64
	}{{"G", 1 << 30}, {"M", 1 << 20}, {"K", 1 << 10}} {
		if strings.HasSuffix(u, suf.s) {
			mult, u = suf.m, strings.TrimSuffix(u, suf.s)
			break
		}
	}
	v, err := strconv.ParseUint(u, 10, 64)
	if err != nil || v == 0 {
		return 0, fmt.Errorf("size %q: want a positive integer with an optional K, M or G suffix", s)
	}
	return v * mult, nil
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
	case "put", "pingpong", "barrier":
	default:
		fmt.Fprintf(stderr, "luacoll bench: unknown benchmark %q\n\nUsage: %s\n", what, benchUsage)
		return 2
	}
	fs := newFlagSet("bench "+what, benchUsage, stderr)
	var f rankFlags
	f.register(fs)
	minS := fs.String("b", "1M", "smallest size (put)")
	maxS := fs.String("e", "256M", "largest size (put)")
	factor := fs.Int("f", 4, "size multiplication factor (put)")
	iters := fs.Int("iters", 0, "iterations per measurement (default: put 5, pingpong 20000, barrier 5000)")
	jsonOut := fs.String("json", "", "also write the rows as JSON Lines to FILE")
	path := fs.String("path", "auto", "window path on CUDA: auto, ce (copy engines) or sm (kernels)")
	bidir := fs.Bool("bidir", false, "put: ranks 0 and 1 put to each other at once (figures per direction)")
	mode := fs.String("mode", "push", "put: push (puts) or pull (gets from the peer's window)")
	if code, ok := parse(fs, args[1:], stdout); !ok {
		return code
	}
	if err := f.check(); err != nil {
		fmt.Fprintf(stderr, "luacoll bench: %v\n", err)
		return 2
	}
	lo, err := parseSize(*minS)
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
		if err == nil && *iters < 0 {
			err = fmt.Errorf("--iters %d: must be positive", *iters)
		}
		if err == nil {
			*maxS = fmt.Sprint(hi)
		}
	}
	if err != nil {
		fmt.Fprintf(stderr, "luacoll bench: %v\n", err)
		return 2
	}
	hi, _ := strconv.ParseUint(*maxS, 10, 64)
	ctx, stop := signalContext()
	defer stop()
	env, isRank, err := engine.RankEnvFromEnv(os.Getenv)
	if err != nil {
		fmt.Fprintf(stderr, "luacoll bench: %v\n", err)
		return 2
	}
	if !isRank {
		n := f.n
		if n == 0 {
			n = 2
		}
		exe, err := os.Executable()
		if err != nil {
			fmt.Fprintf(stderr, "luacoll bench: %v\n", err)
			return 1
		}
		res, err := engine.Launch(ctx, engine.LaunchConfig{N: n, Path: exe, Args: append([]string{"bench"}, args...),
			Prefix: false, Stdout: stdout, Stderr: stderr, Grace: f.timeout + 5*time.Second, Progress: terminalOf(stderr)})
		if err != nil {
			fmt.Fprintf(stderr, "luacoll bench: %v\n", err)
			if res.ExitCode == 0 {
				return 1
			}
		}
		return res.ExitCode
	}
	comm, err := engine.Open(ctx, env, f.options(), cudaBackend)
	if err != nil {
		fmt.Fprintf(stderr, "luacoll bench: %v\n", err)
		return 1
	}
	err = runBench(ctx, comm, what, lo, hi, *factor, *iters, *path, *bidir, *mode, *jsonOut, stdout, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "luacoll bench %s: rank %d: %v\n", what, env.Rank, err)
		_ = comm.Close(err)
		return 1
	}
	if err := comm.Close(nil); err != nil {
		fmt.Fprintf(stderr, "luacoll bench: %v\n", err)
		return 1
	}
	return 0
}

func runBench(ctx context.Context, c *engine.Comm, what string, lo, hi uint64, factor, iters int, path string, bidir bool, mode string, jsonOut string, stdout, stderr io.Writer) error {
	me := c.Env.Rank
	var rows []engine.BenchRow
	place, cpus, err := c.Placement(ctx)
	if err != nil {
		return err
	}
	header := fmt.Sprintf("# luacoll bench %s: %s backend, %d ranks, luacoll %s\n# CPUs: %s (--cpu-bind %s)",
		what, c.Backend.Name(), c.Env.Size, versionString(), place, c.Opts.CPUBind)
	switch what {
	case "put":
		if iters == 0 {
			iters = 5
		}
		var sizes []uint64
		for s := lo; s <= hi; s *= uint64(factor) {
			sizes = append(sizes, s)
		}
		progress := progressWriter(me, stderr)
		r, err := engine.BenchPut(ctx, c, sizes, iters, path, bidir, mode, progress)
		if err != nil {
			return err
		}
		rows = r
		if me == 0 {
			fmt.Fprintln(stdout, header)
			ref := "copy = plain in-process copy of the same size"
			if c.Opts.Device == "cuda" {
				ref = "ref = cuMemcpyAsync of the same bytes to the peer's memory (peer copy); both timed by events on the device"
			}
			dir := "rank 0 -> rank 1"
			if bidir {
				dir = "ranks 0 <-> 1 at once (per direction)"
			}
			dir += ", mode " + mode
			fmt.Fprintf(stdout, "# %s, window path %s, median of %d iterations, alternating; %s, same run\n", dir, path, iters, ref)
			fmt.Fprintf(stdout, "# %12s %10s %10s %10s %7s %7s\n", "size(B)", "time(us)", "put GB/s", "ref GB/s", "ratio", "#wrong")
			for _, r := range rows {
				fmt.Fprintf(stdout, "  %12d %10.1f %10.2f %10.2f %7.3f %7d\n", r.Bytes, r.Seconds*1e6, r.GBps, r.Ref, r.Ratio, r.Wrong)
			}
		}
	case "pingpong":
		if iters == 0 {
			iters = 20000
		}
		r, err := engine.BenchPingPong(ctx, c, iters, path)
		if err != nil {
			return err
		}
		rows = []engine.BenchRow{r}
		if me == 0 {
			fmt.Fprintln(stdout, header)
			fmt.Fprintf(stdout, "# 8-byte put_signal -> wait_signal_from ping-pong, ranks 0 and 1, window path %s, %d round trips\n", path, iters)
			fmt.Fprintf(stdout, "  one-way latency (median): %.2f us (round trip %.2f us)\n", r.Seconds*1e6, 2*r.Seconds*1e6)
			fmt.Fprintf(stdout, "  rank 0 per round trip (medians): enqueue %.2f us, sync %.2f us; one store to its own slot + sync: %.2f us\n", r.Enqueue*1e6, r.Sync*1e6, r.Ref*1e6)
		}
		dev, err := engine.BenchDevicePingPong(ctx, c, iters)
		if err != nil {
			return err
		}
		if me == 0 && len(dev) == 2 {
			fmt.Fprintf(stdout, "# device-initiated, one kernel per rank, %d round trips, device clock\n", iters)
			fmt.Fprintf(stdout, "  %s one-way: %.3f us\n  %s one-way: %.3f us\n  ratio put_signal / raw: %.2f\n",
				dev[0].Name, dev[0].Seconds*1e6, dev[1].Name, dev[1].Seconds*1e6, dev[0].Ratio)
		}
		rows = append(rows, dev...)
	case "barrier":
		if iters == 0 {
			iters = 5000
		}
		r, err := engine.BenchBarrier(ctx, c, iters, path)
		if err != nil {
			return err
		}
		rows = []engine.BenchRow{r}
		if me == 0 {
			fmt.Fprintln(stdout, header)
			fmt.Fprintf(stdout, "# window barrier, path %s, %d barriers in batches of 100\n", path, iters)
			fmt.Fprintf(stdout, "  barrier latency (median of batches): %.2f us at %d ranks\n", r.Seconds*1e6, c.Env.Size)
		}
		dr, ok, err := engine.BenchDeviceBarrier(ctx, c, iters)
		if err != nil {
			return err
		}
		if ok && me == 0 {
			fmt.Fprintf(stdout, "# device-initiated: %d barriers in one kernel per rank, device clock\n", iters)
			fmt.Fprintf(stdout, "  %s: %.3f us per barrier at %d ranks\n", dr.Name, dr.Seconds*1e6, c.Env.Size)
			rows = append(rows, dr)
		}
	}
	if me == 0 && jsonOut != "" {
		f, err := os.Create(jsonOut)
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
				engine.BenchRow
			}{what, c.Backend.Name(), c.Env.Size, versionString(), cpus, r}); err != nil {
				return err
			}
		}
	}
	return nil
}

// terminalOf returns w as a file when it is a terminal, else nil.
func terminalOf(w io.Writer) *os.File {
	if f, ok := w.(*os.File); ok && engine.IsTerminal(f) {
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
	if f := engine.ProgressFile(os.Getenv, terminalOf(stderr)); f != nil {
		return f
	}
	return nil
}
