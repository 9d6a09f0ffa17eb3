// Package verify checks a plan before anything runs: every rank's recorded
// list (package plan) against the others, for bounds, deadlocks, races,
// waits that another replay's signal can satisfy, and the declared
// collective's result at the end of every replay.
//
// It is a pure core: no I/O, no window, no replay or device code. Verify
// simulates the lists, deterministic for given input, so synthetic lists
// and the cases of testdata/ (op lists in the plans' text format) test it
// in plain Go.
package verify

import (
	"fmt"
	"sort"
	"strings"

	"github.com/luacoll/luacoll/engine/plan"
	"github.com/luacoll/luacoll/transport"
	"github.com/luacoll/luacoll/window"
)

// The model Verify checks every rank's ops against: the window API's
// contract, which is weaker than any one backend.
//
//   - Every rank runs its ops in order; a wait holds its stream until its
//     condition holds. A fill, a signal, a barrier's stores and a counter
//     reset act in stream order.
//   - A put (or get) only starts in stream order: it reads its source and
//     writes its destination at some later time. It has completed locally
//     (source reusable, a get's destination written, a put to the rank
//     itself written) after a later flush, a barrier, or a wait_counter
//     that its counter satisfied. Its data is known to have arrived at a
//     peer only by whoever has seen a signal that orders it: its own
//     put_signal's signal, any signal of its rank after a later fence, or
//     the stores of a later barrier (a barrier fences and flushes first).
//   - Seeing a signal orders the seer after everything its writer knew when
//     it wrote it (vector clocks): after the writes the wait needed (the
//     first write that made a ">=" or ">" wait hold on one row), or after
//     every write seen so far (other conditions, and sums over rows).
//
// Two accesses to overlapping bytes of one rank's memory, at least one a
// write, that nothing orders are a race. Replays run back to back (two by
// default), each wait's value advanced by what one replay adds to its rows.

// Collective names the result a plan must produce.
type Collective struct {
	// Kind is "allgather", "alltoall", "broadcast" or "" (no result check).
	Kind string
	// N is the bytes each rank contributes (allgather, alltoall: per
	// peer; broadcast: the whole message).
	N uint64
	// Root is the broadcast's root.
	Root int
	// Src[r] is rank r's source, when known: Buf < 0 means not given, and
	// the result is compared with what the ranks agree on instead.
	Src []Source
}

// Source is a rank's source range: a buffer of its plan and an offset.
type Source struct {
	Buf int
	Off uint64
}

// Options configure Verify.
type Options struct {
	Collective Collective
	// Replays is how many replays to simulate back to back (default 2:
	// enough to see one replay's ops race with the next one's).
	Replays int
	// MaxProblems caps the problems reported (default 50).
	MaxProblems int
	// Budget bounds the steps simulated in all (DefaultBudget when 0):
	// past it Verify stops and says so.
	Budget int
}

// DefaultBudget is the work Verify does before it stops (ops simulated,
// plus a rank count for every vector clock taken or merged): about 10 s
// here; a 256-rank ring all-gather plan of two replays takes a third.
const DefaultBudget = 300_000_000

// Problem is one thing wrong with a plan. Rank and Op (1-based, as p:ops()
// numbers them; 0 when no op is to blame) say where, Site the script line
// that issued the op.
type Problem struct {
	Kind   string // "shape", "bounds", "replay", "deadlock", "race", "postcondition"
	Rank   int
	Op     int
	OpName string
	Replay int // the replay (1-based) in which it was seen; 0: any
	Site   plan.Site
	Msg    string
	// Other is the other op of a race, or the op that wrote bytes found
	// wrong, when there is one.
	Other *Ref
}

// Ref names an op of some rank.
type Ref struct {
	Rank int
	Op   int
	Kind plan.Kind
	Site plan.Site
}

func (r Ref) String() string {
	return fmt.Sprintf("rank %d's %s (op %d, %s)", r.Rank, r.Kind, r.Op, r.Site)
}

func (p Problem) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: rank %d", p.Kind, p.Rank)
	if p.Op > 0 {
		fmt.Fprintf(&b, ", op %d (%s at %s)", p.Op, p.OpName, p.Site)
	}
	if p.Replay > 1 {
		fmt.Fprintf(&b, ", replay %d", p.Replay)
	}
	b.WriteString(": ")
	b.WriteString(p.Msg)
	return b.String()
}

// Report is what Verify found.
type Report struct {
	OK bool
	// Ops is the length of every rank's list.
	Ops []int
	// Steps is the critical path of one replay in ops: the longest chain
	// of ops each of which waits for the one before (stream order, or a
	// signal or barrier it waits for).
	Steps    int
	Problems []Problem
	// Dropped counts problems left out past Options.MaxProblems.
	Dropped int
}

