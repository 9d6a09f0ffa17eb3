package verify

import (
	"fmt"
	"slices"
	"strings"

	"github.com/luacoll/luacoll/engine/plan"
	"github.com/luacoll/luacoll/transport"
	"github.com/luacoll/luacoll/window"
)

// Replays against each other.
//
// The simulation runs one order of events, but a wait's knowledge must
// hold in every order the window allows. A wait on one sender's row with
// ">=" or ">" is met by a fixed write (the sender's signals reach the row
// in its stream order), so what it learns is the same in every order. A
// sum over senders is not: a fast sender's signals of a later replay may
// make up for a slow sender's of this one. For such a wait the verifier
// runs the lists once more without data (ctl), every rank as far as it can
// get while the waiting rank is held just before the wait (ranks are
// monotone: signals only grow and ">=" waits stay met, so that run reaches
// every write that can come before the wait, in any order). What each
// other sender may have added by then bounds from below what this sender
// must have added: the wait learns that much of each sender's writes, and
// no more. When the bound leaves a sender's signal of this replay out and
// another sender's later replay can fill the gap, the wait is reported.

// ctl is a run of the lists that tracks signals, counters and barriers
// only.
type ctl struct {
	s          *sim
	pc, phase  []int
	at, reps   []int // pc as op index and replay (0-based)
	arrived    []int // per rank in a barrier's wait: the ranks before this one have arrived
	sig, sig0  []uint64
	sum, sum0  []uint64 // [receiver*Signals+sig]: the rows' sum (wait_signal), wrapping as the rows do
	ctr, ctr0  []uint64 // [rank][peer*Counters+ctr]
	pbar       []uint64
	epoch      []uint64 // [rank*Barriers+id]
	pepoch     []uint64 // [(rank*Barriers+id)*ranks+peer]
	late       []uint64 // per sender: units on the watched slot from later replays
	recv, slot int
	rep        int // the watched wait's replay (0-based)
	// bases[rep] is where every hold of a wait in replay rep may start
	// (base); lateAll, while a base is made, counts every slot's units
	// from later replays (by c.idx). monotone says the lists allow it.
	bases    map[int]*ctlState
	lateAll  []uint64
	monotone bool
	// from is the base the state was last restored from (nil: none, or
	// reset since), and dirty the indexes of the rank-by-rank rows (sig,
	// ctr, pbar, pepoch) written since: restoring from the same base
	// copies back only those, not four arrays of ranks^2 entries.
	from  *ctlState
	dirty [4][]int
}

// The rank-by-rank rows of a ctl run whose writes restore undoes.
const (
	dirtySig = iota
	dirtyCtr
	dirtyPbar
	dirtyPepoch
)

// wrote notes, while the state derives from a base, that row i of kind
// k is written.
func (c *ctl) wrote(k, i int) {
	if c.from != nil {
		c.dirty[k] = append(c.dirty[k], i)
	}
}

// ctlState is a copy of a ctl run's state.
type ctlState struct {
	sig, sum, ctr, pbar, epoch, pepoch, lateAll []uint64
	pc, phase, at, reps, arrived                []int
}

func newCtl(s *sim) *ctl {
	n, sh := s.n, s.sh
	c := &ctl{s: s, pc: make([]int, n), phase: make([]int, n), at: make([]int, n), reps: make([]int, n), arrived: make([]int, n),
		sig: make([]uint64, len(s.sig)), sig0: make([]uint64, len(s.sig)),
		ctr: make([]uint64, n*n*sh.Counters), ctr0: make([]uint64, n*n*sh.Counters),
		pbar:  make([]uint64, len(s.pbar)),
		epoch: make([]uint64, n*sh.Barriers), pepoch: make([]uint64, n*sh.Barriers*n), late: make([]uint64, n)}
	c.sum, c.sum0 = make([]uint64, n*sh.Signals), make([]uint64, n*sh.Signals)
	for i := range s.sig {
		recv, rest := i/(n*sh.Signals), i%(n*sh.Signals)
		c.sig0[c.idx(recv, rest/sh.Signals, rest%sh.Signals)] = s.sig[i].init
		c.sum0[i/(n*sh.Signals)*sh.Signals+i%sh.Signals] += s.sig[i].init
	}
	for q := range s.rk {
		for i, k := range s.rk[q].ctr {
			c.ctr0[q*n*sh.Counters+i] = k.val
		}
	}
	c.bases, c.monotone = map[int]*ctlState{}, monotoneRun(s.lists)
	return c
}

