package plan

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/luacoll/luacoll/engine"
	"github.com/luacoll/luacoll/engine/enginetest"
	"github.com/luacoll/luacoll/kernels"
	"github.com/luacoll/luacoll/transport"
	"github.com/luacoll/luacoll/transport/gpu"
	"github.com/luacoll/luacoll/window"
)

// fakePlanStream records the device-mode launches and table rewrites of
// plans (only RunPlan and RewritePlan are called in device mode).
type fakePlanStream struct {
	gpu.PlanStream
	runs     [][]kernels.PlanMove // the moves of each launch (nil: none)
	rep0s    []uint64
	rewrites int
}

func (f *fakePlanStream) RunPlan(_ *gpu.DevicePlan, rep0, _ uint64, _ time.Duration, _ bool, moves []kernels.PlanMove) {
	f.runs = append(f.runs, append([]kernels.PlanMove(nil), moves...))
	f.rep0s = append(f.rep0s, rep0)
}

func (f *fakePlanStream) RewritePlan(*gpu.DevicePlan, []kernels.PlanStep) error {
	f.rewrites++
	return nil
}

func fakeDevicePlan([]kernels.PlanStep, func(int, uint64, uint64, error) error) (*gpu.DevicePlan, error) {
	return &gpu.DevicePlan{}, nil
}

// Two device-mode plans run in turn carry their moving values with each
// launch and never rewrite their tables: the wait's target follows both
// plans' replays (1, 2, 3, 4). A value too large to go with a launch, or
// a plan of more steps than the interpreter caches, falls back to a
// rewrite when something else moved its slots, and only then.
func TestRunDeviceMovesOrRewrite(t *testing.T) {
	const n = 2
	errs := enginetest.WithComms(t, n, engine.Options{Device: "host", Timeout: 10 * time.Second}, func(r int, c *engine.Comm) error {
		ctx := context.Background()
		w, err := c.NewWindow(ctx, "plan.moves", window.Options{Bytes: 4096, Signals: 2, Counters: 1, Barriers: 1})
		if err != nil {
			return err
		}
		defer func() { _ = c.FreeWindow(ctx, w) }()
		led := &Ledger{}
		shape := ShapeOf(n, w.Options(), nil)
		// record makes a plan of every rank's put_signal, then extra
		// signals, the wait for the peer's (the k-th recorded) and a barrier.
		record := func(k uint64, extra int, s *fakePlanStream) (*Plan, error) {
			lists := make([]List, n)
			for q := range lists {
				ops := []Op{{Kind: PutSignal, Peer: 1 - q, Off: 64, Buf: WindowBuf, N: 64, Sig: 0, SigValue: 1, SigOp: window.SigAdd}}
				for range extra {
					ops = append(ops, Op{Kind: Signal, Peer: 1 - q, Sig: 1, SigValue: 1, SigOp: window.SigAdd})
				}
				ops = append(ops, Op{Kind: WaitSignalFrom, Peer: 1 - q, Sig: 0, Cmp: transport.CmpGe, Value: k},
					Op{Kind: Barrier, Bar: 0})
				lists[q] = List{Window: w.ID(), Shape: shape, Ops: ops}
			}
			led.Record(lists, r)
			p, err := New(w, []*window.Buffer{w.Buffer()}, lists, r, led)
			if err != nil {
				return nil, err
			}
			return p, p.useDeviceOn(s, fakeDevicePlan, false, modeDevice)
		}
		waitMove := func(p *Plan, moves []kernels.PlanMove) (uint64, error) {
			for j, m := range p.dev.moving {
				if m.op == len(p.ops)-2 && m.bar < 0 && j < len(moves) {
					return moves[j].Value, nil
				}
			}
			return 0, fmt.Errorf("no move for the wait in %v", moves)
		}
		s := &fakePlanStream{}
		a, err := record(1, 0, s)
		if err != nil {
			return err
		}
		b, err := record(2, 0, s)
		if err != nil {
			return err
		}
		if !a.dev.launchMoves || len(a.dev.moving) != 3 {
			return fmt.Errorf("launch moves %v, %d moving steps: want moves and 3 (the wait, the barrier's store and wait)", a.dev.launchMoves, len(a.dev.moving))
		}
		for i, p := range []*Plan{a, b, a, b} {
			if err := p.Run(1); err != nil {
				return err
			}
			v, err := waitMove(p, s.runs[i])
			if err != nil {
				return err
			}
			if v != uint64(i+1) || s.rep0s[i] != 0 || len(s.runs[i]) != 3 {
				return fmt.Errorf("call %d: the wait's target %d, rep0 %d, %d moves: want %d, 0, 3", i+1, v, s.rep0s[i], len(s.runs[i]), i+1)
			}
		}
		if s.rewrites != 0 {
			return fmt.Errorf("%d rewrites of plans in turn: want none", s.rewrites)
		}
		// A failure of a's wait reported after both of a's launches names
		// the replay whose target it is (a's replays 1 and 2 waited for 1
		// and 3); a target none of a's launches had names none.
		step := -1
		for _, m := range a.dev.moving {
			if m.op == len(a.ops)-2 && m.bar < 0 {
				step = m.step
			}
		}
		fail := a.deviceFailure(a.dev)
		for target, want := range map[uint64]string{1: ", replay 1,", 3: ", replay 2,", 2: ""} {
			msg := fail(step, 0, target, errors.New("timeout")).Error()
			if want != "" && !strings.Contains(msg, want) || want == "" && strings.Contains(msg, "replay") {
				return fmt.Errorf("a failure with target %d: %q, want it to name %q", target, msg, want)
			}
		}
		// Targets past what a launch takes: the table is rewritten once,
		// then a's own replays need none.
		for i := range led.Replayed {
			led.Replayed[i] += kernels.PlanMoveMax
		}
		for range 2 {
			if err := a.Run(1); err != nil {
				return err
			}
		}
		if last := s.runs[len(s.runs)-2:]; s.rewrites != 1 || last[0] != nil || last[1] != nil {
			return fmt.Errorf("values too large: %d rewrites, moves %v: want 1 and none", s.rewrites, last)
		}
		// More steps than the interpreter caches: plans in turn rewrite.
		s2 := &fakePlanStream{}
		big1, err := record(1, kernels.PlanCache, s2)
		if err != nil {
			return err
		}
		big2, err := record(2, kernels.PlanCache, s2)
		if err != nil {
			return err
		}
		for _, p := range []*Plan{big1, big2, big1} {
			if err := p.Run(1); err != nil {
				return err
			}
		}
		if big1.dev.launchMoves || s2.rewrites < 2 || s2.runs[2] != nil {
			return fmt.Errorf("%d steps: launch moves %v, %d rewrites, moves %v: want none, 2 rewrites or more", len(big1.dev.steps), big1.dev.launchMoves, s2.rewrites, s2.runs[2])
		}
		return nil
	})
	for r, err := range errs {
		if err != nil {
			t.Errorf("rank %d: %v", r, err)
		}
	}
}

