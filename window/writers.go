package window

// waitWriters are the WaitSpec.Writers of a window's waits, made once
// (queued waits may share them, and enqueuing a wait allocates nothing):
// the rank that writes each slot a wait looks at, -1 for this rank's own
// (final by the time the wait runs). A host stream ends a wait that the
// ranks which could still satisfy it, having ended, never will.
type waitWriters struct {
	all    []int   // wait_signal's slots: one per sender, in rank order
	ring   []int   // a barrier's: rank me+1, me+2, ... (mod n)
	single [][]int // wait_signal_from's and barrier_peer's, per peer
}

// every is the writers of wait_signal's slots (rank r's row is r's).
func (ww *waitWriters) every(me, n int) []int {
	if ww.all == nil {
		ww.all = make([]int, n)
		for r := range ww.all {
			ww.all[r] = r
		}
		ww.all[me] = -1
	}
	return ww.all
}

// others is the writers of a barrier's slots, which follow this rank.
func (ww *waitWriters) others(me, n int) []int {
	if ww.ring == nil {
		ww.ring = make([]int, 0, n-1)
		for i := 1; i < n; i++ {
			ww.ring = append(ww.ring, (me+i)%n)
		}
	}
	return ww.ring
}

// one is the writer of a slot that peer writes.
func (ww *waitWriters) one(me, n, peer int) []int {
	if ww.single == nil {
		ww.single = make([][]int, n)
	}
	if ww.single[peer] == nil {
		ww.single[peer] = []int{peer}
		if peer == me {
			ww.single[peer][0] = -1
		}
	}
	return ww.single[peer]
}
