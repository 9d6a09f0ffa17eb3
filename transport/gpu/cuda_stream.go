package gpu

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/luacoll/luacoll/cuda"
	"github.com/luacoll/luacoll/kernels"
	"github.com/luacoll/luacoll/transport"
)

// CUDAStream is a rank's CUstream. Copies use the copy engines
// (cuMemcpyAsync) or the put kernel; a "set" signal is a stream memory
// write, an "add" a one-thread atomic kernel; waits are one-thread kernels
// with a device-side timeout that record failures in host-mapped memory.
type CUDAStream struct {
	b   *CUDABackend
	s   *cuda.Stream
	rec *cuda.MappedMem
	// closed: Close released the stream and its host memory (rec, done);
	// Sync and Failed then report errStreamClosed.
	closed bool
	abort  *transport.Abort
	stop   chan struct{}
	// path is the current operations' path: "ce", "sm" or "auto".
	path string

	mu      sync.Mutex
	err     error
	pending []*transport.WaitSpec
	// idle: the stream was seen drained and nothing was enqueued since;
	// gen counts enqueues (both under mu).
	idle bool
	gen  uint64
	// memops are the waits enqueued as stream memory operations (no SM, no
	// device-side timeout): Sync watches them and releases one that times
	// out or is aborted (see watch).
	memops []*memopWait
	memErr error
	// memFail is the wait behind memErr, whose full error Sync builds once
	// it released mu (see waitFailure).
	memFail   *waitFailure
	interrupt error
	events    []*cuda.Event
	planSide  *sideStream // plans' own-memory copies (cuda_plan.go)
	// held is a put_signal or a wait not launched yet: the next call may
	// share its launch (see hold); anything else launches it first.
	held      heldOp
	heldTimer *time.Timer
	timerGen  uint64 // the generation the timer was armed for
	// done is a host-mapped word where fused launches store their
	// sequence number as they end; doneSeq is the last number given out,
	// doneTail whether that launch is the last work enqueued (then Sync
	// can see the stream's work finish without asking the driver).
	done     *cuda.MappedMem
	doneSeq  uint64
	doneTail bool
	// pre is the prelaunched-step state (nil unless LUACOLL_PRELAUNCH=1),
	// serve the plan server's (cuda_serve.go; nil where pre is).
	pre   *prelaunch
	serve *planServer
	// stamps are the trace's timing events (cuda_stamp.go).
	stamps cudaStamps
	// proxy runs the operations on network peers (cuda_proxy.go).
	proxy proxyState
	// onInterrupt are called by Interrupt (OnInterrupt), after it;
	// onReport by a Sync that returns an error (OnReport).
	onInterrupt, onReport []func(error)
	// plans are the device plans launched since the last Sync (their
	// failures name their steps; see blamePlan).
	plans []*DevicePlan
}

// heldOp is an operation kept back for one call, so that a put_signal
// followed by a wait (or a wait followed by a put_signal), the two halves
// of a host-issued step, cost one launch; and so that an all-gather exec's
// done kernel and the next exec's ready kernel are one launch when the
// execs follow each other.
type heldOp struct {
	put  *kernels.PutSignalSpec
	wait *heldWait
	agp  *heldAGP
	plan *heldPlan
	gen  uint64
}

// heldPlan is the last launch of a plan's replay in stream mode (its last
// run of steps): when the next call replays the same plan, one launch
// ends that replay and starts the next (RunPlanSegments).
type heldPlan struct {
	p    *DevicePlan
	spec kernels.PlanSpec
}

// heldAGP is the done kernel of an all-gather exec of n bytes per rank.
type heldAGP struct {
	a *CUDAAGP
	n uint64
}

type heldWait struct {
	spec  kernels.WaitSpec // as the wait kernel takes it
	ws    *transport.WaitSpec
	memop bool // alone it would have been a stream memory operation
	flags cuda.WaitValueFlags
}

// holdFor is how long an operation may stay held when no call follows:
// then a timer launches it, so nothing waits on it for longer.
const holdFor = 20 * time.Microsecond

