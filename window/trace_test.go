package window

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/luacoll/luacoll/transport"
)

var update = flag.Bool("update", false, "rewrite the golden traces in testdata/traces")

// traceStream records every stream operation, with addresses named by the
// region they fall in, then forwards it.
type traceStream struct {
	transport.Stream
	mu    sync.Mutex
	lines []string
	names []named
}

type named struct {
	base transport.Addr
	size uint64
	name string
}

func (t *traceStream) name(a transport.Addr) string {
	for _, n := range t.names {
		if a >= n.base && uint64(a-n.base) < n.size {
			return fmt.Sprintf("%s+%d", n.name, uint64(a-n.base))
		}
	}
	return "?"
}

func (t *traceStream) log(format string, args ...any) {
	t.mu.Lock()
	t.lines = append(t.lines, fmt.Sprintf(format, args...))
	t.mu.Unlock()
}

func (t *traceStream) Copy(dst, src transport.Addr, n uint64) {
	t.log("copy %s <- %s, %d bytes", t.name(dst), t.name(src), n)
	t.Stream.Copy(dst, src, n)
}

func (t *traceStream) Store64(dst transport.Addr, v uint64) {
	t.log("store %s = %d", t.name(dst), v)
	t.Stream.Store64(dst, v)
}

func (t *traceStream) Add64(dst transport.Addr, v uint64) {
	t.log("add %s += %d", t.name(dst), v)
	t.Stream.Add64(dst, v)
}

func (t *traceStream) Wait(w transport.WaitSpec) {
	slots := make([]string, len(w.Slots))
	for i, s := range w.Slots {
		slots[i] = t.name(s)
	}
	mode := "sum"
	if w.Mode == transport.WaitEach {
		mode = "each"
	}
	t.log("wait %s(%s) %s %d", mode, strings.Join(slots, ", "), w.Cmp, w.Value)
	t.Stream.Wait(w)
}

// pairBarrier is a pairwise barrier of ranks 0 and 1 (rank 2 sits out).
func pairBarrier(w *Window, me int) error {
	if me > 1 {
		return nil
	}
	return w.BarrierPeer(1-me, 0)
}

// TestGoldenTraces turns a fixed sequence of window calls into stream
// operations on every rank and compares them with testdata/traces.
func TestGoldenTraces(t *testing.T) {
	const n = 3
	traces := make([]*traceStream, n)
	job(t, n, func(r *Rank) error {
		ctx := context.Background()
		i := r.ID()
		ts := &traceStream{Stream: r.Stream}
		traces[i] = ts
		r.Stream = ts
		o := DefaultOptions()
		o.Bytes, o.Signals, o.Counters, o.Barriers = 256, 2, 2, 2
		w, err := r.NewWindow(ctx, o)
		if err != nil {
			return err
		}
		src, _ := r.NewBuffer(64)
		defer src.Free()
		l := w.lay
		for p := 0; p < n; p++ {
			ts.names = append(ts.names, named{w.reg.Peers[p], l.Total, fmt.Sprintf("w0@r%d", p)})
		}
		ts.names = append(ts.names, named{src.base, 64, "buf"})
		sort.Slice(ts.names, func(a, b int) bool { return ts.names[a].base < ts.names[b].base })
		right, left := (i+1)%n, (i+n-1)%n
		steps := []error{
			w.PutSignal(Transfer{Peer: right, PeerOff: 64, Local: src, N: 64}, &Sig{ID: 1, Value: 1}, nil),
			w.WaitSignalFrom(left, 1, transport.CmpGe, 1),
			w.PutSignal(Transfer{Peer: left, PeerOff: 128, Local: src, LocalOff: 8, N: 16}, &Sig{ID: 0, Value: 5, Op: SigSet}, &Ctr{ID: 1, Value: 1}),
			w.WaitCounter(left, 1, transport.CmpEq, 1),
			w.SignalAll(Sig{ID: 0, Value: 2}),
			w.WaitSignal(0, transport.CmpGe, 5+2*(n-1)),
			w.Barrier(1),
			pairBarrier(w, i),
			w.Get(Transfer{Peer: right, PeerOff: 64, Local: src, N: 32}),
		}
		for k, e := range steps {
			if e != nil {
				return fmt.Errorf("step %d: %w", k, e)
			}
		}
		if err := w.Sync(ctx); err != nil {
			return err
		}
		return w.Free(ctx)
	})
	if t.Failed() {
		return
	}
	for i, ts := range traces {
		got := strings.Join(ts.lines, "\n") + "\n"
		path := filepath.Join("..", "testdata", "traces", fmt.Sprintf("window-rank%d.txt", i))
		if *update {
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%v (run go test ./window -run TestGoldenTraces -update)", err)
		}
		if string(want) != got {
			t.Errorf("rank %d trace differs from %s:\n--- got\n%s--- want\n%s", i, path, got, want)
		}
	}
}
