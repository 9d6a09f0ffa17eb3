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
	"strconv"
	"strings"
	"time"

	"github.com/luacoll/luacoll/cuda"
	"github.com/luacoll/luacoll/engine"
	"github.com/luacoll/luacoll/engine/plan/cost"
	"github.com/luacoll/luacoll/luabind"
	"github.com/luacoll/luacoll/scripts"
	"github.com/luacoll/luacoll/transport"
)

const calibrateUsage = `luacoll calibrate [-n 2] [--device host|cuda] [--nodes 2] [-o FILE] [flags]

  Measures the cost model p:estimate and bench allgather --plan predict with,
  in each replay mode of the backend (host; CUDA: stream, graph, device;
  stream only over the network), as plans (scripts/bench/calibrate.lua),
  between ranks 0 and 1 and the class between them (shm on one host, nvl
  between GPUs, net with --nodes 2): puts of sizes -b..-e (x -f) from both
  ranks at once, as in a collective (put: the times per size, a start cost,
  a per-byte cost past the largest; up to 16 of a size in a plan, so that
  small ones stand out of the replay's own time) and to the rank itself
  (self and copy),
  an 8-byte put_signal -> wait ping-pong (what a hop costs beyond the put:
  half to the signal, half to the wait), the same ping-pong of put_signals
  of each size (what the signal costs after that many bytes: a release of
  them, lines, the next launch) and the window barrier; and a
  replay's own costs: a plan that only flushes (the fixed cost of a replay;
  on CUDA, where that plan launches nothing, a plan of one 8-byte put
  instead) and one of 64 8-byte puts to the rank itself (the op cost: what
  every op costs before what it does), which the other times are taken net
  of, and on the host one of 64 flushes (what a flush with nothing in
  flight costs instead). Per size too, on the host, two exchanges alike (each rank puts and signals, waits for
  the other's, and copies): the copy reading the bytes the other rank wrote
  in one, its own buffer in the other, timed in the same rounds (at least
  21); the median of their difference round by round is the moved cost, what reading bytes
  another rank's processor wrote adds to a put or copy (made non-decreasing
  in size). On the host, where the puts went past twice the CPUs' last-level
  cache, the largest one's time a byte is what a byte costs past the cache
  (memory, with the cache's size: a plan whose bytes outgrow the cache pays
  it). Each time is the median of --rounds timings of --iters replays. Writes the
  model (JSON) with the machine it came from to FILE; when FILE holds a
  model of the same backend the measured classes are merged into it, so a
  second run with --nodes 2 adds net.

  With more ranks than the machine has CPUs (host backend, -n 4 on 2 CPUs,
  ranks a multiple of twice the CPUs) it measures only the switch cost, the
  time a CPU takes to pass from one rank to another: every rank exchanges
  8-byte signals with a partner on its own CPU, then with one on another
  CPU, all pairs at once; the first pays two passes a step, the second
  none. It goes into the self class of the model FILE already holds (made
  first with a CPU per rank).`

type calFlags struct {
	rank       rankFlags
	out        string
	minS, maxS string
	factor     int
	iters      int
	rounds     int
}

