package transport

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/luacoll/luacoll/kernels"
	"github.com/luacoll/luacoll/transport/knobs"
	"golang.org/x/sys/unix"
)

// sharedPages maps one memfd twice: two addresses of the same memory, as
// two processes see a segment.
func sharedPages(t *testing.T, size int) (a, b Addr) {
	t.Helper()
	fd, err := unix.MemfdCreate("luacoll-test", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	if err := unix.Ftruncate(fd, int64(size)); err != nil {
		t.Fatal(err)
	}
	var maps [2][]byte
	for i := range maps {
		if maps[i], err = unix.Mmap(fd, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		for _, m := range maps {
			_ = unix.Munmap(m)
		}
	})
	return AddrOf(maps[0]), AddrOf(maps[1])
}

func noFail(obs uint64, cause error) error { return cause }

// A sleeper on a bell is woken by a ring through another mapping of the
// same memory (a shared futex), long before its own deadline.
func TestBellWakesSleeperThroughAnotherMapping(t *testing.T) {
	a, b := sharedPages(t, 4096)
	done := make(chan bool)
	go func() { done <- sleepOnBell(a, time.Minute, func() bool { return false }) }()
	// Ring until the sleeper has announced itself and been woken.
	deadline := time.After(30 * time.Second)
	for {
		select {
		case ready := <-done:
			if ready {
				t.Fatal("sleepOnBell reported ready")
			}
			if atomic.LoadUint32(bellWaiters(a)) != 0 {
				t.Fatal("waiter count not dropped after waking")
			}
			return
		case <-deadline:
			t.Fatal("the ring did not wake the sleeper")
		case <-time.After(time.Millisecond):
			RingBell(b)
		}
	}
}

// A ring with nobody asleep leaves the bell alone (no system call).
func TestRingWithoutWaiter(t *testing.T) {
	a, _ := sharedPages(t, 4096)
	RingBell(a)
	RingBell(0)
	if atomic.LoadUint32(bellSeq(a)) != 0 {
		t.Fatal("ring counted with no waiter")
	}
}

// Operations run in order: a copy enqueued behind an unmet wait runs only
// after the wait, whether the wait ends on the caller or, after the inline
// time, on the stream's goroutine; the enqueue returns meanwhile.
func TestHostStreamOrderAndHandOff(t *testing.T) {
	for _, inline := range []time.Duration{time.Minute, time.Millisecond} {
		mem, other := sharedPages(t, 4096)
		slot, bell, src, dst := mem, mem.Add(128), mem.Add(1024), mem.Add(2048)
		copy(HostBytes(src, 8), "abcdefgh")
		pol := WaitPolicy{Spin: 10 * time.Microsecond, Yield: 20 * time.Microsecond, Inline: inline}
		s := NewHostStream(NewAbort(), pol)
		returned := make(chan struct{})
		go func() {
			// Set the slot once the enqueue returned, or after a while.
			select {
			case <-returned:
			case <-time.After(50 * time.Millisecond):
			}
			atomic.StoreUint64(hostU64(other), 7)
			RingBell(other.Add(128))
		}()
		s.Wait(WaitSpec{Slots: []Addr{slot}, Cmp: CmpEq, Value: 7, Timeout: time.Minute, Bell: bell, Fail: noFail})
		early := atomic.LoadUint64(hostU64(slot)) != 7
		close(returned)
		s.Copy(dst, src, 8)
		if err := s.Sync(context.Background()); err != nil {
			t.Fatal(err)
		}
		if got := string(HostBytes(dst, 8)); got != "abcdefgh" {
			t.Errorf("inline %v: copy after the wait gave %q", inline, got)
		}
		if inline == time.Millisecond && !early {
			t.Errorf("inline %v: the enqueue waited for the slot", inline)
		}
		s.Close()
	}
}

// A stream whose worker took over a slow wait goes back to running on the
// caller: the caller's next wait lets the worker drain the queue first, so
// that the wait, and what follows it, run on the caller again (a host
// function enqueued after it has run when its enqueue returns). Without
// that, a caller that enqueues faster than the worker runs would hand
// every operation over from then on.
func TestHostStreamCallerTakesBack(t *testing.T) {
	mem, _ := sharedPages(t, 4096)
	slot, bell := mem, mem.Add(128)
	s := NewHostStream(NewAbort(), WaitPolicy{Spin: 10 * time.Microsecond, Yield: 20 * time.Microsecond, Inline: 200 * time.Millisecond})
	defer s.Close()
	ws := WaitSpec{Slots: []Addr{slot}, Cmp: CmpGe, Value: 1, Timeout: time.Minute, Bell: bell, Fail: noFail}
	// Unmet for the inline time: the worker takes the wait over.
	s.Wait(ws)
	atomic.StoreUint64(hostU64(slot), 1)
	RingBell(bell)
	// Queued behind it, and busy for a while once the worker gets to it.
	var slow, after atomic.Bool
	s.Host(func() error { time.Sleep(5 * time.Millisecond); slow.Store(true); return nil })
	s.Wait(ws)
	if !slow.Load() {
		t.Error("the wait was enqueued behind the worker's operations")
	}
	s.Host(func() error { after.Store(true); return nil })
	if !after.Load() {
		t.Error("the host function after the wait did not run on the caller")
	}
	if err := s.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// The host stream's own reduce and fused put-signal operations run in
// stream order: behind an unmet wait nothing of them happens; once it
// holds, the reduction is done, the put's data is in place and its slot
// added to (or set) after it.
func TestHostStreamReduceAndPutSignalInOrder(t *testing.T) {
	mem, _ := sharedPages(t, 4096)
	gate, bell := mem, mem.Add(128)
	addSlot, setSlot := mem.Add(256), mem.Add(264)
	dst, src, put := mem.Add(1024), mem.Add(2048), mem.Add(3072)
	d, sv := HostBytes(dst, 64), HostBytes(src, 64)
	for i := 0; i < 16; i++ {
		binary.LittleEndian.PutUint32(d[4*i:], uint32(i))
		binary.LittleEndian.PutUint32(sv[4*i:], uint32(100*i))
	}
	atomic.StoreUint64(hostU64(addSlot), 5)
	s := NewHostStream(NewAbort(), WaitPolicy{Spin: 10 * time.Microsecond, Yield: 20 * time.Microsecond, Inline: time.Millisecond})
	defer s.Close()
	s.Wait(WaitSpec{Slots: []Addr{gate}, Cmp: CmpGe, Value: 1, Timeout: time.Minute, Bell: bell, Fail: noFail})
	s.Reduce(dst, src, 16, kernels.U32, kernels.Sum)
	s.PutSignalRing(put, dst, 64, addSlot, true, 2, bell)
	s.PutSignalRing(put.Add(64), src, 8, setSlot, false, 9, bell)
	time.Sleep(5 * time.Millisecond)
	if binary.LittleEndian.Uint32(d[4:]) != 1 || atomic.LoadUint64(hostU64(addSlot)) != 5 {
		t.Fatal("operations behind the unmet wait ran")
	}
	atomic.StoreUint64(hostU64(gate), 1)
	RingBell(bell)
	if err := s.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	p := HostBytes(put, 72)
	for i := 0; i < 16; i++ {
		if got := binary.LittleEndian.Uint32(p[4*i:]); got != uint32(101*i) {
			t.Fatalf("element %d: put %d, want %d", i, got, 101*i)
		}
	}
	if !bytes.Equal(p[64:72], sv[:8]) {
		t.Error("the second put's data is not in place")
	}
	if a, b := atomic.LoadUint64(hostU64(addSlot)), atomic.LoadUint64(hostU64(setSlot)); a != 7 || b != 9 {
		t.Errorf("slots %d and %d, want 7 and 9", a, b)
	}
}

// A wait that never holds fails at its timeout with ErrTimeout, naming the
// last value seen; the stream skips what follows up to the Sync that
// reports it, then works again.
func TestHostStreamTimeout(t *testing.T) {
	mem, _ := sharedPages(t, 4096)
	atomic.StoreUint64(hostU64(mem), 3)
	s := NewHostStream(NewAbort(), WaitPolicy{Spin: time.Microsecond, Yield: time.Microsecond, Inline: time.Millisecond})
	defer s.Close()
	var seen uint64
	s.Wait(WaitSpec{Slots: []Addr{mem}, Cmp: CmpGe, Value: 4, Timeout: 30 * time.Millisecond, Bell: mem.Add(128),
		Fail: func(obs uint64, cause error) error { seen = obs; return cause }})
	s.Store64(mem.Add(8), 1)
	if err := s.Sync(context.Background()); !errors.Is(err, ErrTimeout) || seen != 3 {
		t.Fatalf("got %v, seen %d", err, seen)
	}
	if atomic.LoadUint64(hostU64(mem.Add(8))) != 0 {
		t.Error("the store behind the failed wait ran")
	}
	s.Store64(mem.Add(8), 2)
	if err := s.Sync(context.Background()); err != nil || atomic.LoadUint64(hostU64(mem.Add(8))) != 2 {
		t.Fatalf("after the error: %v, slot %d", err, atomic.LoadUint64(hostU64(mem.Add(8))))
	}
}

// A wait asleep on its bell ends at once when the stream is interrupted
// or the job aborts, long before its timeout.
func TestHostStreamSleeperWokenByInterruptAndAbort(t *testing.T) {
	for _, how := range []string{"interrupt", "abort"} {
		mem, _ := sharedPages(t, 4096)
		abort := NewAbort()
		// No spin, no yield: the wait sleeps on the bell at once.
		s := NewHostStream(abort, WaitPolicy{Inline: time.Minute})
		cause := errors.New(how)
		go func() {
			// Wait until the stream's wait is asleep.
			for atomic.LoadUint32(bellWaiters(mem.Add(128))) == 0 {
				time.Sleep(time.Millisecond)
			}
			if how == "interrupt" {
				s.Interrupt(cause)
			} else {
				abort.Set(cause)
			}
		}()
		start := time.Now()
		s.Wait(WaitSpec{Slots: []Addr{mem}, Cmp: CmpEq, Value: 1, Timeout: 10 * time.Minute, Bell: mem.Add(128), Fail: noFail})
		err := s.Sync(context.Background())
		if !errors.Is(err, cause) {
			t.Errorf("%s: got %v", how, err)
		}
		if d := time.Since(start); d > time.Minute {
			t.Errorf("%s: the wait ended after %v", how, d)
		}
		s.Close()
	}
}

// The ring keeps its order through growth and a push to the front.
func TestOpRing(t *testing.T) {
	var r opRing
	for i := 0; i < 40; i++ {
		r.push(hostOp{n: uint64(i)})
		if i%3 == 0 {
			if got := r.pop().n; got != uint64(i/3) {
				t.Fatalf("pop %d, want %d", got, i/3)
			}
		}
	}
	r.pushFront(hostOp{n: 99})
	want := []uint64{99}
	for i := 14; i < 40; i++ {
		want = append(want, uint64(i))
	}
	for _, w := range want {
		if got := r.pop().n; got != w {
			t.Fatalf("pop %d, want %d", got, w)
		}
	}
	if r.len() != 0 {
		t.Fatalf("%d left", r.len())
	}
}

// The environment overrides the policy's spin and yield times.
func TestHostWaitPolicy(t *testing.T) {
	env := map[string]string{knobs.HostSpin.Name: "3", knobs.HostYield.Name: "2.5"}
	p := HostWaitPolicy(true, true, knobs.Load(func(k string) (string, bool) { v, ok := env[k]; return v, ok }))
	if p.Spin != 3*time.Microsecond || p.Yield != 3*time.Microsecond || !p.Goroutines {
		t.Errorf("got %+v", p)
	}
	p = HostWaitPolicy(false, false, knobs.Load(func(string) (string, bool) { return "", false }))
	if p != PolicyDedicated {
		t.Errorf("got %+v, want %+v", p, PolicyDedicated)
	}
	if o := HostWaitPolicy(true, false, knobs.Load(func(string) (string, bool) { return "x", true })); o != PolicyOversubscribed {
		t.Errorf("got %+v, want %+v", o, PolicyOversubscribed)
	}
}

// Close while a wait runs on its caller returns once that wait is over.
func TestHostStreamCloseDuringInlineWait(t *testing.T) {
	mem, other := sharedPages(t, 4096)
	s := NewHostStream(NewAbort(), WaitPolicy{Spin: time.Microsecond, Yield: 2 * time.Microsecond, Inline: time.Minute})
	waited := make(chan struct{})
	go func() {
		s.Wait(WaitSpec{Slots: []Addr{mem}, Cmp: CmpEq, Value: 1, Timeout: time.Minute, Bell: mem.Add(128), Fail: noFail})
		close(waited)
	}()
	for atomic.LoadUint32(bellWaiters(mem.Add(128))) == 0 {
		time.Sleep(time.Millisecond)
	}
	closed := make(chan struct{})
	go func() { s.Close(); close(closed) }()
	time.Sleep(10 * time.Millisecond)
	atomic.StoreUint64(hostU64(other), 1)
	RingBell(other.Add(128))
	for _, c := range []chan struct{}{waited, closed} {
		select {
		case <-c:
		case <-time.After(30 * time.Second):
			t.Fatal("the wait or Close did not return")
		}
	}
}

// A store run on the caller leaves no bell for later: the stream is idle
// after it, and nothing would look at a deferred bell again soon, so a
// wait that announced itself just after the store's look at the bell, and
// went to sleep without seeing the value, would sleep its whole nap (10
// ms stalls in 2-rank all-gathers).
func TestInlineStoreRingsAtOnce(t *testing.T) {
	mem, _ := sharedPages(t, 4096)
	slot, bell := mem, mem.Add(128)
	s := NewHostStream(NewAbort(), PolicyDedicated)
	defer s.Close()
	s.Store64Ring(slot, 7, bell)
	s.mu.Lock()
	n, owner := s.ndeferred, s.owner
	s.mu.Unlock()
	if owner != ownNone || n != 0 {
		t.Fatalf("after an inline store: owner %d, %d bells deferred; want an idle stream with none", owner, n)
	}
	if atomic.LoadUint64(hostU64(slot)) != 7 {
		t.Fatal("the store did not happen")
	}
}

// A stream copies up to a quarter of knobs.HostCache through the caches
// (0: none), and copies and put_signals on both sides of that size land
// whole.
func TestHostStreamCachedCopies(t *testing.T) {
	for _, c := range []struct {
		cache string
		want  uint64
	}{{"8M", 2 << 20}, {"0", 0}} {
		t.Cleanup(func() { knobs.Reload() }) // after t.Setenv's own
		t.Setenv(knobs.HostCache.Name, c.cache)
		knobs.Reload()
		s := NewHostStream(NewAbort(), PolicyDedicated)
		if s.cachedMax != c.want {
			t.Errorf("%s=%s: copies through the caches up to %d bytes, want %d", knobs.HostCache.Name, c.cache, s.cachedMax, c.want)
		}
		for _, n := range []int{1 << 20, 2 << 20, 3<<20 + 4096} {
			src, dst, slot := make([]byte, n), make([]byte, 2*n), make([]byte, 8)
			for i := range src {
				src[i] = byte(i*7 + n)
			}
			s.Copy(AddrOf(dst), AddrOf(src), uint64(n))
			s.PutSignalRing(AddrOf(dst[n:]), AddrOf(src), uint64(n), AddrOf(slot), true, 1, 0)
			if err := s.Sync(context.Background()); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(dst[:n], src) || !bytes.Equal(dst[n:], src) || binary.LittleEndian.Uint64(slot) != 1 {
				t.Errorf("%s=%s, %d bytes: the copy or the put_signal did not land whole", knobs.HostCache.Name, c.cache, n)
			}
		}
		s.Close()
	}
}
