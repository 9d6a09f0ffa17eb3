package gpu

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/luacoll/luacoll/cuda"
	"github.com/luacoll/luacoll/kernels"
	"github.com/luacoll/luacoll/transport"
	"github.com/luacoll/luacoll/transport/knobs"
)

// memopWait is a wait enqueued as cuStreamWaitValue64 on one slot.
type memopWait struct {
	spec     *transport.WaitSpec
	slot     transport.Addr
	enq      time.Time
	delta    uint64 // added to the slot to release the wait; undone after
	released bool
}

// memopCmp reports whether a comparison has a stream memory operation.
func memopCmp(c transport.Cmp) (cuda.WaitValueFlags, bool) {
	switch c {
	case transport.CmpGe:
		return cuda.WaitValueGEQ, true
	case transport.CmpEq:
		return cuda.WaitValueEQ, true
	}
	return 0, false
}

// Wait implements Stream. On paths "ce" and "auto" a wait on single slots
// with >= or == is a stream memory operation (no SM); a wait on a sum, any
// other comparison, and path "sm" use the one-thread wait kernel with its
// device-side timeout.
func (s *CUDAStream) Wait(w transport.WaitSpec) {
	defer onThread()()
	if len(w.Slots) == 0 || s.proxyWait(w) {
		return
	}
	groups := [][]transport.Addr{w.Slots}
	if w.Mode == transport.WaitEach {
		groups = groups[:0]
		for _, a := range w.Slots {
			groups = append(groups, []transport.Addr{a})
		}
	}
	flags, memop := memopCmp(w.Cmp)
	memop = memop && s.path != "sm"
	for _, g := range groups {
		if len(g) != 1 {
			memop = false
		}
	}
	if len(groups) == 1 {
		if spec, ok := s.waitSpec(w, groups[0]); ok {
			ws := w
			hw := &heldWait{spec: spec, ws: &ws, memop: memop, flags: flags}
			s.lock()
			defer s.mu.Unlock()
			if p := s.held.put; p != nil {
				// A put_signal then this wait: one launch.
				s.launchFusedLocked(&ws, false, *p, spec)
				return
			}
			s.flushLocked()
			s.holdLocked(heldOp{wait: hw})
			return
		}
	}
	s.enqueue(func() error {
		ws := w
		for _, g := range groups {
			if memop {
				if err := s.s.WaitValue64(cuda.DevicePtr(g[0]), w.Value, flags); err != nil {
					return err
				}
				s.memops = append(s.memops, &memopWait{spec: &ws, slot: g[0], enq: time.Now()})
				continue
			}
			spec, ok := s.waitSpec(w, g)
			if !ok {
				return errors.New("wait: slots are not evenly spaced")
			}
			if err := s.b.k.Wait(s.s, spec); err != nil {
				return err
			}
		}
		s.pending = append(s.pending, &ws)
		return nil
	})
}

// waitSpec builds the wait kernel's arguments for one group of slots
// (evenly spaced); ok is false when they are not.
func (s *CUDAStream) waitSpec(w transport.WaitSpec, g []transport.Addr) (kernels.WaitSpec, bool) {
	stride := uint64(8)
	if len(g) > 1 {
		stride = uint64(g[1] - g[0])
		for i := 2; i < len(g); i++ {
			if uint64(g[i]-g[i-1]) != stride {
				return kernels.WaitSpec{}, false
			}
		}
	}
	return kernels.WaitSpec{Slots: cuda.DevicePtr(g[0]), Count: uint32(len(g)), Stride: stride,
		Cmp: w.Cmp, Value: w.Value, Timeout: w.Timeout, Abort: s.b.flag.Dev, Record: s.rec.Dev}, true
}

// readSlot reads a 64-bit slot of device memory now (on the side stream).
func (s *CUDAStream) readSlot(a transport.Addr) (uint64, error) {
	var b [8]byte
	if err := s.b.drv.MemcpyDtoH(b[:], cuda.DevicePtr(a)); err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint64(b[:]), nil
}

// addSlot atomically adds v to a slot (a one-thread kernel on the side stream).
func (s *CUDAStream) addSlot(a transport.Addr, v uint64) error {
	s.b.mu.Lock()
	defer s.b.mu.Unlock()
	if err := s.b.k.Signal(s.b.aux, cuda.DevicePtr(a), kernels.SignalAdd, v); err != nil {
		return err
	}
	return s.b.aux.Synchronize()
}

