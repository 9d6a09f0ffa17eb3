package luabind

import (
	"fmt"
	"strings"

	lua "github.com/yuin/gopher-lua"

	"github.com/luacoll/luacoll/engine/plan"
	"github.com/luacoll/luacoll/engine/plan/verify"
	"github.com/luacoll/luacoll/transport"
	"github.com/luacoll/luacoll/window"
)

// ReduceCall is one call of a reduction schedule: n bytes (the
// schedule's own n: the chunk of reduce_scatter, the whole input of
// all_reduce) of element type Type, reduced with Op, the scratch the
// schedule may use at offset Scratch of the window.
type ReduceCall struct {
	N       uint64
	Type    transport.DType
	Op      transport.RedOp
	Scratch uint64
	// Coll is the collective the schedule computes, "reduce_scatter" or
	// "allreduce": ReduceSchedulePlan's verifier proves every call's
	// result ("" proves none).
	Coll string
}

// ReduceSchedule loads function fn of module mod (reduce_scatter.ring,
// all_reduce.two_shot, or a module next to the script) and returns a Go
// function that calls it as fn(w, n, {type = ..., op = ..., scratch =
// ...}), so that benchmarks run a reduction written in Lua.
func (s *State) ReduceSchedule(mod, fn string) (func(w *window.Window, call ReduceCall) error, error) {
	L := s.L
	f, err := s.scheduleFunc(mod, fn)
	if err != nil {
		return nil, err
	}
	// Schedules keep per-window tallies keyed by the window's Lua value:
	// one userdata per window for as long as the state lives.
	wuds := map[*window.Window]*lua.LUserData{}
	// One options table a kind of call: the schedules keep what they
	// work out from it (a table costs microseconds in the interpreter).
	optss := map[ReduceCall]*lua.LTable{}
	return func(w *window.Window, call ReduceCall) error {
		s.cur = L
		wud := wuds[w]
		if wud == nil {
			wud = s.userdata(&windowRef{w: w}, "w")
			wuds[w] = wud
		}
		key := call
		key.N = 0
		opts := optss[key]
		if opts == nil {
			opts = reduceOpts(L, call)
			optss[key] = opts
		}
		if err := L.CallByParam(lua.P{Fn: f, NRet: 0, Protect: true}, wud, lua.LNumber(call.N), opts); err != nil {
			return fmt.Errorf("%s.%s: %s", mod, fn, strings.TrimSpace(scriptError(err).Error()))
		}
		return nil
	}, nil
}

// ReducePick returns, for a schedule fn of module mod that picks one of
// the module's schedules by its arguments (auto, where the module has a
// pick function: scripts/lib's all_reduce and reduce_scatter), a Go
// function that names the schedule a call runs; nil for any other fn.
// pick enqueues nothing.
func (s *State) ReducePick(mod, fn string) func(w *window.Window, call ReduceCall) (string, error) {
	if fn != "auto" {
		return nil
	}
	f, err := s.scheduleFunc(mod, "pick")
	if err != nil {
		return nil // a module of the user's with an auto but no pick
	}
	L := s.L
	wuds := map[*window.Window]*lua.LUserData{}
	return func(w *window.Window, call ReduceCall) (string, error) {
		s.cur = L
		wud := wuds[w]
		if wud == nil {
			wud = s.userdata(&windowRef{w: w}, "w")
			wuds[w] = wud
		}
		if err := L.CallByParam(lua.P{Fn: f, NRet: 1, Protect: true}, wud, lua.LNumber(call.N), reduceOpts(L, call)); err != nil {
			return "", fmt.Errorf("%s.pick: %s", mod, strings.TrimSpace(scriptError(err).Error()))
		}
		v := L.Get(-1)
		L.Pop(1)
		name, ok := v.(lua.LString)
		if !ok {
			return "", fmt.Errorf("%s.pick: returned a %s, want the name of a schedule", mod, v.Type())
		}
		return string(name), nil
	}
}

// ReduceSchedulePlan is ReduceSchedule with each call size recorded into
// two plans (two calls: lc.plan, in s.PlanMode), replayed in turn after.
// The staged schedules alternate between two staging halves, so the two
// plans are verified as what runs: one list of both calls (the first's
// ops, then the second's), replayed back to back (reduceReplays times),
// every call's result proved symbolically when call.Coll names the
// collective. Any problem is an error: the plan does not run.
func (s *State) ReduceSchedulePlan(mod, fn string) (func(w *window.Window, call ReduceCall) error, error) {
	f, err := s.scheduleFunc(mod, fn)
	if err != nil {
		return nil, err
	}
	var turns planTurns
	wuds := map[*window.Window]*lua.LUserData{}
	record := func(w *window.Window, call ReduceCall) (*planRef, error) {
		s.cur = s.L
		wud := wuds[w]
		if wud == nil {
			wud = s.userdata(&windowRef{w: w}, "w")
			wuds[w] = wud
		}
		args := []lua.LValue{wud, lua.LNumber(call.N), reduceOpts(s.L, call)}
		r, err := s.makePlan(s.Ctx, s.L, f, args, s.PlanMode, fmt.Sprintf("%s.%s(n=%d)", mod, fn, call.N))
		if err != nil {
			return nil, fmt.Errorf("%s.%s: recording a plan: %w", mod, fn, err)
		}
		return r, nil
	}
	return func(w *window.Window, call ReduceCall) error {
		r, err := turns.next(planKey{w, call}, func() ([2]*planRef, error) {
			var two [2]*planRef
			for i := range two {
				r, err := record(w, call)
				if err != nil {
					return two, err
				}
				two[i] = r
			}
			if err := s.verifyPair(two, call); err != nil {
				return two, fmt.Errorf("%s.%s: %w", mod, fn, err)
			}
			if s.PlanModes == nil {
				s.PlanModes = map[uint64]string{}
			}
			s.PlanModes[call.N] = two[0].mode
			return two, nil
		})
		if err != nil {
			return err
		}
		return r.p.Run(1)
	}, nil
}

