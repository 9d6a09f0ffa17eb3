package cuda

/*
#include "lc_cuda.h"
*/
import "C"

import (
	"fmt"
	"unsafe"
)

// Stream is a CUDA stream (CUstream). A nil *Stream stands for the legacy
// default stream wherever a stream is accepted.
type Stream struct {
	d *Driver
	h unsafe.Pointer
	// graphLaunch: kernels for this stream may be launched through
	// one-kernel graphs (SetGraphLaunch); capturing: between BeginCapture
	// and EndCapture, when they may not.
	graphLaunch, capturing bool
}

// SetGraphLaunch lets launchers that support it enqueue kernels on s
// through one-kernel graphs (see KernelGraph). Only for a stream that is
// never pulled into another stream's capture: its own captures are known.
func (s *Stream) SetGraphLaunch(on bool) { s.graphLaunch = on }

// GraphLaunch reports whether a kernel for s may go through a one-kernel
// graph now: enabled, and s is not being captured.
func (s *Stream) GraphLaunch() bool { return s != nil && s.graphLaunch && !s.capturing }

// Capturing reports whether s is between BeginCapture and EndCapture.
func (s *Stream) Capturing() bool { return s != nil && s.capturing }

// streamNonBlocking is CU_STREAM_NON_BLOCKING.
const streamNonBlocking = 0x1

func (s *Stream) handle() unsafe.Pointer {
	if s == nil {
		return nil
	}
	return s.h
}

// DefaultStream returns the legacy default (NULL) stream of the current
// context. Synchronous copies from pageable memory (MemcpyHtoD) may return
// before their DMA has landed; synchronizing this stream waits for it,
// which streams made by StreamCreate (non-blocking) do not do by themselves.
func (d *Driver) DefaultStream() *Stream { return &Stream{d: d} }

// StreamCreate creates a stream that does not synchronize with the legacy
// default stream (CU_STREAM_NON_BLOCKING) in the current context.
func (d *Driver) StreamCreate() (*Stream, error) {
	o := C.lc_cuStreamCreate(d.fn[symStreamCreate], streamNonBlocking)
	if o.r != 0 {
		return nil, d.fail(o.r, "cuStreamCreate(CU_STREAM_NON_BLOCKING)")
	}
	return &Stream{d: d, h: o.h}, nil
}

// Destroy releases the stream (cuStreamDestroy); queued work still runs.
func (s *Stream) Destroy() error {
	if r := C.lc_cuStreamDestroy(s.d.fn[symStreamDestroy], s.h); r != 0 {
		return s.d.fail(r, "cuStreamDestroy")
	}
	return nil
}

// Synchronize waits until all work queued on s has completed.
func (s *Stream) Synchronize() error {
	if r := C.lc_cuStreamSynchronize(s.d.fn[symStreamSynchronize], s.h); r != 0 {
		return s.d.fail(r, "cuStreamSynchronize")
	}
	return nil
}

// Query reports whether all work queued on s has completed.
func (s *Stream) Query() (bool, error) {
	r := C.lc_cuStreamQuery(s.d.fn[symStreamQuery], s.h)
	switch r {
	case 0:
		return true, nil
	case ErrorNotReady:
		return false, nil
	}
	return false, s.d.fail(r, "cuStreamQuery")
}

// LaunchHostFunc enqueues f (cuLaunchHostFunc): it runs once the work
// before it on s has completed, and the work after it waits for it.
func (s *Stream) LaunchHostFunc(f *HostFunc) error {
	if err := s.d.need(symLaunchHostFunc); err != nil {
		return err
	}
	if r := C.lc_cuLaunchHostFunc(s.d.fn[symLaunchHostFunc], s.h, C.uintptr_t(f.id)); r != 0 {
		return s.d.fail(r, "cuLaunchHostFunc")
	}
	return nil
}

// WaitEvent makes future work on s wait for e (cuStreamWaitEvent).
func (s *Stream) WaitEvent(e *Event) error {
	if r := C.lc_cuStreamWaitEvent(s.d.fn[symStreamWaitEvent], s.h, e.h, 0); r != 0 {
		return s.d.fail(r, "cuStreamWaitEvent")
	}
	return nil
}

// WriteValueFlags are the CUstreamWriteValue_flags.
type WriteValueFlags uint32

const (
	// WriteValueDefault orders the write after all prior work on the stream,
	// with a memory barrier (the default).
	WriteValueDefault WriteValueFlags = 0
	// WriteValueNoMemoryBarrier lets the write pass earlier writes. The v2
	// stream memory operations this package resolves reject it
	// (CUDA_ERROR_INVALID_VALUE, seen with the CUDA 13.0 driver); it is
	// kept for completeness and is never set by default.
	WriteValueNoMemoryBarrier WriteValueFlags = 1
)

// WaitValueFlags are the CUstreamWaitValue_flags: one comparison, optionally
// with WaitValueFlush.
type WaitValueFlags uint32

