package plan

import (
	"context"
	"testing"

	"github.com/luacoll/luacoll/engine"
	"github.com/luacoll/luacoll/engine/enginetest"
	"github.com/luacoll/luacoll/kernels"
	"github.com/luacoll/luacoll/transport"
	"github.com/luacoll/luacoll/window"
)

// BenchmarkReplayReduceStep replays, one replay a call as bench allreduce
// --plan does, the ops of a small one-shot all-reduce step on a one-rank
// host job (the rank its own peer): a 1 KiB put_signal into staging, the
// wait for it and a 1 KiB f32 sum of the staging into the input. The
// peer's latency is left out: this is the replay's software cost per
// call, and its allocations.
func BenchmarkReplayReduceStep(b *testing.B) {
	const n = 1 << 10
	errs := enginetest.WithComms(b, 1, engine.Options{}, func(_ int, c *engine.Comm) error {
		ctx := context.Background()
		w, err := c.NewWindow(ctx, "bench", window.Options{Bytes: 2 * n, Signals: 1, Counters: 1, Barriers: 1})
		if err != nil {
			return err
		}
		defer func() { _ = c.FreeWindow(ctx, w) }()
		l := List{Window: w.ID(), Shape: ShapeOf(1, w.Options(), nil)}
		l.Ops = []Op{
			{Kind: PutSignal, Peer: 0, Off: n, Buf: 0, N: n, SigValue: 1, SigOp: window.SigAdd},
			{Kind: WaitSignalFrom, Peer: 0, Cmp: transport.CmpGe, Value: 1},
			{Kind: Reduce, Buf: 0, Src: 0, SrcOff: n, N: n, DType: kernels.F32, RedOp: kernels.Sum},
		}
		lists := []List{l}
		led := &Ledger{}
		led.Record(lists, 0)
		p, err := New(w, []*window.Buffer{w.Buffer()}, lists, 0, led)
		if err != nil {
			return err
		}
		b.ReportAllocs()
		b.ResetTimer()
		for b.Loop() {
			if err := p.Run(1); err != nil {
				return err
			}
		}
		b.StopTimer()
		return w.Sync(ctx)
	})
	for _, err := range errs {
		if err != nil {
			b.Fatal(err)
		}
	}
}