// monotoneRun reports whether the lists' run without data is monotone:
// no signal lowers a row ("set") and every signal wait is ">=" or ">", so
// that a wait once met stays met, and every order of the same steps ends
// where the others do.
func monotoneRun(lists []plan.List) bool {
	for _, l := range lists {
		for _, o := range l.Ops {
			switch {
			case o.Kind.HasSignal() && o.SigOp == window.SigSet:
				return false
			case (o.Kind == plan.WaitSignal || o.Kind == plan.WaitSignalFrom) && o.Cmp != transport.CmpGe && o.Cmp != transport.CmpGt:
				return false
			}
		}
	}
	return true
}

// hasSumWait reports whether any list waits on a sum of rows.
func hasSumWait(lists []plan.List) bool {
	for _, l := range lists {
		for _, o := range l.Ops {
			if o.Kind == plan.WaitSignal {
				return true
			}
		}
	}
	return false
}

func (c *ctl) save() *ctlState {
	cp := func(v []uint64) []uint64 { return append([]uint64(nil), v...) }
	ci := func(v []int) []int { return append([]int(nil), v...) }
	return &ctlState{sig: cp(c.sig), sum: cp(c.sum), ctr: cp(c.ctr), pbar: cp(c.pbar), epoch: cp(c.epoch), pepoch: cp(c.pepoch),
		lateAll: cp(c.lateAll), pc: ci(c.pc), phase: ci(c.phase), at: ci(c.at), reps: ci(c.reps), arrived: ci(c.arrived)}
}

func (c *ctl) restore(b *ctlState) {
	if c.from == b {
		for k, rows := range [4][2][]uint64{{c.sig, b.sig}, {c.ctr, b.ctr}, {c.pbar, b.pbar}, {c.pepoch, b.pepoch}} {
			for _, i := range c.dirty[k] {
				rows[0][i] = rows[1][i]
			}
		}
	} else {
		copy(c.sig, b.sig)
		copy(c.ctr, b.ctr)
		copy(c.pbar, b.pbar)
		copy(c.pepoch, b.pepoch)
	}
	for k := range c.dirty {
		c.dirty[k] = c.dirty[k][:0]
	}
	c.from = b
	copy(c.sum, b.sum)
	copy(c.epoch, b.epoch)
	copy(c.pc, b.pc)
	copy(c.phase, b.phase)
	copy(c.at, b.at)
	copy(c.reps, b.reps)
	copy(c.arrived, b.arrived)
}

func (c *ctl) reset() {
	c.from = nil
	copy(c.sig, c.sig0)
	copy(c.sum, c.sum0)
	copy(c.ctr, c.ctr0)
	clear(c.pc)
	clear(c.at)
	clear(c.reps)
	clear(c.phase)
	clear(c.arrived)
	clear(c.pbar)
	clear(c.epoch)
	clear(c.pepoch)
	clear(c.late)
}

// hold runs every rank as far as it gets with rank r held at position pc
// of its run, watching slot sig of r's inbox for writes of replays after
// rep. It reports false when the work budget ran out.
//
// Where the run is monotone it starts from the replay's base: every rank
// held at its first wait_signal of replay rep (pc is one of r's, at or
// after r's first). That state is one the run with r alone held passes
// through, and a monotone run ends in the same state whatever the order
// of its steps, so the hold ends where it would from the start, at the
// cost of a copy instead of a run of every list (a 1,024-rank direct
// all-gather makes 2,048 holds).
func (c *ctl) hold(r, pc, sig, rep int) bool {
	s := c.s
	if c.monotone {
		b := c.base(rep)
		if b == nil {
			return false
		}
		c.restore(b)
		for p := 0; p < s.n; p++ {
			c.late[p] = b.lateAll[c.idx(r, p, sig)]
		}
	} else {
		c.reset()
	}
	c.recv, c.slot, c.rep = r, sig, rep
	return c.run(func(q int) int {
		if q == r {
			return pc
		}
		return s.replays * len(s.lists[q].Ops)
	})
}

