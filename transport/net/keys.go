package net

/*
#include "lc_ucx.h"
*/
import "C"
import (
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"time"
	"unsafe"

	"github.com/luacoll/luacoll/transport"
)

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
