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
	start    time.Time // the job clock's zero
}

type round struct {
	data  [][]byte
	count int
	taken int
}

// NewGroup returns a group of size ranks.
func NewGroup(size int) *Group {
	g := &Group{size: size, rounds: map[int]*round{}, start: time.Now()}
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
		r = &round{data: make([][]byte, g.size)}
		g.rounds[seq] = r
	}
	r.data[m.rank] = append([]byte(nil), data...)
	r.count++
	g.cond.Broadcast()
	stop := context.AfterFunc(ctx, func() {
		g.mu.Lock()
		g.cond.Broadcast()
		g.mu.Unlock()
	})
	defer stop()
	for r.count < g.size {
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

// Barrier implements transport.Exchanger.
func (m *Member) Barrier(ctx context.Context) error {
	_, err := m.AllGather(ctx, nil)
	return err
}

// Fail implements the engine's Conn: in-process ranks share the test's
// fate, so it only records the reason.
func (m *Member) Fail(reason string) {
	m.g.mu.Lock()
	m.g.failures = append(m.g.failures, fmt.Sprintf("rank %d: %s", m.rank, reason))
	m.g.mu.Unlock()
}

// Close implements the engine's Conn.
func (m *Member) Close() error { return nil }

// Failures returns the reasons ranks reported with Fail.
func (g *Group) Failures() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]string(nil), g.failures...)
}
