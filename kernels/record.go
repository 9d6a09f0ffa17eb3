package kernels

import (
	"errors"
	"fmt"
	"sync/atomic"
	"time"
	"unsafe"
)

// RecordSize is the size in bytes of an error record in host-mapped memory.
const RecordSize = 32

// Status is the outcome stored in an error record.
type Status uint32

const (
	// StatusOK means no failure was recorded.
	StatusOK Status = 0
	// StatusTimeout means a wait or barrier gave up after its timeout.
	StatusTimeout Status = 1
	// StatusAborted means a wait or barrier saw the abort flag.
	StatusAborted Status = 2
	// StatusMismatch means an all-gather wait saw a peer's tag for the same
	// exec with another size: it can never match, so it gave up at once.
	StatusMismatch Status = 3
)

func (s Status) String() string {
	switch s {
	case StatusOK:
		return "ok"
	case StatusTimeout:
		return "timeout"
	case StatusAborted:
		return "aborted"
	case StatusMismatch:
		return "mismatch"
	}
	return fmt.Sprintf("status %d", uint32(s))
}

// ErrTimeout, ErrAborted and ErrMismatch are matched by errors.Is on a
// *WaitError.
var (
	ErrTimeout  = errors.New("device wait timed out")
	ErrAborted  = errors.New("device wait aborted")
	ErrMismatch = errors.New("device wait saw a tag that can never match")
)

// Record is the host view of the error record that wait and barrier fill in
// when they give up (layout: status u32, slot u32, observed u64, target
// u64, elapsed ns u64). A record holding a failure makes later waits and
// barriers that use it return at once until it is cleared.
type Record struct {
	Status   Status
	Slot     uint32        // slot that held the wait back (barrier: the peer rank)
	Observed uint64        // last value seen (wait: the sum; barrier: that slot)
	Target   uint64        // value waited for (barrier: the epoch)
	Elapsed  time.Duration // time spent waiting on the device clock
}

// ReadRecord reads the record at host (host-mapped memory of at least
// RecordSize bytes, 8-byte aligned) with atomic loads.
func ReadRecord(host unsafe.Pointer) Record {
	w := (*[4]uint64)(host)
	st := atomic.LoadUint32((*uint32)(host))
	return Record{
		Status:   Status(st),
		Slot:     atomic.LoadUint32((*uint32)(unsafe.Add(host, 4))),
		Observed: atomic.LoadUint64(&w[1]),
		Target:   atomic.LoadUint64(&w[2]),
		Elapsed:  time.Duration(atomic.LoadUint64(&w[3])),
	}
}

// ClearRecord resets the record at host to StatusOK, re-arming the waits
// that use it.
func ClearRecord(host unsafe.Pointer) {
	w := (*[4]uint64)(host)
	atomic.StoreUint64(&w[1], 0)
	atomic.StoreUint64(&w[2], 0)
	atomic.StoreUint64(&w[3], 0)
	atomic.StoreUint32((*uint32)(unsafe.Add(host, 4)), 0)
	atomic.StoreUint32((*uint32)(host), 0)
}

// CheckRecord returns the failure held by the record at host as a
// *WaitError, or nil, and clears it when clear is true.
func CheckRecord(host unsafe.Pointer, clear bool) error {
	r := ReadRecord(host)
	if r.Status == StatusOK {
		return nil
	}
	if clear {
		ClearRecord(host)
	}
	return &WaitError{Record: r}
}

// Err returns nil for StatusOK, else a *WaitError.
func (r Record) Err() error {
	if r.Status == StatusOK {
		return nil
	}
	return &WaitError{Record: r}
}

// WaitError is a device-side wait or barrier that gave up.
type WaitError struct {
	Record
}

// Error describes the failure, e.g. "device wait timed out after 50ms:
// slot 1 observed 0, target 1".
func (e *WaitError) Error() string {
	what := "device wait " + e.Status.String()
	switch e.Status {
	case StatusTimeout:
		what = ErrTimeout.Error()
	case StatusAborted:
		what = ErrAborted.Error()
	case StatusMismatch:
		what = ErrMismatch.Error()
	}
	return fmt.Sprintf("%s after %v: slot %d observed %d, target %d", what, e.Elapsed, e.Slot, e.Observed, e.Target)
}

// Is matches ErrTimeout, ErrAborted and ErrMismatch by status.
func (e *WaitError) Is(target error) bool {
	return (target == ErrTimeout && e.Status == StatusTimeout) || (target == ErrAborted && e.Status == StatusAborted) ||
		(target == ErrMismatch && e.Status == StatusMismatch)
}

// SetAbort sets (or, with v=false, clears) the 32-bit abort flag at host,
// host-mapped memory that waits and barriers poll.
func SetAbort(host unsafe.Pointer, v bool) {
	var x uint32
	if v {
		x = 1
	}
	atomic.StoreUint32((*uint32)(host), x)
}
