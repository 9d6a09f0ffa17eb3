package net

/*
#include "lc_ucx.h"
*/
import "C"

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/luacoll/luacoll/transport"
)

// Lanes: a worker is driven by one thread at a time, and over TCP that
// thread copies every byte into and out of the sockets. One worker per
// rank moved an all-gather's 16 MiB each way between two nodes of one
// machine at 1.3-1.5 GB/s a direction, where ucx_perftest pairs run at
// once reached 4.4-5.6 GB/s each; with 4 lanes, 3.2-3.8 GB/s. So a rank may open lanes: more workers of
// its context, each with its own endpoints and a goroutine that drives
// it. A put of at least stripeMin bytes is cut into one stripe per lane,
// each an RMA put followed by a flush of its endpoint on its lane; once
// every stripe has reached the target, the put's signal (a put_signal's)
// goes as a message on the rank's own worker, in order with its others.

// LanesEnv sets the number of lanes (0: none). The default is one for
// every two CPUs the rank may run on, at most 4, and none below 2.
const LanesEnv = "LUACOLL_NET_LANES"

// maxLanes bounds LanesEnv.
const maxLanes = 8

// stripeMin is the smallest put cut into stripes by default
// (StripeMinEnv overrides it).
const stripeMin = 256 << 10

// StripeMinEnv sets the smallest put cut into stripes, in bytes.
const StripeMinEnv = "LUACOLL_NET_STRIPE_MIN"

// stripeFrom is the smallest put a new Transport cuts into stripes:
// StripeMinEnv's value (at least 4096) when set, else stripeMin.
func stripeFrom(env string) (uint64, error) {
	if env == "" {
		return stripeMin, nil
	}
	v, err := strconv.ParseUint(env, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s=%s: want a size in bytes (4096 or more)", StripeMinEnv, env)
	}
	return max(v, 4096), nil
}

// laneCount is the number of lanes a new Transport opens: LanesEnv's
// value (env, 0..maxLanes) when set, else the default.
func laneCount(env string) (int, error) {
	if env != "" {
		v, err := strconv.Atoi(env)
		if err != nil || v < 0 || v > maxLanes {
			return 0, fmt.Errorf("%s=%s: want a number of lanes from 0 to %d", LanesEnv, env, maxLanes)
		}
		return v, nil
	}
	if n := runtime.GOMAXPROCS(0) / 2; n >= 2 {
		return min(n, 4), nil
	}
	return 0, nil
}

// lane is one extra worker and the goroutine that drives it.
type lane struct {
	t      *Transport
	mu     sync.Mutex // every call on the worker, and the fields below
	worker C.lc_h
	addr   []byte
	eps    []*endpoint
	// closing are endpoint closes still in progress (cutLanesLocked),
	// freed by the goroutine once done.
	closing []unsafe.Pointer
	stop    bool
	// queue holds the stripes to post: a channel, so that queuing never
	// waits for the lock a spinning goroutine takes again at once.
	queue chan *stripe
	// asleep: the goroutine is (about to be) in poll; a queued stripe
	// then writes kick.
	asleep atomic.Bool
	kick   int           // eventfd: something queued, or stop
	done   chan struct{} // closed when the goroutine ended
}

// stripe is one lane's part of a put.
type stripe struct {
	e     *endpoint // the lane's endpoint to the target (h nil once cut)
	src   unsafe.Pointer
	n     C.size_t
	raddr C.uint64_t
	rkey  C.lc_h
	// put and flush are the requests (goroutine only).
	put, flush unsafe.Pointer
	err        error
	over       atomic.Bool // err is set and nothing of the stripe is in flight
}

