package transport

import (
	"os"
	"path/filepath"

	"github.com/luacoll/luacoll/transport/knobs"
)

// CacheBytes returns the size of the largest CPU cache sysfs describes for
// cpu0 (the last-level cache, which its cores share), or 0 when it says
// nothing readable.
func CacheBytes() uint64 {
	dirs, _ := filepath.Glob("/sys/devices/system/cpu/cpu0/cache/index*")
	var most uint64
	for _, d := range dirs {
		b, err := os.ReadFile(filepath.Join(d, "size"))
		if err != nil {
			continue
		}
		if n, ok := ParseSize(string(b)); ok {
			most = max(most, n)
		}
	}
	return most
}

// HostCacheBytes is the cache size the host backend plans its copies
// with: knobs.HostCache, else CacheBytes.
func HostCacheBytes() uint64 {
	if cache, ok := knobs.HostCache.Get(); ok {
		return cache
	}
	return CacheBytes()
}

// ParseSize reads a size in bytes with an optional K, M or G suffix
// (binary, either case), as sysfs writes cache sizes ("32768K") and as the
// command line takes them ("64M"); false when it is none, or too large.
// It is the knobs' reading of sized values.
func ParseSize(s string) (uint64, bool) { return knobs.ParseSize(s) }
