package luabind

import (
	"fmt"
	"strings"

	lua "github.com/yuin/gopher-lua"

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

// ReduceSchedulePlan is ReduceSchedule with each call size recorded into
// two plans (two calls: lc.plan, in s.PlanMode), replayed in turn after;
// each plan is verified (one replay) for deadlocks and races. What a
// reduction computes is checked by the benchmark's host reference (and,
// for a collective declared to p:verify, symbolically).
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
		// One replay: a plan of a staged schedule is safe only in turn with
		// its twin (the other staging half), which the verifier does not
		// see; two replays of one would be a race, and it says so.
		rep, err := s.verifyLists(s.Ctx, fmt.Sprintf("plan %d", r.num), r.p.Lists(), verify.Options{Replays: 1})
		if err != nil {
			return nil, err
		}
		if bad := notRaces(rep); bad != nil {
			return nil, fmt.Errorf("%s.%s: the plan of n=%d fails verification: %s", mod, fn, call.N, bad.Msg)
		}
		if s.PlanModes == nil {
			s.PlanModes = map[uint64]string{}
		}
		s.PlanModes[call.N] = r.mode
		return r, nil
	}
	return func(w *window.Window, call ReduceCall) error {
		r, err := turns.next(planKey{w, call}, func() (*planRef, error) { return record(w, call) })
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

// next returns the plan the call of kind k runs, recording k's two plans
// with record first if there are none.
func (t *planTurns) next(k planKey, record func() (*planRef, error)) (*planRef, error) {
	if t.last == nil || k != t.lastKey {
		p := t.pairs[k]
		if p == nil {
			p = &planPair{}
			for i := range p.two {
				r, err := record()
				if err != nil {
					return nil, err
				}
				p.two[i] = r
			}
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

// notRaces returns the first problem of a report that is not a race, or
// nil. Races are let through: the verifier takes a put_signal's source as
// read only at a flush, not when the target has seen the signal (which
// comes after the data), so it reports in-place schedules whose peers
// overwrite a source after its signal.
func notRaces(rep *verify.Report) *verify.Problem {
	for i := range rep.Problems {
		if rep.Problems[i].Kind != "race" {
			return &rep.Problems[i]
		}
	}
	return nil
}

// reduceOpts is the options table of a call: {type, op, scratch}.
func reduceOpts(L *lua.LState, call ReduceCall) *lua.LTable {
	opts := L.NewTable()
	opts.RawSetString("type", lua.LString(call.Type.String()))
	opts.RawSetString("op", lua.LString(call.Op.String()))
	opts.RawSetString("scratch", lua.LNumber(call.Scratch))
	return opts
}
