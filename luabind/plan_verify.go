package luabind

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	lua "github.com/yuin/gopher-lua"

	"github.com/luacoll/luacoll/engine/bootstrap"
	"github.com/luacoll/luacoll/engine/plan"
	"github.com/luacoll/luacoll/engine/plan/verify"
	"github.com/luacoll/luacoll/window"
)

// verifyLists (collective) verifies on rank 0 and gives every rank its
// report.
func (s *State) verifyLists(ctx context.Context, what string, lists []plan.List, opt verify.Options) (*verify.Report, error) {
	var data []byte
	if s.rank() == 0 {
		opt.Done = ctx.Done()
		rep := verify.Verify(lists, opt)
		var err error
		if data, err = json.Marshal(rep); err != nil {
			return nil, err
		}
	}
	// The others wait for rank 0's report as long as it verifies (its
	// work is bounded, verify.DefaultBudget), not the per-call timeout:
	// a verification of a few seconds is no fault. A failed or
	// interrupted rank still ends the wait.
	all, err := s.Comm.Collective(bootstrap.WithoutCallTimeout(ctx), what+":verify:report", data)
	if err != nil {
		return nil, err
	}
	rep := &verify.Report{}
	if err := json.Unmarshal(all[0], rep); err != nil {
		return nil, fmt.Errorf("%s: the report from rank 0: %w", what, err)
	}
	return rep, nil
}

var verifyKeys = []string{"collective", "window", "n", "root", "src", "src_off", "replays", "calls"}

func verifyPlan(c *call) int {
	r := c.planRef()
	t := c.tableArg(0, verifyKeys, "p:verify{collective = \"allgather\", window = w, n = n}", true)
	c.windowField(t, r.p)
	c.checkResets(r)
	coll := verify.Collective{Kind: c.strField(t, "collective", ""), N: c.field(t, "n", 0), Root: int(c.field(t, "root", 0))}
	switch coll.Kind {
	case "", "allgather", "alltoall", "broadcast", "reduce_scatter", "allreduce":
	default:
		c.fail("bad argument 'collective' (unknown collective %q; want allgather, alltoall, broadcast, reduce_scatter or allreduce)", coll.Kind)
	}
	if coll.Kind != "" && (t == nil || t.RawGetString("n") == lua.LNil) {
		c.fail("bad argument 'n' (required with a collective: the bytes each rank contributes)")
	}
	sh := r.p.Lists()[c.s.rank()].Shape
	if arg, why := coll.Check(sh, r.p.Ops()); arg != "" {
		c.fail("bad argument '%s' (%s)", arg, why)
	}
	replays := int(c.field(t, "replays", 2))
	if replays < 1 || replays > 16 {
		c.fail("bad argument 'replays' (%d: want 1..16)", replays)
	}
	calls := int(c.field(t, "calls", 1))
	ends := callEnds(c, r.p.Lists(), calls)
	src, srcOff := -1, c.field(t, "src_off", 0)
	if t != nil && t.RawGetString("src") != lua.LNil {
		var b *window.Buffer
		switch v := t.RawGetString("src").(type) {
		case *lua.LUserData:
			switch x := v.Value.(type) {
			case *bufferRef:
				b = x.b
			case *windowRef:
				b = x.w.Buffer()
			}
		}
		if b == nil {
			c.fail("bad argument 'src' (buffer or window expected)")
		}
		for i, pb := range r.p.Buffers() {
			if pb == b {
				src = i
			}
		}
		// A broadcast reads the root's source alone: the others' plans
		// need not use theirs.
		if src < 0 && (coll.Kind != "broadcast" || c.s.rank() == coll.Root) {
			c.fail("bad argument 'src' (%s is not a buffer the plan uses)", b.Name())
		}
		var ae *window.ArgError
		if err := coll.CheckSrc(sh, src, srcOff, c.s.rank()); errors.As(err, &ae) {
			c.fail("bad argument '%s' (%s)", ae.Arg, ae.Msg)
		}
	}
	call := fmt.Sprintf("plan %d:verify{collective=%q, n=%d, root=%d, src_off=%d, replays=%d, calls=%d}", r.num, coll.Kind, coll.N, coll.Root, srcOff, replays, calls)
	all, err := c.s.Comm.Collective(c.ctx(), call, []byte(fmt.Sprint(src)))
	c.check(err)
	// Every rank decides alike from everyone's answer, so that none goes on
	// to the report's collective alone.
	bufs := make([]int, len(all))
	for q, d := range all {
		if _, err := fmt.Sscan(string(d), &bufs[q]); err != nil {
			bufs[q] = -1
		}
	}
	var without []int
	if coll.Src, without = coll.Sources(bufs, srcOff); len(without) > 0 {
		names := make([]string, len(without))
		for i, q := range without {
			names[i] = fmt.Sprint(q)
		}
		c.fail("bad argument 'src' (ranks %s name none; every rank must, or none)", strings.Join(names, ","))
	}
	rep, err := c.s.verifyLists(c.ctx(), fmt.Sprintf("plan %d", r.num), r.p.Lists(), verify.Options{Collective: coll, Replays: replays, CallEnds: ends})
	c.check(err)
	if c.s.plans.check != nil {
		c.s.plans.check.note(c.s, r, coll.Kind, rep)
	}
	c.L.Push(ReportTable(c.L, rep))
	return 1
}

