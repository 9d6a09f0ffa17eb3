package cost

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/luacoll/luacoll/engine/plan"
	"github.com/luacoll/luacoll/transport"
)

// testModel has start and per-byte costs on puts only, so that the
// alpha-beta closed forms hold exactly; extra adds start costs to
// signals and waits.
func testModel(extra float64) *Model {
	p := func(alpha, beta float64) Params {
		return Params{Put: Cost{AlphaNs: alpha, BetaNs: beta}, Signal: Cost{AlphaNs: extra}, Wait: Cost{AlphaNs: extra}, Copy: Cost{AlphaNs: alpha, BetaNs: beta}}
	}
	return &Model{Machine: "test", Backend: "host", Modes: map[string]map[string]Params{"host": {
		"self": p(100, 0.01), "shm": p(1000, 0.1), "net": p(5000, 0.5)}}}
}

// withOp gives every class of m's host mode an op cost of op ns and the
// self class a replay cost of replay ns.
func withOp(m *Model, op, replay float64) *Model {
	for k, p := range m.Modes["host"] {
		p.Op = Cost{AlphaNs: op}
		if k == "self" {
			p.Replay = Cost{AlphaNs: replay}
		}
		m.Modes["host"][k] = p
	}
	return m
}

func near(t *testing.T, what string, got, want, tol float64) {
	t.Helper()
	if math.Abs(got-want) > tol*want {
		t.Errorf("%s: %.0f ns, want %.0f ns (within %.1f %%)", what, got, want, tol*100)
	}
}

// checkPath asserts that the critical path is contiguous (each op goes on
// when the one before it ends), starts at 0 and ends at the replay's end,
// and that its link time and start costs add up to it.
func checkPath(t *testing.T, res *Result) {
	t.Helper()
	if len(res.Path) == 0 {
		t.Fatal("no critical path")
	}
	if res.Path[0].Start != 0 {
		t.Errorf("the path starts at %v, want 0", res.Path[0].Start)
	}
	for i := 1; i < len(res.Path); i++ {
		if a, b := res.Path[i-1].End, res.Path[i].Start; math.Abs(a-b) > 1e-6*res.Time {
			t.Fatalf("path step %d (rank %d op %d) starts at %v, the step before ends at %v", i, res.Path[i].Rank, res.Path[i].Op, b, a)
		}
	}
	if end := res.Path[len(res.Path)-1].End; end != res.Time {
		t.Errorf("the path ends at %v, the replay at %v", end, res.Time)
	}
	near(t, "link + start cost", res.Link+res.StartCost, res.Time, 1e-9)
}

// A 1,024-rank ring all-gather (256 under -race) takes (N-1)(alpha + n beta) after the
// rank's own copy: each step waits for the chunk the step before it sent.
// With a moved cost, the N-2 steps that forward a chunk the left
// neighbour wrote pay it too.
func TestRing1024ClosedForm(t *testing.T) {
	const ranks, n = ringRanks, 1 << 20
	lists := ringLists(ranks, n)
	for _, c := range []struct{ extra, op, replay, moved float64 }{{0, 0, 0, 0}, {300, 0, 0, 0}, {300, 150, 900, 0}, {300, 150, 900, 2500}} {
		extra, op := c.extra, c.op
		m := withOp(testModel(extra), op, c.replay)
		self := m.Modes["host"]["self"]
		self.Moved = Cost{AlphaNs: c.moved}
		m.Modes["host"]["self"] = self
		res, err := Estimate(m, Input{Lists: lists, Mode: "host"})
		if err != nil {
			t.Fatal(err)
		}
		shm := m.Modes["host"]["shm"].Put
		// A step is a put_signal and a wait, each paying the op cost.
		step := shm.AlphaNs + n*shm.BetaNs + 2*extra + 2*op
		// The replay's fixed cost, the barrier, the rank's own copy; a
		// flush ends the replay.
		own := c.replay + op + op + 100 + n*0.01
		closed := (ranks-1)*step + (ranks-2)*c.moved
		near(t, "ring, exact", res.Time, own+closed+op+extra, 1e-9)
		near(t, "ring, closed form", res.Time, closed, 0.05)
		checkPath(t, res)
		// Each wait's signal lands as the wait begins (or, with an op
		// cost, before it looks): the path takes the sender, round the
		// ring.
		if len(res.Path) < 2*(ranks-1) || res.Path[len(res.Path)-2].Rank == res.Path[2].Rank {
			t.Errorf("the path has %d ops, want the %d put_signals and waits of the ring at least, crossing ranks", len(res.Path), 2*(ranks-1))
		}
		near(t, "link time on the path", res.Link, (ranks-1)*n*shm.BetaNs+n*0.01+(ranks-2)*c.moved, 1e-9)
		near(t, "start costs on the path", res.StartCost, res.Time-res.Link, 1e-9)
		for r, v := range res.PerRank {
			if v > res.Time || v < res.Time-step {
				t.Fatalf("rank %d ends at %v, the replay at %v", r, v, res.Time)
			}
		}
	}
}

