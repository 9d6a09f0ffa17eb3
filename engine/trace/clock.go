package trace

import (
	"context"
	"fmt"
	"time"
)

// JobClock reads the job clock: rank 0's time since the job started
// (*bootstrap.Bootstrap asks the hub rank 0 runs).
type JobClock interface {
	JobClock(ctx context.Context) (time.Duration, error)
}

// Clock turns this rank's times into job time.
type Clock struct {
	// Zero is this rank's time at job time 0.
	Zero time.Time
	// RTT is the round trip of the reading Zero comes from, the bound on
	// its error; 0 with Aligned false when the clock was not measured.
	RTT     time.Duration
	Aligned bool
}

// At returns t in job time.
func (c Clock) At(t time.Time) time.Duration { return t.Sub(c.Zero) }

// LocalClock is a clock that is not aligned with any other rank's: job
// time is the time since now.
func LocalClock() Clock { return Clock{Zero: time.Now()} }

// DefaultRounds is how many round trips Align makes.
const DefaultRounds = 8

// Align reads the job clock rounds times and keeps the reading with the
// shortest round trip, taking it to have been read halfway through.
func Align(ctx context.Context, jc JobClock, rounds int) (Clock, error) {
	if rounds < 1 {
		rounds = 1
	}
	var best Clock
	for i := range rounds {
		t0 := time.Now()
		job, err := jc.JobClock(ctx)
		t1 := time.Now()
		if err != nil {
			return Clock{}, fmt.Errorf("aligning clocks with rank 0: %w", err)
		}
		rtt := t1.Sub(t0)
		if i == 0 || rtt < best.RTT {
			best = Clock{Zero: t0.Add(rtt / 2).Add(-job), RTT: rtt, Aligned: true}
		}
	}
	return best, nil
}
