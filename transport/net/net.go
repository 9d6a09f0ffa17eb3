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
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/luacoll/luacoll/transport"
	"github.com/luacoll/luacoll/transport/knobs"
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
	return &Transport{rank: rank, size: size, eps: make([]*endpoint, size), dirty: make([]bool, size), rma: make([]bool, size),
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

// registration is a region registered with UCX.
type registration struct {
	t      *Transport
	memh   C.lc_h
	base   uint64
	packed []byte
}

// Register implements transport.Network: ucp_mem_map of the region, its
// remote key packed behind the region's base address.
func (t *Transport) Register(local transport.Addr, size uint64) (transport.Registration, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := t.openLocked(); err != nil {
		return nil, err
	}
	r := &registration{t: t}
	if s := C.lc_ucx_mem_map(t.lib.u, t.ctx, local.Pointer(), C.size_t(max(size, 1)), &r.memh); s != C.LC_OK {
		return nil, t.lib.fail(fmt.Sprintf("ucp_mem_map(%d bytes)", size), s)
	}
	var buf unsafe.Pointer
	var n C.size_t
	if s := C.lc_ucx_rkey_pack(t.lib.u, t.ctx, r.memh, &buf, &n); s != C.LC_OK {
		C.lc_ucx_mem_unmap(t.lib.u, t.ctx, r.memh)
		return nil, t.lib.fail("ucp_rkey_pack", s)
	}
	packed := binary.LittleEndian.AppendUint64(nil, uint64(local))
	r.packed = seal(append(packed, C.GoBytes(buf, C.int(n))...))
	C.lc_ucx_rkey_release(t.lib.u, buf)
	if C.lc_am_add_region(t.am, C.uint64_t(local), C.uint64_t(size)) != 0 {
		C.lc_ucx_mem_unmap(t.lib.u, t.ctx, r.memh)
		return nil, errors.New("registering a region: out of memory")
	}
	r.base = uint64(local)
	t.regs.Add(1)
	return r, nil
}

// Packed implements transport.Registration.
func (r *registration) Packed() []byte { return r.packed }

// Close implements transport.Registration.
func (r *registration) Close() error {
	t := r.t
	t.mu.Lock()
	defer t.mu.Unlock()
	if r.memh == nil {
		return nil
	}
	// A rendezvous may still be moving a peer's data into the region:
	// let it end before the memory goes (a job that is ending normally
	// has none; one whose peer died sees its transfers cancelled).
	for deadline := time.Now().Add(2 * time.Second); t.worker != nil && C.lc_am_inflight(t.am) > 0 && time.Now().Before(deadline); {
		t.progressLocked()
	}
	C.lc_am_remove_region(t.am, C.uint64_t(r.base))
	s := C.lc_ucx_mem_unmap(t.lib.u, t.ctx, r.memh)
	r.memh = nil
	t.regs.Add(-1)
	if s != C.LC_OK {
		return t.lib.fail("ucp_mem_unmap", s)
	}
	return nil
}

// key is a peer's region as this rank reaches it.
type key struct {
	t    *Transport
	ep   *endpoint
	rkey C.lc_h
	base uint64
	// lanes are the key unpacked on each lane's endpoint to the peer.
	lanes []C.lc_h
}

// Unpack implements transport.Network.
func (t *Transport) Unpack(peer int, packed []byte) (transport.RemoteKey, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if peer < 0 || peer >= t.size || t.eps[peer] == nil {
		return nil, fmt.Errorf("no endpoint to rank %d", peer)
	}
	if err := t.epErr(t.eps[peer]); err != nil {
		return nil, err
	}
	packed, err := unseal(packed, "key")
	if err != nil {
		return nil, fmt.Errorf("rank %d's %w", peer, err)
	}
	if len(packed) <= 8 {
		return nil, fmt.Errorf("rank %d's key is %d bytes, too short", peer, len(packed))
	}
	k := &key{t: t, ep: t.eps[peer], base: binary.LittleEndian.Uint64(packed)}
	cb := C.CBytes(packed[8:])
	defer C.free(cb)
	if s := C.lc_ucx_rkey_unpack(t.lib.u, k.ep.h, cb, &k.rkey); s != C.LC_OK {
		return nil, t.lib.fail(fmt.Sprintf("ucp_ep_rkey_unpack(rank %d)", peer), s)
	}
	if err := t.unpackLanesLocked(k, peer, packed[8:]); err != nil {
		C.lc_ucx_rkey_destroy(t.lib.u, k.rkey)
		return nil, err
	}
	t.keys.Add(1)
	return k, nil
}

// Network implements transport.RemoteKey.
func (k *key) Network() transport.Network { return k.t }

// Via implements transport.RemoteKey: the transports and devices of the
// endpoint's lanes, e.g. "ucx: tcp/eth0".
func (k *key) Via() string {
	k.t.mu.Lock()
	defer k.t.mu.Unlock()
	if k.ep.h == nil {
		return "ucx"
	}
	lanes := parseLanes(k.t.lib.print(k.ep.h, true))
	if len(lanes) == 0 {
		return "ucx"
	}
	return "ucx: " + strings.Join(lanes, ", ")
}

// Close implements transport.RemoteKey.
func (k *key) Close() error {
	k.t.mu.Lock()
	defer k.t.mu.Unlock()
	if k.rkey != nil {
		k.closeLanes()
		C.lc_ucx_rkey_destroy(k.t.lib.u, k.rkey)
		k.rkey = nil
		k.t.keys.Add(-1)
	}
	return nil
}

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
	u := t.lib.u
	amPeer, rndv := -1, false // a message to count once it is sent
	raddr := C.uint64_t(k.base + op.Ref.Off)
	var p, operand unsafe.Pointer
	call := ""
	if ok, err := t.stripedLocked(k, op, raddr); ok {
		return err
	}
	switch {
	case (op.Kind == transport.RemotePut || op.Kind == transport.RemotePutSignal) && op.N >= rndvMin:
		if err := t.fenceRMALocked(); err != nil {
			return fmt.Errorf("%s: %w", op.What, err)
		}
		operand, p = t.sendRndvLocked(k, op, raddr)
		call, amPeer, rndv = "ucp_am_send_nbx (rendezvous)", k.ep.peer, true
	case op.Kind == transport.RemotePut && op.N <= amMax:
		if op.N == 0 {
			return nil
		}
		// A small put is a message with no signal: like a put_signal's,
		// it needs a fence behind RMA only, and a store after it goes as
		// a message too.
		if err := t.fenceRMALocked(); err != nil {
			return fmt.Errorf("%s: %w", op.What, err)
		}
		operand, p = t.sendMessageLocked(k, op, raddr, C.LC_SIG_NONE)
		call, amPeer = "ucp_am_send_nbx", k.ep.peer
	case op.Kind == transport.RemotePut:
		p, call = C.lc_ucx_put(u, k.ep.h, op.Local.Pointer(), C.size_t(op.N), raddr, k.rkey), "ucp_put_nbx"
	case op.Kind == transport.RemoteGet:
		if op.N == 0 {
			return nil
		}
		if err := t.awaitRndvLocked(k.ep.peer, op); err != nil {
			return err
		}
		if err := t.fenceLocked(); err != nil {
			return fmt.Errorf("%s: %w", op.What, err)
		}
		p, call = C.lc_ucx_get(u, k.ep.h, op.Local.Pointer(), C.size_t(op.N), raddr, k.rkey), "ucp_get_nbx"
	case op.Kind == transport.RemotePutSignal:
		if op.N > amMax {
			return t.putThenSignalLocked(op)
		}
		if err := t.fenceRMALocked(); err != nil {
			return fmt.Errorf("%s: %w", op.What, err)
		}
		sigop := C.int(C.LC_SIG_SET)
		if op.SigAdd {
			sigop = C.LC_SIG_ADD
		}
		operand, p = t.sendMessageLocked(k, op, raddr, sigop)
		call, amPeer = "ucp_am_send_nbx", k.ep.peer
	case (op.Kind == transport.RemoteStore64 || op.Kind == transport.RemoteAdd64) && raddr%8 != 0:
		return fmt.Errorf("%s: a signal's slot must be 8-byte aligned (offset %d)", op.What, op.Ref.Off)
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
		return t.Post(sig)
	default:
		return fmt.Errorf("%s: %v is not posted", op.What, op.Kind)
	}
	t.unfenced = true
	if amPeer < 0 {
		t.rmaUnfenced = true
	}
	t.dirty[k.ep.peer] = true
	if op.Kind != transport.RemotePutSignal && !(op.Kind == transport.RemotePut && op.N <= amMax) {
		t.rma[k.ep.peer] = true // not a message only: the flush needs UCX's
	}
	switch s := C.lc_ptr_status(p); s {
	case C.LC_OK:
		C.free(operand)
	case C.LC_INPROGRESS:
		pd := pending{req: p, peer: k.ep.peer, what: op.What, operand: operand}
		if op.Timeout > 0 {
			pd.what = fmt.Sprintf("%s (%s)", op.What, transport.FormatBytes(op.N))
			pd.due, pd.limit = time.Now().Add(op.Timeout), op.Timeout
		}
		t.pending = append(t.pending, pd)
	default:
		C.free(operand)
		return fmt.Errorf("%s: %w", op.What, t.lib.fail(call, s))
	}
	if amPeer >= 0 {
		// Counted only once sent: the target applies messages by number.
		t.amSent[amPeer]++
		if rndv {
			t.rndvLast[amPeer] = t.amSent[amPeer]
			t.rndvWhat[amPeer] = fmt.Sprintf("%s (%s)", op.What, transport.FormatBytes(op.N))
		} else if op.N > 0 {
			t.dataLast[amPeer] = t.amSent[amPeer]
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
	type flush struct {
		peer int
		req  unsafe.Pointer
		read uint64 // the messages an acknowledgement must cover (asked)
	}
	var fl, asked []flush // endpoint flushes; acknowledgements asked for (read: up to which message)
	var cleared []int     // peers marked clean below, dirty again if the flush fails
	// Puts sent by rendezvous are done at the target once it says so;
	// the messages after them are then applied as they arrive, which the
	// read below proves.
	if err := t.waitLoop(cancel, timeout, func() (bool, error) {
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
	}); err != nil {
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
			asked = append(asked, flush{peer: peer, read: t.amSent[peer]})
		}
		if !t.rma[peer] {
			t.dirty[peer] = false
			cleared = append(cleared, peer)
			continue
		}
		p := C.lc_ucx_ep_flush(t.lib.u, e.h)
		switch s := C.lc_ptr_status(p); s {
		case C.LC_OK:
		case C.LC_INPROGRESS:
			fl = append(fl, flush{peer, p, 0})
		default:
			err = fmt.Errorf("flush to rank %d: %w", peer, t.lib.fail("ucp_ep_flush_nbx", s))
		}
		if err != nil {
			break
		}
		t.dirty[peer] = false
		t.rma[peer] = false
		cleared = append(cleared, peer)
	}
	t.mu.Unlock()
	werr := t.waitLoop(cancel, timeout, func() (bool, error) {
		keep := fl[:0]
		var first error
		for _, f := range fl {
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
		fl = keep
		waitAck := asked[:0]
		for _, a := range asked {
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
		asked = waitAck
		if rerr := t.reapLocked(); first == nil {
			first = rerr
		}
		return len(fl) == 0 && len(asked) == 0 && len(t.pending) == 0, first
	}, func() error {
		peer := -1
		if len(fl) > 0 {
			peer = fl[0].peer
		} else if len(asked) > 0 {
			peer = asked[0].peer
		} else if len(t.pending) > 0 {
			peer = t.pending[0].peer
		}
		return fmt.Errorf("flush: rank %d did not complete within %v", peer, timeout)
	})
	if err == nil {
		err = werr
	}
	t.mu.Lock()
	if err == nil {
		t.unfenced, t.rmaUnfenced = false, false
	} else {
		for _, peer := range cleared { // nothing proven: the next flush tries again
			t.dirty[peer], t.rma[peer] = true, true
		}
	}
	for _, f := range fl { // given up on: let UCX finish them alone
		if t.worker != nil {
			C.lc_ucx_req_free(t.lib.u, f.req)
		}
	}
	t.mu.Unlock()
	return err
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
