package bootstrap

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// collective runs one sequence-numbered collective through the hub.
func (b *Bootstrap) collective(ctx context.Context, kind collKind, root int, data []byte) ([][]byte, error) {
	if err := b.abort.Err(); err != nil {
		return nil, fmt.Errorf("bootstrap %s: %w", kind, err)
	}
	b.mu.Lock()
	if b.closing {
		b.mu.Unlock()
		return nil, fmt.Errorf("bootstrap %s: %w", kind, ErrBootstrapClosed)
	}
	b.seq++
	seq := b.seq
	ch := make(chan collReply, 1)
	b.pending[seq] = ch
	b.mu.Unlock()
	defer func() {
		b.mu.Lock()
		delete(b.pending, seq)
		b.mu.Unlock()
	}()
	op := fmt.Sprintf("%s #%d", kind, seq)

	var flags byte
	if ctx.Value(atScriptEnd{}) != nil {
		flags = collAtEnd
	}
	f := newFrame(frColl, 14+len(data))
	f.u8(byte(kind))
	f.u8(flags)
	f.u64(seq)
	f.u32(uint32(root))
	f.raw(data)
	frame, ferr := f.finish()
	if ferr != nil {
		// Tell the hub, so that the collective fails everywhere instead of
		// leaving the others waiting.
		o := newFrame(frColl, 14)
		o.u8(byte(kind))
		o.u8(collOversize)
		o.u64(seq)
		o.u32(uint32(root))
		if oframe, err := o.finish(); err == nil {
			b.out.send(oframe)
		}
		return nil, fmt.Errorf("bootstrap %s: %d bytes: %w", op, len(data), ferr)
	}
	if !b.out.send(frame) {
		return nil, fmt.Errorf("bootstrap %s: %w", op, b.lostErr())
	}

	limit := b.limit(ctx)
	timer := time.NewTimer(limit)
	defer timer.Stop()
	select {
	case r := <-ch:
		if r.err != nil {
			return nil, fmt.Errorf("bootstrap %s: %w", op, r.err)
		}
		return r.data, nil
	case <-b.abort.Done():
		// The hub may have answered before the news of a failure came
		// (a rank that failed right after this collective): the answer
		// stands, and the next call sees the failure.
		select {
		case r := <-ch:
			if r.err == nil {
				return r.data, nil
			}
		default:
		}
		return nil, fmt.Errorf("bootstrap %s: %w", op, b.abort.Err())
	case <-b.closed:
		return nil, fmt.Errorf("bootstrap %s: %w", op, ErrBootstrapClosed)
	case <-ctx.Done():
		if !errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return nil, fmt.Errorf("bootstrap %s: %w", op, context.Cause(ctx))
		}
	case <-timer.C:
	}
	terr := &TimeoutError{Op: op, After: limit, Missing: b.queryMissing(seq)}
	// This rank's contribution stays with the hub, so the sequence numbers
	// are out of step from here on: fail the job rather than let a late
	// rank pair with a collective nobody is in any more.
	b.Fail(terr.Error())
	return nil, terr
}

// noCallTimeout marks a context whose bootstrap calls wait as long as ctx
// allows instead of Timeout (see WithoutCallTimeout).
type noCallTimeout struct{}

// teardownWait bounds the waits that have no per-call timeout: a day.
const teardownWait = 24 * time.Hour

// WithoutCallTimeout returns ctx for bootstrap calls that may wait for
// ranks finishing their scripts at very different times (teardown): they
// end with ctx, an abort (a rank failed or died) or after a day, not after
// the per-call Timeout.
func WithoutCallTimeout(ctx context.Context) context.Context {
	return context.WithValue(ctx, noCallTimeout{}, true)
}

// atScriptEnd marks AtScriptEnd's calls.
type atScriptEnd struct{}

// AtScriptEnd returns ctx for the collective calls a rank makes once its
// script has ended (the meetings before its windows are torn down): one
// that meets another rank's call of its script fails that call saying
// this rank ended without error before it, rather than matching it (a
// barrier) or calling it a mismatch of this rank's.
func AtScriptEnd(ctx context.Context) context.Context {
	return context.WithValue(ctx, atScriptEnd{}, true)
}

// callTimeoutAtLeast carries WithCallTimeoutAtLeast's duration.
type callTimeoutAtLeast struct{}

// WithCallTimeoutAtLeast returns ctx for bootstrap calls that may wait for
// d, when that is longer than the per-call Timeout (a window's free meets
// the other ranks within the window's own timeout).
func WithCallTimeoutAtLeast(ctx context.Context, d time.Duration) context.Context {
	return context.WithValue(ctx, callTimeoutAtLeast{}, d)
}

