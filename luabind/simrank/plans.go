package simrank

import (
	"fmt"
	"strings"
	"time"

	lua "github.com/yuin/gopher-lua"

	"github.com/luacoll/luacoll/engine/plan"
	"github.com/luacoll/luacoll/engine/plan/verify"
	"github.com/luacoll/luacoll/luabind"
)

// planSlot is plan number num as every simulated rank made it.
type planSlot struct {
	num       int
	site      string
	firstRank int // the first rank that made it (the last simulated)
	lists     []plan.List
	made      []bool
	// srcs[j][r] is the buffer rank r named as p:verify call j's src (-1
	// none; -2: r made no such call).
	srcs [][]int
	done bool // rank 0 made it: verified, estimated
}

// planRef is a plan's userdata value on one simulated rank.
type planRef struct {
	slot     *planSlot
	site     string    // where this rank made it
	ops      []plan.Op // this rank's
	shape    plan.Shape
	bufs     []*simBuffer
	window   int
	verifies int // p:verify calls so far
	freed    bool
}

func (r *planRef) String() string {
	if r.freed {
		return fmt.Sprintf("plan %d (freed)", r.slot.num)
	}
	return fmt.Sprintf("plan %d (%d ops, mode check, simulated)", r.slot.num, len(r.ops))
}

// slot returns plan k, made by rank r at site, under w.mu. Its site is
// that of the highest rank that made it, the first to run when the ranks
// run one after the other.
func (w *world) slot(k int, site string, r int) *planSlot {
	if k <= len(w.plans) {
		p := w.plans[k-1]
		if r > p.firstRank {
			p.firstRank, p.site = r, site
		}
		return p
	}
	n := w.o.Ranks
	p := &planSlot{num: k, site: site, firstRank: r, lists: make([]plan.List, n), made: make([]bool, n)}
	w.plans = append(w.plans, p)
	return p
}

// newPlan is lc.plan(body, ..., {mode=...}?): the body's operations
// become this rank's list.
func (rk *rank) newPlan(L *lua.LState) int {
	const name = "lc.plan"
	body, ok := L.Get(1).(*lua.LFunction)
	if !ok {
		rk.fail(L, name, "bad argument #1 'body' (function expected, got %s)", L.Get(1).Type())
	}
	var bodyArgs []lua.LValue
	for i := 2; i <= L.GetTop(); i++ {
		bodyArgs = append(bodyArgs, L.Get(i))
	}
	if n := len(bodyArgs); n > 0 && luabind.IsPlanOpts(bodyArgs[n-1]) {
		bodyArgs = bodyArgs[:n-1] // the mode: every simulated plan is "check"
	}
	site := strings.TrimSuffix(L.Where(1), ":")
	if rk.lead() {
		if err := rk.w.flush(); err != nil {
			rk.fail(L, name, "%v", err)
		}
	}
	// The ranks of a goroutine run one at a time: each body records into
	// the arrays the last one left (list copies what it keeps), unless
	// this lc.plan is inside another's body.
	rec := &rk.env.rec
	if rk.rec != nil {
		rec = &recorder{}
	}
	rec.reset()
	if msg := rk.record(L, body, bodyArgs, rec); msg != "" {
		rk.fail(L, name, "the body failed: %s", msg)
	}
	list, bufs, err := rec.list(rk.w.o.Ranks)
	rec.reset()
	if err != nil {
		rk.fail(L, name, "%v", err)
	}
	rk.made++
	var slot *planSlot
	if sh := rk.shadow; sh != nil {
		if rk.made > len(rk.w.plans) {
			rk.fail(L, name, "the shadow of rank 0 made more plans than the other ranks")
		}
		if sh.pending != 0 {
			o := rk.w.flushOptions()
			sh.verified(sh.pending, &o)
		}
		slot = rk.w.plans[rk.made-1]
		sh.lists, sh.opts, sh.pending = append(sh.lists, list), append(sh.opts, nil), rk.made
	} else {
		rk.w.mu.Lock()
		slot = rk.w.slot(rk.made, site, rk.r)
		slot.lists[rk.r], slot.made[rk.r] = list, true
		rk.w.mu.Unlock()
	}
	ref := &planRef{slot: slot, site: site, ops: list.Ops, shape: list.Shape, bufs: bufs, window: list.Window}
	if rk.lead() {
		rk.complete(L, slot, site)
	}
	rk.push(L, ref, mtPlan)
	return 1
}

