package shm

import (
	"bytes"

	"github.com/luacoll/luacoll/cuda"
	"github.com/luacoll/luacoll/transport"
)

// HostBackend keeps everything in host memory: shared-memory segments for
// windows, a goroutine for the stream.
type HostBackend struct {
	HostMemory
	// Oversubscribed says there are more ranks on this host than cores,
	// so waits should yield rather than spin.
	Oversubscribed bool
	// SharedProcess says other ranks are goroutines of this process: waits
	// that yield let them run.
	SharedProcess bool
}

// NewHostBackend returns the host backend of job. Its segments are
// anonymous files shared only with the peers that can map them (same
// host, or the same logical node).
func NewHostBackend(job string) *HostBackend {
	return &HostBackend{HostMemory: HostMemory{Job: job}}
}

// Name implements transport.Backend.
func (*HostBackend) Name() string { return "host" }

// Identity implements transport.Backend.
func (*HostBackend) Identity() transport.Identity { return transport.LocalIdentity("host") }

// GPUPeer implements transport.Backend.
func (*HostBackend) GPUPeer(transport.Identity) bool { return false }

// Describe implements transport.Backend: the host's memory, no libraries.
func (*HostBackend) Describe() transport.Description {
	return transport.Description{Devices: []transport.DeviceInfo{{Name: "host", Multicast: cuda.MulticastNotSupported, Mine: true}},
		Versions: map[string]string{}, MPS: "off"}
}

// NewStream implements transport.Backend.
func (b *HostBackend) NewStream(abort *transport.Abort) (transport.Stream, error) {
	return transport.NewHostStream(abort, transport.HostWaitPolicy(b.Oversubscribed, b.SharedProcess, nil)), nil
}

// Read implements transport.Backend.
func (*HostBackend) Read(dst []byte, src transport.Addr) error {
	copy(dst, transport.HostBytes(src, uint64(len(dst))))
	return nil
}

// Write implements transport.Backend.
func (*HostBackend) Write(dst transport.Addr, src []byte) error {
	copy(transport.HostBytes(dst, uint64(len(src))), src)
	return nil
}

// Fill implements transport.Backend.
func (*HostBackend) Fill(s transport.Stream, dst transport.Addr, n uint64, kind transport.FillKind, arg uint64) {
	s.Host(func() error {
		b := transport.HostBytes(dst, n)
		switch kind {
		case transport.FillConst:
			for i := range b {
				b[i] = byte(arg)
			}
		case transport.FillIotaU32:
			transport.FillIota(b, uint32(arg))
		case transport.FillRandU32:
			transport.FillRand(b, arg)
		}
		return nil
	})
}

// Checksum implements transport.Backend.
func (*HostBackend) Checksum(src transport.Addr, n uint64) (uint64, error) {
	return transport.Checksum(transport.HostBytes(src, n)), nil
}

// Equal implements transport.Backend.
func (*HostBackend) Equal(a, b transport.Addr, n uint64) (bool, error) {
	return bytes.Equal(transport.HostBytes(a, n), transport.HostBytes(b, n)), nil
}

// Close implements transport.Backend: it closes the descriptor box
// (windows are released on their own).
func (b *HostBackend) Close() error { return b.HostMemory.close() }

var _ transport.Backend = (*HostBackend)(nil)
