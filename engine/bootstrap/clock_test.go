package bootstrap

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"
)

// Every rank reads the same job clock, rank 0's since its hub started: a
// reading falls between the hub's start and the hub's clock after the
// answer, readings only grow, and a closed connection answers with
// ErrBootstrapClosed.
func TestBootstrapJobClock(t *testing.T) {
	job := connectJob(t, 3, 5*time.Second)
	hub := job.boots[0].hub
	noErrors(t, job.run(t, func(b *Bootstrap) error {
		var last time.Duration
		for range 20 {
			d, err := b.JobClock(context.Background())
			if err != nil {
				return err
			}
			if d < last || d <= 0 || d > time.Since(hub.start) {
				return fmt.Errorf("job clock %v after %v (hub running for %v)", d, last, time.Since(hub.start))
			}
			last = d
		}
		return nil
	}))
	b := job.boots[2]
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := b.JobClock(context.Background()); !errors.Is(err, ErrBootstrapClosed) {
		t.Fatalf("after close: %v, want ErrBootstrapClosed", err)
	}
}
