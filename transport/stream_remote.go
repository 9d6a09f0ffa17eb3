package transport

import (
	"errors"
	"sync/atomic"
	"time"
)

// remoteState is what a HostStream keeps about operations on network
// peers (RemoteStream).
type remoteState struct {
	nets atomic.Pointer[[]Network] // the networks it posted to or waits on
	// outstanding: posted operations may not have completed locally.
	outstanding atomic.Bool
	// enqueued counts remote operations enqueued; flushed is the count
	// the last enqueued flush covers (Sync flushes when they differ).
	enqueued, flushed atomic.Uint64
	timeout           atomic.Int64 // the longest Timeout of a posted op
	// locals are the local bytes of the posted operations that may not
	// have completed locally (the worker's, or the caller's that holds
	// the stream): a get writes them, a put reads them until then.
	locals []localUse
}

// localUse is the local memory [lo, hi) of a posted operation; write for
// a get's destination, else a put's source.
type localUse struct {
	lo, hi Addr
	write  bool
}

// maxLocalUses bounds locals: past it a post settles the ones before.
const maxLocalUses = 256

// hazard reports whether posting an operation on local bytes [lo, hi)
// (write: a get's destination) must wait for the posted ones to complete
// locally: it would read what a get still writes, or write what a get
// writes or a put still reads. Operations on a network run in order at
// their target, not locally.
func (r *remoteState) hazard(lo, hi Addr, write bool) bool {
	if len(r.locals) >= maxLocalUses {
		return true
	}
	for _, u := range r.locals {
		if u.lo < hi && lo < u.hi && (u.write || write) {
			return true
		}
	}
	return false
}

// inline reports whether op may run on the caller at once: a local op
// that reads or writes memory must wait for posted operations first, and
// a flush blocks, so both go to the worker then. A wait only reads its
// own slots, which posted operations do not touch: it runs on the caller
// as on a stream with nothing posted (so a ping-pong's wait for the reply
// needs no hand-off to the worker).
func (r *remoteState) inline(op *hostOp) bool {
	switch op.kind {
	case opRemote:
		return op.rop.Kind != RemoteFlush
	case opWait:
		return true
	}
	return !r.outstanding.Load()
}

func (r *remoteState) list() []Network {
	if p := r.nets.Load(); p != nil {
		return *p
	}
	return nil
}

func (r *remoteState) use(n Network) {
	for {
		old := r.nets.Load()
		var cur []Network
		if old != nil {
			cur = *old
		}
		for _, m := range cur {
			if m == n {
				return
			}
		}
		next := append(append([]Network(nil), cur...), n)
		if r.nets.CompareAndSwap(old, &next) {
			return
		}
	}
}

// active reports whether the stream drives any network.
func (r *remoteState) active() bool {
	p := r.nets.Load()
	return p != nil && len(*p) > 0
}

// progress drives the networks once (waits call it as they poll).
func (r *remoteState) progress() {
	if p := r.nets.Load(); p != nil {
		for _, n := range *p {
			n.Progress()
		}
	}
}

// UseNetwork implements NetworkUser: waits drive n while they poll.
func (s *HostStream) UseNetwork(n Network) { s.rem.use(n) }

// Remote implements RemoteStream.
func (s *HostStream) Remote(op RemoteOp) {
	if op.Kind == RemoteFlush {
		s.rem.flushed.Store(s.rem.enqueued.Load())
	} else {
		s.rem.enqueued.Add(1)
	}
	s.enqueue(&hostOp{kind: opRemote, rop: &op})
}

// cancel ends a network wait when the job aborts or the stream is
// interrupted.
func (s *HostStream) cancel(gen uint64) func() error {
	return func() error {
		if err := s.abort.Err(); err != nil {
			return err
		}
		if s.gen.Load() != gen {
			return s.interruptCause()
		}
		return nil
	}
}

func (s *HostStream) timeout() time.Duration {
	if t := time.Duration(s.rem.timeout.Load()); t > 0 {
		return t
	}
	return 10 * time.Second
}

// runRemote posts op to its network, or flushes every network.
func (s *HostStream) runRemote(op *hostOp) error {
	r := op.rop
	if r.Kind == RemoteFlush {
		for _, n := range s.rem.list() {
			if err := n.Flush(s.cancel(op.gen), max(r.Timeout, s.timeout())); err != nil {
				return ExplainPeerLost(err, s.abort)
			}
		}
		s.rem.outstanding.Store(false)
		s.rem.locals = s.rem.locals[:0]
		return nil
	}
	n := r.Ref.Key.Network()
	s.rem.use(n)
	if t := int64(r.Timeout); t > s.rem.timeout.Load() {
		s.rem.timeout.Store(t)
	}
	if r.N > 0 && (r.Kind == RemoteGet || r.Kind == RemotePut || r.Kind == RemotePutSignal) {
		use := localUse{lo: r.Local, hi: r.Local.Add(r.N), write: r.Kind == RemoteGet}
		if s.rem.outstanding.Load() && s.rem.hazard(use.lo, use.hi, use.write) {
			// A put of what a get brings (or a get into what a put
			// still reads): in stream order, it starts after it.
			if err := s.settleRemote(op.gen); err != nil {
				return err
			}
		}
		s.rem.locals = append(s.rem.locals, use)
	}
	s.rem.outstanding.Store(true)
	return ExplainPeerLost(n.Post(*r), s.abort)
}

// settleRemote waits until every posted operation completed locally, so
// that a local operation after them sees their sources free and their
// destinations filled.
func (s *HostStream) settleRemote(gen uint64) error {
	if !s.rem.outstanding.Load() {
		return nil
	}
	for _, n := range s.rem.list() {
		if err := n.Quiet(s.cancel(gen), s.timeout()); err != nil {
			return ExplainPeerLost(err, s.abort)
		}
	}
	s.rem.outstanding.Store(false)
	s.rem.locals = s.rem.locals[:0]
	return nil
}

// quietRemote waits, whatever happened, until the networks' posted
// operations completed locally or failed (bounded: the longest op
// timeout, at most 5 s; one past its own timeout is cancelled), so that
// none still reads a buffer the caller frees next. Their errors were
// reported already, but for an operation given up on (a StalledError),
// which it returns: it is often why the error being reported happened.
func (s *HostStream) quietRemote() error {
	if !s.rem.outstanding.Load() {
		return nil
	}
	var stalled error
	for _, n := range s.rem.list() {
		var se *StalledError
		if err := n.Quiet(nil, min(s.timeout(), 5*time.Second)); errors.As(err, &se) && stalled == nil {
			stalled = err
		}
	}
	s.rem.outstanding.Store(false)
	s.rem.locals = s.rem.locals[:0]
	return stalled
}

// flushRemote flushes when remote operations were enqueued since the last
// flush, so that Sync returns with every put landed at its target and
// every get's data in place. Sync blocks anyway: when the stream is idle
// the flush runs here, on the caller, else it is enqueued behind the rest.
func (s *HostStream) flushRemote() {
	e := s.rem.enqueued.Load()
	if e == s.rem.flushed.Load() {
		return
	}
	s.rem.flushed.Store(e)
	op := hostOp{kind: opRemote, rop: &RemoteOp{Kind: RemoteFlush, What: "sync: flush"}}
	s.mu.Lock()
	if s.owner == ownNone && !s.closed {
		if s.err != nil {
			// Skipped, as every operation up to the Sync that reports it.
			s.mu.Unlock()
			return
		}
		op.gen = s.gen.Load()
		s.inline(&op)
		return
	}
	s.mu.Unlock()
	s.enqueue(&op)
}
