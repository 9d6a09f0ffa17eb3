package transport

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

type opKind uint8

const (
	opCopy opKind = iota
	opStore
	opAdd
	opWait
	opHost
	opRemote
	opPutSignal // a copy, then a signal (sig, v, add, bell)
	opReduce    // dst op= src over n elements (dt, rop)
)

type hostOp struct {
	kind opKind
	dst  Addr
	src  Addr
	n    uint64
	v    uint64
	bell Addr // store, add, put-signal: the receiver's bell, rung after
	// put-signal: the slot signalled after the copy, by adding v (add) or
	// storing it
	sig Addr
	add bool
	// reduce: the element type and the operator
	dt    DType
	redop RedOp
	// cached: a copy through MemmoveCached
	cached bool
	wait   WaitSpec
	start  time.Time // wait: when it began to wait (zero until then)
	stuck  time.Time // wait: since when ended peers leave it unable to hold
	fn     func() error
	rop    *RemoteOp
	gen    uint64 // interrupt generation at enqueue
}

// opRing is a FIFO of operations in one growing circular buffer, so a
// stream that is fed as fast as it drains allocates nothing.
type opRing struct {
	buf  []hostOp
	head int
	n    int
}

func (r *opRing) len() int { return r.n }

func (r *opRing) grow() {
	nb := make([]hostOp, max(16, 2*len(r.buf)))
	for i := 0; i < r.n; i++ {
		nb[i] = r.buf[(r.head+i)%len(r.buf)]
	}
	r.buf, r.head = nb, 0
}

func (r *opRing) push(op hostOp) {
	if r.n == len(r.buf) {
		r.grow()
	}
	r.buf[(r.head+r.n)%len(r.buf)] = op
	r.n++
}

func (r *opRing) pushFront(op hostOp) {
	if r.n == len(r.buf) {
		r.grow()
	}
	r.head = (r.head + len(r.buf) - 1) % len(r.buf)
	r.buf[r.head] = op
	r.n++
}

func (r *opRing) pop() hostOp {
	op := r.buf[r.head]
	r.buf[r.head] = hostOp{}
	r.head = (r.head + 1) % len(r.buf)
	r.n--
	return op
}

func (r *opRing) clear() {
	for r.n > 0 {
		r.pop()
	}
	r.head = 0
}

// Who runs a host stream's operations now.
const (
	ownNone   = iota // nobody: the queue is empty
	ownCaller        // the goroutine that enqueued a wait, for a while
	ownWorker        // the stream's goroutine
)

// maxQueued is how many operations a host stream holds before an enqueue
// waits for the stream to catch up (as a device's queue fills).
const maxQueued = 1 << 14

// maxDeferred is how many bells a stream looks at again later at most.
const maxDeferred = 8

// HostStream is the host backend's Stream. An operation that finds the
// stream idle runs at once on the caller's goroutine: copies and stores,
// host functions, and waits too, for up to the policy's Inline time; a
// wait still unmet then, and whatever is enqueued behind it, is run by
// the stream's goroutine. So a rank that keeps up with its peers runs
// everything on one thread, with no hand-off between goroutines.
//
// Waits poll, then yield, then sleep on the rank's bell (WaitSpec.Bell)
// until a signaller rings it, as the WaitPolicy says; the policy differs
// for ranks that outnumber their processors.
type HostStream struct {
	abort *Abort
	pol   WaitPolicy

	mu     sync.Mutex
	q      opRing
	owner  int
	err    error
	closed bool
	wake   chan struct{} // wakes the worker
	idle   chan struct{} // made by a Sync that waits, closed when the stream drains
	space  *sync.Cond    // an enqueue waiting for room in the queue
	gen    atomic.Uint64 // interrupt generation
	cause  atomic.Pointer[error]
	// asleep is the bell a wait of this stream sleeps on (0: none), rung
	// by Interrupt and by the abort.
	asleep  atomic.Uint64
	stopped chan struct{}
	// deferred are bells of plain stores to look at again after a fence;
	// only the goroutine running the stream's operations touches them.
	deferred  [maxDeferred]Addr
	ndeferred int
	fence     atomic.Uint32
	rem       remoteState // operations on network peers (stream_remote.go)
	// cachedMax is the largest copy that goes through the caches
	// (hostCachedMax).
	cachedMax uint64
	// settleOnCaller: SettleOnCaller was called.
	settleOnCaller bool
}