// flushLocked launches the held operation, if any, as it would have been
// launched alone. s.mu is held.
func (s *CUDAStream) flushLocked() {
	h := s.held
	if h.put == nil && h.wait == nil && h.agp == nil && h.plan == nil {
		return
	}
	s.held = heldOp{gen: h.gen + 1}
	s.runLocked(func() error {
		switch {
		case h.put != nil:
			p := h.put
			return s.b.k.PutSignal(s.s, p.Dst, p.Src, p.N, p.Slot, p.Op, p.Value)
		case h.agp != nil:
			return h.agp.a.ak.Done(s.s, h.agp.a.done, h.agp.n)
		case h.plan != nil:
			return s.b.k.Plan(s.s, h.plan.spec)
		}
		w := h.wait
		if w.memop {
			if err := s.s.WaitValue64(w.spec.Slots, w.spec.Value, w.flags); err != nil {
				return err
			}
			s.memops = append(s.memops, &memopWait{spec: w.ws, slot: transport.Addr(w.spec.Slots), enq: time.Now()})
		} else if err := s.b.k.Wait(s.s, w.spec); err != nil {
			return err
		}
		s.pending = append(s.pending, w.ws)
		return nil
	})
}

// runLocked enqueues the work f does on the stream (s.mu held, any held
// operation dealt with): nothing once the stream has failed, and an error
// of f fails it. It reports whether f ran without error.
func (s *CUDAStream) runLocked(f func() error) bool {
	s.cancelPreLocked()
	s.doneTail = false
	s.gen++
	s.idle = false
	if s.err != nil {
		return false
	}
	if err := s.b.current(); err != nil {
		s.err = err
		return false
	}
	if err := f(); err != nil {
		s.err = err
		return false
	}
	return true
}

// holdLocked keeps h back (s.mu is held) and arms the timer that launches
// it if no call comes.
func (s *CUDAStream) holdLocked(h heldOp) {
	s.gen++
	s.idle = false
	h.gen = s.held.gen + 1
	s.held = h
	s.timerGen = h.gen
	if s.heldTimer == nil {
		s.heldTimer = time.AfterFunc(holdFor, s.onHoldTimer)
		return
	}
	s.heldTimer.Reset(holdFor)
}

// onHoldTimer launches the operation the timer was armed for, if it is
// still held.
func (s *CUDAStream) onHoldTimer() {
	defer onThread()()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.held.gen == s.timerGen {
		s.flushLocked()
	}
}

func (s *CUDAStream) enqueue(f func() error) {
	defer onThread()()
	s.lock()
	defer s.mu.Unlock()
	s.flushLocked()
	s.runLocked(f)
}

// AutoSMCopyMax is the largest copy that path "auto" gives to the put
// kernel; larger copies go to the copy engines.
const AutoSMCopyMax = 64 << 10

// SetPath implements PathSetter.
func (s *CUDAStream) SetPath(path string) { s.path = path }

// Copy implements Stream.
func (s *CUDAStream) Copy(dst, src transport.Addr, n uint64) {
	if n == 0 || s.copyOnHost(dst, src, n) {
		return
	}
	sm := s.path == "sm" || (s.path == "auto" && n <= AutoSMCopyMax)
	s.enqueue(func() error {
		if sm {
			return s.b.k.Put(s.s, cuda.DevicePtr(dst), cuda.DevicePtr(src), n)
		}
		return s.b.drv.MemcpyAsync(cuda.DevicePtr(dst), cuda.DevicePtr(src), n, s.s)
	})
}

// copyOnHost makes a copy with the host's CPUs when both ranges lie in
// device-mapped host memory (the proxy path's windows and buffers) and
// the stream is idle, so that nothing on it can come before the copy:
// there is no launch to make, and the stream stays idle for the network
// operation or host-polled wait that usually comes next, which then need
// not drain it. Device work enqueued later sees the bytes (a launch orders
// the host's earlier writes before it). A copy engine moves such memory
// over PCIe twice (32 MiB took about 5 ms on the GPU machine); a large
// copy is spread over goroutines (transport.Memmove). It reports whether
// it made the copy.
func (s *CUDAStream) copyOnHost(dst, src transport.Addr, n uint64) bool {
	if !s.b.hostMapped(dst, n) || !s.b.hostMapped(src, n) {
		return false
	}
	return s.onHost(func() { transport.Memmove(transport.HostBytes(dst, n), transport.HostBytes(src, n)) })
}

// onHost runs f, host work in place of the stream's next operation, where
// the stream is idle (nothing on it can come before f), and reports
// whether it did.
func (s *CUDAStream) onHost(f func()) bool {
	s.lock()
	defer s.mu.Unlock()
	// Idle means nothing is held back either: holding an operation clears it.
	if !s.idle || s.err != nil || s.s.Capturing() {
		return false
	}
	f()
	return true
}

