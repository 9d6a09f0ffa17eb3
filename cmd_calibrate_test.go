package main

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"testing"

	"github.com/luacoll/luacoll/engine/plan/cost"
	"github.com/luacoll/luacoll/luabind"
	"github.com/luacoll/luacoll/transport"
)

// TestCalibrate measures a model on 2 host ranks, reads it back (the shm
// and self classes, positive costs, the machine and command), runs it
// again into the same file (merged, still parsing), and estimates a plan
// with it through bench allgather --plan --model.
func TestCalibrate(t *testing.T) {
	out := filepath.Join(t.TempDir(), "model.json")
	for range 2 {
		r := luacoll(t, nil, "calibrate", "-n", "2", "-b", "4K", "-e", "256K", "--iters", "3", "-o", out)
		if r.code != 0 || !strings.Contains(r.stdout, "wrote "+out) || !strings.Contains(r.stdout, ", moved 4096 B ") {
			t.Fatalf("exit %d (want the model written, with its moved cost)\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
		}
	}
	m := readModel(t, out)
	shm, ok := m.Modes["host"]["shm"]
	if _, self := m.Modes["host"]["self"]; !ok || !self || m.Backend != "host" || m.Machine == "" || !strings.Contains(m.Command, "calibrate") {
		t.Fatalf("model %+v: want host mode with shm and self, the machine and the command", m)
	}
	// A barrier may cost no more than the op it is (two ranks spinning at
	// once meet in about an op's time), so its cost is only not negative.
	if a, l := shm.Put.Of(64 << 10); a+l <= 0 || len(shm.Put.Sizes) != 4 || shm.Barrier.AlphaNs < 0 {
		t.Fatalf("shm costs %+v: want measured puts at 4 sizes and a barrier", shm)
	}
	// The moved cost (the two exchanges timed in the same rounds): one
	// non-decreasing time a size.
	if mv := m.Modes["host"]["self"].Moved; len(mv.Sizes) != 4 || len(mv.TimesNs) != 4 || !sort.Float64sAreSorted(mv.TimesNs) {
		t.Fatalf("moved cost %+v: want a non-decreasing time at each of 4 sizes", mv)
	}
	r := luacoll(t, nil, "bench", "allgather", "-n", "2", "--algo", "lua:ring", "--plan", "--model", out, "-b", "64K", "-e", "64K", "--iters", "3")
	if r.code != 0 || !strings.Contains(r.stdout, "pred(us)") {
		t.Fatalf("bench allgather --model: exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	for _, line := range strings.Split(r.stdout, "\n") {
		// ... pred(us) p/m mode
		if f := strings.Fields(line); len(f) > 2 && f[0] == "65536" && (f[len(f)-2] == "-" || f[len(f)-1] != "host") {
			t.Fatalf("no prediction, or no mode host, in %q", line)
		}
	}
}

func TestCalibrateBadFlags(t *testing.T) {
	dir := t.TempDir()
	notModel := filepath.Join(dir, "x.json")
	if err := os.WriteFile(notModel, []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"calibrate", "-b", "1M", "-e", "2M"}, 2, "-b 1M -e 2M: want 0 < b and e at least 4 times b"},
		{[]string{"calibrate", "--iters", "0"}, 2, "--iters 0"},
		{[]string{"calibrate", "-n", "2", "-b", "4K", "-e", "16K", "--iters", "1", "-o", notModel}, 1, "holds no model to merge into"},
		{[]string{"bench", "allgather", "--algo", "lua:ring", "--plan", "--model", filepath.Join(dir, "none.json")}, 2, "--model open"},
		{[]string{"bench", "allgather", "--algo", "lua:ring", "--model", "host"}, 2, "--model host: the model predicts plans' times: it needs --plan"},
		{[]string{"bench", "allgather", "--algo", "lua:ring", "--plan", "--model", "cuda"}, 2, "--model cuda has no mode host (it has [device graph stream])"},
	} {
		r := luacoll(t, nil, c.args...)
		if r.code != c.code || !strings.Contains(r.stderr, c.want) {
			t.Errorf("%v: exit %d, stderr:\n%s\nwant exit %d and %q", c.args, r.code, r.stderr, c.code, c.want)
		}
	}
}