// SettleOnCaller makes a local operation enqueued behind posted network
// operations run on the caller, once those completed locally, instead of
// on the stream's goroutine (which the caller then waits for): for a
// caller that syncs the stream after every few operations anyway (the
// proxy path's graph thread), so that its operations take no hand-offs
// between goroutines. Call it before the stream is used.
func (s *HostStream) SettleOnCaller() { s.settleOnCaller = true }

// NewHostStream starts a stream whose waits also end when abort is set,
// waiting as pol says.
func NewHostStream(abort *Abort, pol WaitPolicy) *HostStream {
	s := &HostStream{abort: abort, pol: pol, wake: make(chan struct{}, 1), stopped: make(chan struct{}), cachedMax: hostCachedMax()}
	s.space = sync.NewCond(&s.mu)
	go s.run()
	go func() {
		select {
		case <-abort.Done():
			RingBell(Addr(s.asleep.Load()))
		case <-s.stopped:
		}
	}()
	return s
}

// Policy returns how the stream's waits pass the time.
func (s *HostStream) Policy() WaitPolicy { return s.pol }

func (s *HostStream) kick() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// deferRing notes bell for flushRings; the caller runs the stream's
// operations.
func (s *HostStream) deferRing(bell Addr) {
	for i := 0; i < s.ndeferred; i++ {
		if s.deferred[i] == bell {
			return
		}
	}
	if s.ndeferred == maxDeferred {
		s.flushRings()
	}
	s.deferred[s.ndeferred] = bell
	s.ndeferred++
}

// flushRings fences, so that the plain stores before are visible to all,
// then rings the deferred bells where a wait sleeps. After it, a wait
// that went to sleep without seeing one of those stores is woken (it
// announced itself before looking at the slot). The caller runs the
// stream's operations (or holds mu with the stream idle).
func (s *HostStream) flushRings() {
	if s.ndeferred == 0 {
		return
	}
	s.fence.Add(1) // a locked instruction: a full fence
	for i := 0; i < s.ndeferred; i++ {
		RingBell(s.deferred[i])
		s.deferred[i] = 0
	}
	s.ndeferred = 0
}

// drained marks the stream idle; the caller holds mu and the queue is empty.
func (s *HostStream) drained() {
	s.flushRings()
	s.owner = ownNone
	if s.idle != nil {
		close(s.idle)
		s.idle = nil
	}
}

func (s *HostStream) enqueue(op *hostOp) {
	s.mu.Lock()
	if op.kind == opWait && s.owner == ownWorker && !s.rem.active() {
		s.reclaim()
	}
	if s.closed {
		s.mu.Unlock()
		return
	}
	op.gen = s.gen.Load()
	if s.owner == ownNone && (s.rem.inline(op) || s.settleOnCaller && op.kind != opRemote) {
		// Nothing ahead of it: run it here, in order, at once (after an
		// error, operations are skipped up to the Sync that reports it).
		// Local operations behind posted remote ones, and flushes, go to
		// the worker (see remoteState.inline).
		if s.err != nil {
			s.mu.Unlock()
			return
		}
		switch op.kind {
		case opWait:
			if _, ok := s.observe(&op.wait); ok {
				s.mu.Unlock()
				return
			}
			s.inline(op)
		case opHost:
			s.inline(op)
		default:
			if op.kind != opRemote && s.rem.outstanding.Load() {
				// SettleOnCaller: the wait for the posted
				// operations runs unlocked.
				s.inline(op)
				return
			}
			if err := s.exec(op); err != nil && s.err == nil {
				s.err = err
			}
			// The stream stays idle: nothing of it would look at a
			// deferred bell again soon, and a wait that went to sleep
			// without seeing the store would sleep its whole nap.
			s.flushRings()
			s.mu.Unlock()
		}
		return
	}
	for s.q.len() >= maxQueued && s.owner != ownNone && !s.closed {
		s.space.Wait()
	}
	s.q.push(*op)
	if s.owner == ownNone {
		s.owner = ownWorker
		s.kick()
	}
	s.mu.Unlock()
}

