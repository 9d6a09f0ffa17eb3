package simrank

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	lua "github.com/yuin/gopher-lua"

	"github.com/luacoll/luacoll/engine/plan/cost"
	"github.com/luacoll/luacoll/engine/plan/verify"
	"github.com/luacoll/luacoll/luabind"
	"github.com/luacoll/luacoll/transport"
	"github.com/luacoll/luacoll/window"
)

// verifyPlan is p:verify{collective, window, n, root, src, src_off,
// replays, calls}: on rank 0, the verification of every rank's list; on the
// others (simulated before rank 0), a report marked pending.
func (rk *rank) verifyPlan(L *lua.LState) int {
	const name = "p:verify"
	r := rk.planArg(L, name)
	a := rk.args(L, name, 2)
	t := a.table(0, "collective", "window", "n", "root", "src", "src_off", "replays", "calls")
	coll := verify.Collective{Kind: a.strField(t, "collective", ""), N: a.field(t, "n", 0), Root: int(a.field(t, "root", 0))}
	switch coll.Kind {
	case "", "allgather", "alltoall", "broadcast", "reduce_scatter", "allreduce":
	default:
		rk.fail(L, name, "bad argument 'collective' (unknown collective %q; want allgather, alltoall, broadcast, reduce_scatter or allreduce)", coll.Kind)
	}
	if coll.Kind != "" && (t == nil || t.RawGetString("n") == lua.LNil) {
		rk.fail(L, name, "bad argument 'n' (required with a collective: the bytes each rank contributes)")
	}
	if arg, why := coll.Check(r.shape, r.ops); arg != "" {
		rk.fail(L, name, "bad argument '%s' (%s)", arg, why)
	}
	replays := int(a.field(t, "replays", 2))
	if replays < 1 || replays > 16 {
		rk.fail(L, name, "bad argument 'replays' (%d: want 1..16)", replays)
	}
	calls := int(a.field(t, "calls", 1))
	if _, err := luabind.CallEnds(nil, calls, nil); err != nil {
		rk.fail(L, name, "bad argument 'calls' (%v)", err)
	}
	srcOff := a.field(t, "src_off", 0)
	src := rk.verifySource(L, name, t, r, coll, srcOff)
	slot := r.slot
	j := r.verifies
	r.verifies++
	if sh := rk.shadow; sh != nil {
		// What rank 0 will ask for, if it calls as its shadow did.
		var o *verify.Options
		// (A plan of several calls: rank 0 finds their ends itself.)
		if j < len(slot.srcs) && sh.pending == slot.num && calls == 1 {
			row := slices.Clone(slot.srcs[j])
			row[0] = src
			if srcs, missing, without := sources(row, srcOff, coll); len(missing) == 0 && len(without) == 0 {
				coll.Src = srcs
				o = &verify.Options{Collective: coll, Replays: replays, Budget: rk.w.budget()}
			}
		}
		sh.verified(slot.num, o)
		L.Push(pendingTable(L, rk.r))
		return 1
	}
	rk.w.mu.Lock()
	if j == len(slot.srcs) {
		row := make([]int, rk.w.o.Ranks)
		for i := range row {
			row[i] = -2
		}
		slot.srcs = append(slot.srcs, row)
	}
	slot.srcs[j][rk.r] = src
	rk.w.mu.Unlock()
	if rk.r != 0 {
		L.Push(pendingTable(L, rk.r))
		return 1
	}
	if slot.lists == nil {
		rk.fail(L, name, "plan %d's lists were released", slot.num)
	}
	srcs, missing, without := sources(slot.srcs[j], srcOff, coll)
	coll.Src = srcs
	switch {
	case len(missing) > 0:
		rk.fail(L, name, "simulated ranks %s made no p:verify call %d on plan %d: it is collective", abbrev(missing), j+1, slot.num)
	case len(without) > 0:
		rk.fail(L, name, "bad argument 'src' (ranks %s name none; every rank must, or none)", abbrev(without))
	}
	ends, err := luabind.CallEnds(slot.lists, calls, func(int) bool { return true })
	if err != nil {
		rk.fail(L, name, "bad argument 'calls' (%v)", err)
	}
	rk.w.verifying(slot, coll.Kind)
	rep := rk.w.verify(slot, verify.Options{Collective: coll, Replays: replays, Budget: rk.w.budget(), CallEnds: ends}, rk.w.pending == slot)
	rk.w.res.Verifies++
	if !rep.OK {
		rk.w.res.Failed++
	}
	what := "made"
	if coll.Kind != "" {
		what = "verified as " + coll.Kind
	}
	if rk.w.pending == slot {
		// This verification covers what the plan's own would check.
		rk.w.pending = nil
		what = "made and " + strings.TrimPrefix(what, "made")
		if coll.Kind == "" {
			what = "made"
		}
	}
	rk.w.note(slot, what, rep)
	L.Push(luabind.ReportTable(L, rep))
	return 1
}