// callEnds is verify.Options.CallEnds for a plan whose body made calls
// calls of the collective (CallEnds), checked on the lists this rank
// holds (under luacoll check only rank 0, which verifies, holds every
// rank's ops).
func callEnds(c *call, lists []plan.List, calls int) [][]int {
	ends, err := CallEnds(lists, calls, c.s.holdsList)
	if err != nil {
		c.fail("bad argument 'calls' (%v)", err)
	}
	return ends
}

// CallEnds is verify.Options.CallEnds for lists whose bodies made calls
// calls of the collective, each recording the same number of ops on a
// rank (nil for one call): the op counts after which each call but the
// last ends. Only the lists holds says are known are looked at.
func CallEnds(lists []plan.List, calls int, holds func(q int) bool) ([][]int, error) {
	if calls < 1 || calls > 16 {
		return nil, fmt.Errorf("%d: want 1..16", calls)
	}
	if calls == 1 {
		return nil, nil
	}
	ends := make([][]int, len(lists))
	for q, l := range lists {
		if !holds(q) {
			continue
		}
		n := len(l.Ops)
		if n == 0 || n%calls != 0 {
			return nil, fmt.Errorf("rank %d recorded %d ops, not %d calls of the same number", q, n, calls)
		}
		for k := 1; k < calls; k++ {
			ends[q] = append(ends[q], k*n/calls)
		}
	}
	return ends, nil
}

// ReportTable is a report as p:verify returns it (ranks 0-based, ops and
// lists 1-based).
func ReportTable(L *lua.LState, rep *verify.Report) *lua.LTable {
	t := L.NewTable()
	t.RawSetString("ok", lua.LBool(rep.OK))
	ops := L.NewTable()
	for _, n := range rep.Ops {
		ops.Append(lua.LNumber(n))
	}
	t.RawSetString("ops", ops)
	t.RawSetString("steps", lua.LNumber(rep.Steps))
	ps := L.NewTable()
	for _, p := range rep.Problems {
		pt := L.NewTable()
		pt.RawSetString("kind", lua.LString(p.Kind))
		pt.RawSetString("rank", lua.LNumber(p.Rank))
		pt.RawSetString("op", lua.LNumber(p.Op))
		pt.RawSetString("op_name", lua.LString(p.OpName))
		pt.RawSetString("replay", lua.LNumber(p.Replay))
		pt.RawSetString("file", lua.LString(p.Site.File))
		pt.RawSetString("line", lua.LNumber(p.Site.Line))
		pt.RawSetString("message", lua.LString(p.String()))
		if p.Other != nil {
			o := L.NewTable()
			o.RawSetString("rank", lua.LNumber(p.Other.Rank))
			o.RawSetString("op", lua.LNumber(p.Other.Op))
			o.RawSetString("op_name", lua.LString(p.Other.Kind.String()))
			o.RawSetString("file", lua.LString(p.Other.Site.File))
			o.RawSetString("line", lua.LNumber(p.Other.Site.Line))
			pt.RawSetString("other", o)
		}
		ps.Append(pt)
	}
	t.RawSetString("problems", ps)
	t.RawSetString("dropped", lua.LNumber(rep.Dropped))
	t.RawSetString("summary", lua.LString(rep.Summary()))
	return t
}
