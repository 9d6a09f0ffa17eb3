package bootstrap

import (
	"context"
	"fmt"
	"time"
)

// The job clock is rank 0's: the time since its hub started. A rank reads
// it with a clock frame, which the hub answers at once; traces measure
// each rank's offset from it with a few such round trips (the one with the
// shortest round trip is the most precise).

// clockReply answers p's clock frame id with the job clock.
func (h *hub) clockReply(p *hubPeer, id uint64) {
	f := newFrame(frClockReply, 16)
	f.u64(id)
	f.u64(uint64(time.Since(h.start)))
	if frame, err := f.finish(); err == nil {
		p.out.send(frame)
	}
}

// JobClock returns the job clock (rank 0's time since the job started) as
// the hub read it on receiving the request. Compare it with this rank's
// clock at the request and at the answer.
func (b *Bootstrap) JobClock(ctx context.Context) (time.Duration, error) {
	op := "bootstrap job clock"
	if err := b.abort.Err(); err != nil {
		return 0, fmt.Errorf("%s: %w", op, err)
	}
	b.mu.Lock()
	if b.closing {
		b.mu.Unlock()
		return 0, fmt.Errorf("%s: %w", op, ErrBootstrapClosed)
	}
	if b.clocks == nil {
		b.clocks = make(map[uint64]chan time.Duration)
	}
	b.clockSeq++
	id := b.clockSeq
	ch := make(chan time.Duration, 1)
	b.clocks[id] = ch
	b.mu.Unlock()
	defer func() {
		b.mu.Lock()
		delete(b.clocks, id)
		b.mu.Unlock()
	}()
	f := newFrame(frClock, 8)
	f.u64(id)
	frame, err := f.finish()
	if err != nil {
		return 0, fmt.Errorf("%s: %w", op, err)
	}
	if !b.out.send(frame) {
		return 0, fmt.Errorf("%s: %w", op, b.lostErr())
	}
	timer := time.NewTimer(b.limit(ctx))
	defer timer.Stop()
	select {
	case d := <-ch:
		return d, nil
	case <-b.abort.Done():
		return 0, fmt.Errorf("%s: %w", op, b.abort.Err())
	case <-b.closed:
		return 0, fmt.Errorf("%s: %w", op, ErrBootstrapClosed)
	case <-ctx.Done():
		return 0, fmt.Errorf("%s: %w", op, context.Cause(ctx))
	case <-timer.C:
		return 0, &TimeoutError{Op: op, After: b.limit(ctx)}
	}
}

// clockArrived hands the hub's answer to the waiting JobClock call.
func (b *Bootstrap) clockArrived(id uint64, d time.Duration) {
	b.mu.Lock()
	ch := b.clocks[id]
	b.mu.Unlock()
	if ch != nil {
		select {
		case ch <- d:
		default:
		}
	}
}
