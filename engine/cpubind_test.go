package engine

import (
	"testing"

	"github.com/luacoll/luacoll/transport"
)

func TestGPUShared(t *testing.T) {
	id := func(host, dev string) transport.Identity { return transport.Identity{Host: host, Device: dev} }
	for _, c := range []struct {
		idents []transport.Identity
		rank   int
		want   bool
	}{
		{[]transport.Identity{id("a", "cuda:0"), id("a", "cuda:1")}, 0, false},
		{[]transport.Identity{id("a", "cuda:0"), id("a", "cuda:0")}, 1, true},
		{[]transport.Identity{id("a", "cuda:0"), id("b", "cuda:0")}, 0, false},
		{[]transport.Identity{id("a", "cuda:0"), id("a", "cuda:1"), id("a", "cuda:1")}, 0, false},
		{[]transport.Identity{id("a", "cuda:0"), id("a", "cuda:1"), id("a", "cuda:1")}, 2, true},
	} {
		if got := gpuShared(&transport.Topology{Rank: c.rank, Idents: c.idents}); got != c.want {
			t.Errorf("%v, rank %d: shared %v, want %v", c.idents, c.rank, got, c.want)
		}
	}
}