// openLanesLocked makes n lanes on t's context (t.mu held); on an error
// the lanes made so far are closed.
func (t *Transport) openLanesLocked(n int) error {
	for range n {
		l := &lane{t: t, eps: make([]*endpoint, t.size), kick: -1, queue: make(chan *stripe, 4*maxLanes)}
		if s := C.lc_ucx_worker_new(t.lib.u, t.ctx, &l.worker); s != C.LC_OK {
			l.worker = nil
			t.closeLanesLocked()
			return t.lib.fail("ucp_worker_create (lane)", s)
		}
		t.lanes = append(t.lanes, l)
		var a C.lc_h
		var sz C.size_t
		if s := C.lc_ucx_address(t.lib.u, l.worker, &a, &sz); s != C.LC_OK {
			t.closeLanesLocked()
			return t.lib.fail("ucp_worker_get_address (lane)", s)
		}
		l.addr = C.GoBytes(unsafe.Pointer(a), C.int(sz))
		C.lc_ucx_release_address(t.lib.u, l.worker, a)
		efd := C.int(-1)
		if s := C.lc_ucx_efd(t.lib.u, l.worker, &efd); s != C.LC_OK {
			efd = -1
		}
		kick, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
		if err != nil {
			t.closeLanesLocked()
			return fmt.Errorf("eventfd: %w", err)
		}
		l.kick, l.done = kick, make(chan struct{})
		go l.run(int(efd))
	}
	return nil
}

// closeLanesLocked stops the lanes' goroutines and releases their
// endpoints and workers (before the context goes).
func (t *Transport) closeLanesLocked() {
	u := t.lib.u
	for _, l := range t.lanes {
		if l.done != nil {
			l.mu.Lock()
			l.stop = true
			l.mu.Unlock()
			l.wake()
			<-l.done
			_ = unix.Close(l.kick)
		}
		// What the goroutine left (a connection's wire-up messages) is
		// driven to its end first: UCX asserts when it closes an
		// endpoint with a wire-up reply still queued.
		for deadline := time.Now().Add(20 * time.Millisecond); time.Now().Before(deadline); {
			if C.lc_ucx_progress(u, l.worker) == 0 {
				break
			}
		}
		reqs := l.closing
		l.closing = nil
		for i, e := range l.eps {
			if e == nil {
				continue
			}
			if e.h != nil {
				if p := C.lc_ucx_ep_close(u, e.h, 1); C.lc_ptr_status(p) == C.LC_INPROGRESS {
					reqs = append(reqs, p)
				}
			}
			l.eps[i] = nil
			defer C.free(unsafe.Pointer(e.failed))
		}
		t.settle(l.worker, reqs, time.Second)
		if l.worker != nil {
			C.lc_ucx_worker_destroy(u, l.worker)
		}
	}
	t.lanes = nil
}

func (l *lane) wake() {
	var one [8]byte
	one[0] = 1
	_, _ = unix.Write(l.kick, one[:])
}

// laneSpin is how long a lane's goroutine keeps driving its worker after
// the last event before it sleeps on the worker's event descriptor
// (LaneSpinEnv overrides it). None: on one of the GPU machines (an Intel
// VM) lanes that spun 200 us took a 512 KiB all-gather between two nodes
// from 142 to 437 us (1 ms: 915 us), each empty progress call a socket
// poll beside the transfers; asleep, a lane wakes on its worker's event
// descriptor, as the target side of a transfer does.
const laneSpin = 0

// LaneSpinEnv sets laneSpin in microseconds.
const LaneSpinEnv = "LUACOLL_NET_LANE_SPIN_US"

func laneSpinFor() time.Duration {
	if v, err := strconv.ParseUint(os.Getenv(LaneSpinEnv), 10, 64); err == nil {
		return time.Duration(min(v, 1e6)) * time.Microsecond
	}
	return laneSpin
}