// Direct puts every chunk from the rank's stream, one after the other: the
// last chunk of a rank's inbox lands as its own last put ends.
func TestDirectClosedForm(t *testing.T) {
	const ranks, n = 256, 64 << 10
	res, err := Estimate(testModel(0), Input{Lists: directLists(ranks, n), Mode: "host"})
	if err != nil {
		t.Fatal(err)
	}
	closed := (ranks - 1) * (1000 + n*0.1)
	near(t, "direct, exact", res.Time, 100+n*0.01+closed, 1e-9)
	near(t, "direct, closed form", res.Time, closed, 0.05)
	checkPath(t, res)
}

// Hier over 32 nodes of 8: the pieces to the other nodes, the chunk to the
// local ranks, then every piece from another node forwarded to them.
func TestHierClosedForm(t *testing.T) {
	const nodes, per, n, pieces = 32, 8, 4 << 20, 4
	m := testModel(0)
	res, err := Estimate(m, Input{Lists: hierLists(nodes, per, n, pieces), Mode: "host", Class: layout(per, transport.KindSHM)})
	if err != nil {
		t.Fatal(err)
	}
	net, loc := m.Modes["host"]["net"].Put, m.Modes["host"]["shm"].Put
	l := float64(n / pieces)
	closed := (nodes-1)*pieces*(net.AlphaNs+l*net.BetaNs) + (per-1)*(loc.AlphaNs+n*loc.BetaNs) +
		(nodes-1)*pieces*(per-1)*(loc.AlphaNs+l*loc.BetaNs)
	near(t, "hier, closed form", res.Time, closed, 0.05)
	checkPath(t, res)
	// The model lacks nvl, which these lists never use: nothing borrowed.
	// With the local ranks on nvl, it is.
	if len(res.Borrowed) != 0 {
		t.Errorf("borrowed classes %v, want none", res.Borrowed)
	}
	res, err = Estimate(m, Input{Lists: hierLists(nodes, per, n, pieces), Mode: "host", Class: layout(per, transport.KindNVL)})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Borrowed) != 1 || res.Borrowed[0] != "nvl" {
		t.Errorf("borrowed classes %v, want [nvl]", res.Borrowed)
	}
}

// A wait that blocks ends when the signal it needs lands, and the path
// crosses to the rank that sent it.
func TestWaitEndsWhenSignalLands(t *testing.T) {
	const n = 1000
	lists := []plan.List{
		agList(2, n, []plan.Op{putSig(1, 0, 1, 0, n)}),
		agList(2, n, []plan.Op{waitFrom(0, 1), {Kind: plan.Flush}}),
	}
	m := testModel(10)
	res, err := Estimate(m, Input{Lists: lists, Mode: "host"})
	if err != nil {
		t.Fatal(err)
	}
	land := 1000 + n*0.1 + 10
	want := land + 10 + 10 // the wait's start cost, then the flush's
	near(t, "rank 1", res.PerRank[1], want, 1e-9)
	near(t, "rank 0", res.PerRank[0], land, 1e-9)
	if len(res.Path) != 3 || res.Path[0].Rank != 0 || res.Path[1].Rank != 1 || res.Path[1].Kind != plan.WaitSignalFrom ||
		res.Path[0].Class != transport.KindSHM || res.Path[0].Peer != 1 {
		t.Fatalf("path %+v, want rank 0's put_signal, then rank 1's wait and flush", res.Path)
	}
	near(t, "link", res.Link, n*0.1, 1e-9)
	checkPath(t, res)
}