// record runs body(args...) on a thread of L with rec recording and
// returns "" or the error it raised.
func (rk *rank) record(L *lua.LState, body *lua.LFunction, args []lua.LValue, rec *recorder) string {
	rk.rec = rec
	defer func() { rk.rec = nil }()
	return luabind.CallBody(L, body, args)
}

// complete runs on rank 0, the last rank simulated, once it made plan
// slot at site: every rank's list is there; the plan is verified and
// estimated.
func (rk *rank) complete(L *lua.LState, slot *planSlot, site string) {
	const name = "lc.plan"
	w := rk.w
	lists := slot.lists
	for q, made := range slot.made {
		if !made {
			rk.fail(L, name, "simulated rank %d made no plan %d (rank 0 made it at %s): every rank must make the same plans in the same order", q, slot.num, site)
		}
		if lists[q].Window != lists[0].Window {
			rk.fail(L, name, "simulated rank %d recorded plan %d on window %d, rank 0 on window %d: every rank's body must use the same window", q, slot.num, lists[q].Window, lists[0].Window)
		}
	}
	slot.done = true
	led := w.ledgers[lists[0].Window]
	if led == nil {
		led = &plan.Ledger{}
		w.ledgers[lists[0].Window] = led
	}
	led.Record(lists, 0)
	dropZeroBase(lists)
	w.spec.match(slot.num, lists)
	w.res.Plans++
	w.estimateLine(slot)
	w.pending = slot
}

// flush verifies the plan rank 0 made last, unless p:verify did (its
// verification covers everything this one checks): the plan's deadlocks,
// races and bounds.
func (w *world) flush() error {
	slot := w.pending
	if slot == nil || slot.lists == nil {
		return nil
	}
	w.pending = nil
	w.verifying(slot, "")
	rep := w.verify(slot, w.flushOptions(), true)
	w.note(slot, "made", rep)
	w.res.Made++
	if !rep.OK {
		w.res.Failed++
		return fmt.Errorf("plan %d (made at %s) failed verification: %s%s", slot.num, slot.site, rep.Summary(), rep.Hint())
	}
	return nil
}

// verify verifies slot's lists with options o: with the verification
// made ahead of rank 0 where there is one for them (first: this is the
// plan's first verification), else here.
func (w *world) verify(slot *planSlot, o verify.Options, first bool) *verify.Report {
	if first {
		if rep, ok := w.spec.verification(slot.num, o); ok {
			w.res.Ahead++
			return rep
		}
	}
	return w.runVerify(slot.num, slot.lists, o)
}

// verifying says on the progress stream that a long verification starts.
func (w *world) verifying(slot *planSlot, coll string) {
	if w.o.Progress == nil || w.o.Ranks < 256 {
		return
	}
	ops := 0
	for _, l := range slot.lists {
		ops += len(l.Ops)
	}
	as := ""
	if coll != "" {
		as = " as " + coll
	}
	fmt.Fprintf(w.o.Progress, "luacoll check: plan %d: verifying %d ranks' lists%s (%d ops; %.1f s so far, %s resident)\n",
		slot.num, len(slot.lists), as, ops, time.Since(w.start).Seconds(), Bytes(currentRSS()))
}

// dropZeroBase forgets the lists' Base rows where they are all zero (a
// window's first plan): nil means zero, and a thousand ranks' rows of
// zeros are megabytes.
func dropZeroBase(lists []plan.List) {
	for q := range lists {
		zero := true
		for _, v := range lists[q].Base {
			if v != 0 {
				zero = false
				break
			}
		}
		if zero {
			lists[q].Base = nil
		}
	}
}

// budget is the verifier's bound of work: the default, scaled by the
// ranks past 32 (its work counts each wait's join of vector clocks as
// long as the ranks; a 1,024-rank ring takes about 5e9).
func (w *world) budget() int {
	if w.o.Budget > 0 {
		return w.o.Budget
	}
	return verify.DefaultBudget * max(1, w.o.Ranks/32)
}