// base returns replay rep's base (made on first use), or nil when the
// work budget ran out.
func (c *ctl) base(rep int) *ctlState {
	if b, ok := c.bases[rep]; ok {
		return b
	}
	s := c.s
	c.reset()
	c.recv, c.slot, c.rep = -1, -1, rep
	c.lateAll = make([]uint64, len(c.sig))
	defer func() { c.lateAll = nil }()
	limits := make([]int, s.n)
	for q, l := range s.lists {
		limits[q] = s.replays * len(l.Ops)
		for i, o := range l.Ops {
			if o.Kind == plan.WaitSignal {
				limits[q] = rep*len(l.Ops) + i
				break
			}
		}
	}
	if !c.run(func(q int) int { return limits[q] }) {
		return nil
	}
	b := c.save()
	c.bases[rep] = b
	return b
}

// run steps every rank up to limit(rank) as far as it gets; false when
// the work budget ran out.
func (c *ctl) run(limit func(q int) int) bool {
	s := c.s
	for {
		progress, open := false, false
		for q := 0; q < s.n; q++ {
			lim := limit(q)
			for c.pc[q] < lim && c.step(q) {
				progress = true
				s.work++
			}
			if c.pc[q] < lim {
				open = true
			}
		}
		if s.work > s.budget || s.closed() {
			s.stopped = true
			return false
		}
		if !open || !progress {
			return true
		}
	}
}

// step runs rank q's next op if it can (a barrier's stores count as a
// step even when its wait then blocks).
func (c *ctl) step(q int) bool {
	s := c.s
	ops := s.lists[q].Ops
	i, rep := c.at[q], c.reps[q]
	o := &ops[i]
	var v uint64
	if o.Kind.IsWait() {
		v = o.Value + uint64(rep)*s.adv[q][i]
	}
	nc, nb := s.sh.Counters, s.sh.Barriers
	switch o.Kind {
	case plan.WaitSignalFrom:
		if !o.Cmp.Holds(c.sig[c.idx(q, o.Peer, o.Sig)], v) {
			return false
		}
	case plan.WaitSignal:
		if !o.Cmp.Holds(c.sum[q*s.sh.Signals+o.Sig], v) {
			return false
		}
	case plan.WaitCounter:
		if !o.Cmp.Holds(c.ctr[q*s.n*nc+o.Peer*nc+o.Ctr], v) {
			return false
		}
	case plan.ResetCounter:
		c.ctr[q*s.n*nc+o.Peer*nc+o.Ctr] = 0
		c.wrote(dirtyCtr, q*s.n*nc+o.Peer*nc+o.Ctr)
	case plan.Barrier:
		// A barrier's stores write the rank's epoch into every peer's
		// slot: the slot rank p's stores wrote is p's epoch.
		e := &c.epoch[q*nb+o.Bar]
		if c.phase[q] == 0 {
			*e++
			c.phase[q] = 1
			return true
		}
		// Epochs only grow within a run: go on from the first rank that
		// had not arrived last time.
		for p := c.arrived[q]; p < s.n; p++ {
			if p != q && c.epoch[p*nb+o.Bar] < *e {
				c.arrived[q] = p
				return false
			}
		}
		c.phase[q], c.arrived[q] = 0, 0
	case plan.BarrierPeer:
		e := &c.pepoch[(q*nb+o.Bar)*s.n+o.Peer]
		if c.phase[q] == 0 {
			*e++
			c.wrote(dirtyPepoch, (q*nb+o.Bar)*s.n+o.Peer)
			if o.Peer != q {
				c.pbar[s.barIdx(o.Peer, q, o.Bar)] = *e
				c.wrote(dirtyPbar, s.barIdx(o.Peer, q, o.Bar))
			}
			c.phase[q] = 1
			return true
		}
		if o.Peer != q && c.pbar[s.barIdx(q, o.Peer, o.Bar)] < *e {
			return false
		}
		c.phase[q] = 0
	case plan.SignalAll:
		for p := 0; p < s.n; p++ {
			if p != q {
				c.signal(q, p, o, rep)
			}
		}
	default:
		if o.Kind.HasCounter() {
			c.ctr[q*s.n*nc+o.Peer*nc+o.Ctr] += o.CtrValue
			c.wrote(dirtyCtr, q*s.n*nc+o.Peer*nc+o.Ctr)
		}
		if o.Kind.HasSignal() {
			c.signal(q, o.Peer, o, rep)
		}
	}
	c.pc[q]++
	if c.at[q]++; c.at[q] == len(ops) {
		c.at[q], c.reps[q] = 0, c.reps[q]+1
	}
	return true
}