// limit returns how long a call may wait: the smaller of Timeout (or a
// longer WithCallTimeoutAtLeast) and what is left of ctx.
func (b *Bootstrap) limit(ctx context.Context) time.Duration {
	limit := b.timeout
	if d, ok := ctx.Value(callTimeoutAtLeast{}).(time.Duration); ok && d > limit {
		limit = d
	}
	if ctx.Value(noCallTimeout{}) != nil {
		limit = teardownWait
	}
	if dl, ok := ctx.Deadline(); ok {
		if d := time.Until(dl); d < limit {
			limit = max(d, 0)
		}
	}
	return limit
}

// lostErr is the error of a call that found the connection gone.
func (b *Bootstrap) lostErr() error {
	if err := b.abort.Err(); err != nil {
		return err
	}
	b.mu.Lock()
	closing := b.closing
	b.mu.Unlock()
	if closing {
		return ErrBootstrapClosed
	}
	return &RankError{Rank: 0, Died: true, Reason: "lost the bootstrap connection"}
}

// queryMissing asks the hub which ranks have not joined collective seq.
func (b *Bootstrap) queryMissing(seq uint64) []int {
	ch := make(chan []int, 1)
	b.mu.Lock()
	b.status[seq] = ch
	b.mu.Unlock()
	defer func() {
		b.mu.Lock()
		delete(b.status, seq)
		b.mu.Unlock()
	}()
	f := newFrame(frStatus, 8)
	f.u64(seq)
	frame, err := f.finish()
	if err != nil {
		return nil
	}
	return askHub(b, frame, ch)
}

// askHub sends the hub the question frame and waits a moment (statusWait)
// for its answer on ch; the zero value when none comes (the hub is gone,
// the job aborted, or it is late).
func askHub[T any](b *Bootstrap, frame []byte, ch <-chan T) T {
	var none T
	if !b.out.send(frame) {
		return none
	}
	timer := time.NewTimer(statusWait)
	defer timer.Stop()
	select {
	case v := <-ch:
		return v
	case <-timer.C:
	case <-b.abort.Done():
	case <-b.readerDone:
	}
	return none
}

// Send delivers data to peer's mailbox under tag. It returns once the
// message is queued; peer's Recv with the same tag takes it, in order.
func (b *Bootstrap) Send(ctx context.Context, peer int, tag uint32, data []byte) error {
	op := fmt.Sprintf("send to rank %d tag %d", peer, tag)
	if peer < 0 || peer >= b.size {
		return fmt.Errorf("bootstrap %s: peer out of range for %d ranks", op, b.size)
	}
	if err := b.abort.Err(); err != nil {
		return fmt.Errorf("bootstrap %s: %w", op, err)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("bootstrap %s: %w", op, err)
	}
	b.mu.Lock()
	closing := b.closing
	b.mu.Unlock()
	if closing {
		return fmt.Errorf("bootstrap %s: %w", op, ErrBootstrapClosed)
	}
	f := newFrame(frSend, 8+len(data))
	f.u32(uint32(peer))
	f.u32(tag)
	f.raw(data)
	frame, err := f.finish()
	if err != nil {
		return fmt.Errorf("bootstrap %s: %d bytes: %w", op, len(data), err)
	}
	if !b.out.send(frame) {
		return fmt.Errorf("bootstrap %s: %w", op, b.lostErr())
	}
	return nil
}

