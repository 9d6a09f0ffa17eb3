package transport

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// hostWords maps n 8-byte words outside the Go heap, as windows are.
func hostWords(t *testing.T, n int) []Addr {
	t.Helper()
	mem, err := unix.Mmap(-1, 0, 8*n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = unix.Munmap(mem) })
	w := make([]Addr, n)
	for i := range w {
		w[i] = addrOf(mem[8*i:])
	}
	return w
}

// A stamp on an idle host stream is reached at once; one behind a wait is
// reached when the wait is satisfied, in order and no earlier; one behind
// an interrupted wait never is.
func TestHostStamps(t *testing.T) {
	w := hostWords(t, 2)
	s := NewHostStream(NewAbort(), false)
	defer s.Close()
	before := time.Now()
	idle := s.Stamp()
	at, ok := idle.Reached()
	if !ok || at.Before(before) || at.After(time.Now()) {
		t.Fatalf("idle stamp: %v %v, want reached between %v and now", at, ok, before)
	}

	s.Wait(WaitSpec{Slots: []Addr{w[0]}, Cmp: CmpGe, Value: 1, Timeout: 10 * time.Second,
		Fail: func(obs uint64, cause error) error { return fmt.Errorf("wait: %w", cause) }})
	behind := s.Stamp()
	s.Store64(w[1], 7)
	last := s.Stamp()
	time.Sleep(20 * time.Millisecond)
	if _, ok := behind.Reached(); ok {
		t.Fatal("a stamp behind an unsatisfied wait was reached")
	}
	released := time.Now()
	atomic.StoreUint64(hostU64(w[0]), 1)
	if err := s.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	t1, ok1 := behind.Reached()
	t2, ok2 := last.Reached()
	if !ok1 || !ok2 || t1.Before(released) || t2.Before(t1) || t2.After(time.Now()) {
		t.Fatalf("stamps %v %v / %v %v, want reached after %v, in order", t1, ok1, t2, ok2, released)
	}
	if atomic.LoadUint64(hostU64(w[1])) != 7 {
		t.Fatal("the store behind the stamp did not run")
	}

	s.Wait(WaitSpec{Slots: []Addr{w[0]}, Cmp: CmpGe, Value: 2, Timeout: 10 * time.Second,
		Fail: func(obs uint64, cause error) error { return fmt.Errorf("wait: %w", cause) }})
	dropped := s.Stamp()
	s.Interrupt(errors.New("stop"))
	if err := s.Sync(context.Background()); err == nil {
		t.Fatal("sync after an interrupt reported no error")
	}
	if _, ok := dropped.Reached(); ok {
		t.Fatal("a stamp dropped by an interrupt was reached")
	}
}

// On a GPU, stamps taken some time apart on an idle stream are reached at
// host times within the calls that made them and the sync after: the
// anchors tie the device clock to the host's, also after an anchor aged.
func TestCUDAStamps(t *testing.T) {
	b, err := NewCUDABackend(fmt.Sprintf("stamp%d", time.Now().UnixNano()), 0, nil)
	if err != nil {
		t.Skipf("no CUDA device: %v", err)
	}
	defer b.Close()
	st, err := b.NewStream(NewAbort())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	s := st.(Stamper)
	for _, gap := range []time.Duration{0, 20 * time.Millisecond, anchorEvery + 100*time.Millisecond} {
		time.Sleep(gap)
		before := time.Now()
		stamp := s.Stamp()
		if err := st.Sync(context.Background()); err != nil {
			t.Fatal(err)
		}
		after := time.Now()
		at, ok := stamp.Reached()
		// The anchor's own reading is up to a query late.
		const slack = 50 * time.Microsecond
		if !ok || at.Before(before.Add(-slack)) || at.After(after.Add(slack)) {
			t.Fatalf("gap %v: stamp at %v (%v), want within [%v, %v]", gap, at.Sub(before), ok, time.Duration(0), after.Sub(before))
		}
	}
}
