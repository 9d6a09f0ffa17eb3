package transport

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// ShmDir is where POSIX shared-memory segments live on Linux.
const ShmDir = "/dev/shm"

// SegmentPrefix is the file-name prefix of every shared-memory segment of
// job; the launcher removes leftovers with it after a job ends.
func SegmentPrefix(job string) string { return "luacoll-" + job + "-" }

// Region is memory local to one rank and mapped, where possible, at every
// peer. Peers[r] is rank r's region as mapped in this process (Peers[rank] ==
// Local), or 0 where r cannot be mapped.
type Region struct {
	Size  uint64
	Local Addr
	Peers []Addr
	// unmap, when set, drops the peer mappings only (before the owners free).
	unmap func() error
	close func() error
}

// NewRegion describes memory a Memory implementation allocated: unmap
// (optional) drops the peer mappings, close releases everything.
func NewRegion(size uint64, local Addr, peers []Addr, unmap, close func() error) *Region {
	return &Region{Size: size, Local: local, Peers: peers, unmap: unmap, close: close}
}

// UnmapPeers drops the mappings of peers' memory, keeping this rank's
// own; collective frees call it, meet, then Close, so that no rank frees
// memory a peer still maps.
func (r *Region) UnmapPeers() error {
	if r.unmap == nil {
		return nil
	}
	err := r.unmap()
	r.unmap = nil
	return err
}

// Close unmaps the region and every peer mapping. It is idempotent.
func (r *Region) Close() error {
	if r.close == nil {
		return nil
	}
	uerr := r.UnmapPeers()
	err := r.close()
	r.close = nil
	if err == nil {
		err = uerr
	}
	return err
}

// Memory allocates the memory windows are built from.
type Memory interface {
	// Share is collective: it allocates size zeroed bytes on this rank and
	// maps every peer's region that topo says can be mapped, sharing the
	// memory the way ipc says (IPCLegacy or IPCVMM on CUDA; "" is
	// IPCLegacy; the host backend shares POSIX shared memory whatever ipc
	// says).
	Share(ctx context.Context, ex Exchanger, topo *Topology, size uint64, ipc string) (*Region, error)
	// Alloc returns size zeroed bytes private to this rank.
	Alloc(size uint64) (*Region, error)
}

// HostMemory is the host backend's Memory: POSIX shared-memory segments in
// ShmDir, named after the job so concurrent jobs never collide, and unlinked
// as soon as every peer has mapped them.
type HostMemory struct {
	Job string
	Dir string // ShmDir when empty (tests point it elsewhere)
	seq int
}

func (m *HostMemory) dir() string {
	if m.Dir == "" {
		return ShmDir
	}
	return m.Dir
}

// shareStatus is what each rank publishes during Share.
type shareStatus struct {
	Name string `json:"name,omitempty"`
	Err  string `json:"err,omitempty"`
}

func pageRound(n uint64) uint64 {
	const page = 4096
	if n == 0 {
		return page
	}
	return (n + page - 1) &^ (page - 1)
}

