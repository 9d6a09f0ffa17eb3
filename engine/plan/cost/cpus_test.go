package cost

import (
	"strings"
	"testing"

	"github.com/luacoll/luacoll/engine/plan"
	"github.com/luacoll/luacoll/transport"
)

func withSwitch(m *Model, ns float64) *Model {
	p := m.Modes["host"]["self"]
	p.Switch = Cost{AlphaNs: ns}
	m.Modes["host"]["self"] = p
	return m
}

func pairs(lo, hi int) func(int) int {
	return func(r int) int {
		if r%(2*hi) < hi {
			return r + lo
		}
		return r - lo
	}
}

// Ranks that outnumber their host's processors take turns on them. With
// puts of P ns and nothing else costing anything: partners on one CPU
// (0-2, 1-3 on 2 CPUs) run one at a time, so K steps take the 2K puts of
// both one after the other, and the processor passes between them K+1
// times (after the first rank's first put, then every two puts, each rank
// sending as far as the other's signals let it, and once more for the
// last wait); partners on two CPUs (0-1, 2-3) go at once, K puts, and the
// second pair runs after the first, one pass later. A ring with no switch
// cost takes each CPU's two ranks' ops one after the other: twice its
// time with a CPU each. On 4 CPUs, or in 2 hosts of 2 on 2 CPUs each,
// nothing changes; 2 hosts of 2 on 1 CPU each take turns.
func TestCPUsTakeTurns(t *testing.T) {
	const steps, sw = 10, 700
	put := 1000 + 8*0.1 // testModel's shm put of 8 bytes
	est := func(m *Model, lists []plan.List, cpus int, class func(a, b int) transport.PeerKind) *Result {
		t.Helper()
		res, err := Estimate(m, Input{Lists: lists, Mode: "host", CPUs: cpus, Class: class})
		if err != nil {
			t.Fatal(err)
		}
		checkPath(t, res)
		return res
	}
	m := withSwitch(testModel(0), sw)
	same := ExchangeLists(4, steps, pairs(2, 2), pairs(2, 2))
	near(t, "partners on one CPU", est(m, same, 2, nil).Time, 2*steps*put+(steps+1)*sw, 1e-9)
	near(t, "partners on one CPU, each a CPU", est(m, same, 0, nil).Time, steps*put, 1e-9)
	cross := ExchangeLists(4, steps, pairs(1, 1), pairs(1, 1))
	near(t, "partners on two CPUs", est(m, cross, 2, nil).Time, 2*steps*put+sw, 1e-9)

	const n = 1 << 16
	r := withSwitch(withOp(testModel(300), 150, 900), 0)
	one := est(r, ringLists(4, n), 0, nil)
	near(t, "4 ranks on 2 CPUs", est(r, ringLists(4, n), 2, nil).Time, 2*one.Time, 1e-9)
	r = withSwitch(r, sw)
	near(t, "4 ranks on 4 CPUs", est(r, ringLists(4, n), 4, nil).Time, one.Time, 1e-9)
	nodes := layout(2, transport.KindSHM)
	apart := est(r, ringLists(4, n), 0, nodes).Time
	near(t, "2 hosts of 2 ranks on 2 CPUs each", est(r, ringLists(4, n), 2, nodes).Time, apart, 1e-9)
	if got := est(r, ringLists(4, n), 1, nodes).Time; got <= apart+sw {
		t.Errorf("2 hosts of 2 ranks on 1 CPU each: %.0f ns, want more than %.0f (a CPU each) and a switch", got, apart)
	}
	if _, err := Estimate(r, Input{Lists: ringLists(4, n), Mode: "host", CPUs: -1}); err == nil || !strings.Contains(err.Error(), "-1 CPUs") {
		t.Errorf("CPUs -1: error %v, want one naming it", err)
	}
}

// FitSwitch finds the switch cost a measured time implies: the one the
// model was made with, and 0 when the time is below what the model gives
// with none.
func TestFitSwitch(t *testing.T) {
	lists := ExchangeLists(4, 20, pairs(2, 2), pairs(2, 2))
	res, err := Estimate(withSwitch(testModel(5), 1234), Input{Lists: lists, Mode: "host", CPUs: 2, Replays: 3})
	if err != nil {
		t.Fatal(err)
	}
	m := testModel(5)
	got, err := FitSwitch(m, lists, 2, 3, res.Steady)
	if err != nil {
		t.Fatal(err)
	}
	near(t, "switch", got, 1234, 1e-6)
	if _, ok := m.Modes["host"]["self"]; !ok || m.Modes["host"]["self"].Switch.AlphaNs != 0 {
		t.Errorf("FitSwitch changed the model: %+v", m.Modes["host"]["self"])
	}
	if got, err := FitSwitch(m, lists, 2, 3, 10); err != nil || got != 0 {
		t.Errorf("a time below the model's with no switch: %v, %v, want 0", got, err)
	}
}
