package transport

import (
	"sync/atomic"
	"time"
)

// endedGrace is how long a wait goes on after the ranks it waits on have
// ended before it fails: what they sent before ending has landed by the
// time they say so, but a network's last messages may still need this
// rank's progress.
const endedGrace = 100 * time.Millisecond

// cannotHold returns a PeerEndedError once wait op has been unable to
// hold for endedGrace because the ranks whose slots could make it hold
// have ended: for a sum, every writer; for each slot, the writer of one
// that fails the condition.
func (s *HostStream) cannotHold(op *hostOp, now time.Time) error {
	w := &op.wait
	who := -1
	if w.Mode == WaitEach {
		for i, a := range w.Slots {
			if i < len(w.Writers) && w.Writers[i] >= 0 && !w.Cmp.Holds(atomic.LoadUint64(hostU64(a)), w.Value) {
				if _, ok := s.abort.Ended(w.Writers[i]); ok {
					who = w.Writers[i]
					break
				}
			}
		}
	} else {
		for _, r := range w.Writers {
			if r < 0 {
				continue
			}
			if _, ok := s.abort.Ended(r); !ok {
				who = -1
				break
			}
			if who < 0 {
				who = r
			}
		}
	}
	if who < 0 {
		op.stuck = time.Time{}
		return nil
	}
	if op.stuck.IsZero() {
		op.stuck = now
		return nil
	}
	if now.Sub(op.stuck) < endedGrace {
		return nil
	}
	why, _ := s.abort.Ended(who)
	return &PeerEndedError{Rank: who, Why: why}
}
