package main

import (
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"runtime/debug"
	"runtime/pprof"
	"strconv"
	"strings"
	"time"

	"github.com/luacoll/luacoll/engine/plan/cost"
	"github.com/luacoll/luacoll/luabind"
	"github.com/luacoll/luacoll/luabind/simrank"
)

const checkUsage = `luacoll check [-n N] [--timeout D] [--layout NODESxRANKS | --simulate]
              [--model host|cuda|FILE] [--mode MODE] script.lua [flags] [-- args...]

  Runs the script on N ranks of this process (host backend, whatever device
  it was written for) with every plan (lc.plan) verified as it is made:
  every rank's op list is simulated against the others for deadlocks,
  races and bounds, and p:verify{collective = ...} checks results as the
  script asks. No plan is replayed (p:run does nothing; p:info().mode is
  "check"), so an assert that fails after a skipped p:run is passed over
  and listed at the end. Prints each plan's report; exit status 0 when the
  script ran and every verification was clean, 1 otherwise, 2 for bad
  usage, 128 + its number for a signal that stopped it (130: Ctrl-C).

  Simulated ranks (--layout or --simulate; N up to 8192): no windows and no
  rank processes. The script runs once per simulated rank in one process,
  ranks N-1 down to 1 on one goroutine a CPU (at most 8; a failure is
  reported as the highest failing rank's, as if they ran in turn), then
  rank 0 alone; only rank 0's print and io.write reach the output. Its
  lc module only records: lc.rank, lc.size, lc.local_rank, lc.node and
  lc.nodes() follow the layout, lc.window and lc.buffer are shapes without
  memory (w:info and w:transport answer from the layout and the model:
  self, shm or nvl within a node, net between), lc.plan records the
  body's operations, lc.sync, lc.barrier and w:sync do nothing, p:run is
  skipped. When rank 0 makes a plan, every rank's list
  is there: it is verified, and its time per replay estimated with the
  cost model (--model: "host" or "cuda", the model shipped for that
  backend, or a file luacoll calibrate wrote; default host; --mode its
  replay mode, default host, else stream) on the layout: NODES nodes of
  RANKS consecutive ranks, self for a rank itself, shm (nvl with a CUDA
  model) within a node, net between nodes (--simulate: one node). Each
  plan prints the estimate and its critical path, then the verifier's
  verdict: a plan is verified once, by the script's p:verify when that
  comes before the next lc.plan or p:free, else then or at the end (so a
  failing plan stops the script there, not at lc.plan). Rank 0's
  p:verify and p:estimate return the real reports, the other
  ranks' p:verify a report marked pending, and only rank 0 prints. What
  needs data or real ranks (a window operation outside a plan, reading a
  buffer, timers, built-in collectives) fails with "check --simulate: X
  needs real ranks". A verification that reaches its bound of work
  (--budget) stops and claims nothing about the plan. Progress goes to
  stderr every 2 s (the ranks recorded, then the share of its ops each
  running verification has simulated); the time taken and the memory
  used end the report. With --ahead N (default 2), a shadow run
  of rank 0 records its lists first, and a second goroutine verifies and
  estimates the plans ahead of rank 0 (verifications first), at most N
  verifications at once;
  rank 0 takes those results only where its lists and p:verify options are
  its shadow's (else it verifies itself), so the reports are the same.`

