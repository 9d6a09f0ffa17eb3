package window

import (
	"context"
	"fmt"
	"testing"

	"github.com/luacoll/luacoll/kernels"
	"github.com/luacoll/luacoll/transport"
	"github.com/luacoll/luacoll/transport/inproc"
	"github.com/luacoll/luacoll/transport/shm"
)

// benchRank makes a one-rank job (the window maps itself) for benchmarks.
func benchRank(b *testing.B) (*Rank, func()) {
	b.Helper()
	g := inproc.NewGroup(1)
	m := g.Member(0)
	be := shm.NewHostBackend(fmt.Sprintf("bench%d", b.N))
	abort := transport.NewAbort()
	topo, err := transport.Discover(context.Background(), m, be.Identity(), be.GPUPeer, "")
	if err != nil {
		b.Fatal(err)
	}
	st, _ := be.NewStream(abort)
	return &Rank{Ex: m, Topo: topo, Backend: be, Stream: st, Abort: abort}, func() { st.Close(); be.Close() }
}

// BenchmarkPut measures a put into a window and, as its ceiling, a plain
// copy of the same size in the same run (see the copy/ sub-benchmarks).
func BenchmarkPut(b *testing.B) {
	for _, n := range []uint64{1 << 10, 1 << 20, 16 << 20} {
		b.Run(fmt.Sprintf("put/%d", n), func(b *testing.B) {
			r, done := benchRank(b)
			defer done()
			ctx := context.Background()
			o := DefaultOptions()
			o.Bytes = n
			w, err := r.NewWindow(ctx, o)
			if err != nil {
				b.Fatal(err)
			}
			src, _ := r.NewBuffer(n)
			b.SetBytes(int64(n))
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if err := w.Put(Transfer{Peer: 0, Local: src, N: n}); err != nil {
					b.Fatal(err)
				}
				if err := w.Sync(ctx); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			_ = src.Free()
			_ = w.Free(ctx)
		})
		b.Run(fmt.Sprintf("copy/%d", n), func(b *testing.B) {
			dst, src := make([]byte, n), make([]byte, n)
			b.SetBytes(int64(n))
			for i := 0; i < b.N; i++ {
				copy(dst, src)
			}
		})
	}
}

// BenchmarkSignalWait measures a signal to oneself followed by a wait and
// a sync: the stream's round trip without a peer.
func BenchmarkSignalWait(b *testing.B) {
	r, done := benchRank(b)
	defer done()
	ctx := context.Background()
	o := DefaultOptions()
	o.Bytes = 64
	w, err := r.NewWindow(ctx, o)
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 1; i <= b.N; i++ {
		_ = w.Signal(0, Sig{ID: 0, Value: 1})
		_ = w.WaitSignal(0, transport.CmpGe, uint64(i))
		if err := w.Sync(ctx); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	_ = w.Free(ctx)
}

// BenchmarkReduceStep is the host backend's share of a one-shot
// all-reduce step without a peer (the rank is its own peer): a 1 KiB
// put_signal into staging, the wait for it and a 1 KiB f32 sum of the
// staging into the input, b.N times back to back with one sync at the
// end. The peer's latency is left out: this is the per-call software
// cost of the ops a small all-reduce enqueues, and their allocations.
func BenchmarkReduceStep(b *testing.B) {
	const n = 1 << 10
	r, done := benchRank(b)
	defer done()
	ctx := context.Background()
	o := DefaultOptions()
	o.Bytes = 2 * n
	w, err := r.NewWindow(ctx, o)
	if err != nil {
		b.Fatal(err)
	}
	buf := w.Buffer()
	sig := Sig{ID: 0, Value: 1, Op: SigAdd}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 1; i <= b.N; i++ {
		if err := w.PutSignal(Transfer{Peer: 0, PeerOff: n, Local: buf, N: n}, &sig, nil); err != nil {
			b.Fatal(err)
		}
		if err := w.WaitSignalFrom(0, 0, transport.CmpGe, uint64(i)); err != nil {
			b.Fatal(err)
		}
		if err := w.Reduce(Reduction{Dst: buf, Src: buf, SrcOff: n, N: n, Type: kernels.F32, Op: kernels.Sum}); err != nil {
			b.Fatal(err)
		}
	}
	if err := w.Sync(ctx); err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	_ = w.Free(ctx)
}
