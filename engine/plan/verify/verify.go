package verify

import (
	"fmt"

	"github.com/luacoll/luacoll/engine/plan"
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
//     that the other puts counted on its counter (those before a
//     reset_counter that may still land included) could not satisfy
//     without it: counted puts complete in no set order. A fence orders
//     it before the rank's later signals, for whoever sees them, not
//     before the rank's own next operations. Its data is known to have arrived at a
//     peer only by whoever has seen a signal that orders it: its own
//     put_signal's signal, any signal of its rank after a later fence, or
//     the stores of a later barrier (a barrier fences and flushes first).
//   - A put_signal's signal is written after its data has landed ("the
//     peer never sees the signal before the data"), and the data is what
//     the source held: its source has been read by then. So whoever has
//     seen that signal (the peer's wait it met, or a later one on the
//     same row, which counts it too) is ordered after the source read as
//     well as the data. Its issuer is not, until it completes the put
//     locally or learns that the peer saw the signal: the put may still
//     be reading when its own next op runs.
//   - Seeing a signal orders the seer after everything its writer knew when
//     it wrote it (vector clocks): after the writes the wait needed (the
//     first write that made a ">=" or ">" wait hold on one row), or after
//     every write seen so far (other conditions, and sums over rows).
//
// Two accesses to overlapping bytes of one rank's memory, at least one a
// write, that nothing orders are a race. Replays run back to back (two by
// default), each wait's value advanced by what one replay adds to its rows.

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
	if !checkShapes(lists, add) || !checkCallEnds(lists, opt.CallEnds, add) {
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
	idem := false
	if isReduceColl(opt.Collective.Kind) {
		var same bool
		if same, idem = sameReduction(lists, add); !same {
			rep.OK = false
			return rep
		}
	}
	s := newSim(lists, opt, add)
	s.idem = idem
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
	if s.stopped && s.interrupted {
		add(Problem{Kind: "stopped", Msg: fmt.Sprintf("verification stopped after %d units of work: interrupted; nothing is claimed about the plan", s.work)})
	} else if s.stopped {
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
	// seenAt, when not 0, is the clock of rank seenBy at which it saw the
	// signal of the put_signal this access belongs to (its data and source
	// read): an access by a rank whose clock has reached it is ordered
	// after this one.
	seenBy int
	seenAt uint32
	// fenced: done came from a fence, which orders the write before the
	// issuer's later signals, so it holds for whoever sees one of those,
	// not for the issuer's own next operations (until a barrier).
	fenced bool
	end    *replayEnd // a read of a rank's result at the end of a replay
	// covers is an earlier source read of the same rank that this one, a
	// put_signal's, stands for in its memory's list (sameRead): a rank is
	// ordered after this access only once it is ordered after that one.
	covers *access
	// under, on a read, is a write it covered and was ordered after,
	// dropped from the list in its favour: a later read not ordered
	// after it races it (check).
	under *access
}

// snap is what a signal or barrier store carries: its writer's vector
// clock and critical-path depth when it wrote. The clock is shared: vc is
// the writer's clock as it was when it last learned of another rank (its
// own entry may be behind), own its own entry now. A rank's snapshots
// between two joins share one vc, so a rank's run of signals costs one
// copy of its clock, not one each.
type snap struct {
	vc    *clock
	own   uint32
	rank  int
	depth int
}

// clock is a copy of a rank's vector clock that its snapshots share,
// with a count of what holds it: one while it is its rank's pub, and one
// for each slot write (hist) whose snapshot shares it. A clock none holds
// is reused for the next copy (sim.spare): at a thousand ranks a ring's
// snapshots are gigabytes of copies, each dropped a step or two later.
type clock struct {
	vc   []uint32
	refs int
}

type hist struct {
	val uint64
	at  *snap
	by  *opRef // the signal that wrote it (nil for barrier stores)
	// put is the put_signal (to a peer) whose signal this is; seen, that
	// the row's owner has seen it (and so every earlier write).
	put  *xfer
	seen bool
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
	add uint64 // the put's count
	x   *xfer
}

type rankState struct {
	pc, phase int
	me        int
	vc        []uint32
	depth     int
	epoch     []uint64 // window barrier epochs by id
	pepoch    []uint64 // pairwise epochs by id*ranks+peer
	local     []*xfer  // not yet complete locally
	remote    []*xfer  // puts to peers not yet fenced
	fenced    []*xfer  // puts a fence ordered, for other ranks only (access.fenced)
	ctr       []slotCtr
	joins     []*snap
	// pub is the copy of vc the last snapshot shared, stale once a join
	// raised another rank's entry (stale).
	pub   *clock
	stale bool
	done  bool
	// waits are the signal waits (op indexes) this rank has passed in its
	// current replay, newest last.
	waits []int
}

type slotCtr struct {
	val  uint64
	hist []ctrEntry
	// stale is what puts issued before the last reset_counter, not known
	// complete then, may still add: they land in no set order.
	stale uint64
}

type sim struct {
	lists   []plan.List
	n       int
	sh      plan.Shape
	replays int
	// ends are Options.CallEnds; calls the calls a replay of a list holds
	// (1 without ends), total those of the whole run.
	ends         [][]int
	calls, total int
	coll         Collective
	add          func(Problem)
	rk           []rankState
	sig          []slot // [receiver][sender][sig]
	bar, pbar    []slot // [receiver][sender][id]
	mem          [][]*memory
	adv          [][]uint64 // per rank, per op: a wait's per-replay advance
	rows         []plan.RowInfo
	seen         map[[4]int]bool
	// monotone[sigIdx] says every wait on the row is a ">=" or ">" on
	// it alone with targets that never go down: its old writes can go.
	monotone []bool
	// targets[sigIdx] are the values a monotone row's waits need it to
	// reach (a ">" wait's value plus one), sorted.
	targets    map[int][]uint64
	steps      int
	deadlocked bool
	// collOK: a collective is declared and fits the shapes, so replay
	// ends are checked.
	collOK bool
	// want is the replay whose source contents a result check expects;
	// at, while a replay's end is checked, says whose.
	want int
	// idem: the collective reduces with min or max, which a contribution
	// taken twice leaves the same.
	idem bool
	at   *replayEnd
	// ctl answers how far the others get while one rank holds back (sum
	// waits); work counts its steps against budget.
	ctl          *ctl
	work, budget int
	stopped      bool
	done         <-chan struct{}   // Options.Done
	endSnaps     map[int]*endSnaps // by replay: results kept until every rank ends it (ends.go)
	interrupted  bool              // stopped by done
	// ran counts the ops stepped, for meter (Options.Meter; nil: none).
	ran   int
	meter *Meter
	// labs is transfer's copy of the labels it moves, kept for the next;
	// wantSegs and gotSegs the result checks' copies of what a rank must
	// hold and what it holds (expectAt, compare).
	labs, wantSegs, gotSegs []seg
	// spare are clocks none holds (clock).
	spare []*clock
	// pool holds the accesses the memories' lists refer to.
	pool accPool
	// refs, snaps and hists are where the ops' references, the
	// snapshots and the slots' first writes are cut from (slab, appendHist).
	refs  slab[opRef]
	snaps slab[snap]
	hists []hist
}

func newSim(lists []plan.List, opt Options, add func(Problem)) *sim {
	n := len(lists)
	sh := lists[0].Shape
	s := &sim{lists: lists, n: n, sh: sh, replays: opt.Replays, coll: opt.Collective, add: add,
		rk:  make([]rankState, n),
		sig: make([]slot, n*n*sh.Signals), bar: make([]slot, n*n*sh.Barriers), pbar: make([]slot, n*n*sh.Barriers),
		mem: make([][]*memory, n), adv: make([][]uint64, n), seen: map[[4]int]bool{}, rows: plan.Deltas(lists),
		budget: opt.Budget, ends: opt.CallEnds, calls: 1, meter: opt.Meter, done: opt.Done}
	if s.ends != nil {
		s.calls = len(s.ends[0]) + 1
	}
	s.total = s.replays * s.calls
	s.want = s.total
	if s.budget <= 0 {
		s.budget = DefaultBudget
	}
	if isReduceColl(s.coll.Kind) && s.coll.Src == nil {
		// In place: every rank's input is its window from offset 0.
		for range lists {
			s.coll.Src = append(s.coll.Src, Source{Buf: plan.WindowBuf})
		}
	}
	for r, l := range lists {
		st := &s.rk[r]
		st.vc = make([]uint32, n)
		st.me = r
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
	if m := s.meter; m != nil {
		total := 0
		for _, l := range s.lists {
			total += len(l.Ops)
		}
		m.total.Store(int64(total * s.replays))
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
		if s.meter != nil {
			s.meter.done.Store(int64(s.ran))
		}
		if done {
			return
		}
		if !progress {
			s.deadlock()
			return
		}
		if s.work > s.budget || s.closed() {
			s.stopped = true
			return
		}
	}
}

// closed reports whether Options.Done has closed (and notes it).
func (s *sim) closed() bool {
	select {
	case <-s.done:
		s.interrupted = true
		return true
	default:
		return false
	}
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
	case plan.BarrierPeer:
		if o.Peer == r {
			// With itself: the window does nothing (no fence, no flush).
			break
		}
		fallthrough
	case plan.Barrier:
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
		ref := s.refs.new()
		*ref = opRef{rank: r, op: i + 1, rep: rep + 1, kind: o.Kind, site: o.Site}
		s.exec(r, st, o, ref, c)
	}
	st.pc++
	s.work++
	s.ran++
	if st.pc == len(ops) {
		s.steps = max(s.steps, st.depth)
	}
	if k, ok := s.callEnd(r, st.pc, len(ops)); ok {
		s.replayEnd(r, st, k, rep)
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
		// A barrier has them complete for the issuer too.
		for _, x := range st.fenced {
			x.dst.fenced = false
		}
		st.fenced = st.fenced[:0]
	}
}

func (s *sim) exec(r int, st *rankState, o *plan.Op, ref *opRef, c uint32) {
	switch o.Kind {
	case plan.Put, plan.PutSignal, plan.PutCounter, plan.PutSignalCounter:
		x := s.transfer(r, st, ref, r, o.Buf, o.BufOff, o.Peer, plan.WindowBuf, o.Off, o.N, o.Peer == r)
		if !x.local {
			// A put_signal's data is known to have landed by whoever saw
			// its signal (joinWrite); any put's, after a later fence.
			st.remote = append(st.remote, x)
		}
		if o.Kind.HasCounter() {
			k := &st.ctr[o.Peer*s.sh.Counters+o.Ctr]
			k.val += o.CtrValue
			k.hist = append(k.hist, ctrEntry{add: o.CtrValue, x: x})
		}
		if o.Kind.HasSignal() {
			var at *snap
			s.signal(r, o.Peer, o, st, &at, ref)
			if !x.local {
				sl := &s.sig[s.sigIdx(o.Peer, r, o.Sig)]
				sl.hist[len(sl.hist)-1].put = x
			}
		}
	case plan.Get:
		s.transfer(r, st, ref, o.Peer, plan.WindowBuf, o.Off, r, o.Buf, o.BufOff, o.N, true)
	case plan.Signal:
		var at *snap
		s.signal(r, o.Peer, o, st, &at, ref)
	case plan.SignalAll:
		var at *snap
		for p := 0; p < s.n; p++ {
			if p != r {
				s.signal(r, p, o, st, &at, ref)
			}
		}
	case plan.ResetCounter:
		k := &st.ctr[o.Peer*s.sh.Counters+o.Ctr]
		for _, e := range k.hist {
			if e.x.src.done == 0 {
				k.stale += e.add
			}
		}
		k.val, k.hist = 0, nil
	case plan.Fence:
		for _, x := range st.remote {
			if x.dst.done == 0 {
				x.dst.done, x.dst.fenced = c, true
				st.fenced = append(st.fenced, x)
			}
		}
		st.remote = st.remote[:0]
	case plan.Flush:
		s.complete(st, c, false)
	case plan.Reduce, plan.ReduceFrom:
		s.reduce(r, st, o, ref, c)
	case plan.Fill:
		m := s.mem[r][o.Buf]
		a := &access{by: ref, pc: st.pc, write: true, lo: 0, hi: m.size, done: c}
		s.touch(r, st.vc, m, a)
		m.fill(ref)
	}
}
