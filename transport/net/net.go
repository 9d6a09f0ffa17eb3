package net

/*
#include "lc_ucx.h"
*/
import "C"

import (
	"encoding/binary"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/luacoll/luacoll/transport"
)

// Transport is one rank's UCX network (transport.Network). Nothing is
// loaded until a window first needs it.
type Transport struct {
	rank, size int

	mu      sync.Mutex // every call on the worker
	lib     *Lib
	ctx     C.lc_h
	worker  C.lc_h
	openErr error
	addr    []byte
	eps     []*endpoint
	pending []pending
	// unfenced: an operation was posted since the last fence, so a get
	// must be fenced behind it. rmaUnfenced: an RMA operation (put, get)
	// was, so a message must be too. Messages need no fence behind
	// messages: the target applies them by number.
	unfenced, rmaUnfenced bool
	dirty                 []bool // peers with operations posted since their last flush
	greeted               []bool // peers whose endpoint a Greet proved wired up
	// rma[p]: a put, get or atomic (not only put_signal messages) was
	// posted to p since its last flush, so the flush needs UCX's.
	rma    []bool
	closed bool
	// am is the target side of put_signal messages (C memory: the
	// handler reads it).
	am *C.lc_am_state
	// amSent[p] counts put_signal messages sent to p; amDone[p] how many
	// of them a flush proved applied. Each message also carries how
	// many of the receiver's this rank applied (lc_am_state.applied), so
	// a peer that answers proves its own without being asked.
	amSent, amDone []uint64
	// ackErr is the first acknowledgement that could not be sent.
	ackErr error
	// ackSkip[p] counts the flushes that ask p at once, without waiting
	// for its acknowledgement (see awaitAcksLocked).
	ackSkip []int
	// rndvLast[p] is the count (in amSent) of the last put sent to p by
	// rendezvous: until p acknowledged that many, an operation that must
	// land after it cannot take a path that might overtake it.
	rndvLast []uint64
	// rndvWhat[p] names the last put sent to p by rendezvous (a flush
	// that times out waiting for it names it).
	rndvWhat []string
	// cutReqs are the forced closes of endpoints cut after a timeout
	// (cutPeerLocked), settled when the network closes.
	cutReqs []unsafe.Pointer
	// dataLast[p] is the count of the last message with data (a put or
	// put_signal of up to amMax bytes) sent to p: striped puts wait for
	// it to be applied (signals write no data a stripe could overlap).
	dataLast []uint64

	stopFd int           // eventfd that ends the progress goroutine
	done   chan struct{} // closed when it ended
	// driven is when (unix nanoseconds) a caller last drove the worker:
	// the progress goroutine stays out of the way of waits that do.
	driven atomic.Int64

	regs, keys atomic.Int64

	// lanes are the extra workers large puts are striped over (lanes.go),
	// from stripeMin bytes.
	lanes     []*lane
	stripeMin uint64
}

type endpoint struct {
	peer   int
	h      C.lc_h
	failed *C.int32_t // written by UCX's error callback (C memory)
}

// pending is a posted operation not yet complete.
type pending struct {
	req     unsafe.Pointer
	peer    int
	what    string
	operand unsafe.Pointer // C memory holding a store's or add's value
	// due, when set, is when a put or get that has not completed is
	// given up on (posted + limit, its op's Timeout; see Quiet).
	due   time.Time
	limit time.Duration
}

var _ transport.Network = (*Transport)(nil)

// New returns rank's network in a job of size ranks.
func New(rank, size int) *Transport {
	return &Transport{rank: rank, size: size, eps: make([]*endpoint, size), dirty: make([]bool, size), greeted: make([]bool, size), rma: make([]bool, size),
		amSent: make([]uint64, size), amDone: make([]uint64, size), ackSkip: make([]int, size), rndvLast: make([]uint64, size), rndvWhat: make([]string, size), dataLast: make([]uint64, size), stopFd: -1}
}

// Name implements transport.Network.
func (t *Transport) Name() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.lib != nil {
		return "ucx " + t.lib.version
	}
	return "ucx"
}

// Registrations is the number of regions registered and not yet
// deregistered; Keys the number of peers' keys unpacked and not destroyed.
func (t *Transport) Registrations() int64 { return t.regs.Load() }

// Keys: see Registrations.
func (t *Transport) Keys() int64 { return t.keys.Load() }

