package bootstrap

import (
	"fmt"
	"sort"
	"strings"
)

// A rank whose wait ran out of time asks the hub which ranks can no
// longer help it: those that left early (os.exit(0)), whose script ended
// (they wait at the teardown for the others), or whose connection ended.
// Its report then names them rather than only suggesting more time.

// Why a rank is said to have ended: it said goodbye (its script ended,
// its windows freed), or it waits at the teardown meeting.
const (
	scriptEnded     = "its script ended"
	scriptEndedWait = "its script ended; it waits for the others at the teardown"
)

// announceEndLocked tells every other rank still connected, once, that
// p has ended (its goodbye, or its call of the teardown meeting): it has
// flushed what it wrote, so their host waits on it alone can fail at once
// (transport.Abort.SetEnded). The caller holds h.mu.
func (h *hub) announceEndLocked(p *hubPeer) {
	if p.endWhy != "" {
		return
	}
	why := p.byeWhy
	switch {
	case why != "":
	case p.bye:
		why = scriptEnded
	default:
		why = scriptEndedWait
	}
	p.endWhy = why
	f := newFrame(frEndedNotice, 8+len(why))
	f.u32(uint32(p.rank))
	f.bytes([]byte(why))
	frame, err := f.finish()
	if err != nil {
		return
	}
	for _, q := range h.peers {
		if q != nil && q != p && !q.ended && !q.bye {
			q.out.send(frame)
		}
	}
}

// endedReplyLocked answers p's query id with every other rank that has
// ended, and why. The caller holds h.mu.
func (h *hub) endedReplyLocked(p *hubPeer, id uint64) {
	ended := make(map[int]string)
	for _, q := range h.peers {
		switch {
		case q == nil || q == p:
		case q.endWhy != "":
			ended[q.rank] = q.endWhy
		case q.ended:
			ended[q.rank] = "its connection to rank 0 ended (it exited or died)"
		}
	}
	f := newFrame(frEndedReply, 16+32*len(ended))
	f.u64(id)
	f.u32(uint32(len(ended)))
	for _, r := range sortedRanks(ended) {
		f.u32(uint32(r))
		f.bytes([]byte(ended[r]))
	}
	if frame, err := f.finish(); err == nil {
		p.out.send(frame)
	}
}

// decodeEnded reads the ranks and reasons of an frEndedReply.
func decodeEnded(r *frameReader, size int) (map[int]string, error) {
	n := r.u32()
	if r.err != nil || uint64(n) > uint64(size) {
		return nil, fmt.Errorf("malformed ended reply")
	}
	ended := make(map[int]string, n)
	for range n {
		rank := r.u32()
		why := r.bytes()
		if r.err != nil || uint64(rank) >= uint64(size) {
			return nil, fmt.Errorf("malformed ended reply")
		}
		ended[int(rank)] = string(why)
	}
	return ended, nil
}

// EndedRanks asks the hub which other ranks have ended and why (left
// early with os.exit(0), script ended, connection gone), waiting a
// moment at most; nil when the hub does not answer in time.
func (b *Bootstrap) EndedRanks() map[int]string {
	b.mu.Lock()
	if b.closing {
		b.mu.Unlock()
		return nil
	}
	if b.endedQ == nil {
		b.endedQ = make(map[uint64]chan map[int]string)
	}
	b.endedSeq++
	id := b.endedSeq
	ch := make(chan map[int]string, 1)
	b.endedQ[id] = ch
	b.mu.Unlock()
	defer func() {
		b.mu.Lock()
		delete(b.endedQ, id)
		b.mu.Unlock()
	}()
	f := newFrame(frEnded, 8)
	f.u64(id)
	frame, err := f.finish()
	if err != nil {
		return nil
	}
	return askHub(b, frame, ch)
}

// endedArrived hands the hub's answer to the waiting EndedRanks call.
func (b *Bootstrap) endedArrived(id uint64, ended map[int]string) {
	b.mu.Lock()
	ch := b.endedQ[id]
	b.mu.Unlock()
	if ch != nil {
		select {
		case ch <- ended:
		default:
		}
	}
}

// DescribeEnded is one line naming the ranks of ended (EndedRanks) and
// why, in rank order: "rank 1: exited early with os.exit(0) at x.lua:3;
// rank 2: its script ended". "" when there are none.
func DescribeEnded(ended map[int]string) string {
	var parts []string
	for _, r := range sortedRanks(ended) {
		parts = append(parts, fmt.Sprintf("rank %d: %s", r, strings.TrimPrefix(ended[r], fmt.Sprintf("rank %d: ", r))))
	}
	return strings.Join(parts, "; ")
}

func sortedRanks(m map[int]string) []int {
	ranks := make([]int, 0, len(m))
	for r := range m {
		ranks = append(ranks, r)
	}
	sort.Ints(ranks)
	return ranks
}