// A signal measured by size (calibrate's hops of each size) costs a
// put_signal what it costs after that many bytes: 40 ns after 512, 240
// after 4096 (between them, interpolated; past them, the last), and a
// signal alone its start cost.
func TestSignalBySize(t *testing.T) {
	m := testModel(10)
	p := m.Modes["host"]["shm"]
	p.Signal = Cost{AlphaNs: 10, Sizes: []uint64{8, 512, 4096}, TimesNs: []float64{10, 40, 240}}
	m.Modes["host"]["shm"] = p
	for _, c := range []struct {
		n   uint64
		sig float64
	}{{512, 40}, {1000, 40 + 200*488.0/3584}, {4096, 240}, {1 << 20, 240}} {
		lists := []plan.List{
			agList(2, c.n, []plan.Op{putSig(1, 0, 1, 0, c.n)}),
			agList(2, c.n, []plan.Op{waitFrom(0, 1), {Kind: plan.Flush}}),
		}
		res, err := Estimate(m, Input{Lists: lists, Mode: "host"})
		if err != nil {
			t.Fatal(err)
		}
		near(t, fmt.Sprintf("put_signal of %d B lands", c.n), res.PerRank[0], 1000+float64(c.n)*0.1+c.sig, 1e-9)
	}
	lists := []plan.List{
		agList(2, 8, []plan.Op{{Kind: plan.Signal, Peer: 1, Sig: 0, SigValue: 1}}),
		agList(2, 8, []plan.Op{waitFrom(0, 1)}),
	}
	res, err := Estimate(m, Input{Lists: lists, Mode: "host"})
	if err != nil {
		t.Fatal(err)
	}
	near(t, "signal alone", res.PerRank[0], 10, 1e-9)
}

// A barrier ends after the last rank arrives: its cost adds to that rank's
// time, and the others' path goes through it.
func TestBarrierWaitsForLast(t *testing.T) {
	lists := []plan.List{
		agList(2, 100, []plan.Op{{Kind: plan.Barrier}}),
		agList(2, 100, []plan.Op{{Kind: plan.Fill, Buf: 1}, {Kind: plan.Barrier}}),
	}
	m := testModel(0)
	p := m.Modes["host"]["shm"]
	p.Barrier = Cost{AlphaNs: 50, BetaNs: 5}
	m.Modes["host"]["shm"] = p
	res, err := Estimate(m, Input{Lists: lists, Mode: "host"})
	if err != nil {
		t.Fatal(err)
	}
	want := 100 + 100*0.01 + 50 + 2*5
	near(t, "rank 0", res.PerRank[0], want, 1e-9)
	near(t, "rank 1", res.PerRank[1], want, 1e-9)
	checkPath(t, res)
}

func TestEstimateErrors(t *testing.T) {
	m := testModel(0)
	stuck := []plan.List{agList(2, 8, []plan.Op{waitFrom(1, 1)}), agList(2, 8, nil)}
	for _, c := range []struct {
		name string
		in   Input
		want string
	}{
		{"deadlock", Input{Lists: stuck, Mode: "host"}, "rank 0 at op 1 (wait_signal_from"},
		{"mode", Input{Lists: stuck, Mode: "graph"}, `no mode "graph" (it has host)`},
		{"ranks", Input{Lists: stuck[:1], Mode: "host"}, "recorded for 2 ranks, but 1 lists"},
		{"bounds", Input{Lists: []plan.List{agList(1, 8, []plan.Op{waitFrom(3, 1)})}, Mode: "host"}, "rank 3 is outside"},
		{"none", Input{Mode: "host"}, "no ranks"},
	} {
		_, err := Estimate(m, c.in)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one with %q", c.name, err, c.want)
		}
	}
}