// note prints what a verification of slot found, as luacoll check does.
func (w *world) note(slot *planSlot, what string, rep *verify.Report) {
	if rep.OK {
		fmt.Fprintf(w.out, "[0] check: plan %d (%s), %s: %s\n", slot.num, slot.site, what, rep.Summary())
		return
	}
	fmt.Fprintf(w.out, "[0] check: plan %d (%s), %s: %s\n", slot.num, slot.site, what, rep.Count())
	stopped := false
	for _, p := range rep.Problems {
		fmt.Fprintf(w.out, "[0]   %s\n", p)
		stopped = stopped || p.Kind == "stopped"
	}
	if rep.Dropped > 0 {
		fmt.Fprintf(w.out, "[0]   ... and %d more\n", rep.Dropped)
	}
	if stopped {
		fmt.Fprintf(w.out, "[0]   (luacoll check --budget raises the bound: the work grows about as ranks x ops)\n")
	}
}

// planMethods are a plan's methods under simulation.
func (rk *rank) planMethods() map[string]lua.LGFunction {
	return map[string]lua.LGFunction{
		"run": func(L *lua.LState) int {
			rk.planArg(L, "p:run")
			a := rk.args(L, "p:run", 2)
			t := a.table(0, "times", "window")
			if times := a.field(t, "times", 1); times < 1 || times > 1<<31 {
				rk.fail(L, "p:run", "bad argument 'times' (%d: want 1..2^31)", times)
			}
			if rk.lead() {
				rk.w.res.Skipped++
			}
			return 0
		},
		"verify":   rk.verifyPlan,
		"estimate": rk.estimatePlan,
		"ops": func(L *lua.LState) int {
			r := rk.planArg(L, "p:ops")
			out := L.CreateTable(len(r.ops), 0)
			for _, o := range r.ops {
				t := L.NewTable()
				t.RawSetString("op", lua.LString(o.Kind.String()))
				for _, kv := range o.Fields() {
					switch x := kv[1].(type) {
					case int:
						t.RawSetString(kv[0].(string), lua.LNumber(x))
					case uint64:
						t.RawSetString(kv[0].(string), lua.LNumber(x))
					case string:
						t.RawSetString(kv[0].(string), lua.LString(x))
					}
				}
				t.RawSetString("file", lua.LString(o.Site.File))
				t.RawSetString("line", lua.LNumber(o.Site.Line))
				out.Append(t)
			}
			L.Push(out)
			return 1
		},
		"info": func(L *lua.LState) int {
			r := rk.planArg(L, "p:info")
			t := L.NewTable()
			t.RawSetString("ops", lua.LNumber(len(r.ops)))
			t.RawSetString("mode", lua.LString("check"))
			t.RawSetString("replays", lua.LNumber(0))
			t.RawSetString("window", lua.LNumber(r.window))
			t.RawSetString("buffers", lua.LNumber(len(r.bufs)-1))
			t.RawSetString("ranks", lua.LNumber(rk.w.o.Ranks))
			t.RawSetString("site", lua.LString(r.site))
			t.RawSetString("lines", lua.LNumber(0))
			L.Push(t)
			return 1
		},
		"free": func(L *lua.LState) int {
			r := rk.planArg(L, "p:free")
			r.freed = true
			if sh := rk.shadow; sh != nil && sh.pending == r.slot.num {
				o := rk.w.flushOptions()
				sh.verified(sh.pending, &o)
			}
			if rk.lead() {
				if rk.w.pending == r.slot {
					if err := rk.w.flush(); err != nil {
						rk.fail(L, "p:free", "%v", err)
					}
				}
				r.slot.lists = nil // rank 0 runs last: no rank needs them now
			}
			return 0
		},
	}
}

func (rk *rank) planArg(L *lua.LState, name string) *planRef {
	r, ok := L.CheckUserData(1).Value.(*planRef)
	if !ok {
		rk.fail(L, name, "a plan expected")
	}
	if r.freed {
		rk.fail(L, name, "plan %d has been freed", r.slot.num)
	}
	return r
}