func cmdCalibrate(args []string, stdout, stderr io.Writer) int {
	fl := newFlagSet("calibrate", calibrateUsage, stderr)
	var f calFlags
	f.rank.register(fl, 2)
	fl.StringVar(&f.out, "o", "luacoll-model.json", "the model file to write (merged into when it exists)")
	fl.StringVar(&f.minS, "b", "4K", "smallest put size")
	fl.StringVar(&f.maxS, "e", "auto", "largest put size; auto: 16M, and on the host backend without --nodes the first size of the series\n"+
		"at or past 4 times the CPUs' last-level cache, at most 1G (past it a copy runs at the memory's speed, not the cache's)")
	fl.IntVar(&f.factor, "f", 4, "put size multiplication factor (2 or more): 2 measures the sizes between too, where a copy's speed\n"+
		"changes with them (caches), at twice the time")
	fl.IntVar(&f.iters, "iters", 20, "timed replays of each measuring plan")
	fl.IntVar(&f.rounds, "rounds", 5, "timings of --iters replays each; the model takes their median")
	if code, ok := parse(fl, args, stdout); !ok {
		return code
	}
	fail := func(code int, err error) int {
		fmt.Fprintf(stderr, "luacoll calibrate: %v\n", err)
		return code
	}
	sizes, err := calSizes(f.minS, calMax(f.minS, f.maxS, f.rank.device, f.rank.nodes, transport.CacheBytes()), f.factor)
	if err == nil && f.iters < 1 {
		err = fmt.Errorf("--iters %d: want 1 or more", f.iters)
	}
	if err == nil && f.rounds < 1 {
		err = fmt.Errorf("--rounds %d: want 1 or more", f.rounds)
	}
	if err == nil {
		err = f.rank.check()
	}
	if err != nil {
		return fail(2, err)
	}
	ctx, stop := signalContext()
	defer stop()
	env, isRank, err := jobEnv(func() error { return checkWritable(f.out) })
	if err != nil {
		return fail(2, err)
	}
	job := launchJob{prog: "calibrate", sayInterrupt: true, defaultN: 2, args: append([]string{"calibrate"}, args...), progress: true, noMPS: true}
	return f.rank.launchOrRun(ctx, job, env, isRank, stdout, stderr, func(ctx context.Context, c *engine.Comm) error {
		cmdline := "luacoll calibrate " + strings.Join(args, " ")
		if c.Backend.Name() == "host" && c.Env.LocalSize > runtime.NumCPU() {
			m, err := calibrateSwitch(ctx, c, f.out, [2]int{f.iters, f.rounds}, cmdline)
			if err == nil && env.Rank == 0 {
				err = writeModel(f.out, m, stdout)
			}
			return err
		}
		m, err := calibrate(ctx, c, sizes, [2]int{f.iters, f.rounds}, cmdline, stderr)
		if err == nil && env.Rank == 0 {
			err = writeModel(f.out, m, stdout)
		}
		return err
	})
}

// calMaxAuto caps -e auto (a machine with a 300 MiB cache would otherwise
// calibrate 4 GiB puts, windows of 8 GiB a rank and minutes of copying).
const calMaxAuto = 1 << 30

// calMax resolves -e (b is -b): auto is 16M, and on the host backend
// within one node the first size of the x4 series from b at or past 4
// times the last-level cache (cache bytes; 0: unknown) when that is
// larger, up to calMaxAuto: puts that fit the cache run at its speed, and
// the model's per-byte cost past the largest size measured must be the
// memory's. Either way at least 4 times b, the least calSizes takes.
func calMax(b, e, device string, nodes int, cache uint64) string {
	if e != "auto" {
		return e
	}
	const most = 16 << 20
	lo, err := parseSize(b)
	if err != nil || lo == 0 {
		return "16M" // calSizes names -b's error
	}
	if device != "host" || nodes > 1 || 4*cache <= most {
		if 4*lo > most {
			return strconv.FormatUint(4*lo, 10)
		}
		return "16M"
	}
	s := 4 * lo
	for s < 4*cache && s*4 <= calMaxAuto {
		s *= 4
	}
	return strconv.FormatUint(s, 10)
}

// calSizes is the series of put sizes from lo up to hi, by factor.
func calSizes(lo, hi string, factor int) ([]uint64, error) {
	if factor < 2 {
		return nil, fmt.Errorf("-f %d: want 2 or more", factor)
	}
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
	for s := a; s <= b; s *= uint64(factor) {
		out = append(out, s)
	}
	return out, nil
}

// calClass is the class between ranks 0 and 1 as rank sees it: theirs
// for each other; for the ranks that look on, whether it is the network
// (topo.Net, the same on every rank), else shm. Every rank picks the
// replay modes and calibrate.lua's measurements by it, so that they run
// the same collective calls.
func calClass(topo *transport.Topology, rank int) transport.PeerKind {
	if rank <= 1 {
		return topo.Kinds[1-rank]
	}
	if len(topo.Net) > 1 && len(topo.Net[0]) > 1 && topo.Net[0][1] {
		return transport.KindNet
	}
	return transport.KindSHM
}

