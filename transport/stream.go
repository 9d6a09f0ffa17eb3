package transport

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/luacoll/luacoll/kernels"
)

// Cmp is a comparison between an observed value and an expected one:
// observed <cmp> expected, on unsigned 64-bit integers. It is the
// device's comparison (kernels.Cmp), so one definition serves both.
type Cmp = kernels.Cmp

// The six comparisons.
const (
	CmpEq = kernels.CmpEQ
	CmpNe = kernels.CmpNE
	CmpLt = kernels.CmpLT
	CmpLe = kernels.CmpLE
	CmpGt = kernels.CmpGT
	CmpGe = kernels.CmpGE
)

var cmpAliases = [...]string{"eq", "ne", "lt", "le", "gt", "ge"}

// ParseCmp accepts "==", "~=", "<", "<=", ">", ">=" and the aliases "eq",
// "ne", "lt", "le", "gt", "ge" ("!=" is taken for "~=").
func ParseCmp(s string) (Cmp, error) {
	for i, a := range cmpAliases {
		if s == a {
			return Cmp(i), nil
		}
	}
	if c, err := kernels.ParseCmp(s); err == nil {
		return c, nil
	}
	return 0, fmt.Errorf("unknown comparison %q (want ==, ~=, <, <=, >, >= or eq, ne, lt, le, gt, ge)", s)
}

// WaitMode says how a wait combines its slots.
type WaitMode uint8

const (
	// WaitSum compares the sum of all slots.
	WaitSum WaitMode = iota
	// WaitEach requires every slot to satisfy the comparison on its own.
	WaitEach
)

// WaitSpec is a wait on one or more 64-bit slots.
type WaitSpec struct {
	Slots   []Addr
	Mode    WaitMode
	Cmp     Cmp
	Value   uint64
	Timeout time.Duration
	// Fail builds the error for a wait that did not succeed: cause is
	// ErrTimeout, ErrMismatch, or the reason of an abort or interrupt.
	// observed is the last value seen (the sum, or the first failing slot
	// for WaitEach).
	Fail func(observed uint64, cause error) error
	// Mismatch, when set, says that an observed value can never turn into
	// one that satisfies the wait (a peer's tag for the same step with
	// other arguments): the wait then fails at once with ErrMismatch
	// instead of at its timeout. Host streams look at it; device waits
	// that need it check their tags themselves.
	Mismatch func(observed uint64) bool
}

// PathSetter is a stream that can move data in more than one way (CUDA:
// copy engines "ce", kernels "sm", or "auto"); windows set their path before
// enqueuing.
type PathSetter interface {
	SetPath(path string)
}

// PutSignaler is a stream that can fuse a small put and its signal into
// one operation. PutSignal reports false when it leaves this one to the
// separate Copy and Store64/Add64.
type PutSignaler interface {
	PutSignal(dst, src Addr, n uint64, slot Addr, add bool, v uint64) bool
}

// Mark is a point in a stream's order; read it after a Sync.
type Mark interface {
	// Since returns the time from earlier to this mark.
	Since(earlier Mark) (time.Duration, error)
}

type hostMark struct{ t time.Time }

func (m *hostMark) Since(earlier Mark) (time.Duration, error) {
	e, ok := earlier.(*hostMark)
	if !ok {
		return 0, fmt.Errorf("marks of different streams")
	}
	if m.t.IsZero() || e.t.IsZero() {
		return 0, fmt.Errorf("mark not reached yet (sync first)")
	}
	return m.t.Sub(e.t), nil
}

// ErrTimeout is the cause passed to WaitSpec.Fail when time ran out, and
// ErrMismatch when the value seen can never satisfy the wait (see
// WaitSpec.Mismatch).
var (
	ErrTimeout  = errors.New("timed out")
	ErrMismatch = errors.New("a peer's value for this step does not match")
)

