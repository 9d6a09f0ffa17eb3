package trace_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/luacoll/luacoll/engine/trace"
	"github.com/luacoll/luacoll/transport"
	"github.com/luacoll/luacoll/transport/inproc"
	"github.com/luacoll/luacoll/transport/shm"
	"github.com/luacoll/luacoll/window"
)

// BenchmarkPut measures a put and a sync into a one-rank window with
// tracing off (the Rank's Trace nil: what every run pays) and on (a
// Recorder writing its part file), in the same run.
func BenchmarkPut(b *testing.B) {
	for _, n := range []uint64{1 << 10, 1 << 20} {
		for _, on := range []bool{false, true} {
			name := fmt.Sprintf("off/%d", n)
			if on {
				name = fmt.Sprintf("on/%d", n)
			}
			b.Run(name, func(b *testing.B) {
				g := inproc.NewGroup(1)
				be := shm.NewHostBackend(fmt.Sprintf("tracebench%d", b.N))
				abort := transport.NewAbort()
				topo, err := transport.Discover(context.Background(), g.Member(0), be.Identity(), be.GPUPeer, "")
				if err != nil {
					b.Fatal(err)
				}
				st, _ := be.NewStream(abort)
				defer st.Close()
				r := &window.Rank{Ex: g.Member(0), Topo: topo, Backend: be, Stream: st, Abort: abort}
				var rec *trace.Recorder
				if on {
					rec, err = trace.Start(trace.Options{Part: filepath.Join(b.TempDir(), "part.json"), Clock: trace.LocalClock()})
					if err != nil {
						b.Fatal(err)
					}
					r.Trace = rec
				}
				ctx := context.Background()
				o := window.DefaultOptions()
				o.Bytes = n
				w, err := r.NewWindow(ctx, o)
				if err != nil {
					b.Fatal(err)
				}
				src, _ := r.NewBuffer(n)
				b.SetBytes(int64(n))
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					if err := w.Put(window.Transfer{Peer: 0, Local: src, N: n}); err != nil {
						b.Fatal(err)
					}
					if err := w.Sync(ctx); err != nil {
						b.Fatal(err)
					}
				}
				b.StopTimer()
				if rec != nil {
					r.Trace = nil
					if err := rec.Close(nil); err != nil {
						b.Fatal(err)
					}
				}
				_ = src.Free()
				_ = w.Free(ctx)
			})
		}
	}
}
