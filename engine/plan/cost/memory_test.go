package cost

import (
	"strings"
	"testing"
)

// A 4-rank ring whose ranks touch 5n bytes each (the window's four chunks
// and the source) runs at the calibrated lines while the host's 20n bytes
// fit half the cache; with a cache of 20n, half of them do not, and half
// of every put's and copy's bytes cost the memory's figure (0.5 ns a
// byte, measured two ranks at once) times 4/2 ranks, 1 ns, instead of the
// line's (0.1 ns to a peer, 0.01 ns to itself). The rule holds for ranks
// of a real machine (CPUs known: 16 here); simulated ranks leave it out.
func TestMemoryBound(t *testing.T) {
	const ranks, n = 4, 1 << 20
	lists := ringLists(ranks, n)
	fits := 100 + 0.01*n + (ranks-1)*(1000+0.1*n)
	half := 100 + (0.01+0.99/2)*n + (ranks-1)*(1000+(0.1+0.9/2)*n)
	for _, c := range []struct {
		mem  *Memory
		want float64
	}{
		{nil, fits},
		{&Memory{CacheBytes: 40 * n, Ranks: 2, BetaNs: 0.5}, fits},
		{&Memory{CacheBytes: 20 * n, Ranks: 2, BetaNs: 0.5}, half},
		// A memory faster than the lines changes nothing: the lines' time
		// is the least a byte costs.
		{&Memory{CacheBytes: 1, Ranks: 2, BetaNs: 0.001}, fits},
	} {
		m := testModel(0)
		self := m.Modes["host"]["self"]
		self.Memory = c.mem
		m.Modes["host"]["self"] = self
		res, err := Estimate(m, Input{Lists: lists, Mode: "host", CPUs: 16})
		if err != nil {
			t.Fatal(err)
		}
		near(t, "ring", res.Time, c.want, 1e-9)
		checkPath(t, res)
		if res, err = Estimate(m, Input{Lists: lists, Mode: "host"}); err != nil || !same(res.Time, fits) {
			t.Errorf("no CPUs given (simulated ranks): %v (%v), want the lines' %v", res.Time, err, fits)
		}
	}
	// On 2 CPUs the 4 ranks take turns: two copy at once, and past the
	// cache a byte costs the memory's 0.5 ns, not 1 ns.
	m := testModel(0)
	self := m.Modes["host"]["self"]
	self.Memory = &Memory{CacheBytes: 20 * n, Ranks: 2, BetaNs: 0.5}
	m.Modes["host"]["self"] = self
	if floor := memoryBound(lists, Input{}.classOrDefault(), self.Memory, 2); len(floor) != ranks || floor[0].ns != 0.5 || floor[0].frac != 0.5 {
		t.Errorf("4 ranks on 2 CPUs: %+v, want 0.5 ns a byte for half the bytes", floor)
	}
	if floor := memoryBound(lists, Input{}.classOrDefault(), self.Memory, 8); len(floor) != ranks || floor[3].ns != 1 {
		t.Errorf("4 ranks on 8 CPUs: %+v, want 1 ns a byte", floor)
	}
	if got := footprints(lists); len(got) != ranks || got[0] != 5*n || got[3] != 5*n {
		t.Errorf("footprints %v, want 5n = %d each", got, 5*n)
	}
}

// MemoryOf keeps the memory's cost only where the puts went past twice
// the cache, and a model's memory must name a cache and its ranks.
func TestMemoryOf(t *testing.T) {
	put := Cost{Sizes: []uint64{1 << 20, 64 << 20}, TimesNs: []float64{20e3, 3.2e6}}
	if m := MemoryOf(put, 32<<20, 2); m == nil || m.BetaNs != 3.2e6/(64<<20) || m.Ranks != 2 {
		t.Errorf("puts to 64 MiB, cache 32 MiB: %+v, want 3.2 ms / 64 MiB a byte", m)
	}
	for _, cache := range []uint64{0, 33 << 20} {
		if m := MemoryOf(put, cache, 2); m != nil {
			t.Errorf("cache %d: %+v, want none", cache, m)
		}
	}
	for _, bad := range []string{`{"cache_bytes": 0, "ranks": 2, "beta_ns_per_byte": 1}`, `{"cache_bytes": 4096, "ranks": 0, "beta_ns_per_byte": 1}`, `{"cache_bytes": 4096, "ranks": 2, "beta_ns_per_byte": -1}`} {
		js := `{"machine": "m", "backend": "host", "modes": {"host": {"self": {"put": {"alpha_ns": 1, "beta_ns_per_byte": 0}, "signal": {"alpha_ns": 1, "beta_ns_per_byte": 0}, "wait": {"alpha_ns": 1, "beta_ns_per_byte": 0}, "copy": {"alpha_ns": 1, "beta_ns_per_byte": 0}, "barrier": {"alpha_ns": 1, "beta_ns_per_byte": 0}, "memory": ` + bad + `}}}}`
		if _, err := Parse([]byte(js)); err == nil || !strings.Contains(err.Error(), "memory") {
			t.Errorf("memory %s: %v, want an error naming it", bad, err)
		}
	}
}
