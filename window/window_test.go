package window

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/luacoll/luacoll/transport"
	"github.com/luacoll/luacoll/transport/inproc"
	"github.com/luacoll/luacoll/transport/shm"
)

// job runs fn on n goroutine ranks, each with its own host backend and
// stream, and fails the test with every rank's error.
func job(t *testing.T, n int, fn func(r *Rank) error) {
	t.Helper()
	jobWith(t, n, jobConfig{}, fn)
}

// jobConfig varies a job: override gives each rank its OverrideEnv value,
// network its network (closed when the rank's function returns).
type jobConfig struct {
	override func(rank int) string
	network  func(rank, size int) transport.Network
}

func jobWith(t *testing.T, n int, cfg jobConfig, fn func(r *Rank) error) {
	t.Helper()
	g := inproc.NewGroup(n)
	jobID := fmt.Sprintf("test%d", time.Now().UnixNano())
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			m := g.Member(i)
			be := shm.NewHostBackend(jobID)
			defer be.Close()
			abort := transport.NewAbort()
			override := ""
			if cfg.override != nil {
				override = cfg.override(i)
			}
			topo, err := transport.Discover(ctx, m, be.Identity(), be.GPUPeer, override)
			if err != nil {
				errs[i] = err
				return
			}
			st, _ := be.NewStream(abort)
			defer st.Close()
			r := &Rank{Ex: m, Topo: topo, Backend: be, Stream: st, Abort: abort}
			if cfg.network != nil {
				r.Net = cfg.network(i, n)
				defer func() {
					if c, ok := r.Net.(interface{ Close() error }); ok {
						if err := c.Close(); err != nil && errs[i] == nil {
							errs[i] = err
						}
					}
				}()
			}
			errs[i] = fn(r)
		}(i)
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("rank %d: %v", i, err)
		}
	}
	for _, m := range transport.MappedSegments(jobID) {
		t.Errorf("segment still mapped: %s", m)
	}
}

func opts(bytes uint64) Options {
	o := DefaultOptions()
	o.Bytes = bytes
	o.Timeout = 5 * time.Second
	return o
}

func TestPutSignalRing(t *testing.T) {
	for _, n := range []int{1, 2, 4, 8} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			job(t, n, func(r *Rank) error { return putSignalRing(r, n) })
		})
	}
}

// putSignalRing: every rank puts a chunk with a signal and a counter into
// every rank (itself too), and checks what arrived.
func putSignalRing(r *Rank, n int) error {
	ctx := context.Background()
	const chunk = 1000
	w, err := r.NewWindow(ctx, opts(uint64(chunk*n)))
	if err != nil {
		return err
	}
	src, err := r.NewBuffer(chunk)
	if err != nil {
		return err
	}
	defer src.Free()
	if err := src.Fill(transport.FillIotaU32, uint64(r.ID()*1000)); err != nil {
		return err
	}
	me := r.ID()
	for p := 0; p < n; p++ {
		if err := w.PutSignal(Transfer{Peer: p, PeerOff: uint64(me * chunk), Local: src, N: chunk},
			&Sig{ID: 0, Value: 1}, &Ctr{ID: 1, Value: 5}); err != nil {
			return err
		}
	}
	if err := w.WaitSignal(0, transport.CmpGe, uint64(n)); err != nil {
		return err
	}
	if err := w.WaitCounter((me+1)%n, 1, transport.CmpEq, 5); err != nil {
		return err
	}
	if err := w.Sync(ctx); err != nil {
		return err
	}
	want := make([]byte, chunk)
	for p := 0; p < n; p++ {
		transport.FillIota(want, uint32(p*1000))
		got, err := w.Buffer().Read(uint64(p*chunk), chunk)
		if err != nil {
			return err
		}
		if string(got) != string(want) {
			return fmt.Errorf("chunk from rank %d differs", p)
		}
		v, err := w.ReadSignalFrom(p, 0)
		if err != nil || v != 1 {
			return fmt.Errorf("signal from %d = %d, %v; want 1", p, v, err)
		}
	}
	if s, _ := w.ReadSignal(0); s != uint64(n) {
		return fmt.Errorf("signal sum %d, want %d", s, n)
	}
	return w.Free(ctx)
}

func TestBarrierReuse(t *testing.T) {
	job(t, 4, func(r *Rank) error { return barrierReuse(r, 200) })
}

