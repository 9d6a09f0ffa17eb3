package verify

import (
	"fmt"
	"strings"
	"sync/atomic"

	"github.com/luacoll/luacoll/engine/plan"
)

// Collective names the result a plan must produce.
type Collective struct {
	// Kind is "allgather", "alltoall", "broadcast", "reduce_scatter",
	// "allreduce" or "" (no result check).
	Kind string
	// N is the bytes each rank contributes (allgather, alltoall: per
	// peer; broadcast: the whole message), or the reductions' result:
	// reduce_scatter's chunk of an input of ranks x N bytes, allreduce's
	// whole input. Both are in place in the window (Src, when given,
	// names the window and the input's offset).
	N uint64
	// Root is the broadcast's root.
	Root int
	// Src[r] is rank r's source, when known: Buf < 0 means not given, and
	// the result is compared with what the ranks agree on instead.
	Src []Source
}

// Check says which of p:verify's arguments is wrong for a plan whose
// window has shape sh and whose ops on one rank are ops, and why ("", ""
// when none is): a collective needs a byte a rank, a reduction's result
// whole elements of the type the plan reduces (an n cut short checks part
// of the result), the result must fit the window, and a broadcast's root
// must be a rank.
func (c Collective) Check(sh plan.Shape, ops []plan.Op) (arg, why string) {
	if c.Kind == "" {
		return "", ""
	}
	if c.N == 0 {
		return "n", "0: a collective's result needs at least one byte a rank"
	}
	if c.Kind == "broadcast" && (c.Root < 0 || c.Root >= sh.Ranks) {
		return "root", fmt.Sprintf("%d is outside 0..%d", c.Root, sh.Ranks-1)
	}
	if isReduceColl(c.Kind) {
		for _, o := range ops {
			if isReduce(o.Kind) {
				if sz := o.DType.Size(); sz > 0 && c.N%sz != 0 {
					return "n", fmt.Sprintf("%d bytes is not a whole number of the %s elements the plan reduces", c.N, o.DType)
				}
				break
			}
		}
	}
	need, ok := c.need(sh.Ranks)
	switch {
	case !ok:
		return "n", fmt.Sprintf("%s of %d bytes a rank overflows", c.Kind, c.N)
	case need > sh.Bytes:
		return "n", fmt.Sprintf("%s of n=%d needs %d bytes of window; it has %d", c.Kind, c.N, need, sh.Bytes)
	}
	return "", ""
}

// need is the window bytes c's result takes at ranks ranks (false when
// that overflows).
func (c Collective) need(ranks int) (uint64, bool) {
	switch c.Kind {
	case "allgather", "alltoall", "reduce_scatter":
		need := c.N * uint64(ranks)
		return need, c.N == 0 || need/c.N == uint64(ranks)
	}
	return c.N, true
}

// CheckSrc says, as the window would (an *window.ArgError naming src_off
// or n), whether rank's source buffer src (an index of its plan's, sh)
// at off holds what c reads of it.
func (c Collective) CheckSrc(sh plan.Shape, src int, off uint64, rank int) error {
	if src < 0 || src >= len(sh.Buffers) {
		return nil
	}
	return plan.RangeErr("src_off", "n", off, c.SrcSpan(sh.Ranks), sh.Buffers[src], bufWhat(src, rank))
}

// Sources turns the buffer each rank named as its source (bufs[q], -1:
// none) at off into Collective.Src: nil where no rank named one (for a
// broadcast, where the root did not: the others' are not read), else one
// a rank, with the ranks that named none, which the caller refuses
// (every rank names one, or none).
func (c Collective) Sources(bufs []int, off uint64) (srcs []Source, without []int) {
	srcs = make([]Source, len(bufs))
	for q, b := range bufs {
		switch {
		case c.Kind == "broadcast" && q != c.Root:
			b = -1
		case b < 0:
			b = -1
			without = append(without, q)
		}
		srcs[q] = Source{Buf: b, Off: off}
	}
	if len(without) == len(bufs) || (c.Kind == "broadcast" && len(without) > 0) {
		return nil, nil
	}
	return srcs, without
}

// SrcSpan is the bytes of each rank's source c reads at ranks ranks: n,
// or every rank's chunk for alltoall and reduce_scatter.
func (c Collective) SrcSpan(ranks int) uint64 {
	if c.Kind == "alltoall" || c.Kind == "reduce_scatter" {
		need, _ := c.need(ranks)
		return need
	}
	return c.N
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
	// CallEnds, when set, says that each list holds several calls of the
	// collective one after another (two plans of a schedule that
	// alternates between them, verified as one): CallEnds[r] are the op
	// counts of rank r's list after which a call other than the last
	// ends, the same number on every rank. The result is checked, and the
	// sources taken as rewritten, at the end of every call instead of
	// every replay; result problems then number calls in their replay
	// field.
	CallEnds [][]int
	// MaxProblems caps the problems reported (default 50).
	MaxProblems int
	// Budget bounds the steps simulated in all (DefaultBudget when 0):
	// past it Verify stops and says so.
	Budget int
	// Meter, when set, is where Verify counts the ops it has simulated,
	// for a progress line while it runs; nothing else reads it.
	Meter *Meter
	// Done, when it closes, stops the verification as the budget would
	// (an interrupt, a failed peer): the report then claims nothing.
	Done <-chan struct{}
}

// Meter tells how far a running verification has got: the ops it has
// simulated (each replay's count) and how many it would simulate in all.
// It may be read while Verify runs.
type Meter struct{ done, total atomic.Int64 }

// Done returns the ops simulated so far and their total (0, 0 before the
// simulation starts).
func (m *Meter) Done() (ops, total int64) { return m.done.Load(), m.total.Load() }

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
	return fmt.Sprintf("%s; first: %s", r.Count(), r.Problems[0])
}

// Count says how many problems the report found, dropped ones included:
// "1 problem", "3 problems".
func (r *Report) Count() string {
	if n := len(r.Problems) + r.Dropped; n != 1 {
		return fmt.Sprintf("%d problems", n)
	}
	return "1 problem"
}

// BetweenReplays reports whether the report failed only on races first
// seen in a replay after the first: what a plan that the script means to
// alternate with another (a schedule's two staging halves) shows when it
// is replayed back to back alone.
func (r *Report) BetweenReplays() bool {
	if r.OK || r.Dropped > 0 || len(r.Problems) == 0 {
		return false
	}
	for _, p := range r.Problems {
		if p.Kind != "race" || p.Replay < 2 {
			return false
		}
	}
	return true
}

// Hint is what to add to a failure's summary: for one where
// BetweenReplays holds, how to verify a schedule that alternates between
// plans; else "".
func (r *Report) Hint() string {
	if !r.BetweenReplays() {
		return ""
	}
	return " (every problem is between replays of this plan back to back; a schedule that alternates between plans is verified as one plan that records its calls in turn, with p:verify{calls = N})"
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
