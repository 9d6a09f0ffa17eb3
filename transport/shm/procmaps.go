package shm

import (
	"fmt"
	"os"
	"sync"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Ranks that share one process (luacoll check, tests) each map every
// other rank's segment of a window: ranks² of the kernel's mappings, past
// vm.max_map_count at 256 ranks. A segment is mapped once per process
// instead, and each rank that maps it again takes a reference. The table
// is process-wide because the kernel's mapping table is.
var procMaps = &segMaps{byKey: map[segKey]*segMap{}, byAddr: map[uintptr]*segMap{}, byName: map[string]*segMap{},
	id: fmt.Sprintf("%d-%d", os.Getpid(), time.Now().UnixNano())}

type segKey struct{ dev, ino uint64 }

type segMap struct {
	key  segKey
	name string
	b    []byte
	refs int
}

type segMaps struct {
	mu     sync.Mutex
	byKey  map[segKey]*segMap
	byAddr map[uintptr]*segMap
	byName map[string]*segMap
	// id names this process to the ranks it shares windows with.
	id string
}

func keyOf(fd int) (segKey, bool) {
	var st unix.Stat_t
	if unix.Fstat(fd, &st) != nil {
		return segKey{}, false
	}
	return segKey{dev: uint64(st.Dev), ino: st.Ino}, true
}

func addr(b []byte) uintptr { return uintptr(unsafe.Pointer(&b[0])) }

// own registers a rank's own mapping b of segment fd, made as name.
func (s *segMaps) own(name string, fd int, b []byte) {
	k, ok := keyOf(fd)
	if !ok || len(b) == 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, dup := s.byKey[k]; dup {
		return
	}
	e := &segMap{key: k, name: name, b: b, refs: 1}
	s.byKey[k], s.byAddr[addr(b)], s.byName[name] = e, e, e
}

// named takes a reference to this process's mapping of the segment made
// as name, of size bytes; nil if there is none.
func (s *segMaps) named(name string, size uint64) []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.byName[name]
	if e == nil || uint64(len(e.b)) != size {
		return nil
	}
	e.refs++
	return e.b
}

// peer maps a peer's segment from the descriptor it passed, or takes a
// reference to this process's mapping of it.
func (s *segMaps) peer(fd int, size uint64) ([]byte, error) {
	k, ok := keyOf(fd)
	if ok {
		s.mu.Lock()
		if e := s.byKey[k]; e != nil && uint64(len(e.b)) == size {
			e.refs++
			s.mu.Unlock()
			return e.b, nil
		}
		s.mu.Unlock()
	}
	b, err := MapSegment(fd, size)
	if err != nil || !ok || len(b) == 0 {
		return b, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, dup := s.byKey[k]; !dup {
		e := &segMap{key: k, b: b, refs: 1}
		s.byKey[k], s.byAddr[addr(b)] = e, e
	}
	return b, nil
}

// unmap drops a reference to b, unmapping it with the last one (or at
// once when b is not in the table).
func (s *segMaps) unmap(b []byte) error {
	if len(b) == 0 {
		return nil
	}
	s.mu.Lock()
	e := s.byAddr[addr(b)]
	if e != nil {
		e.refs--
		if e.refs > 0 {
			s.mu.Unlock()
			return nil
		}
		delete(s.byAddr, addr(b))
		delete(s.byKey, e.key)
		if e.name != "" {
			delete(s.byName, e.name)
		}
	}
	s.mu.Unlock()
	return unix.Munmap(b)
}

// sameProcess maps, from procMaps, the segments of the peers that are
// ranks of this process (their Proc, in the first exchange, is this
// process's), and returns the other peers, whose descriptors go through
// the box. Every rank of the process decides alike for every pair.
func (m *HostMemory) sameProcess(all []shareStatus, peers []int, size uint64, mapped [][]byte) ([]int, error) {
	var rest []int
	var err error
	for _, p := range peers {
		if all[p].Proc != procMaps.id || all[p].Seg == "" {
			rest = append(rest, p)
			continue
		}
		if b := procMaps.named(all[p].Seg, size); b != nil {
			mapped[p] = b
		} else if err == nil {
			err = fmt.Errorf("rank %d's segment %s is not mapped in this process", p, all[p].Seg)
		}
	}
	return rest, err
}
