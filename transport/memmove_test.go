package transport

import (
	"bytes"
	"fmt"
	"strconv"
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
	sizes := []int{0, 1, 4096, CachedPiece - 1, CachedPiece, 2*CachedPiece + 77, MemmoveSplit - 1, MemmoveSplit, 3*MemmoveSplit + 12345}
	for _, n := range sizes {
		for _, cached := range []bool{false, true} {
			src, dst := make([]byte, n), make([]byte, n)
			fill(src, n)
			if cached {
				MemmoveCached(dst, src)
			} else {
				Memmove(dst, src)
			}
			if !bytes.Equal(dst, src) {
				t.Fatalf("%d bytes (cached %v): the copy differs", n, cached)
			}
		}
	}
	const n = 2 * MemmoveSplit
	for _, shift := range []int{4096, -4096, 1, -1} {
		buf := make([]byte, n+8192)
		fill(buf, shift)
		want := append([]byte(nil), buf...)
		from, to := 4096, 4096+shift
		copy(want[to:to+n], want[from:from+n])
		got := append([]byte(nil), buf...)
		Memmove(buf[to:to+n], buf[from:from+n])
		MemmoveCached(got[to:to+n], got[from:from+n])
		if !bytes.Equal(buf, want) || !bytes.Equal(got, want) {
			t.Fatalf("overlap by %d: the copy differs from memmove", shift)
		}
	}
}

// Cache sizes as sysfs writes them, and what is not one.
func TestParseSize(t *testing.T) {
	for in, want := range map[string]uint64{"32768K\n": 32 << 20, "2048K": 2 << 20, "32M": 32 << 20, "1G": 1 << 30, "512": 512, "0": 0} {
		if got, ok := ParseSize(in); !ok || got != want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", in, got, ok, want)
		}
	}
	for _, in := range []string{"", "K", "-1K", "12X", "1.5M", "99999999999999999999G", "17179869184G"} {
		if got, ok := ParseSize(in); ok {
			t.Errorf("ParseSize(%q) = %d, accepted", in, got)
		}
	}
	if CacheBytes() == 0 {
		t.Log("sysfs lists no CPU cache here")
	}
}

// ParseSize never panics, and what it accepts is the number times
// its suffix.
func FuzzParseSize(f *testing.F) {
	for _, s := range []string{"32768K", "2M", "1G", "7", "", "K"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, ok := ParseSize(s)
		if !ok {
			return
		}
		again, ok2 := ParseSize(strconv.FormatUint(n, 10))
		if !ok2 || again != n {
			t.Errorf("%q: %d does not read back", s, n)
		}
	})
}

// BenchmarkMemmove times copies of the sizes around the points where a
// host copy changes its way (Go's non-temporal stores from 1 MiB, the
// spread over goroutines), each way side by side: go test -bench Memmove
// -cpu 8 ./transport.
func BenchmarkMemmove(b *testing.B) {
	ways := []struct {
		name string
		w    copyWay
	}{
		{"memmove", plainCopy},
		{"cached", cachedCopy},
		{"spread1M", copyWay{split: 1 << 20, part: 256 << 10}},
		{"spread1M-cached", copyWay{split: 1 << 20, part: 256 << 10, piece: CachedPiece}},
		{"spread2M", copyWay{split: 2 << 20, part: 512 << 10}},
	}
	for _, n := range []int{512 << 10, 1 << 20, 2 << 20, 3 << 20, 4 << 20, 8 << 20, 16 << 20, 64 << 20, 256 << 20} {
		src, dst := make([]byte, n), make([]byte, n)
		for _, w := range ways {
			b.Run(fmt.Sprintf("%dK/%s", n>>10, w.name), func(b *testing.B) {
				b.SetBytes(int64(n))
				for range b.N {
					w.w.move(dst, src)
				}
			})
		}
	}
}
