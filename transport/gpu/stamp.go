package gpu

import (
	"sync"
	"time"

	"github.com/luacoll/luacoll/cuda"
	"github.com/luacoll/luacoll/transport"
)

// Trace stamps on a CUDA stream are timing events. The device's clock is
// tied to the host's by anchors: an event recorded on an idle stream and
// watched until it completes, whose host time is then known to within a
// query or two (see anchorWindow). A stamp's time is its anchor's plus the
// events' elapsed time. Anchors are renewed about every second while the
// stream is idle at a stamp, so drift between the clocks stays small.
// Stamps turn fused launches off: recording an event launches a held
// put_signal or wait alone first (see flushLocked).

// anchorEvery is how old an anchor may get before a stamp that finds the
// stream idle takes a new one; anchorSpin bounds the watch of one. A watch
// that knows the completion only to a window wider than anchorWindow is
// repeated, anchorTries watches in all, and the narrowest is kept.
const (
	anchorEvery  = time.Second
	anchorSpin   = 10 * time.Millisecond
	anchorWindow = 20 * time.Microsecond
	anchorTries  = 4
)

// cudaStamps is a CUDA stream's stamping state; mu guards it (taken inside
// s.mu, or alone).
type cudaStamps struct {
	mu      sync.Mutex
	seq     uint64        // position of the last event recorded
	free    []*cuda.Event // resolved stamps' events, ready for reuse
	all     []*cuda.Event // every event made here, destroyed with the stream
	anchors []cudaAnchor  // in stream order
	closed  bool
}

type cudaAnchor struct {
	seq uint64
	ev  *cuda.Event
	at  time.Time
}

// cudaStamp is one stamp; ev is nil when it was never recorded (the stream
// had failed, was capturing, or the driver refused).
type cudaStamp struct {
	s    *CUDAStream
	ev   *cuda.Event
	seq  uint64
	at   time.Time
	done bool
}

// Stamp implements transport.Stamper.
func (s *CUDAStream) Stamp() transport.Stamp {
	st := &cudaStamp{s: s}
	s.enqueue(func() error {
		if s.s.Capturing() {
			return nil
		}
		s.maybeAnchorLocked()
		ev, seq := s.stampEvent()
		if ev == nil {
			return nil
		}
		if err := ev.Record(s.s); err != nil {
			s.stamps.mu.Lock()
			s.stamps.free = append(s.stamps.free, ev)
			s.stamps.mu.Unlock()
			return nil // a trace must not fail the stream
		}
		st.ev, st.seq = ev, seq
		return nil
	})
	return st
}

// stampEvent returns an event to record and its position in the stream.
func (s *CUDAStream) stampEvent() (*cuda.Event, uint64) {
	t := &s.stamps
	t.mu.Lock()
	defer t.mu.Unlock()
	var ev *cuda.Event
	if n := len(t.free); n > 0 {
		ev, t.free = t.free[n-1], t.free[:n-1]
	} else {
		var err error
		if ev, err = s.b.drv.NewTimingEvent(); err != nil {
			return nil, 0
		}
		t.all = append(t.all, ev)
	}
	t.seq++
	return ev, t.seq
}

// maybeAnchorLocked takes an anchor when there is none or the last is old,
// and the stream is idle (s.mu is held, the context current, the held
// operation launched).
func (s *CUDAStream) maybeAnchorLocked() {
	t := &s.stamps
	t.mu.Lock()
	n := len(t.anchors)
	stale := n == 0 || time.Since(t.anchors[n-1].at) > anchorEvery
	t.mu.Unlock()
	if !stale {
		return
	}
	if idle, err := s.s.Query(); err != nil || !idle {
		return
	}
	var (
		ev    *cuda.Event
		seq   uint64
		at    time.Time
		width time.Duration // of the window at comes from
	)
	for try := 0; try < anchorTries && (ev == nil || width > anchorWindow); try++ {
		e, q := s.stampEvent()
		if e == nil {
			break
		}
		// The event completes between the start of the last query that
		// found it pending (or the record) and the end of the one that
		// finds it done: its time is that window's middle. A thread
		// preempted in it (50 us and more on a busy host) makes the
		// window wide: then it is watched again, and the narrowest
		// window of the watches is kept.
		lo := time.Now()
		if err := e.Record(s.s); err != nil {
			t.mu.Lock()
			t.free = append(t.free, e)
			t.mu.Unlock()
			break
		}
		pending := false
		for start := lo; ; {
			qt := time.Now()
			done, err := e.Query()
			if err != nil || (!done && qt.Sub(start) > anchorSpin) {
				// Its time is unknown; the event stays off the free
				// list (it may not have completed) until the stream
				// closes.
				pending = true
				break
			}
			if done {
				break
			}
			lo = qt
		}
		if pending {
			break
		}
		hi := time.Now()
		if w := hi.Sub(lo); ev == nil || w < width {
			if ev != nil {
				t.mu.Lock()
				t.free = append(t.free, ev)
				t.mu.Unlock()
			}
			ev, seq, at, width = e, q, lo.Add(w/2), w
		} else {
			t.mu.Lock()
			t.free = append(t.free, e)
			t.mu.Unlock()
		}
	}
	if ev == nil {
		return
	}
	t.mu.Lock()
	t.anchors = append(t.anchors, cudaAnchor{seq: seq, ev: ev, at: at})
	if len(t.anchors) > 2 {
		// Stamps resolve in stream order, so older anchors than the last
		// two are not needed any more; their events are reused.
		old := t.anchors[0]
		t.anchors = append(t.anchors[:0], t.anchors[1:]...)
		t.free = append(t.free, old.ev)
	}
	t.mu.Unlock()
}

// Reached implements Stamp: the event's time relative to the latest anchor
// recorded before it (or the first one after it).
func (st *cudaStamp) Reached() (time.Time, bool) {
	if st.done {
		return st.at, true
	}
	if st.ev == nil {
		return time.Time{}, false
	}
	s := st.s
	defer onThread()()
	t := &s.stamps
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed || s.b.current() != nil {
		return time.Time{}, false
	}
	if done, err := st.ev.Query(); err != nil || !done {
		return time.Time{}, false
	}
	var a *cudaAnchor
	for i := range t.anchors {
		if a == nil || t.anchors[i].seq <= st.seq {
			a = &t.anchors[i]
		}
	}
	if a == nil {
		return time.Time{}, false // no anchor yet: try again later
	}
	var d time.Duration
	if a.seq <= st.seq {
		ms, err := a.ev.ElapsedMs(st.ev)
		if err != nil {
			return time.Time{}, false
		}
		d = time.Duration(float64(ms) * float64(time.Millisecond))
	} else {
		ms, err := st.ev.ElapsedMs(a.ev)
		if err != nil {
			return time.Time{}, false
		}
		d = -time.Duration(float64(ms) * float64(time.Millisecond))
	}
	st.at, st.done = a.at.Add(d), true
	t.free = append(t.free, st.ev)
	st.ev = nil
	return st.at, true
}

// closeStamps destroys the stamps' events (the stream is drained).
func (s *CUDAStream) closeStamps() {
	t := &s.stamps
	t.mu.Lock()
	defer t.mu.Unlock()
	t.closed = true
	for _, ev := range t.all {
		_ = ev.Destroy()
	}
	t.all, t.free, t.anchors = nil, nil, nil
}

var _ transport.Stamper = (*CUDAStream)(nil)