// Recv returns the next message that peer sent to this rank under tag,
// waiting for it if needed.
func (b *Bootstrap) Recv(ctx context.Context, peer int, tag uint32) ([]byte, error) {
	op := fmt.Sprintf("recv from rank %d tag %d", peer, tag)
	if peer < 0 || peer >= b.size {
		return nil, fmt.Errorf("bootstrap %s: peer out of range for %d ranks", op, b.size)
	}
	limit := b.limit(ctx)
	timer := time.NewTimer(limit)
	defer timer.Stop()
	key := mailKey{peer, tag}
	for {
		if err := b.abort.Err(); err != nil {
			return nil, fmt.Errorf("bootstrap %s: %w", op, err)
		}
		b.mu.Lock()
		if b.closing {
			b.mu.Unlock()
			return nil, fmt.Errorf("bootstrap %s: %w", op, ErrBootstrapClosed)
		}
		mb := b.mailboxLocked(key)
		if len(mb.queue) > 0 {
			data := mb.queue[0]
			mb.queue[0] = nil
			mb.queue = mb.queue[1:]
			b.tidyMailboxLocked(key, mb)
			b.mu.Unlock()
			return data, nil
		}
		mb.waiters++
		sig := mb.signal
		b.mu.Unlock()

		var err error
		select {
		case <-sig:
		case <-b.abort.Done():
			err = b.abort.Err()
		case <-b.closed:
			err = ErrBootstrapClosed
		case <-ctx.Done():
			if !errors.Is(ctx.Err(), context.DeadlineExceeded) {
				err = ctx.Err()
			} else {
				err = &TimeoutError{Op: op, After: limit}
			}
		case <-timer.C:
			err = &TimeoutError{Op: op, After: limit}
		}
		b.mu.Lock()
		mb.waiters--
		b.tidyMailboxLocked(key, mb)
		b.mu.Unlock()
		if err != nil {
			var te *TimeoutError
			if errors.As(err, &te) {
				return nil, err
			}
			return nil, fmt.Errorf("bootstrap %s: %w", op, err)
		}
	}
}

// mailboxLocked returns key's mailbox, making it if needed.
func (b *Bootstrap) mailboxLocked(key mailKey) *mailbox {
	mb := b.mail[key]
	if mb == nil {
		mb = &mailbox{signal: make(chan struct{})}
		b.mail[key] = mb
	}
	return mb
}

// tidyMailboxLocked forgets an empty mailbox nobody waits on.
func (b *Bootstrap) tidyMailboxLocked(key mailKey, mb *mailbox) {
	if len(mb.queue) == 0 && mb.waiters == 0 && b.mail[key] == mb {
		delete(b.mail, key)
	}
}

// Fail tells every other rank that this rank failed with reason, and sets
// this rank's abort flag. It waits briefly for the hub to pass the news on
// and never blocks for long. Only the first call has an effect.
func (b *Bootstrap) Fail(reason string) {
	b.failOnce.Do(func() {
		b.abort.Set(&RankError{Rank: b.rank, Reason: reason})
		f := newFrame(frFail, len(reason))
		f.raw([]byte(reason))
		frame, err := f.finish()
		if err != nil {
			f = newFrame(frFail, 64)
			f.raw([]byte("failure reason too long to send"))
			if frame, err = f.finish(); err != nil {
				return
			}
		}
		if !b.out.send(frame) {
			return
		}
		timer := time.NewTimer(min(b.timeout, failAckWait))
		defer timer.Stop()
		select {
		case <-b.failAck:
		case <-b.readerDone:
		case <-timer.C:
		}
	})
}

// Close says goodbye to the hub and closes the connection. Rank 0's Close
// keeps the hub up until every rank has said goodbye (or its connection
// ended), or until Timeout. Calls still waiting return ErrBootstrapClosed.
func (b *Bootstrap) Close() error { return b.Leave("") }

// Leave is Close for a rank that ends early on purpose (os.exit(0)) with
// why: a collective the others start after it fails naming why instead of
// a closed bootstrap.
func (b *Bootstrap) Leave(why string) error {
	b.closeOnce.Do(func() {
		b.mu.Lock()
		b.closing = true
		next := b.seq + 1
		b.mu.Unlock()
		if b.abort.Err() == nil {
			f := newFrame(frBye, 8+len(why))
			f.u64(next)
			f.raw([]byte(why))
			if frame, err := f.finish(); err == nil && b.out.send(frame) {
				timer := time.NewTimer(b.timeout)
				select {
				case <-b.byeAck:
				case <-b.readerDone:
				case <-timer.C:
					b.closeErr = fmt.Errorf("bootstrap close (rank %d): no goodbye from the hub within %v",
						b.rank, b.timeout)
				}
				timer.Stop()
			}
		}
		// After an abort the others already know (or will learn from the
		// lost connection); otherwise keep the hub up for their goodbyes.
		// Ranks may finish long after this one: the hub stays up while
		// their connections are alive (a rank that dies ends its connection).
		if b.hub != nil && b.abort.Err() == nil {
			if missing := b.hub.waitQuiet(teardownWait); len(missing) > 0 && b.closeErr == nil {
				b.closeErr = fmt.Errorf("bootstrap close (rank 0): %s did not say goodbye within %v",
					DescribeRanks(missing), teardownWait)
			}
		}
		if b.hub != nil {
			b.hub.shutdown()
		}
		close(b.closed)
		b.out.close()
		_ = b.conn.Close()
		<-b.readerDone
		<-b.out.done
	})
	return b.closeErr
}
