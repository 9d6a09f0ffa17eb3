//go:build race

package cost

// ringRanks is the ring test's size: the race detector makes the 1,024-rank
// case take a minute, so under it the ring has 256 ranks.
const ringRanks = 256