// Share implements Memory.
func (m *HostMemory) Share(ctx context.Context, ex Exchanger, topo *Topology, size uint64, _ string) (*Region, error) {
	rank, n := ex.Rank(), ex.Size()
	m.seq++
	name := fmt.Sprintf("%sr%d-s%d", SegmentPrefix(m.Job), rank, m.seq)
	path := filepath.Join(m.dir(), name)
	mapped := make([][]byte, n)
	unmapAll := func() {
		for i, b := range mapped {
			if b != nil {
				_ = unix.Munmap(b)
				mapped[i] = nil
			}
		}
	}
	created := false
	var localErr error
	for r, k := range topo.Kinds {
		if k == KindNet {
			localErr = fmt.Errorf("rank %d is on another host (transport net), which this build cannot reach", r)
			break
		}
	}
	if localErr == nil {
		mapped[rank], localErr = createSegment(path, pageRound(size))
		created = localErr == nil
	}
	st := shareStatus{Name: name}
	if localErr != nil {
		st = shareStatus{Err: localErr.Error()}
	}
	all, err := exchangeStatus(ctx, ex, st)
	if err == nil {
		err = firstRemoteError(all, "creating shared memory")
	}
	if err == nil {
		// Map every same-host peer's segment.
		for r, s := range all {
			if r == rank || !topo.Mappable(r) {
				continue
			}
			b, e := mapSegment(filepath.Join(m.dir(), s.Name), pageRound(size))
			if e != nil {
				localErr = fmt.Errorf("mapping rank %d's segment: %w", r, e)
				break
			}
			mapped[r] = b
		}
		st = shareStatus{}
		if localErr != nil {
			st.Err = localErr.Error()
		}
		all, err = exchangeStatus(ctx, ex, st)
		if err == nil {
			err = firstRemoteError(all, "mapping shared memory")
		}
	}
	// Every peer has mapped it (or we are failing): the name is no longer needed.
	if created {
		_ = os.Remove(path)
	}
	if err != nil {
		unmapAll()
		return nil, err
	}
	reg := &Region{Size: size, Peers: make([]Addr, n)}
	for r, b := range mapped {
		if b != nil {
			reg.Peers[r] = addrOf(b)
		}
	}
	reg.Local = reg.Peers[rank]
	reg.close = func() error {
		var errs []error
		for i, b := range mapped {
			if b != nil {
				if e := unix.Munmap(b); e != nil {
					errs = append(errs, fmt.Errorf("munmap rank %d: %w", i, e))
				}
				mapped[i] = nil
			}
		}
		return errors.Join(errs...)
	}
	return reg, nil
}

func exchangeStatus(ctx context.Context, ex Exchanger, st shareStatus) ([]shareStatus, error) {
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
	var msgs []string
	for r, s := range all {
		if s.Err != "" {
			msgs = append(msgs, fmt.Sprintf("rank %d: %s", r, s.Err))
		}
	}
	if len(msgs) == 0 {
		return nil
	}
	return fmt.Errorf("%s: %s", what, strings.Join(msgs, "; "))
}

func createSegment(path string, size uint64) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, fmt.Errorf("create %s: %w", path, err)
	}
	defer f.Close()
	// Reserve the pages now: a sparse segment would fault (SIGBUS) on the
	// first touch of a page that /dev/shm has no room for.
	if err := unix.Fallocate(int(f.Fd()), 0, 0, int64(size)); err != nil {
		_ = os.Remove(path)
		if errors.Is(err, unix.ENOSPC) {
			var st unix.Statfs_t
			free := "?"
			if unix.Statfs(filepath.Dir(path), &st) == nil {
				free = fmt.Sprint(st.Bavail * uint64(st.Bsize))
			}
			return nil, fmt.Errorf("%d bytes do not fit in %s (%s bytes free): use a smaller window or a larger %s",
				size, filepath.Dir(path), free, filepath.Dir(path))
		}
		return nil, fmt.Errorf("reserve %d bytes for %s: %w", size, path, err)
	}
	b, err := unix.Mmap(int(f.Fd()), 0, int(size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		_ = os.Remove(path)
		return nil, fmt.Errorf("mmap %s (%d bytes): %w", path, size, err)
	}
	return b, nil
}

func mapSegment(path string, size uint64) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if uint64(fi.Size()) < size {
		return nil, fmt.Errorf("%s holds %d bytes, want %d", path, fi.Size(), size)
	}
	return unix.Mmap(int(f.Fd()), 0, int(size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
}

// Alloc implements Memory with private anonymous memory.
func (m *HostMemory) Alloc(size uint64) (*Region, error) {
	b, err := unix.Mmap(-1, 0, int(pageRound(size)), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return nil, fmt.Errorf("allocating %d bytes: %w", size, err)
	}
	reg := &Region{Size: size, Local: addrOf(b)}
	reg.close = func() error {
		if b == nil {
			return nil
		}
		err := unix.Munmap(b)
		b = nil
		return err
	}
	return reg, nil
}
