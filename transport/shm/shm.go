// Package shm is the host backend: windows in POSIX shared memory that every
// peer on the same host maps, and the host stream.
package shm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/luacoll/luacoll/transport"
)

// HostMemory is the host backend's Memory: POSIX shared-memory segments in
// transport.ShmDir, named after the job so concurrent jobs never collide, and unlinked
// as soon as every peer has mapped them.
type HostMemory struct {
	Job string
	Dir string // transport.ShmDir when empty (tests point it elsewhere)
	seq int
}

func (m *HostMemory) dir() string {
	if m.Dir == "" {
		return transport.ShmDir
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

// Share implements transport.Memory.
func (m *HostMemory) Share(ctx context.Context, ex transport.Exchanger, topo *transport.Topology, size uint64, _ string) (*transport.Region, error) {
	rank, n := ex.Rank(), ex.Size()
	m.seq++
	name := fmt.Sprintf("%sr%d-s%d", transport.SegmentPrefix(m.Job), rank, m.seq)
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
	// Peers on another host (transport net) map nothing: the network
	// reaches them (transport.ShareNetwork).
	var localErr error
	mapped[rank], localErr = createSegment(path, pageRound(size))
	created := localErr == nil
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
	peers := make([]transport.Addr, n)
	for r, b := range mapped {
		if b != nil {
			peers[r] = transport.AddrOf(b)
		}
	}
	return transport.NewRegion(size, peers[rank], peers, nil, func() error {
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
	}), nil
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

// Alloc implements transport.Memory with private anonymous memory.
func (m *HostMemory) Alloc(size uint64) (*transport.Region, error) {
	b, err := unix.Mmap(-1, 0, int(pageRound(size)), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return nil, fmt.Errorf("allocating %d bytes: %w", size, err)
	}
	return transport.NewRegion(size, transport.AddrOf(b), nil, nil, func() error {
		if b == nil {
			return nil
		}
		err := unix.Munmap(b)
		b = nil
		return err
	}), nil
}