// watch runs while Sync waits: a memory-operation wait has no timeout of
// its own, so when one has waited longer than its timeout, or the job is
// aborting, or the stream was interrupted, watch records the error and
// releases it (and every later one) by adding to its slot what it lacks;
// undoRelease takes the additions back once the stream has drained. The
// record is poisoned too, so that the wait kernels behind return at once.
func (s *CUDAStream) watch(now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var cause error
	if err := s.abort.Err(); err != nil {
		cause = err
	} else if s.interrupt != nil {
		cause = s.interrupt
	} else if s.memErr != nil {
		cause = s.memErr
	}
	for _, m := range s.memops {
		if m.released {
			continue
		}
		v, err := s.readSlot(m.slot)
		if err != nil {
			return
		}
		if m.spec.Cmp.Holds(v, m.spec.Value) {
			continue
		}
		if cause == nil && now.Sub(m.enq) < m.spec.Timeout {
			return // the first wait still blocking is within its time
		}
		if s.memErr == nil {
			c := cause
			if c == nil {
				c = s.b.timeoutCause()
			}
			s.memErr = fmt.Errorf("wait: %v (observed %d, target %d)", c, v, m.spec.Value)
			if m.spec.Fail != nil || m.spec.Describe != nil {
				s.memFail = &waitFailure{spec: m.spec, observed: v, cause: c}
			}
			cause = s.memErr
			// Poison the record: the wait kernels behind give up at once.
			r := (*[4]uint64)(s.rec.Host)
			atomic.StoreUint64(&r[1], v)
			atomic.StoreUint64(&r[2], m.spec.Value)
			atomic.StoreUint32((*uint32)(s.rec.Host), uint32(kernels.StatusAborted))
		}
		m.delta = m.spec.Value - v
		if s.addSlot(m.slot, m.delta) == nil {
			m.released = true
		}
	}
}

// undoRelease takes back what watch added to released slots.
func (s *CUDAStream) undoRelease() {
	for _, m := range s.memops {
		if m.released && m.delta != 0 {
			_ = s.addSlot(m.slot, -m.delta)
		}
	}
	s.memops = s.memops[:0]
}

// syncSpin is how long Sync polls the stream without yielding its thread
// (LUACOLL_SYNC_SPIN_US, default 100 us; 0: yield from the start). A
// goroutine that yields may come back on another OS thread, where the
// context is not current: polling in place keeps a short sync at the cost
// of one launch and one query.
var syncSpin = knobs.SyncSpin.Or(100 * time.Microsecond)

// Sync implements Stream.
func (s *CUDAStream) Sync(ctx context.Context) error {
	err := s.syncDevice(ctx)
	if err == nil {
		err = s.flushNet()
	}
	if err != nil {
		s.mu.Lock()
		hooks := append([]func(error){}, s.onReport...)
		s.mu.Unlock()
		for _, h := range hooks {
			h(err)
		}
	}
	return err
}

// syncDevice is Sync without the network flush: it returns once the
// device work enqueued so far has completed.
func (s *CUDAStream) syncDevice(ctx context.Context) error {
	// The context stays current on this thread for the whole call.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := s.b.current(); err != nil {
		return err
	}
	s.lock()
	if s.closed {
		s.mu.Unlock()
		return errStreamClosed
	}
	s.flushLocked()
	tail, seq := s.doneTail && s.err == nil, s.doneSeq
	idle, gen := s.idle, s.gen
	s.mu.Unlock()
	fast, cancelled, err := s.awaitDrained(ctx, idle, tail, seq)
	if err != nil {
		return err
	}
	s.lock()
	if s.closed {
		// Closed while this sync waited: its record and report memory
		// are gone.
		s.mu.Unlock()
		return errStreamClosed
	}
	s.undoRelease()
	// Nothing enqueued since the stream was seen drained: it is idle.
	s.idle = s.gen == gen
	err = s.takeErrLocked(tail && !fast, seq)
	fail := s.takeWaitFailureLocked(err)
	err = s.endInterruptLocked(err, fail)
	s.pending = s.pending[:0]
	clear(s.plans)
	s.plans = s.plans[:0]
	s.mu.Unlock()
	if fail != nil {
		err = fail.err()
	}
	if cancelled && err == nil {
		err = fmt.Errorf("sync: %w", context.Cause(ctx))
	}
	return err
}

// awaitDrained waits until the stream drained: at once when it was idle,
// by the last fused launch's own report when tail (the report of step
// seq), else by asking the driver, spinning for syncSpin and then
// yielding. When ctx ends it interrupts the waits and keeps draining. It
// reports whether the drain was seen without the driver (fast), and
// whether ctx ended (cancelled).
func (s *CUDAStream) awaitDrained(ctx context.Context, idle, tail bool, seq uint64) (fast, cancelled bool, err error) {
	// When the last work is a fused launch, its own report that it ended
	// is the stream draining: that launch wrote everything it writes
	// (released before the report) and nothing follows it. Otherwise, or
	// when the report is late, ask the driver.
	spinning, spinUntil := syncSpin > 0, time.Now().Add(syncSpin)
	fast = idle || (tail && spinning && s.doneSeen(seq, syncSpin))
	if !fast && s.pre != nil {
		// A prelaunched kernel would keep the stream busy.
		s.mu.Lock()
		s.cancelPreLocked()
		s.mu.Unlock()
	}
	for i := 0; !fast; i++ {
		done, err := s.s.Query()
		if err != nil {
			return fast, cancelled, fmt.Errorf("sync: %w", transport.ExplainDeviceFault(err, s.abort))
		}
		if done {
			break
		}
		if spinning {
			if i&15 != 0 || time.Now().Before(spinUntil) {
				continue
			}
			spinning, i = false, 0
		}
		if i > 2000 {
			if i%16 == 0 {
				s.watch(time.Now())
			}
			select {
			case <-ctx.Done():
				if !cancelled {
					// Interrupt the waits and keep draining: the stream
					// must be idle before anyone reuses it.
					cancelled = true
					s.Interrupt(context.Cause(ctx))
				}
			case <-time.After(20 * time.Microsecond):
			}
		} else {
			runtime.Gosched()
		}
	}
	return fast, cancelled, nil
}