// run drives the lane: it posts what is queued, progresses the worker,
// finishes the stripes whose flush completed, and sleeps when nothing has
// happened for laneSpin.
func (l *lane) run(efd int) {
	defer close(l.done)
	u := l.t.lib.u
	var active []*stripe
	fds := []unix.PollFd{{Fd: int32(l.kick), Events: unix.POLLIN}}
	if efd >= 0 {
		fds = append(fds, unix.PollFd{Fd: int32(efd), Events: unix.POLLIN})
	}
	last, spin := time.Now(), laneSpinFor()
	for {
		l.mu.Lock()
		if l.stop {
			for _, s := range active {
				l.release(s)
				s.err = errors.New("the network was closed")
				s.over.Store(true)
			}
			for len(l.queue) > 0 {
				s := <-l.queue
				s.err = errors.New("the network was closed")
				s.over.Store(true)
			}
			l.mu.Unlock()
			return
		}
	drain:
		for {
			select {
			case s := <-l.queue:
				l.post(s)
				if s.put == nil && s.flush == nil {
					s.over.Store(true)
				} else {
					active = append(active, s)
				}
			default:
				break drain
			}
		}
		events := C.uint(0)
		for i := 0; i < 64; i++ {
			n := C.lc_ucx_progress(u, l.worker)
			if n == 0 {
				break
			}
			events += n
		}
		if len(l.closing) > 0 {
			l.closing = l.t.freeDone(l.closing)
		}
		keep := active[:0]
		for _, s := range active {
			if l.check(s) {
				s.over.Store(true)
			} else {
				keep = append(keep, s)
			}
		}
		active = keep
		if events > 0 || len(active) > 0 || len(l.closing) > 0 {
			last = time.Now()
		}
		armed := C.LC_OK
		idle := len(active) == 0 && len(l.closing) == 0 && time.Since(last) > spin
		if idle {
			l.asleep.Store(true)
			if len(l.queue) > 0 {
				idle = false // queued before asleep was set: no kick comes
			} else if efd >= 0 {
				armed = int(C.lc_ucx_arm(u, l.worker))
			}
		}
		l.mu.Unlock()
		if !idle || armed == C.LC_ERR_BUSY {
			l.asleep.Store(false)
			continue
		}
		kicked := sleepOn(fds, efd >= 0 && armed == C.LC_OK)
		l.asleep.Store(false)
		if kicked {
			var b [8]byte
			_, _ = unix.Read(l.kick, b[:])
		}
		last = time.Now()
	}
}

// post starts s's put and the flush behind it (l.mu held).
func (l *lane) post(s *stripe) {
	u := l.t.lib.u
	if s.e.h == nil {
		s.err = errors.New("the lane's endpoint was closed")
		return
	}
	p := C.lc_ucx_put(u, s.e.h, s.src, s.n, s.raddr, s.rkey)
	if st := C.lc_ptr_status(p); st != C.LC_OK && st != C.LC_INPROGRESS {
		s.err = l.t.lib.fail("ucp_put_nbx (lane)", st)
		return
	} else if st == C.LC_INPROGRESS {
		s.put = p
	}
	f := C.lc_ucx_ep_flush(u, s.e.h)
	if st := C.lc_ptr_status(f); st != C.LC_OK && st != C.LC_INPROGRESS {
		s.err = l.t.lib.fail("ucp_ep_flush_nbx (lane)", st)
	} else if st == C.LC_INPROGRESS {
		s.flush = f
	}
}

// check reports whether s is over (l.mu held), its requests freed.
func (l *lane) check(s *stripe) bool {
	u := l.t.lib.u
	for _, r := range []*unsafe.Pointer{&s.put, &s.flush} {
		if *r == nil {
			continue
		}
		st := C.lc_ucx_req_status(u, *r)
		if st == C.LC_INPROGRESS {
			return false
		}
		if st != C.LC_OK && s.err == nil {
			s.err = l.t.lib.fail("a lane's put", st)
		}
		C.lc_ucx_req_free(u, *r)
		*r = nil
	}
	return true
}

// release frees s's requests, whatever their state (l.mu held).
func (l *lane) release(s *stripe) {
	for _, r := range []*unsafe.Pointer{&s.put, &s.flush} {
		if *r != nil {
			C.lc_ucx_req_free(l.t.lib.u, *r)
			*r = nil
		}
	}
}

// encodeAddresses is what Address publishes: the worker's address, then
// each lane's, each behind its length.
func encodeAddresses(main []byte, lanes []*lane) []byte {
	b := binary.LittleEndian.AppendUint32(nil, uint32(1+len(lanes)))
	b = binary.LittleEndian.AppendUint32(b, uint32(len(main)))
	b = append(b, main...)
	for _, l := range lanes {
		b = binary.LittleEndian.AppendUint32(b, uint32(len(l.addr)))
		b = append(b, l.addr...)
	}
	return b
}

