package inproc

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// Group is an in-process job of Size ranks.
type Group struct {
	size int
	mu   sync.Mutex
	cond *sync.Cond
	// rounds[seq] collects contributions of collective number seq.
	rounds   map[int]*round
	failures []string
	// failed is the first failure (Fail): every call not yet complete,
	// and every later one, fails with it, as the hub's abort does.
	failed string
	start  time.Time // the job clock's zero
	// ended[r], once rank r's script ended (End, Leave), says how; its
	// calls after that (the meeting before its windows are torn down)
	// meet only other ended ranks' (the hub's collAtEnd, in one process).
	ended map[int]string
}

type round struct {
	data  [][]byte
	count int
	taken int
	// have marks the ranks that contributed, atEnd those whose scripts
	// had ended when they did.
	have, atEnd []bool
}

// NewGroup returns a group of size ranks.
func NewGroup(size int) *Group {
	g := &Group{size: size, rounds: map[int]*round{}, start: time.Now(), ended: map[int]string{}}
	g.cond = sync.NewCond(&g.mu)
	return g
}

// Size is the number of ranks of the group.
func (g *Group) Size() int { return g.size }

// Member returns rank r's Exchanger. Each member must be used by one goroutine.
func (g *Group) Member(r int) *Member { return &Member{g: g, rank: r} }

// Member is one rank's view of a Group.
type Member struct {
	g    *Group
	rank int
	seq  int
}

// Rank implements transport.Exchanger.
func (m *Member) Rank() int { return m.rank }

// JobClock returns the time since the group was made: every member reads
// the same clock, as ranks read rank 0's over a bootstrap.
func (m *Member) JobClock(context.Context) (time.Duration, error) {
	return time.Since(m.g.start), nil
}

// Size implements transport.Exchanger.
func (m *Member) Size() int { return m.g.size }

// AllGather implements transport.Exchanger.
func (m *Member) AllGather(ctx context.Context, data []byte) ([][]byte, error) {
	g := m.g
	m.seq++
	seq := m.seq
	g.mu.Lock()
	defer g.mu.Unlock()
	r := g.rounds[seq]
	if r == nil {
		r = &round{data: make([][]byte, g.size), have: make([]bool, g.size), atEnd: make([]bool, g.size)}
		g.rounds[seq] = r
	}
	r.data[m.rank] = append([]byte(nil), data...)
	_, r.atEnd[m.rank] = g.ended[m.rank]
	r.have[m.rank] = true
	r.count++
	g.cond.Broadcast()
	stop := context.AfterFunc(ctx, func() {
		g.mu.Lock()
		g.cond.Broadcast()
		g.mu.Unlock()
	})
	defer stop()
	for {
		// (Also once complete: a rank's meeting after its script ended
		// does not stand for another's call from its script.)
		if err := g.endedBefore(r, seq); err != nil {
			return nil, err
		}
		if r.count >= g.size {
			break
		}
		if g.failed != "" {
			return nil, fmt.Errorf("allgather #%d: %s", seq, g.failed)
		}
		if ctx.Err() != nil {
			return nil, fmt.Errorf("allgather #%d: %w", seq, ctx.Err())
		}
		g.cond.Wait()
	}
	out := make([][]byte, g.size)
	copy(out, r.data)
	r.taken++
	if r.taken == g.size {
		delete(g.rounds, seq)
	}
	return out, nil
}

// endedBefore is the error of a call in round r (collective seq, complete
// or not) that must fail: a rank whose script ended is missing from it,
// or took part only in its meeting after the end, while others are in it
// from their scripts.
func (g *Group) endedBefore(r *round, seq int) error {
	script := false // a rank is in it from its script
	for q := range g.size {
		script = script || (r.have[q] && !r.atEnd[q])
	}
	if !script {
		return nil // ended ranks meeting: the others may end and come yet
	}
	for q := range g.size {
		if why, ended := g.ended[q]; ended && (!r.have[q] || r.atEnd[q]) {
			return fmt.Errorf("allgather #%d: rank %d %s before it (it made fewer collective calls than the ranks in this one)", seq, q, why)
		}
	}
	return nil
}

// End marks this rank's script as ended without error: its later calls
// meet only ranks whose scripts ended too, and a call of the others'
// that it will not join fails naming it.
func (m *Member) End() { m.end("ended without error") }

// Leave marks this rank as leaving early on purpose (os.exit(0)), saying
// why, as End does.
func (m *Member) Leave(why string) error {
	m.end(why)
	return nil
}

func (m *Member) end(why string) {
	g := m.g
	g.mu.Lock()
	defer g.mu.Unlock()
	if _, ok := g.ended[m.rank]; !ok {
		g.ended[m.rank] = why
	}
	g.cond.Broadcast()
}

// Barrier implements transport.Exchanger.
func (m *Member) Barrier(ctx context.Context) error {
	_, err := m.AllGather(ctx, nil)
	return err
}

// Fail implements the engine's Conn: it records the reason, and the
// other ranks' calls not yet complete, and all later ones, fail naming
// this rank (a rank waiting at the teardown meeting for one that failed
// would otherwise wait for ever: that meeting has no time limit).
func (m *Member) Fail(reason string) {
	g := m.g
	g.mu.Lock()
	defer g.mu.Unlock()
	why := fmt.Sprintf("rank %d: %s", m.rank, reason)
	g.failures = append(g.failures, why)
	if g.failed == "" {
		g.failed = fmt.Sprintf("rank %d failed: %s", m.rank, reason)
	}
	g.cond.Broadcast()
}

// Close implements the engine's Conn.
func (m *Member) Close() error { return nil }

// Failures returns the reasons ranks reported with Fail.
func (g *Group) Failures() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]string(nil), g.failures...)
}
