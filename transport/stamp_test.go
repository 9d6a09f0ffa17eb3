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
func hostWords(t testing.TB, n int) []Addr {
	t.Helper()
	mem, err := unix.Mmap(-1, 0, 8*n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = unix.Munmap(mem) })
	w := make([]Addr, n)
	for i := range w {
		w[i] = AddrOf(mem[8*i:])
	}
	return w
}

// A stamp on an idle host stream is reached at once; one behind a wait is
// reached when the wait is satisfied, in order and no earlier; one behind
// an interrupted wait never is.
func TestHostStamps(t *testing.T) {
	w := hostWords(t, 2)
	s := NewHostStream(NewAbort(), PolicyDedicated)
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