// Summary is one line: ok, or how many problems and the first.
func (r *Report) Summary() string {
	if r.OK {
		return fmt.Sprintf("ok: %d ranks, ops %s, %d steps", len(r.Ops), rangeOf(r.Ops), r.Steps)
	}
	return fmt.Sprintf("%d problems; first: %s", len(r.Problems)+r.Dropped, r.Problems[0])
}

func rangeOf(v []int) string {
	if len(v) == 0 {
		return "none"
	}
	lo, hi := v[0], v[0]
	for _, x := range v {
		lo, hi = min(lo, x), max(hi, x)
	}
	if lo == hi {
		return fmt.Sprint(lo)
	}
	return fmt.Sprintf("%d..%d", lo, hi)
}

// Verify checks every rank's list (lists[r] is rank r's) against the
// others: shapes and bounds, then a simulation of the ranks running their
// lists (deadlocks, races), then the collective's result. It does no I/O.
func Verify(lists []plan.List, opt Options) *Report {
	if opt.Replays < 1 {
		opt.Replays = 2
	}
	if opt.MaxProblems < 1 {
		opt.MaxProblems = 50
	}
	rep := &Report{Ops: make([]int, len(lists))}
	for r, l := range lists {
		rep.Ops[r] = len(l.Ops)
	}
	add := func(p Problem) {
		if len(rep.Problems) >= opt.MaxProblems {
			rep.Dropped++
			return
		}
		rep.Problems = append(rep.Problems, p)
	}
	if !checkShapes(lists, add) {
		rep.OK = false
		return rep
	}
	bounds := false
	for r, l := range lists {
		for i, o := range l.Ops {
			if err := l.Shape.Check(r, o); err != nil {
				bounds = true
				add(Problem{Kind: "bounds", Rank: r, Op: i + 1, OpName: o.Kind.String(), Site: o.Site, Msg: err.Error()})
			}
		}
	}
	if bounds {
		return rep
	}
	s := newSim(lists, opt, add)
	s.checkReplay()
	s.collOK = s.coll.Kind != "" && s.checkCollective()
	s.versionSources(0)
	if hasSumWait(lists) {
		s.ctl = newCtl(s)
	}
	s.run()
	rep.Steps = s.steps
	if !s.deadlocked && !s.stopped {
		s.checkResult()
	}
	if s.stopped {
		add(Problem{Kind: "stopped", Msg: fmt.Sprintf("verification stopped after %d units of work (the bound is %d): the plan is too large to explore; nothing is claimed about it", s.work, s.budget)})
	}
	rep.OK = len(rep.Problems) == 0 && rep.Dropped == 0
	return rep
}

func checkShapes(lists []plan.List, add func(Problem)) bool {
	if len(lists) == 0 {
		add(Problem{Kind: "shape", Msg: "no ranks"})
		return false
	}
	s0 := lists[0].Shape
	ok := true
	for r, l := range lists {
		s := l.Shape
		switch {
		case s.Ranks != len(lists):
			add(Problem{Kind: "shape", Rank: r, Msg: fmt.Sprintf("recorded for %d ranks, but %d lists were given", s.Ranks, len(lists))})
			ok = false
		case s.Bytes != s0.Bytes || s.Signals != s0.Signals || s.Counters != s0.Counters || s.Barriers != s0.Barriers:
			add(Problem{Kind: "shape", Rank: r, Msg: fmt.Sprintf("window of %d bytes, %d signals, %d counters, %d barriers; rank 0's has %d, %d, %d, %d",
				s.Bytes, s.Signals, s.Counters, s.Barriers, s0.Bytes, s0.Signals, s0.Counters, s0.Barriers)})
			ok = false
		case l.Window != lists[0].Window:
			add(Problem{Kind: "shape", Rank: r, Msg: fmt.Sprintf("recorded on window %d, rank 0 on window %d", l.Window, lists[0].Window)})
			ok = false
		case len(s.Buffers) == 0 || s.Buffers[0] != s.Bytes:
			add(Problem{Kind: "shape", Rank: r, Msg: "the plan's buffer 0 must be the window"})
			ok = false
		case len(l.Base) != 0 && len(l.Base) != s.Rows():
			add(Problem{Kind: "shape", Rank: r, Msg: fmt.Sprintf("%d base rows, want %d", len(l.Base), s.Rows())})
			ok = false
		case len(l.Sent) != 0 && len(l.Sent) != s.Rows():
			add(Problem{Kind: "shape", Rank: r, Msg: fmt.Sprintf("%d sent rows, want %d", len(l.Sent), s.Rows())})
			ok = false
		case l.Inbox != nil && (len(l.Inbox) != s.Rows() || len(l.Replayed) != s.Rows()):
			add(Problem{Kind: "shape", Rank: r, Msg: fmt.Sprintf("%d inbox and %d replayed rows, want %d", len(l.Inbox), len(l.Replayed), s.Rows())})
			ok = false
		}
	}
	return ok
}