// reclaim lets the worker drain the queue, for up to the policy's Inline
// time, before the caller enqueues a wait, so that the wait runs on the
// caller again. Without it a stream that handed one slow wait to its
// worker would stay there as long as the caller enqueued faster than the
// worker ran: every operation then a hand-off between two threads, which
// on a rank with one processor take turns on it. Streams that drive
// networks are left as they are (their worker settles posted operations
// while the caller enqueues ahead). The caller holds mu, as on return (it
// gives it up meanwhile).
func (s *HostStream) reclaim() {
	var timer *time.Timer
	for s.owner == ownWorker && !s.closed {
		if s.idle == nil {
			s.idle = make(chan struct{})
		}
		ch := s.idle
		s.mu.Unlock()
		if timer == nil {
			timer = time.NewTimer(s.pol.Inline)
		}
		select {
		case <-ch:
			s.mu.Lock()
			continue
		case <-timer.C:
		}
		s.mu.Lock()
		return
	}
	if timer != nil {
		timer.Stop()
	}
}

// inline runs a wait, a host function or Sync's flush on the caller,
// which holds mu and gives it up. A wait that is not over within the policy's Inline time
// goes to the worker, at the head of the queue.
func (s *HostStream) inline(op *hostOp) {
	s.owner = ownCaller
	s.mu.Unlock()
	var done bool
	var err error
	switch op.kind {
	case opHost:
		if err = s.settleRemote(op.gen); err == nil {
			err = op.fn()
		}
		done = true
	case opRemote:
		// A flush from Sync (flushRemote).
		err = s.exec(op)
		done = true
	case opWait:
		done, err = s.waitFor(op, s.pol.Inline)
	default:
		// A local operation behind posted remote ones (SettleOnCaller):
		// exec waits for their local completion first.
		err = s.exec(op)
		done = true
	}
	s.mu.Lock()
	for !done && s.closed {
		// No worker to take it over.
		s.mu.Unlock()
		done, err = s.waitFor(op, 0)
		s.mu.Lock()
	}
	if err != nil && s.err == nil {
		s.err = err
	}
	switch {
	case !done:
		s.q.pushFront(*op)
		s.owner = ownWorker
		s.kick()
	case s.q.len() > 0:
		// Enqueued by another goroutine meanwhile.
		s.owner = ownWorker
		s.kick()
	default:
		s.drained()
	}
	if s.closed {
		// Close waits for the worker, which waits for this.
		s.kick()
	}
	s.mu.Unlock()
}

func (s *HostStream) run() {
	defer close(s.stopped)
	s.mu.Lock()
	for {
		if s.owner != ownWorker || s.q.len() == 0 {
			if s.owner == ownWorker {
				s.drained()
			}
			if s.closed && s.owner == ownNone {
				s.space.Broadcast()
				s.mu.Unlock()
				return
			}
			s.mu.Unlock()
			<-s.wake
			s.mu.Lock()
			continue
		}
		op := s.q.pop()
		if s.q.len() == maxQueued/2 {
			s.space.Broadcast()
		}
		failed := s.err != nil
		s.mu.Unlock()
		var err error
		if !failed && op.gen == s.gen.Load() {
			switch op.kind {
			case opWait:
				_, err = s.waitFor(&op, 0)
			case opHost:
				if err = s.settleRemote(op.gen); err == nil {
					err = op.fn()
				}
			default:
				err = s.exec(&op)
			}
		}
		s.mu.Lock()
		if err != nil && s.err == nil {
			s.err = err
		}
	}
}

func (s *HostStream) observe(w *WaitSpec) (uint64, bool) {
	if w.Mode == WaitEach {
		for _, a := range w.Slots {
			v := atomic.LoadUint64(hostU64(a))
			if !w.Cmp.Holds(v, w.Value) {
				return v, false
			}
		}
		return w.Value, true
	}
	var sum uint64
	for _, a := range w.Slots {
		sum += atomic.LoadUint64(hostU64(a))
	}
	if w.Mismatch != nil && w.Mismatch(w.Value, sum) {
		return sum, false // waitFor fails it
	}
	return sum, w.Cmp.Holds(sum, w.Value)
}

