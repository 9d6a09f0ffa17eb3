package window

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/luacoll/luacoll/transport"
	tnet "github.com/luacoll/luacoll/transport/net"
)

// netJob runs fn on n ranks that reach every peer (or those netPeers
// names) through UCX; it skips where UCX is not installed.
func netJob(t *testing.T, n int, override func(rank int) string, fn func(r *Rank) error) {
	t.Helper()
	if _, err := tnet.Load(); err != nil {
		t.Skipf("no UCX here: %v", err)
	}
	t.Setenv("UCX_TLS", "tcp")
	if override == nil {
		override = func(int) string { return "net" }
	}
	jobWith(t, n, jobConfig{override: override, network: func(rank, size int) transport.Network {
		return tnet.New(rank, size)
	}}, fn)
}

func TestNetPutSignalRing(t *testing.T) {
	for _, n := range []int{2, 3} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			netJob(t, n, nil, func(r *Rank) error { return putSignalRing(r, n) })
		})
	}
}

func TestNetBarrierReuse(t *testing.T) {
	netJob(t, 4, nil, func(r *Rank) error { return barrierReuse(r, 40) })
}

func TestNetSetAndResetSignals(t *testing.T) { netJob(t, 2, nil, setAndResetSignals) }

// Mixed windows: ranks {0,1} and {2,3} map each other, and reach the other
// pair over the network, in one window.
func TestNetMixedWindow(t *testing.T) {
	pairs := func(rank int) string {
		if rank < 2 {
			return "2=net,3=net"
		}
		return "0=net,1=net"
	}
	netJob(t, 4, pairs, func(r *Rank) error {
		ctx := context.Background()
		w, err := r.NewWindow(ctx, opts(4096))
		if err != nil {
			return err
		}
		me := r.ID()
		for p := 0; p < 4; p++ {
			kind, err := w.Transport(p)
			if err != nil {
				return err
			}
			via, err := w.TransportVia(p)
			if err != nil {
				return err
			}
			sameNode := (p < 2) == (me < 2)
			switch {
			case p == me && (kind != "self" || via != ""), p != me && sameNode && (kind != "shm" || via != ""):
				return fmt.Errorf("transport(%d) = %q, %q", p, kind, via)
			case !sameNode && (kind != "net" || !strings.HasPrefix(via, "ucx: tcp/")):
				return fmt.Errorf("transport(%d) = %q, %q; want net, ucx: tcp/...", p, kind, via)
			}
		}
		if err := putSignalRing(r, 4); err != nil {
			return err
		}
		return w.Free(ctx)
	})
}

// Gets read what the owner wrote, from a network peer.
func TestNetGet(t *testing.T) {
	netJob(t, 2, nil, func(r *Rank) error {
		ctx := context.Background()
		w, err := r.NewWindow(ctx, opts(1<<20))
		if err != nil {
			return err
		}
		if err := w.Buffer().Fill(transport.FillIotaU32, uint64(r.ID()<<20)); err != nil {
			return err
		}
		if err := w.Barrier(0); err != nil {
			return err
		}
		dst, err := r.NewBuffer(1 << 20)
		if err != nil {
			return err
		}
		defer dst.Free()
		peer := 1 - r.ID()
		if err := w.Get(Transfer{Peer: peer, Local: dst, N: 1 << 20}); err != nil {
			return err
		}
		// The checksum is a local operation after the get: it sees the data.
		want := make([]byte, 1<<20)
		transport.FillIota(want, uint32(peer<<20))
		got, err := dst.Read(0, 1<<20)
		if err != nil {
			return err
		}
		if string(got) != string(want) {
			for i := range got {
				if got[i] != want[i] {
					return fmt.Errorf("get returned other bytes from offset %d (%x, want %x)", i, got[i:i+8], want[i:i+8])
				}
			}
		}
		if err := w.Barrier(0); err != nil {
			return err
		}
		return w.Free(ctx)
	})
}