// idx is the index in c.sig of sender from's slot sig in rank to's inbox:
// by sender, so that a rank's signals to every peer are close together.
func (c *ctl) idx(to, from, sig int) int { return (from*c.s.n+to)*c.s.sh.Signals + sig }

func (c *ctl) signal(from, to int, o *plan.Op, rep int) {
	v := &c.sig[c.idx(to, from, o.Sig)]
	c.wrote(dirtySig, c.idx(to, from, o.Sig))
	sum := &c.sum[to*c.s.sh.Signals+o.Sig]
	if o.SigOp == window.SigSet {
		*sum += o.SigValue - *v
		*v = o.SigValue
		return
	}
	*v += o.SigValue
	*sum += o.SigValue
	if c.lateAll != nil && rep > c.rep {
		c.lateAll[c.idx(to, from, o.Sig)] += o.SigValue
	}
	if to == c.recv && o.Sig == c.slot && rep > c.rep {
		c.late[from] += o.SigValue
	}
}

// sumJoin joins what rank r's sum wait o (condition value v) learns in
// every order: of each sender's writes, those the others cannot make up
// for. It reports a wait that another replay's signals can satisfy, and
// returns false when it could not tell (the budget ran out, or a
// condition other than ">=" and ">").
func (s *sim) sumJoin(r int, st *rankState, o *plan.Op, v uint64) bool {
	if (o.Cmp != transport.CmpGe && o.Cmp != transport.CmpGt) || s.stopped {
		return false
	}
	if s.ctl == nil {
		return false
	}
	target := v
	if o.Cmp == transport.CmpGt {
		target++
	}
	rep := st.pc / len(s.lists[r].Ops)
	c := s.ctl
	if !c.hold(r, st.pc, o.Sig, rep) {
		return false
	}
	var most uint64
	for p := 0; p < s.n; p++ {
		most += c.sig[c.idx(r, p, o.Sig)]
	}
	var short, stood []string
	for p := 0; p < s.n; p++ {
		idx := s.sigIdx(r, p, o.Sig)
		sl := &s.sig[idx]
		others := most - c.sig[c.idx(r, p, o.Sig)]
		var need uint64
		if others < target {
			need = target - others
		}
		if need > sl.init {
			if i := holdingIdx(sl, transport.CmpGe, need); i >= 0 {
				s.joinWrite(r, st, sl, i)
			}
		}
		if d := s.rows[r].Delta[s.sh.SigRow(p, o.Sig)]; d > 0 && need < sl.init+uint64(rep+1)*d {
			short = append(short, fmt.Sprint(p))
		}
		if c.late[p] > 0 {
			stood = append(stood, fmt.Sprint(p))
		}
	}
	if len(short) > 0 && len(stood) > 0 {
		s.standIn(r, st, o, rep, fmt.Sprintf("the sum of signal %d can reach %d before every sender's signals of replay %d are in: the signals of rank(s) %s from a later replay can stand in for those of rank(s) %s (wait for each sender's row with wait_signal_from, or open every replay with a barrier)",
			o.Sig, target, rep+1, strings.Join(stood, ","), strings.Join(short, ",")))
	}
	return true
}

// passed checks, after rank r's wait o (op i, replay rep, 0-based) held on
// one sender's row, that the write that met it was not the sender's of a
// later replay.
//
// One met by an earlier replay's write (or before the plan) is not a
// stand-in: its target advances by what a replay adds to the row, so in
// every replay it is met by the same write relative to the replay, the
// one the recording counted to, in every order (a sender's signals reach
// the row in its stream order). A wait for the previous call's signals
// (the ring's opening wait for its neighbour's acknowledgements) is such
// a wait, and so is a target one short; what the latter fails to order is
// a race or a wrong result, reported as such.
func (s *sim) passed(r int, st *rankState, i, rep int, o *plan.Op, v uint64) {
	if o.Kind != plan.WaitSignalFrom || (o.Cmp != transport.CmpGe && o.Cmp != transport.CmpGt) || s.rows[r].Delta[s.sh.SigRow(o.Peer, o.Sig)] == 0 {
		return
	}
	h := holding(&s.sig[s.sigIdx(r, o.Peer, o.Sig)], o.Cmp, v)
	if h != nil && h.by != nil && h.by.rep > rep+1 {
		s.standIn(r, st, o, rep, fmt.Sprintf("it is met by %s: rank %d's signal of replay %d stands in for one of replay %d", h.by, o.Peer, h.by.rep, rep+1))
	}
}