// verifySource reads p:verify's src (an index of plan r's buffers; -1
// when not given, or for a broadcast's other ranks when theirs do not
// use it) and checks it holds what the collective reads at off.
func (rk *rank) verifySource(L *lua.LState, name string, t *lua.LTable, r *planRef, coll verify.Collective, srcOff uint64) int {
	src := -1
	if t == nil || t.RawGetString("src") == lua.LNil {
		return src
	}
	var b *simBuffer
	if ud, ok := t.RawGetString("src").(*lua.LUserData); ok {
		switch x := ud.Value.(type) {
		case *simBuffer:
			b = x
		case *simWindow:
			b = x.data
		}
	}
	if b == nil {
		rk.fail(L, name, "bad argument 'src' (buffer or window expected)")
	}
	for i, pb := range r.bufs {
		if pb == b {
			src = i
		}
	}
	// A broadcast reads the root's source alone: the others' plans need
	// not use theirs.
	if src < 0 && (coll.Kind != "broadcast" || rk.r == coll.Root) {
		rk.fail(L, name, "bad argument 'src' (%s is not a buffer the plan uses)", b.name)
	}
	var ae *window.ArgError
	if err := coll.CheckSrc(r.shape, src, srcOff, rk.r); errors.As(err, &ae) {
		rk.fail(L, name, "bad argument '%s' (%s)", ae.Arg, ae.Msg)
	}
	return src
}

// sources are the sources of a p:verify call whose ranks named buffers
// row (srcs[j]; -2: made no such call) at offset off, with the ranks that
// made no such call (missing) and those that named none where others did
// (without).
func sources(row []int, off uint64, coll verify.Collective) (srcs []verify.Source, missing, without []string) {
	for q, b := range row {
		if b == -2 {
			missing = append(missing, fmt.Sprint(q))
		}
	}
	if len(missing) > 0 {
		return nil, missing, nil
	}
	srcs, none := coll.Sources(row, off)
	for _, q := range none {
		without = append(without, fmt.Sprint(q))
	}
	return srcs, nil, without
}

// abbrev lists ranks, the first few of a long list.
func abbrev(ranks []string) string {
	if len(ranks) > 8 {
		return strings.Join(ranks[:8], ",") + fmt.Sprintf(",... (%d ranks)", len(ranks))
	}
	return strings.Join(ranks, ",")
}

// pendingTable is the report simulated rank r gets: rank 0, simulated
// last, verifies.
func pendingTable(L *lua.LState, r int) *lua.LTable {
	t := L.NewTable()
	t.RawSetString("ok", lua.LTrue)
	t.RawSetString("pending", lua.LTrue)
	t.RawSetString("ops", L.NewTable())
	t.RawSetString("steps", lua.LNumber(0))
	t.RawSetString("problems", L.NewTable())
	t.RawSetString("dropped", lua.LNumber(0))
	t.RawSetString("summary", lua.LString(fmt.Sprintf("pending: simulated rank %d runs before rank 0, which verifies every rank's list", r)))
	return t
}

// DefaultMode is the replay mode estimates use with model m: "host" where
// it has it, else "stream", else its first.
func DefaultMode(m *cost.Model) string {
	for _, mode := range []string{"host", "stream"} {
		if _, ok := m.Modes[mode]; ok {
			return mode
		}
	}
	return m.ModeNames()[0]
}

// estimatePlan is p:estimate{model, mode, layout} on rank 0.
func (rk *rank) estimatePlan(L *lua.LState) int {
	const name = "p:estimate"
	r := rk.planArg(L, name)
	a := rk.args(L, name, 2)
	t := a.table(0, "model", "mode", "layout")
	if !rk.lead() {
		rk.fail(L, name, "under luacoll check only rank 0 holds every rank's op list: estimate there (if lc.rank == 0 then ... end)")
	}
	if r.slot.lists == nil {
		rk.fail(L, name, "plan %d's lists were released", r.slot.num)
	}
	m, mode := rk.w.o.Model, rk.w.o.Mode
	if path := a.strField(t, "model", ""); path != "" {
		var err error
		if m, err = cost.Load(path); err != nil {
			rk.fail(L, name, "bad argument 'model' (%v)", err)
		}
		mode = DefaultMode(m)
	}
	mode = a.strField(t, "mode", mode)
	if _, ok := m.Modes[mode]; !ok {
		rk.fail(L, name, "bad argument 'mode' (the model has no mode %q; it has %v)", mode, m.ModeNames())
	}
	per := rk.w.o.PerNode
	if lay := a.strField(t, "layout", ""); lay != "" {
		nodes, p, err := ParseLayout(lay)
		if err == nil && nodes*p != rk.w.o.Ranks {
			err = fmt.Errorf("%q places %d ranks; the plan has %d", lay, nodes*p, rk.w.o.Ranks)
		}
		if err != nil {
			rk.fail(L, name, "bad argument 'layout' (%v)", err)
		}
		per = p
	}
	res, err := cost.Estimate(m, cost.Input{Lists: r.slot.lists, Mode: mode, Class: rk.w.classesFor(m, per)})
	if err != nil {
		rk.fail(L, name, "%v", err)
	}
	L.Push(luabind.EstimateTable(L, res, m))
	return 1
}

