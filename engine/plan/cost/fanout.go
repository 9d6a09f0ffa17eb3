package cost

import "github.com/luacoll/luacoll/engine/plan"

// The fan-out of stream and graph mode. There a plan's copies larger than
// the interpreter keeps (plan.FanOutInline) are put kernels, and copies of
// one source and size in a row (a chunk to several peers and to the
// rank's own place) one launch that runs them side by side, their signals
// after them all (gpu.SplitPlan). The simulation charges such a group one
// start cost (the largest), the largest of its signals, and for its bytes
// the longer of two sums: the puts to peers share the rank's links out
// (their times add up), the copies within the rank's memory run beside
// them. Each member after the first adds what it makes the group take
// beyond the group so far.

// fanOutPut returns the costs of put o of rank rk (a, l its put's start
// and link, sa, sl its signal's; own: to the rank itself), as the rank's
// fan-out group changes them: o joins the group of the puts just before
// it, or begins one.
func (s *sim) fanOutPut(rk *rankState, o plan.Op, own bool, a, l, sa, sl float64) (float64, float64, float64, float64) {
	wide := s.fanOut > 0 && o.N > s.fanOut && o.N <= plan.AutoKernelCopy
	if !wide || rk.grp.n == 0 || rk.grp.n >= plan.FanOutMax || rk.pc == 0 || !joinsFanOut(rk.ops[rk.pc-1], o) {
		rk.grp = fanOutGroup{}
		if wide {
			rk.grp = fanOutGroup{n: 1, start: a, sig: sa + sl}
			rk.grp.add(own, l)
		}
		return a, l, sa, sl
	}
	before := rk.grp.span()
	rk.grp.n++
	rk.grp.start = max(rk.grp.start, a)
	rk.grp.add(own, l)
	sig := max(sa+sl-rk.grp.sig, 0)
	rk.grp.sig = max(rk.grp.sig, sa+sl)
	return 0, max(rk.grp.span()-before, 0), 0, sig
}

// fanOutGroup is a rank's fan-out group so far: how many puts, the
// largest start cost and signal, the link times of the puts to peers and
// of those within the rank (each summed).
type fanOutGroup struct {
	n          int
	start, sig float64
	out, in    float64
}

// add counts a member's link time l (own: a copy within the rank).
func (g *fanOutGroup) add(own bool, l float64) {
	if own {
		g.in += l
	} else {
		g.out += l
	}
}

// span is the time of the group's puts: a start, then the longer sum.
func (g *fanOutGroup) span() float64 { return g.start + max(g.out, g.in) }

// joinsFanOut reports whether put o goes in one launch with put prev
// before it: the same source bytes, a place apart from prev's.
func joinsFanOut(prev, o plan.Op) bool {
	if !prev.Kind.IsPut() || prev.Buf != o.Buf || prev.BufOff != o.BufOff || prev.N != o.N {
		return false
	}
	return prev.Peer != o.Peer || prev.Off+prev.N <= o.Off || o.Off+o.N <= prev.Off
}