func cmdCheck(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("check", checkUsage, stderr)
	n := fs.Int("n", 2, "number of ranks (1..1024; simulated 1..8192)")
	timeout := fs.Duration("timeout", 10*time.Second, "timeout of every wait and collective")
	layout := fs.String("layout", "", "simulate the ranks in NODES nodes of RANKS each (NODESxRANKS = N; without -n, N is their product)")
	simulate := fs.Bool("simulate", false, "simulate the ranks on one node (--layout 1xN)")
	model := fs.String("model", "host", "cost model of simulated ranks' estimates: host, cuda, or a calibration file")
	mode := fs.String("mode", "", "replay mode of the estimates (default host, else stream)")
	cpuProfile := fs.String("cpuprofile", "", "simulated ranks: write a CPU profile of the whole check to FILE (go tool pprof)")
	ahead := fs.Int("ahead", 2, "simulated ranks: verify and estimate the plans ahead of rank 0 on a second goroutine (from a shadow run of\n"+
		"rank 0), at most this many verifications at once (1: one, the estimates beside it; 2: two, a verifier's memory more); 0: none")
	budget := fs.Int64("budget", 0, "simulated ranks: the work one verification may do before it stops and claims nothing (ops simulated plus\n"+
		"a rank count for every vector clock taken or merged); 0: 300 M x ranks/32, at least 300 M")
	memLimit := fs.String("memory-limit", "3.5G", "simulated ranks: the Go heap's soft limit, which the collector works harder to keep under as the heap nears it\n"+
		"(K, M or G bytes; 0: none; GOMEMLIMIT, where set, instead)")
	if code, ok := parse(fs, args, stdout); !ok {
		return code
	}
	if fs.NArg() == 0 {
		fmt.Fprintf(stderr, "luacoll check: no script named\n\nUsage: %s\n", checkUsage)
		return 2
	}
	// Flags may follow the script; its own arguments go after --.
	script := fs.Arg(0)
	if code, ok := parse(fs, fs.Args()[1:], stdout); !ok {
		return code
	}
	scriptArgs := fs.Args()
	switch {
	case *simulate && *layout != "":
		fmt.Fprintf(stderr, "luacoll check: --simulate and --layout %s: give one (--simulate is --layout 1xN)\n", *layout)
		return 2
	case *simulate && (*n < 1 || *n > maxSimulated):
		fmt.Fprintf(stderr, "luacoll check: -n %d: want 1..%d simulated ranks\n", *n, maxSimulated)
		return 2
	case *simulate:
		*layout = fmt.Sprintf("1x%d", *n)
	}
	if *layout != "" {
		nSet := false
		fs.Visit(func(f *flag.Flag) { nSet = nSet || f.Name == "n" })
		return checkSimulated(simOptions{n: *n, nSet: nSet, layout: *layout, model: *model, mode: *mode, script: script, args: scriptArgs,
			cpuProfile: *cpuProfile, ahead: *ahead, memLimit: *memLimit, budget: *budget}, stdout, stderr)
	}
	if *cpuProfile != "" {
		fmt.Fprintf(stderr, "luacoll check: --cpuprofile is for simulated ranks (--layout or --simulate)\n")
		return 2
	}
	if *n < 1 || *n > 1024 {
		fmt.Fprintf(stderr, "luacoll check: -n %d: want 1..1024 (simulated ranks, --layout, go to 8192)\n", *n)
		return 2
	}
	if *timeout <= 0 {
		fmt.Fprintf(stderr, "luacoll check: --timeout %v: must be positive\n", *timeout)
		return 2
	}
	ctx, stop := signalContext()
	defer stop()
	code := luabind.CheckScript(ctx, luabind.CheckOptions{Ranks: *n, Script: script, Args: scriptArgs,
		Timeout: *timeout, Stdout: stdout, Stderr: stderr})
	if code != 0 && ctx.Err() != nil {
		return signalExitCode(ctx)
	}
	return code
}

type simOptions struct {
	n                   int
	nSet                bool // -n given (else --layout sets the count)
	layout, model, mode string
	script              string
	args                []string
	cpuProfile          string // file of a CPU profile, "" none
	ahead               int    // --ahead
	memLimit            string // --memory-limit
	budget              int64  // --budget (0: the default)
}

// maxSimulated is the most ranks check simulates.
const maxSimulated = 8192

