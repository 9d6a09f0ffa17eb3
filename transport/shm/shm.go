package shm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/luacoll/luacoll/transport"
)

// HostMemory is the host backend's Memory: each rank's part of a window is
// an anonymous shared-memory file (memfd_create) that never has a name in
// the file system; its descriptor is passed to every peer over the rank's
// descriptor box (transport.FDBox, a Unix socket in the abstract
// namespace), and each peer maps it. The memory lives as long as some
// process maps it, so a rank killed at any moment, even in the middle of a
// share, leaves nothing behind.
type HostMemory struct {
	Job string
	// MemInfo is where a share reads MemAvailable before allocating
	// (/proc/meminfo when empty; tests point it elsewhere).
	MemInfo string
	// MapLimit, when set, stands for the kernel's limit on a process's
	// memory mappings (tests; see maplimit.go).
	MapLimit int
	seq      int
	box      *transport.FDBox
	// maps counts the mappings this memory holds (maplimit.go).
	maps      atomic.Int64
	limitOnce sync.Once
	readLimit int
}

// sharePassTimeout bounds the passing of descriptors once every rank has
// said it made its segment (each rank then sends and receives at once, so
// only a rank that stopped answering makes it run out).
const sharePassTimeout = 60 * time.Second

// shareStatus is what each rank publishes during Share.
type shareStatus struct {
	Err string `json:"err,omitempty"`
	// Proc and Seg, in the first exchange, name the rank's process and
	// segment: ranks of one process take each other's mapping from
	// procMaps instead of passing descriptors.
	Proc string `json:"proc,omitempty"`
	Seg  string `json:"seg,omitempty"`
}

// PageRound rounds n up to whole pages (one page for 0).
func PageRound(n uint64) uint64 {
	const page = 4096
	if n == 0 {
		return page
	}
	return (n + page - 1) &^ (page - 1)
}

// Share implements transport.Memory. Two exchanges bracket the passing of
// the descriptors, so every rank's box is open before anything is sent
// and every rank learns of any rank's failure.
func (m *HostMemory) Share(ctx context.Context, ex transport.Exchanger, topo *transport.Topology, size uint64, _ string) (*transport.Region, error) {
	rank, n := ex.Rank(), ex.Size()
	m.seq++
	tag := uint64(m.seq)
	psize := PageRound(size)
	mapped := make([][]byte, n)
	// Peers on another host (transport net) map nothing: the network
	// reaches them (transport.ShareNetwork); descriptors go to the peers
	// that can map this memory.
	peers := mappablePeers(rank, n, topo)
	reserved, localErr := m.reserveShare(rank, n, topo, size, psize)
	fd := -1
	name := fmt.Sprintf("%sr%d-s%d", transport.SegmentPrefix(m.Job), rank, m.seq)
	if localErr == nil {
		fd, localErr = m.createOwnSegment(rank, name, psize, len(peers) > 0, mapped)
	}
	if fd >= 0 {
		defer unix.Close(fd)
	}
	st := shareStatus{Proc: procMaps.id, Seg: name}
	if localErr != nil {
		st.Err = localErr.Error()
	}
	all, err := exchangeStatus(ctx, ex, st)
	if err == nil {
		err = firstRemoteError(all, "creating shared memory")
	}
	if err == nil {
		peers, localErr = m.sameProcess(all, peers, psize, mapped)
	}
	// The second exchange is every rank's (n > 1), whether or not it has
	// peers to pass descriptors to: the exchanges must stay in step.
	if err == nil && n > 1 {
		err = m.passDescriptors(ctx, ex, peers, tag, fd, psize, mapped, localErr)
	}
	if m.box != nil {
		// Every send of this share ended before the second exchange: a
		// descriptor left over (a failure cut the receiving short) is
		// closed, so it does not keep a peer's memory alive.
		m.box.Discard(tag)
	}
	if err != nil {
		_ = unmapSegments(mapped)
		if reserved {
			m.releaseMaps(n)
		}
		return nil, err
	}
	addrs := make([]transport.Addr, n)
	for r, b := range mapped {
		if b != nil {
			addrs[r] = transport.AddrOf(b)
		}
	}
	return transport.NewRegion(size, addrs[rank], addrs, nil, func() error {
		m.releaseMaps(n)
		return unmapSegments(mapped)
	}), nil
}

// unmapSegments unmaps every segment mapped (indexed by rank) and clears
// its entry.
func unmapSegments(mapped [][]byte) error {
	var errs []error
	for i, b := range mapped {
		if b != nil {
			if e := procMaps.unmap(b); e != nil {
				errs = append(errs, fmt.Errorf("munmap rank %d: %w", i, e))
			}
			mapped[i] = nil
		}
	}
	return errors.Join(errs...)
}

// mappablePeers returns the other ranks that can map this rank's memory,
// starting after rank.
func mappablePeers(rank, n int, topo *transport.Topology) []int {
	peers := make([]int, 0, n-1)
	for i := 1; i < n; i++ {
		if p := (rank + i) % n; topo.Mappable(p) {
			peers = append(peers, p)
		}
	}
	return peers
}

// reserveShare checks that the segments of every rank of this host fit
// its memory, then reserves the window's mappings; it reports whether
// they were reserved.
func (m *HostMemory) reserveShare(rank, n int, topo *transport.Topology, size, psize uint64) (reserved bool, err error) {
	// The segments of every rank of this host must fit its memory:
	// refused here, in the first exchange, on every rank at once.
	here := 0
	for r := range n {
		if r == rank || topo.Mappable(r) {
			here++
		}
	}
	if err := transport.CheckMemoryFit(psize, here, m.MemInfo); err != nil {
		return false, err
	}
	// Every mapping the window takes (its own segment and each peer's) is
	// counted up front: one near the kernel's limit is refused here.
	if err := m.reserveMaps(n, fmt.Sprintf("a window of %d bytes", size)); err != nil {
		return false, err
	}
	return true, nil
}

