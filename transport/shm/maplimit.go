package shm

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// The kernel limits the memory mappings of a process (vm.max_map_count,
// 65530 by default). Every window maps a segment per rank of its host
// and every buffer one more, so a script that makes windows without
// freeing them runs out: mmap fails with a bare "cannot allocate memory",
// and the Go runtime, which maps memory too, may then die outright (even
// reading /proc/self/maps to explain it needs new heap). The host memory
// counts its mappings and refuses, with a clear error, those that would
// leave the process less than mapHeadroom below the limit.

const (
	// maxMapCountFile is where the kernel's limit is read.
	maxMapCountFile = "/proc/sys/vm/max_map_count"
	// mapHeadroom is what is left to the runtime and the libraries.
	mapHeadroom = 1024
)

// mapLimit is the kernel's limit on this process's mappings (MapLimit
// when set, else read once; 0 when unknown).
func (m *HostMemory) mapLimit() int {
	if m.MapLimit != 0 {
		return m.MapLimit
	}
	m.limitOnce.Do(func() {
		if b, err := os.ReadFile(maxMapCountFile); err == nil {
			m.readLimit, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		}
	})
	return m.readLimit
}

// reserveMaps counts n more mappings, or refuses them when they would
// bring the process too close to the kernel's limit; what is the thing
// being mapped, for the message.
func (m *HostMemory) reserveMaps(n int, what string) error {
	held := m.maps.Add(int64(n))
	if limit := m.mapLimit(); limit > 0 && held > int64(limit-mapHeadroom) {
		m.maps.Add(-int64(n))
		return fmt.Errorf("%s needs %d more memory mappings, but this rank's windows and buffers already hold %d, near the kernel's limit of %d per process (vm.max_map_count): free the windows (w:free()) and buffers (b:free()) no longer needed, or raise the limit (sysctl vm.max_map_count)",
			what, n, held-int64(n), limit)
	}
	return nil
}

// releaseMaps uncounts n mappings.
func (m *HostMemory) releaseMaps(n int) { m.maps.Add(-int64(n)) }

// mapError adds the likely cause to an mmap that failed with ENOMEM
// while this rank held many mappings (another part of the process may
// have taken the rest).
func (m *HostMemory) mapError(err error) error {
	limit := m.mapLimit()
	if !errors.Is(err, unix.ENOMEM) || limit <= 0 || m.maps.Load() < int64(limit/2) {
		return err
	}
	return fmt.Errorf("%w (this rank holds %d memory mappings of the kernel's %d per process, vm.max_map_count: free windows and buffers no longer needed)",
		err, m.maps.Load(), limit)
}
