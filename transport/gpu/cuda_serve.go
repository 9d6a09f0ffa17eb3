package gpu

import (
	"runtime"
	"sync/atomic"
	"time"

	"github.com/luacoll/luacoll/cuda"
	"github.com/luacoll/luacoll/kernels"
)

// Served plan calls. A device-mode plan call is one launch of the plan
// interpreter, and a launch costs the host several microseconds of driver
// time, more than a small plan's replay takes the GPU. Where the stream
// prelaunches (its rank has the GPU to itself), the first call starts a
// plan server instead (kernels.PlanServe): one launch of the interpreter
// that runs the calls the host posts to a ring of host-mapped slots, in
// order, so that a call costs the host a few stores. Anything else
// enqueued on the stream, a sync, an interrupt or a close stops the
// server first (a STOP command: it ends once the calls before it ran), so
// stream order holds; so does a call of another block size, and a
// millisecond without a call, so an idle rank leaves its GPU idle.

// serveIdle is how long a server waits for a call before the host stops it.
const serveIdle = time.Millisecond

// planServer is a stream's plan server state (under the stream's mu).
type planServer struct {
	ring, state *cuda.MappedMem
	next        uint64 // the next command's number (from 1)
	live        bool   // a server was started and not stopped
	id          uint64 // the live server's first command
	threads     uint32 // its block size
	off         bool   // starting one failed: launch as usual from now on
	last        time.Time
	timer       *time.Timer
	served      uint64 // calls that went through a server (stats)
}

func newPlanServer(d *cuda.Driver) (*planServer, error) {
	ring, err := d.AllocMapped(kernels.PlanServeSlots * kernels.PlanServeCmdSize)
	if err != nil {
		return nil, err
	}
	state, err := d.AllocMapped(kernels.PlanServeStateSize)
	if err != nil {
		_ = ring.Free()
		return nil, err
	}
	clear(ring.Bytes())
	clear(state.Bytes())
	return &planServer{ring: ring, state: state, next: 1}, nil
}

func (v *planServer) free() {
	_ = v.ring.Free()
	_ = v.state.Free()
}

// ended reports whether the live server ended by itself (a failed call,
// the abort flag).
func (v *planServer) ended() bool {
	_, e := kernels.ServeState(v.state.Host)
	return e == v.id
}

// servePlanLocked runs spec (one launch's worth of plan p) through the
// stream's plan server, starting one if needed; false when it cannot (no
// server on this stream, a plan of several blocks or of blocks wider than
// the server's kernels.PlanMidThreads, a capture, or a server that failed
// to start): the caller launches instead. s.mu is held and nothing is held
// back (flushLocked).
func (s *CUDAStream) servePlanLocked(p *DevicePlan, spec kernels.PlanSpec) bool {
	v := s.serve
	threads := spec.Threads
	if threads == 0 {
		threads = kernels.PlanThreads
	}
	// The server is built for blocks of at most PlanMidThreads; a plan
	// wider than that takes long enough that a launch of its own costs
	// little.
	if v == nil || v.off || spec.Blocks > 1 || threads > kernels.PlanMidThreads || s.err != nil || s.s.Capturing() ||
		atomic.LoadUint32((*uint32)(s.b.flag.Host)) != 0 {
		return false
	}
	if v.live && (v.threads != threads || v.ended()) {
		s.stopServeLocked()
	}
	if !v.live {
		s.cancelPreLocked()
		if err := s.b.current(); err != nil {
			return false
		}
		if err := s.b.k.PlanServe(s.s, v.ring.Dev, v.next, v.state.Dev, s.b.flag.Dev, threads); err != nil {
			v.off = true
			return false
		}
		v.live, v.id, v.threads = true, v.next, threads
		if v.timer == nil {
			v.timer = time.AfterFunc(serveIdle, s.onServeIdle)
		} else {
			v.timer.Reset(serveIdle)
		}
	} else if s.pre != nil {
		s.pre.hold = true
		s.dropPreLocked()
	}
	if !v.room() {
		v.live = false
		return false
	}
	if err := kernels.ServePlanCmd(v.ring.Host, v.next, spec); err != nil {
		s.err = err
		return true
	}
	v.next++
	v.served++
	v.last = time.Now()
	s.plans = append(s.plans, p)
	s.gen++
	s.idle = false
	s.doneTail = false
	return true
}

// room waits until command v.next has a free slot (the command a ring
// before it done); false when the server ended by itself meanwhile (a
// failed call, the abort flag).
func (v *planServer) room() bool {
	for i := 0; ; i++ {
		done, ended := kernels.ServeState(v.state.Host)
		if v.next <= done+kernels.PlanServeSlots {
			return true
		}
		if ended == v.id {
			return false
		}
		if i&63 == 63 {
			runtime.Gosched()
		}
	}
}

// stopServeLocked ends the live server, if any: a STOP after the calls
// posted (s.mu held). Work enqueued after it runs once they ran.
func (s *CUDAStream) stopServeLocked() {
	v := s.serve
	if v == nil || !v.live {
		return
	}
	v.live = false
	if v.room() {
		kernels.ServeStopCmd(v.ring.Host, v.next)
		v.next++
	}
}

// onServeIdle stops a server that went serveIdle without a call, or
// looks again when the last call came later.
func (s *CUDAStream) onServeIdle() {
	defer onThread()()
	s.lock()
	defer s.mu.Unlock()
	v := s.serve
	if v == nil || !v.live {
		return
	}
	if wait := serveIdle - time.Since(v.last); wait > 0 {
		v.timer.Reset(wait)
		return
	}
	s.stopServeLocked()
}

// runServed is servePlanLocked with the stream's lock taken and anything
// held back launched first.
func (s *CUDAStream) runServed(p *DevicePlan, spec kernels.PlanSpec) bool {
	defer onThread()()
	s.lock()
	defer s.mu.Unlock()
	s.flushLocked()
	return s.servePlanLocked(p, spec)
}
