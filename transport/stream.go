package transport

import (
	"context"
	"errors"
	"fmt"
	"time"

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
	// Describe, used when Fail is nil, builds that error from the spec
	// itself, Note saying which wait it is: a function made once (per
	// window, say), so that enqueuing a wait allocates nothing.
	Describe func(w WaitSpec, observed uint64, cause error) error
	Note     WaitNote
	// Mismatch, when set, says that an observed value can never turn into
	// one that satisfies the wait (a peer's tag for the same step with
	// other arguments): the wait then fails at once with ErrMismatch
	// instead of at its timeout, and a value it matches fails the wait
	// even where the comparison holds (a ">=" count that a tag ending the
	// step otherwise would pass). Host streams look at it; device waits
	// that need it check their tags themselves.
	// It gets the awaited value and the one observed.
	Mismatch func(want, observed uint64) bool
	// Bell, when set, is the waiting rank's bell (see RingBell): a host
	// wait that has spun and yielded long enough sleeps on it until a
	// signaller rings it. Device streams ignore it.
	Bell Addr
	// Writers, when set, is the rank that writes each slot (-1: this
	// rank's own, final once the wait runs): a host stream ends the wait
	// with a PeerEndedError once it cannot hold because the ranks that
	// could still make it hold have ended (Abort.SetEnded). Device streams
	// ignore it.
	Writers []int
}

// PeerEndedError is why a wait cannot hold: Rank, which it waited on,
// has ended (Why) and writes nothing more.
type PeerEndedError struct {
	Rank int
	Why  string
}

func (e *PeerEndedError) Error() string {
	return fmt.Sprintf("rank %d has ended (%s) and writes nothing more", e.Rank, e.Why)
}

// WaitNote is what a WaitSpec's Describe knows of one wait: which one
// (Op and its arguments, as the describer defines them) and where it was
// enqueued (File and Line; File "" for nowhere in particular).
type WaitNote struct {
	Op      uint8
	A, B, C uint64
	File    string
	Line    int
}

// Failed is the error of a wait that did not succeed: Fail's, else
// Describe's, else cause itself.
func (w *WaitSpec) Failed(observed uint64, cause error) error {
	switch {
	case w.Fail != nil:
		return w.Fail(observed, cause)
	case w.Describe != nil:
		return w.Describe(*w, observed, cause)
	}
	return cause
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

// Ringer is a stream whose signals can wake a wait asleep on the
// receiver's bell (the host stream). Store64Ring and Add64Ring are Store64
// and Add64 followed by RingBell(bell).
type Ringer interface {
	Store64Ring(dst Addr, v uint64, bell Addr)
	Add64Ring(dst Addr, v uint64, bell Addr)
}

// PutRinger is a stream that fuses a put, its signal and the ring of the
// receiver's bell into one operation (the host stream): PutSignalRing is
// Copy(dst, src, n), then Add64Ring(slot, v, bell) (add) or
// Store64Ring(slot, v, bell).
type PutRinger interface {
	PutSignalRing(dst, src Addr, n uint64, slot Addr, add bool, v uint64, bell Addr)
}

// CallerSettler is a stream that can run its local operations behind
// posted network ones on the caller (the host stream's SettleOnCaller).
type CallerSettler interface {
	SettleOnCaller()
}

// HostReducer is a stream that runs reductions itself, as operations of
// its own (the host stream), where others run them as host functions.
type HostReducer interface {
	Reduce(dst, src Addr, count uint64, t DType, op RedOp)
}

// CachedCopier is a stream that can copy so that the data stays in the
// caches (the host stream): CopyCached is Copy through MemmoveCached, for
// ranges that do not overlap.
type CachedCopier interface {
	CopyCached(dst, src Addr, n uint64)
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

// StalledError is a network operation given up on after its timeout,
// counted from when it was posted: the connection to its peer was closed,
// which cancelled what was in flight on it.
type StalledError struct{ Msg string }

func (e *StalledError) Error() string { return e.Msg }

// Failer is a stream that can tell, without waiting, that one of its
// operations failed since the last Sync (which then reports it). Loops
// that enqueue many operations look at it to stop early.
type Failer interface {
	Failed() error
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