// createOwnSegment opens the descriptor box when needBox and it is not
// open yet, then creates and maps this rank's segment (mapped[rank]); it
// returns the segment's descriptor, or -1.
func (m *HostMemory) createOwnSegment(rank int, name string, psize uint64, needBox bool, mapped [][]byte) (int, error) {
	if m.box == nil && needBox {
		var err error
		if m.box, err = transport.OpenFDBox(m.Job, rank); err != nil {
			return -1, err
		}
	}
	fd, b, err := CreateSegment(name, psize)
	mapped[rank] = b
	if err != nil {
		return fd, m.mapError(err)
	}
	procMaps.own(name, fd, b)
	return fd, nil
}

// passDescriptors passes this rank's segment (fd) to peers and maps
// theirs (unless localErr, the failure so far, is set), then exchanges
// every rank's outcome: it returns the first failure of any rank.
func (m *HostMemory) passDescriptors(ctx context.Context, ex transport.Exchanger, peers []int, tag uint64, fd int,
	psize uint64, mapped [][]byte, localErr error) error {
	if len(peers) > 0 {
		perr := m.box.Pass(ctx, peers, tag, fd, sharePassTimeout, func(p, pfd int) error {
			b, e := procMaps.peer(pfd, psize)
			if e != nil {
				return fmt.Errorf("mapping rank %d's segment: %w", p, m.mapError(e))
			}
			mapped[p] = b
			return nil
		})
		if localErr == nil {
			localErr = perr
		}
	}
	st := shareStatus{}
	if localErr != nil {
		st.Err = localErr.Error()
	}
	all, err := exchangeStatus(ctx, ex, st)
	if err == nil {
		err = firstRemoteError(all, "mapping shared memory")
	}
	return err
}

// close closes the descriptor box (the backend's Close).
func (m *HostMemory) close() error {
	if m.box == nil {
		return nil
	}
	err := m.box.Close()
	m.box = nil
	return err
}

func exchangeStatus(ctx context.Context, ex transport.Exchanger, st shareStatus) ([]shareStatus, error) {
	b, _ := json.Marshal(st)
	raw, err := ex.AllGather(ctx, b)
	if err != nil {
		return nil, err
	}
	out := make([]shareStatus, len(raw))
	for r, x := range raw {
		if err := json.Unmarshal(x, &out[r]); err != nil {
			return nil, fmt.Errorf("status from rank %d: %w", r, err)
		}
	}
	return out, nil
}

func firstRemoteError(all []shareStatus, what string) error {
	// Ranks that failed the same way (a window too large for the host,
	// say) are named together.
	var order []string
	ranks := map[string][]string{}
	for r, s := range all {
		if s.Err != "" {
			if ranks[s.Err] == nil {
				order = append(order, s.Err)
			}
			ranks[s.Err] = append(ranks[s.Err], fmt.Sprint(r))
		}
	}
	if len(order) == 0 {
		return nil
	}
	msgs := make([]string, len(order))
	for i, m := range order {
		who := "rank "
		if len(ranks[m]) > 1 {
			who = "ranks "
		}
		msgs[i] = who + strings.Join(ranks[m], ",") + ": " + m
	}
	return fmt.Errorf("%s: %s", what, strings.Join(msgs, "; "))
}

// CreateSegment makes an anonymous shared-memory file of size bytes
// (named for /proc/PID/maps only) and maps it; the caller closes fd.
func CreateSegment(name string, size uint64) (fd int, b []byte, err error) {
	fd, err = unix.MemfdCreate(name, unix.MFD_CLOEXEC)
	if err != nil {
		return -1, nil, fmt.Errorf("memfd_create %s: %w", name, err)
	}
	// Reserve the pages now: a sparse segment would fault (SIGBUS) on the
	// first touch of a page there is no memory for.
	if err := unix.Fallocate(fd, 0, 0, int64(size)); err != nil {
		_ = unix.Close(fd)
		if errors.Is(err, unix.ENOSPC) || errors.Is(err, unix.ENOMEM) {
			return -1, nil, fmt.Errorf("%d bytes of shared memory for %s do not fit in this host's memory: use a smaller window", size, name)
		}
		return -1, nil, fmt.Errorf("reserve %d bytes for %s: %w", size, name, err)
	}
	b, err = unix.Mmap(fd, 0, int(size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		_ = unix.Close(fd)
		return -1, nil, fmt.Errorf("mmap %s (%d bytes): %w", name, size, err)
	}
	return fd, b, nil
}

// MapSegment maps a peer's segment from the descriptor it passed.
func MapSegment(fd int, size uint64) ([]byte, error) {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, err
	}
	if uint64(st.Size) < size {
		return nil, fmt.Errorf("the segment holds %d bytes, want %d", st.Size, size)
	}
	return unix.Mmap(fd, 0, int(size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
}

// Alloc implements transport.Memory with private anonymous memory.
func (m *HostMemory) Alloc(size uint64) (*transport.Region, error) {
	if err := m.reserveMaps(1, fmt.Sprintf("a buffer of %d bytes", size)); err != nil {
		return nil, err
	}
	b, err := unix.Mmap(-1, 0, int(PageRound(size)), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		m.releaseMaps(1)
		return nil, fmt.Errorf("allocating %d bytes: %w", size, m.mapError(err))
	}
	return transport.NewRegion(size, transport.AddrOf(b), nil, nil, func() error {
		if b == nil {
			return nil
		}
		m.releaseMaps(1)
		err := unix.Munmap(b)
		b = nil
		return err
	}), nil
}
