package cuda

import (
	"reflect"
	"testing"
)

func TestCopyPieces(t *testing.T) {
	const mib = 1 << 20
	for _, c := range []struct {
		n, max    uint64
		capturing bool
		want      []uint64
	}{
		{1 << 30, 256 * mib, false, []uint64{1 << 30}},
		{1 << 30, 256 * mib, true, []uint64{256 * mib, 256 * mib, 256 * mib, 256 * mib}},
		{512 * mib, 256 * mib, true, []uint64{256 * mib, 256 * mib}},
		{256 * mib, 256 * mib, true, []uint64{256 * mib}},
		{300*mib + 3, 256 * mib, true, []uint64{256 * mib, 44*mib + 3}},
		{1 << 30, 0, true, []uint64{1 << 30}},
		{0, 256 * mib, true, []uint64{0}},
	} {
		got := copyPieces(c.n, c.max, c.capturing)
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("copyPieces(%d, %d, %v) = %v, want %v", c.n, c.max, c.capturing, got, c.want)
		}
		var sum uint64
		for _, m := range got {
			sum += m
		}
		if sum != c.n {
			t.Errorf("copyPieces(%d, ...) sums to %d", c.n, sum)
		}
	}
}
