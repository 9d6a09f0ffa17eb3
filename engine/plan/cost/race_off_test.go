//go:build !race

package cost

// ringRanks is the ring test's size (256 under the race detector).
const ringRanks = 1024