// opRef is an op as the simulation meets it.
type opRef struct {
	rank, op, rep int // op and rep 1-based
	kind          plan.Kind
	site          plan.Site
	// what, when set, names an access the script makes between replays
	// (reading its result, rewriting its source) instead of an op.
	what string
}

func (r *opRef) ref() *Ref { return &Ref{Rank: r.rank, Op: r.op, Kind: r.kind, Site: r.site} }

func (r *opRef) String() string {
	if r.what != "" {
		return r.what
	}
	s := fmt.Sprintf("rank %d's %s (op %d, %s", r.rank, r.kind, r.op, r.site)
	if r.rep > 1 {
		s += fmt.Sprintf(", replay %d", r.rep)
	}
	return s + ")"
}

// access is one read or write of a range of a rank's memory. done is the
// clock of the accessing rank at which the access is known complete (0:
// not yet): a later access is ordered after it when its vector clock has
// reached done for that rank.
type access struct {
	by     *opRef
	pc     int // position in the accessing rank's run: identifies the op
	write  bool
	source bool // a put's source read, complete at local completion
	lo, hi uint64
	done   uint32
	end    *replayEnd // a read of a rank's result at the end of a replay
}

// snap is what a signal or barrier store carries: its writer's vector
// clock and critical-path depth when it wrote.
type snap struct {
	vc    []uint32
	depth int
}

type hist struct {
	val uint64
	at  *snap
	by  *opRef // the signal that wrote it (nil for barrier stores)
}

// slot is a signal row or a barrier slot: its value, what it held when
// the plan began, and every write.
type slot struct {
	val, init uint64
	hist      []hist
}

// xfer is a put or get in flight: its two accesses and whether its
// destination completes with its local completion (a get, a put to self).
type xfer struct {
	src, dst *access
	local    bool
}

type ctrEntry struct {
	val uint64
	x   *xfer
}

type rankState struct {
	pc, phase int
	vc        []uint32
	depth     int
	epoch     []uint64 // window barrier epochs by id
	pepoch    []uint64 // pairwise epochs by id*ranks+peer
	local     []*xfer  // not yet complete locally
	remote    []*xfer  // puts to peers not yet fenced
	ctr       []slotCtr
	joins     []*snap
	done      bool
	// waits are the signal waits (op indexes) this rank has passed in its
	// current replay, newest last.
	waits []int
}

type slotCtr struct {
	val  uint64
	hist []ctrEntry
}

type sim struct {
	lists     []plan.List
	n         int
	sh        plan.Shape
	replays   int
	coll      Collective
	add       func(Problem)
	rk        []rankState
	sig       []slot // [receiver][sender][sig]
	bar, pbar []slot // [receiver][sender][id]
	mem       [][]*memory
	adv       [][]uint64 // per rank, per op: a wait's per-replay advance
	rows      []plan.RowInfo
	seen      map[[4]int]bool
	// monotone[sigIdx] says every wait on the row is a ">=" or ">" on
	// it alone with targets that never go down: its old writes can go.
	monotone   []bool
	steps      int
	deadlocked bool
	// collOK: a collective is declared and fits the shapes, so replay
	// ends are checked.
	collOK bool
	// want is the replay whose source contents a result check expects;
	// at, while a replay's end is checked, says whose.
	want int
	at   *replayEnd
	// ctl answers how far the others get while one rank holds back (sum
	// waits); work counts its steps against budget.
	ctl          *ctl
	work, budget int
	stopped      bool
}