// A device-mode plan whose widest step is wide enough spreads over
// several blocks: its grid steps go where blocks could meet each other's
// bytes, and the moving values follow their steps (each names a wait or a
// store, never a grid step).
func TestSpreadMovesFollowSteps(t *testing.T) {
	const n, size = 2, 65536
	errs := enginetest.WithComms(t, n, engine.Options{Device: "host", Timeout: 10 * time.Second}, func(r int, c *engine.Comm) error {
		ctx := context.Background()
		w, err := c.NewWindow(ctx, "plan.spread", window.Options{Bytes: 4 * size, Signals: 2, Counters: 1, Barriers: 1})
		if err != nil {
			return err
		}
		defer func() { _ = c.FreeWindow(ctx, w) }()
		led := &Ledger{}
		lists := make([]List, n)
		for q := range lists {
			// A fill of the source, its put with a signal, the wait for
			// the peer's, a barrier: the put reads what the fill wrote
			// (cut another way), so a grid step comes between them.
			ops := []Op{{Kind: Fill, Buf: WindowBuf, Off: 0, N: size, Value: 7},
				{Kind: PutSignal, Peer: 1 - q, Off: size, Buf: WindowBuf, BufOff: 0, N: size, Sig: 0, SigValue: 1, SigOp: window.SigAdd},
				{Kind: WaitSignalFrom, Peer: 1 - q, Sig: 0, Cmp: transport.CmpGe, Value: 1},
				{Kind: Barrier, Bar: 0}}
			lists[q] = List{Window: w.ID(), Shape: ShapeOf(n, w.Options(), nil), Ops: ops}
		}
		led.Record(lists, r)
		p, err := New(w, []*window.Buffer{w.Buffer()}, lists, r, led)
		if err != nil {
			return err
		}
		if err := p.useDeviceOn(&fakePlanStream{}, fakeDevicePlan, false, modeDevice); err != nil {
			return err
		}
		d := p.dev
		if d.blocks != kernels.PlanSpreadBlocks {
			return fmt.Errorf("spread over %d blocks, want %d", d.blocks, kernels.PlanSpreadBlocks)
		}
		grids := 0
		for _, s := range d.steps {
			if s.Kind == kernels.StepGrid {
				grids++
			}
		}
		if grids == 0 {
			return fmt.Errorf("no grid step in %+v", d.steps)
		}
		for _, m := range d.moving {
			if k := d.steps[m.step].Kind; k != kernels.StepWait && k != kernels.StepStore {
				return fmt.Errorf("moving value of op %d at step %d, a step of kind %d", m.op, m.step, k)
			}
		}
		return nil
	})
	for r, err := range errs {
		if err != nil {
			t.Errorf("rank %d: %v", r, err)
		}
	}
}