func TestParseModel(t *testing.T) {
	m, err := Default("host")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := m.Modes["host"]["shm"]; !ok || m.Backend != "host" {
		t.Fatalf("the shipped model has no host mode with shm: %+v", m)
	}
	if self := m.Modes["host"]["self"]; self.Op.AlphaNs <= 0 || self.Replay.AlphaNs <= 0 || m.Modes["host"]["shm"].Op.AlphaNs <= 0 {
		t.Errorf("the shipped host model has no op or replay cost: self %+v", self)
	}
	if _, err := Estimate(m, Input{Lists: ringLists(4, 1024), Mode: "host"}); err != nil {
		t.Fatal(err)
	}
	if _, err := Default("tpu"); err == nil || !strings.Contains(err.Error(), "no model is shipped for the tpu backend") {
		t.Errorf("Default(tpu): %v", err)
	}
	for _, c := range []struct{ text, want string }{
		{`{"modes": {}}`, "no modes"},
		{`{"modes": {"host": {"pcie": {}}}}`, `unknown transport "pcie"`},
		{`{"modes": {"host": {"shm": {"put": {"alpha_ns": -1}}}}}`, `class "shm", put: cost -1`},
		{`{"modes": {"host": {"shm": {"put": {"alpha_us": 1}}}}}`, `unknown field "alpha_us"`},
		{`{"modes": {"host": {}}}`, `mode "host" has no classes`},
		{`[`, "model:"},
		{`{"modes": {"host": {"shm": {"put": {"sizes": [2, 1], "times_ns": [1, 2]}}}}}`, "sizes must be positive and increasing"},
		{`{"modes": {"host": {"shm": {"put": {"sizes": [2], "times_ns": [1, 2]}}}}}`, "1 sizes but 2 times"},
		{`{"modes": {"host": {"shm": {"op": {"alpha_ns": -5}}}}}`, `class "shm", op: cost -5`},
		{`{"modes": {"host": {"self": {"replay": {"alpha_ns": "x"}}}}}`, "model:"},
		{`{"modes": {"host": {"shm": {}}}}`, `mode "host", class "shm" has no put, signal, wait, copy, barrier cost`},
		{`{"modes": {"host": {"shm": {"put": {"alpha_ns": 5}, "signal": {}, "wait": {}, "copy": {}}}}}`, `class "shm" has no barrier cost`},
		{`{"backend": "gpu", "modes": {"host": {"shm": {}}}}`, `backend "gpu": want host or cuda`},
		{`{"modes": {"warp": {"shm": {}}}}`, `mode "warp": want one of [host stream device graph]`},
	} {
		_, err := Parse([]byte(c.text))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one with %q", c.text, err, c.want)
		}
	}
}

func BenchmarkEstimateRing1024(b *testing.B) {
	lists := ringLists(1024, 1<<20)
	m := testModel(0)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := Estimate(m, Input{Lists: lists, Mode: "host"}); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkEstimateDirect1024(b *testing.B) {
	lists := directLists(1024, 1<<10)
	m := testModel(0)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := Estimate(m, Input{Lists: lists, Mode: "host"}); err != nil {
			b.Fatal(err)
		}
	}
}

// TestShippedModels: the host and CUDA models ship, found by the backend's
// name with or without its device.
func TestShippedModels(t *testing.T) {
	for _, b := range []string{"host", "cuda", "cuda:0", "cuda:3"} {
		if _, err := Default(b); err != nil {
			t.Errorf("%s: %v", b, err)
		}
	}
	if _, err := Default("tpu"); err == nil {
		t.Error("a model for a backend that has none")
	}
}

