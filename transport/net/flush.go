package net

/*
#include "lc_ucx.h"
*/
import "C"
import (
	"fmt"
	"runtime"
	"time"
	"unsafe"

	"github.com/luacoll/luacoll/transport"
	"github.com/luacoll/luacoll/transport/knobs"
)

// waitLoop progresses the worker until done reports true (under mu),
// cancel returns an error, or timeout passes; late describes what is late.
func (t *Transport) waitLoop(cancel func() error, timeout time.Duration, done func() (bool, error), late func() error) error {
	start := time.Now()
	pause := time.Microsecond
	for i := 0; ; i++ {
		t.mu.Lock()
		if t.worker == nil {
			t.mu.Unlock()
			return nil
		}
		t.driven.Store(time.Now().UnixNano())
		t.progressLocked()
		ok, err := done()
		var lateErr error
		if !ok && err == nil && (i%64 == 63) && time.Since(start) > timeout {
			lateErr = late()
		}
		t.mu.Unlock()
		if ok || err != nil {
			return err
		}
		if lateErr != nil {
			return lateErr
		}
		if cancel != nil && i%16 == 15 {
			if err := cancel(); err != nil {
				return err
			}
		}
		if i < 1000 {
			runtime.Gosched()
			continue
		}
		time.Sleep(pause)
		if pause < 100*time.Microsecond {
			pause *= 2
		}
	}
}

// Quiet implements transport.Network.
//
// An operation still in flight past its own timeout (counted from when
// it was posted) is given up on: the connection to its peer is cut, which
// cancels what is in flight on it, and Quiet returns once those ended,
// naming the operation; the cut is not a failure of the peer's.
func (t *Transport) Quiet(cancel func() error, timeout time.Duration) error {
	var overdue error
	err := t.waitLoop(cancel, timeout, func() (bool, error) {
		t.cutOverdueLocked(&overdue)
		// Once one was cut, the cancelled requests are waited for and
		// their errors are that one's.
		if err := t.reapLocked(); err != nil && overdue == nil {
			return false, err
		}
		if err := t.badErr(); err != nil {
			return false, err
		}
		for _, p := range t.pending {
			if err := t.epErr(t.eps[p.peer]); err != nil && overdue == nil {
				return false, fmt.Errorf("%s: %w", p.what, err)
			}
		}
		return len(t.pending) == 0, nil
	}, func() error {
		p := t.pending[0]
		return fmt.Errorf("%s: not completed locally within %v (rank %d; %d operations outstanding)", p.what, timeout, p.peer, len(t.pending))
	})
	if overdue != nil {
		return overdue
	}
	return err
}

// cutOverdueLocked cuts the connection to the peer of every pending
// operation past its due time (cutPeerLocked: what is in flight to it is
// cancelled) and sets *overdue to the first one's error.
func (t *Transport) cutOverdueLocked(overdue *error) {
	now := time.Now()
	for _, p := range t.pending {
		if p.due.IsZero() || now.Before(p.due) {
			continue
		}
		if e := t.eps[p.peer]; e == nil || e.h == nil {
			continue // cut already: its requests end cancelled
		}
		t.cutPeerLocked(p.peer)
		if *overdue == nil {
			*overdue = &transport.StalledError{Msg: fmt.Sprintf("%s: not completed within %v of being posted; the connection to rank %d is closed",
				p.what, p.limit, p.peer)}
		}
	}
}

// ackWait is how long a flush waits for a peer's own messages to say that
// it applied this rank's put_signal messages before it asks (a fenced read
// and an endpoint flush, a round trip): in an exchange, such as a
// ping-pong's or an all-gather's, the peer's next message says so about
// when the answer to asking would come, and asking would hold this rank
// up for that round trip instead.
var ackWait = func() time.Duration {
	return knobs.NetAckWait.Or(30 * time.Microsecond)
}()

// askAckLocked sends e's peer an empty message that asks it to acknowledge
// every message of this rank it applied, once it applied this one.
func (t *Transport) askAckLocked(e *endpoint) error {
	if err := t.fenceLocked(); err != nil {
		return err
	}
	peer := e.peer
	operand := C.calloc(1, C.sizeof_lc_ps_hdr)
	h := (*C.lc_ps_hdr)(operand)
	h.rank, h.op = C.int32_t(t.rank), C.LC_SIG_ACKREQ
	h.ack = C.lc_am_applied(t.am, C.int(peer))
	h.seq = C.uint64_t(t.amSent[peer] + 1)
	p := C.lc_ucx_am_send(t.lib.u, e.h, h, nil, 0)
	switch s := C.lc_ptr_status(p); s {
	case C.LC_OK:
		C.free(operand)
	case C.LC_INPROGRESS:
		t.pending = append(t.pending, pending{req: p, peer: peer, what: "flush", operand: operand})
	default:
		C.free(operand)
		return fmt.Errorf("flush to rank %d: %w", peer, t.lib.fail("ucp_am_send_nbx", s))
	}
	t.amSent[peer]++
	return nil
}

