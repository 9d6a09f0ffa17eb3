package cost

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/luacoll/luacoll/engine/plan"
)

// Rank 0 puts n bytes into rank 1's window; rank 1 forwards them (bytes
// another rank wrote: the model's Moved for n bytes on top of the put),
// forwards them again (its processor holds them now: no extra), then puts
// from its own buffer (no extra), fills its window and forwards from it
// again (its own bytes: no extra).
func TestMovedBytes(t *testing.T) {
	const n = 1000
	m := testModel(0)
	self := m.Modes["host"]["self"]
	self.Moved = Cost{AlphaNs: 50, BetaNs: 1}
	m.Modes["host"]["self"] = self
	fwd := plan.Op{Kind: plan.Put, Peer: 0, Off: n, Buf: 0, BufOff: 0, N: n}
	own := plan.Op{Kind: plan.Put, Peer: 0, Off: n, Buf: 1, BufOff: 0, N: n}
	lists := []plan.List{
		agList(2, n, []plan.Op{putSig(1, 0, 1, 0, n)}),
		agList(2, n, []plan.Op{waitFrom(0, 1), fwd, fwd, own, {Kind: plan.Fill, Buf: 0}, fwd}),
	}
	res, err := Estimate(m, Input{Lists: lists, Mode: "host"})
	if err != nil {
		t.Fatal(err)
	}
	put := 1000 + n*0.1
	near(t, "rank 1", res.PerRank[1], put+(put+50+n)+put+put+(100+2*n*0.01)+put, 1e-9)
	checkPath(t, res)
	delete(m.Modes["host"], "self")
	m.Modes["host"]["self"] = testModel(0).Modes["host"]["self"]
	if res, err = Estimate(m, Input{Lists: lists, Mode: "host"}); err != nil || res.PerRank[1] != 5*put+100+2*n*0.01 {
		t.Errorf("no Moved in the model: rank 1 %v (%v), want %v", res.PerRank[1], err, 5*put+100+2*n*0.01)
	}
}

// spans keep the marked ranges sorted, merged and cut.
func TestSpans(t *testing.T) {
	var ss spans
	ss.set(10, 20, true)
	ss.set(30, 40, true)
	ss.set(20, 30, true) // touches both: one range
	if len(ss) != 1 || ss[0] != (span{10, 40}) {
		t.Fatalf("merged %v, want [10, 40)", ss)
	}
	ss.set(15, 25, false)
	if len(ss) != 2 || ss[0] != (span{10, 15}) || ss[1] != (span{25, 40}) {
		t.Fatalf("cut %v, want [10, 15) [25, 40)", ss)
	}
	if got := ss.overlap(0, 30); got != 10 {
		t.Errorf("overlap of [0, 30): %d, want 10", got)
	}
	ss.set(5, 5, true)
	if got := ss.overlap(0, 100); got != 20 {
		t.Errorf("an empty range changed the spans: %v", ss)
	}
}

// spans agree with a byte map under random marks and cuts: sorted, merged
// where they touch, and every overlap count right.
func TestSpansRandom(t *testing.T) {
	const size = 200
	rng := rand.New(rand.NewPCG(3, 4))
	for trial := 0; trial < 200; trial++ {
		var ss spans
		var marked [size]bool
		for step := 0; step < 40; step++ {
			lo := rng.Uint64N(size)
			hi := lo + rng.Uint64N(size-lo+1)
			foreign := rng.IntN(3) > 0
			ss.set(lo, hi, foreign)
			for b := lo; b < hi; b++ {
				marked[b] = foreign
			}
			var want spans // the byte map's ranges
			for b := uint64(0); b < size; b++ {
				if !marked[b] {
					continue
				}
				if k := len(want); k > 0 && want[k-1].hi == b {
					want[k-1].hi++
				} else {
					want = append(want, span{b, b + 1})
				}
			}
			if !slices.Equal(ss, want) {
				t.Fatalf("trial %d step %d: set(%d, %d, %v): %v, want %v", trial, step, lo, hi, foreign, ss, want)
			}
			qlo := rng.Uint64N(size)
			qhi := qlo + rng.Uint64N(size-qlo+1)
			var n uint64
			for b := qlo; b < qhi; b++ {
				if marked[b] {
					n++
				}
			}
			if got := ss.overlap(qlo, qhi); got != n {
				t.Fatalf("overlap(%d, %d) of %v: %d, want %d", qlo, qhi, ss, got, n)
			}
		}
	}
}