// maxNap bounds one sleep on a bell, in case a slot is written by
// something that does not ring (the wait then looks again).
const maxNap = 10 * time.Millisecond

// waitFor runs the wait op until its condition holds (true, nil), it fails
// (true, error), or, with limit > 0, limit has passed in this call (false,
// nil: op keeps its start for the timeout). It polls, yields, then sleeps
// on the bell, as the policy says.
func (s *HostStream) waitFor(op *hostOp, limit time.Duration) (bool, error) {
	w := &op.wait
	if _, ok := s.observe(w); ok {
		return true, nil
	}
	var (
		v  uint64
		ok bool
	)
	// The clock is read, and the deferred bells rung (a fence, which
	// waits for this rank's last stores to leave), only at the first
	// check, 256 looks in (at the first look when the policy does not
	// spin: such a wait yields at once): a wait that ends sooner pays for
	// neither, and a peer that went to sleep meanwhile is woken a few
	// microseconds late at worst (this wait never sleeps before it).
	var began time.Time
	ready := func() bool {
		_, ok := s.observe(w)
		return ok || s.abort.Err() != nil || s.gen.Load() != op.gen
	}
	pause := time.Microsecond
	spinning := true
	for i := 1; ; i++ {
		s.rem.progress()
		if v, ok = s.observe(w); ok {
			return true, nil
		}
		if spinning && s.pol.Spin > 0 && i&255 != 0 {
			continue
		}
		if began.IsZero() {
			s.flushRings()
			began = time.Now()
			if op.start.IsZero() {
				op.start = began
			}
		}
		if err := s.abort.Err(); err != nil {
			return true, w.Failed(v, err)
		}
		if w.Mismatch != nil && w.Mismatch(w.Value, v) {
			return true, w.Failed(v, ErrMismatch)
		}
		if s.gen.Load() != op.gen {
			return true, w.Failed(v, s.interruptCause())
		}
		now := time.Now()
		waited := now.Sub(op.start)
		if waited > w.Timeout {
			return true, w.Failed(v, ErrTimeout)
		}
		if w.Writers != nil && s.abort.AnyEnded() {
			if err := s.cannotHold(op, now); err != nil {
				return true, w.Failed(v, err)
			}
		}
		left := w.Timeout - waited
		if limit > 0 {
			if now.Sub(began) >= limit {
				return false, nil
			}
			left = min(left, limit-now.Sub(began))
		}
		switch {
		case waited < s.pol.Spin:
		case waited < s.pol.Yield:
			spinning = false
			yieldProcessor(i, s.pol.Goroutines)
		case w.Bell != 0 && !s.rem.active():
			// (A wait that drives networks never sleeps on the bell: the
			// data it waits for may need this rank's progress to land.)
			spinning = false
			s.asleep.Store(uint64(w.Bell))
			sleepOnBell(w.Bell, min(left, maxNap)+time.Microsecond, ready)
			s.asleep.Store(0)
		default:
			spinning = false
			time.Sleep(pause)
			if pause < 50*time.Microsecond {
				pause *= 2
			}
		}
	}
}

func (s *HostStream) interruptCause() error {
	if p := s.cause.Load(); p != nil {
		return *p
	}
	return errors.New("interrupted")
}

// Copy implements Stream.
func (s *HostStream) Copy(dst, src Addr, n uint64) {
	s.enqueue(&hostOp{kind: opCopy, dst: dst, src: src, n: n})
}

// CopyCached implements CachedCopier.
func (s *HostStream) CopyCached(dst, src Addr, n uint64) {
	s.enqueue(&hostOp{kind: opCopy, dst: dst, src: src, n: n, cached: true})
}

// Store64 implements Stream.
func (s *HostStream) Store64(dst Addr, v uint64) { s.enqueue(&hostOp{kind: opStore, dst: dst, v: v}) }

// Add64 implements Stream.
func (s *HostStream) Add64(dst Addr, v uint64) { s.enqueue(&hostOp{kind: opAdd, dst: dst, v: v}) }

// Store64Ring implements Ringer.
func (s *HostStream) Store64Ring(dst Addr, v uint64, bell Addr) {
	s.enqueue(&hostOp{kind: opStore, dst: dst, v: v, bell: bell})
}

