package bootstrap

import (
	"bufio"
	"errors"
	"fmt"
	"time"
)

// readLoop dispatches the hub's frames until the connection ends.
func (b *Bootstrap) readLoop(br *bufio.Reader) {
	defer close(b.readerDone)
	for {
		t, body, err := readFrame(br, maxBootFrame)
		if err == nil {
			err = b.dispatch(t, body)
			if err != nil {
				err = fmt.Errorf("bootstrap: bad frame from the hub: %w", err)
				_ = b.conn.Close()
			}
		}
		if err != nil {
			b.mu.Lock()
			closing := b.closing
			b.mu.Unlock()
			if !closing {
				b.abort.Set(&RankError{Rank: 0, Died: true, Reason: "lost the bootstrap connection"})
			}
			return
		}
	}
}

// dispatch handles one frame from the hub.
func (b *Bootstrap) dispatch(t frameType, body []byte) error {
	r := frameReader{b: body}
	switch t {
	case frResult:
		seq := r.u64()
		kind := collKind(r.u8())
		var data [][]byte
		switch kind {
		case collAllGather:
			n := int(r.u32())
			if r.err == nil && n != b.size {
				return fmt.Errorf("allgather result with %d entries, want %d", n, b.size)
			}
			data = r.runs(n)
		case collBroadcast:
			data = [][]byte{r.rest()}
		case collBarrier:
		default:
			return fmt.Errorf("result of unknown kind %d", kind)
		}
		if r.err != nil {
			return r.err
		}
		b.reply(seq, collReply{data: data})
	case frCollErr:
		seq := r.u64()
		msg := string(r.rest())
		if r.err != nil {
			return r.err
		}
		b.reply(seq, collReply{err: errors.New(msg)})
	case frDeliver:
		from := int(r.u32())
		tag := r.u32()
		data := r.rest()
		if r.err != nil {
			return r.err
		}
		if from < 0 || from >= b.size {
			return fmt.Errorf("message from rank %d of %d", from, b.size)
		}
		b.mu.Lock()
		key := mailKey{from, tag}
		mb := b.mailboxLocked(key)
		mb.queue = append(mb.queue, data)
		close(mb.signal)
		mb.signal = make(chan struct{})
		b.mu.Unlock()
	case frAbort:
		err := decodeAbort(&r)
		if r.err != nil {
			return r.err
		}
		b.abort.Set(err)
	case frFailAck:
		notify(b.failAck)
	case frByeAck:
		notify(b.byeAck)
	case frStatusReply:
		seq := r.u64()
		known := r.u8()
		n := r.u32()
		if r.err != nil || uint64(n) > uint64(b.size) {
			return fmt.Errorf("malformed status reply")
		}
		missing := make([]int, n)
		for i := range missing {
			missing[i] = int(r.u32())
		}
		if r.err != nil {
			return r.err
		}
		if known == 0 {
			missing = nil
		}
		b.mu.Lock()
		ch := b.status[seq]
		b.mu.Unlock()
		if ch != nil {
			select {
			case ch <- missing:
			default:
			}
		}
	case frEndedNotice:
		rank := r.u32()
		why := r.bytes()
		if r.err != nil || uint64(rank) >= uint64(b.size) {
			return fmt.Errorf("malformed ended notice")
		}
		b.abort.SetEnded(int(rank), string(why))
	case frEndedReply:
		id := r.u64()
		ended, err := decodeEnded(&r, b.size)
		if err != nil {
			return err
		}
		b.endedArrived(id, ended)
	case frClockReply:
		id := r.u64()
		ns := r.u64()
		if r.err != nil {
			return r.err
		}
		b.clockArrived(id, time.Duration(ns))
	default:
		return fmt.Errorf("unknown frame type %d", t)
	}
	return nil
}

// reply hands a collective's outcome to its waiting call, if any.
func (b *Bootstrap) reply(seq uint64, r collReply) {
	b.mu.Lock()
	ch := b.pending[seq]
	b.mu.Unlock()
	if ch != nil {
		select {
		case ch <- r:
		default:
		}
	}
}

// notify does a non-blocking send on a one-slot channel.
func notify(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// decodeAbort reads an abort frame's body.
func decodeAbort(r *frameReader) *RankError {
	rank := int(r.u32())
	died := r.u8() != 0
	reason := string(r.rest())
	return &RankError{Rank: rank, Died: died, Reason: reason}
}
