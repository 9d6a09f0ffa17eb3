package transport

import "fmt"

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
	// IPCSymmetric: VMM memory of the same size on every rank, each rank
	// mapping every part into one reserved range at Base + rank*Stride
	// (Region.Flat): a symmetric window.
	IPCSymmetric = "symmetric"
)

// SymmetricCapable is a backend that can make symmetric regions.
type SymmetricCapable interface {
	// SymmetricSupport says whether this rank can map a symmetric region
	// with the peers of topo, and if not, why.
	SymmetricSupport(topo *Topology) (bool, string)
}

// Description is what a backend tells lc.info about itself.
type Description struct {
	// Devices are the devices this rank sees; Mine marks its own.
	Devices []DeviceInfo
	// Versions of the driver and libraries behind the backend, by name
	// ("cuda_driver", "nvrtc", "nccl"); a library that is missing maps to
	// "not found".
	Versions map[string]string
	// MPS says whether this rank's device contexts go through an MPS
	// server: "on", "off", or "unknown" (a driver that does not say).
	MPS string
}

// DeviceInfo describes one device in a Description.
type DeviceInfo struct {
	Name              string // "host" or "cuda:N"
	Model             string // e.g. "NVIDIA H200"; "" on the host
	UUID, PCIBusID    string
	MemoryBytes       uint64
	ComputeCapability string // "9.0"; "" on the host
	// Multicast is cuda.MulticastSupported ("supported, not used") or
	// cuda.MulticastNotSupported; luacoll never creates multicast objects.
	Multicast string
	Mine      bool // this rank's device
}

// CPULocal is implemented by backends whose device sits nearer some CPUs
// than others.
type CPULocal interface {
	// LocalCPUList returns the CPUs nearest the device in the kernel's
	// list format ("0-15,32-47"), or "" when the system does not say.
	LocalCPUList() string
}
