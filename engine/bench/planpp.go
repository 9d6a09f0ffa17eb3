package bench

import (
	"context"
	"time"

	"github.com/luacoll/luacoll/engine"
	"github.com/luacoll/luacoll/engine/plan"
	"github.com/luacoll/luacoll/transport"
	"github.com/luacoll/luacoll/window"
)

// benchPlanPingPong times the 8-byte put_signal -> wait ping-pong between
// ranks 0 and 1 as a plan in device mode (one kernel runs every replay):
// the hop a researcher's schedule pays there. ok is false where device
// mode cannot run (no CUDA, network peers).
//
// With lines (the default where the plan's put_signals can go in them,
// plan.Lines), each hop is one 16-byte store; without, a put and a
// release.
func benchPlanPingPong(ctx context.Context, c *engine.Comm, iters int, lines bool) (row BenchRow, ok bool, err error) {
	w, err := c.NewWindow(ctx, "bench.planpingpong", window.Options{Bytes: 64, Signals: 1, Counters: 1, Barriers: 1, Path: "auto"})
	if err != nil {
		return row, false, err
	}
	defer func() {
		if ferr := c.FreeWindow(ctx, w); err == nil {
			err = ferr
		}
	}()
	src, err := c.NewBuffer(8)
	if err != nil {
		return row, false, err
	}
	defer func() { _ = src.Free() }()
	if err := src.Fill(transport.FillRandU32, payloadSeed(c.RankID())); err != nil {
		return row, false, err
	}
	me, n := c.RankID(), c.Size()
	shape := plan.ShapeOf(n, w.Options(), []uint64{8})
	lists := make([]plan.List, n)
	for q := range lists {
		lists[q] = plan.List{Window: w.ID(), Shape: shape}
		if q > 1 {
			continue
		}
		put := plan.Op{Kind: plan.PutSignal, Peer: 1 - q, Buf: 1, N: 8, SigValue: 1, SigOp: window.SigAdd}
		wait := plan.Op{Kind: plan.WaitSignalFrom, Peer: 1 - q, Cmp: transport.CmpGe, Value: 1}
		if q == 0 {
			lists[q].Ops = []plan.Op{put, wait}
		} else {
			lists[q].Ops = []plan.Op{wait, put}
		}
	}
	led := &plan.Ledger{}
	led.Record(lists, me)
	p, err := plan.New(w, []*window.Buffer{w.Buffer(), src}, lists, me, led)
	if err != nil {
		return row, false, err
	}
	name := "plan put_signal ping-pong (device mode)"
	if !lines {
		name = "plan put_signal ping-pong (device mode, no lines)"
	} else if _, most := plan.Lines(lists, 8); most > 0 && c.Backend.Name() != "host" && !noDeviceLoops(c) {
		lw, err := c.NewWindow(ctx, "bench.planpingpong.lines", window.Options{Bytes: uint64(most) * plan.LineSize, Signals: 1, Counters: 1, Barriers: 1, Path: "auto"})
		if err != nil {
			return row, false, err
		}
		defer func() {
			if ferr := c.FreeWindow(ctx, lw); err == nil {
				err = ferr
			}
		}()
		if err := p.UseLines(lw, 8); err != nil {
			return row, false, err
		}
	}
	derr := p.UseDevice()
	// Every rank must agree before anything runs.
	bad := 0
	if derr != nil {
		bad = 1
	}
	if sum, err := c.SumInt(ctx, "bench.planpingpong.mode", bad); err != nil || sum > 0 {
		_ = p.Free()
		return row, false, err
	}
	defer func() { _ = p.Free() }()
	if err := barrierSync(ctx, w); err != nil {
		return row, true, err
	}
	if err := p.Run(100); err != nil {
		return row, true, err
	}
	if err := barrierSync(ctx, w); err != nil {
		return row, true, err
	}
	m0 := c.Rank.Stream.Mark()
	if err := p.Run(iters); err != nil {
		return row, true, err
	}
	m1 := c.Rank.Stream.Mark()
	if err := w.Sync(ctx); err != nil {
		return row, true, err
	}
	var d time.Duration
	if me <= 1 {
		if d, err = m1.Since(m0); err != nil {
			return row, true, err
		}
	}
	wrong, err := checkPayload(ctx, c, w, "bench.planpingpong.check", true)
	if err != nil {
		return row, true, err
	}
	return BenchRow{Name: name, Bytes: 8, Seconds: d.Seconds() / float64(iters) / 2, Wrong: wrong}, true, nil
}
