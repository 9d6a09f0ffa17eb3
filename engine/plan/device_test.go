package plan

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/luacoll/luacoll/cuda"
	"github.com/luacoll/luacoll/engine"
	"github.com/luacoll/luacoll/engine/enginetest"
	"github.com/luacoll/luacoll/kernels"
	"github.com/luacoll/luacoll/window"
)

// Reductions compile into the interpreter's reduce steps: dst and src
// where the rank's buffers and its window are (a reduce_from reads the
// peer's window as mapped here), the type and operator in the value; an
// empty one has no step. The steps are those the host backend's windows
// would give the interpreter (its addresses are host memory, but the
// lowering is the same).
func TestDeviceStepsReduce(t *testing.T) {
	const n = 2
	errs := enginetest.WithComms(t, n, engine.Options{Device: "host", Timeout: 10 * time.Second}, func(r int, c *engine.Comm) error {
		ctx := context.Background()
		w, err := c.NewWindow(ctx, "plan.devreduce", window.Options{Bytes: 4096, Signals: 2, Counters: 1, Barriers: 1})
		if err != nil {
			return err
		}
		defer func() { _ = c.FreeWindow(ctx, w) }()
		b, err := c.NewBuffer(1024)
		if err != nil {
			return err
		}
		shape := ShapeOf(n, w.Options(), []uint64{1024})
		lists := make([]List, n)
		for q := range lists {
			lists[q] = List{Window: w.ID(), Shape: shape, Ops: []Op{
				{Kind: Reduce, Buf: WindowBuf, BufOff: 64, Src: 1, SrcOff: 128, N: 256, DType: kernels.BF16, RedOp: kernels.Max},
				{Kind: ReduceFrom, Peer: 1 - q, Off: 512, Buf: 1, BufOff: 8, N: 64, DType: kernels.U64, RedOp: kernels.Prod},
				{Kind: Reduce, Buf: 1, Src: WindowBuf, SrcOff: 1024, N: 0, DType: kernels.F32, RedOp: kernels.Sum},
				{Kind: Reduce, Buf: 1, BufOff: 512, Src: WindowBuf, SrcOff: 2048, N: 12, DType: kernels.I32, RedOp: kernels.Min},
			}}
		}
		led := &Ledger{}
		led.Record(lists, r)
		p, err := New(w, []*window.Buffer{w.Buffer(), b}, lists, r, led)
		if err != nil {
			return err
		}
		d := &device{}
		if err := p.deviceSteps(d); err != nil {
			return err
		}
		wa, err := w.Buffer().Addr()
		if err != nil {
			return err
		}
		ba, err := b.Addr()
		if err != nil {
			return err
		}
		peer := cuda.DevicePtr(w.Raw().Data(1-r, 512))
		if peer == 0 || peer == cuda.DevicePtr(w.Raw().Data(r, 512)) {
			return fmt.Errorf("the peer's window at %#x", uint64(peer))
		}
		want := []kernels.PlanStep{
			{Kind: kernels.StepReduce, Op: 0, Dst: cuda.DevicePtr(wa.Add(64)), Src: cuda.DevicePtr(ba.Add(128)), N: 256,
				Value: kernels.ReduceStepValue(kernels.BF16, kernels.Max)},
			{Kind: kernels.StepReduce, Op: 1, Dst: cuda.DevicePtr(ba.Add(8)), Src: peer, N: 64,
				Value: kernels.ReduceStepValue(kernels.U64, kernels.Prod)},
			{Kind: kernels.StepReduce, Op: 3, Dst: cuda.DevicePtr(ba.Add(512)), Src: cuda.DevicePtr(wa.Add(2048)), N: 12,
				Value: kernels.ReduceStepValue(kernels.I32, kernels.Min)},
		}
		if len(d.steps) != len(want) {
			return fmt.Errorf("%d steps: %+v", len(d.steps), d.steps)
		}
		for i, st := range d.steps {
			if st != want[i] {
				return fmt.Errorf("step %d: %+v, want %+v", i, st, want[i])
			}
			if err := st.Check(); err != nil {
				return fmt.Errorf("step %d: %w", i, err)
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

// Device mode needs the CUDA backend: on the host backend UseDevice says
// so, wrapping ErrNoDevice, for a plan with reductions as for any other.
func TestUseDeviceNeedsCUDA(t *testing.T) {
	errs := enginetest.WithComms(t, 1, engine.Options{Device: "host", Timeout: 10 * time.Second}, func(r int, c *engine.Comm) error {
		ctx := context.Background()
		w, err := c.NewWindow(ctx, "plan.devreduce1", window.Options{Bytes: 1024, Signals: 1, Counters: 1, Barriers: 1})
		if err != nil {
			return err
		}
		defer func() { _ = c.FreeWindow(ctx, w) }()
		lists := []List{{Window: w.ID(), Shape: ShapeOf(1, w.Options(), nil), Ops: []Op{
			{Kind: Reduce, Buf: WindowBuf, Src: WindowBuf, SrcOff: 512, N: 64, DType: kernels.F16, RedOp: kernels.Sum},
		}}}
		led := &Ledger{}
		led.Record(lists, 0)
		p, err := New(w, []*window.Buffer{w.Buffer()}, lists, 0, led)
		if err != nil {
			return err
		}
		if err := p.UseDevice(); !errors.Is(err, ErrNoDevice) || err.Error() != "device mode is not available: it needs the CUDA backend" {
			return fmt.Errorf("UseDevice: %v", err)
		}
		return nil
	})
	if errs[0] != nil {
		t.Fatal(errs[0])
	}
}
