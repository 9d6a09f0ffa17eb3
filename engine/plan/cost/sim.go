package cost

import (
	"fmt"
	"math"
	"strings"

	"github.com/luacoll/luacoll/engine/plan"
	"github.com/luacoll/luacoll/transport"
	"github.com/luacoll/luacoll/window"
)

// ref names op of rank (both from 0); rank -1 is none.
type ref struct{ rank, op int32 }

var none = ref{-1, -1}

// rankState is one rank's stream in the simulation and the times of its
// ops: start (when the op could go on), alpha (its start cost), end, and
// cause (what it waited for last).
type rankState struct {
	ops               []plan.Op
	shape             plan.Shape
	start, alpha, end []float64
	cause             []ref
	pc                int
	// replayLen is how many ops one replay holds where the list is
	// several replays back to back (steady; 0: one replay): each pays the
	// replay's fixed cost before its first op.
	replayLen int
	// grpFrom, grpTo: the ops [grpFrom, grpTo) of the rank's last fan-out
	// group (fanout.go).
	grpFrom, grpTo int
	// net: the rank's list reaches a network peer: it has no fan-out (its
	// plan runs op by op), and its copies within itself cost the net
	// class's Copy (what calibrate measured there: on CUDA a window with
	// network peers lives in host memory).
	net     bool
	t       float64
	blocked bool
	// issuing: the current op (a wait or barrier) is paying its op cost,
	// begun at from; it looks at its condition when that ends.
	issuing bool
	from    float64
	rows    map[int]uint64
	// foreign are the bytes of the rank's window another rank wrote last.
	foreign spans
	// cpu is the processor the rank shares with others of its host (-1:
	// one of its own); hasCPU whether it runs on it now; wantFrom when
	// its current op began to wait for it (-1: it did not); res what it
	// does once it gets it back after blocking.
	cpu      int32
	hasCPU   bool
	wantFrom float64
	res      resumption
	sums     []uint64
	// last is, per row and per signal's sum (key -1-sig), when something
	// last landed in it and which op sent it.
	last               map[int]landed
	sigRows, ranks, sg int
	// netOut: a put or signal to a network peer was issued since the
	// rank's last flush; netLand is when the last of them landed.
	netOut  bool
	netLand float64
}

// event is a rank's stream going on at t, or (deliver) a signal or
// counter landing at t in row of rank to, sent by op from.
type event struct {
	t       float64
	deliver bool
	// release: rank to's list has ended, its processor goes to another.
	release bool
	set     bool
	seq     uint64
	to      int32
	row     int32
	value   uint64
	from    ref
}

func (a *event) before(b *event) bool {
	if a.t != b.t {
		return a.t < b.t
	}
	if a.deliver != b.deliver {
		return a.deliver // what lands at t is seen by a wait at t
	}
	return a.seq < b.seq
}

// queue is a binary min-heap of events.
type queue []event

func (q *queue) push(e event) {
	*q = append(*q, e)
	h := *q
	for i := len(h) - 1; i > 0; {
		p := (i - 1) / 2
		if !h[i].before(&h[p]) {
			break
		}
		h[i], h[p] = h[p], h[i]
		i = p
	}
}

func (q *queue) pop() event {
	h := *q
	top := h[0]
	n := len(h) - 1
	h[0] = h[n]
	h = h[:n]
	for i := 0; ; {
		l, m := 2*i+1, i
		if l < n && h[l].before(&h[m]) {
			m = l
		}
		if l+1 < n && h[l+1].before(&h[m]) {
			m = l + 1
		}
		if m == i {
			break
		}
		h[i], h[m] = h[m], h[i]
		i = m
	}
	*q = h
	return top
}

type landed struct {
	at   float64
	from ref
}

type barWait struct {
	n    int
	last ref
	// from is when the last rank in began its barrier op; at the latest
	// time a rank arrived at (a flush before the barrier may put a
	// rank's arrival after the event that brought it there).
	from, at float64
}

type pairKey struct{ lo, hi, id int }

type pairWait struct {
	rank int
	prev ref
	at   float64 // when it arrived (after the flush its barrier began with)
}