// planKey is a reduction call's kind: its window and its arguments.
type planKey struct {
	w    *window.Window
	call ReduceCall
}

// planPair is a call kind's two plans (two calls recorded: the staged
// schedules alternate between two staging halves) and which one runs next.
type planPair struct {
	two  [2]*planRef
	turn int
}

// planTurns hands out each call kind's two plans in turn, recording them
// at its first call. The last kind's pair is kept aside: calls of one kind
// back to back look up nothing (a map lookup hashes the whole key, 7 % of
// a 1 KiB host all-reduce).
type planTurns struct {
	pairs   map[planKey]*planPair
	lastKey planKey
	last    *planPair
}

// next returns the plan the call of kind k runs, making k's two plans
// with make first if there are none.
func (t *planTurns) next(k planKey, make func() ([2]*planRef, error)) (*planRef, error) {
	if t.last == nil || k != t.lastKey {
		p := t.pairs[k]
		if p == nil {
			two, err := make()
			if err != nil {
				return nil, err
			}
			p = &planPair{two: two}
			if t.pairs == nil {
				t.pairs = map[planKey]*planPair{}
			}
			t.pairs[k] = p
		}
		t.lastKey, t.last = k, p
	}
	r := t.last.two[t.last.turn]
	t.last.turn = 1 - t.last.turn
	return r, nil
}

// reduceReplays is how many times verifyPair replays the two calls back
// to back: a rank may run a call or two ahead of another, and every
// staging half is reused.
const reduceReplays = 2

// verifyPair (collective) verifies the two plans of one call size as one
// list of both calls, replayed back to back, with the declared
// collective's result checked at the end of every call.
func (s *State) verifyPair(two [2]*planRef, call ReduceCall) error {
	a, b := two[0].p, two[1].p
	same := len(a.Buffers()) == len(b.Buffers())
	for i := 0; same && i < len(a.Buffers()); i++ {
		same = a.Buffers()[i] == b.Buffers()[i]
	}
	what := fmt.Sprintf("plans %d and %d", two[0].num, two[1].num)
	flag := []byte{0}
	if same {
		flag[0] = 1
	}
	all, err := s.Comm.Collective(s.Ctx, what+":buffers", flag)
	if err != nil {
		return err
	}
	var differ []string
	for q, d := range all {
		if len(d) != 1 || d[0] != 1 {
			differ = append(differ, fmt.Sprint(q))
		}
	}
	if len(differ) > 0 {
		return fmt.Errorf("the two plans of n=%d use different buffers on rank(s) %s: they are verified as one list and must use the same", call.N, strings.Join(differ, ","))
	}
	lists, ends, err := joinLists(a.Lists(), b.Lists())
	if err != nil {
		return fmt.Errorf("n=%d: %w", call.N, err)
	}
	opt := verify.Options{Replays: reduceReplays, CallEnds: ends}
	if call.Coll != "" {
		opt.Collective = verify.Collective{Kind: call.Coll, N: call.N}
	}
	rep, err := s.verifyLists(s.Ctx, what, lists, opt)
	if err != nil {
		return err
	}
	if !rep.OK {
		msg := rep.Summary()
		if len(rep.Problems) > 0 {
			msg = rep.Problems[0].String()
		}
		return fmt.Errorf("the plans of n=%d fail verification (%s): %s", call.N, rep.Count(), msg)
	}
	return nil
}

// joinLists returns every rank's list of a's ops then b's (two plans
// recorded one after the other on one window, with the same buffers),
// and where a's ops end in each (verify.Options.CallEnds; nil when no
// rank has any op, as on one rank). The join starts where a did: b's
// recording began where a's left the rows. A call that records ops on
// some ranks and none on another cannot be told apart in the join: an
// error.
func joinLists(a, b []plan.List) ([]plan.List, [][]int, error) {
	lists := make([]plan.List, len(a))
	ends := make([][]int, len(a))
	var empty, full []string
	for q := range a {
		l := a[q]
		l.Ops = append(append([]plan.Op(nil), a[q].Ops...), b[q].Ops...)
		lists[q] = l
		ends[q] = []int{len(a[q].Ops)}
		if len(a[q].Ops) == 0 || len(b[q].Ops) == 0 {
			empty = append(empty, fmt.Sprint(q))
		} else {
			full = append(full, fmt.Sprint(q))
		}
	}
	switch {
	case len(full) == 0:
		return lists, nil, nil
	case len(empty) > 0:
		return nil, nil, fmt.Errorf("a call records no ops on rank(s) %s but some on rank(s) %s: its plans cannot be verified as one list", strings.Join(empty, ","), strings.Join(full, ","))
	}
	return lists, ends, nil
}

// reduceOpts is the options table of a call: {type, op, scratch}.
func reduceOpts(L *lua.LState, call ReduceCall) *lua.LTable {
	opts := L.NewTable()
	opts.RawSetString("type", lua.LString(call.Type.String()))
	opts.RawSetString("op", lua.LString(call.Op.String()))
	opts.RawSetString("scratch", lua.LNumber(call.Scratch))
	return opts
}
