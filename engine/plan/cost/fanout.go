package cost

import (
	"github.com/luacoll/luacoll/engine/plan"
	"github.com/luacoll/luacoll/transport"
)

// The fan-out of stream and graph mode. There a plan's copies larger than
// the interpreter keeps (plan.FanOutInline) are put kernels, and copies of
// one source and size in a row (a chunk to several peers and to the
// rank's own place) one launch that runs them side by side (gpu.SplitPlan),
// their signals after them all (the plan's fanOutReleases). The simulation
// groups a rank's puts as SplitPlan cuts them, from the group's first put
// on, and charges the first put the whole group: one start cost (the
// largest), for the bytes the longer of two sums (the puts to peers share
// the rank's links out, so their times add up; the copies within the
// rank's memory run beside them), and the largest of the signals. The
// others pay their op cost alone, so every signal of the group lands when
// the group's bytes have. (An own copy of 1 MiB or more runs on a side
// stream instead, beside the launches after it: the same time.) A rank
// whose list reaches a network peer runs no launches of its own (its plan
// enqueues op by op: plan.UseStream): its puts go one after the other.

// fanOutPut returns the costs of put o, the current op of rank r (a, l
// its put's start and link, sa, sl its signal's), as the rank's fan-out
// group makes them: the first put of a group is charged the group, the
// others nothing beyond their op cost.
func (s *sim) fanOutPut(r int, o plan.Op, a, l, sa, sl float64) (float64, float64, float64, float64) {
	rk := &s.ranks[r]
	if rk.net {
		return a, l, sa, sl
	}
	if rk.pc > rk.grpFrom && rk.pc < rk.grpTo {
		return 0, 0, 0, 0 // charged with the group's first put
	}
	if !s.wide(o) {
		return a, l, sa, sl
	}
	members := s.fanOutGroup(r)
	rk.grpFrom, rk.grpTo = rk.pc, rk.pc+len(members)
	if len(members) == 1 {
		return a, l, sa, sl
	}
	var start, out, in, sig float64
	for _, m := range members {
		p := s.tab[s.class(r, m.Peer)]
		ma, ml := p.Put.Of(m.N)
		start = max(start, ma)
		if m.Peer == r {
			in += ml
		} else {
			out += ml
		}
		if m.Kind.HasSignal() {
			ga, gl := p.Signal.Of(m.N)
			sig = max(sig, ga+gl)
		}
	}
	return start, max(out, in), 0, sig
}

// wide reports whether put o is a put kernel's in the replay mode: larger
// than its interpreter keeps, no larger than a put kernel takes on path
// auto.
func (s *sim) wide(o plan.Op) bool {
	return s.fanOut > 0 && o.Kind.IsPut() && o.N > s.fanOut && o.N <= plan.AutoKernelCopy
}

// fanOutGroup returns the puts of rank r's group that its current op
// heads: the op, then the puts right after it, within its replay, that go
// in the same launch (at most plan.FanOutMax): the same source bytes, a
// place meeting neither the source nor another member's, and not a second
// put_signal to one peer (the first one's signal stays between them).
func (s *sim) fanOutGroup(r int) []plan.Op {
	rk := &s.ranks[r]
	head := rk.ops[rk.pc]
	g := []plan.Op{head}
	if s.overlapsSource(r, head) {
		return g
	}
	for j := rk.pc + 1; j < len(rk.ops) && len(g) < plan.FanOutMax; j++ {
		o := rk.ops[j]
		if rk.replayLen > 0 && j%rk.replayLen == 0 {
			break // the next replay's
		}
		if !s.wide(o) || o.Buf != head.Buf || o.BufOff != head.BufOff || o.N != head.N || s.overlapsSource(r, o) {
			break
		}
		for _, m := range g {
			if m.Peer == o.Peer && (m.Off < o.Off+o.N && o.Off < m.Off+m.N || m.Kind.HasSignal() || o.Kind.HasSignal()) {
				return g
			}
		}
		g = append(g, o)
	}
	return g
}

// overlapsSource reports whether put o of rank r writes bytes it reads
// (an own put within the window).
func (s *sim) overlapsSource(r int, o plan.Op) bool {
	return o.Peer == r && o.Buf == plan.WindowBuf && o.Off < o.BufOff+o.N && o.BufOff < o.Off+o.N
}

// reachesNet reports whether rank r's ops reach a peer over the network
// (a put, get, signal or reduction there), which the device interpreter
// cannot (plan.UseStream then enqueues the plan op by op).
func reachesNet(r int, ops []plan.Op, class func(r, q int) transport.PeerKind, ranks int) bool {
	for _, o := range ops {
		switch {
		case o.Kind == plan.SignalAll:
			for q := 0; q < ranks; q++ {
				if q != r && class(r, q) == transport.KindNet {
					return true
				}
			}
		case o.Kind.IsPut() || o.Kind.ReadsPeer() || o.Kind == plan.Signal:
			if o.Peer != r && class(r, o.Peer) == transport.KindNet {
				return true
			}
		}
	}
	return false
}
