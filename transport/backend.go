package transport

import (
	"bytes"
	"fmt"
)

// FillKind selects what Backend.Fill writes.
type FillKind uint8

// The fill patterns of b:fill.
const (
	FillConst   FillKind = iota // every byte = arg
	FillIotaU32                 // 32-bit words counting from arg
	FillRandU32                 // FillRand words seeded by arg
)

// ParseFill turns "const", "iota" or "rand" into a FillKind.
func ParseFill(s string) (FillKind, error) {
	switch s {
	case "const":
		return FillConst, nil
	case "iota":
		return FillIotaU32, nil
	case "rand":
		return FillRandU32, nil
	}
	return 0, fmt.Errorf("unknown fill kind %q (want const, iota or rand)", s)
}

// Backend is where a rank's memory lives and its operations run: the host,
// or a GPU. Everything above the transport is written against it.
type Backend interface {
	Memory
	// Name is "host" or "cuda:N".
	Name() string
	// Identity is what peers learn about this rank's device.
	Identity() Identity
	// GPUPeer reports whether this device can access a peer's device directly.
	GPUPeer(peer Identity) bool
	// NewStream makes the rank's stream.
	NewStream(abort *Abort) (Stream, error)
	// Read copies len(dst) bytes at src to host memory (synchronous).
	Read(dst []byte, src Addr) error
	// Write copies src to dst (synchronous).
	Write(dst Addr, src []byte) error
	// Fill enqueues a fill of n bytes at dst on s.
	Fill(s Stream, dst Addr, n uint64, kind FillKind, arg uint64)
	// Checksum computes Checksum over n bytes at src (synchronous).
	Checksum(src Addr, n uint64) (uint64, error)
	// Equal compares n bytes at a and b (synchronous).
	Equal(a, b Addr, n uint64) (bool, error)
	// Describe says which devices this rank sees and which libraries are
	// behind the backend (lc.info).
	Describe() Description
	// Close releases the device.
	Close() error
}

// Ways a CUDA window's memory is shared with the peers (the window option
// ipc).
const (
	// IPCLegacy: cuMemAlloc memory, cuIpcGetMemHandle / cuIpcOpenMemHandle.
	IPCLegacy = "legacy"
	// IPCVMM: cuMemCreate memory exported as a POSIX file descriptor,
	// passed to the peers over Unix sockets (FDBox), imported and mapped.
	IPCVMM = "vmm"
)

// Description is what a backend tells lc.info about itself.
type Description struct {
	// Devices are the devices this rank sees; Mine marks its own.
	Devices []DeviceInfo
	// Versions of the driver and libraries behind the backend, by name
	// ("cuda_driver", "nvrtc", "nccl"); a library that is missing maps to
	// "not found".
	Versions map[string]string
}

// DeviceInfo describes one device in a Description.
type DeviceInfo struct {
	Name              string // "host" or "cuda:N"
	Model             string // e.g. "NVIDIA H200"; "" on the host
	UUID, PCIBusID    string
	MemoryBytes       uint64
	ComputeCapability string // "9.0"; "" on the host
	Mine              bool   // this rank's device
}

// CPULocal is implemented by backends whose device sits nearer some CPUs
// than others.
type CPULocal interface {
	// LocalCPUList returns the CPUs nearest the device in the kernel's
	// list format ("0-15,32-47"), or "" when the system does not say.
	LocalCPUList() string
}

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

// NewHostBackend returns the host backend of job.
func NewHostBackend(job string) *HostBackend {
	return &HostBackend{HostMemory: HostMemory{Job: job}}
}

// Name implements Backend.
func (*HostBackend) Name() string { return "host" }

// Identity implements Backend.
func (*HostBackend) Identity() Identity { return LocalIdentity("host") }

// GPUPeer implements Backend.
func (*HostBackend) GPUPeer(Identity) bool { return false }

// Describe implements Backend: the host's memory, no libraries.
func (*HostBackend) Describe() Description {
	return Description{Devices: []DeviceInfo{{Name: "host", Mine: true}}, Versions: map[string]string{}}
}

// NewStream implements Backend.
func (b *HostBackend) NewStream(abort *Abort) (Stream, error) {
	return NewHostStream(abort, HostWaitPolicy(b.Oversubscribed, b.SharedProcess, nil)), nil
}

// Read implements Backend.
func (*HostBackend) Read(dst []byte, src Addr) error {
	copy(dst, HostBytes(src, uint64(len(dst))))
	return nil
}

// Write implements Backend.
func (*HostBackend) Write(dst Addr, src []byte) error {
	copy(HostBytes(dst, uint64(len(src))), src)
	return nil
}

// Fill implements Backend.
func (*HostBackend) Fill(s Stream, dst Addr, n uint64, kind FillKind, arg uint64) {
	s.Host(func() error {
		b := HostBytes(dst, n)
		switch kind {
		case FillConst:
			for i := range b {
				b[i] = byte(arg)
			}
		case FillIotaU32:
			FillIota(b, uint32(arg))
		case FillRandU32:
			FillRand(b, arg)
		}
		return nil
	})
}

// Checksum implements Backend.
func (*HostBackend) Checksum(src Addr, n uint64) (uint64, error) {
	return Checksum(HostBytes(src, n)), nil
}

// Equal implements Backend.
func (*HostBackend) Equal(a, b Addr, n uint64) (bool, error) {
	return bytes.Equal(HostBytes(a, n), HostBytes(b, n)), nil
}

// Close implements Backend.
func (*HostBackend) Close() error { return nil }

var _ Backend = (*HostBackend)(nil)