// issue is the op cost of rank r's current op o: its class's Op (the
// self class's for an op with no peer), and the replay's fixed cost
// before the first op.
func (s *sim) issue(r int, o plan.Op) float64 {
	k := transport.KindSelf
	if hasPeer(o.Kind) {
		k = s.class(r, o.Peer)
	}
	c := s.tab[k].Op.AlphaNs
	if s.ranks[r].replayStarts() {
		c += s.tab[transport.KindSelf].Replay.AlphaNs
	}
	return c
}

// replayStarts reports whether the rank's current op is the first of a
// replay.
func (rk *rankState) replayStarts() bool {
	return rk.pc == 0 || rk.replayLen > 0 && rk.pc%rk.replayLen == 0
}

// same reports whether times a and b are equal but for rounding (sums of
// the same costs in another order).
func same(a, b float64) bool {
	return math.Abs(a-b) <= 1e-12*max(math.Abs(a), math.Abs(b), 1)
}

// waits reports whether an op of kind k waits for other ranks (a wait or
// a barrier): such an op pays its op cost first, then looks.
func waits(k plan.Kind) bool {
	return k.IsWait() || k == plan.Barrier || k == plan.BarrierPeer
}

// sim runs every rank's list in time order.
type sim struct {
	ranks []rankState
	tab   [4]Params
	class func(from, to int) transport.PeerKind
	q     queue
	seq   uint64
	bars  map[int]*barWait
	pairs map[pairKey]pairWait
	far   transport.PeerKind
	// cpus are the processors of hosts whose ranks outnumber them, each
	// running one rank at a time (cpus.go); switchNs is what passing one
	// from a rank to another costs.
	cpus     []cpu
	switchNs float64
	// trackMoved: the model has a Moved cost, and ranks keep which bytes
	// of their window another rank wrote (moved.go).
	trackMoved bool
	// fanOut is the replay mode's plan.FanOutInline: puts larger than it
	// of one source and size in a row run side by side (0: none do).
	fanOut uint64
	// mem is, by rank, the memory's part of its puts and copies
	// where its host's replay outgrows the cache (memory.go; nil: none).
	mem []memShare
}

// newSim is the simulation of lists (in's, or several replays of them)
// with the costs tab, on in's classes, CPUs and replay mode.
func newSim(lists []plan.List, tab [4]Params, in Input) *sim {
	class := in.classOrDefault()
	s := &sim{ranks: make([]rankState, len(lists)), tab: tab, class: class, bars: map[int]*barWait{}, pairs: map[pairKey]pairWait{},
		switchNs: tab[transport.KindSelf].Switch.AlphaNs, trackMoved: !tab[transport.KindSelf].Moved.zero(),
		fanOut: plan.FanOutInline(in.Mode), mem: memoryBound(lists, class, tab[transport.KindSelf].Memory, in.CPUs)}
	place := placeCPUs(len(lists), class, in.CPUs)
	for r, l := range lists {
		n := len(l.Ops)
		rk := &s.ranks[r]
		*rk = rankState{ops: l.Ops, shape: l.Shape, start: make([]float64, n), alpha: make([]float64, n), end: make([]float64, n),
			cause: make([]ref, n), rows: map[int]uint64{}, last: map[int]landed{}, sums: make([]uint64, l.Shape.Signals),
			sigRows: l.Shape.Ranks * l.Shape.Signals, ranks: l.Shape.Ranks, sg: l.Shape.Signals, cpu: -1, wantFrom: -1,
			net: reachesNet(r, l.Ops, class, len(lists))}
		if place != nil {
			rk.cpu = place[r]
			for int(rk.cpu) >= len(s.cpus) {
				s.cpus = append(s.cpus, cpu{holder: -1, last: -1})
			}
		}
		for row, b := range l.Base {
			if b != 0 {
				rk.add(row, b, false)
			}
		}
		if q := class(r, (r+len(lists)/2)%len(lists)); q > s.far {
			s.far = q
		}
	}
	if k := class(0, len(lists)-1); k > s.far {
		s.far = k
	}
	return s
}

// add lands value in row (sets it with set) and keeps the per-signal sums.
func (rk *rankState) add(row int, value uint64, set bool) {
	old := rk.rows[row]
	v := old + value
	if set {
		v = value
	}
	rk.rows[row] = v
	if row < rk.sigRows {
		rk.sums[row%rk.sg] += v - old
	}
}