// estimateLine prints plan slot's estimate on the run's model and layout.
func (w *world) estimateLine(slot *planSlot) {
	o := w.o
	var res *cost.Result
	var err error
	if t := w.spec.estimate(slot.num); t != nil {
		res, err = t.est, t.err
	} else {
		res, err = cost.Estimate(o.Model, cost.Input{Lists: slot.lists, Mode: o.Mode, Class: w.classesFor(o.Model, o.PerNode)})
	}
	if err != nil {
		fmt.Fprintf(w.out, "[0] check: plan %d: no estimate: %v\n", slot.num, err)
		return
	}
	w.res.Estimates = append(w.res.Estimates, Estimate{Plan: slot.num, Site: slot.site, Result: res})
	where := fmt.Sprintf("%d nodes of %d: %s within a node, net between", o.Ranks/o.PerNode, o.PerNode, localClass(o.Model))
	if o.PerNode == o.Ranks {
		where = fmt.Sprintf("one node: %s", localClass(o.Model))
	}
	fmt.Fprintf(w.out, "[0] check: plan %d: estimate %s a replay (model %s, mode %s; %s)%s\n",
		slot.num, ms(res.Time), o.ModelName, res.Mode, where, borrowed(res, o.PerNode < o.Ranks, localClass(o.Model).String()))
	fmt.Fprintf(w.out, "[0]   %s\n", PathSummary(res))
}

// borrowed names the classes the layout uses (self, local, net where
// there are several nodes) that the model lacks.
func borrowed(res *cost.Result, net bool, local string) string {
	var used []string
	for _, c := range res.Borrowed {
		if c == "self" || c == local || (c == "net" && net) {
			used = append(used, c)
		}
	}
	if len(used) == 0 {
		return ""
	}
	return "; the model lacks " + strings.Join(used, ", ") + ", estimated with its nearest class"
}

// PathSummary says in a line what the critical path of res is made of:
// its ops and ranks, link time against start cost, and the ops by class.
func PathSummary(res *cost.Result) string {
	ranks := map[int]bool{}
	type agg struct {
		n    int
		time float64
	}
	by := map[string]*agg{}
	for _, st := range res.Path {
		ranks[st.Rank] = true
		key := st.Kind.String()
		if st.Peer >= 0 {
			key += " " + st.Class.String()
		}
		g := by[key]
		if g == nil {
			g = &agg{}
			by[key] = g
		}
		g.n++
		g.time += st.End - st.Start
	}
	keys := make([]string, 0, len(by))
	for k := range by {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if ti, tj := by[keys[i]].time, by[keys[j]].time; ti != tj {
			return ti > tj
		}
		return keys[i] < keys[j] // ties in name order, not the map's
	})
	var parts []string
	for _, k := range keys {
		if by[k].time <= 0 && len(parts) >= 3 {
			continue
		}
		parts = append(parts, fmt.Sprintf("%d %s %s", by[k].n, k, ms(by[k].time)))
	}
	lo, hi := res.Time, 0.0
	for _, v := range res.PerRank {
		lo, hi = min(lo, v), max(hi, v)
	}
	share := 0.0
	if res.Time > 0 {
		share = 100 * res.Link / res.Time
	}
	on := fmt.Sprintf("%d ranks", len(ranks))
	if len(ranks) == 1 {
		on = "1 rank"
	}
	return fmt.Sprintf("ranks end at %s..%s; critical path: %d ops on %s, link %s (%.0f %%), start cost %s; by op: %s",
		ms(lo), ms(hi), len(res.Path), on, ms(res.Link), share, ms(res.StartCost), strings.Join(parts, ", "))
}

// ms writes nanoseconds as us, ms or s.
func ms(ns float64) string {
	switch {
	case ns >= 1e9:
		return fmt.Sprintf("%.3f s", ns/1e9)
	case ns >= 1e6:
		return fmt.Sprintf("%.3f ms", ns/1e6)
	}
	return fmt.Sprintf("%.2f us", ns/1e3)
}

// classesFor places ranks in nodes of per for model m.
func (w *world) classesFor(m *cost.Model, per int) func(a, b int) transport.PeerKind {
	return luabind.LayoutClasses(per, localClass(m))
}
