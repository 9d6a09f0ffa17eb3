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

// Sizes of several parts (inParts' goroutines) fill and check as one:
// the parts meet without a gap, and a wrong element in each part counts.
func TestRedWrongParts(t *testing.T) {
	const ranks, seed = 2, 7
	count := uint64(3*redPart + 5)
	dt, op := kernels.F32, kernels.Sum
	n := count * dt.Size()
	acc, in := make([]byte, n), make([]byte, n)
	redInput(acc, dt, op, seed, 0, 0)
	redInput(in, dt, op, seed, 1, 0)
	for k := uint64(0); k < count; k += count / 7 {
		one := make([]byte, dt.Size())
		redInput(one, dt, op, seed, 1, k)
		if string(one) != string(in[k*dt.Size():(k+1)*dt.Size()]) {
			t.Fatalf("element %d filled in parts differs from the one filled alone", k)
		}
	}
	kernels.ReduceBytes(acc, in, dt, op)
	if w := redWrong(acc, dt, op, seed, ranks, 0); w != 0 {
		t.Fatalf("%d wrong in a right reduction", w)
	}
	for _, k := range []uint64{0, redPart, 2*redPart + 1, count - 1} {
		acc[k*dt.Size()+3] ^= 0x40
	}
	if w := redWrong(acc, dt, op, seed, ranks, 0); w != 4 {
		t.Fatalf("4 changed elements count %d", w)
	}
}