func (s *sim) push(e event) {
	s.seq++
	e.seq = s.seq
	s.q.push(e)
}

func (s *sim) run() error {
	for r := range s.ranks {
		if len(s.ranks[r].ops) > 0 {
			s.push(event{to: int32(r)})
		}
	}
	for len(s.q) > 0 {
		e := s.q.pop()
		rk := &s.ranks[e.to]
		if e.release {
			s.release(int(e.to), e.t)
			continue
		}
		if e.deliver {
			rk.add(int(e.row), e.value, e.set)
			rk.last[int(e.row)] = landed{e.t, e.from}
			if int(e.row) < rk.sigRows {
				rk.last[-1-int(e.row)%rk.sg] = landed{e.t, e.from}
			}
			if rk.blocked && rk.ops[rk.pc].Kind.IsWait() && rk.holds(rk.ops[rk.pc]) {
				a := s.tab[s.class(int(e.to), int(e.from.rank))].Wait.AlphaNs
				s.resume(int(e.to), e.t, e.t, a, e.from)
			}
			continue
		}
		s.step(int(e.to), e.t)
	}
	var stuck []string
	for r := range s.ranks {
		rk := &s.ranks[r]
		if rk.pc < len(rk.ops) {
			if len(stuck) < 5 {
				o := rk.ops[rk.pc]
				stuck = append(stuck, fmt.Sprintf("rank %d at op %d (%s at %s)", r, rk.pc+1, o.Kind, o.Site))
			} else {
				stuck = append(stuck, "...")
				break
			}
		}
	}
	if len(stuck) > 0 {
		return fmt.Errorf("the plan does not finish in the model (is it verified?): blocked: %s", strings.Join(stuck, ", "))
	}
	return nil
}

func (rk *rankState) holds(o plan.Op) bool {
	var v uint64
	switch o.Kind {
	case plan.WaitSignalFrom:
		v = rk.rows[rk.shape.SigRow(o.Peer, o.Sig)]
	case plan.WaitSignal:
		v = rk.sums[o.Sig]
	case plan.WaitCounter:
		v = rk.rows[rk.shape.CtrRow(o.Peer, o.Ctr)]
	}
	switch o.Cmp {
	case transport.CmpEq:
		return v == o.Value
	case transport.CmpNe:
		return v != o.Value
	case transport.CmpLt:
		return v < o.Value
	case transport.CmpLe:
		return v <= o.Value
	case transport.CmpGt:
		return v > o.Value
	}
	return v >= o.Value
}

// put runs put o, rank r's current op, at t (op: its op cost): its bytes
// (fanned out with the puts after it where the mode does), then its
// signal or counter where it has one, landing when the bytes have.
func (s *sim) put(r int, t float64, o plan.Op, op float64) {
	rk := &s.ranks[r]
	me := ref{int32(r), int32(rk.pc)}
	p := s.tab[s.class(r, o.Peer)]
	a, l := p.Put.Of(o.N)
	if o.Peer == r && rk.net && !s.tab[transport.KindNet].Copy.zero() {
		a, l = s.tab[transport.KindNet].Copy.Of(o.N)
	}
	l = s.pastCache(r, o.N, l)
	var sa, sl float64
	if o.Kind.HasSignal() {
		// The signal's cost may grow with the bytes it follows (a
		// release of them, lines): measured by size where calibrated.
		sa, sl = p.Signal.Of(o.N)
	}
	a, l, sa, sl = s.fanOutPut(r, o, a, l, sa, sl)
	a += op + sa
	l += s.moved(r, o) + sl
	end := t + a + l
	s.outNet(r, o.Peer, end)
	if o.Kind.HasSignal() {
		s.send(me, o.Peer, rk.shape.SigRow(r, o.Sig), end, o.SigValue, o.SigOp == window.SigSet)
	}
	if o.Kind.HasCounter() {
		s.send(me, r, rk.shape.CtrRow(o.Peer, o.Ctr), end, o.CtrValue, false)
	}
	s.finish(r, t, a, l, s.prev(r))
}

// waitKey is the key in last of what wait o reads.
func (rk *rankState) waitKey(o plan.Op) int {
	switch o.Kind {
	case plan.WaitSignal:
		return -1 - o.Sig
	case plan.WaitCounter:
		return rk.shape.CtrRow(o.Peer, o.Ctr)
	}
	return rk.shape.SigRow(o.Peer, o.Sig)
}

