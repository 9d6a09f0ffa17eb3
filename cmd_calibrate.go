package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"runtime"
	"strings"
	"time"

	"github.com/luacoll/luacoll/cuda"
	"github.com/luacoll/luacoll/engine"
	"github.com/luacoll/luacoll/engine/bench"
	"github.com/luacoll/luacoll/engine/launch"
	"github.com/luacoll/luacoll/engine/plan/cost"
)

const calibrateUsage = `luacoll calibrate [-n 2] [--device host|cuda] [--nodes 2] [-o FILE] [flags]

  Measures the cost model p:estimate and bench allgather --plan predict with:
  between ranks 0 and 1 (the class between them: shm on one host, nvl
  between GPUs, net with --nodes 2), bench put --bidir over sizes -b..-e
  (every rank of a collective puts at once): the times per size, a start
  cost and a per-byte cost past the largest (put; the plain copy beside it:
  self and copy), bench pingpong (what an 8-byte hop costs beyond the put: half to
  the signal, half to the wait) and bench barrier. Writes the model (JSON)
  for the backend's replay modes (host; on CUDA stream, graph and device,
  alike) to FILE with the machine it came from; when FILE exists and is of
  the same backend, the measured classes are merged into it, so a second
  run with --nodes 2 adds net.`

type calFlags struct {
	rank       rankFlags
	out        string
	minS, maxS string
	iters      int
}

func cmdCalibrate(args []string, stdout, stderr io.Writer) int {
	fl := newFlagSet("calibrate", calibrateUsage, stderr)
	var f calFlags
	f.rank.register(fl, 2)
	fl.StringVar(&f.out, "o", "luacoll-model.json", "the model file to write (merged into when it exists)")
	fl.StringVar(&f.minS, "b", "4K", "smallest put size")
	fl.StringVar(&f.maxS, "e", "16M", "largest put size")
	fl.IntVar(&f.iters, "iters", 20, "iterations per put size (pingpong and barrier: 100 times as many)")
	if code, ok := parse(fl, args, stdout); !ok {
		return code
	}
	fail := func(code int, err error) int {
		fmt.Fprintf(stderr, "luacoll calibrate: %v\n", err)
		return code
	}
	sizes, err := calSizes(f.minS, f.maxS)
	if err == nil && f.iters < 1 {
		err = fmt.Errorf("--iters %d: want 1 or more", f.iters)
	}
	if err == nil {
		err = f.rank.check()
	}
	if err != nil {
		return fail(2, err)
	}
	ctx, stop := signalContext()
	defer stop()
	env, isRank, err := launch.RankEnvFromEnv(os.Getenv)
	if err == nil && (!isRank || env.Rank == 0) {
		err = checkWritable(f.out)
	}
	if err != nil {
		return fail(2, err)
	}
	if !isRank {
		n := f.rank.n
		if n == 0 {
			n = 2
		}
		if err := f.rank.checkNodes(n); err != nil {
			return fail(2, err)
		}
		exe, err := os.Executable()
		if err != nil {
			return fail(1, err)
		}
		res, err := f.rank.launch(ctx, launch.LaunchConfig{N: n, Nodes: f.rank.nodes, Path: exe, Args: append([]string{"calibrate"}, args...),
			Stdout: stdout, Stderr: stderr, Grace: f.rank.timeout + 5*time.Second, Progress: terminalOf(stderr)}, "calibrate", stderr)
		if err != nil {
			fmt.Fprintf(stderr, "luacoll calibrate: %v\n", err)
			if res.ExitCode == 0 {
				return 1
			}
		}
		return res.ExitCode
	}
	comm, err := engine.Open(ctx, env, f.rank.options(), cudaBackend)
	if err != nil {
		return engine.ReportOpenError(stderr, "luacoll calibrate: ", env, err)
	}
	m, err := calibrate(ctx, comm, sizes, f.iters, "luacoll calibrate "+strings.Join(args, " "), stderr)
	if err == nil && env.Rank == 0 {
		err = writeModel(f.out, m, stdout)
	}
	if err != nil {
		code := reportRankFailure(stderr, "luacoll calibrate", env, comm, err, f.rank.timeout)
		_ = comm.Close(err)
		return code
	}
	if err := comm.Close(nil); err != nil {
		return fail(1, err)
	}
	return 0
}

func calSizes(lo, hi string) ([]uint64, error) {
	a, err := parseSize(lo)
	if err != nil {
		return nil, fmt.Errorf("-b: %w", err)
	}
	b, err := parseSize(hi)
	if err != nil {
		return nil, fmt.Errorf("-e: %w", err)
	}
	if a == 0 || b < 4*a {
		return nil, fmt.Errorf("-b %s -e %s: want 0 < b and e at least 4 times b, for a line through two sizes or more", lo, hi)
	}
	var out []uint64
	for s := a; s <= b; s *= 4 {
		out = append(out, s)
	}
	return out, nil
}