// takeErrLocked takes the stream's error; with none, and checkTail, it is
// an error when the last step (seq) never reported its end.
func (s *CUDAStream) takeErrLocked(checkTail bool, seq uint64) error {
	err := s.err
	s.err = nil
	if checkTail && atomic.LoadUint64((*uint64)(s.done.Host)) < seq && err == nil {
		// The stream is idle and the last step never reported its end: a
		// prelaunched kernel left (on an abort) before it read the step.
		cause := s.abort.Err()
		if cause == nil {
			cause = s.interrupt
		}
		if cause == nil {
			cause = errors.New("its kernel ended first")
		}
		err = fmt.Errorf("sync: a put_signal + wait step was not run: %w", cause)
	}
	return err
}

// takeWaitFailureLocked takes the failed wait the device recorded, or a
// memory wait's failure, clearing both; it returns it unless err (an
// earlier error, which wins) is set.
func (s *CUDAStream) takeWaitFailureLocked(err error) *waitFailure {
	// A failed wait's error is built after mu is released: describing it
	// may read device memory (which peers did not signal), and a read
	// takes every stream's lock while a kernel is prelaunched.
	var fail *waitFailure
	memErr, memFail := s.memErr, s.memFail
	s.memErr, s.memFail = nil, nil
	rec := kernels.ReadRecord(s.rec.Host)
	if rec.Status != kernels.StatusOK {
		wf := s.blame(rec)
		kernels.ClearRecord(s.rec.Host)
		if memErr != nil {
			wf = waitFailure{plain: memErr}
			if memFail != nil {
				wf = *memFail
			}
		}
		if err == nil {
			fail = &wf
		}
	} else if err == nil && memErr != nil {
		fail = &waitFailure{plain: memErr}
		if memFail != nil {
			fail = memFail
		}
	}
	return fail
}

// endInterruptLocked ends an interrupt of the stream's waits (clearing the
// device's flag unless the job aborts); the interrupt is the sync's error
// when it has none (err, fail).
func (s *CUDAStream) endInterruptLocked(err error, fail *waitFailure) error {
	if s.interrupt != nil && s.abort.Err() == nil {
		atomic.StoreUint32((*uint32)(s.b.flag.Host), 0)
	}
	if err == nil && fail == nil && s.interrupt != nil {
		err = s.interrupt
	}
	s.interrupt = nil
	return err
}

// waitFailure is a failed wait whose error is built later, outside the
// stream's lock (WaitSpec.Failed may read device memory); plain, when
// set, is the error itself.
type waitFailure struct {
	spec     *transport.WaitSpec
	observed uint64
	cause    error
	plain    error
	build    func() error // when set, builds the error (a device plan's wait)
}

func (f *waitFailure) err() error {
	if f.plain != nil {
		return f.plain
	}
	if f.build != nil {
		return f.build()
	}
	return f.spec.Failed(f.observed, f.cause)
}

// blame finds the wait a failure record belongs to: the first pending
// wait whose target matches and whose condition the observed value misses.
func (s *CUDAStream) blame(rec kernels.Record) waitFailure {
	cause := s.b.timeoutCause()
	if rec.Status == kernels.StatusMismatch {
		cause = transport.ErrMismatch
	}
	if rec.Status == kernels.StatusAborted {
		if cause = s.abort.Err(); cause == nil {
			cause = s.interrupt
		}
		if cause == nil {
			cause = errors.New("aborted")
		}
	}
	if rec.Slot == kernels.ProxyCallSlot {
		return waitFailure{plain: fmt.Errorf("a graph's call into the host got no answer: %w (call %d, %d answered)", cause, rec.Target, rec.Observed)}
	}
	if wf, ok := s.blamePlan(rec, cause); ok {
		return wf
	}
	for _, w := range s.pending {
		if w.Value == rec.Target && !w.Cmp.Holds(rec.Observed, w.Value) && (w.Fail != nil || w.Describe != nil) {
			return waitFailure{spec: w, observed: rec.Observed, cause: cause}
		}
	}
	if len(s.pending) > 0 && (s.pending[0].Fail != nil || s.pending[0].Describe != nil) {
		return waitFailure{spec: s.pending[0], observed: rec.Observed, cause: cause}
	}
	return waitFailure{plain: fmt.Errorf("device wait: %v (observed %d, target %d)", cause, rec.Observed, rec.Target)}
}