func newSim(lists []plan.List, opt Options, add func(Problem)) *sim {
	n := len(lists)
	sh := lists[0].Shape
	s := &sim{lists: lists, n: n, sh: sh, replays: opt.Replays, coll: opt.Collective, add: add,
		rk:  make([]rankState, n),
		sig: make([]slot, n*n*sh.Signals), bar: make([]slot, n*n*sh.Barriers), pbar: make([]slot, n*n*sh.Barriers),
		mem: make([][]*memory, n), adv: make([][]uint64, n), seen: map[[4]int]bool{}, rows: plan.Deltas(lists),
		want: opt.Replays, budget: opt.Budget}
	if s.budget <= 0 {
		s.budget = DefaultBudget
	}
	for r, l := range lists {
		st := &s.rk[r]
		st.vc = make([]uint32, n)
		st.epoch = make([]uint64, sh.Barriers)
		st.pepoch = make([]uint64, sh.Barriers*n)
		st.ctr = make([]slotCtr, n*sh.Counters)
		for b, size := range l.Shape.Buffers {
			s.mem[r] = append(s.mem[r], newMemory(r, b, size))
		}
		if len(l.Base) == sh.Rows() {
			for sender := 0; sender < n; sender++ {
				for g := 0; g < sh.Signals; g++ {
					s.sig[s.sigIdx(r, sender, g)].val = l.Base[sh.SigRow(sender, g)]
				}
				for c := 0; c < sh.Counters; c++ {
					st.ctr[sender*sh.Counters+c].val = l.Base[sh.CtrRow(sender, c)]
				}
			}
		}
		// What the ranks sent outside plans before recording (plan.List.Sent).
		if len(l.Sent) == sh.Rows() {
			for c := 0; c < n*sh.Counters; c++ {
				st.ctr[c].val += l.Sent[sh.Ranks*sh.Signals+c]
			}
		}
		for sender, sl := range lists {
			if sender < n && len(sl.Sent) == sh.Rows() {
				for g := 0; g < sh.Signals; g++ {
					s.sig[s.sigIdx(r, sender, g)].val += sl.Sent[sh.SigRow(r, g)]
				}
			}
		}
		if l.Inbox != nil {
			s.startFromInbox(r, l)
		}
		for sender := 0; sender < n; sender++ {
			for g := 0; g < sh.Signals; g++ {
				sl := &s.sig[s.sigIdx(r, sender, g)]
				sl.init = sl.val
			}
		}
		s.adv[r] = make([]uint64, len(l.Ops))
		for i, o := range l.Ops {
			for _, row := range sh.WaitRows(o) {
				s.adv[r][i] += s.rows[r].Delta[row]
			}
		}
	}
	s.findMonotone()
	return s
}

func (s *sim) sigIdx(receiver, sender, sig int) int {
	return (receiver*s.n+sender)*s.sh.Signals + sig
}

func (s *sim) barIdx(receiver, sender, id int) int {
	return (receiver*s.n+sender)*s.sh.Barriers + id
}

// checkReplay reports waits on rows that a "set" signal writes: a replay
// stores the same value again, so its waits cannot tell one replay from
// the next.
func (s *sim) checkReplay() {
	for r, l := range s.lists {
		for i, o := range l.Ops {
			for _, row := range s.sh.WaitRows(o) {
				if s.rows[r].Set[row] {
					s.add(Problem{Kind: "replay", Rank: r, Op: i + 1, OpName: o.Kind.String(), Site: o.Site,
						Msg: fmt.Sprintf("waits on signal %d, which a rank writes with op \"set\": every replay stores the same value, so the wait cannot tell replays apart (signal with \"add\")", o.Sig)})
					break
				}
			}
		}
	}
}

func (s *sim) run() {
	total := 0
	for _, l := range s.lists {
		total += len(l.Ops)
	}
	for {
		progress, done := false, true
		for r := range s.rk {
			if s.rk[r].done {
				continue
			}
			done = false
			if s.step(r) {
				progress = true
			}
		}
		if done {
			return
		}
		if !progress {
			s.deadlock()
			return
		}
		if s.work > s.budget {
			s.stopped = true
			return
		}
	}
}

func (s *sim) tick(st *rankState, r int) uint32 {
	st.vc[r]++
	return st.vc[r]
}

func (s *sim) snapshot(st *rankState) *snap {
	s.work += len(st.vc)
	return &snap{vc: append([]uint32(nil), st.vc...), depth: st.depth}
}

// join notes that rank st's current op synchronizes with the write at;
// joinAll then merges what the op synchronized with into st's clock and
// depth (after the op's own depth step).
func (s *sim) join(st *rankState, at *snap) {
	if at != nil {
		st.joins = append(st.joins, at)
	}
}

func (s *sim) joinAll(st *rankState) {
	s.work += len(st.joins) * len(st.vc)
	for _, at := range st.joins {
		for i, v := range at.vc {
			if v > st.vc[i] {
				st.vc[i] = v
			}
		}
		st.depth = max(st.depth, at.depth+1)
	}
	st.joins = st.joins[:0]
}