// calibrate measures the class between ranks 0 and 1 in each replay mode
// of the backend with the plans of bench/calibrate.lua (iters: timed
// replays a round, and rounds); rank 0 returns the model.
func calibrate(ctx context.Context, c *engine.Comm, sizes []uint64, iters [2]int, cmdline string, stderr io.Writer) (*cost.Model, error) {
	if c.Size() < 2 {
		return nil, errors.New("calibrate needs 2 ranks or more")
	}
	class := calClass(c.Rank.Topo, c.Env.Rank)
	modes := []string{"host"}
	switch {
	case c.Backend.Name() != "host" && class == transport.KindNet:
		modes = []string{"stream"}
	case c.Backend.Name() != "host":
		modes = []string{"stream", "graph", "device"}
	}
	sz := make([]string, len(sizes))
	for i, n := range sizes {
		sz[i] = strconv.FormatUint(n, 10)
	}
	got, err := runCalibration(ctx, c, strings.Join(modes, ","), strings.Join(sz, ","), strconv.Itoa(iters[0]), strconv.Itoa(iters[1]), class.String())
	if err != nil || got == nil {
		return nil, err
	}
	m := &cost.Model{Machine: machineName(c), Backend: c.Backend.Name(), Made: time.Now().UTC().Format(time.RFC3339),
		Command: cmdline, Modes: map[string]map[string]cost.Params{}}
	// On the host backend a replay whose bytes do not fit the processors'
	// cache moves them at the memory's speed (engine/plan/cost/memory.go).
	var cache uint64
	if c.Backend.Name() == "host" {
		cache = transport.CacheBytes()
	}
	var notes []string
	for _, mode := range modes {
		params, note, err := calParams(got[mode], class, sizes, cache)
		if err != nil {
			return nil, fmt.Errorf("mode %s: %w", mode, err)
		}
		m.Modes[mode] = params
		notes = append(notes, mode+": "+note)
	}
	m.Note = fmt.Sprintf("%s, %d ranks: %s.", class, c.Size(), strings.Join(notes, "; "))
	return m, m.Check()
}

// runCalibration runs bench/calibrate.lua with args on every rank and
// returns rank 0's times by mode (nil on the other ranks).
func runCalibration(ctx context.Context, c *engine.Comm, args ...string) (map[string]calTimes, error) {
	src, err := scripts.FS.ReadFile("bench/calibrate.lua")
	if err != nil {
		return nil, err
	}
	st := luabind.New(c, io.Discard)
	defer st.Close()
	vals, err := st.EvalScript(ctx, string(src), "bench/calibrate.lua", args)
	if err != nil || c.Env.Rank != 0 {
		return nil, err
	}
	if len(vals) != 1 {
		return nil, fmt.Errorf("bench/calibrate.lua returned %d values, want 1", len(vals))
	}
	return parseCalibration(vals[0])
}

// calTimes are one mode's measurements: nanoseconds by what and bytes.
type calTimes map[string]map[uint64]float64

// parseCalibration reads bench/calibrate.lua's lines "mode what count ns"
// (count: bytes of a put, or how many ops, hops or barriers).
func parseCalibration(s string) (map[string]calTimes, error) {
	out := map[string]calTimes{}
	for _, line := range strings.Split(strings.TrimSpace(s), "\n") {
		f := strings.Fields(line)
		if len(f) != 4 {
			return nil, fmt.Errorf("bench/calibrate.lua: line %q: want mode, what, count, ns", line)
		}
		n, err1 := strconv.ParseUint(f[2], 10, 64)
		ns, err2 := strconv.ParseFloat(f[3], 64)
		if err1 != nil || err2 != nil || ns <= 0 {
			return nil, fmt.Errorf("bench/calibrate.lua: line %q: bad count or time", line)
		}
		if out[f[0]] == nil {
			out[f[0]] = calTimes{}
		}
		if out[f[0]][f[1]] == nil {
			out[f[0]][f[1]] = map[uint64]float64{}
		}
		out[f[0]][f[1]][n] = ns
	}
	return out, nil
}

// calPutsPer is how many puts of n bytes calibrate.lua's put plans hold
// (small ones several to a plan, so that one stands out of the replay's
// own time) where it wrote no putk line; it must match the script's k.
func calPutsPer(n uint64) uint64 { return max(1, min(16, 65536/n)) }

// putsPer is how many puts of n bytes the mode's put plans held: the
// script's putk line, else calPutsPer.
func (t calTimes) putsPer(n uint64) uint64 {
	if k, ok := t["putk"][n]; ok && k >= 1 {
		return uint64(k)
	}
	return calPutsPer(n)
}

