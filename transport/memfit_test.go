package transport

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCheckMemoryFitCountsEveryRankOfTheHost: a window fits only when the
// segments of all the host's ranks fit the memory the kernel says is
// available.
func TestCheckMemoryFitCountsEveryRankOfTheHost(t *testing.T) {
	info := filepath.Join(t.TempDir(), "meminfo")
	if err := os.WriteFile(info, []byte("MemTotal:       25165824 kB\nMemFree:        1000000 kB\nMemAvailable:    1048576 kB\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := CheckMemoryFit(400<<20, 2, info); err != nil {
		t.Errorf("2 x 400 MiB within 1 GiB available: %v", err)
	}
	err := CheckMemoryFit(600<<20, 2, info)
	if err == nil || !strings.Contains(err.Error(), "2 ranks on this host x 600 MiB = 1.2 GiB") ||
		!strings.Contains(err.Error(), "1 GiB of memory available") {
		t.Errorf("2 x 600 MiB within 1 GiB available: %v", err)
	}
	if err := CheckMemoryFit(1<<62, 8, info); err == nil || !strings.Contains(err.Error(), "beyond 2^64") {
		t.Errorf("overflow: %v", err)
	}
}

func TestMemAvailableAndFormatBytes(t *testing.T) {
	if v, ok := MemAvailable(strings.NewReader("MemTotal: 10 kB\nMemAvailable: 7 kB\n")); !ok || v != 7168 {
		t.Errorf("MemAvailable = %d, %v", v, ok)
	}
	if _, ok := MemAvailable(strings.NewReader("MemTotal: 10 kB\n")); ok {
		t.Error("MemAvailable found in a file without it")
	}
	for n, want := range map[uint64]string{512: "512 bytes", 1024: "1 KiB", 1536: "1.5 KiB", 20 << 30: "20 GiB", 1 << 40: "1 TiB"} {
		if got := FormatBytes(n); got != want {
			t.Errorf("FormatBytes(%d) = %q, want %q", n, got, want)
		}
	}
}