// signalOnHost is copyOnHost for a put_signal (n bytes from src to dst,
// then v stored into slot or added to it; n 0: the signal alone): where
// every range lies in device-mapped host memory and the stream is idle,
// the host's CPUs make it at once, in order, and the stream stays idle for
// the network operation or host-polled wait that follows (on the proxy
// path, a signal to a rank of the node). The slot's store or add is
// atomic and comes after the data's stores (the runtime's copy fences its
// non-temporal ones), so a peer that sees it sees the data. It reports
// whether it made them.
func (s *CUDAStream) signalOnHost(dst, src transport.Addr, n uint64, slot transport.Addr, add bool, v uint64) bool {
	if !s.b.hostMapped(slot, 8) || (n > 0 && (!s.b.hostMapped(dst, n) || !s.b.hostMapped(src, n))) {
		return false
	}
	return s.onHost(func() {
		if n > 0 {
			transport.Memmove(transport.HostBytes(dst, n), transport.HostBytes(src, n))
		}
		if add {
			atomic.AddUint64((*uint64)(slot.Pointer()), v)
		} else {
			atomic.StoreUint64((*uint64)(slot.Pointer()), v)
		}
	})
}

type sideStream struct {
	s          *cuda.Stream
	fork, join *cuda.Event
}

// PutSignal implements PutSignaler: on the host where signalOnHost can,
// else on the kernel path (and on "auto" for copies up to AutoSMCopyMax)
// the data and the signal go in one launch.
func (s *CUDAStream) PutSignal(dst, src transport.Addr, n uint64, slot transport.Addr, add bool, v uint64) bool {
	defer onThread()()
	if s.signalOnHost(dst, src, n, slot, add, v) {
		return true
	}
	if !(s.path == "sm" || (s.path == "auto" && n <= AutoSMCopyMax)) {
		return false
	}
	op := kernels.SignalSet
	if add {
		op = kernels.SignalAdd
	}
	p := kernels.PutSignalSpec{Dst: cuda.DevicePtr(dst), Src: cuda.DevicePtr(src), N: n, Slot: cuda.DevicePtr(slot), Op: op, Value: v}
	s.lock()
	defer s.mu.Unlock()
	if w := s.held.wait; w != nil {
		// A wait then this put_signal: one launch.
		s.launchFusedLocked(w.ws, true, p, w.spec)
		return true
	}
	s.flushLocked()
	s.holdLocked(heldOp{put: &p})
	return true
}

// launchFusedLocked launches the held operation together with the one
// being issued (s.mu held): the put + signal p and the wait w in one
// kernel (w first when waitFirst), or through a prelaunched kernel; ws is
// the wait to account for.
func (s *CUDAStream) launchFusedLocked(ws *transport.WaitSpec, waitFirst bool, p kernels.PutSignalSpec, w kernels.WaitSpec) {
	s.stopServeLocked()
	s.gen++
	s.idle = false
	s.held = heldOp{gen: s.held.gen + 1}
	if s.pre != nil {
		s.pre.hold = false
		if s.takePreLocked(ws, waitFirst, p, w) {
			return
		}
		s.dropPreLocked() // a waiting kernel that could not take it
		s.pre.launched++
		defer s.pre.kick()
	}
	if s.err != nil {
		return
	}
	if err := s.b.current(); err != nil {
		s.err = err
		return
	}
	var err error
	if waitFirst {
		err = s.b.k.WaitPutSignal(s.s, w, p, s.nextDone())
	} else {
		err = s.b.k.PutSignalWait(s.s, p, w, s.nextDone())
	}
	if err != nil {
		s.err = err
		s.doneTail = false // no report will come
		return
	}
	s.pending = append(s.pending, ws)
}

// nextDone numbers a fused launch about to be enqueued (s.mu held) and
// makes it the stream's last work; under capture it reports nothing.
func (s *CUDAStream) nextDone() kernels.Done {
	if s.s.Capturing() {
		s.doneTail = false
		return kernels.Done{}
	}
	s.doneSeq++
	s.doneTail = true
	return kernels.Done{Ptr: s.done.Dev, Seq: s.doneSeq}
}

// doneSeen spins until the host-mapped done word reaches seq, for at most
// d; it reports whether it did.
func (s *CUDAStream) doneSeen(seq uint64, d time.Duration) bool {
	w := (*uint64)(s.done.Host)
	until := time.Now().Add(d)
	for i := 0; ; i++ {
		if atomic.LoadUint64(w) >= seq {
			return true
		}
		if i&63 == 63 && time.Now().After(until) {
			return false
		}
	}
}

// Store64 implements Stream.
func (s *CUDAStream) Store64(dst transport.Addr, v uint64) {
	if s.signalOnHost(0, 0, 0, dst, false, v) {
		return
	}
	sm := s.path == "sm"
	s.enqueue(func() error {
		if sm {
			return s.b.k.Signal(s.s, cuda.DevicePtr(dst), kernels.SignalSet, v)
		}
		return s.s.WriteValue64(cuda.DevicePtr(dst), v, cuda.WriteValueDefault)
	})
}