// Add64Ring implements Ringer.
func (s *HostStream) Add64Ring(dst Addr, v uint64, bell Addr) {
	s.enqueue(&hostOp{kind: opAdd, dst: dst, v: v, bell: bell})
}

// Wait implements Stream.
func (s *HostStream) Wait(w WaitSpec) { s.enqueue(&hostOp{kind: opWait, wait: w}) }

// Host implements Stream.
func (s *HostStream) Host(fn func() error) { s.enqueue(&hostOp{kind: opHost, fn: fn}) }

// Mark implements Stream.
func (s *HostStream) Mark() Mark {
	m := &hostMark{}
	s.Host(func() error { m.t = time.Now(); return nil })
	return m
}

// hostSyncSpin bounds how long a Sync polls, yielding to the stream's
// goroutine, before it sleeps until the stream drains.
const hostSyncSpin = 20 * time.Microsecond

// Sync implements Stream. It polls while the policy would spin (up to
// hostSyncSpin), then sleeps until the stream drains.
func (s *HostStream) Sync(ctx context.Context) error { return s.sync(ctx, true) }

// SyncLocal is Sync without the network flush: it returns once the stream
// drained and what it posted to networks completed locally (sources may
// be reused, gets' data is in place), whether or not puts reached their
// targets yet. A flush asks every peer for a reply; an exchange whose
// peers' answers already say what they received needs none.
func (s *HostStream) SyncLocal(ctx context.Context) error { return s.sync(ctx, false) }

func (s *HostStream) sync(ctx context.Context, flush bool) error {
	if flush {
		s.flushRemote()
	}
	var start time.Time
	for i := 0; ; i++ {
		s.mu.Lock()
		if s.owner == ownNone {
			s.flushRings()
			err := s.err
			s.err = nil
			gen := s.gen.Load()
			s.mu.Unlock()
			if err == nil && !flush {
				err = s.settleRemote(gen)
			}
			if err != nil {
				// The operations after the error were skipped, the flush
				// too; but what was posted before it may still read memory
				// the caller frees next.
				if stalled := s.quietRemote(); stalled != nil && !errors.Is(err, stalled) && err.Error() != stalled.Error() {
					err = fmt.Errorf("%w; meanwhile %v", err, stalled)
				}
			}
			return err
		}
		if i == 0 {
			start = time.Now()
		} else if time.Since(start) >= min(s.pol.Spin, hostSyncSpin) {
			if s.idle == nil {
				s.idle = make(chan struct{})
			}
			ch := s.idle
			s.mu.Unlock()
			select {
			case <-ch:
			case <-ctx.Done():
				return fmt.Errorf("sync: %w", context.Cause(ctx))
			}
			continue
		}
		s.mu.Unlock()
		runtime.Gosched()
	}
}

// Interrupt implements Stream.
func (s *HostStream) Interrupt(cause error) {
	s.mu.Lock()
	s.cause.Store(&cause)
	s.gen.Add(1)
	s.q.clear()
	s.space.Broadcast()
	if s.err == nil {
		s.err = cause
	}
	s.mu.Unlock()
	RingBell(Addr(s.asleep.Load()))
}

// Failed implements Failer: the error Sync will report, or nil.
func (s *HostStream) Failed() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// Close implements Stream.
func (s *HostStream) Close() {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.closed = true
	if s.owner == ownNone {
		s.flushRings()
	}
	s.space.Broadcast()
	s.mu.Unlock()
	s.kick()
	<-s.stopped
}

// hostCachedMax is the largest copy a host stream makes through the
// caches: a quarter of HostCacheBytes (docs/results/host.md, "Puts of up
// to a quarter of the cache through the caches", has the measurements).
func hostCachedMax() uint64 { return HostCacheBytes() / 4 }

// HostCopier returns a copy that moves bytes as a host stream copies a
// put's: through the caches up to a quarter of the cache, else as Memmove
// does (a benchmark's reference for the host's puts; the cache's size is
// read once, here).
func HostCopier() func(dst, src []byte) {
	limit := hostCachedMax()
	return func(dst, src []byte) {
		if uint64(len(src)) <= limit {
			MemmoveCached(dst, src)
			return
		}
		Memmove(dst, src)
	}
}