// barrierReuse: rounds of signals to rank 0 and barriers on alternating
// slots, with pairwise barriers between them.
func barrierReuse(r *Rank, rounds int) error {
	ctx := context.Background()
	w, err := r.NewWindow(ctx, opts(64))
	if err != nil {
		return err
	}
	// Each round: everyone adds to rank 0's counter-like slot, then a barrier.
	for round := 1; round <= rounds; round++ {
		if err := w.Signal(0, Sig{ID: 1, Value: 1}); err != nil {
			return err
		}
		if err := w.Barrier(round % 2); err != nil {
			return err
		}
		if err := w.Sync(ctx); err != nil {
			return err
		}
		if r.ID() == 0 {
			if v, _ := w.ReadSignal(1); v < uint64(4*round) {
				return fmt.Errorf("round %d: barrier passed with %d signals, want >= %d", round, v, 4*round)
			}
		}
		if err := w.BarrierPeer(r.ID()^1, 3); err != nil {
			return err
		}
	}
	return w.Free(ctx)
}

func TestSetAndResetSignals(t *testing.T) {
	job(t, 2, setAndResetSignals)
}

// setAndResetSignals: set then add on one slot, reset the inbox.
func setAndResetSignals(r *Rank) error {
	ctx := context.Background()
	w, err := r.NewWindow(ctx, opts(64))
	if err != nil {
		return err
	}
	peer := 1 - r.ID()
	_ = w.Signal(peer, Sig{ID: 2, Value: 7, Op: SigSet})
	_ = w.Signal(peer, Sig{ID: 2, Value: 3})
	_ = w.WaitSignalFrom(peer, 2, transport.CmpEq, 10)
	_ = w.Barrier(0)
	_ = w.ResetSignals()
	_ = w.Barrier(0)
	if err := w.Sync(ctx); err != nil {
		return err
	}
	if v, _ := w.ReadSignal(2); v != 0 {
		return fmt.Errorf("after reset: %d", v)
	}
	return w.Free(ctx)
}

func TestWaitTimeoutNamesEverything(t *testing.T) {
	job(t, 2, func(r *Rank) error {
		ctx := context.Background()
		o := opts(64)
		o.Timeout = 100 * time.Millisecond
		w, err := r.NewWindow(ctx, o)
		if err != nil {
			return err
		}
		r.Site = func() Site { return Site{File: "test.lua", Line: 7} }
		_ = w.WaitSignalFrom(1-r.ID(), 3, transport.CmpGe, 2)
		err = w.Sync(ctx)
		var we *WaitError
		if !errors.As(err, &we) {
			return fmt.Errorf("want a WaitError, got %v", err)
		}
		for _, part := range []string{fmt.Sprintf("rank %d", r.ID()), "sig 3", ">= 2", "timed out", "test.lua:7", "last value seen 0"} {
			if !strings.Contains(err.Error(), part) {
				return fmt.Errorf("error %q lacks %q", err, part)
			}
		}
		// The window keeps working after the error was raised.
		_ = w.Signal(1-r.ID(), Sig{ID: 0, Value: 1})
		_ = w.WaitSignal(0, transport.CmpEq, 1)
		if err := w.Sync(ctx); err != nil {
			return err
		}
		return w.Free(ctx)
	})
}

func TestAbortEndsWait(t *testing.T) {
	job(t, 1, func(r *Rank) error {
		ctx := context.Background()
		w, err := r.NewWindow(ctx, opts(64))
		if err != nil {
			return err
		}
		_ = w.WaitSignal(0, transport.CmpGe, 1)
		go func() {
			time.Sleep(50 * time.Millisecond)
			r.Abort.Set(errors.New("rank 3 died"))
		}()
		start := time.Now()
		err = w.Sync(ctx)
		if err == nil || !strings.Contains(err.Error(), "rank 3 died") {
			return fmt.Errorf("want abort error, got %v", err)
		}
		if time.Since(start) > 2*time.Second {
			return fmt.Errorf("abort took %v", time.Since(start))
		}
		w.Release()
		return nil
	})
}