// Stream is an ordered queue of operations of one rank. Enqueue calls
// return at once; Sync blocks until everything enqueued has run and returns
// the first error any operation hit since the last Sync. After an error the
// stream skips the operations queued behind it, up to the Sync that reports it.
type Stream interface {
	// Copy moves n bytes from src to dst.
	Copy(dst, src Addr, n uint64)
	// Store64 writes v to dst after every earlier operation's data is visible (release).
	Store64(dst Addr, v uint64)
	// Add64 atomically adds v to dst, release-ordered like Store64.
	Add64(dst Addr, v uint64)
	// Wait blocks the stream until the condition holds, the timeout passes or the job aborts.
	Wait(w WaitSpec)
	// Host runs fn on the stream, in order; its error stops the stream.
	Host(fn func() error)
	// Mark enqueues a time mark (a CUDA event on a GPU).
	Mark() Mark
	// Sync waits for everything enqueued so far.
	Sync(ctx context.Context) error
	// Interrupt fails the running wait and drops everything queued with
	// cause; the stream stays usable and the next Sync reports cause.
	Interrupt(cause error)
	// Close stops the stream after what is queued has run.
	Close()
}

type opKind uint8

const (
	opCopy opKind = iota
	opStore
	opAdd
	opWait
	opHost
	opRemote
)

type hostOp struct {
	kind opKind
	dst  Addr
	src  Addr
	n    uint64
	v    uint64
	wait *WaitSpec
	fn   func() error
	rop  *RemoteOp
	gen  uint64 // interrupt generation at enqueue
}

// HostStream is the host backend's Stream: a goroutine drains the queue.
// Copies and stores that find the queue empty run at once on the caller's
// goroutine (the order is the same; only waits and what follows them run on
// the worker), which keeps signal latency low.
type HostStream struct {
	abort *Abort
	// spin is how many times a wait polls before it starts yielding the
	// processor; small when there are more ranks than cores.
	spin int

	mu      sync.Mutex
	q       []hostOp
	busy    bool // the worker holds ops not yet done
	err     error
	closed  bool
	wake    chan struct{}
	idle    chan struct{} // closed and replaced when the queue drains
	gen     atomic.Uint64 // interrupt generation
	cause   atomic.Pointer[error]
	stopped chan struct{}
	rem     remoteState // operations on network peers (stream_remote.go)
}

// NewHostStream starts a stream whose waits also end when abort is set.
// With oversubscribed (more busy ranks than cores) waits give up the
// processor almost at once instead of spinning.
func NewHostStream(abort *Abort, oversubscribed bool) *HostStream {
	s := &HostStream{abort: abort, spin: 2000, wake: make(chan struct{}, 1), idle: make(chan struct{}), stopped: make(chan struct{})}
	if oversubscribed {
		s.spin = 16
	}
	close(s.idle) // not busy
	go s.run()
	return s
}

func (s *HostStream) enqueue(op hostOp) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	op.gen = s.gen.Load()
	if !s.busy && len(s.q) == 0 && op.kind != opWait && op.kind != opHost && s.rem.inline(&op) {
		// Nothing ahead of it: run it here, in order, at once.
		if s.err == nil {
			if err := s.exec(&op); err != nil {
				s.err = err
			}
		}
		s.mu.Unlock()
		return
	}
	if !s.busy {
		s.busy = true
		s.idle = make(chan struct{})
	}
	s.q = append(s.q, op)
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// exec runs a non-blocking op; the caller holds mu or is the worker.
func (s *HostStream) exec(op *hostOp) error {
	if op.kind == opRemote {
		return s.runRemote(op)
	}
	if err := s.settleRemote(op.gen); err != nil {
		return err
	}
	switch op.kind {
	case opCopy:
		copy(HostBytes(op.dst, op.n), HostBytes(op.src, op.n))
	case opStore:
		atomic.StoreUint64(hostU64(op.dst), op.v)
	case opAdd:
		atomic.AddUint64(hostU64(op.dst), op.v)
	}
	return nil
}

