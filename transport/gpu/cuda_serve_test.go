package gpu

import (
	"encoding/binary"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/luacoll/luacoll/cuda"
	"github.com/luacoll/luacoll/kernels"
)

// fakeServer is a plan server's host side over plain memory: the ring and
// state a kernel would read and write.
func fakeServer(t *testing.T) (*planServer, []byte, []uint64) {
	t.Helper()
	ring := make([]byte, kernels.PlanServeSlots*kernels.PlanServeCmdSize)
	state := make([]uint64, 2)
	v := &planServer{
		ring:  &cuda.MappedMem{Host: unsafe.Pointer(&ring[0]), Size: uint64(len(ring))},
		state: &cuda.MappedMem{Host: unsafe.Pointer(&state[0]), Size: 16},
		next:  1,
	}
	return v, ring, state
}

// A call waits for a free slot: the command a ring before it done. It
// gives up when the server ended by itself (a failed call, the abort flag).
func TestPlanServerRoom(t *testing.T) {
	v, _, state := fakeServer(t)
	v.live, v.id = true, 1
	if !v.room() {
		t.Fatal("no room for the first command")
	}
	v.next = 1 + kernels.PlanServeSlots
	got := make(chan bool)
	go func() { got <- v.room() }()
	select {
	case r := <-got:
		t.Fatalf("room for command %d with none done: %v", v.next, r)
	case <-time.After(20 * time.Millisecond):
	}
	atomic.StoreUint64(&state[0], 1) // command 1 done: slot 1 is free again
	select {
	case r := <-got:
		if !r {
			t.Fatal("no room once command 1 was done")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("room did not see command 1 done")
	}
	v.next = 30
	go func() { got <- v.room() }()
	atomic.StoreUint64(&state[1], 1) // the server of command 1 ended
	select {
	case r := <-got:
		if r {
			t.Fatal("room for a server that ended")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("room did not see the server end")
	}
}

// Stopping posts STOP after the calls posted, numbered next; a server that
// ended by itself with its ring full gets none. Either way it is not live.
func TestPlanServerStop(t *testing.T) {
	v, ring, state := fakeServer(t)
	s := &CUDAStream{serve: v}
	v.live, v.id, v.next = true, 1, 5
	s.stopServeLocked()
	slot := ring[5*kernels.PlanServeCmdSize:]
	// Line 0 of the slot: the kind, then the command's number.
	if kind, seq := binary.LittleEndian.Uint64(slot), binary.LittleEndian.Uint64(slot[8:]); seq != 5 || kind != 2 || v.live || v.next != 6 {
		t.Fatalf("after stop: slot 5 seq %d kind %d, live %v, next %d", seq, kind, v.live, v.next)
	}
	s.stopServeLocked() // not live: nothing more
	if v.next != 6 {
		t.Fatalf("a second stop posted command %d", v.next-1)
	}
	v.live, v.id, v.next = true, 6, 6+kernels.PlanServeSlots
	atomic.StoreUint64(&state[1], 6)
	s.stopServeLocked()
	if v.live || v.next != 6+kernels.PlanServeSlots {
		t.Fatalf("a stop of an ended server: live %v, next %d", v.live, v.next)
	}
}

// A plan of blocks wider than the server's bound (kernels.PlanMidThreads),
// or of several blocks, is launched: the server neither takes it nor
// starts.
func TestPlanServerTakesMidBlocks(t *testing.T) {
	v, _, _ := fakeServer(t)
	s := &CUDAStream{serve: v}
	for _, spec := range []kernels.PlanSpec{{Threads: kernels.PlanMidThreads + 32}, {Threads: 0}, {Threads: kernels.PlanSmallThreads, Blocks: 2}} {
		if s.servePlanLocked(nil, spec) || v.live || v.next != 1 {
			t.Fatalf("%d threads, %d blocks: served (live %v, next %d)", spec.Threads, spec.Blocks, v.live, v.next)
		}
	}
}