func TestBadArguments(t *testing.T) {
	job(t, 2, func(r *Rank) error {
		ctx := context.Background()
		w, err := r.NewWindow(ctx, opts(100))
		if err != nil {
			return err
		}
		b, _ := r.NewBuffer(50)
		cases := []struct {
			arg string
			err error
		}{
			{"peer", w.Put(Transfer{Peer: 2, Local: b, N: 1})},
			{"peer", w.Put(Transfer{Peer: -1, Local: b, N: 1})},
			{"dst_off", w.Put(Transfer{Peer: 0, PeerOff: 101, Local: b, N: 0})},
			{"n", w.Put(Transfer{Peer: 0, PeerOff: 90, Local: b, N: 11})},
			{"src_off", w.Put(Transfer{Peer: 0, Local: b, LocalOff: 51})},
			{"n", w.Put(Transfer{Peer: 0, Local: b, LocalOff: 10, N: 41})},
			{"src", w.Put(Transfer{Peer: 0, N: 1})},
			{"sig", w.Signal(1, Sig{ID: 8})},
			{"sig", w.WaitSignal(-1, transport.CmpEq, 0)},
			{"ctr", w.WaitCounter(0, 9, transport.CmpEq, 0)},
			{"id", w.Barrier(4)},
			{"dst", w.Get(Transfer{Peer: 0, N: 1})},
			{"src_off", w.Get(Transfer{Peer: 1, PeerOff: 200, Local: b})},
		}
		for i, c := range cases {
			var ae *ArgError
			if !errors.As(c.err, &ae) || ae.Arg != c.arg {
				return fmt.Errorf("case %d: want bad argument %q, got %v", i, c.arg, c.err)
			}
		}
		_ = b.Free()
		var fe *ArgError
		if err := w.Put(Transfer{Peer: 0, Local: b, N: 1}); !errors.As(err, &fe) || !strings.Contains(err.Error(), "freed") {
			return fmt.Errorf("put from freed buffer: %v", err)
		}
		// Nothing was enqueued by the bad calls: the window still works.
		if err := w.Sync(ctx); err != nil {
			return err
		}
		if err := w.Free(ctx); err != nil {
			return err
		}
		var freed *ErrFreed
		if err := w.Barrier(0); !errors.As(err, &freed) {
			return fmt.Errorf("barrier on a freed window: %v", err)
		}
		return nil
	})
}

// Enqueuing signals and waits on the host allocates nothing (no garbage
// to collect in a loop of them, and no fresh pages to fault in).
func TestWaitsAllocateNothing(t *testing.T) {
	job(t, 1, func(r *Rank) error {
		o := DefaultOptions()
		o.Bytes = 64
		w, err := r.NewWindow(context.Background(), o)
		if err != nil {
			return err
		}
		v := uint64(0)
		allocs := testing.AllocsPerRun(200, func() {
			v++
			_ = w.Signal(0, Sig{ID: 0, Value: v, Op: SigSet})
			_ = w.WaitSignalFrom(0, 0, transport.CmpGe, v)
			_ = w.WaitSignal(0, transport.CmpGe, v)
			_ = w.BarrierPeer(0, 1)
			_ = w.Barrier(0)
			_ = w.WaitCounter(0, 0, transport.CmpGe, 0)
		})
		if err := w.Sync(context.Background()); err != nil {
			return err
		}
		if allocs != 0 {
			return fmt.Errorf("%v allocations per round of signals and waits", allocs)
		}
		return w.Free(context.Background())
	})
}

// A view of a window on another stream (OnStream) reaches the same memory
// and peers: ranks alternate rounds of put_signal + barrier between the
// window and its view, run from another goroutine, and the barrier epochs
// stay in step; the rank's own buffers are accepted as the view's sources.
func TestWindowOnStream(t *testing.T) {
	const n, chunk = 3, 256
	job(t, n, func(r *Rank) error {
		ctx := context.Background()
		w, err := r.NewWindow(ctx, opts(uint64(chunk*n)))
		if err != nil {
			return err
		}
		src, err := r.NewBuffer(chunk)
		if err != nil {
			return err
		}
		defer src.Free()
		other, _ := r.Backend.NewStream(r.Abort)
		defer other.Close()
		view := w.Raw().OnStream(other, r.Backend)
		me := r.ID()
		for round := 1; round <= 4; round++ {
			on := w
			if round%2 == 0 {
				on = view
			}
			if err := src.Fill(transport.FillIotaU32, uint64(round*10000+me*1000)); err != nil {
				return err
			}
			errc := make(chan error, 1)
			go func() {
				for p := 0; p < n; p++ {
					if err := on.PutSignal(Transfer{Peer: p, PeerOff: uint64(me * chunk), Local: src, N: chunk}, &Sig{ID: 0, Value: 1}, nil); err != nil {
						errc <- err
						return
					}
				}
				if err := on.WaitSignal(0, transport.CmpGe, uint64(n*round)); err != nil {
					errc <- err
					return
				}
				if err := on.Barrier(0); err != nil {
					errc <- err
					return
				}
				errc <- on.Sync(ctx)
			}()
			if err := <-errc; err != nil {
				return fmt.Errorf("round %d: %w", round, err)
			}
			want := make([]byte, chunk)
			for p := 0; p < n; p++ {
				transport.FillIota(want, uint32(round*10000+p*1000))
				got, err := w.Buffer().Read(uint64(p*chunk), chunk)
				if err != nil {
					return err
				}
				if string(got) != string(want) {
					return fmt.Errorf("round %d: chunk from rank %d differs", round, p)
				}
			}
			// No rank's next round may overwrite what a slower one reads.
			if err := w.Barrier(1); err != nil {
				return err
			}
			if err := w.Sync(ctx); err != nil {
				return err
			}
		}
		return w.Free(ctx)
	})
}