// ackSkipFlushes is how many flushes skip the wait for a peer's
// acknowledgement once that wait ran out.
const ackSkipFlushes = 16

// awaitAcksLocked drives the worker (mu held) for up to ackWait while a
// peer written only with put_signal messages has not yet said that it
// applied them all. It reports false when the network closed meanwhile (it
// lets go of mu now and then).
func (t *Transport) awaitAcksLocked() bool {
	if ackWait <= 0 || t.am == nil {
		return true
	}
	unacked := func(peer int) bool {
		return t.dirty[peer] && !t.rma[peer] && t.messagesOutLocked(peer)
	}
	waiting := func() bool {
		for peer := range t.dirty {
			if t.ackSkip[peer] == 0 && unacked(peer) {
				return true
			}
		}
		return false
	}
	for peer := range t.ackSkip {
		if t.ackSkip[peer] > 0 && unacked(peer) {
			t.ackSkip[peer]--
		}
	}
	var deadline time.Time
	for i := 0; waiting(); i++ {
		if i&15 == 15 {
			if deadline.IsZero() {
				deadline = time.Now().Add(ackWait)
			} else if time.Now().After(deadline) {
				// A peer that sends nothing back (a one-way stream of
				// put_signals) is asked at once for its next flushes.
				for peer := range t.dirty {
					if t.ackSkip[peer] == 0 && unacked(peer) {
						t.ackSkip[peer] = ackSkipFlushes
					}
				}
				return true
			}
			// Let a rank that shares this CPU run (it may be the peer).
			t.mu.Unlock()
			runtime.Gosched()
			t.mu.Lock()
			if t.worker == nil {
				return false
			}
		}
		t.progressLocked()
	}
	return true
}

// Flush implements transport.Network: ucp_ep_flush_nbx to every peer
// written since its last flush.
func (t *Transport) Flush(cancel func() error, timeout time.Duration) error {
	// Puts sent by rendezvous are done at the target once it says so;
	// the messages after them are then applied as they arrive, which the
	// read below proves.
	if err := t.awaitRndvAcks(cancel, timeout); err != nil {
		return err
	}
	t.mu.Lock()
	if t.worker == nil {
		t.mu.Unlock()
		return nil
	}
	if !t.awaitAcksLocked() {
		t.mu.Unlock()
		return nil // closed meanwhile
	}
	var fw flushWork
	err := t.startFlushesLocked(&fw)
	t.mu.Unlock()
	werr := t.awaitFlushes(cancel, timeout, &fw)
	if err == nil {
		err = werr
	}
	t.endFlush(err, &fw)
	return err
}

// flushReq is an endpoint flush in progress, or an acknowledgement asked
// for.
type flushReq struct {
	peer int
	req  unsafe.Pointer
	read uint64 // the messages an acknowledgement must cover (asked)
}

// flushWork is what a flush waits for.
type flushWork struct {
	fl, asked []flushReq // endpoint flushes; acknowledgements asked for (read: up to which message)
	cleared   []int      // peers marked clean below, dirty again if the flush fails
}

// awaitRndvAcks waits until every peer written since its last flush
// acknowledged the puts sent to it by rendezvous; one that does not
// within timeout has its connection cut.
func (t *Transport) awaitRndvAcks(cancel func() error, timeout time.Duration) error {
	return t.waitLoop(cancel, timeout, func() (bool, error) {
		for peer, d := range t.dirty {
			if !d {
				continue
			}
			if err := t.nackErr(peer); err != nil {
				return false, fmt.Errorf("flush to rank %d: %w", peer, err)
			}
			if t.rndvPendingLocked(peer) {
				if err := t.epErr(t.eps[peer]); err != nil {
					return false, fmt.Errorf("flush to rank %d: %w", peer, err)
				}
				return false, t.badErr()
			}
		}
		return true, nil
	}, func() error {
		for peer, d := range t.dirty {
			if d && t.rndvPendingLocked(peer) {
				// The put may never complete (the link is down, the peer
				// stopped): cancel it, so that its source is free again
				// and the caller's wait for that ends now too.
				t.cutPeerLocked(peer)
				return fmt.Errorf("%s: rank %d did not acknowledge it within %v; the connection to rank %d is closed",
					t.rndvWhat[peer], peer, timeout, peer)
			}
		}
		return nil
	})
}