// The op cost: every op pays its class's before its own costs (the first
// one the replay's fixed cost too); a wait pays it as it reaches the wait,
// hidden when the wait then blocks, counted when its signal has landed.
func TestOpCost(t *testing.T) {
	const n, op, replay, extra = 1000, 20, 7, 10
	land := replay + op + 1000 + n*0.1 + extra // rank 0's put_signal
	for _, c := range []struct {
		name string
		fill bool // rank 1 fills its window 10 times (op + 100 + 2000*0.01 each) before it waits
		want float64
	}{
		{"blocked", false, land + extra + op + extra},
		{"landed", true, replay + 10*(op+100+2000*0.01) + op + extra + op + extra},
	} {
		first := []plan.Op{waitFrom(0, 1), {Kind: plan.Flush}}
		if c.fill {
			for range 10 {
				first = append([]plan.Op{{Kind: plan.Fill, Buf: 0}}, first...)
			}
		}
		lists := []plan.List{
			agList(2, n, []plan.Op{putSig(1, 0, 1, 0, n)}),
			agList(2, n, first),
		}
		res, err := Estimate(withOp(testModel(extra), op, replay), Input{Lists: lists, Mode: "host"})
		if err != nil {
			t.Fatal(err)
		}
		near(t, c.name+": rank 0", res.PerRank[0], land, 1e-9)
		near(t, c.name+": rank 1", res.PerRank[1], c.want, 1e-9)
		checkPath(t, res)
		if w := res.Path[len(res.Path)-2]; w.Kind != plan.WaitSignalFrom || (c.fill && w.StartCost != op+extra) || (!c.fill && w.StartCost != extra) {
			t.Errorf("%s: the wait on the path %+v: want start cost %v", c.name, w, map[bool]float64{true: op + extra, false: extra}[c.fill])
		}
	}
}

// At a barrier the last rank in pays its op cost before the others go on:
// their start cost holds it, from when that rank began its barrier op.
func TestOpCostBarrier(t *testing.T) {
	const op, replay = 20, 7
	lists := []plan.List{
		agList(2, 100, []plan.Op{{Kind: plan.Barrier}, {Kind: plan.Flush}}),
		agList(2, 100, []plan.Op{{Kind: plan.Fill, Buf: 1}, {Kind: plan.Barrier}}),
	}
	m := withOp(testModel(0), op, replay)
	p := m.Modes["host"]["shm"]
	p.Barrier = Cost{AlphaNs: 50}
	m.Modes["host"]["shm"] = p
	res, err := Estimate(m, Input{Lists: lists, Mode: "host"})
	if err != nil {
		t.Fatal(err)
	}
	bar := replay + op + 100 + 100*0.01 + op + 50
	near(t, "rank 1", res.PerRank[1], bar, 1e-9)
	near(t, "rank 0", res.PerRank[0], bar+op, 1e-9)
	checkPath(t, res)
	if len(res.Path) != 3 || res.Path[0].Rank != 1 || res.Path[1].StartCost != op+50 {
		t.Errorf("path %+v: want rank 1's fill, a barrier costing the op cost and its own, the flush", res.Path)
	}
}

// flushLists: rank 0 puts n bytes with a signal to rank 1 and flushes,
// rank 1 waits for the signal and flushes.
func flushLists(n uint64) []plan.List {
	return []plan.List{
		agList(2, n, []plan.Op{putSig(1, 0, 1, 0, n), {Kind: plan.Flush}}),
		agList(2, n, []plan.Op{waitFrom(0, 1), {Kind: plan.Flush}}),
	}
}

