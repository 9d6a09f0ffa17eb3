package transport

import (
	"context"
	"sync"
	"sync/atomic"
)

// Abort is a one-shot flag that tells every blocking operation of a rank
// that the job is being torn down: a peer failed or died, or the user
// interrupted the run. Waits poll Err cheaply and select on Done when they
// park. The zero value is not usable; call NewAbort.
type Abort struct {
	err  atomic.Pointer[error]
	once sync.Once
	done chan struct{}
	// The peers that have ended (left early, or their script ended): what
	// they wrote has landed, and they write nothing more.
	endMu  sync.Mutex
	ended  map[int]string
	nEnded atomic.Int32
}

// SetEnded records that rank has ended, and why ("exited early with
// os.exit(0) at x.lua:3"): everything it wrote has landed and it writes
// nothing more, so a host wait that only it could satisfy fails instead
// of running to its timeout. The first reason for a rank stays.
func (a *Abort) SetEnded(rank int, why string) {
	a.endMu.Lock()
	defer a.endMu.Unlock()
	if a.ended == nil {
		a.ended = make(map[int]string)
	}
	if _, ok := a.ended[rank]; !ok {
		a.ended[rank] = why
		a.nEnded.Add(1)
	}
}

// Ended says whether rank has ended (SetEnded), and why.
func (a *Abort) Ended(rank int) (string, bool) {
	if a.nEnded.Load() == 0 {
		return "", false
	}
	a.endMu.Lock()
	defer a.endMu.Unlock()
	why, ok := a.ended[rank]
	return why, ok
}

// AnyEnded reports, cheaply, whether some peer has ended.
func (a *Abort) AnyEnded() bool { return a.nEnded.Load() > 0 }

// NewAbort returns an unset abort flag.
func NewAbort() *Abort { return &Abort{done: make(chan struct{})} }

// Set records err as the reason and wakes every waiter. Only the first call
// has an effect; it reports whether this call set the flag.
func (a *Abort) Set(err error) bool {
	set := false
	a.once.Do(func() {
		a.err.Store(&err)
		close(a.done)
		set = true
	})
	return set
}

// Err returns the reason once the flag is set, else nil.
func (a *Abort) Err() error {
	if p := a.err.Load(); p != nil {
		return *p
	}
	return nil
}

// Done is closed when the flag is set.
func (a *Abort) Done() <-chan struct{} { return a.done }

// Exchanger is the out-of-band channel between the ranks of a job (the
// bootstrap). Transports use it to swap addresses and handles once, at
// registration time; it is never on a data path. Every call is collective
// unless it names a peer, and returns an error when ctx ends or a peer fails.
type Exchanger interface {
	Rank() int
	Size() int
	// AllGather returns every rank's data, indexed by rank.
	AllGather(ctx context.Context, data []byte) ([][]byte, error)
	// Barrier returns once every rank has entered it.
	Barrier(ctx context.Context) error
}
