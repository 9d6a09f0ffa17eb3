package transport

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"
)

// TestWaitOnEndedWriters: a host wait fails with PeerEndedError once the
// ranks that could still make it hold have ended (the writer of a single
// slot; every writer of a sum; the writer of a failing slot of a wait on
// each), and only then: a sum with a writer still running, or a wait on
// each whose ended writer's slot already holds, runs to its timeout.
func TestWaitOnEndedWriters(t *testing.T) {
	mem, _ := sharedPages(t, 4096)
	a, b, bell := mem, mem.Add(64), mem.Add(128)
	atomic.StoreUint64(hostU64(b), 9) // holds >= 4 alone; a sum wants 20
	fail := func(_ uint64, cause error) error { return cause }
	for _, c := range []struct {
		name    string
		slots   []Addr
		writers []int
		mode    WaitMode
		value   uint64
		ended   bool // the wait must fail as ended (else time out)
	}{
		{"one slot, its writer ended", []Addr{a}, []int{1}, WaitSum, 1, true},
		{"sum, every other writer ended", []Addr{a, b}, []int{1, -1}, WaitSum, 20, true},
		{"sum, a writer still runs", []Addr{a, b}, []int{1, 2}, WaitSum, 20, false},
		{"each, the failing slot's writer ended", []Addr{b, a}, []int{2, 1}, WaitEach, 4, true},
		{"each, the ended writer's slot holds", []Addr{b, a}, []int{1, 2}, WaitEach, 4, false},
		{"no writers known", []Addr{a}, nil, WaitSum, 1, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			abort := NewAbort()
			abort.SetEnded(1, "exited early with os.exit(0) at x.lua:3")
			s := NewHostStream(abort, WaitPolicy{Spin: 10 * time.Microsecond, Yield: 20 * time.Microsecond})
			defer s.Close()
			s.Wait(WaitSpec{Slots: c.slots, Mode: c.mode, Cmp: CmpGe, Value: c.value, Timeout: 800 * time.Millisecond,
				Bell: bell, Fail: fail, Writers: c.writers})
			start := time.Now()
			err := s.Sync(context.Background())
			took := time.Since(start)
			var pe *PeerEndedError
			switch {
			case c.ended && (!errors.As(err, &pe) || pe.Rank != 1 || pe.Why != "exited early with os.exit(0) at x.lua:3"):
				t.Fatalf("err %v, want rank 1's PeerEndedError", err)
			case c.ended && took > 600*time.Millisecond:
				t.Fatalf("failed after %v: not before its timeout", took)
			case !c.ended && !errors.Is(err, ErrTimeout):
				t.Fatalf("err %v, want a timeout", err)
			}
		})
	}
}
