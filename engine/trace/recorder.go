package trace

import (
	"bufio"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/luacoll/luacoll/window"
)

// Defaults of Options.
const (
	DefaultFlushEvery = 100 * time.Millisecond
	DefaultMaxEvents  = 1 << 20
	writeBuffer       = 256 << 10
)

// Options configure a Recorder.
type Options struct {
	Rank int
	// Size is the number of ranks (a signal_all's flows go to each other).
	Size  int
	Label string // the process name; "rank N" when empty
	Clock Clock
	// Part is the file the events go to (made or truncated).
	Part string
	// FlushEvery is how often written events reach the file
	// (DefaultFlushEvery when 0).
	FlushEvery time.Duration
	// MaxEvents bounds the events of this rank (DefaultMaxEvents when 0);
	// later ones are counted and dropped.
	MaxEvents int
}

// Recorder records one rank's events. It implements window.Recorder; its
// methods may be called from any goroutine.
type Recorder struct {
	rank  int
	clock Clock
	max   int
	f     *os.File

	mu      sync.Mutex
	pending []window.Op   // enqueued, not known to have completed, in stream order
	lastEnd time.Duration // end of the last slice on the stream track
	w       *bufio.Writer // the part file, buffered
	scratch []byte        // one event's encoding
	events  int
	dropped int
	closed  bool
	size    int
	posted  map[flowKey]uint64 // per signal slot at a peer: the value this rank's posts brought it to
	reset   map[int]bool       // windows whose signals this rank reset
	// ends are the flow ends of waits that completed since the last
	// sync: written when the sync succeeds, dropped when it fails (a
	// CUDA wait cut short by its timeout still reaches its stream stamp,
	// so only the sync tells a wait that was met from one that failed).
	ends []*event

	stop    chan struct{}
	stopped chan struct{}
}

var _ window.Recorder = (*Recorder)(nil)

// Start opens o.Part and starts recording: the rank's metadata and its
// clock alignment are the first events.
func Start(o Options) (*Recorder, error) {
	f, err := os.OpenFile(o.Part, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, fmt.Errorf("trace: %w", err)
	}
	if o.FlushEvery <= 0 {
		o.FlushEvery = DefaultFlushEvery
	}
	if o.MaxEvents <= 0 {
		o.MaxEvents = DefaultMaxEvents
	}
	if o.Label == "" {
		o.Label = fmt.Sprintf("rank %d", o.Rank)
	}
	r := &Recorder{rank: o.Rank, size: o.Size, clock: o.Clock, max: o.MaxEvents, f: f, w: bufio.NewWriterSize(f, writeBuffer),
		stop: make(chan struct{}), stopped: make(chan struct{})}
	_, _ = r.w.WriteString("[\n")
	for _, m := range []event{
		{name: "process_name", args: []arg{{"name", o.Label}}},
		{name: "process_sort_index", args: []arg{{"sort_index", o.Rank}}},
		{name: "thread_name", tid: TIDHost, args: []arg{{"name", "script"}}},
		{name: "thread_sort_index", tid: TIDHost, args: []arg{{"sort_index", TIDHost}}},
		{name: "thread_name", tid: TIDStream, args: []arg{{"name", "stream"}}},
		{name: "thread_sort_index", tid: TIDStream, args: []arg{{"sort_index", TIDStream}}},
	} {
		m.ph = PhaseMeta
		r.appendLocked(&m)
	}
	clock := []arg{{"aligned", o.Clock.Aligned}}
	if o.Clock.Aligned {
		clock = append(clock, arg{"rtt_us", o.Clock.RTT})
	}
	r.appendLocked(&event{name: "clock", cat: "trace", ph: PhaseInstant, ts: r.now(), tid: TIDHost, scope: "t", args: clock})
	if err := r.flush(); err != nil {
		_ = f.Close()
		return nil, err
	}
	go r.flusher(o.FlushEvery)
	return r, nil
}

// Part returns the name of the file the events go to.
func (r *Recorder) Part() string { return r.f.Name() }