// calParams turns one mode's times into the costs of class and self.
// Every time is of one replay of a plan that ends with a flush; the plan
// that only flushes (empty) is the replay's fixed cost, the slope over
// ops 8-byte puts to the rank itself the op cost every op pays, and the
// slope over flushes (when measured) what a flush with nothing in flight
// costs instead. What each op costs beyond those: puts and copies fitted
// per size, a hop beyond the put_signal's op and 8-byte put (the wait's
// op is hidden while it blocks) split between the signal and the wait, a
// barrier beyond its op.
// With the processors' cache of cache bytes (0: none known), the self
// class gets the memory past it where the puts went past twice that.
func calParams(t calTimes, class transport.PeerKind, sizes []uint64, cache uint64) (map[string]cost.Params, string, error) {
	fx, t, err := calReplay(t)
	if err != nil {
		return nil, "", err
	}
	one := t.one
	op, base, replay, flush := fx.op, fx.base, fx.replay, fx.flush
	// beyond is a time less the replay's base and ops op costs, kept
	// above 0 (a fit needs positive times; what is below the clock's
	// noise costs next to nothing).
	beyond := func(v float64, ops int) float64 { return max(v-base-float64(ops)*op, 1) }
	hops, hopT, err1 := one("hop")
	bars, barT, err2 := one("barrier")
	if err := errors.Join(err1, err2); err != nil || hops == 0 || bars == 0 {
		return nil, "", fmt.Errorf("no hop or barrier time (%v)", err)
	}
	hop := max(hopT-base, 0) / float64(2*hops)
	bar := max(barT-base, 0)/float64(bars) - op
	// Over the network a flush waits for the peer's answer, a hop after
	// the last put landed (engine/plan/cost/net.go): the class's Trip. A
	// put's line holds a k-th of it (k puts, then the flush), which the
	// model charges at the flush instead.
	var trip float64
	if class == transport.KindNet {
		trip = hop
	}
	series := func(what string, less float64) (cost.Cost, error) {
		ts := make([]float64, len(sizes))
		for i, n := range sizes {
			v, ok := t[what][n]
			if !ok {
				return cost.Cost{}, fmt.Errorf("no %s time at %d bytes", what, n)
			}
			ts[i] = beyond(v-less/float64(t.putsPer(n)), 1) * 1e-9
		}
		return cost.Fit(sizes, ts)
	}
	put, err := series("put", trip)
	if err != nil {
		return nil, "", err
	}
	self, err := series("self", 0)
	if err != nil {
		return nil, "", err
	}
	a, l := put.Of(8)
	// A hop of the ping-pong is the sender's put_signal (its op cost, an
	// 8-byte put, the signal) and the receiver's wait going on; that wait
	// paid its op cost while it was blocked, before the signal came.
	rest := max(hop-op-a-l, 0)
	sig, wait := cost.Cost{AlphaNs: rest / 2}, cost.Cost{AlphaNs: rest / 2}
	if sized, err := calSignal(t, sizes, sig, wait, op, put, base, trip); err != nil {
		return nil, "", err
	} else if sized != nil {
		sig = *sized
	}
	barrier := cost.Cost{AlphaNs: max(bar, 0)}
	opc := cost.Cost{AlphaNs: op}
	moved, err := calMoved(t, sizes)
	if err != nil {
		return nil, "", err
	}
	// A call's own cost (modes whose replays are launched): measured
	// apart, as it is.
	var call cost.Cost
	if _, c, err := one("call"); err == nil {
		call = cost.Cost{AlphaNs: c}
	}
	params := map[string]cost.Params{
		class.String(): {Put: put, Signal: sig, Wait: wait, Copy: self, Barrier: barrier, Op: opc, Trip: cost.Cost{AlphaNs: trip}},
		"self": {Put: self, Signal: sig, Wait: wait, Copy: self, Barrier: barrier, Op: opc, Replay: cost.Cost{AlphaNs: replay},
			Flush: flush, Moved: moved, Call: call},
	}
	if class == transport.KindSHM {
		p := params["self"]
		p.Memory = cost.MemoryOf(put, cache, 2)
		params["self"] = p
	}
	if class == transport.KindNet {
		// Logical nodes split the CPUs: a copy measured in one is no
		// rank's copy on the whole machine.
		delete(params, "self")
	}
	last := sizes[len(sizes)-1]
	note := fmt.Sprintf("replay %.2f us, op %.0f ns, 8-byte hop %.2f us, put of %d B %.1f us, barrier %.2f us",
		replay/1e3, op, hop/1e3, last, beyond(t["put"][last], 1)/1e3, bar/1e3)
	if call.AlphaNs > 0 {
		note += fmt.Sprintf(", call %.2f us", call.AlphaNs/1e3)
	}
	if len(moved.Sizes) > 0 && class != transport.KindNet {
		// The moved cost at the first size and the last.
		a0, l0 := moved.Of(sizes[0])
		a1, l1 := moved.Of(last)
		note += fmt.Sprintf(", moved %d B %.2f us, %d B %.1f us", sizes[0], (a0+l0)/1e3, last, (a1+l1)/1e3)
	}
	return params, note, nil
}