// step runs rank r's next op if it can, and reports whether it did.
func (s *sim) step(r int) bool {
	st := &s.rk[r]
	ops := s.lists[r].Ops
	if len(ops) == 0 || st.pc >= s.replays*len(ops) {
		st.done = true
		return false
	}
	i, rep := st.pc%len(ops), st.pc/len(ops)
	o := &ops[i]
	ref := &opRef{rank: r, op: i + 1, rep: rep + 1, kind: o.Kind, site: o.Site}
	value := o.Value + uint64(rep)*s.adv[r][i]
	switch o.Kind {
	case plan.WaitSignal, plan.WaitSignalFrom, plan.WaitCounter:
		if !s.wait(r, st, o, value) {
			return false
		}
		st.depth++
		s.joinAll(st)
		s.tick(st, r)
		if o.Kind != plan.WaitCounter {
			s.passed(r, st, i, rep, o, value)
			st.waits = append(st.waits, i)
		}
	case plan.Barrier, plan.BarrierPeer:
		stored := false
		if st.phase == 0 {
			st.depth++
			c := s.tick(st, r)
			s.complete(st, c, true)
			s.barrierStores(r, st, o)
			st.phase, stored = 1, true
		}
		if !s.barrierWait(r, st, o) {
			return stored // the stores went out: progress, even if the wait blocks
		}
		s.joinAll(st)
		st.phase = 0
	default:
		st.depth++
		c := s.tick(st, r)
		s.exec(r, st, o, ref, c)
	}
	st.pc++
	s.work++
	if st.pc == len(ops) {
		s.steps = max(s.steps, st.depth)
	}
	if st.pc%len(ops) == 0 {
		s.replayEnd(r, st, rep)
		st.waits = st.waits[:0]
	}
	if st.pc >= s.replays*len(ops) {
		st.done = true
	}
	return true
}

// complete marks what a flush (and, with fence, a fence) completes.
func (s *sim) complete(st *rankState, c uint32, fence bool) {
	for _, x := range st.local {
		if x.src.done == 0 {
			x.src.done = c
		}
		if x.local && x.dst.done == 0 {
			x.dst.done = c
		}
	}
	st.local = st.local[:0]
	if fence {
		for _, x := range st.remote {
			if x.dst.done == 0 {
				x.dst.done = c
			}
		}
		st.remote = st.remote[:0]
	}
}

func (s *sim) exec(r int, st *rankState, o *plan.Op, ref *opRef, c uint32) {
	switch o.Kind {
	case plan.Put, plan.PutSignal, plan.PutCounter, plan.PutSignalCounter:
		x := s.transfer(r, st, ref, r, o.Buf, o.BufOff, o.Peer, plan.WindowBuf, o.Off, o.N, o.Peer == r)
		if !x.local {
			st.remote = append(st.remote, x)
			if o.Kind.HasSignal() {
				x.dst.done = c // the signal below orders the data before it
			}
		}
		if o.Kind.HasCounter() {
			k := &st.ctr[o.Peer*s.sh.Counters+o.Ctr]
			k.val += o.CtrValue
			k.hist = append(k.hist, ctrEntry{val: k.val, x: x})
		}
		if o.Kind.HasSignal() {
			s.signal(r, o.Peer, o, s.snapshot(st), ref)
		}
	case plan.Get:
		s.transfer(r, st, ref, o.Peer, plan.WindowBuf, o.Off, r, o.Buf, o.BufOff, o.N, true)
	case plan.Signal:
		s.signal(r, o.Peer, o, s.snapshot(st), ref)
	case plan.SignalAll:
		at := s.snapshot(st)
		for p := 0; p < s.n; p++ {
			if p != r {
				s.signal(r, p, o, at, ref)
			}
		}
	case plan.ResetCounter:
		k := &st.ctr[o.Peer*s.sh.Counters+o.Ctr]
		k.val, k.hist = 0, nil
	case plan.Fence:
		for _, x := range st.remote {
			if x.dst.done == 0 {
				x.dst.done = c
			}
		}
		st.remote = st.remote[:0]
	case plan.Flush:
		s.complete(st, c, false)
	case plan.Fill:
		m := s.mem[r][o.Buf]
		a := &access{by: ref, pc: st.pc, write: true, lo: 0, hi: m.size, done: c}
		s.touch(r, st.vc, m, a)
		m.fill(ref)
	}
}

// transfer starts a copy of n bytes from (from, fbuf, foff) to (to, tbuf,
// toff) issued by rank r: its source read and destination write, checked
// against earlier accesses, and its labels.
func (s *sim) transfer(r int, st *rankState, ref *opRef, from, fbuf int, foff uint64, to, tbuf int, toff, n uint64, local bool) *xfer {
	src := &access{by: ref, pc: st.pc, source: true, lo: foff, hi: foff + n}
	dst := &access{by: ref, pc: st.pc, write: true, lo: toff, hi: toff + n}
	sm, dm := s.mem[from][fbuf], s.mem[to][tbuf]
	s.touch(from, st.vc, sm, src)
	labs := sm.get(foff, foff+n)
	s.touch(to, st.vc, dm, dst)
	dm.put(toff, labs, ref)
	x := &xfer{src: src, dst: dst, local: local}
	st.local = append(st.local, x)
	return x
}