func (r *Recorder) now() time.Duration { return r.clock.At(time.Now()) }

// appendLocked encodes e (r.mu held, or r not shared yet).
func (r *Recorder) appendLocked(e *event) {
	if e.ph != PhaseMeta {
		if r.events >= r.max {
			r.dropped++
			return
		}
		r.events++
	}
	r.scratch = appendEvent(r.scratch[:0], r.rank, e)
	r.scratch = append(r.scratch, ",\n"...)
	_, _ = r.w.Write(r.scratch) // an error sticks in r.w
}

// Op implements window.Recorder.
func (r *Recorder) Op(op window.Op) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return
	}
	r.pending = append(r.pending, op)
	r.resolveLocked()
}

// resolveLocked turns the operations that completed into slices, in
// order, up to the first that has not.
func (r *Recorder) resolveLocked() {
	n := 0
	for _, op := range r.pending {
		end := op.Enqueued
		if op.Done != nil {
			at, ok := op.Done.Reached()
			if !ok {
				break
			}
			end = at
		}
		r.sliceLocked(&op, r.clock.At(end), nil)
		n++
	}
	if n > 0 {
		clear(r.pending[:n])
		r.pending = r.pending[n:]
	}
}

// sliceLocked writes op's slice on the stream track, from its enqueue (or
// the end of the slice before it) to end.
func (r *Recorder) sliceLocked(op *window.Op, end time.Duration, extra []arg) {
	enq := r.clock.At(op.Enqueued)
	start := max(enq, r.lastEnd)
	end = max(end, start)
	r.lastEnd = end
	args := opArgs(op)
	if start > enq {
		args = append(args, arg{"queued_us", start - enq})
	}
	args = append(args, extra...)
	r.appendLocked(&event{name: op.Name, cat: "window", ph: PhaseComplete, ts: start, dur: end - start, tid: TIDStream, args: args})
	r.flowsLocked(op, start, end, extra == nil)
}

// opArgs describes op: window, peer, bytes, the slot and, for a wait, the
// condition it waited for.
func opArgs(op *window.Op) []arg {
	a := make([]arg, 0, 8)
	a = append(a, arg{"window", op.Window})
	if op.Peer >= 0 {
		a = append(a, arg{"peer", op.Peer})
	}
	switch op.Name {
	case "put", "get", "put_signal", "allgather", "reduce", "reduce_from":
		a = append(a, arg{"bytes", op.Bytes})
	}
	if op.Kind != window.SlotNone {
		a = append(a, arg{"slot", fmt.Sprintf("%s %d", op.Kind, op.Slot)})
		switch {
		case op.Wait:
			a = append(a, arg{"cmp", op.Cmp.String()}, arg{"value", op.Value})
		case op.Kind == window.SlotSignal:
			a = append(a, arg{"op", op.SigOp.String()}, arg{"value", op.Value})
		}
	}
	if op.Ctr >= 0 {
		a = append(a, arg{"ctr", op.Ctr})
	}
	if s := op.Site.String(); s != "" {
		a = append(a, arg{"at", s})
	}
	return a
}

// Sync implements window.Recorder: a slice on the script's track, and an
// error instant when the sync failed. Every operation enqueued before the
// sync has ended by now: those not stamped failed or were dropped by the
// failure (or, after a clean sync, ended on a stream that could not say
// when: their slices end at the sync).
func (r *Recorder) Sync(start time.Time, err error) {
	end := time.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return
	}
	r.resolveLocked()
	r.settleFlowsLocked(err == nil)
	if len(r.pending) > 0 {
		if err != nil {
			r.abandonLocked(r.clock.At(end), "failed")
		} else {
			for i := range r.pending {
				r.sliceLocked(&r.pending[i], r.clock.At(end), []arg{{"ended", "by the sync"}})
			}
			r.pending = r.pending[:0]
		}
	}
	var args []arg
	if err != nil {
		args = []arg{{"error", err.Error()}}
	}
	r.appendLocked(&event{name: "sync", cat: "sync", ph: PhaseComplete, ts: r.clock.At(start),
		dur: end.Sub(start), tid: TIDHost, args: args})
	if err != nil {
		r.errorLocked(r.clock.At(end), err.Error())
	}
}

