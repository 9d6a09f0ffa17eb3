package cost

import (
	"fmt"
	"math"

	"github.com/luacoll/luacoll/engine/plan"
	"github.com/luacoll/luacoll/transport"
)

// Input is what Estimate simulates: every rank's list (Lists[r] is rank
// r's), the replay mode whose costs apply, and how ranks reach each other.
type Input struct {
	Lists []plan.List
	Mode  string
	// Class says how rank from reaches rank to; nil: self for a rank
	// itself, shm for every other.
	Class func(from, to int) transport.PeerKind
	// CPUs is how many processors the ranks of one host share (the ranks
	// a rank reaches without the network), for the host backend, whose
	// streams are threads: when the ranks outnumber them, they take turns
	// on them, each running until it blocks, and a processor passing from
	// one rank to another costs the model's Switch (cpus.go). 0: a
	// processor each.
	CPUs int
	// Replays, when 2 or more, also has Estimate simulate that many
	// replays back to back (replays.go) for Result.Steady.
	Replays int
}

// classOrDefault is in.Class, or self for a rank itself and shm between
// ranks when nil.
func (in Input) classOrDefault() func(from, to int) transport.PeerKind {
	if in.Class != nil {
		return in.Class
	}
	return func(from, to int) transport.PeerKind {
		if from == to {
			return transport.KindSelf
		}
		return transport.KindSHM
	}
}

// Step is one op of the critical path: the rank and op (from 1, as the
// verifier numbers them), its kind, the peer and the class of the link
// it used, when it could go on (Start) and when it ended (nanoseconds from
// the replay's start), and how its time splits into start cost and link
// time.
type Step struct {
	Rank, Op  int
	Kind      plan.Kind
	Peer      int
	Class     transport.PeerKind
	Start     float64
	End       float64
	StartCost float64
	Link      float64
	Site      plan.Site
}

// Result is one replay's prediction, in nanoseconds.
type Result struct {
	Mode string
	// Time is when the last rank ends its replay; PerRank[r] when rank r
	// does (every rank starts at 0).
	Time    float64
	PerRank []float64
	// Path is the critical path, first op first: each op waited for the
	// one before it (its stream's previous op, the signal or counter that
	// let it pass, or the last rank into its barrier). Its ops' times add
	// up to Time: Link of them moving bytes, StartCost the rest.
	Path      []Step
	Link      float64
	StartCost float64
	// Steady is the time of a replay in a loop of Input.Replays replays
	// back to back (Time when Replays is below 2).
	Steady float64
	// PerCall is what one p:run of one replay takes when calls come back
	// to back, as a bench's execs: Steady and the mode's call cost
	// (Params.Call).
	PerCall float64
	// Borrowed are the classes the model has no costs for in Mode,
	// estimated with the nearest class it has.
	Borrowed []string
	Ops      int
}

// usedOf keeps the classes of names (transport.PeerKind's names) that an
// op of lists reaches a peer by (self always counts).
func (s *sim) usedOf(lists []plan.List, names []string) []string {
	if len(names) == 0 {
		return names
	}
	used := map[string]bool{transport.KindSelf.String(): true}
	for r, l := range lists {
		for _, o := range l.Ops {
			switch o.Kind {
			case plan.SignalAll, plan.Barrier:
				for q := range lists {
					used[s.class(r, q).String()] = true
				}
			case plan.Put, plan.Get, plan.PutSignal, plan.PutCounter, plan.PutSignalCounter, plan.Signal, plan.BarrierPeer, plan.ReduceFrom:
				used[s.class(r, o.Peer).String()] = true
			}
		}
	}
	var out []string
	for _, n := range names {
		if used[n] {
			out = append(out, n)
		}
	}
	return out
}