// touch checks a new access a to memory m of rank owner, made by a rank
// whose vector clock is vc, against the accesses m remembers, and adds it.
// Accesses that a covers and that are ordered before it are forgotten: any
// later access ordered after a is ordered after them too.
func (s *sim) touch(owner int, vc []uint32, m *memory, a *access) {
	if a.lo >= a.hi {
		return
	}
	// The script's accesses between replays follow a sync, which
	// completes all its rank's own operations; they forget nothing, as
	// a replay run back to back has no sync.
	script := a.by.what != ""
	keep := m.acc[:0]
	for _, y := range m.acc {
		if y.hi <= a.lo || y.lo >= a.hi || (y.by.rank == a.by.rank && y.pc == a.pc) {
			keep = append(keep, y)
			continue
		}
		ordered := (y.done != 0 && vc[y.by.rank] >= y.done) || (script && y.by.rank == a.by.rank)
		if !ordered && (a.write || y.write) {
			s.race(owner, m, a, y)
		}
		if ordered && !script && y.lo >= a.lo && y.hi <= a.hi {
			continue
		}
		keep = append(keep, y)
	}
	m.acc = append(keep, a)
}

func (s *sim) race(owner int, m *memory, a, y *access) {
	switch {
	case y.end != nil:
		s.endRace(y, a)
		return
	case a.end != nil:
		s.endRace(a, y)
		return
	}
	key := [4]int{a.by.rank, a.by.op, y.by.rank, y.by.op}
	if s.seen[key] {
		return
	}
	s.seen[key] = true
	lo, hi := max(a.lo, y.lo), min(a.hi, y.hi)
	where := fmt.Sprintf("rank %d's window", owner)
	if m != s.mem[owner][plan.WindowBuf] {
		for b, mm := range s.mem[owner] {
			if mm == m {
				where = fmt.Sprintf("rank %d's buffer %s", owner, plan.BufName(b))
			}
		}
	}
	verb := func(x *access) string {
		switch {
		case x.write && x.by.kind == plan.Fill:
			return "fills"
		case x.write:
			return "writes"
		}
		return "reads"
	}
	var why string
	switch {
	case a.write && y.write:
		why = "two writes into one range that nothing orders (no signal, wait or barrier between them)"
	case a.write && y.source && y.by.rank == a.by.rank && a.by.rank == owner:
		why = "a source overwritten before its put completed locally (no flush, barrier or counter wait between)"
	case a.write:
		why = "a write into bytes that are read as a put source in a step it is not ordered with"
	default:
		why = "a put source read while a write into it may still be arriving (wait for the signal that orders it)"
	}
	s.add(Problem{Kind: "race", Rank: a.by.rank, Op: a.by.op, OpName: a.by.kind.String(), Replay: a.by.rep, Site: a.by.site,
		Msg: fmt.Sprintf("%s %s bytes [%d, %d) while %s %s them: %s",
			a.by, verb(a), lo, hi, y.by, verb(y), why) + "; in " + where,
		Other: y.by.ref()})
}

func (s *sim) signal(from, to int, o *plan.Op, at *snap, by *opRef) {
	sl := &s.sig[s.sigIdx(to, from, o.Sig)]
	if o.SigOp == window.SigSet {
		sl.val = o.SigValue
	} else {
		sl.val += o.SigValue
	}
	sl.hist = append(sl.hist, hist{val: sl.val, at: at, by: by})
}

// firstHolding returns the earliest write after which the slot met the
// condition for good (">=" and ">": the first write that made it hold),
// or the last write for other comparisons; nil when the slot held it
// before any write.
func firstHolding(sl *slot, cmp transport.Cmp, v uint64) *snap {
	if h := holding(sl, cmp, v); h != nil {
		return h.at
	}
	return nil
}

// holding is firstHolding's write itself; nil when the slot held the
// condition before any write (">=" and ">") or was never written.
func holding(sl *slot, cmp transport.Cmp, v uint64) *hist {
	if i := holdingIdx(sl, cmp, v); i >= 0 {
		return &sl.hist[i]
	}
	return nil
}

func holdingIdx(sl *slot, cmp transport.Cmp, v uint64) int {
	if len(sl.hist) == 0 {
		return -1
	}
	if cmp == transport.CmpGe || cmp == transport.CmpGt {
		if cmp.Holds(sl.init, v) {
			return -1
		}
		i := sort.Search(len(sl.hist), func(i int) bool { return cmp.Holds(sl.hist[i].val, v) })
		if i < len(sl.hist) {
			return i
		}
	}
	return len(sl.hist) - 1
}