func (s *HostStream) run() {
	defer close(s.stopped)
	s.mu.Lock()
	for {
		if len(s.q) == 0 {
			if s.busy {
				s.busy = false
				close(s.idle)
			}
			if s.closed {
				s.mu.Unlock()
				return
			}
			s.mu.Unlock()
			<-s.wake
			s.mu.Lock()
			continue
		}
		op := s.q[0]
		s.q[0] = hostOp{}
		s.q = s.q[1:]
		failed := s.err != nil
		s.mu.Unlock()
		var err error
		if !failed && op.gen == s.gen.Load() {
			switch op.kind {
			case opWait:
				err = s.waitFor(op.wait, op.gen)
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
	return sum, w.Cmp.Holds(sum, w.Value)
}

// waitFor spins, then yields, then sleeps with growing pauses, so that many
// ranks on few cores all make progress.
func (s *HostStream) waitFor(w *WaitSpec, gen uint64) error {
	if _, ok := s.observe(w); ok {
		return nil
	}
	var (
		v  uint64
		ok bool
	)
	start := time.Now()
	pause := time.Microsecond
	for i := 0; ; i++ {
		s.rem.progress()
		v, ok = s.observe(w)
		if ok {
			return nil
		}
		if i < s.spin {
			continue
		}
		if i%64 == 0 {
			if err := s.abort.Err(); err != nil {
				return w.Fail(v, err)
			}
			if w.Mismatch != nil && w.Mismatch(v) {
				return w.Fail(v, ErrMismatch)
			}
			if s.gen.Load() != gen {
				return w.Fail(v, s.interruptCause())
			}
			if time.Since(start) > w.Timeout {
				return w.Fail(v, ErrTimeout)
			}
		}
		if i < s.spin+20000 {
			// Let other goroutines of this process, then other processes,
			// run, and look again.
			if i%2 == 0 {
				runtime.Gosched()
			} else {
				schedYield()
			}
			continue
		}
		time.Sleep(pause)
		if pause < 50*time.Microsecond {
			pause *= 2
		}
	}
}

func (s *HostStream) interruptCause() error {
	if p := s.cause.Load(); p != nil {
		return *p
	}
	return errors.New("interrupted")
}

// schedYield gives the processor to any other runnable thread.
func schedYield() { _, _, _ = unix.RawSyscall(unix.SYS_SCHED_YIELD, 0, 0, 0) }

// Copy implements Stream.
func (s *HostStream) Copy(dst, src Addr, n uint64) {
	s.enqueue(hostOp{kind: opCopy, dst: dst, src: src, n: n})
}

// Store64 implements Stream.
func (s *HostStream) Store64(dst Addr, v uint64) { s.enqueue(hostOp{kind: opStore, dst: dst, v: v}) }

// Add64 implements Stream.
func (s *HostStream) Add64(dst Addr, v uint64) { s.enqueue(hostOp{kind: opAdd, dst: dst, v: v}) }

// Wait implements Stream.
func (s *HostStream) Wait(w WaitSpec) { s.enqueue(hostOp{kind: opWait, wait: &w}) }

// Host implements Stream.
func (s *HostStream) Host(fn func() error) { s.enqueue(hostOp{kind: opHost, fn: fn}) }

// Mark implements Stream.
func (s *HostStream) Mark() Mark {
	m := &hostMark{}
	s.Host(func() error { m.t = time.Now(); return nil })
	return m
}

// Sync implements Stream.
func (s *HostStream) Sync(ctx context.Context) error {
	s.flushRemote()
	for i := 0; ; i++ {
		s.mu.Lock()
		idle := !s.busy && len(s.q) == 0
		ch := s.idle
		if idle {
			err := s.err
			s.err = nil
			s.mu.Unlock()
			return err
		}
		s.mu.Unlock()
		if i < s.spin/10 {
			runtime.Gosched()
			continue
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("sync: %w", context.Cause(ctx))
		}
	}
}

// Interrupt implements Stream.
func (s *HostStream) Interrupt(cause error) {
	s.mu.Lock()
	s.cause.Store(&cause)
	s.gen.Add(1)
	for i := range s.q {
		s.q[i] = hostOp{}
	}
	s.q = s.q[:0]
	if s.err == nil {
		s.err = cause
	}
	s.mu.Unlock()
}

// Close implements Stream.
func (s *HostStream) Close() {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.closed = true
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
	<-s.stopped
}

// TimeoutHint is a timeout with an explanation of why waits may time out
// here (ranks that share a GPU without MPS, say); errors.Is matches it
// with ErrTimeout.
type TimeoutHint struct{ Hint string }

func (e *TimeoutHint) Error() string { return "timed out (" + e.Hint + ")" }

// Is makes errors.Is(e, ErrTimeout) hold.
func (e *TimeoutHint) Is(target error) bool { return target == ErrTimeout }

// HintOf returns the explanation a timeout carries, or "".
func HintOf(err error) string {
	var h *TimeoutHint
	if errors.As(err, &h) {
		return h.Hint
	}
	return ""
}
