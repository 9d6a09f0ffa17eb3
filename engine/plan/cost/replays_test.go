package cost

import (
	"testing"

	"github.com/luacoll/luacoll/engine/plan"
)

// In a loop of replays, rank 0 sends a chunk (1,100 ns a put) and rank 1
// waits for it, then fills its window (120 ns): the first replay ends at
// 1,220 ns, but the next ones end a put apart (rank 0 goes on to its next
// put while rank 1 fills), so a replay takes 1,100 ns in the loop. Each
// replay's wait is for one more signal than the last: a wait value left
// as recorded would let rank 1 run ahead (it would end at 4 x 120 ns after
// the first signal).
func TestSteadyReplays(t *testing.T) {
	const n = 1000
	lists := []plan.List{
		agList(2, n, []plan.Op{putSig(1, 0, 1, 0, n)}),
		agList(2, n, []plan.Op{waitFrom(0, 1), {Kind: plan.Fill, Buf: 0}}),
	}
	res, err := Estimate(testModel(0), Input{Lists: lists, Mode: "host", Replays: 4})
	if err != nil {
		t.Fatal(err)
	}
	near(t, "first replay", res.Time, 1220, 1e-9)
	near(t, "a replay in the loop", res.Steady, 1100, 1e-9)

	near(t, "a call without a call cost", res.PerCall, res.Steady, 1e-9)
	// A call cost (a launch a p:run) adds to a call, not to a replay.
	m := testModel(0)
	self := m.Modes["host"]["self"]
	self.Call = Cost{AlphaNs: 3000}
	m.Modes["host"]["self"] = self
	called, err := Estimate(m, Input{Lists: lists, Mode: "host", Replays: 4})
	if err != nil {
		t.Fatal(err)
	}
	near(t, "a replay with a call cost", called.Steady, 1100, 1e-9)
	near(t, "a call", called.PerCall, 4100, 1e-9)

	// Every replay in the loop pays the replay's fixed cost (a graph's
	// launch), not the first alone: 500 ns before rank 0's put.
	self = m.Modes["host"]["self"]
	self.Call, self.Replay = Cost{}, Cost{AlphaNs: 500}
	m.Modes["host"]["self"] = self
	fixed, err := Estimate(m, Input{Lists: lists, Mode: "host", Replays: 4})
	if err != nil {
		t.Fatal(err)
	}
	near(t, "a replay with a fixed cost", fixed.Steady, 1600, 1e-9)

	one, err := Estimate(testModel(0), Input{Lists: lists, Mode: "host"})
	if err != nil {
		t.Fatal(err)
	}
	if one.Steady != one.Time {
		t.Errorf("one replay: steady %v, want its time %v", one.Steady, one.Time)
	}
	rep := repeatLists(lists, 3)
	if got := []uint64{rep[1].Ops[0].Value, rep[1].Ops[2].Value, rep[1].Ops[4].Value}; got[0] != 1 || got[1] != 2 || got[2] != 3 {
		t.Errorf("the waits of 3 replays wait for %v, want 1, 2, 3", got)
	}
}

// A symmetric ring's timings tie at every wait (the signal lands as the
// wait begins): the critical path takes the rank that sent, so it goes
// round the ring through every rank.
func TestRingPathGoesAround(t *testing.T) {
	const ranks = 4
	for _, m := range []*Model{testModel(0), withOp(testModel(300), 150, 900)} {
		res, err := Estimate(m, Input{Lists: ringLists(ranks, 1<<16), Mode: "host"})
		if err != nil {
			t.Fatal(err)
		}
		checkPath(t, res)
		seen := map[int]bool{}
		waits := 0
		for _, s := range res.Path {
			seen[s.Rank] = true
			if s.Kind == plan.WaitSignalFrom {
				waits++
			}
		}
		if len(seen) != ranks || waits != ranks-1 {
			t.Errorf("path over ranks %v with %d waits, want all %d ranks and %d waits: %+v", seen, waits, ranks, ranks-1, res.Path)
		}
	}
}

// A flush, where the model measured one with nothing in flight, costs that
// in place of its op cost and wait; the first op of a replay still pays
// the replay's fixed cost.
func TestFlushCost(t *testing.T) {
	const op, replay, flush = 20, 7, 3
	m := withOp(testModel(10), op, replay)
	p := m.Modes["host"]["self"]
	p.Flush = &Cost{AlphaNs: flush}
	m.Modes["host"]["self"] = p
	lists := []plan.List{
		agList(2, 100, []plan.Op{{Kind: plan.Flush}, {Kind: plan.Fill, Buf: 1}, {Kind: plan.Flush}, {Kind: plan.Fence}}),
		agList(2, 100, []plan.Op{{Kind: plan.Fill, Buf: 1}, {Kind: plan.Flush}}),
	}
	res, err := Estimate(m, Input{Lists: lists, Mode: "host"})
	if err != nil {
		t.Fatal(err)
	}
	fill := op + 100 + 100*0.01
	near(t, "rank 0", res.PerRank[0], replay+flush+fill+2*flush, 1e-9)
	near(t, "rank 1", res.PerRank[1], replay+fill+flush, 1e-9)
	if _, err := Parse([]byte(`{"machine":"m","backend":"host","modes":{"host":{"self":{"put":{"alpha_ns":1,"beta_ns_per_byte":0},"signal":{"alpha_ns":0,"beta_ns_per_byte":0},"wait":{"alpha_ns":0,"beta_ns_per_byte":0},"copy":{"alpha_ns":0,"beta_ns_per_byte":0},"barrier":{"alpha_ns":0,"beta_ns_per_byte":0},"flush":{"alpha_ns":-1,"beta_ns_per_byte":0}}}}}`)); err == nil {
		t.Error("a negative flush cost parsed")
	}
}