// forget drops the writes of a slot before write i, which no later wait
// needs: its waits are all ">=" or ">" with targets that never go down
// (sim.monotone), so each is met at i or after. Their clocks are what
// the verifier's memory is mostly made of.
func forget(sl *slot, i int) {
	if i <= 0 {
		return
	}
	clear(sl.hist[:i])
	sl.hist = sl.hist[i:]
	if cap(sl.hist) > 64 && len(sl.hist) < cap(sl.hist)/4 {
		sl.hist = append([]hist(nil), sl.hist...)
	}
}

// wait reports whether rank r's wait o holds now (joining what it
// synchronizes with).
func (s *sim) wait(r int, st *rankState, o *plan.Op, v uint64) bool {
	switch o.Kind {
	case plan.WaitSignalFrom:
		sl := &s.sig[s.sigIdx(r, o.Peer, o.Sig)]
		if !o.Cmp.Holds(sl.val, v) {
			return false
		}
		i := holdingIdx(sl, o.Cmp, v)
		if i >= 0 {
			s.join(st, sl.hist[i].at)
			if s.monotone[s.sigIdx(r, o.Peer, o.Sig)] {
				forget(sl, i)
			}
		}
	case plan.WaitSignal:
		var sum uint64
		for p := 0; p < s.n; p++ {
			sum += s.sig[s.sigIdx(r, p, o.Sig)].val
		}
		if !o.Cmp.Holds(sum, v) {
			return false
		}
		if !s.sumJoin(r, st, o, v) {
			for p := 0; p < s.n; p++ {
				sl := &s.sig[s.sigIdx(r, p, o.Sig)]
				if len(sl.hist) > 0 {
					s.join(st, sl.hist[len(sl.hist)-1].at)
				}
			}
		}
	case plan.WaitCounter:
		k := &st.ctr[o.Peer*s.sh.Counters+o.Ctr]
		if !o.Cmp.Holds(k.val, v) {
			return false
		}
		// The puts whose counts the wait needed have completed locally.
		c := st.vc[r] + 1 // the clock this op gets
		upto := len(k.hist)
		if o.Cmp == transport.CmpGe || o.Cmp == transport.CmpGt {
			upto = sort.Search(len(k.hist), func(i int) bool { return o.Cmp.Holds(k.hist[i].val, v) }) + 1
			upto = min(upto, len(k.hist))
		}
		for _, e := range k.hist[:upto] {
			if e.x.src.done == 0 {
				e.x.src.done = c
			}
			if e.x.local && e.x.dst.done == 0 {
				e.x.dst.done = c
			}
		}
	}
	return true
}

func (s *sim) barrierStores(r int, st *rankState, o *plan.Op) {
	at := s.snapshot(st)
	if o.Kind == plan.Barrier {
		st.epoch[o.Bar]++
		e := st.epoch[o.Bar]
		for p := 0; p < s.n; p++ {
			if p != r {
				sl := &s.bar[s.barIdx(p, r, o.Bar)]
				sl.val = e
				sl.hist = append(sl.hist, hist{val: e, at: at})
			}
		}
		return
	}
	st.pepoch[o.Bar*s.n+o.Peer]++
	if o.Peer != r {
		e := st.pepoch[o.Bar*s.n+o.Peer]
		sl := &s.pbar[s.barIdx(o.Peer, r, o.Bar)]
		sl.val = e
		sl.hist = append(sl.hist, hist{val: e, at: at})
	}
}

func (s *sim) barrierWait(r int, st *rankState, o *plan.Op) bool {
	if o.Kind == plan.BarrierPeer {
		if o.Peer == r {
			return true
		}
		e := st.pepoch[o.Bar*s.n+o.Peer]
		sl := &s.pbar[s.barIdx(r, o.Peer, o.Bar)]
		if sl.val < e {
			return false
		}
		i := holdingIdx(sl, transport.CmpGe, e)
		if i >= 0 {
			s.join(st, sl.hist[i].at)
			forget(sl, i)
		}
		return true
	}
	e := st.epoch[o.Bar]
	for p := 0; p < s.n; p++ {
		if p != r && s.bar[s.barIdx(r, p, o.Bar)].val < e {
			return false
		}
	}
	for p := 0; p < s.n; p++ {
		if p != r {
			sl := &s.bar[s.barIdx(r, p, o.Bar)]
			if i := holdingIdx(sl, transport.CmpGe, e); i >= 0 {
				s.join(st, sl.hist[i].at)
				forget(sl, i)
			}
		}
	}
	return true
}

