package transport

import (
	"bufio"
	"fmt"
	"io"
	"math/bits"
	"os"
	"strconv"
	"strings"
)

// CheckMemoryFit says whether size bytes on each of sharers ranks of this
// host fit the memory the kernel says is available (MemAvailable, read
// from meminfo, /proc/meminfo when ""): shared-memory pages cannot be
// reclaimed, so a window past that wakes the out-of-memory killer halfway
// through its allocation instead of failing with a clear error.
func CheckMemoryFit(size uint64, sharers int, meminfo string) error {
	return CheckMemoryFitOf("window", size, sharers, meminfo)
}

// CheckMemoryFitOf is CheckMemoryFit for memory of kind ("window",
// "buffer"), which its errors name.
func CheckMemoryFitOf(kind string, size uint64, sharers int, meminfo string) error {
	sharers = max(sharers, 1)
	hi, need := bits.Mul64(size, uint64(sharers))
	what := FormatBytes(size)
	if sharers > 1 {
		what = fmt.Sprintf("%d ranks on this host x %s", sharers, FormatBytes(size))
	}
	if hi != 0 {
		return fmt.Errorf("%s memory: %s is beyond 2^64 bytes", kind, what)
	}
	if meminfo == "" {
		meminfo = "/proc/meminfo"
	}
	f, err := os.Open(meminfo)
	if err != nil {
		return nil // nothing to check against
	}
	defer f.Close()
	if avail, ok := MemAvailable(f); ok && need > avail {
		return fmt.Errorf("%s memory: %s = %s, but this host has %s of memory available (MemAvailable in %s): use smaller %ss or fewer ranks per host",
			kind, what, FormatBytes(need), FormatBytes(avail), meminfo, kind)
	}
	return nil
}

// MemAvailable reads MemAvailable (in bytes) from /proc/meminfo's format.
func MemAvailable(r io.Reader) (uint64, bool) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) >= 2 && f[0] == "MemAvailable:" {
			v, err := strconv.ParseUint(f[1], 10, 64)
			if err != nil {
				return 0, false
			}
			if len(f) >= 3 && strings.EqualFold(f[2], "kB") {
				v *= 1024
			}
			return v, true
		}
	}
	return 0, false
}

// FormatBytes writes n as "20 GiB", "1.5 MiB" or "512 bytes".
func FormatBytes(n uint64) string {
	if n < 1024 {
		return fmt.Sprintf("%d bytes", n)
	}
	units := []string{"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"}
	v, u := float64(n)/1024, 0
	for v >= 1024 && u < len(units)-1 {
		v /= 1024
		u++
	}
	return strings.TrimSuffix(strconv.FormatFloat(v, 'f', 1, 64), ".0") + " " + units[u]
}
