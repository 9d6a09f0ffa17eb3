package cost

import (
	"math"
	"testing"

	"github.com/luacoll/luacoll/engine/plan"
	"github.com/luacoll/luacoll/transport"
	"github.com/luacoll/luacoll/window"
)

// FuzzParseModel: any input is a model that passes Check and estimates a
// small ring, or an error; never a panic.
func FuzzParseModel(f *testing.F) {
	f.Add(hostModelSeed())
	f.Add([]byte(`{"modes": {"host": {"shm": {"put": {"alpha_ns": 1, "sizes": [1, 9], "times_ns": [3, 2]}}}}}`))
	f.Add([]byte(`{"modes": {"host": {"net": {}}}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := Parse(b)
		if err != nil {
			return
		}
		if err := m.Check(); err != nil {
			t.Fatalf("Parse gave a model Check refuses: %v", err)
		}
		for _, mode := range m.ModeNames() {
			res, err := Estimate(m, Input{Lists: ringLists(3, 100), Mode: mode})
			if err != nil {
				t.Fatalf("mode %s: %v", mode, err)
			}
			if res.Time < 0 || math.IsNaN(res.Time) {
				t.Fatalf("mode %s: time %v", mode, res.Time)
			}
		}
	})
}

func hostModelSeed() []byte {
	b, _ := shipped.ReadFile("models/host.json")
	return b
}

// FuzzEstimate: lists of any ops the shape allows either estimate, with a
// critical path that ends at the slowest rank and whose parts add up, or
// fail with an error; two estimates agree.
func FuzzEstimate(f *testing.F) {
	f.Add([]byte{3, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15})
	f.Add([]byte{2, 2, 1, 0, 0, 8, 9, 1, 1, 0, 0, 9, 0, 0, 0, 5})
	m := testModel(7)
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) < 2 {
			return
		}
		n := int(b[0]%4) + 1
		b = b[1:]
		lists := make([]plan.List, n)
		for r := range lists {
			lists[r].Shape = plan.Shape{Ranks: n, Bytes: 64, Signals: 2, Counters: 2, Barriers: 2, Buffers: []uint64{64, 32}}
		}
		for i := 0; i+4 <= len(b) && i < 4*64; i += 4 {
			x, y, z, w := b[i], b[i+1], b[i+2], b[i+3]
			o := plan.Op{Kind: plan.Kind(x % byte(plan.Fill+1)), Peer: int(y % 5), Off: uint64(z % 80), Buf: int(w % 3), BufOff: uint64(z % 40),
				N: uint64(w % 48), Sig: int(y % 3), SigValue: uint64(z%3 + 1), SigOp: window.SignalOp(x >> 7),
				Ctr: int(w % 3), CtrValue: 1, Cmp: transport.Cmp(y % 6), Value: uint64(w % 4), Bar: int(z % 3)}
			r := int(x>>5) % n
			lists[r].Ops = append(lists[r].Ops, o)
		}
		a, errA := Estimate(m, Input{Lists: lists, Mode: "host"})
		c, errC := Estimate(m, Input{Lists: lists, Mode: "host"})
		if (errA == nil) != (errC == nil) || (errA != nil && errA.Error() != errC.Error()) {
			t.Fatalf("two estimates differ: %v / %v", errA, errC)
		}
		if errA != nil {
			return
		}
		if a.Time != c.Time || len(a.Path) != len(c.Path) {
			t.Fatalf("two estimates differ: %v / %v", a.Time, c.Time)
		}
		for r, v := range a.PerRank {
			if v > a.Time {
				t.Fatalf("rank %d ends at %v, after the replay's end %v", r, v, a.Time)
			}
		}
		if a.Ops > 0 && len(a.Path) > 0 {
			if a.Path[len(a.Path)-1].End != a.Time || math.Abs(a.Link+a.StartCost-a.Time) > 1e-6*(1+a.Time) {
				t.Fatalf("path ends at %v, link %v + start %v, time %v", a.Path[len(a.Path)-1].End, a.Link, a.StartCost, a.Time)
			}
		}
	})
}