// openLocked loads UCX and makes the context, the worker and the progress
// goroutine, once.
func (t *Transport) openLocked() error {
	if t.worker != nil || t.openErr != nil {
		return t.openErr
	}
	if t.closed {
		return errors.New("network closed")
	}
	t.openErr = func() error {
		lib, err := Load()
		if err != nil {
			return err
		}
		var where *C.char
		if s := C.lc_ucx_open(lib.u, &t.ctx, &t.worker, &where); s != C.LC_OK {
			t.worker = nil
			return lib.fail(C.GoString(where), s)
		}
		t.lib = lib
		t.am = C.lc_am_new(lib.u, t.worker, C.int32_t(t.size), C.int32_t(t.rank))
		if t.am == nil {
			t.destroyLocked()
			return errors.New("out of memory for the active-message state")
		}
		if s := C.lc_ucx_set_am(lib.u, t.worker, t.am); s != C.LC_OK {
			t.destroyLocked()
			return lib.fail("ucp_worker_set_am_recv_handler", s)
		}
		var a C.lc_h
		var n C.size_t
		if s := C.lc_ucx_address(lib.u, t.worker, &a, &n); s != C.LC_OK {
			t.destroyLocked()
			return lib.fail("ucp_worker_get_address", s)
		}
		t.addr = C.GoBytes(unsafe.Pointer(a), C.int(n))
		C.lc_ucx_release_address(lib.u, t.worker, a)
		efd := C.int(-1)
		if s := C.lc_ucx_efd(lib.u, t.worker, &efd); s != C.LC_OK {
			efd = -1 // no wake-up: the progress goroutine polls
		}
		stop, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
		if err != nil {
			t.destroyLocked()
			return fmt.Errorf("eventfd: %w", err)
		}
		t.stopFd = stop
		t.done = make(chan struct{})
		go t.progressLoop(int(efd))
		// Lanes are a speed-up only: without them large puts go whole.
		_ = t.openLanesLocked(laneCount())
		t.stripeMin = stripeFrom()
		return nil
	}()
	return t.openErr
}

// driveGrace is how long after a caller drove the worker the progress
// goroutine leaves it alone.
const driveGrace = 100 * time.Microsecond

// progressLoop drives the worker while nobody else does (the rank runs Lua,
// or waits in the bootstrap): it progresses until nothing happens, arms the
// worker's event descriptor and sleeps on it (at most 10 ms, a safety net
// for events UCX does not signal). While a wait drives the worker itself
// (Progress), it keeps out of the way: taking the worker then only delays
// the wait that is about to see the event.
func (t *Transport) progressLoop(efd int) {
	defer close(t.done)
	fds := []unix.PollFd{{Fd: int32(t.stopFd), Events: unix.POLLIN}}
	if efd >= 0 {
		fds = append(fds, unix.PollFd{Fd: int32(efd), Events: unix.POLLIN})
	}
	for {
		if since := time.Duration(time.Now().UnixNano() - t.driven.Load()); since < driveGrace {
			fds[0].Revents = 0
			ts := unix.NsecToTimespec(int64(driveGrace - since))
			if _, _ = unix.Ppoll(fds[:1], &ts, nil); fds[0].Revents != 0 {
				return
			}
			continue
		}
		t.mu.Lock()
		if t.worker == nil {
			t.mu.Unlock()
			return
		}
		for i := 0; i < 256 && t.progressLocked() != 0; i++ {
		}
		armed := C.LC_OK
		if efd >= 0 {
			armed = int(C.lc_ucx_arm(t.lib.u, t.worker))
		}
		t.mu.Unlock()
		if armed == C.LC_ERR_BUSY {
			runtime.Gosched()
			continue
		}
		if sleepOn(fds, efd >= 0 && armed == C.LC_OK) {
			return
		}
	}
}

// freeDone frees the requests of reqs that are over and returns the others
// (reusing reqs).
func (t *Transport) freeDone(reqs []unsafe.Pointer) []unsafe.Pointer {
	u := t.lib.u
	open := reqs[:0]
	for _, r := range reqs {
		if C.lc_ucx_req_status(u, r) == C.LC_INPROGRESS {
			open = append(open, r)
		} else {
			C.lc_ucx_req_free(u, r)
		}
	}
	return open
}