// startFlushesLocked asks every peer written since its last flush for
// what proves its writes done (an acknowledgement of its messages, an
// endpoint flush for RMA), or marks it clean when its own messages said
// so already; it notes in fw what to wait for.
func (t *Transport) startFlushesLocked(fw *flushWork) error {
	err := t.badErr()
	for peer, d := range t.dirty {
		if !d || err != nil {
			continue
		}
		e := t.eps[peer]
		if err = t.epErr(e); err != nil {
			break
		}
		if !t.rma[peer] && t.amSent[peer] <= max(uint64(C.lc_am_acked(t.am, C.int(peer))), t.amDone[peer]) {
			// Only put_signal messages, and the peer's own messages said
			// it applied every one: they are done there, no flush needed
			// (a ping-pong's sync then costs no network round trip).
			t.dirty[peer] = false
			continue
		}
		if t.amSent[peer] > max(uint64(C.lc_am_acked(t.am, C.int(peer))), t.amDone[peer]) {
			// put_signal messages are done at the target once it says
			// so: a message that asks it to, applied after them.
			if err = t.askAckLocked(e); err != nil {
				break
			}
			fw.asked = append(fw.asked, flushReq{peer: peer, read: t.amSent[peer]})
		}
		if !t.rma[peer] {
			t.dirty[peer] = false
			fw.cleared = append(fw.cleared, peer)
			continue
		}
		p := C.lc_ucx_ep_flush(t.lib.u, e.h)
		switch s := C.lc_ptr_status(p); s {
		case C.LC_OK:
		case C.LC_INPROGRESS:
			fw.fl = append(fw.fl, flushReq{peer, p, 0})
		default:
			err = fmt.Errorf("flush to rank %d: %w", peer, t.lib.fail("ucp_ep_flush_nbx", s))
		}
		if err != nil {
			break
		}
		t.dirty[peer] = false
		t.rma[peer] = false
		fw.cleared = append(fw.cleared, peer)
	}
	return err
}

// awaitFlushes waits until the endpoint flushes and acknowledgements in
// fw, and every pending request, completed; fw keeps those that did not.
func (t *Transport) awaitFlushes(cancel func() error, timeout time.Duration, fw *flushWork) error {
	return t.waitLoop(cancel, timeout, func() (bool, error) {
		keep := fw.fl[:0]
		var first error
		for _, f := range fw.fl {
			s := C.lc_ucx_req_status(t.lib.u, f.req)
			if s == C.LC_INPROGRESS {
				if e := t.epErr(t.eps[f.peer]); e != nil && first == nil {
					first = fmt.Errorf("flush to rank %d: %w", f.peer, e)
				}
				keep = append(keep, f)
				continue
			}
			C.lc_ucx_req_free(t.lib.u, f.req)
			if s != C.LC_OK && first == nil {
				first = fmt.Errorf("flush to rank %d: %w", f.peer, t.lib.fail("ucp_ep_flush_nbx", s))
			}
			if s == C.LC_OK && f.read > 0 {
				t.amDone[f.peer] = max(t.amDone[f.peer], f.read)
			}
		}
		fw.fl = keep
		waitAck := fw.asked[:0]
		for _, a := range fw.asked {
			if uint64(C.lc_am_acked(t.am, C.int(a.peer))) >= a.read {
				t.amDone[a.peer] = max(t.amDone[a.peer], a.read)
				continue
			}
			if first == nil {
				if e := t.nackErr(a.peer); e != nil {
					first = fmt.Errorf("flush to rank %d: %w", a.peer, e)
				} else if e := t.epErr(t.eps[a.peer]); e != nil {
					first = fmt.Errorf("flush to rank %d: %w", a.peer, e)
				}
			}
			waitAck = append(waitAck, a)
		}
		fw.asked = waitAck
		if rerr := t.reapLocked(); first == nil {
			first = rerr
		}
		return len(fw.fl) == 0 && len(fw.asked) == 0 && len(t.pending) == 0, first
	}, func() error {
		peer := -1
		if len(fw.fl) > 0 {
			peer = fw.fl[0].peer
		} else if len(fw.asked) > 0 {
			peer = fw.asked[0].peer
		} else if len(t.pending) > 0 {
			peer = t.pending[0].peer
		}
		return fmt.Errorf("flush: rank %d did not complete within %v", peer, timeout)
	})
}

// endFlush marks the network fenced after a flush that succeeded, or the
// peers it cleared dirty again after one that failed (err), and lets UCX
// finish alone the endpoint flushes given up on.
func (t *Transport) endFlush(err error, fw *flushWork) {
	t.mu.Lock()
	if err == nil {
		t.unfenced, t.rmaUnfenced = false, false
	} else {
		for _, peer := range fw.cleared { // nothing proven: the next flush tries again
			t.dirty[peer], t.rma[peer] = true, true
		}
	}
	for _, f := range fw.fl { // given up on: let UCX finish them alone
		if t.worker != nil {
			C.lc_ucx_req_free(t.lib.u, f.req)
		}
	}
	t.mu.Unlock()
}