// Collective records a collective call that started at start and returned
// err: an instant on the script's track when it returned, with how long
// the rank waited in it.
func (r *Recorder) Collective(call string, seq int, start time.Time, err error) {
	end := time.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return
	}
	name := call
	if i := strings.IndexAny(call, "({"); i > 0 {
		name = strings.TrimSpace(call[:i])
	}
	args := []arg{{"call", call}, {"seq", seq}, {"waited_us", end.Sub(start)}}
	if err != nil {
		args = append(args, arg{"error", err.Error()})
	}
	r.appendLocked(&event{name: name, cat: "collective", ph: PhaseInstant, ts: r.clock.At(end), tid: TIDHost, scope: "t", args: args})
	if err != nil {
		r.errorLocked(r.clock.At(end), err.Error())
	}
}

// Error records an error of the rank as an instant on its process.
func (r *Recorder) Error(msg string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.closed {
		r.errorLocked(r.now(), msg)
	}
}

func (r *Recorder) errorLocked(at time.Duration, msg string) {
	r.appendLocked(&event{name: "error", cat: "error", ph: PhaseInstant, ts: at, tid: TIDHost, scope: "p", args: []arg{{"message", msg}}})
}

// Close ends the recording: operations that never completed are written
// (the first as a slice up to now, marked unfinished; the others, which
// never ran, counted), then cause as an error, and the file is closed.
func (r *Recorder) Close(cause error) error {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil
	}
	r.resolveLocked()
	r.settleFlowsLocked(cause == nil)
	now := r.now()
	r.abandonLocked(now, "unfinished")
	if cause != nil {
		r.errorLocked(now, cause.Error())
	}
	if r.dropped > 0 {
		dropped := r.dropped
		r.max++ // past the limit, this one more
		r.appendLocked(&event{name: "trace truncated", cat: "trace", ph: PhaseInstant, ts: now,
			tid: TIDHost, scope: "p", args: []arg{{"dropped_events", dropped}}})
	}
	r.closed = true
	r.mu.Unlock()
	close(r.stop)
	<-r.stopped
	err := r.flush()
	if cerr := r.f.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("trace: %w", cerr)
	}
	return err
}

// settleFlowsLocked writes the flow ends held since the last sync when
// their waits are known to have been met (ok), and drops them otherwise.
func (r *Recorder) settleFlowsLocked(ok bool) {
	if ok {
		for _, e := range r.ends {
			r.appendLocked(e)
		}
	}
	clear(r.ends)
	r.ends = r.ends[:0]
}

// abandonLocked ends the pending operations that will never complete: the
// first as a slice up to end marked how (it was running: "failed" at a
// sync, "unfinished" at the end), the others, which never ran, counted.
func (r *Recorder) abandonLocked(end time.Duration, how string) {
	if len(r.pending) == 0 {
		return
	}
	r.sliceLocked(&r.pending[0], end, []arg{{how, true}})
	if rest := len(r.pending) - 1; rest > 0 {
		r.appendLocked(&event{name: "not run", cat: "window", ph: PhaseInstant, ts: r.lastEnd, tid: TIDStream, scope: "t",
			args: []arg{{"operations", rest}}})
	}
	clear(r.pending)
	r.pending = r.pending[:0]
}

// flusher writes what was recorded every period, resolving operations
// that completed meanwhile (so that a rank killed in a long wait leaves
// what came before it).
func (r *Recorder) flusher(every time.Duration) {
	defer close(r.stopped)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-r.stop:
			return
		case <-t.C:
			r.mu.Lock()
			if !r.closed {
				r.resolveLocked()
			}
			_ = r.w.Flush()
			r.mu.Unlock()
		}
	}
}

// flush writes the buffered events; the first write error sticks.
func (r *Recorder) flush() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.w.Flush(); err != nil {
		return fmt.Errorf("trace: %w", err)
	}
	return nil
}