// settle drives worker until every request of reqs is over (freed), or
// for at most within.
func (t *Transport) settle(worker C.lc_h, reqs []unsafe.Pointer, within time.Duration) {
	for deadline := time.Now().Add(within); len(reqs) > 0 && time.Now().Before(deadline); {
		C.lc_ucx_progress(t.lib.u, worker)
		reqs = t.freeDone(reqs)
	}
}

// sleepOn polls fds (the first a wake-up eventfd, the second, if any, a
// worker's event descriptor): up to 10 ms when the worker is armed, else
// 1 ms. It reports whether the first fired.
func sleepOn(fds []unix.PollFd, armed bool) bool {
	timeout := 1
	if armed {
		timeout = 10
	}
	for i := range fds {
		fds[i].Revents = 0
	}
	if _, err := unix.Poll(fds, timeout); err != nil && !errors.Is(err, unix.EINTR) {
		time.Sleep(time.Millisecond)
	}
	return fds[0].Revents != 0
}

// Address implements transport.Network.
func (t *Transport) Address() ([]byte, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := t.openLocked(); err != nil {
		return nil, err
	}
	return seal(encodeAddresses(t.addr, t.lanes)), nil
}

// sealMagic starts every address and key this network publishes.
const sealMagic = 0x6c637578 // "lcux"

// seal frames b as magic, length and an FNV-1a checksum, so that a peer's
// truncated or damaged address or key is refused before UCX parses it.
func seal(b []byte) []byte {
	out := binary.LittleEndian.AppendUint32(nil, sealMagic)
	out = binary.LittleEndian.AppendUint32(out, uint32(len(b)))
	out = binary.LittleEndian.AppendUint64(out, fnv64(b))
	return append(out, b...)
}

// unseal checks what seal made; what names it in errors.
func unseal(b []byte, what string) ([]byte, error) {
	if len(b) < 16 {
		return nil, fmt.Errorf("%s is %d bytes, too short", what, len(b))
	}
	if binary.LittleEndian.Uint32(b) != sealMagic {
		return nil, fmt.Errorf("%s is not a UCX %s of this program", what, what)
	}
	n := binary.LittleEndian.Uint32(b[4:])
	body := b[16:]
	if uint32(len(body)) != n {
		return nil, fmt.Errorf("%s is truncated (%d bytes of %d)", what, len(body), n)
	}
	if fnv64(body) != binary.LittleEndian.Uint64(b[8:]) {
		return nil, fmt.Errorf("%s is damaged (checksum)", what)
	}
	return body, nil
}

func fnv64(b []byte) uint64 {
	h := uint64(14695981039346656037)
	for _, c := range b {
		h ^= uint64(c)
		h *= 1099511628211
	}
	return h
}

// Connect implements transport.Network.
func (t *Transport) Connect(peer int, addr []byte) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := t.openLocked(); err != nil {
		return err
	}
	if peer < 0 || peer >= t.size || peer == t.rank {
		return fmt.Errorf("rank %d is not a peer", peer)
	}
	if t.eps[peer] != nil {
		return nil
	}
	body, err := unseal(addr, "address")
	if err != nil {
		return fmt.Errorf("rank %d's %w", peer, err)
	}
	addrs, err := decodeAddresses(body)
	if err != nil {
		return fmt.Errorf("rank %d's %w", peer, err)
	}
	ca := C.CBytes(addrs[0])
	defer C.free(ca)
	e := &endpoint{peer: peer, failed: (*C.int32_t)(C.calloc(1, 4))}
	if s := C.lc_ucx_ep_create(t.lib.u, t.worker, ca, e.failed, &e.h); s != C.LC_OK {
		C.free(unsafe.Pointer(e.failed))
		return t.lib.fail("ucp_ep_create", s)
	}
	t.eps[peer] = e
	C.lc_am_set_ep(t.am, C.int(peer), e.h)
	return t.connectLanesLocked(peer, addrs[1:])
}

// epErr reports a failed endpoint.
func (t *Transport) epErr(e *endpoint) error {
	if s := C.lc_load_status(e.failed); s != 0 {
		return fmt.Errorf("connection to rank %d failed: %w", e.peer, t.lib.fail("endpoint", C.lc_status(s)))
	}
	return nil
}

