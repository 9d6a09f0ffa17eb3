package luabind

import (
	"context"
	"fmt"

	"github.com/luacoll/luacoll/engine/plan"
	"github.com/luacoll/luacoll/window"
)

// After w:reset_signals() a rank's inbox holds what the senders sent since
// the reset, which their own counts (plan.List.Sent) cannot tell apart
// from what it wiped. Its plans on that window therefore carry what the
// inbox really holds when they are made (plan.List.Inbox), for the
// verifier to start those rows from.

// noteReset marks w's inbox as reset on this rank, at where.
func (ps *planState) noteReset(w *window.Window, where string) {
	if ps.reset == nil {
		ps.reset, ps.resetAt = map[*window.Window]int{}, map[*window.Window]string{}
	}
	ps.reset[w]++
	ps.resetAt[w] = where
}

// checkResets refuses to replay or verify plan r after a reset of its
// window's inbox that came after r was made: its waits count from the
// values the reset wiped, so a replay would wait for signals that never
// come (and a verification would judge a plan that no longer runs as
// recorded).
func (c *call) checkResets(r *planRef) {
	w := r.p.Window()
	if n := c.s.plans.reset[w]; n != r.resets {
		c.fail("plan %d (made at %s) was recorded before w:reset_signals() at %s: its waits count from the signal values the reset wiped; record it again after the reset",
			r.num, r.site, c.s.plans.resetAt[w])
	}
}

// addInbox sets list's Inbox and Replayed when this rank reset w's inbox:
// the stream is synced first (the reset is enqueued on it), then each row
// read. It returns why not, or "".
func (s *State) addInbox(ctx context.Context, list *plan.List, w *window.Window) string {
	if w == nil || s.plans.reset[w] == 0 {
		return ""
	}
	if err := w.Sync(ctx); err != nil {
		return fmt.Sprintf("reading the inbox after w:reset_signals(): %v", err)
	}
	sh := list.Shape
	list.Inbox = make([]uint64, sh.Rows())
	for p := 0; p < sh.Ranks; p++ {
		for g := 0; g < sh.Signals; g++ {
			v, err := w.ReadSignalFrom(p, g)
			if err != nil {
				return fmt.Sprintf("reading the inbox after w:reset_signals(): %v", err)
			}
			list.Inbox[sh.SigRow(p, g)] = v
		}
	}
	list.Replayed = make([]uint64, sh.Rows())
	if led := s.plans.ledgers[w]; led != nil {
		copy(list.Replayed, led.Replayed)
	}
	return ""
}