// decodeAddresses splits what encodeAddresses made.
func decodeAddresses(b []byte) ([][]byte, error) {
	if len(b) < 4 {
		return nil, errors.New("address has no count")
	}
	n := binary.LittleEndian.Uint32(b)
	b = b[4:]
	if n < 1 || n > 1+maxLanes {
		return nil, fmt.Errorf("address lists %d workers", n)
	}
	out := make([][]byte, 0, n)
	for i := range n {
		if len(b) < 4 {
			return nil, fmt.Errorf("address of worker %d is cut short", i)
		}
		m := binary.LittleEndian.Uint32(b)
		b = b[4:]
		if m == 0 || uint32(len(b)) < m {
			return nil, fmt.Errorf("address of worker %d is %d bytes of %d", i, len(b), m)
		}
		out = append(out, b[:m])
		b = b[m:]
	}
	if len(b) != 0 {
		return nil, fmt.Errorf("address has %d bytes too many", len(b))
	}
	return out, nil
}

// connectLanesLocked makes the lanes' endpoints to peer, one per lane both
// sides have (t.mu held).
func (t *Transport) connectLanesLocked(peer int, addrs [][]byte) error {
	for i, l := range t.lanes {
		if i >= len(addrs) {
			break
		}
		ca := C.CBytes(addrs[i])
		e := &endpoint{peer: peer, failed: (*C.int32_t)(C.calloc(1, 4))}
		l.mu.Lock()
		s := C.lc_ucx_ep_create(t.lib.u, l.worker, ca, e.failed, &e.h)
		if s == C.LC_OK {
			l.eps[peer] = e
		}
		l.mu.Unlock()
		C.free(ca)
		if s != C.LC_OK {
			C.free(unsafe.Pointer(e.failed))
			return t.lib.fail("ucp_ep_create (lane)", s)
		}
	}
	return nil
}

// unpackLanesLocked unpacks the key for each lane that reaches peer.
func (t *Transport) unpackLanesLocked(k *key, peer int, packed []byte) error {
	for _, l := range t.lanes {
		e := l.eps[peer]
		if e == nil {
			break
		}
		cb := C.CBytes(packed)
		var rk C.lc_h
		l.mu.Lock()
		s := C.lc_ucx_rkey_unpack(t.lib.u, e.h, cb, &rk)
		l.mu.Unlock()
		C.free(cb)
		if s != C.LC_OK {
			k.closeLanes()
			return t.lib.fail(fmt.Sprintf("ucp_ep_rkey_unpack(rank %d, lane)", peer), s)
		}
		k.lanes = append(k.lanes, rk)
	}
	return nil
}

// closeLanes destroys the key's lane keys.
func (k *key) closeLanes() {
	for i, rk := range k.lanes {
		if i >= len(k.t.lanes) {
			break // the lanes are gone, and their keys with their endpoints
		}
		l := k.t.lanes[i]
		l.mu.Lock()
		C.lc_ucx_rkey_destroy(k.t.lib.u, rk)
		l.mu.Unlock()
	}
	k.lanes = nil
}