func (s *sim) prev(r int) ref {
	if pc := s.ranks[r].pc; pc > 0 {
		return ref{int32(r), int32(pc - 1)}
	}
	return none
}

// finish ends rank r's current op: it could go on at t, costs alpha plus
// link, and waited for cause.
func (s *sim) finish(r int, t, alpha, link float64, cause ref) {
	rk := &s.ranks[r]
	i := rk.pc
	if w := rk.wantFrom; w >= 0 && w < t && (cause.rank == int32(r) || cause.rank < 0) {
		// It waited for its processor from w: that time is its start cost.
		alpha += t - w
		t = w
	}
	rk.start[i], rk.alpha[i], rk.end[i], rk.cause[i] = t, alpha, t+alpha+link, cause
	rk.t, rk.blocked, rk.issuing, rk.wantFrom = rk.end[i], false, false, -1
	rk.pc++
	if rk.pc < len(rk.ops) {
		s.push(event{t: rk.t, to: int32(r)})
	} else if rk.cpu >= 0 {
		s.push(event{t: rk.t, to: int32(r), release: true})
	}
}

func (s *sim) send(from ref, to, row int, at float64, value uint64, set bool) {
	s.push(event{t: at, deliver: true, to: int32(to), row: int32(row), value: value, set: set, from: from})
}

// step runs rank r's current op at t: its op cost, then the op. A wait
// or barrier pays its op cost first (a second step, at its end) and looks
// at its condition then; if that holds, its start cost counts the op
// cost from when it began (from).
func (s *sim) step(r int, t float64) {
	rk := &s.ranks[r]
	o := rk.ops[rk.pc]
	me := ref{int32(r), int32(rk.pc)}
	self := s.tab[transport.KindSelf]
	op := s.issue(r, o)
	t, ok := s.take(r, t)
	if !ok {
		return // its processor runs another rank
	}
	from := t
	if rk.wantFrom >= 0 {
		from = rk.wantFrom
	}
	if waits(o.Kind) {
		if op > 0 && !rk.issuing {
			rk.issuing, rk.from = true, from
			s.push(event{t: t + op, to: int32(r)})
			return
		}
		if rk.issuing {
			from = rk.from
		}
	}
	switch {
	case o.Kind.IsPut():
		s.put(r, t, o, op)
	case o.Kind == plan.Get:
		a, l := s.tab[s.class(r, o.Peer)].Put.Of(o.N)
		s.finish(r, t, a+op, s.pastCache(r, o.N, l), s.prev(r))
	case o.Kind == plan.Signal:
		a := s.tab[s.class(r, o.Peer)].Signal.AlphaNs + op
		s.outNet(r, o.Peer, t+a)
		s.send(me, o.Peer, rk.shape.SigRow(r, o.Sig), t+a, o.SigValue, o.SigOp == window.SigSet)
		s.finish(r, t, a, 0, s.prev(r))
	case o.Kind == plan.SignalAll:
		a := op
		for q := range s.ranks {
			if q != r {
				a += s.tab[s.class(r, q)].Signal.AlphaNs
			}
		}
		for q := range s.ranks {
			if q != r {
				s.outNet(r, q, t+a)
				s.send(me, q, rk.shape.SigRow(r, o.Sig), t+a, o.SigValue, o.SigOp == window.SigSet)
			}
		}
		s.finish(r, t, a, 0, s.prev(r))
	case o.Kind.IsWait():
		if rk.holds(o) {
			// What landed just now, as the stream got here, is as much the
			// wait's cause as the stream: the path takes the sender. So
			// does what landed as the wait began (its op cost then hid the
			// signal's last leg): on such ties the path goes to the rank
			// that sent, so that a ring's path goes round the ring.
			l, ok := rk.last[rk.waitKey(o)]
			cross := ok && int(l.from.rank) != r
			switch {
			case cross && same(l.at, t):
				s.finish(r, t, s.tab[s.class(r, int(l.from.rank))].Wait.AlphaNs, 0, l.from)
			case cross && same(l.at, from):
				s.finish(r, from, t-from+self.Wait.AlphaNs, 0, l.from)
			default:
				s.finish(r, from, t-from+self.Wait.AlphaNs, 0, s.prev(r))
			}
		} else {
			rk.blocked = true
			s.release(r, t)
		}
	case o.Kind == plan.ResetCounter:
		rk.add(rk.shape.CtrRow(o.Peer, o.Ctr), 0, true)
		s.finish(r, t, self.Wait.AlphaNs+op, 0, s.prev(r))
	case o.Kind == plan.Fill:
		s.filled(r, o.Buf)
		n := rk.shape.Buffers[o.Buf]
		a, l := self.Copy.Of(n)
		s.finish(r, t, a+op, s.pastCache(r, n, l), s.prev(r))
	case o.Kind == plan.Barrier:
		s.barrier(r, from, s.flushFirst(rk, t), o.Bar)
	case o.Kind == plan.BarrierPeer && o.Peer == r:
		// With itself: the window does nothing.
		s.finish(r, t, op, 0, s.prev(r))
	case o.Kind == plan.BarrierPeer:
		s.barrierPeer(r, from, s.flushFirst(rk, t), o)
	case (o.Kind == plan.Flush || o.Kind == plan.Fence) && rk.netOut:
		// (A fence where a network peer is reached is a flush: window.Fence.)
		// Remote completion over the network: the peer's answer, a hop
		// after the last put or signal landed (net.go).
		done := max(t+self.Wait.AlphaNs+op, rk.netLand) + s.flushTrip()
		rk.netOut = false
		s.finish(r, t, done-t, 0, s.prev(r))
	case self.Flush != nil: // fence, flush with nothing in flight
		a := self.Flush.AlphaNs
		if rk.replayStarts() {
			a += self.Replay.AlphaNs
		}
		s.finish(r, t, a, 0, s.prev(r))
	default: // fence, flush
		s.finish(r, t, self.Wait.AlphaNs+op, 0, s.prev(r))
	}
}

