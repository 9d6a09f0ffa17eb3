package gpu

import "testing"

func TestAllocSize(t *testing.T) {
	for _, c := range []struct{ in, want uint64 }{
		{0, 256},
		{1, 256},
		{256, 256},
		{257, 512},
		{1<<20 - 1, 1 << 20},
		{1 << 20, 2 << 20},
		{2 << 20, 2 << 20},
		{1<<30 + 1024, 1<<30 + 2<<20},
		{1 << 30, 1 << 30},
	} {
		if got := allocSize(c.in); got != c.want {
			t.Errorf("allocSize(%d) = %d, want %d", c.in, got, c.want)
		}
	}
}