// cutPeerLocked closes the endpoint to peer and its lanes at once
// (forced: what is in flight on them is cancelled, so the sources of its
// puts are free again) after an operation to peer ran out of time, and
// marks it failed: later operations to peer fail instead of waiting.
func (t *Transport) cutPeerLocked(peer int) {
	t.cutLanesLocked(peer)
	e := t.eps[peer]
	if e == nil || e.h == nil {
		return
	}
	if C.lc_load_status(e.failed) == 0 {
		C.lc_store_status(e.failed, C.LC_ERR_CANCELED)
	}
	if t.am != nil {
		C.lc_am_set_ep(t.am, C.int(peer), nil)
	}
	if p := C.lc_ucx_ep_close(t.lib.u, e.h, 1); C.lc_ptr_status(p) == C.LC_INPROGRESS {
		t.cutReqs = append(t.cutReqs, p)
	}
	e.h = nil
}

// messagesOutLocked reports whether a message sent to peer may not be
// applied there yet (peer did not say it applied every one).
func (t *Transport) messagesOutLocked(peer int) bool {
	return t.amSent[peer] > max(uint64(C.lc_am_acked(t.am, C.int(peer))), t.amDone[peer])
}

// rndvPendingLocked reports whether a put to peer sent by rendezvous is
// not acknowledged yet (and peer did not say it dropped one).
func (t *Transport) rndvPendingLocked(peer int) bool {
	return t.rndvLast[peer] > uint64(C.lc_am_acked(t.am, C.int(peer))) && C.lc_am_nacked(t.am, C.int(peer)) == 0
}

// nackErr reports that peer dropped a message of this rank (and so every
// later one): the data or signal it carried never landed.
func (t *Transport) nackErr(peer int) error {
	if t.am != nil && C.lc_am_nacked(t.am, C.int(peer)) != 0 {
		return fmt.Errorf("rank %d dropped a put or signal message of this rank (its own error says why); later ones to it are dropped too", peer)
	}
	return nil
}

// awaitRndvLocked drives the worker (mu held) until peer acknowledged
// every put sent to it by rendezvous: an operation that reads the
// target's memory, or a store that cannot go as a message, must not
// overtake them.
func (t *Transport) awaitRndvLocked(peer int, op transport.RemoteOp) error {
	start := time.Now()
	limit := max(op.Timeout, time.Second)
	for i := 0; t.rndvPendingLocked(peer); i++ {
		t.progressLocked()
		if err := t.nackErr(peer); err != nil {
			return fmt.Errorf("%s: %w", op.What, err)
		}
		if err := t.epErr(t.eps[peer]); err != nil {
			return fmt.Errorf("%s: %w", op.What, err)
		}
		if err := t.badErr(); err != nil {
			return fmt.Errorf("%s: %w", op.What, err)
		}
		if i%64 == 63 && time.Since(start) > limit {
			return fmt.Errorf("%s: rank %d did not acknowledge a put sent before it within %v", op.What, peer, limit)
		}
	}
	return nil
}

// progressLocked drives the worker once and sends the acknowledgements
// its callbacks noted (never sent from inside a callback); it returns
// the worker's count of events.
func (t *Transport) progressLocked() C.uint {
	n := C.lc_ucx_progress(t.lib.u, t.worker)
	if t.am != nil && C.lc_am_owed(t.am) > 0 {
		t.sendAcksLocked()
	}
	return n
}

// sendAcksLocked sends every acknowledgement owed to a peer, tracked as a
// pending request (its header lives in the active-message state).
func (t *Transport) sendAcksLocked() {
	for {
		var h *C.lc_ack_hdr
		r := int(C.lc_am_ack_next(t.am, &h))
		if r < 0 {
			return
		}
		e := t.eps[r]
		if e == nil || t.epErr(e) != nil {
			continue // the peer is gone: nobody to tell
		}
		p := C.lc_ucx_send_ack(t.lib.u, e.h, h)
		switch st := C.lc_ptr_status(p); st {
		case C.LC_OK:
		case C.LC_INPROGRESS:
			t.pending = append(t.pending, pending{req: p, peer: r, what: fmt.Sprintf("acknowledgement to rank %d", r)})
		default:
			// The peer waits for this word: fail this rank's next
			// operation with the reason rather than let it time out.
			if t.ackErr == nil {
				t.ackErr = fmt.Errorf("acknowledgement to rank %d: %w", r, t.lib.fail("ucp_am_send_nbx", st))
			}
		}
	}
}