// one is the first (count, time) of what (calibrate.lua writes one of
// each of the kinds it is asked for), or an error naming what is missing.
func (t calTimes) one(what string) (uint64, float64, error) {
	for k, v := range t[what] {
		return k, v, nil
	}
	return 0, 0, fmt.Errorf("no %s time", what)
}

// calFixed are a mode's costs of a replay before its ops: the op cost,
// base (the replay's fixed cost and a flush: what every measured plan
// pays beyond its ops), the replay's fixed cost, and (host) a flush with
// nothing in flight.
type calFixed struct {
	op, base, replay float64
	flush            *cost.Cost
}

// calReplay reads a mode's calFixed from the empty plan (a flush), the
// one of 64 8-byte puts to the rank itself, and where measured the one of
// one such put (modes whose replays are launched) and of 64 flushes
// (host); it returns the times moved onto that base (calRebase, calLead).
func calReplay(t calTimes) (calFixed, calTimes, error) {
	_, empty, err := t.one("empty")
	if err != nil {
		return calFixed{}, nil, err
	}
	nops, many, err := t.one("ops")
	if err != nil || nops < 2 {
		return calFixed{}, nil, fmt.Errorf("no time of two ops or more (%v)", err)
	}
	// The ops plan is the empty one (a replay and its flush) and nops
	// 8-byte puts more.
	op := max(many-empty, 0) / float64(nops)
	// base is the empty plan's replay (its fixed cost and a flush).
	fx := calFixed{op: op, base: empty, replay: max(empty-op, 0)}
	if _, one1, err := t.one("one"); err == nil {
		// Modes whose replays are launched: the empty plan launches
		// nothing, so the fixed cost (a graph's launch) is read from the
		// plan of one op and a flush instead (nops-1 puts fewer).
		fx.op = max(many-one1, 0) / float64(nops-1)
		fx.base = max(one1-fx.op, 0)
		fx.replay = max(fx.base-fx.op, 0)
		t = calRebase(t, empty, fx.base)
		if leads, _, err := t.one("lead"); err == nil {
			t = calLead(t, float64(leads)*fx.op)
		}
	}
	if nfl, fl, err := t.one("flushes"); err == nil && nfl >= 2 {
		// The empty plan is the replay and one such flush.
		f := max(fl-empty, 0) / float64(nfl-1)
		fx.flush, fx.replay = &cost.Cost{AlphaNs: f}, max(empty-f, 0)
	}
	return fx, t, nil
}

// calHopsPer is how many round trips calibrate.lua's ping-pong of a
// put_signal of n bytes makes a plan; it must match the script's kh.
func calHopsPer(n uint64) uint64 { return max(2, min(16, (1<<20)/n)) }

// calRebase moves the times calibrate.lua gave as the replay of one op of
// a plan of k (put, self, moved, own: the empty replay and a k-th of the
// rest; hopn: a 2kh-th; swap: a kh-th) onto base, the replay's fixed cost where that is
// not the empty plan's: base and a k-th of the plan's time less base. It
// returns the times so moved; t is left as it was.
func calRebase(t calTimes, empty, base float64) calTimes {
	onto := func(per func(uint64) uint64) func(uint64, float64) float64 {
		return func(n uint64, v float64) float64 {
			k := float64(per(n))
			return v + (base-empty)*(k-1)/k
		}
	}
	hops := func(n uint64) uint64 { return 2 * calHopsPer(n) }
	return t.adjusted(map[string]func(uint64, float64) float64{"put": onto(t.putsPer), "self": onto(t.putsPer),
		"moved": onto(t.putsPer), "own": onto(t.putsPer), "hopn": onto(hops), "swap": onto(calHopsPer)})
}

// calLead takes out of the put and self lines (the replay of one put of
// k a plan) a k-th of lead, the op cost of the 8-byte puts calibrate.lua
// began those plans with (graph mode: so that their graphs keep the
// interpreter's node the one-op plan has). It returns the times so
// moved; t is left as it was.
func calLead(t calTimes, lead float64) calTimes {
	less := func(n uint64, v float64) float64 { return v - lead/float64(t.putsPer(n)) }
	return t.adjusted(map[string]func(uint64, float64) float64{"put": less, "self": less})
}

