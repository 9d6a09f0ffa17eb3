package kernels

import (
	"encoding/binary"
	"fmt"
	"slices"
)

// AGPTracePhases are the medians, in microseconds, of the phases of the
// traced execs: the ready kernel (start to end: its handshake), the gap
// from its end to the done kernel's start (the data movement and the
// launches around it), the done kernel, the gap from its end to the next
// exec's ready kernel, and a whole exec (ready start to the next one's).
type AGPTracePhases struct {
	Execs                            int
	Ready, Move, Done, Between, Exec float64
	// The same phases' 90th percentiles.
	Ready90, Move90, Done90, Between90, Exec90 float64
	// ExecMean and ExecMax: the mean and the longest exec.
	ExecMean, ExecMax float64
}

// String formats the phases on one line: median (90th percentile).
func (p AGPTracePhases) String() string {
	return fmt.Sprintf("%d execs, median (p90): ready %.2f (%.2f) us, ready end -> done start %.2f (%.2f) us, done %.2f (%.2f) us, done end -> next ready %.2f (%.2f) us, exec %.2f (%.2f) us; exec mean %.2f us, longest %.2f us",
		p.Execs, p.Ready, p.Ready90, p.Move, p.Move90, p.Done, p.Done90, p.Between, p.Between90, p.Exec, p.Exec90, p.ExecMean, p.ExecMax)
}

// AGPTraceSummary reads a trace (AGPTraceBytes as the kernels left it)
// after count execs and returns the medians of its phases over the latest
// execs it holds (at most AGPTraceExecs-1, the last exec having no
// successor; execs with a missing or stale stamp are skipped). The gap
// between execs includes whatever the host did between them: trace runs of
// one size.
func AGPTraceSummary(raw []byte, count uint64) (AGPTracePhases, error) {
	if len(raw) != AGPTraceBytes {
		return AGPTracePhases{}, fmt.Errorf("agp trace: %d bytes, want %d", len(raw), AGPTraceBytes)
	}
	stamp := func(e uint64, at int) uint64 {
		off := (int(e%AGPTraceExecs)*4 + at) * 8
		return binary.LittleEndian.Uint64(raw[off:])
	}
	var ready, move, done, between, exec []float64
	first := uint64(1)
	if count >= AGPTraceExecs {
		first = count - AGPTraceExecs + 1
	}
	var last uint64 // the end of the latest exec taken
	for e := first; e < count; e++ {
		r0, r1, d0, d1, n0 := stamp(e, 0), stamp(e, 1), stamp(e, 2), stamp(e, 3), stamp(e+1, 0)
		// Stamps older than the exec taken before are left from an exec
		// AGPTraceExecs earlier (this one ran as one launch, unstamped).
		if r0 == 0 || r0 < last || r1 < r0 || d0 < r1 || d1 < d0 || n0 < d1 {
			continue
		}
		last = d1
		us := func(a, b uint64) float64 { return float64(b-a) / 1e3 }
		ready = append(ready, us(r0, r1))
		move = append(move, us(r1, d0))
		done = append(done, us(d0, d1))
		between = append(between, us(d1, n0))
		exec = append(exec, us(r0, n0))
	}
	if len(exec) == 0 {
		return AGPTracePhases{}, fmt.Errorf("agp trace: no complete exec in %d", count)
	}
	sum := 0.0
	for _, v := range exec {
		sum += v
	}
	mean := sum / float64(len(exec))
	q := func(v []float64, f float64) float64 {
		slices.Sort(v)
		return v[int(f*float64(len(v)-1)+0.5)]
	}
	return AGPTracePhases{Execs: len(exec), Ready: q(ready, 0.5), Move: q(move, 0.5), Done: q(done, 0.5),
		Between: q(between, 0.5), Exec: q(exec, 0.5), Ready90: q(ready, 0.9), Move90: q(move, 0.9),
		Done90: q(done, 0.9), Between90: q(between, 0.9), Exec90: q(exec, 0.9), ExecMean: mean,
		ExecMax: q(exec, 1)}, nil
}
