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

// noteReset marks w's inbox as reset on this rank.
func (ps *planState) noteReset(w *window.Window) {
	if ps.reset == nil {
		ps.reset = map[*window.Window]bool{}
	}
	ps.reset[w] = true
}

// addInbox sets list's Inbox and Replayed when this rank reset w's inbox:
// the stream is synced first (the reset is enqueued on it), then each row
// read. It returns why not, or "".
func (s *State) addInbox(ctx context.Context, list *plan.List, w *window.Window) string {
	if w == nil || !s.plans.reset[w] {
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