// adjusted returns a copy of t in which each series named in by holds
// by[what](bytes, time) for each of its times; t is left as it was.
func (t calTimes) adjusted(by map[string]func(uint64, float64) float64) calTimes {
	out := calTimes{}
	for what, times := range t {
		out[what] = times
		if f := by[what]; f != nil {
			out[what] = map[uint64]float64{}
			for n, v := range times {
				out[what][n] = f(n, v)
			}
		}
	}
	return out
}

// calSignal is the signal's cost by the size of the put_signal it ends
// (nil where calibrate.lua measured no hopn times): a hop of n bytes less
// the put_signal's op, the put of n bytes and the wait, at each size (over
// the network, where calibrate.lua timed them, an exchange of n bytes
// both ways instead of a hop: the put's time is of both ranks putting at
// once, as a collective's ranks do, and so is the exchange's), and
// sig (the 8-byte hop's part) at 8 bytes (nil too where the sizes begin
// at 8 bytes or less). What it adds to the put (the
// release of the bytes before the signal, lines) is not a per-byte cost
// past the sizes measured: the fit's slope there is 0, and its start cost
// the 8-byte figure.
func calSignal(t calTimes, sizes []uint64, sig, wait cost.Cost, op float64, put cost.Cost, base, trip float64) (*cost.Cost, error) {
	if len(t["hopn"]) == 0 || sizes[0] <= 8 {
		return nil, nil
	}
	what, per := "hopn", func(n uint64) uint64 { return 2 * calHopsPer(n) }
	if len(t["swap"]) > 0 {
		what, per = "swap", calHopsPer
	}
	ns := append([]uint64{8}, sizes...)
	ts := []float64{max(sig.AlphaNs, 1) * 1e-9}
	for _, n := range sizes {
		v, ok := t[what][n]
		if !ok {
			return nil, fmt.Errorf("no %s time at %d bytes", what, n)
		}
		// Over the network the plan's closing flush waits a trip, a
		// per(n)-th of it in each line (as in the put lines).
		a, l := put.Of(n)
		ts = append(ts, max(v-trip/float64(per(n))-base-op-a-l-wait.AlphaNs, 1)*1e-9)
	}
	c, err := cost.Fit(ns, ts)
	if err != nil {
		return nil, fmt.Errorf("signal: %w", err)
	}
	// A signal alone (no bytes before it) costs the 8-byte hop's share.
	c.AlphaNs, c.BetaNs = c.TimesNs[0], 0
	return &c, nil
}

// calMoved is what a copy costs beyond its own for bytes another rank
// wrote, per size, from the moved and own plans (none measured: zero):
// both make the same exchanges (a put_signal, a wait for the other rank's,
// a copy), the copy reading what the other rank wrote in one and the
// rank's own buffer in the other, so their difference is what moving the
// bytes between processors adds (the waits' skew and the memory bus's
// load are in both). A difference of two timings is noisy (one run's
// table had 154 us at 256 KiB and 7 us at 1 MiB): moving more bytes never
// costs less, so the times are made non-decreasing in size (monotone).
func calMoved(t calTimes, sizes []uint64) (cost.Cost, error) {
	if len(t["moved"]) == 0 {
		return cost.Cost{}, nil
	}
	ts := make([]float64, len(sizes))
	for i, n := range sizes {
		moved, ok1 := t["moved"][n]
		own, ok2 := t["own"][n]
		if !ok1 || !ok2 {
			return cost.Cost{}, fmt.Errorf("no moved and own times at %d bytes", n)
		}
		ts[i] = max(moved-own, 1) * 1e-9
	}
	return cost.Fit(sizes, monotone(ts))
}

// monotone is the non-decreasing sequence nearest to ts in the least
// squares (pooling adjacent values that decrease into their mean); ts is
// in order of size.
func monotone(ts []float64) []float64 {
	type block struct {
		sum float64
		n   int
	}
	var bs []block
	for _, t := range ts {
		bs = append(bs, block{t, 1})
		for len(bs) > 1 {
			a, b := bs[len(bs)-2], bs[len(bs)-1]
			if a.sum/float64(a.n) <= b.sum/float64(b.n) {
				break
			}
			bs = append(bs[:len(bs)-2], block{a.sum + b.sum, a.n + b.n})
		}
	}
	out := make([]float64, 0, len(ts))
	for _, b := range bs {
		for range b.n {
			out = append(out, b.sum/float64(b.n))
		}
	}
	return out
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