// hostSharedBackend is the host backend whose regions say they are host
// memory a GPU maps (as the CUDA backend's are in a job with network
// peers).
type hostSharedBackend struct{ transport.Backend }

func (b hostSharedBackend) Share(ctx context.Context, ex transport.Exchanger, topo *transport.Topology, size uint64, ipc string) (*transport.Region, error) {
	reg, err := b.Backend.Share(ctx, ex, topo, size, ipc)
	if reg != nil {
		reg.HostShared = true
	}
	return reg, err
}

// A window in host memory a GPU maps reaches the GPU peers of its host
// through shared memory: their class there is shm, data and signals move,
// and w:info's memory says so; the rank's topology is left alone.
func TestHostSharedWindow(t *testing.T) {
	cfg := jobConfig{override: func(rank int) string { return "*=nvl" }}
	jobWith(t, 2, cfg, func(r *Rank) error {
		ctx := context.Background()
		peer := 1 - r.ID()
		if k := r.Topo.Kinds[peer]; k != transport.KindNVL {
			return fmt.Errorf("the override gave %v", k)
		}
		r.Backend = hostSharedBackend{r.Backend}
		w, err := r.NewWindow(ctx, opts(64))
		if err != nil {
			return err
		}
		if kind, _ := w.Transport(peer); kind != "shm" {
			return fmt.Errorf("peer's class %q in the window, want shm", kind)
		}
		if m := w.Memory(); m != "host, mapped by the device" {
			return fmt.Errorf("memory %q", m)
		}
		if r.Topo.Kinds[peer] != transport.KindNVL {
			return errors.New("the rank's topology changed")
		}
		src, err := r.NewBuffer(8)
		if err != nil {
			return err
		}
		defer src.Free()
		if err := src.Fill(transport.FillIotaU32, uint64(r.ID()*10)); err != nil {
			return err
		}
		if err := w.PutSignal(Transfer{Peer: peer, PeerOff: 8 * uint64(r.ID()), Local: src, N: 8}, &Sig{ID: 0, Value: 1}, nil); err != nil {
			return err
		}
		if err := w.WaitSignalFrom(peer, 0, transport.CmpGe, 1); err != nil {
			return err
		}
		if err := w.Sync(ctx); err != nil {
			return err
		}
		got, err := w.Buffer().Read(8*uint64(peer), 4)
		if err != nil {
			return err
		}
		if v := uint32(got[0]) | uint32(got[1])<<8; v != uint32(peer*10) {
			return fmt.Errorf("got %d from rank %d, want %d", v, peer, peer*10)
		}
		return w.Free(ctx)
	})
}

// WaitOpName gives a wait run elsewhere (a plan's kernel) the name the
// window's own errors give it.
func TestWaitOpName(t *testing.T) {
	for _, c := range []struct {
		method   string
		peer, id int
		epoch    uint64
		want     string
	}{
		{"wait_signal", 0, 2, 0, "wait_signal(sig 2, sum over all peers)"},
		{"wait_signal_from", 1, 0, 0, "wait_signal_from(peer 1, sig 0)"},
		{"wait_counter", 3, 1, 0, "wait_counter(peer 3, ctr 1)"},
		{"barrier", 0, 1, 7, "barrier(id 1, epoch 7, every peer)"},
		{"barrier_peer", 2, 0, 5, "barrier_peer(peer 2, id 0, epoch 5)"},
	} {
		if got := WaitOpName(c.method, c.peer, c.id, c.epoch); got != c.want {
			t.Errorf("WaitOpName(%s) = %q, want %q", c.method, got, c.want)
		}
	}
}
