package transport

import (
	"context"
	"os"
	"strings"
)

// ShmDir is where POSIX shared-memory segments live on Linux. The host
// backend makes none there (see shm.HostMemory); older builds did, named
// with SegmentPrefix, and the launcher and `luacoll clean` remove
// leftovers.
const ShmDir = "/dev/shm"

// ShmDirEnv names the variable that puts the host backend's segments in
// another directory: a logical node's own (luacoll's launcher sets it for
// --nodes), so that nodes of one machine share no memory.
const ShmDirEnv = "LUACOLL_SHM_DIR"

// SegmentPrefix is how the names of job's shared-memory segments start:
// the names of the anonymous files (seen in /proc/PID/maps as
// "/memfd:luacoll-JOB-r0-s1 (deleted)") and of older builds' files in
// ShmDir.
func SegmentPrefix(job string) string { return "luacoll-" + job + "-" }

// MappedSegments lists this process's mappings of job's shared-memory
// segments (as /proc/self/maps names them): what windows not yet freed
// hold. Tests use it to find leaks.
func MappedSegments(job string) []string {
	b, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		return nil
	}
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		if i := strings.Index(line, SegmentPrefix(job)); i >= 0 {
			out = append(out, strings.TrimSpace(line[i:]))
		}
	}
	return out
}

// Region is memory local to one rank and mapped, where possible, at every
// peer. Peers[r] is rank r's region as mapped in this process (Peers[rank] ==
// Local), or 0 where r cannot be mapped.
type Region struct {
	Size  uint64
	Local Addr
	Peers []Addr
	// Keys[r] is rank r's region as a network transport registered it,
	// where this rank reaches r over the network (nil elsewhere).
	Keys []RemoteKey
	// Flat, when set, says every rank's part is mapped in one reserved
	// virtual range: Peers[r] == Flat.Base + r*Flat.Stride.
	Flat *FlatRange
	// HostShared says that the region is host memory a GPU maps, shared
	// with the peers of this host as shared memory (a CUDA window with
	// network peers): those peers' class is shm, whatever the rank's
	// topology says of their GPUs.
	HostShared bool
	// unmap, when set, drops the peer mappings only (before the owners free).
	unmap func() error
	close func() error
}

// FlatRange is the one virtual range of a symmetric region: rank r's part
// starts at Base + r*Stride, so device code reaches any peer by arithmetic.
type FlatRange struct {
	Base        Addr
	Stride      uint64 // bytes between two ranks' parts (whole granules)
	Granularity uint64 // the allocation granularity Stride is rounded to
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
	// memory the way ipc says (IPCLegacy, IPCVMM or IPCSymmetric on CUDA;
	// "" is IPCLegacy; the host backend shares POSIX shared memory whatever
	// ipc says).
	Share(ctx context.Context, ex Exchanger, topo *Topology, size uint64, ipc string) (*Region, error)
	// Alloc returns size zeroed bytes private to this rank.
	Alloc(size uint64) (*Region, error)
}
