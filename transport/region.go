package transport

import "context"

// ShmDir is where POSIX shared-memory segments live on Linux.
const ShmDir = "/dev/shm"

// ShmDirEnv names the variable that puts the host backend's segments in
// another directory: a logical node's own (luacoll's launcher sets it for
// --nodes), so that nodes of one machine share no memory.
const ShmDirEnv = "LUACOLL_SHM_DIR"

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
	// Keys[r] is rank r's region as a network transport registered it,
	// where this rank reaches r over the network (nil elsewhere).
	Keys []RemoteKey
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