// badErr reports the first malformed put_signal message a peer sent, or
// an acknowledgement that could not be sent.
func (t *Transport) badErr() error {
	if t.ackErr != nil {
		return t.ackErr
	}
	if t.am == nil || t.am.bad_count == 0 {
		return nil
	}
	who := "a peer"
	if r := int(t.am.bad_rank); r >= 0 {
		who = fmt.Sprintf("rank %d", r)
	}
	why := map[C.int32_t]string{1: "a header of the wrong size", 2: "an address outside this rank's windows",
		3: "a payload not sent eagerly", 4: "a sender that is not a rank of the job",
		5: "a rendezvous that failed or found no memory"}[t.am.bad_why]
	return fmt.Errorf("%s sent a malformed put_signal message (%s); %d such messages were dropped", who, why, uint64(t.am.bad_count))
}

// reapLocked frees the requests that completed; it returns the first
// failure.
func (t *Transport) reapLocked() error {
	var first error
	keep := t.pending[:0]
	for _, p := range t.pending {
		s := C.lc_ucx_req_status(t.lib.u, p.req)
		if s == C.LC_INPROGRESS {
			keep = append(keep, p)
			continue
		}
		C.lc_ucx_req_free(t.lib.u, p.req)
		C.free(p.operand)
		if s != C.LC_OK && first == nil {
			first = fmt.Errorf("%s: %w", p.what, t.lib.fail("completion", s))
		}
	}
	for i := len(keep); i < len(t.pending); i++ {
		t.pending[i] = pending{}
	}
	t.pending = keep
	return first
}

// Progress implements transport.Network; it does nothing when another
// goroutine is driving the worker.
func (t *Transport) Progress() {
	t.driven.Store(time.Now().UnixNano())
	if t.mu.TryLock() {
		if t.worker != nil {
			t.progressLocked()
		}
		t.mu.Unlock()
	}
}

// Close stops the progress goroutine, closes every endpoint (forcibly: the
// peers may be gone) and releases the worker and the context. Regions and
// keys still live are reported.
func (t *Transport) Close() error {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return nil
	}
	t.closed = true
	stop, done := t.stopFd, t.done
	t.mu.Unlock()
	if stop >= 0 {
		var one [8]byte
		one[0] = 1
		_, _ = unix.Write(stop, one[:])
		<-done
		_ = unix.Close(stop)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	var err error
	if n, k := t.regs.Load(), t.keys.Load(); n != 0 || k != 0 {
		err = fmt.Errorf("closing the network with %d registrations and %d keys still live", n, k)
	}
	t.destroyLocked()
	return err
}

// destroyLocked releases the endpoints, the worker and the context.
func (t *Transport) destroyLocked() {
	if t.worker == nil {
		return
	}
	u := t.lib.u
	if t.am != nil {
		C.lc_am_close(t.am) // apply nothing, acknowledge nothing from here on
	}
	t.closeLanesLocked()
	// The headers of sends still pending are freed once the worker is gone
	// (a cancelled send may still read its header while it winds down).
	var operands []unsafe.Pointer
	for _, p := range t.pending {
		C.lc_ucx_req_free(u, p.req)
		operands = append(operands, p.operand)
	}
	t.pending = nil
	var reqs []unsafe.Pointer
	for i, e := range t.eps {
		if e == nil {
			continue
		}
		if t.am != nil {
			C.lc_am_set_ep(t.am, C.int(i), nil)
		}
		if e.h == nil {
			// Cut after a timeout: its close is in cutReqs.
			t.eps[i] = nil
			defer C.free(unsafe.Pointer(e.failed))
			continue
		}
		if p := C.lc_ucx_ep_close(u, e.h, 1); C.lc_ptr_status(p) == C.LC_INPROGRESS {
			reqs = append(reqs, p)
		}
		t.eps[i] = nil
		defer C.free(unsafe.Pointer(e.failed))
	}
	t.settle(t.worker, append(reqs, t.cutReqs...), time.Second)
	t.cutReqs = nil
	C.lc_ucx_worker_destroy(u, t.worker)
	C.lc_ucx_cleanup(u, t.ctx)
	t.worker, t.ctx = nil, nil
	for _, o := range operands {
		C.free(o)
	}
	if t.am != nil {
		C.lc_am_free(t.am)
		t.am = nil
	}
}