// Add64 implements Stream.
func (s *CUDAStream) Add64(dst transport.Addr, v uint64) {
	if s.signalOnHost(0, 0, 0, dst, true, v) {
		return
	}
	s.enqueue(func() error { return s.b.k.Signal(s.s, cuda.DevicePtr(dst), kernels.SignalAdd, v) })
}

// Host implements Stream: the callback runs once everything before it has
// completed (the stream is synchronized first).
func (s *CUDAStream) Host(fn func() error) {
	if err := s.Sync(context.Background()); err != nil {
		s.mu.Lock()
		if s.err == nil {
			s.err = err
		}
		s.mu.Unlock()
		return
	}
	if err := fn(); err != nil {
		s.mu.Lock()
		if s.err == nil {
			s.err = err
		}
		s.mu.Unlock()
	}
}

type cudaMark struct {
	ev *cuda.Event
	s  *CUDAStream
}

func (m *cudaMark) Since(earlier transport.Mark) (time.Duration, error) {
	defer onThread()()
	e, ok := earlier.(*cudaMark)
	if !ok || m.ev == nil || e.ev == nil {
		return 0, errors.New("marks of different streams")
	}
	if err := m.s.b.current(); err != nil {
		return 0, err
	}
	ms, err := e.ev.ElapsedMs(m.ev)
	if err != nil {
		return 0, err
	}
	return time.Duration(float64(ms) * float64(time.Millisecond)), nil
}

// Mark implements Stream with a timing event.
func (s *CUDAStream) Mark() transport.Mark {
	m := &cudaMark{s: s}
	s.enqueue(func() error {
		ev, err := s.b.drv.NewTimingEvent()
		if err != nil {
			return err
		}
		s.events = append(s.events, ev)
		m.ev = ev
		return ev.Record(s.s)
	})
	return m
}

// Interrupt implements Stream: the running and queued device waits end at
// once (through the abort flag); copies already queued still complete.
func (s *CUDAStream) Interrupt(cause error) {
	s.mu.Lock()
	s.cancelPreLocked()
	s.interrupt = cause
	hooks := append([]func(error){}, s.onInterrupt...)
	s.mu.Unlock()
	atomic.StoreUint32((*uint32)(s.b.flag.Host), 1)
	for _, h := range hooks {
		h(cause)
	}
}

// Close implements Stream.
func (s *CUDAStream) Close() {
	defer onThread()()
	select {
	case <-s.stop:
		return
	default:
	}
	close(s.stop)
	s.mu.Lock()
	if s.heldTimer != nil {
		s.heldTimer.Stop()
	}
	if s.serve != nil && s.serve.timer != nil {
		s.serve.timer.Stop()
	}
	s.mu.Unlock()
	_ = s.b.current()
	// Drain through Sync, which releases waits that would never end.
	s.Interrupt(errors.New("stream closing"))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	_ = s.syncDevice(ctx)
	cancel()
	s.closeProxy()
	// A kernel still running after that may yet write its record and end
	// report: then keep their host memory rather than free it under it.
	drained, qerr := s.s.Query()
	keepHost := qerr == nil && !drained
	for _, ev := range s.events {
		_ = ev.Destroy()
	}
	s.closeStamps()
	if sd := s.planSide; sd != nil {
		_ = sd.s.Synchronize()
		_ = sd.s.Destroy()
		_ = sd.fork.Destroy()
		_ = sd.join.Destroy()
	}
	// From here on a Sync or Failed of another goroutine (a rank's loop
	// that meets the close of its comm) reads nothing that goes away.
	s.lock()
	s.closed = true
	s.mu.Unlock()
	s.b.k.ForgetStream(s.s)
	_ = s.s.Destroy()
	if !keepHost {
		_ = s.rec.Free()
		_ = s.done.Free()
		if s.pre != nil {
			s.pre.report()
			_ = s.pre.mem.Free()
		}
		if s.serve != nil {
			if prelaunchStats {
				fmt.Fprintf(os.Stderr, "plan server: %d device-mode plan calls served\n", s.serve.served)
			}
			s.serve.free()
		}
	}
	s.b.smu.Lock()
	for i, o := range s.b.streams {
		if o == s {
			s.b.streams = append(s.b.streams[:i], s.b.streams[i+1:]...)
			break
		}
	}
	s.b.smu.Unlock()
}

// errStreamClosed is what a stream says once Close released it.
var errStreamClosed = errors.New("stream closed")