// stripedLocked runs a put of op.N >= stripeMin bytes over k's lanes and
// returns once every stripe reached the target (t.mu held, the worker
// driven meanwhile); a put_signal's signal then goes as a message. ok is
// false when the put is not for the lanes.
func (t *Transport) stripedLocked(k *key, op transport.RemoteOp, raddr C.uint64_t) (ok bool, err error) {
	peer := k.ep.peer
	if op.N < t.stripeMin || len(k.lanes) < 2 || (op.Kind != transport.RemotePut && op.Kind != transport.RemotePutSignal) {
		return false, nil
	}
	for i := range k.lanes {
		l := t.lanes[i]
		l.mu.Lock()
		e := l.eps[peer]
		l.mu.Unlock()
		if e == nil {
			return true, fmt.Errorf("%s: lane %d has no endpoint to rank %d", op.What, i, peer)
		}
		if err := t.epErr(e); err != nil {
			return true, fmt.Errorf("%s: lane %d: %w", op.What, i, err)
		}
	}
	// The messages with data and the rendezvous puts posted before land
	// first, as they would before one put by rendezvous (a message the
	// target applied late could overwrite the stripes).
	if err := t.awaitRndvLocked(peer, op); err != nil {
		return true, err
	}
	limit := max(op.Timeout, time.Second)
	start := time.Now()
	dataOut := func() bool {
		return t.dataLast[peer] > max(uint64(C.lc_am_acked(t.am, C.int(peer))), t.amDone[peer])
	}
	if dataOut() {
		// Asked, the target says at once what it applied.
		if err := t.askAckLocked(k.ep); err != nil {
			return true, fmt.Errorf("%s: %w", op.What, err)
		}
	}
	for i := 0; dataOut(); i++ {
		t.progressLocked()
		if i%256 == 255 && time.Since(start) > limit {
			return true, fmt.Errorf("%s: rank %d did not acknowledge the messages sent before it within %v", op.What, peer, limit)
		}
		if err := t.epErr(k.ep); err != nil {
			return true, fmt.Errorf("%s: %w", op.What, err)
		}
		if err := t.nackErr(peer); err != nil {
			return true, fmt.Errorf("%s: %w", op.What, err)
		}
	}
	nl := uint64(len(k.lanes))
	part := ((op.N+nl-1)/nl + 4095) &^ 4095 // nl stripes at most
	var stripes []*stripe
	for i, off := 0, uint64(0); off < op.N; i, off = i+1, off+part {
		l := t.lanes[i]
		l.mu.Lock()
		e := l.eps[peer]
		l.mu.Unlock()
		s := &stripe{e: e, src: unsafe.Add(op.Local.Pointer(), off), n: C.size_t(min(part, op.N-off)),
			raddr: raddr + C.uint64_t(off), rkey: k.lanes[i]}
		stripes = append(stripes, s)
		l.queue <- s // one stripe a put, and the post waits for it
		if l.asleep.Load() {
			l.wake()
		}
	}
	allOver := func() bool {
		for _, s := range stripes {
			if !s.over.Load() {
				return false
			}
		}
		return true
	}
	start = time.Now()
	for i := 0; !allOver(); i++ {
		t.progressLocked()
		if i%256 == 255 {
			if time.Since(start) > 2*limit {
				// The stripes still in flight read the source, which the
				// caller may free once this returns: the lanes' endpoints
				// to peer are closed, which cancels them.
				t.cutLanesLocked(peer)
				for deadline := time.Now().Add(2 * time.Second); !allOver() && time.Now().Before(deadline); {
					runtime.Gosched()
				}
				return true, fmt.Errorf("%s: the put's stripes did not reach rank %d within %v (its lanes are closed)", op.What, peer, 2*limit)
			}
			runtime.Gosched()
		}
	}
	for _, s := range stripes {
		if s.err != nil {
			return true, fmt.Errorf("%s: %w", op.What, s.err)
		}
	}
	if op.Kind == transport.RemotePutSignal {
		sig := op
		sig.N = 0
		t.mu.Unlock()
		defer t.mu.Lock()
		return true, t.Post(sig)
	}
	return true, nil
}

// cutLanesLocked closes every lane's endpoint to peer at once (forced:
// what is in flight on them is cancelled) and marks them failed, so that
// no later put uses them.
func (t *Transport) cutLanesLocked(peer int) {
	u := t.lib.u
	for _, l := range t.lanes {
		l.mu.Lock()
		if e := l.eps[peer]; e != nil && e.h != nil {
			if p := C.lc_ucx_ep_close(u, e.h, 1); C.lc_ptr_status(p) == C.LC_INPROGRESS {
				l.closing = append(l.closing, p)
			}
			e.h = nil
			if C.lc_load_status(e.failed) == 0 {
				C.lc_store_status(e.failed, C.LC_ERR_CANCELED)
			}
		}
		l.mu.Unlock()
		l.wake()
	}
}