// TestEstimateScript runs bench/estimate.lua: every shipped all-gather
// schedule, as a verified plan, measured beside its estimate from the
// shipped host model, one row each with a ratio that is predicted over
// measured. (How close they are is in docs/results/cost-model.md: on a
// shared machine the measured side varies too much to bound here.)
func TestEstimateScript(t *testing.T) {
	r := luacoll(t, nil, "run", "-n", "2", "bench/estimate.lua", "-", "65536", "5")
	if r.code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	rows := 0
	for _, line := range strings.Split(r.stdout, "\n") {
		f := strings.Fields(strings.TrimPrefix(line, "[0]"))
		if len(f) != 6 || f[1] != "65536" {
			continue
		}
		var meas, pred, ratio float64
		if _, err := fmt.Sscan(f[2]+" "+f[3]+" "+f[4], &meas, &pred, &ratio); err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		if meas <= 0 || pred <= 0 || math.Abs(pred/meas-ratio) > 0.01*ratio+0.005 {
			t.Errorf("%q: want positive times and p/m their ratio", line)
		}
		rows++
	}
	if rows != 3 {
		t.Fatalf("%d rows, want ring, direct and hier:\n%s", rows, r.stdout)
	}
}

// Under luacoll check rank 0 estimates (it holds every rank's list); the
// others get an error that says so.
func TestEstimateUnderCheck(t *testing.T) {
	script := filepath.Join(t.TempDir(), "e.lua")
	code := `
local lc = require("luacoll")
local ag = require("allgather")
local n = 65536
local w = lc.window{ bytes = n * lc.size }
local src = lc.buffer(n)
local p = lc.plan(ag.ring, w, src, 0, n)
if lc.rank ~= 0 then
  local ok, err = pcall(p.estimate, p)
  assert(not ok and err:find("only rank 0 holds every rank's op list", 1, true), tostring(err))
  return
end
local e = p:estimate()
assert(#e.per_rank == lc.size and #e.path >= 2 * (lc.size - 1), "estimate")
print(("estimated %d ranks: %.1f us"):format(#e.per_rank, e.time * 1e6))
`
	if err := os.WriteFile(script, []byte(code), 0o644); err != nil {
		t.Fatal(err)
	}
	r := luacoll(t, nil, "check", "-n", "8", script)
	if r.code != 0 || !strings.Contains(r.stdout, "estimated 8 ranks") {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
}

// calParams takes the replay's fixed cost and the op cost out of every
// measured time: an op costs the slope over the 8-byte puts, the replay
// the empty plan less one op, a put what is left of its plan's time.
func TestCalParamsNetOfReplayAndOps(t *testing.T) {
	const empty, op = 200.0, 40.0
	sizes := []uint64{4096, 16384}
	times := map[string]map[uint64]float64{
		"empty":   {1: empty},
		"ops":     {64: empty + 64*op},
		"hop":     {50: empty + 2*50*(op+100)}, // a blocked wait's op cost is hidden
		"put":     {4096: empty + op + 1000, 16384: empty + op + 4000},
		"self":    {4096: empty + op + 500, 16384: empty + op + 2000},
		"barrier": {20: empty + 20*(op+300)},
	}
	params, note, err := calParams(times, transport.KindSHM, sizes, 0)
	if err != nil {
		t.Fatal(err)
	}
	shm, self := params["shm"], params["self"]
	a, l := shm.Put.Of(4096)
	sa, sl := self.Copy.Of(16384)
	pa, pl := shm.Put.Of(8)
	for _, c := range []struct {
		what      string
		got, want float64
	}{
		{"op", shm.Op.AlphaNs, op}, {"self op", self.Op.AlphaNs, op}, {"replay", self.Replay.AlphaNs, empty - op},
		{"put of 4 KiB", a + l, 1000}, {"copy of 16 KiB", sa + sl, 2000}, {"barrier", shm.Barrier.AlphaNs, 300},
		{"signal + wait", shm.Signal.AlphaNs + shm.Wait.AlphaNs, 100 - pa - pl},
	} {
		if math.Abs(c.got-c.want) > 1e-6 {
			t.Errorf("%s: %v ns, want %v", c.what, c.got, c.want)
		}
	}
	if !strings.Contains(note, "op 40 ns") || strings.Contains(note, "call") {
		t.Errorf("note %q: want the op cost and no call cost", note)
	}
	// A mode whose replays are launched: a call of one replay costs 2.5 us
	// beyond it, kept as measured.
	times["call"] = map[uint64]float64{1: 2500}
	if params, note, err = calParams(times, transport.KindSHM, sizes, 0); err != nil {
		t.Fatal(err)
	}
	if c := params["self"].Call.AlphaNs; c != 2500 || !strings.Contains(note, "call 2.50 us") {
		t.Errorf("call %v ns, note %q: want 2500 and the note naming it", c, note)
	}
	delete(times, "call")
	if self.Flush != nil || !self.Moved.Equal(cost.Cost{}) {
		t.Errorf("no flushes or moved plans measured, flush %+v, moved %+v: want none", self.Flush, self.Moved)
	}
	// The moved plans take 700 or 2,800 ns more than the same exchanges
	// copying the rank's own bytes.
	times["moved"] = map[uint64]float64{4096: 5000 + 700, 16384: 9000 + 2800}
	times["own"] = map[uint64]float64{4096: 5000, 16384: 9000}
	if params, _, err = calParams(times, transport.KindSHM, sizes, 0); err != nil {
		t.Fatal(err)
	}
	if a, l := params["self"].Moved.Of(4096); math.Abs(a+l-700) > 1e-6 {
		t.Errorf("moved 4 KiB: %v ns, want 700", a+l)
	}
	// 64 flushes with nothing in flight, 5 ns each: the empty plan is the
	// replay and one of them.
	times["flushes"] = map[uint64]float64{64: empty + 63*5}
	if params, _, err = calParams(times, transport.KindSHM, sizes, 0); err != nil {
		t.Fatal(err)
	}
	if self = params["self"]; self.Flush == nil || math.Abs(self.Flush.AlphaNs-5) > 1e-9 || math.Abs(self.Replay.AlphaNs-(empty-5)) > 1e-9 {
		t.Errorf("flush %+v, replay %v: want 5 ns and %v", self.Flush, self.Replay.AlphaNs, empty-5)
	}
	// With a cache of 4 KiB the puts went past twice it: the memory's cost
	// is the largest put's time a byte (4,000 ns for 16 KiB), two ranks at
	// once; with one of 16 KiB they did not.
	for _, c := range []struct {
		cache uint64
		want  *cost.Memory
	}{{4096, &cost.Memory{CacheBytes: 4096, Ranks: 2, BetaNs: 4000.0 / 16384}}, {16384, nil}} {
		if params, _, err = calParams(times, transport.KindSHM, sizes, c.cache); err != nil {
			t.Fatal(err)
		}
		if got := params["self"].Memory; (got == nil) != (c.want == nil) || got != nil && (got.CacheBytes != c.want.CacheBytes || got.Ranks != 2 || math.Abs(got.BetaNs-c.want.BetaNs) > 1e-9) {
			t.Errorf("cache of %d bytes: memory %+v, want %+v", c.cache, got, c.want)
		}
	}
	delete(times, "ops")
	if _, _, err := calParams(times, transport.KindSHM, sizes, 0); err == nil {
		t.Error("no ops time: want an error")
	}
}

// In modes whose replays are launched the empty plan launches nothing:
// calParams reads the replay's fixed cost (a graph's launch) from the
// one-op plan, moves the per-op lines calibrate.lua wrote over the empty
// plan onto it, and fits the signal's cost by the put_signal's size from
// the hops of each size (the 8-byte hop's share at 8 bytes).
func TestCalParamsLaunchedReplayAndSignalBySize(t *testing.T) {
	const empty, launch, op = 50.0, 3000.0, 40.0
	base := launch + op // the fixed cost and the flush
	sizes := []uint64{4096, 16384}
	// perOne is calibrate.lua's line for a plan of k ops that took tt.
	perOne := func(tt float64, k uint64) float64 { return empty + (tt-empty)/float64(k) }
	putT := map[uint64]float64{4096: 1000, 16384: 4000}
	sigT := map[uint64]float64{4096: 700, 16384: 900}
	times := map[string]map[uint64]float64{
		"empty":   {1: empty},
		"one":     {1: base + op},
		"ops":     {64: base + 64*op},
		"call":    {1: 100},
		"hop":     {50: base + 2*50*(op+100)},
		"barrier": {20: base + 20*(op+300)},
		"put":     {},
		"self":    {},
		"hopn":    {},
	}
	for _, n := range sizes {
		k := calPutsPer(n)
		times["put"][n] = perOne(base+float64(k)*(op+putT[n]), k)
		times["self"][n] = perOne(base+float64(k)*(op+putT[n]/2), k)
	}
	params, _, err := calParams(times, transport.KindNVL, sizes, 0)
	if err != nil {
		t.Fatal(err)
	}
	nvl, self := params["nvl"], params["self"]
	p8a, p8l := nvl.Put.Of(8)
	wait := (100 - p8a - p8l) / 2
	for _, n := range sizes {
		k := 2 * calHopsPer(n)
		times["hopn"][n] = perOne(base+float64(k)*(op+putT[n]+sigT[n]+wait), k)
	}
	// The 8-byte signal alone, before the sized hops are given.
	if s := nvl.Signal; len(s.Sizes) != 0 || math.Abs(s.AlphaNs-wait) > 1e-6 {
		t.Errorf("signal without hopn times %+v: want %v ns, no sizes", s, wait)
	}
	if params, _, err = calParams(times, transport.KindNVL, sizes, 0); err != nil {
		t.Fatal(err)
	}
	nvl, self = params["nvl"], params["self"]
	pa, pl := nvl.Put.Of(16384)
	s4a, s4l := nvl.Signal.Of(4096)
	s16a, s16l := nvl.Signal.Of(16384)
	s1ga, s1gl := nvl.Signal.Of(1 << 30)
	for _, c := range []struct {
		what      string
		got, want float64
	}{
		{"op", nvl.Op.AlphaNs, op}, {"replay", self.Replay.AlphaNs, launch}, {"put of 16 KiB", pa + pl, 4000},
		{"barrier", nvl.Barrier.AlphaNs, 300}, {"wait", nvl.Wait.AlphaNs, wait}, {"call", self.Call.AlphaNs, 100},
		{"signal after 4 KiB", s4a + s4l, 700}, {"signal after 16 KiB", s16a + s16l, 900},
		{"signal after 1 GiB", s1ga + s1gl, 900}, {"signal alone", nvl.Signal.AlphaNs, wait},
	} {
		if math.Abs(c.got-c.want) > 1e-6 {
			t.Errorf("%s: %v ns, want %v", c.what, c.got, c.want)
		}
	}
	// Graph mode: the put plans began with one 8-byte put to the rank
	// itself (lead 1), whose op cost is taken out again.
	times["lead"] = map[uint64]float64{1: 1}
	for _, n := range sizes {
		k := calPutsPer(n)
		times["put"][n] = perOne(base+op+float64(k)*(op+putT[n]), k)
	}
	if params, _, err = calParams(times, transport.KindNVL, sizes, 0); err != nil {
		t.Fatal(err)
	}
	for _, n := range sizes {
		if a, l := params["nvl"].Put.Of(n); math.Abs(a+l-putT[n]) > 1e-6 {
			t.Errorf("put of %d B after a lead: %v ns, want %v", n, a+l, putT[n])
		}
	}
	delete(times["hopn"], 16384)
	if _, _, err := calParams(times, transport.KindNVL, sizes, 0); err == nil || !strings.Contains(err.Error(), "no hopn time at 16384") {
		t.Errorf("a size without its hop: err %v", err)
	}
}

// Over the network a put plan's line holds a k-th of the flush's trip (k
// puts of a size, then the flush: 16 of 4 KiB, 4 of 16 KiB); calParams
// takes it out of the puts and keeps it as the class's Trip, the measured
// hop. Between ranks of one host there is no trip.
func TestCalParamsTrip(t *testing.T) {
	const empty, op, hop = 200.0, 40.0, 9000.0
	sizes := []uint64{4096, 16384}
	times := map[string]map[uint64]float64{
		"empty":   {1: empty},
		"ops":     {64: empty + 64*op},
		"hop":     {50: empty + 2*50*hop},
		"put":     {4096: empty + op + 11000 + hop/16, 16384: empty + op + 14000 + hop/4},
		"self":    {4096: empty + op + 500, 16384: empty + op + 2000},
		"barrier": {20: empty + 20*(op+300)},
	}
	params, _, err := calParams(times, transport.KindNet, sizes, 0)
	if err != nil {
		t.Fatal(err)
	}
	net := params["net"]
	a, l := net.Put.Of(4096)
	b, m := net.Put.Of(16384)
	if math.Abs(a+l-11000) > 1e-6 || math.Abs(b+m-14000) > 1e-6 || net.Trip.AlphaNs != hop {
		t.Errorf("net: put of 4 KiB %v ns, of 16 KiB %v, trip %v: want 11000, 14000 and %v", a+l, b+m, net.Trip.AlphaNs, hop)
	}
	// The hops of each size over the network hold a 2kh-th of the
	// closing flush's trip too: a signal of 3,000 ns after 4 KiB and
	// 5,000 after 16 KiB, beyond the put and a wait of 0.
	times["hopn"] = map[uint64]float64{}
	for n, sg := range map[uint64]float64{4096: 3000, 16384: 5000} {
		k := float64(2 * calHopsPer(n))
		pa, pl := net.Put.Of(n)
		times["hopn"][n] = empty + op + pa + pl + sg + hop/k
	}
	if params, _, err = calParams(times, transport.KindNet, sizes, 0); err != nil {
		t.Fatal(err)
	}
	for n, want := range map[uint64]float64{4096: 3000, 16384: 5000} {
		if a, l := params["net"].Signal.Of(n); math.Abs(a+l-want) > 1e-6 {
			t.Errorf("net signal after %d B: %v ns, want %v", n, a+l, want)
		}
	}
	// Where the exchanges both ways were timed (swap: kh a plan, a kh-th
	// of the trip a line), the signal comes from them, not from the hops.
	times["swap"] = map[uint64]float64{}
	for n, sg := range map[uint64]float64{4096: 7000, 16384: 9000} {
		pa, pl := net.Put.Of(n)
		times["swap"][n] = empty + op + pa + pl + sg + hop/float64(calHopsPer(n))
	}
	if params, _, err = calParams(times, transport.KindNet, sizes, 0); err != nil {
		t.Fatal(err)
	}
	for n, want := range map[uint64]float64{4096: 7000, 16384: 9000} {
		if a, l := params["net"].Signal.Of(n); math.Abs(a+l-want) > 1e-6 {
			t.Errorf("net signal after %d B from the exchanges: %v ns, want %v", n, a+l, want)
		}
	}
	delete(times["swap"], 4096)
	if _, _, err := calParams(times, transport.KindNet, sizes, 0); err == nil || !strings.Contains(err.Error(), "no swap time at 4096") {
		t.Errorf("a size without its exchange: err %v", err)
	}
	delete(times, "swap")
	delete(times, "hopn")
	if params, _, err = calParams(times, transport.KindSHM, sizes, 0); err != nil {
		t.Fatal(err)
	}
	if shm := params["shm"]; shm.Trip.AlphaNs != 0 {
		t.Errorf("shm trip %v: want none", shm.Trip.AlphaNs)
	}
	if calPutsPer(4096) != 16 || calPutsPer(16384) != 4 || calPutsPer(1<<20) != 1 {
		t.Error("calPutsPer does not match calibrate.lua's k")
	}
}

// calSwitch finds the switch cost under which the model gives the time
// the plan of partners on one CPU took: made here with the shipped host
// model and a switch of 1.5 us, it gives that back.
func TestCalSwitch(t *testing.T) {
	base, err := cost.Default("host")
	if err != nil {
		t.Fatal(err)
	}
	partner := func(r int) int { return (r + 2) % 4 }
	with := *base
	with.Modes = map[string]map[string]cost.Params{"host": {}}
	for k, p := range base.Modes["host"] {
		with.Modes["host"][k] = p
	}
	self := with.Modes["host"]["self"]
	self.Switch = cost.Cost{AlphaNs: 1500}
	with.Modes["host"]["self"] = self
	res, err := cost.Estimate(&with, cost.Input{Lists: cost.ExchangeLists(4, switchSteps, partner, partner), Mode: "host", CPUs: 2, Replays: luabind.SteadyReplays})
	if err != nil {
		t.Fatal(err)
	}
	got, err := calSwitch(base, calTimes{"same": {switchSteps: res.Steady}}, 4, 2)
	if err != nil || math.Abs(got-1500) > 1e-3 {
		t.Errorf("switch %v ns (%v), want 1500", got, err)
	}
	if _, err := calSwitch(base, calTimes{"ring": {switchSteps: res.Steady}}, 4, 2); err == nil {
		t.Error("no time of the partners' plan: want an error")
	}
}

// With twice as many ranks as CPUs, calibrate measures the switch cost
// into the host model -o holds (and refuses when there is none): the
// model keeps its other costs and gains a switch, positive unless its
// note says the model predicts the switch plans' time without one (a
// model made on a machine busier than the switch plans found it).
func TestCalibrateSwitch(t *testing.T) {
	cpus := runtime.NumCPU()
	if cpus > 4 {
		t.Skipf("%d CPUs: the switch is measured with twice as many ranks, too many for a test", cpus)
	}
	n := fmt.Sprint(2 * cpus)
	out := filepath.Join(t.TempDir(), "model.json")
	r := luacoll(t, nil, "calibrate", "-n", n, "--iters", "3", "--rounds", "3", "-o", out)
	if r.code == 0 || !strings.Contains(r.stderr, "measure only the switch cost") {
		t.Fatalf("no model to merge into: exit %d, stderr:\n%s", r.code, r.stderr)
	}
	if r = luacoll(t, nil, "calibrate", "-n", "2", "-b", "4K", "-e", "64K", "--iters", "3", "-o", out); r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	if r = luacoll(t, nil, "calibrate", "-n", n, "--iters", "3", "--rounds", "3", "-o", out); r.code != 0 || !strings.Contains(r.stdout, "switch, "+n+" ranks") {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	m := readModel(t, out)
	self, shm := m.Modes["host"]["self"], m.Modes["host"]["shm"]
	zero := strings.Contains(m.Note, "0 is kept")
	if self.Switch.AlphaNs < 0 || (self.Switch.AlphaNs == 0) != zero || self.Op.AlphaNs <= 0 || len(shm.Put.Sizes) != 3 {
		t.Errorf("self %+v, shm %+v, note %q: want a switch cost beside the costs measured before", self, shm, m.Note)
	}
}

// readModel reads and parses the model calibrate wrote to path.
func readModel(t *testing.T, path string) *cost.Model {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	m, err := cost.Parse(data)
	if err != nil {
		t.Fatalf("%v\n%s", err, data)
	}
	return m
}

// -e auto reaches past the last-level cache on the host backend (the
// first size of the x4 series from -b at or past 4 times it, at most
// 1 GiB), and is 16M on CUDA, across nodes or with a small or unknown
// cache; at least 4 times -b either way; -e given is kept.
func TestCalMax(t *testing.T) {
	for _, c := range []struct {
		b, e, device string
		nodes        int
		cache        uint64
		want         string
	}{
		{"4K", "auto", "host", 1, 32 << 20, "268435456"},
		{"4K", "auto", "host", 1, 8 << 20, "67108864"},
		{"4K", "auto", "host", 1, 4 << 20, "16M"},
		{"4K", "auto", "host", 1, 0, "16M"},
		{"4K", "auto", "host", 2, 32 << 20, "16M"},
		{"4K", "auto", "cuda", 1, 32 << 20, "16M"},
		{"4K", "64M", "host", 1, 32 << 20, "64M"},
		{"1K", "auto", "host", 1, 40 << 20, "268435456"},
		{"4K", "auto", "host", 1, 300 << 20, "1073741824"},
		{"256M", "auto", "host", 1, 32 << 20, "1073741824"},
		{"512M", "auto", "host", 1, 32 << 20, "2147483648"},
		{"8M", "auto", "cuda", 1, 0, "33554432"},
		{"x", "auto", "host", 1, 32 << 20, "16M"},
	} {
		if got := calMax(c.b, c.e, c.device, c.nodes, c.cache); got != c.want {
			t.Errorf("calMax(%q, %q, %s, %d, %d) = %s, want %s", c.b, c.e, c.device, c.nodes, c.cache, got, c.want)
		}
	}
	sizes, err := calSizes("4K", calMax("4K", "auto", "host", 1, 32<<20), 4)
	if err != nil || sizes[len(sizes)-1] != 256<<20 {
		t.Errorf("sizes %v (%v), want a series ending at 256 MiB", sizes, err)
	}
	// -f 2 measures the sizes between too; -f 1 is refused, naming -f.
	if sizes, err = calSizes("1K", "16K", 2); err != nil || len(sizes) != 5 || sizes[1] != 2048 {
		t.Errorf("-b 1K -e 16K -f 2: %v (%v), want 1K, 2K, 4K, 8K, 16K", sizes, err)
	}
	if _, err = calSizes("1K", "16K", 1); err == nil || !strings.Contains(err.Error(), "-f 1") {
		t.Errorf("-f 1: %v, want an error naming -f", err)
	}
}

// The moved cost's table is non-decreasing in size: a run of times that
// fall is pooled into its mean; one that rises is kept.
func TestMonotone(t *testing.T) {
	for _, tc := range []struct{ in, want []float64 }{
		{[]float64{1, 2, 3}, []float64{1, 2, 3}},
		{[]float64{0.2, 1.4, 6.3, 31.7, 2.1, 67, 0, 57.5}, []float64{0.2, 1.4, 6.3, 16.9, 16.9, 33.5, 33.5, 57.5}},
		{[]float64{5, 4, 3}, []float64{4, 4, 4}},
		{nil, []float64{}},
	} {
		got := monotone(tc.in)
		if len(got) != len(tc.want) {
			t.Fatalf("monotone(%v) = %v", tc.in, got)
		}
		for i := range got {
			if math.Abs(got[i]-tc.want[i]) > 1e-9 {
				t.Fatalf("monotone(%v) = %v, want %v", tc.in, got, tc.want)
			}
		}
	}
}

// How many puts a plan held comes from calibrate.lua's putk lines, else
// calPutsPer;
// calLead takes the lead puts' cost out of a put by that many.
func TestCalPutsPerFromScript(t *testing.T) {
	times := calTimes{"putk": {4096: 1, 16384: 4}, "put": {4096: 5000, 16384: 6000}}
	for _, c := range []struct{ n, want uint64 }{{4096, 1}, {16384, 4}, {65536, 1}} {
		if got := times.putsPer(c.n); got != c.want {
			t.Errorf("putsPer(%d) = %d, want %d", c.n, got, c.want)
		}
	}
	if got := (calTimes{}).putsPer(4096); got != 16 {
		t.Errorf("no putk lines: putsPer(4096) = %d, want calPutsPer's 16", got)
	}
	led := calLead(times, 400)
	if led["put"][4096] != 4600 || led["put"][16384] != 5900 {
		t.Errorf("calLead: %v, want the lead's 400 ns whole from the plan of one put, a quarter from the plan of four", led["put"])
	}
}

// Every rank of a calibration agrees on whether ranks 0 and 1 are network
// peers (the ranks that look on pick the same modes and measurements):
// ranks 0 and 1 each other's class, the others the network where 0
// reaches 1 over it, else shm, whatever their own classes to 0 and 1.
func TestCalClassSameOnEveryRank(t *testing.T) {
	// Two nodes of two: ranks 0, 1 on one, 2, 3 on the other.
	local := &transport.Topology{Kinds: []transport.PeerKind{transport.KindSelf, transport.KindNVL, transport.KindNet, transport.KindNet},
		Net: [][]bool{{false, false, true, true}, {false, false, true, true}, {true, true, false, false}, {true, true, false, false}}}
	far := &transport.Topology{Kinds: []transport.PeerKind{transport.KindNet, transport.KindNet, transport.KindSelf, transport.KindNVL}, Net: local.Net}
	if got := calClass(local, 0); got != transport.KindNVL {
		t.Errorf("rank 0: %v, want nvl", got)
	}
	if got := calClass(far, 2); got == transport.KindNet {
		t.Errorf("rank 2 of the other node: %v, want a class other than net (ranks 0 and 1 share a node)", got)
	}
	// One rank a node: 0 and 1 across the network.
	apart := &transport.Topology{Kinds: []transport.PeerKind{transport.KindNet, transport.KindSelf, transport.KindNet},
		Net: [][]bool{{false, true, true}, {true, false, true}, {true, true, false}}}
	if got := calClass(apart, 1); got != transport.KindNet {
		t.Errorf("rank 1: %v, want net", got)
	}
	if got := calClass(apart, 2); got != transport.KindNet {
		t.Errorf("rank 2: %v, want net", got)
	}
}