func (s *sim) standIn(r int, st *rankState, o *plan.Op, rep int, why string) {
	i := st.pc % len(s.lists[r].Ops)
	key := [4]int{-1, r, i, 0}
	if s.seen[key] {
		return
	}
	s.seen[key] = true
	s.add(Problem{Kind: "stand-in", Rank: r, Op: i + 1, OpName: o.Kind.String(), Replay: rep + 1, Site: o.Site,
		Msg: "a wait another replay's signal can satisfy: " + why})
}

// startFromInbox starts the rows into rank r, which reset its inbox, from
// what they held when the plan was made (List.Inbox): a replay's wait
// waits for its recorded value less Base plus Replayed, so the rows start
// at Inbox + Base - Replayed. A row whose replays' count is ahead of what
// it holds is a wait that will hang.
func (s *sim) startFromInbox(r int, l plan.List) {
	waited := map[int]bool{} // rows r's waits read
	for _, o := range l.Ops {
		for _, row := range s.sh.WaitRows(o) {
			waited[row] = o.Kind != plan.WaitCounter
		}
	}
	for sender := 0; sender < s.n; sender++ {
		for g := 0; g < s.sh.Signals; g++ {
			row := s.sh.SigRow(sender, g)
			have := l.Inbox[row]
			if len(l.Base) == len(l.Inbox) {
				have += l.Base[row]
			}
			sl := &s.sig[s.sigIdx(r, sender, g)]
			if have < l.Replayed[row] && waited[row] {
				s.add(Problem{Kind: "reset", Rank: r, Msg: fmt.Sprintf("rank %d reset its inbox (w:reset_signals) after replays of plans on this window added %d to signal %d from rank %d: the waits of this plan's replays count them and will wait for %d signals more than the slot can get", r, l.Replayed[row], g, sender, l.Replayed[row]-have)})
				sl.val = 0
				continue
			}
			sl.val = have - min(have, l.Replayed[row])
		}
	}
}

// findMonotone fills sim.monotone from every rank's waits over all the
// replays.
func (s *sim) findMonotone() {
	s.monotone = make([]bool, len(s.sig))
	s.targets = map[int][]uint64{}
	for i := range s.monotone {
		s.monotone[i] = true
	}
	last := map[int]uint64{}
	for r, l := range s.lists {
		for rep := 0; rep < s.replays; rep++ {
			for i, o := range l.Ops {
				switch {
				case o.Sig < 0 || o.Sig >= s.sh.Signals:
				case o.Kind == plan.WaitSignal:
					for p := 0; p < s.n; p++ {
						s.monotone[s.sigIdx(r, p, o.Sig)] = false
					}
				case o.Kind == plan.WaitSignalFrom && o.Peer >= 0 && o.Peer < s.n:
					idx := s.sigIdx(r, o.Peer, o.Sig)
					v := o.Value + uint64(rep)*s.adv[r][i]
					if (o.Cmp != transport.CmpGe && o.Cmp != transport.CmpGt) || v < last[idx] {
						s.monotone[idx] = false
					}
					last[idx] = v
					if o.Cmp == transport.CmpGt {
						v++
					}
					s.targets[idx] = append(s.targets[idx], v)
				}
			}
		}
	}
	for idx, ts := range s.targets {
		slices.Sort(ts)
		s.targets[idx] = slices.Compact(ts)
	}
}

// checkCallEnds validates Options.CallEnds against the lists.
func checkCallEnds(lists []plan.List, ends [][]int, add func(Problem)) bool {
	if ends == nil {
		return true
	}
	if len(ends) != len(lists) {
		add(Problem{Kind: "shape", Msg: fmt.Sprintf("call ends for %d ranks, but %d lists were given", len(ends), len(lists))})
		return false
	}
	for r, e := range ends {
		if len(e) != len(ends[0]) {
			add(Problem{Kind: "shape", Rank: r, Msg: fmt.Sprintf("%d calls in rank %d's list, %d in rank 0's", len(e)+1, r, len(ends[0])+1)})
			return false
		}
		for i, at := range e {
			if at <= 0 || at >= len(lists[r].Ops) || (i > 0 && at <= e[i-1]) {
				add(Problem{Kind: "shape", Rank: r, Msg: fmt.Sprintf("call end %d of rank %d's list is not inside it, after the one before (%v, %d ops)", at, r, e, len(lists[r].Ops))})
				return false
			}
		}
	}
	return true
}