// Each window registers once and unpacks one key per network peer; free
// releases both: nothing is left after 1000 windows.
func TestNetRegistrationsReleased(t *testing.T) {
	netJob(t, 2, nil, func(r *Rank) error {
		ctx := context.Background()
		nt := r.Net.(*tnet.Transport)
		for i := 0; i < 1000; i++ {
			w, err := r.NewWindow(ctx, opts(4096))
			if err != nil {
				return fmt.Errorf("window %d: %w", i, err)
			}
			if i%100 == 0 {
				if g, k := nt.Registrations(), nt.Keys(); g != 1 || k != 1 {
					return fmt.Errorf("window %d: %d registrations and %d keys live, want 1 and 1", i, g, k)
				}
				if err := w.Signal(1-r.ID(), Sig{ID: 0, Value: 1}); err != nil {
					return err
				}
				if err := w.WaitSignal(0, transport.CmpEq, 1); err != nil {
					return err
				}
			}
			if err := w.Free(ctx); err != nil {
				return fmt.Errorf("window %d: %w", i, err)
			}
		}
		if g, k := nt.Registrations(), nt.Keys(); g != 0 || k != 0 {
			return fmt.Errorf("after 1000 windows: %d registrations and %d keys live", g, k)
		}
		return nil
	})
}

// A wait on a network peer keeps the window's timeout and names the peer
// and slot.
func TestNetWaitTimeout(t *testing.T) {
	netJob(t, 2, nil, func(r *Rank) error {
		ctx := context.Background()
		o := opts(64)
		o.Timeout = 200 * time.Millisecond
		w, err := r.NewWindow(ctx, o)
		if err != nil {
			return err
		}
		peer := 1 - r.ID()
		_ = w.WaitSignalFrom(peer, 3, transport.CmpGe, 2)
		start := time.Now()
		err = w.Sync(ctx)
		if !errors.Is(err, transport.ErrTimeout) && !strings.Contains(fmt.Sprint(err), "timed out") {
			return fmt.Errorf("want a timeout, got %v", err)
		}
		if d := time.Since(start); d > 5*time.Second {
			return fmt.Errorf("timeout of 200ms took %v", d)
		}
		for _, part := range []string{fmt.Sprintf("peer %d", peer), "sig 3", ">= 2"} {
			if !strings.Contains(err.Error(), part) {
				return fmt.Errorf("error %q lacks %q", err, part)
			}
		}
		return w.Free(ctx)
	})
}

// Without a network, a window with network peers fails on every rank with
// the reason, instead of hanging.
func TestNetWithoutNetwork(t *testing.T) {
	jobWith(t, 2, jobConfig{override: func(int) string { return "net" }}, func(r *Rank) error {
		_, err := r.NewWindow(context.Background(), opts(64))
		if err == nil || !strings.Contains(err.Error(), "no network transport") {
			return fmt.Errorf("want a clear error, got %v", err)
		}
		return nil
	})
}

// put_signal above the one-message size goes as a put and a fenced signal;
// with a counter it still lands whole before its signal.
func TestNetLargePutSignal(t *testing.T) {
	netJob(t, 2, nil, func(r *Rank) error {
		ctx := context.Background()
		const n = 256 << 10
		w, err := r.NewWindow(ctx, opts(n))
		if err != nil {
			return err
		}
		src, err := r.NewBuffer(n)
		if err != nil {
			return err
		}
		defer src.Free()
		if err := src.Fill(transport.FillRandU32, uint64(r.ID()+7)); err != nil {
			return err
		}
		peer := 1 - r.ID()
		for _, size := range []uint64{64, 16 << 10, n} {
			if err := w.PutSignal(Transfer{Peer: peer, Local: src, N: size}, &Sig{ID: 0, Value: 1}, &Ctr{ID: 0, Value: 1}); err != nil {
				return err
			}
			if err := w.WaitSignalFrom(peer, 0, transport.CmpGe, 1); err != nil {
				return err
			}
			if err := w.WaitCounter(peer, 0, transport.CmpGe, 1); err != nil {
				return err
			}
			if err := w.Sync(ctx); err != nil {
				return err
			}
			ref, _ := r.NewBuffer(size)
			_ = ref.Fill(transport.FillRandU32, uint64(peer+7))
			eq, err := w.Buffer().Equal(ref, 0, 0, size)
			_ = ref.Free()
			if err != nil || !eq {
				return fmt.Errorf("%d bytes: data before its signal differs (%v)", size, err)
			}
			_ = w.ResetSignals()
			_ = w.ResetCounter(peer, 0)
			if err := w.Barrier(0); err != nil {
				return err
			}
		}
		return w.Free(ctx)
	})
}
