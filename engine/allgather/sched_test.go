package allgather_test

import (
	"bytes"
	"context"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/luacoll/luacoll/engine"
	"github.com/luacoll/luacoll/engine/allgather"
	"github.com/luacoll/luacoll/engine/enginetest"
	"github.com/luacoll/luacoll/transport"
	"github.com/luacoll/luacoll/window"
)

// Ring, hier and direct on the window's operations, across the tag's exec
// field wrapping to 0 (that exec runs direct, the next ones count from
// the small tag it leaves), with the algorithms taking turns on one
// window and every chunk checked after every exec.
func TestAllGatherSchedulesAcrossTheWrap(t *testing.T) {
	const ranks = 3
	const n = 40000
	errs := enginetest.WithComms(t, ranks, engine.Options{Device: "host", Timeout: 20 * time.Second}, func(r int, c *engine.Comm) error {
		ctx := context.Background()
		w, err := c.NewWindow(ctx, "w", window.Options{Bytes: n * ranks, Signals: 2, Counters: 1, Barriers: 2, Timeout: 20 * time.Second})
		if err != nil {
			return err
		}
		src, err := c.NewBuffer(n)
		if err != nil {
			return err
		}
		round := 0
		for _, algo := range []string{"ring", "hier", "ring"} {
			ag, err := allgather.New(ctx, c, w, algo, false)
			if err != nil {
				return err
			}
			if got := ag.Info()["algo"]; got != algo {
				return fmt.Errorf("algo %s requested, %v runs", algo, got)
			}
			if round == 0 {
				allgather.SetExecCount(ag, allgather.TagExecMask-2)
			}
			for i := 0; i < 4; i++ {
				round++
				if err := src.Write(0, bytes.Repeat([]byte{chunkByte(r, round)}, n)); err != nil {
					return err
				}
				if err := ag.Exec(ctx, src, 0, n); err != nil {
					return err
				}
				if err := c.Sync(ctx); err != nil {
					return fmt.Errorf("%s, round %d: %w", algo, round, err)
				}
				for p := 0; p < ranks; p++ {
					got, err := w.Buffer().Read(uint64(p)*n, n)
					if err != nil {
						return err
					}
					for j, b := range got {
						if b != chunkByte(p, round) {
							return fmt.Errorf("%s, round %d: byte %d of rank %d's chunk is %d, want %d", algo, round, j, p, b, chunkByte(p, round))
						}
					}
				}
			}
			if err := ag.Destroy(ctx); err != nil {
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
}

// newRing makes a ring all-gather on a window of 1 KiB (its waits' timeout
// given) and a 256-byte source.
func newRing(ctx context.Context, c *engine.Comm, timeout time.Duration) (*window.Buffer, *allgather.Persistent, error) {
	w, err := c.NewWindow(ctx, "w", window.Options{Bytes: 1024, Signals: 2, Counters: 1, Barriers: 2, Timeout: timeout})
	if err != nil {
		return nil, nil, err
	}
	src, err := c.NewBuffer(256)
	if err != nil {
		return nil, nil, err
	}
	ag, err := allgather.New(ctx, c, w, "ring", false)
	return src, ag, err
}

// rankOne is one for rank 1, other for the rest.
func rankOne(r int, one, other uint64) uint64 {
	if r == 1 {
		return one
	}
	return other
}

// A rank that passes another n fails its ring neighbour's last wait at
// once, naming both sizes.
func TestAllGatherRingMismatch(t *testing.T) {
	n := []uint64{64, 128}
	errs := enginetest.WithComms(t, 2, engine.Options{Device: "host", Timeout: 20 * time.Second}, func(r int, c *engine.Comm) error {
		ctx := context.Background()
		src, ag, err := newRing(ctx, c, 10*time.Minute)
		if err != nil {
			return err
		}
		if err := ag.Exec(ctx, src, 0, n[r]); err != nil {
			return err
		}
		serr := c.Sync(ctx)
		want := fmt.Sprintf("rank %d passed n=%d, this rank n=%d", 1-r, n[1-r], n[r])
		if serr == nil || !strings.Contains(serr.Error(), want) || !strings.Contains(serr.Error(), "seen as soon as") {
			return fmt.Errorf("got %v, want the mismatch (%s) seen at once", serr, want)
		}
		return ag.Destroy(ctx)
	})
	for r, err := range errs {
		if err != nil {
			t.Errorf("rank %d: %v", r, err)
		}
	}
}

// At three ranks and more, a ring rank that refuses an exec or passes
// another n leaves no rank with a result claimed whole: its right
// neighbour fails at once (the refusal, or the other n, is a tag above
// any count its first wait needs), and so forwards nothing; the others
// fail at their timeout, never passing on a chunk that did not come.
func TestAllGatherRingRefusedForwardsNothing(t *testing.T) {
	for _, c := range []struct {
		name string
		n    func(r int) uint64 // 0: rank r refuses
		want string
	}{
		{"refused", func(r int) uint64 { return rankOne(r, 0, 64) }, "rank 1 refused it"},
		{"other n", func(r int) uint64 { return rankOne(r, 128, 64) }, "rank 1 passed n=128, this rank n=64"},
	} {
		errs := enginetest.WithComms(t, 3, engine.Options{Device: "host", Timeout: 20 * time.Second}, func(r int, cm *engine.Comm) error {
			ctx := context.Background()
			src, ag, err := newRing(ctx, cm, time.Second)
			if err != nil {
				return err
			}
			if n := c.n(r); n == 0 {
				err = ag.RefuseExec()
			} else {
				err = ag.Exec(ctx, src, 0, n)
			}
			if err != nil {
				return err
			}
			serr := cm.Sync(ctx)
			switch {
			case r == 1 && c.name == "refused":
				if serr != nil {
					return fmt.Errorf("the refusing rank: %v", serr)
				}
			case serr == nil:
				return fmt.Errorf("%s: the exec passed", c.name)
			case r == 2 && (!strings.Contains(serr.Error(), c.want) || (c.name == "other n" && !strings.Contains(serr.Error(), "seen as soon as"))):
				return fmt.Errorf("%s: got %v, want %q seen at once", c.name, serr, c.want)
			}
			return nil
		})
		for r, err := range errs {
			if err != nil {
				t.Errorf("rank %d: %v", r, err)
			}
		}
	}
}

// Nodes are the groups of ranks that reach each other without the
// network, in the order of their lowest rank.
func TestNodeGroups(t *testing.T) {
	// ranks 0, 2 on one host, 1, 3 on another
	net := [][]bool{
		{false, true, false, true},
		{true, false, true, false},
		{false, true, false, true},
		{true, false, true, false},
	}
	topo := &transport.Topology{Net: net}
	groups, mine, li, err := allgather.NodeGroups(topo, 4, 3)
	if err != nil {
		t.Fatal(err)
	}
	if want := [][]int{{0, 2}, {1, 3}}; !reflect.DeepEqual(groups, want) || mine != 1 || li != 1 {
		t.Errorf("groups %v, node %d, index %d; want %v, 1, 1", groups, mine, li, want)
	}
	if groups, _, _, err := allgather.NodeGroups(nil, 3, 0); err != nil || len(groups) != 1 || len(groups[0]) != 3 {
		t.Errorf("no topology: %v %v, want one node of 3", groups, err)
	}
	uneven := [][]bool{{false, false, true}, {false, false, true}, {true, true, false}}
	if _, _, _, err := allgather.NodeGroups(&transport.Topology{Net: uneven}, 3, 0); err == nil || !strings.Contains(err.Error(), "same number of ranks") {
		t.Errorf("2 + 1 ranks: %v, want an error", err)
	}
}

// Pieces cover the chunk exactly, 1 to 8 of them.
func TestHierPieces(t *testing.T) {
	for _, n := range []uint64{0, 1, 3, 1 << 20, 1<<20 + 1, 5 << 20, 64 << 20, 1000003} {
		p := allgather.HierPieces(n)
		if p < 1 || p > 8 || (n > 0 && p > n) {
			t.Errorf("n=%d: %d pieces", n, p)
		}
		next := uint64(0)
		for i := uint64(0); i < p; i++ {
			off, l := allgather.HierPiece(n, p, i)
			if off != next {
				t.Errorf("n=%d piece %d at %d, want %d", n, i, off, next)
			}
			next = off + l
		}
		if next != n {
			t.Errorf("n=%d: pieces end at %d", n, next)
		}
	}
}
