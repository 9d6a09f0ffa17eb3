package launch

import (
	"fmt"
	"strings"
	"testing"
)

func TestNodeOf(t *testing.T) {
	for _, c := range []struct {
		n, k int
		want string // node:local/size per rank
	}{
		{4, 1, "0:0/4 0:1/4 0:2/4 0:3/4"},
		{4, 2, "0:0/2 0:1/2 1:0/2 1:1/2"},
		{5, 2, "0:0/3 0:1/3 0:2/3 1:0/2 1:1/2"},
		{3, 3, "0:0/1 1:0/1 2:0/1"},
		{7, 3, "0:0/3 0:1/3 0:2/3 1:0/2 1:1/2 2:0/2 2:1/2"},
	} {
		var got []string
		for r := range c.n {
			node, local, size := NodeOf(r, c.n, c.k)
			got = append(got, fmt.Sprintf("%d:%d/%d", node, local, size))
		}
		if g := strings.Join(got, " "); g != c.want {
			t.Errorf("NodeOf(., %d, %d) = %s, want %s", c.n, c.k, g, c.want)
		}
	}
	if CheckNodes(3, 2) == nil || CheckNodes(0, 2) == nil || CheckNodes(2, 2) != nil {
		t.Error("CheckNodes accepts a bad count or refuses a good one")
	}
}

// A rank picks its GPU by the index the launcher gave its logical node's
// ranks (its rank), else by its local rank.
func TestDeviceIndex(t *testing.T) {
	env := RankEnv{Rank: 3, LocalRank: 1}
	for _, c := range []struct {
		set  string
		want int
	}{{"", 1}, {"3", 3}, {"0", 0}, {"-2", 1}, {"x", 1}} {
		get := func(k string) string {
			if k == EnvDeviceIndex {
				return c.set
			}
			return ""
		}
		if got := DeviceIndex(env, get); got != c.want {
			t.Errorf("%s=%q: %d, want %d", EnvDeviceIndex, c.set, got, c.want)
		}
	}
}
