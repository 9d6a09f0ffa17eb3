package shm

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/luacoll/luacoll/transport"
	"github.com/luacoll/luacoll/transport/inproc"
)

// watchingExchanger looks at the file system each time its rank enters an
// exchange: what a rank killed there would leave behind.
type watchingExchanger struct {
	*inproc.Member
	job  string
	mu   *sync.Mutex
	seen map[string]bool
}

func (w *watchingExchanger) AllGather(ctx context.Context, data []byte) ([][]byte, error) {
	entries, _ := os.ReadDir(transport.ShmDir)
	w.mu.Lock()
	for _, e := range entries {
		if strings.Contains(e.Name(), w.job) {
			w.seen[e.Name()] = true
		}
	}
	w.mu.Unlock()
	return w.Member.AllGather(ctx, data)
}

// shareJob runs fn on n goroutine ranks, each with its own host backend,
// and returns every rank's error.
func shareJob(t *testing.T, n int, wrap func(m *inproc.Member, job string) transport.Exchanger, fn func(be *HostBackend, ex transport.Exchanger, topo *transport.Topology) error) (job string, errs []error) {
	t.Helper()
	g := inproc.NewGroup(n)
	job = fmt.Sprintf("shmtest%d", time.Now().UnixNano())
	errs = make([]error, n)
	var wg sync.WaitGroup
	for r := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			var ex transport.Exchanger = g.Member(r)
			if wrap != nil {
				ex = wrap(g.Member(r), job)
			}
			be := NewHostBackend(job)
			defer be.Close()
			topo, err := transport.Discover(ctx, ex, be.Identity(), be.GPUPeer, "")
			if err != nil {
				errs[r] = err
				return
			}
			errs[r] = fn(be, ex, topo)
		}()
	}
	wg.Wait()
	return job, errs
}

// A share never gives its memory a name in the file system, not even
// while the ranks exchange what they made: a rank killed at any point of
// it leaves nothing behind. Every rank writes its region through its own
// mapping and reads every peer's through its mapping of theirs.
func TestShareLeavesNoName(t *testing.T) {
	var mu sync.Mutex
	seen := map[string]bool{}
	wrap := func(m *inproc.Member, job string) transport.Exchanger {
		return &watchingExchanger{Member: m, job: job, mu: &mu, seen: seen}
	}
	const n = 3
	job, errs := shareJob(t, n, wrap, func(be *HostBackend, ex transport.Exchanger, topo *transport.Topology) error {
		ctx := context.Background()
		r := ex.Rank()
		for round := range 3 {
			reg, err := be.Share(ctx, ex, topo, 10000, "")
			if err != nil {
				return err
			}
			if len(transport.MappedSegments(be.Job)) < n {
				return fmt.Errorf("round %d: /proc/self/maps shows %v, want every rank's segment", round, transport.MappedSegments(be.Job))
			}
			transport.HostBytes(reg.Local, 8)[0] = byte(10*round + r + 1)
			if err := ex.Barrier(ctx); err != nil {
				return err
			}
			for p := range n {
				if got := transport.HostBytes(reg.Peers[p], 8)[0]; got != byte(10*round+p+1) {
					return fmt.Errorf("round %d: rank %d's region reads %d through rank %d's mapping", round, p, got, r)
				}
			}
			if err := ex.Barrier(ctx); err != nil {
				return err
			}
			if err := reg.Close(); err != nil {
				return err
			}
		}
		return nil
	})
	for r, err := range errs {
		if err != nil {
			t.Errorf("rank %d: %v", r, err)
		}
	}
	for name := range seen {
		t.Errorf("%s/%s existed while the ranks exchanged: a rank killed then would leave it", transport.ShmDir, name)
	}
	if left := transport.MappedSegments(job); len(left) > 0 {
		t.Errorf("mappings left after every region closed: %v", left)
	}
}

// A rank that fails to share (here: its window cannot fit this host's
// memory) makes every rank fail, naming why, with nothing mapped
// afterwards.
func TestShareFailureLeavesNothingMapped(t *testing.T) {
	job, errs := shareJob(t, 2, nil, func(be *HostBackend, ex transport.Exchanger, topo *transport.Topology) error {
		size := uint64(4096)
		if ex.Rank() == 1 {
			size = 1 << 50
		}
		_, err := be.Share(context.Background(), ex, topo, size, "")
		if err == nil {
			return fmt.Errorf("share succeeded with a window larger than memory")
		}
		if !strings.Contains(err.Error(), "rank 1") || !strings.Contains(err.Error(), "memory") {
			return fmt.Errorf("error does not say who or why: %v", err)
		}
		return nil
	})
	for r, err := range errs {
		if err != nil {
			t.Errorf("rank %d: %v", r, err)
		}
	}
	if left := transport.MappedSegments(job); len(left) > 0 {
		t.Errorf("mappings left after a failed share: %v", left)
	}
}