// A flush after a put to a network peer waits for the peer's answer: one
// of the net class's hops (an 8-byte put_signal and its wait) after the
// put landed. Between ranks of one host it waits for nothing
// more than its own start cost.
func TestFlushOverNetwork(t *testing.T) {
	const n = 1000
	lists := flushLists(n)
	m := testModel(10)
	for _, c := range []struct {
		per  int
		land float64
		trip float64
	}{{1, 5000 + n*0.5 + 10, 5000 + 8*0.5 + 10 + 10}, {2, 1000 + n*0.1 + 10, 0}} {
		res, err := Estimate(m, Input{Lists: lists, Mode: "host", Class: layout(c.per, transport.KindSHM)})
		if err != nil {
			t.Fatal(err)
		}
		// Rank 0: the put_signal, the flush's start cost, then the trip.
		near(t, "rank 0", res.PerRank[0], c.land+10+c.trip, 1e-9)
		// Rank 1: the wait ends as the signal lands; its flush finds
		// nothing of its own in flight.
		near(t, "rank 1", res.PerRank[1], c.land+10+10, 1e-9)
		checkPath(t, res)
	}
	// Only a flush pays the trip, once: a second flush with nothing new
	// in flight costs its start cost.
	lists[0].Ops = append(lists[0].Ops, plan.Op{Kind: plan.Flush})
	res, err := Estimate(m, Input{Lists: lists, Mode: "host", Class: layout(1, transport.KindSHM)})
	if err != nil {
		t.Fatal(err)
	}
	near(t, "rank 0, two flushes", res.PerRank[0], 5000+n*0.5+10+10+(5000+8*0.5+10+10)+10, 1e-9)
}

// A model that measured the net class's trip charges it, not the hop of
// its 8-byte put_signal.
func TestFlushTripMeasured(t *testing.T) {
	const n = 1000
	lists := flushLists(n)
	m := testModel(10)
	net := m.Modes["host"]["net"]
	net.Trip = Cost{AlphaNs: 3000}
	m.Modes["host"]["net"] = net
	res, err := Estimate(m, Input{Lists: lists, Mode: "host", Class: layout(1, transport.KindSHM)})
	if err != nil {
		t.Fatal(err)
	}
	near(t, "rank 0", res.PerRank[0], 5000+n*0.5+10+10+3000, 1e-9)
}

// A pairwise barrier with the rank itself is nothing (the window does
// nothing for it), not a wait for a partner that never comes; and a
// fence after a put to a network peer is a flush there.
func TestBarrierPeerSelfAndFenceOverNetwork(t *testing.T) {
	lists := []plan.List{
		agList(2, 100, []plan.Op{{Kind: plan.BarrierPeer, Peer: 0}, {Kind: plan.Barrier}}),
		agList(2, 100, []plan.Op{{Kind: plan.BarrierPeer, Peer: 1}, {Kind: plan.Barrier}}),
	}
	if _, err := Estimate(testModel(0), Input{Lists: lists, Mode: "host"}); err != nil {
		t.Fatalf("barrier_peer with itself: %v", err)
	}
	const n = 1000
	m := testModel(10)
	flushed, err := Estimate(m, Input{Lists: flushLists(n), Mode: "host", Class: layout(1, transport.KindSHM)})
	if err != nil {
		t.Fatal(err)
	}
	fenced := flushLists(n)
	for i := range fenced[0].Ops {
		if fenced[0].Ops[i].Kind == plan.Flush {
			fenced[0].Ops[i].Kind = plan.Fence
		}
	}
	res, err := Estimate(m, Input{Lists: fenced, Mode: "host", Class: layout(1, transport.KindSHM)})
	if err != nil {
		t.Fatal(err)
	}
	near(t, "rank 0, a fence for the flush", res.PerRank[0], flushed.PerRank[0], 1e-9)
	// A barrier flushes first too: it ends no sooner than the flush.
	barred := flushLists(n)
	for q := range barred {
		for i := range barred[q].Ops {
			if barred[q].Ops[i].Kind == plan.Flush {
				barred[q].Ops[i].Kind = plan.Barrier
			}
		}
	}
	res, err = Estimate(m, Input{Lists: barred, Mode: "host", Class: layout(1, transport.KindSHM)})
	if err != nil {
		t.Fatal(err)
	}
	if res.PerRank[0] < 0.99*flushed.PerRank[0] {
		t.Errorf("a barrier after a put over the network: %.1f ns, before the flush it begins with ends (%.1f ns)", res.PerRank[0], flushed.PerRank[0])
	}
}
