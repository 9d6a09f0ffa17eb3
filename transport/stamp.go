package transport

import (
	"sync/atomic"
	"time"
)

// Stamp is a point in a stream's order whose time a trace reads: the
// moment everything enqueued before it had completed.
type Stamp interface {
	// Reached returns that moment on this host's clock, and false while
	// the stream has not passed the stamp (or never will: an error or an
	// interrupt dropped it). It does not block. Call it from the goroutine
	// that enqueues on the stream.
	Reached() (time.Time, bool)
}

// Stamper is a stream that can stamp its progress for a trace. Streams
// that are not Stampers are traced by enqueue time only.
type Stamper interface {
	// Stamp enqueues a stamp behind everything enqueued so far.
	Stamp() Stamp
}

// stampEpoch is what host stamps count from (a time.Time with a monotonic
// reading, so that stamps do not move with the wall clock). Set once.
var stampEpoch = time.Now()

// hostStamp holds 1 + nanoseconds since stampEpoch once reached, else 0.
type hostStamp struct{ ns atomic.Int64 }

func (h *hostStamp) set() { h.ns.Store(int64(time.Since(stampEpoch)) + 1) }

// Reached implements Stamp.
func (h *hostStamp) Reached() (time.Time, bool) {
	n := h.ns.Load()
	if n == 0 {
		return time.Time{}, false
	}
	return stampEpoch.Add(time.Duration(n - 1)), true
}

// Stamp implements Stamper. A stamp that finds nothing queued or running
// is reached at once on the caller's goroutine (the stream keeps running
// copies and stores inline); otherwise the stream's goroutine stamps it
// when it gets there.
func (s *HostStream) Stamp() Stamp {
	st := &hostStamp{}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return st
	}
	if s.owner == ownNone {
		if s.err == nil {
			st.set()
		}
		s.mu.Unlock()
		return st
	}
	s.mu.Unlock()
	s.enqueue(&hostOp{kind: opHost, fn: func() error { st.set(); return nil }})
	return st
}

var _ Stamper = (*HostStream)(nil)
