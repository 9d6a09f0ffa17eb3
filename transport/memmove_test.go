package transport

import (
	"bytes"
	"testing"
)

// Memmove copies like copy (memmove) at every size: a large copy spread
// over goroutines lands whole, and overlapping ranges (either way) stay
// one memmove.
func TestMemmove(t *testing.T) {
	fill := func(b []byte, seed int) {
		for i := range b {
			b[i] = byte(i*7 + seed + i>>11)
		}
	}
	for _, n := range []int{0, 1, 4096, MemmoveSplit - 1, MemmoveSplit, 3*MemmoveSplit + 12345} {
		src, dst := make([]byte, n), make([]byte, n)
		fill(src, n)
		Memmove(dst, src)
		if !bytes.Equal(dst, src) {
			t.Fatalf("%d bytes: the copy differs", n)
		}
	}
	const n = 2 * MemmoveSplit
	for _, shift := range []int{4096, -4096, 1, -1} {
		buf := make([]byte, n+8192)
		fill(buf, shift)
		want := append([]byte(nil), buf...)
		from, to := 4096, 4096+shift
		copy(want[to:to+n], want[from:from+n])
		Memmove(buf[to:to+n], buf[from:from+n])
		if !bytes.Equal(buf, want) {
			t.Fatalf("overlap by %d: the copy differs from memmove", shift)
		}
	}
}
