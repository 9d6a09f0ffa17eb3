package gpu

import (
	"fmt"
	"os"
	"runtime"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/luacoll/luacoll/cuda"
	"github.com/luacoll/luacoll/kernels"
	"github.com/luacoll/luacoll/transport"
	"github.com/luacoll/luacoll/transport/knobs"
)

// Prelaunched fused steps. A host-issued step of a
// protocol (a put_signal with a wait, fused into one launch) costs a
// kernel launch: several microseconds of driver time before the GPU
// starts it. With prelaunching, a helper goroutine enqueues the next
// step's kernel while the current step runs, before its arguments are
// known; the kernel polls a host-mapped command block, and issuing the step
// is writing the block. Anything else enqueued on the stream, a sync that
// has to ask the driver, a capture, an interrupt or a close cancels the
// waiting kernel first, so it never holds up other work; so does a
// millisecond without a step, so an idle rank leaves its GPU idle.

// knobs.Prelaunch turns prelaunched steps on (1; 2 also prints how many
// steps used them) or off (0). Unset, they are on for a rank that has its
// GPU to itself (see PrelaunchDefault).

// Prelauncher is implemented by backends that can prelaunch fused steps;
// SetPrelaunch applies to the streams made after it.
type Prelauncher interface {
	SetPrelaunch(on bool)
}

// PrelaunchDefault says whether a rank prelaunches: as knobs.Prelaunch says,
// else when no other rank of the job uses its GPU (ranks sharing a GPU are
// time-sliced, and a kernel waiting for its command would hold the slice).
func PrelaunchDefault(gpuShared bool) bool {
	switch knobs.Prelaunch.Get() {
	case "0":
		return false
	case "1", "2":
		return true
	}
	return !gpuShared
}

var prelaunchStats = knobs.Prelaunch.Get() == "2"

// SetPrelaunch implements Prelauncher.
func (b *CUDABackend) SetPrelaunch(on bool) { b.prelaunch = on }

// preSlots is how many command blocks a stream cycles through: kernel g
// reads block g % preSlots, and the helper enqueues kernel g only once
// kernel g - preSlots has freed its block.
const preSlots = 4

type prelaunch struct {
	mem  *cuda.MappedMem // preSlots command blocks, then the ack word
	gen  uint64          // the last kernel enqueued
	live bool            // kernel gen waits for its command
	hold bool            // no prelaunch until the next fused step
	arm  chan struct{}   // wakes the helper when it sleeps
	want atomic.Bool     // a fused step went out: enqueue the next kernel
	off  bool            // a prelaunch failed: launch as usual from now on
	// taken and launched count the fused steps that went through a
	// prelaunched kernel and those launched as usual (LUACOLL_PRELAUNCH=2
	// prints them when the stream closes).
	taken, launched uint64
}

func newPrelaunch(d *cuda.Driver) (*prelaunch, error) {
	m, err := d.AllocMapped(preSlots*kernels.PreCmdSize + 8)
	if err != nil {
		return nil, err
	}
	return &prelaunch{mem: m, arm: make(chan struct{}, 1)}, nil
}

func (p *prelaunch) slot(gen uint64) (unsafe.Pointer, cuda.DevicePtr) {
	off := (gen % preSlots) * kernels.PreCmdSize
	return unsafe.Add(p.mem.Host, off), p.mem.Dev.Add(off)
}

func (p *prelaunch) ackDev() cuda.DevicePtr { return p.mem.Dev.Add(preSlots * kernels.PreCmdSize) }

func (p *prelaunch) acked() uint64 {
	return atomic.LoadUint64((*uint64)(unsafe.Add(p.mem.Host, preSlots*kernels.PreCmdSize)))
}

func (p *prelaunch) kick() {
	p.want.Store(true)
	select {
	case p.arm <- struct{}{}:
	default:
	}
}

// takePreLocked issues a fused step through the waiting kernel, if there
// is one (s.mu held); it reports whether it did.
func (s *CUDAStream) takePreLocked(ws *transport.WaitSpec, waitFirst bool, p kernels.PutSignalSpec, w kernels.WaitSpec) bool {
	pre := s.pre
	if pre == nil || !pre.live || s.err != nil || s.s.Capturing() || atomic.LoadUint32((*uint32)(s.b.flag.Host)) != 0 {
		return false
	}
	if pre.acked() >= pre.gen {
		// The kernel has ended without a command (it saw the abort flag,
		// which has been lowered since): nobody would read this one.
		pre.live = false
		return false
	}
	host, _ := pre.slot(pre.gen)
	if err := kernels.WritePreCmd(host, pre.gen, waitFirst, p, w, s.nextDone()); err != nil {
		s.doneTail = false
		s.err = err
		return true
	}
	pre.live = false
	pre.taken++
	s.pending = append(s.pending, ws)
	pre.kick()
	return true
}