// flushFirst is when a barrier of rank rk, reached at t, may store: where
// puts or signals to a network peer are in flight, after the flush it
// begins with (window.Barrier), which ends a hop after the last landed.
func (s *sim) flushFirst(rk *rankState, t float64) float64 {
	if !rk.netOut {
		return t
	}
	rk.netOut = false
	return max(t, rk.netLand) + s.flushTrip()
}

// barrier holds rank r (at the barrier at t, its op begun at from) until
// every rank has arrived at barrier id; all then go on together, after
// the last one in: from its op's beginning, their start cost holds its op
// cost too.
func (s *sim) barrier(r int, from, t float64, id int) {
	b := s.bars[id]
	if b == nil {
		b = &barWait{}
		s.bars[id] = b
	}
	s.ranks[r].blocked = true
	b.n++
	b.last, b.from, b.at = s.prev(r), from, max(b.at, t)
	if b.n < len(s.ranks) {
		s.release(r, t)
		return
	}
	t = b.at
	c := s.tab[s.far].Barrier
	a := c.AlphaNs + c.BetaNs*float64(len(s.ranks))
	delete(s.bars, id)
	for q := range s.ranks {
		rk := &s.ranks[q]
		if q != r && rk.blocked && rk.pc < len(rk.ops) && rk.ops[rk.pc].Kind == plan.Barrier && rk.ops[rk.pc].Bar == id {
			s.resume(q, b.from, t, a, b.last)
		}
	}
	s.finish(r, b.from, t-b.from+a, 0, b.last)
}

// barrierPeer holds rank r until its peer arrives at theirs (the later
// one's op begun at from, and there at t).
func (s *sim) barrierPeer(r int, from, t float64, o plan.Op) {
	k := pairKey{min(r, o.Peer), max(r, o.Peer), o.Bar}
	other, ok := s.pairs[k]
	if !ok || other.rank == r {
		s.pairs[k] = pairWait{rank: r, prev: s.prev(r), at: t}
		s.ranks[r].blocked = true
		s.release(r, t)
		return
	}
	delete(s.pairs, k)
	t = max(t, other.at)
	c := s.tab[s.class(r, o.Peer)].Barrier
	a := c.AlphaNs + 2*c.BetaNs
	last := s.prev(r)
	s.resume(other.rank, from, t, a, last)
	s.finish(r, from, t-from+a, 0, last)
}