// deadlock reports every blocked rank: the wait, what it would see, and
// who could still change that.
func (s *sim) deadlock() {
	s.deadlocked = true
	for r := range s.rk {
		st := &s.rk[r]
		if st.done {
			continue
		}
		ops := s.lists[r].Ops
		i, rep := st.pc%len(ops), st.pc/len(ops)
		o := ops[i]
		v := o.Value + uint64(rep)*s.adv[r][i]
		var msg string
		switch o.Kind {
		case plan.WaitSignalFrom:
			sl := s.sig[s.sigIdx(r, o.Peer, o.Sig)]
			msg = fmt.Sprintf("blocked: waits for signal %d from rank %d %s %d, which is %d; %s", o.Sig, o.Peer, o.Cmp, v, sl.val, s.writers(r, rep, o.Sig, []int{o.Peer}))
		case plan.WaitSignal:
			var sum uint64
			all := make([]int, s.n)
			for p := range all {
				all[p] = p
				sum += s.sig[s.sigIdx(r, p, o.Sig)].val
			}
			msg = fmt.Sprintf("blocked: waits for signal %d summed over all ranks %s %d, which is %d; %s", o.Sig, o.Cmp, v, sum, s.writers(r, rep, o.Sig, all))
		case plan.WaitCounter:
			k := st.ctr[o.Peer*s.sh.Counters+o.Ctr]
			msg = fmt.Sprintf("blocked: waits for counter %d of rank %d %s %d, which is %d; no op left on this rank adds to it", o.Ctr, o.Peer, o.Cmp, v, k.val)
		case plan.Barrier:
			e := st.epoch[o.Bar]
			var missing []string
			for p := 0; p < s.n; p++ {
				if p != r && s.bar[s.barIdx(r, p, o.Bar)].val < e {
					missing = append(missing, fmt.Sprintf("rank %d (%s)", p, s.where(p)))
				}
			}
			msg = fmt.Sprintf("blocked in barrier %d (use %d): waiting for %s", o.Bar, e, strings.Join(missing, ", "))
		case plan.BarrierPeer:
			msg = fmt.Sprintf("blocked in barrier_peer %d with rank %d (use %d): rank %d is %s", o.Bar, o.Peer, st.pepoch[o.Bar*s.n+o.Peer], o.Peer, s.where(o.Peer))
		}
		s.add(Problem{Kind: "deadlock", Rank: r, Op: i + 1, OpName: o.Kind.String(), Replay: rep + 1, Site: o.Site, Msg: msg})
	}
}

// where says where rank p stopped.
func (s *sim) where(p int) string {
	st := &s.rk[p]
	ops := s.lists[p].Ops
	if st.done || len(ops) == 0 {
		return "done"
	}
	i := st.pc % len(ops)
	return fmt.Sprintf("blocked at op %d, %s at %s", i+1, ops[i].Kind, ops[i].Site)
}

// writers says which of the senders could still signal rank r's slot sig
// in replay rep (0-based).
func (s *sim) writers(r, rep, sig int, senders []int) string {
	var could []string
	for _, p := range senders {
		st := &s.rk[p]
		ops := s.lists[p].Ops
		for pc := st.pc; pc < (rep+1)*len(ops); pc++ {
			o := ops[pc%len(ops)]
			if o.Kind.HasSignal() && o.Sig == sig && ((o.Kind == plan.SignalAll && p != r) || (o.Kind != plan.SignalAll && o.Peer == r)) {
				could = append(could, fmt.Sprintf("rank %d would at op %d (%s) but is %s", p, pc%len(ops)+1, o.Site, s.where(p)))
				break
			}
		}
	}
	if stray := s.stray(r, sig, senders); stray != "" {
		could = append(could, stray)
	}
	if len(could) == 0 {
		if len(senders) == 1 {
			return fmt.Sprintf("rank %d signals it no more in this replay (%s)", senders[0], s.where(senders[0]))
		}
		return "no rank signals it in what is left of this replay"
	}
	return strings.Join(could, "; ")
}

// stray names signals that senders sent on slot sig to ranks other than r
// that those ranks never wait for from them: often the signal r misses,
// sent to the wrong peer.
func (s *sim) stray(r, sig int, senders []int) string {
	waits := func(q, from int) bool {
		for _, o := range s.lists[q].Ops {
			if o.Sig == sig && (o.Kind == plan.WaitSignal || (o.Kind == plan.WaitSignalFrom && o.Peer == from)) {
				return true
			}
		}
		return false
	}
	var out []string
	for _, p := range senders {
		for i, o := range s.lists[p].Ops {
			if (o.Kind == plan.Signal || o.Kind == plan.PutSignal || o.Kind == plan.PutSignalCounter) && o.Sig == sig && o.Peer != r && !waits(o.Peer, p) {
				out = append(out, fmt.Sprintf("rank %d signals rank %d instead at op %d (%s), which rank %d never waits for", p, o.Peer, i+1, o.Site, o.Peer))
			}
		}
	}
	return strings.Join(out, "; ")
}
