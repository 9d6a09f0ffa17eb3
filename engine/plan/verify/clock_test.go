package verify

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// joinClock (vector instructions where the CPU has them, then a loop)
// gives the entry-wise max and says whether any entry rose, for every
// length around the vector's width and for clocks that do and do not
// rise, alike to a plain loop.
func TestJoinClock(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for n := 0; n <= 70; n++ {
		for trial := 0; trial < 20; trial++ {
			vc, at := make([]uint32, n), make([]uint32, n+trial%3) // at may be longer
			for i := range vc {
				vc[i] = rng.Uint32N(8)
			}
			for i := range at {
				at[i] = rng.Uint32N(8)
				if trial%4 == 0 && i < n {
					at[i] = min(at[i], vc[i]) // nothing rises
				}
				if trial%4 == 1 && i < n {
					at[i] = vc[i] // one entry rises, at the end, or none
					if i == n-1 {
						at[i] = vc[i] + 1<<31
					}
				}
			}
			want, rose := slices.Clone(vc), false
			for i := range want {
				if at[i] > want[i] {
					want[i], rose = at[i], true
				}
			}
			got := slices.Clone(vc)
			if up := joinClock(got, at); up != rose || !slices.Equal(got, want) {
				t.Fatalf("n %d trial %d: joinClock(%v, %v) = %v, rose %v; want %v, %v", n, trial, vc, at, got, up, want, rose)
			}
		}
	}
}

func BenchmarkJoinClock(b *testing.B) {
	vc, at := make([]uint32, 1024), make([]uint32, 1024)
	for i := range at {
		at[i] = uint32(i % 7)
	}
	b.SetBytes(4 * 1024)
	for b.Loop() {
		joinClock(vc, at)
	}
}
