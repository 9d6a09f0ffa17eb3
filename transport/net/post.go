package net

/*
#include "lc_ucx.h"
*/
import "C"
import (
	"fmt"
	"time"
	"unsafe"

	"github.com/luacoll/luacoll/transport"
)

// Post implements transport.Network: put_nbx, get_nbx, an 8-byte put for
// a store, active messages for put_signals and adds (applied by the
// target in the order sent); a store or add is fenced behind whatever was
// posted before it (ucp_worker_fence), so a signal never lands before its
// data.
func (t *Transport) Post(op transport.RemoteOp) error {
	k, ok := op.Ref.Key.(*key)
	if !ok || k.t != t {
		return fmt.Errorf("%s: the key was not unpacked by this network", op.What)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := t.postableLocked(k, op); err != nil {
		return err
	}
	raddr := C.uint64_t(k.base + op.Ref.Off)
	if ok, err := t.stripedLocked(k, op, raddr); ok {
		return err
	}
	ps, finished, err := t.issueLocked(k, op, raddr)
	if finished || err != nil {
		return err
	}
	return t.trackPostLocked(k, op, ps)
}

// postableLocked reports why nothing can be posted with k now: its key
// was released, its connection failed, a peer sent a malformed message
// or dropped one of this rank's.
func (t *Transport) postableLocked(k *key, op transport.RemoteOp) error {
	if k.rkey == nil {
		return fmt.Errorf("%s: the window's key was released", op.What)
	}
	if err := t.epErr(k.ep); err != nil {
		return fmt.Errorf("%s: %w", op.What, err)
	}
	if err := t.badErr(); err != nil {
		return fmt.Errorf("%s: %w", op.What, err)
	}
	if err := t.nackErr(k.ep.peer); err != nil {
		return fmt.Errorf("%s: %w", op.What, err)
	}
	return nil
}

// posted is a request issueLocked started.
type posted struct {
	p, operand unsafe.Pointer // the request; its header (C memory) or nil
	call       string         // the UCX call, for its error
	amPeer     int            // the peer of a message to count once sent, or -1
	rndv       bool           // a message sent by rendezvous
}

// issueLocked starts op by the protocol its kind and size call for. It
// reports finished when op needs no more (nothing to move, or it was
// posted as other operations).
func (t *Transport) issueLocked(k *key, op transport.RemoteOp, raddr C.uint64_t) (ps posted, finished bool, err error) {
	u := t.lib.u
	ps.amPeer = -1 // a message to count once it is sent
	switch {
	case (op.Kind == transport.RemotePut || op.Kind == transport.RemotePutSignal) && op.N >= rndvMin:
		if err := t.fenceRMALocked(); err != nil {
			return ps, false, fmt.Errorf("%s: %w", op.What, err)
		}
		ps.operand, ps.p = t.sendRndvLocked(k, op, raddr)
		ps.call, ps.amPeer, ps.rndv = "ucp_am_send_nbx (rendezvous)", k.ep.peer, true
	case op.Kind == transport.RemotePut && op.N <= amMax:
		if op.N == 0 {
			return ps, true, nil
		}
		// A small put is a message with no signal: like a put_signal's,
		// it needs a fence behind RMA only, and a store after it goes as
		// a message too.
		if err := t.fenceRMALocked(); err != nil {
			return ps, false, fmt.Errorf("%s: %w", op.What, err)
		}
		ps.operand, ps.p = t.sendMessageLocked(k, op, raddr, C.LC_SIG_NONE)
		ps.call, ps.amPeer = "ucp_am_send_nbx", k.ep.peer
	case op.Kind == transport.RemotePut:
		ps.p, ps.call = C.lc_ucx_put(u, k.ep.h, op.Local.Pointer(), C.size_t(op.N), raddr, k.rkey), "ucp_put_nbx"
	case op.Kind == transport.RemoteGet:
		if op.N == 0 {
			return ps, true, nil
		}
		if err := t.awaitRndvLocked(k.ep.peer, op); err != nil {
			return ps, false, err
		}
		if err := t.fenceLocked(); err != nil {
			return ps, false, fmt.Errorf("%s: %w", op.What, err)
		}
		ps.p, ps.call = C.lc_ucx_get(u, k.ep.h, op.Local.Pointer(), C.size_t(op.N), raddr, k.rkey), "ucp_get_nbx"
	case op.Kind == transport.RemotePutSignal:
		if op.N > amMax {
			return ps, true, t.putThenSignalLocked(op)
		}
		if err := t.fenceRMALocked(); err != nil {
			return ps, false, fmt.Errorf("%s: %w", op.What, err)
		}
		sigop := C.int(C.LC_SIG_SET)
		if op.SigAdd {
			sigop = C.LC_SIG_ADD
		}
		ps.operand, ps.p = t.sendMessageLocked(k, op, raddr, sigop)
		ps.call, ps.amPeer = "ucp_am_send_nbx", k.ep.peer
	case (op.Kind == transport.RemoteStore64 || op.Kind == transport.RemoteAdd64) && raddr%8 != 0:
		return ps, false, fmt.Errorf("%s: a signal's slot must be 8-byte aligned (offset %d)", op.What, op.Ref.Off)
	case op.Kind == transport.RemoteAdd64 || op.Kind == transport.RemoteStore64:
		// Adds and stores go as messages the target applies in order
		// with the others: UCX's atomics over TCP are the target's work
		// anyway (and UCX 1.16 finds no protocol for them between two
		// processes of one host); an RMA store could land before a
		// message sent earlier whatever the fence, and behind an RMA
		// write a message needs a fence, which UCX over TCP makes a
		// round trip to every peer (a barrier's store followed by a
		// put_signal paid two).
		sig := op
		sig.Kind, sig.N, sig.SigOff, sig.SigAdd = transport.RemotePutSignal, 0, op.Ref.Off, op.Kind == transport.RemoteAdd64
		t.mu.Unlock()
		defer t.mu.Lock()
		return ps, true, t.Post(sig)
	default:
		return ps, false, fmt.Errorf("%s: %v is not posted", op.What, op.Kind)
	}
	return ps, false, nil
}

// trackPostLocked marks what the request ps of op leaves to fence and to
// flush, keeps it pending while in progress, and counts a message sent.
func (t *Transport) trackPostLocked(k *key, op transport.RemoteOp, ps posted) error {
	t.unfenced = true
	if ps.amPeer < 0 {
		t.rmaUnfenced = true
	}
	t.dirty[k.ep.peer] = true
	if op.Kind != transport.RemotePutSignal && !(op.Kind == transport.RemotePut && op.N <= amMax) {
		t.rma[k.ep.peer] = true // not a message only: the flush needs UCX's
	}
	switch s := C.lc_ptr_status(ps.p); s {
	case C.LC_OK:
		C.free(ps.operand)
	case C.LC_INPROGRESS:
		pd := pending{req: ps.p, peer: k.ep.peer, what: op.What, operand: ps.operand}
		if op.Timeout > 0 {
			pd.what = fmt.Sprintf("%s (%s)", op.What, transport.FormatBytes(op.N))
			pd.due, pd.limit = time.Now().Add(op.Timeout), op.Timeout
		}
		t.pending = append(t.pending, pd)
	default:
		C.free(ps.operand)
		return fmt.Errorf("%s: %w", op.What, t.lib.fail(ps.call, s))
	}
	if ps.amPeer >= 0 {
		// Counted only once sent: the target applies messages by number.
		t.amSent[ps.amPeer]++
		if ps.rndv {
			t.rndvLast[ps.amPeer] = t.amSent[ps.amPeer]
			t.rndvWhat[ps.amPeer] = fmt.Sprintf("%s (%s)", op.What, transport.FormatBytes(op.N))
		} else if op.N > 0 {
			t.dataLast[ps.amPeer] = t.amSent[ps.amPeer]
		}
	}
	return nil
}

// amMax is the largest put_signal sent as one active message; larger
// ones are a put, a fence and the signal, and from rndvMin on, puts and
// put_signals go as active messages by rendezvous (the data moves once,
// straight into the target's window).
const (
	amMax   = 8 << 10
	rndvMin = 64 << 10
)

// sendRndvLocked posts a put (with its signal, for a put_signal) by
// rendezvous; it returns the header (C memory, freed with the request)
// and the request.
func (t *Transport) sendRndvLocked(k *key, op transport.RemoteOp, raddr C.uint64_t) (unsafe.Pointer, unsafe.Pointer) {
	sigop := C.int(C.LC_SIG_NONE)
	if op.Kind == transport.RemotePutSignal {
		sigop = C.LC_SIG_SET
		if op.SigAdd {
			sigop = C.LC_SIG_ADD
		}
	}
	h := t.headerLocked(k, op, raddr, sigop)
	return unsafe.Pointer(h), C.lc_ucx_am_send_rndv(t.lib.u, k.ep.h, h, op.Local.Pointer(), C.size_t(op.N))
}

// fenceLocked orders what comes next after everything posted so far.
func (t *Transport) fenceLocked() error {
	if !t.unfenced {
		return nil
	}
	if s := C.lc_ucx_fence(t.lib.u, t.worker); s != C.LC_OK {
		return t.lib.fail("ucp_worker_fence", s)
	}
	t.unfenced, t.rmaUnfenced = false, false
	return nil
}

// fenceRMALocked orders a message after the RMA operations posted so far
// (messages after messages need none: the target applies them by number).
func (t *Transport) fenceRMALocked() error {
	if !t.rmaUnfenced {
		return nil
	}
	return t.fenceLocked()
}

// sendMessageLocked sends op's data (op.N bytes from op.Local, none for a
// store or add) as one message that the target writes at raddr, then
// changes op's signal slot by sigop (LC_SIG_NONE: no signal). It returns
// the header (C memory, freed with the request) and the request.
func (t *Transport) sendMessageLocked(k *key, op transport.RemoteOp, raddr C.uint64_t, sigop C.int) (unsafe.Pointer, unsafe.Pointer) {
	h := t.headerLocked(k, op, raddr, sigop)
	return unsafe.Pointer(h), C.lc_ucx_am_send(t.lib.u, k.ep.h, h, op.Local.Pointer(), C.size_t(op.N))
}

// headerLocked makes the header of a message to k's peer (C memory, freed
// with the request): op's data lands at raddr, then sigop (LC_SIG_NONE:
// no signal) changes op's signal slot by op.Value; it carries the next
// number of this rank's messages to that peer and how many of the peer's
// this rank applied.
func (t *Transport) headerLocked(k *key, op transport.RemoteOp, raddr C.uint64_t, sigop C.int) *C.lc_ps_hdr {
	h := (*C.lc_ps_hdr)(C.malloc(C.sizeof_lc_ps_hdr))
	h.dst, h.rank, h.op = raddr, C.int32_t(t.rank), C.uint32_t(sigop)
	h.slot, h.value = 0, 0
	if sigop != C.LC_SIG_NONE {
		h.slot, h.value = C.uint64_t(k.base+op.SigOff), C.uint64_t(op.Value)
	}
	h.ack = C.lc_am_applied(t.am, C.int(k.ep.peer))
	h.seq = C.uint64_t(t.amSent[k.ep.peer] + 1)
	return h
}

// putThenSignalLocked posts a large put_signal as a put, then the signal
// (fenced behind it).
func (t *Transport) putThenSignalLocked(op transport.RemoteOp) error {
	put := op
	put.Kind = transport.RemotePut
	sig := transport.RemoteOp{Kind: transport.RemoteStore64, Ref: op.Ref, Value: op.Value, Timeout: op.Timeout, What: op.What}
	sig.Ref.Off = op.SigOff
	if op.SigAdd {
		sig.Kind = transport.RemoteAdd64
	}
	t.mu.Unlock()
	defer t.mu.Lock()
	if err := t.Post(put); err != nil {
		return err
	}
	return t.Post(sig)
}