// calibrate measures the class between ranks 0 and 1 with the put,
// pingpong and barrier benches; rank 0 returns the model.
func calibrate(ctx context.Context, c *engine.Comm, sizes []uint64, iters int, cmdline string, stderr io.Writer) (*cost.Model, error) {
	if c.Size() < 2 {
		return nil, errors.New("calibrate needs 2 ranks or more")
	}
	// Both ranks put at once (--bidir), as every rank of a collective does.
	rows, err := bench.BenchPut(ctx, c, sizes, iters, "auto", true, "push", progressWriter(c.Env.Rank, stderr), nil)
	if err != nil {
		return nil, fmt.Errorf("bench put: %w", err)
	}
	pp, err := bench.BenchPingPong(ctx, c, 100*iters, "auto")
	if err != nil {
		return nil, fmt.Errorf("bench pingpong: %w", err)
	}
	bar, err := bench.BenchBarrier(ctx, c, 100*iters, "auto")
	if err != nil {
		return nil, fmt.Errorf("bench barrier: %w", err)
	}
	if c.Env.Rank != 0 {
		return nil, nil
	}
	var put, copied []float64
	var at []uint64
	for _, r := range rows {
		if r.Ref <= 0 || r.Seconds <= 0 {
			continue
		}
		at = append(at, r.Bytes)
		put = append(put, r.Seconds)
		copied = append(copied, float64(r.Bytes)/(r.Ref*1e9))
	}
	p, err := cost.Fit(at, put)
	if err != nil {
		return nil, fmt.Errorf("the puts: %w", err)
	}
	self, err := cost.Fit(at, copied)
	if err != nil {
		return nil, fmt.Errorf("the plain copies: %w", err)
	}
	hop := pp.Seconds*1e9 - p.AlphaNs - 8*p.BetaNs
	hop = max(hop, 0)
	barrier := cost.Cost{AlphaNs: bar.Seconds * 1e9}
	class := c.Rank.Topo.Kinds[1].String()
	params := map[string]cost.Params{
		class:  {Put: p, Signal: cost.Cost{AlphaNs: hop / 2}, Wait: cost.Cost{AlphaNs: hop / 2}, Copy: self, Barrier: barrier},
		"self": {Put: self, Signal: cost.Cost{AlphaNs: hop / 2}, Wait: cost.Cost{AlphaNs: hop / 2}, Copy: self, Barrier: barrier},
	}
	if class == "net" {
		// Logical nodes split the CPUs: a copy measured in one is no
		// rank's copy on the whole machine.
		delete(params, "self")
	}
	modes := []string{"host"}
	note := fmt.Sprintf("%s: puts %d B-%d B fitted, one-way 8-byte hop %.2f us, barrier of %d ranks %.2f us.", class, at[0], at[len(at)-1], pp.Seconds*1e6, c.Size(), bar.Seconds*1e6)
	if c.Backend.Name() != "host" {
		modes = []string{"stream", "graph", "device"}
		note += " CUDA: measured eagerly; every mode has the same costs."
	}
	m := &cost.Model{Machine: machineName(c), Backend: c.Backend.Name(), Made: time.Now().UTC().Format(time.RFC3339),
		Command: cmdline, Note: note, Modes: map[string]map[string]cost.Params{}}
	for _, mode := range modes {
		m.Modes[mode] = params
	}
	return m, m.Check()
}

// machineName says where a model was measured: host, CPUs, and GPUs.
func machineName(c *engine.Comm) string {
	h, _ := os.Hostname()
	s := fmt.Sprintf("%s, %d CPUs, %s/%s", h, runtime.NumCPU(), runtime.GOOS, runtime.GOARCH)
	if c.Opts.Device == "cuda" {
		var gpus []string
		for _, d := range cuda.Probe().Devices {
			gpus = append(gpus, d.Name)
		}
		s += ", GPUs: " + strings.Join(gpus, ", ")
	}
	return s
}

// writeModel writes m to path, merged into the model there when there is
// one of the same backend.
func writeModel(path string, m *cost.Model, stdout io.Writer) error {
	old, err := os.ReadFile(path)
	switch {
	case err == nil && len(old) > 0:
		prev, perr := cost.Parse(old)
		if perr != nil {
			return fmt.Errorf("-o %s holds no model to merge into: %w", path, perr)
		}
		if m, err = cost.Merge(prev, m); err != nil {
			return fmt.Errorf("-o %s: %w", path, err)
		}
	case err != nil && !errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("-o: %w", err)
	}
	data, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(path, append(data, '\n'), 0o644); err != nil {
		return fmt.Errorf("-o: %w", err)
	}
	fmt.Fprintf(stdout, "luacoll calibrate: wrote %s (%s backend; %s)\n", path, m.Backend, m.Note)
	return nil
}

// loadModel reads a cost model (--model FILE); "" is none (nil).
func loadModel(path string) (*cost.Model, error) {
	if path == "" {
		return nil, nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--model: %w", err)
	}
	m, err := cost.Parse(data)
	if err != nil {
		return nil, fmt.Errorf("--model %s: %w", path, err)
	}
	return m, nil
}
