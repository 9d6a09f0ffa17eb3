package cost

import "github.com/luacoll/luacoll/engine/plan"

// The fan-out of stream and graph mode. There a plan's copies larger than
// the interpreter keeps (plan.FanOutInline) are put kernels, and copies of
// one source and size in a row (a chunk to several peers and to the
// rank's own place) one launch that runs them side by side, their signals
// after them all (gpu.SplitPlan). The simulation charges such a group
// the longest of its puts and the largest of its signals: each member
// after the first adds only what it takes beyond the group so far.

// fanOutPut returns the costs of put o on rank rk (a, l its put's start
// and link, sa, sl its signal's), as the rank's fan-out group changes
// them: o joins the group of the puts just before it, or begins one.
func (s *sim) fanOutPut(rk *rankState, o plan.Op, a, l, sa, sl float64) (float64, float64, float64, float64) {
	wide := s.fanOut > 0 && o.N > s.fanOut && o.N <= plan.AutoKernelCopy
	if !wide || rk.grpN == 0 || rk.grpN >= plan.FanOutMax || rk.pc == 0 || !joinsFanOut(rk.ops[rk.pc-1], o) {
		rk.grpN, rk.grpSpan, rk.grpSig = 0, 0, 0
		if wide {
			rk.grpN, rk.grpSpan, rk.grpSig = 1, a+l, sa+sl
		}
		return a, l, sa, sl
	}
	rk.grpN++
	put, sig := max(a+l-rk.grpSpan, 0), max(sa+sl-rk.grpSig, 0)
	rk.grpSpan, rk.grpSig = max(rk.grpSpan, a+l), max(rk.grpSig, sa+sl)
	return 0, put, 0, sig
}

// joinsFanOut reports whether put o goes in one launch with put prev
// before it: the same source bytes, a place apart from prev's.
func joinsFanOut(prev, o plan.Op) bool {
	if !prev.Kind.IsPut() || prev.Buf != o.Buf || prev.BufOff != o.BufOff || prev.N != o.N {
		return false
	}
	return prev.Peer != o.Peer || prev.Off+prev.N <= o.Off || o.Off+o.N <= prev.Off
}