// checkSimulated is luacoll check with simulated ranks.
func checkSimulated(o simOptions, stdout, stderr io.Writer) int {
	nodes, per, err := simrank.ParseLayout(o.layout)
	if err == nil && !o.nSet {
		o.n = nodes * per
	}
	switch {
	case err != nil:
		fmt.Fprintf(stderr, "luacoll check: --layout %v\n", err)
		return 2
	case o.n < 1 || o.n > maxSimulated:
		fmt.Fprintf(stderr, "luacoll check: -n %d: want 1..%d simulated ranks\n", o.n, maxSimulated)
		return 2
	case nodes*per != o.n:
		fmt.Fprintf(stderr, "luacoll check: --layout %s places %d ranks, -n says %d\n", o.layout, nodes*per, o.n)
		return 2
	}
	m, err := cost.Load(o.model)
	if err != nil {
		fmt.Fprintf(stderr, "luacoll check: --model %v\n", err)
		return 2
	}
	if o.mode == "" {
		o.mode = simrank.DefaultMode(m)
	}
	if _, ok := m.Modes[o.mode]; !ok {
		fmt.Fprintf(stderr, "luacoll check: --mode %q: the model has %v\n", o.mode, m.ModeNames())
		return 2
	}
	src, name, err := luabind.LoadScript(o.script)
	if err != nil {
		fmt.Fprintf(stderr, "luacoll check: %v\n", err)
		return 2
	}
	var real []string
	for _, e := range luabind.NewRegistry().Entries() {
		real = append(real, e.Name)
	}
	if o.budget < 0 || int64(int(o.budget)) != o.budget {
		fmt.Fprintf(stderr, "luacoll check: --budget %d: want 0 (the default) or a positive count\n", o.budget)
		return 2
	}
	if o.ahead < 0 || o.ahead > 2 {
		fmt.Fprintf(stderr, "luacoll check: --ahead %d: want 0, 1 or 2\n", o.ahead)
		return 2
	}
	limit, err := parseMemLimit(o.memLimit)
	if err != nil {
		fmt.Fprintf(stderr, "luacoll check: --memory-limit %v\n", err)
		return 2
	}
	if limit > 0 && os.Getenv("GOMEMLIMIT") == "" {
		defer debug.SetMemoryLimit(debug.SetMemoryLimit(limit))
	}
	if o.cpuProfile != "" {
		f, err := os.Create(o.cpuProfile)
		if err != nil {
			fmt.Fprintf(stderr, "luacoll check: --cpuprofile: %v\n", err)
			return 2
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintf(stderr, "luacoll check: --cpuprofile: %v\n", err)
			return 2
		}
		defer pprof.StopCPUProfile()
	}
	ctx, stop := signalContext()
	defer stop()
	res, err := simrank.Run(ctx, simrank.Options{Ranks: o.n, PerNode: per, Src: src, Name: name, Args: o.args,
		Model: m, ModelName: o.model, Mode: o.mode, Real: real, Stdout: stdout, Progress: stderr, Ahead: o.ahead,
		Budget: int(o.budget)})
	if err != nil {
		fmt.Fprintf(stderr, "luacoll check: %v\n", err)
		if ctx.Err() != nil {
			return signalExitCode(ctx)
		}
		return 1
	}
	cost := fmt.Sprintf("%.1f s, peak resident %s (Go heap %s)", res.Elapsed.Seconds(), simrank.Bytes(res.PeakRSS), simrank.Bytes(res.HeapPeak))
	if res.Failed > 0 {
		fmt.Fprintf(stdout, "luacoll check: %s: %d of %d verifications found problems (%d plans, %d simulated ranks, layout %s); %s\n",
			name, res.Failed, res.Made+res.Verifies, res.Plans, o.n, o.layout, cost)
		return 1
	}
	fmt.Fprintf(stdout, "luacoll check: %s: %d plans verified at %d simulated ranks (layout %s), no problems; %s\n", name, res.Plans, o.n, o.layout, cost)
	return 0
}

// parseMemLimit reads --memory-limit: bytes with an optional K, M or G
// (a fraction allowed: 3.5G), or 0 for none.
func parseMemLimit(s string) (int64, error) {
	mult := 1.0
	num := s
	if i := len(s) - 1; i >= 0 {
		switch strings.ToUpper(s[i:]) {
		case "K":
			mult, num = 1<<10, s[:i]
		case "M":
			mult, num = 1<<20, s[:i]
		case "G":
			mult, num = 1<<30, s[:i]
		}
	}
	v, err := strconv.ParseFloat(num, 64)
	if err != nil || math.IsNaN(v) || v < 0 || math.IsInf(v, 0) || v*mult >= math.MaxInt64 {
		return 0, fmt.Errorf("%q: want bytes with an optional K, M or G (3.5G), or 0 for none", s)
	}
	return int64(v * mult), nil
}