// cancelPreLocked sends the waiting kernel, if any, away, and keeps the
// helper from enqueuing another until the next fused step; and stops the
// plan server, if any (s.mu held).
func (s *CUDAStream) cancelPreLocked() {
	s.stopServeLocked()
	if s.pre != nil {
		s.pre.hold = true
		s.dropPreLocked()
	}
}

// dropPreLocked sends the waiting kernel, if any, away (s.mu held). The
// kernel is still on the stream for a moment: a sync must ask the driver.
func (s *CUDAStream) dropPreLocked() {
	if pre := s.pre; pre != nil && pre.live {
		host, _ := pre.slot(pre.gen)
		kernels.CancelPreCmd(host, pre.gen)
		pre.live = false
		s.doneTail = false
	}
}

// quiesce cancels the prelaunched kernels of every stream of b: device
// memory allocation and release, IPC mappings and synchronous copies may
// wait for the device's running kernels, and a waiting one never ends by
// itself. The caller must not hold any stream's lock.
func (b *CUDABackend) quiesce() {
	b.smu.Lock()
	streams := append([]*CUDAStream(nil), b.streams...)
	b.smu.Unlock()
	for _, s := range streams {
		if s.pre == nil {
			continue
		}
		s.mu.Lock()
		s.cancelPreLocked()
		s.mu.Unlock()
	}
}

// prelauncher enqueues the next step's kernel whenever the last work on
// the stream is a fused step, until the stream stops. It polls for demand
// on its own thread, without yielding it (waking a sleeping goroutine, or
// one that yielded a locked thread, takes longer than a step), and sleeps
// after a millisecond without any.
func (s *CUDAStream) prelauncher() {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	pre := s.pre
	for {
		idle := time.Now()
		for i := 0; !pre.want.Load(); i++ {
			if i&255 == 255 && time.Since(idle) > time.Millisecond {
				// Idle: let the GPU go idle too until the next step.
				s.lock()
				if !pre.want.Load() {
					s.dropPreLocked()
				}
				s.mu.Unlock()
				select {
				case <-pre.arm:
				case <-s.stop:
					return
				}
			}
		}
		select {
		case <-s.stop:
			return
		default:
		}
		pre.want.Store(false)
		s.lock()
		if !pre.off && !pre.live && !pre.hold && s.err == nil && s.doneTail && pre.gen+1-pre.acked() <= preSlots &&
			!s.s.Capturing() && atomic.LoadUint32((*uint32)(s.b.flag.Host)) == 0 {
			if err := s.b.current(); err == nil {
				_, dev := pre.slot(pre.gen + 1)
				if err := s.b.k.Prelaunch(s.s, dev, pre.gen+1, pre.ackDev(), s.b.flag.Dev); err != nil {
					pre.off = true
				} else {
					pre.gen++
					pre.live = true
					s.gen++
					s.idle = false
				}
			}
		}
		s.mu.Unlock()
	}
}

// report prints the counts (LUACOLL_PRELAUNCH=2).
func (p *prelaunch) report() {
	if prelaunchStats {
		fmt.Fprintf(os.Stderr, "prelaunch: %d fused steps through prelaunched kernels, %d launched\n", p.taken, p.launched)
	}
}

// lock takes s.mu. With prelaunching, the helper holds it for a launch
// (a few microseconds) while the rank's goroutine may want it: a goroutine
// locked to its thread that sleeps on the mutex takes tens of microseconds
// to wake, so it polls for the lock a while first (measured: a ping-pong
// step took 40 us with a plain Lock).
func (s *CUDAStream) lock() {
	if s.pre == nil {
		s.mu.Lock()
		return
	}
	var until time.Time
	for i := 0; ; i++ {
		if s.mu.TryLock() {
			return
		}
		if i&63 == 63 {
			if until.IsZero() {
				until = time.Now().Add(100 * time.Microsecond)
			} else if time.Now().After(until) {
				s.mu.Lock()
				return
			}
		}
	}
}