const (
	// WaitValueGEQ waits until (int64)(*addr - value) >= 0, a wrap-safe >=.
	WaitValueGEQ WaitValueFlags = 0
	// WaitValueEQ waits until *addr == value.
	WaitValueEQ WaitValueFlags = 1
	// WaitValueAnd waits until (*addr & value) != 0.
	WaitValueAnd WaitValueFlags = 2
	// WaitValueNor waits until ^(*addr | value) != 0.
	WaitValueNor WaitValueFlags = 3
	// WaitValueFlush flushes outstanding remote writes before continuing.
	WaitValueFlush WaitValueFlags = 1 << 30
)

// WriteValue64 enqueues a 64-bit store of v to addr on s
// (cuStreamWriteValue64). The device must report
// AttrCanUse64BitStreamMemOps.
func (s *Stream) WriteValue64(addr DevicePtr, v uint64, flags WriteValueFlags) error {
	if err := s.d.need(symStreamWriteValue64); err != nil {
		return err
	}
	if r := C.lc_cuStreamWriteValue64(s.d.fn[symStreamWriteValue64], s.handle(), C.lc_dptr(addr), C.ulonglong(v), C.uint(flags)); r != 0 {
		return s.d.fail(r, fmt.Sprintf("cuStreamWriteValue64(%#x, %d, %#x)", uint64(addr), v, uint32(flags)))
	}
	return nil
}

// WaitValue64 makes later work on s wait until the 64-bit value at addr
// satisfies the comparison in flags against v (cuStreamWaitValue64).
func (s *Stream) WaitValue64(addr DevicePtr, v uint64, flags WaitValueFlags) error {
	if err := s.d.need(symStreamWaitValue64); err != nil {
		return err
	}
	if r := C.lc_cuStreamWaitValue64(s.d.fn[symStreamWaitValue64], s.handle(), C.lc_dptr(addr), C.ulonglong(v), C.uint(flags)); r != 0 {
		return s.d.fail(r, fmt.Sprintf("cuStreamWaitValue64(%#x, %d, %#x)", uint64(addr), v, uint32(flags)))
	}
	return nil
}

// Event is a CUDA event (CUevent).
type Event struct {
	d *Driver
	h unsafe.Pointer
}

// EventFlags are the CUevent_flags.
type EventFlags uint32

const (
	// EventDefault records timestamps.
	EventDefault EventFlags = 0
	// EventBlockingSync makes Synchronize block instead of spin.
	EventBlockingSync EventFlags = 1
	// EventDisableTiming records no timestamp: the cheapest event, for
	// ordering only.
	EventDisableTiming EventFlags = 2
	// EventInterprocess allows an IPC event handle (needs
	// EventDisableTiming).
	EventInterprocess EventFlags = 4
)

// EventCreate creates an event in the current context.
func (d *Driver) EventCreate(flags EventFlags) (*Event, error) {
	o := C.lc_cuEventCreate(d.fn[symEventCreate], C.uint(flags))
	if o.r != 0 {
		return nil, d.fail(o.r, fmt.Sprintf("cuEventCreate(%#x)", uint32(flags)))
	}
	return &Event{d: d, h: o.h}, nil
}

// NewTimingEvent creates an event that records timestamps, for ElapsedMs.
func (d *Driver) NewTimingEvent() (*Event, error) { return d.EventCreate(EventDefault) }

// NewSyncEvent creates an event with timing disabled, for ordering only.
func (d *Driver) NewSyncEvent() (*Event, error) { return d.EventCreate(EventDisableTiming) }

// Record captures the work queued so far on s (nil: default stream).
func (e *Event) Record(s *Stream) error {
	if r := C.lc_cuEventRecord(e.d.fn[symEventRecord], e.h, s.handle()); r != 0 {
		return e.d.fail(r, "cuEventRecord")
	}
	return nil
}

// Query reports whether the recorded work has completed.
func (e *Event) Query() (bool, error) {
	r := C.lc_cuEventQuery(e.d.fn[symEventQuery], e.h)
	switch r {
	case 0:
		return true, nil
	case ErrorNotReady:
		return false, nil
	}
	return false, e.d.fail(r, "cuEventQuery")
}

// Synchronize waits for the recorded work.
func (e *Event) Synchronize() error {
	if r := C.lc_cuEventSynchronize(e.d.fn[symEventSynchronize], e.h); r != 0 {
		return e.d.fail(r, "cuEventSynchronize")
	}
	return nil
}

// ElapsedMs returns the time in milliseconds between the completion of e
// and of end (cuEventElapsedTime); both must be timing events.
func (e *Event) ElapsedMs(end *Event) (float32, error) {
	var ms C.float
	if r := C.lc_cuEventElapsedTime(e.d.fn[symEventElapsedTime], &ms, e.h, end.h); r != 0 {
		return 0, e.d.fail(r, "cuEventElapsedTime")
	}
	return float32(ms), nil
}

// Destroy releases the event.
func (e *Event) Destroy() error {
	if r := C.lc_cuEventDestroy(e.d.fn[symEventDestroy], e.h); r != 0 {
		return e.d.fail(r, "cuEventDestroy")
	}
	return nil
}

// Copy enqueues a copy of n bytes from src to dst on s (cuMemcpyAsync).
func (s *Stream) Copy(dst, src DevicePtr, n uint64) error { return s.d.MemcpyAsync(dst, src, n, s) }
