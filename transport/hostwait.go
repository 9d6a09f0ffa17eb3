package transport

import (
	"runtime"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/luacoll/luacoll/transport/knobs"
	"golang.org/x/sys/unix"
)

// A bell is one line of shared memory, in the region of the rank that
// waits, through which signallers wake a host wait that went to sleep.
// Its first word counts rings (the futex word); the word at BellWaiters
// counts the waits asleep or about to sleep on it. A signaller that finds
// no waiter pays one load of a line that stays in its cache; a wait that
// sleeps costs its signaller a futex wake.
//
// The futexes are shared (no FUTEX_PRIVATE_FLAG): the line is mapped by
// other processes, at other addresses.
const (
	// BellBytes is the size a bell takes (a whole 128-byte line).
	BellBytes = 128
	// BellWaiters is the offset of the waiter count in a bell.
	BellWaiters = 64
)

const (
	futexWait = 0
	futexWake = 1
)

func bellSeq(b Addr) *uint32     { return (*uint32)(b.ptr()) }
func bellWaiters(b Addr) *uint32 { return (*uint32)(b.Add(BellWaiters).ptr()) }

// RingBell wakes every wait asleep on bell (a no-op when none is). The
// store it follows must have been a sequentially consistent atomic (Go's
// atomics are), so that a wait either sees the store or is woken.
func RingBell(bell Addr) {
	if bell == 0 || atomic.LoadUint32(bellWaiters(bell)) == 0 {
		return
	}
	atomic.AddUint32(bellSeq(bell), 1)
	_, _, _ = unix.Syscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(bellSeq(bell))), futexWake, 1<<30, 0, 0, 0)
}

// sleepOnBell sleeps until bell rings or d passes, unless ready (called
// after the wait announced itself) says the condition already holds. It
// reports ready's answer.
func sleepOnBell(bell Addr, d time.Duration, ready func() bool) bool {
	seq := atomic.LoadUint32(bellSeq(bell))
	atomic.AddUint32(bellWaiters(bell), 1)
	defer atomic.AddUint32(bellWaiters(bell), ^uint32(0))
	if ready() {
		return true
	}
	ts := unix.NsecToTimespec(int64(d))
	// EAGAIN (rung in between), EINTR and ETIMEDOUT all mean: look again.
	_, _, _ = unix.Syscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(bellSeq(bell))), futexWait, uintptr(seq),
		uintptr(unsafe.Pointer(&ts)), 0, 0)
	return false
}

// WaitPolicy is how a host wait passes the time until its condition holds:
// it polls for Spin, then polls and yields the processor between polls
// until Yield, then sleeps on the waiting rank's bell until a signaller
// rings it (waits without a bell sleep in short naps instead). A wait that
// finds its stream idle runs on the caller for up to Inline before the
// stream's goroutine takes it over.
type WaitPolicy struct {
	Spin, Yield, Inline time.Duration
	// Goroutines: other ranks are goroutines of this process, so yields
	// let them have the processor too (runtime.Gosched every other time;
	// not otherwise, since it wakes an idle thread of the process to look
	// for work, and that thread takes a processor the ranks need).
	Goroutines bool
}

// Wait policies: ranks with a processor each spin; ranks that outnumber
// their processors hand the processor over after their first look, since the
// signal they wait for comes from a rank that needs it.
var (
	PolicyDedicated      = WaitPolicy{Spin: time.Millisecond, Yield: 10 * time.Millisecond, Inline: 5 * time.Millisecond}
	PolicyOversubscribed = WaitPolicy{Spin: 0, Yield: 10 * time.Millisecond, Inline: 5 * time.Millisecond}
)

// HostWaitPolicy returns the policy for a rank that shares its processors
// with others (oversubscribed) or not, and whose process holds other ranks
// (sharedProcess) or not, with the knobs' overrides (knobs.HostSpin and
// knobs.HostYield) in set (nil: the process's knobs).
func HostWaitPolicy(oversubscribed, sharedProcess bool, set *knobs.Set) WaitPolicy {
	p := PolicyDedicated
	if oversubscribed {
		p = PolicyOversubscribed
	}
	p.Goroutines = sharedProcess
	if set == nil {
		set = knobs.Current()
	}
	if d, ok := knobs.HostSpin.From(set); ok {
		p.Spin = d
	}
	if d, ok := knobs.HostYield.From(set); ok {
		p.Yield = d
	}
	if p.Yield < p.Spin {
		p.Yield = p.Spin
	}
	return p
}

// yieldProcessor gives the processor to other threads, and with
// goroutines every other time to the other goroutines of this process.
func yieldProcessor(i int, goroutines bool) {
	if goroutines && i&1 == 0 {
		runtime.Gosched()
		return
	}
	schedYield()
}

// schedYield gives the processor to any other runnable thread.
func schedYield() { _, _, _ = unix.RawSyscall(unix.SYS_SCHED_YIELD, 0, 0, 0) }