// Estimate simulates one replay of every rank's list under model m: each
// rank runs its ops in order on one stream; a put (or get, fill, signal)
// occupies its rank's stream for its start cost plus its bytes times the
// class's per-byte cost, and its signal or counter lands when it ends; a
// wait ends its Wait start cost after its condition first holds; a barrier
// ends its cost after the last rank arrives. Rows start at the counts the
// recording code had (the lists' Base), as a replay's waits see them. It
// does no I/O; a plan that cannot finish in the model is an error naming
// the blocked ranks.
func Estimate(m *Model, in Input) (*Result, error) {
	if m == nil {
		return nil, fmt.Errorf("cost: no model")
	}
	if len(in.Lists) == 0 {
		return nil, fmt.Errorf("cost: no ranks")
	}
	tab, borrowed, err := m.table(in.Mode)
	if err != nil {
		return nil, fmt.Errorf("cost: %w", err)
	}
	for r, l := range in.Lists {
		if l.Shape.Ranks != len(in.Lists) {
			return nil, fmt.Errorf("cost: rank %d's list was recorded for %d ranks, but %d lists were given", r, l.Shape.Ranks, len(in.Lists))
		}
		for i, o := range l.Ops {
			if err := l.Shape.Check(r, o); err != nil {
				return nil, fmt.Errorf("cost: rank %d, op %d (%s at %s): %w", r, i+1, o.Kind, o.Site, err)
			}
		}
	}
	if in.CPUs < 0 {
		return nil, fmt.Errorf("cost: %d CPUs: want 0 or more", in.CPUs)
	}
	s := newSim(in.Lists, tab, in)
	if err := s.run(); err != nil {
		return nil, fmt.Errorf("cost: %w", err)
	}
	res := s.result()
	res.Mode, res.Borrowed, res.Steady = in.Mode, s.usedOf(in.Lists, borrowed), res.Time
	if in.Replays > 1 {
		if res.Steady, err = steady(tab, in, in.Replays); err != nil {
			return nil, fmt.Errorf("cost: %d replays back to back: %w", in.Replays, err)
		}
	}
	res.PerCall = res.Steady + tab[transport.KindSelf].Call.AlphaNs
	return res, nil
}

// result gathers the times per rank and walks the critical path back from
// the op that ends last.
func (s *sim) result() *Result {
	res := &Result{PerRank: make([]float64, len(s.ranks))}
	last := ref{-1, -1}
	for r := range s.ranks {
		rk := &s.ranks[r]
		res.Ops += len(rk.ops)
		if n := len(rk.ops); n > 0 {
			res.PerRank[r] = rk.end[n-1]
			if last.rank < 0 || rk.end[n-1] > res.Time {
				res.Time, last = rk.end[n-1], ref{int32(r), int32(n - 1)}
			}
		}
	}
	for at := last; at.rank >= 0; {
		rk := &s.ranks[at.rank]
		o := rk.ops[at.op]
		st := Step{Rank: int(at.rank), Op: int(at.op) + 1, Kind: o.Kind, Peer: -1, Class: transport.KindSelf,
			End: rk.end[at.op], StartCost: rk.alpha[at.op], Link: rk.end[at.op] - rk.start[at.op] - rk.alpha[at.op], Site: o.Site}
		if math.Abs(st.Link) < 1e-6 {
			st.Link = 0 // a difference of equal times, in floating point
		}
		st.Start = rk.start[at.op]
		if hasPeer(o.Kind) {
			st.Peer, st.Class = o.Peer, s.class(int(at.rank), o.Peer)
		}
		res.Path = append(res.Path, st)
		res.Link += st.Link
		res.StartCost += st.StartCost
		at = rk.cause[at.op]
	}
	for i, j := 0, len(res.Path)-1; i < j; i, j = i+1, j-1 {
		res.Path[i], res.Path[j] = res.Path[j], res.Path[i]
	}
	return res
}

func hasPeer(k plan.Kind) bool {
	switch k {
	case plan.SignalAll, plan.WaitSignal, plan.Barrier, plan.Fence, plan.Flush, plan.Fill:
		return false
	}
	return true
}
