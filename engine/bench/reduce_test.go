package bench

import (
	"testing"

	"github.com/luacoll/luacoll/kernels"
)

// The host reference accepts the reduction of the generated inputs, for
// every type and op, and counts an element that is off.
func TestRedWrong(t *testing.T) {
	const ranks, count, seed = 3, 257, 42
	for _, dt := range kernels.DTypes() {
		for _, op := range kernels.RedOps() {
			n := count * int(dt.Size())
			acc := make([]byte, n)
			redInput(acc, dt, op, seed, 0, 5)
			for r := 1; r < ranks; r++ {
				in := make([]byte, n)
				redInput(in, dt, op, seed, r, 5)
				kernels.ReduceBytes(acc, in, dt, op)
			}
			if w := redWrong(acc, dt, op, seed, ranks, 5); w != 0 {
				t.Errorf("%s %s: %d elements wrong in the reduction itself", dt, op, w)
			}
			if w := redWrong(acc, dt, op, seed, ranks, 6); w == 0 {
				t.Errorf("%s %s: shifted elements pass", dt, op)
			}
			acc[len(acc)-1] ^= 0x40 // the top byte of the last element
			if w := redWrong(acc, dt, op, seed, ranks, 5); w != 1 {
				t.Errorf("%s %s: a changed element counts %d", dt, op, w)
			}
		}
	}
}
