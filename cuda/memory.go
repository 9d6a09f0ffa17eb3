package cuda

/*
#include "lc_cuda.h"
*/
import "C"

import (
	"fmt"
	"unsafe"
)

// DevicePtr is a device virtual address (CUdeviceptr).
type DevicePtr uint64

// Add returns p advanced by off bytes.
func (p DevicePtr) Add(off uint64) DevicePtr { return p + DevicePtr(off) }

// MemAlloc allocates n bytes of device memory in the current context.
func (d *Driver) MemAlloc(n uint64) (DevicePtr, error) {
	var p C.lc_dptr
	if r := C.lc_cuMemAlloc(d.fn[symMemAlloc], &p, C.size_t(n)); r != 0 {
		return 0, d.fail(r, fmt.Sprintf("cuMemAlloc(%d)", n))
	}
	return DevicePtr(p), nil
}

// MemFree frees memory from MemAlloc.
func (d *Driver) MemFree(p DevicePtr) error {
	if r := C.lc_cuMemFree(d.fn[symMemFree], C.lc_dptr(p)); r != 0 {
		return d.fail(r, fmt.Sprintf("cuMemFree(%#x)", uint64(p)))
	}
	return nil
}

// MemsetD8Async sets n bytes at p to v, ordered on s.
func (d *Driver) MemsetD8Async(p DevicePtr, v byte, n uint64, s *Stream) error {
	if r := C.lc_cuMemsetD8Async(d.fn[symMemsetD8Async], C.lc_dptr(p), C.uchar(v), C.size_t(n), s.handle()); r != 0 {
		return d.fail(r, fmt.Sprintf("cuMemsetD8Async(%#x, %d, %d)", uint64(p), v, n))
	}
	return nil
}

// MemcpyAsync copies n bytes between any two unified addresses (device,
// peer-mapped or host-mapped), ordered on s.
func (d *Driver) MemcpyAsync(dst, src DevicePtr, n uint64, s *Stream) error {
	if r := C.lc_cuMemcpyAsync(d.fn[symMemcpyAsync], C.lc_dptr(dst), C.lc_dptr(src), C.size_t(n), s.handle()); r != 0 {
		return d.fail(r, fmt.Sprintf("cuMemcpyAsync(%#x, %#x, %d)", uint64(dst), uint64(src), n))
	}
	return nil
}

// MemcpyHtoD copies src to device memory at dst and returns when done.
func (d *Driver) MemcpyHtoD(dst DevicePtr, src []byte) error {
	if len(src) == 0 {
		return nil
	}
	if r := C.lc_cuMemcpyHtoD(d.fn[symMemcpyHtoD], C.lc_dptr(dst), unsafe.Pointer(&src[0]), C.size_t(len(src))); r != 0 {
		return d.fail(r, fmt.Sprintf("cuMemcpyHtoD(%#x, %d)", uint64(dst), len(src)))
	}
	return nil
}

// MemcpyDtoH copies len(dst) bytes from device memory at src and returns
// when done.
func (d *Driver) MemcpyDtoH(dst []byte, src DevicePtr) error {
	if len(dst) == 0 {
		return nil
	}
	if r := C.lc_cuMemcpyDtoH(d.fn[symMemcpyDtoH], unsafe.Pointer(&dst[0]), C.lc_dptr(src), C.size_t(len(dst))); r != 0 {
		return d.fail(r, fmt.Sprintf("cuMemcpyDtoH(%#x, %d)", uint64(src), len(dst)))
	}
	return nil
}

// MemcpyHtoDAsync copies n bytes from host memory at src to dst, ordered on
// s. src must stay valid until the copy completes: use page-locked memory
// from MemHostAlloc (Go memory may only be passed if the caller keeps it
// alive and pinned until the stream is synchronized).
func (d *Driver) MemcpyHtoDAsync(dst DevicePtr, src unsafe.Pointer, n uint64, s *Stream) error {
	if r := C.lc_cuMemcpyHtoDAsync(d.fn[symMemcpyHtoDAsync], C.lc_dptr(dst), src, C.size_t(n), s.handle()); r != 0 {
		return d.fail(r, fmt.Sprintf("cuMemcpyHtoDAsync(%#x, %d)", uint64(dst), n))
	}
	return nil
}

// MemcpyDtoHAsync copies n bytes from src to host memory at dst, ordered on
// s. The same lifetime rule as MemcpyHtoDAsync applies to dst.
func (d *Driver) MemcpyDtoHAsync(dst unsafe.Pointer, src DevicePtr, n uint64, s *Stream) error {
	if r := C.lc_cuMemcpyDtoHAsync(d.fn[symMemcpyDtoHAsync], dst, C.lc_dptr(src), C.size_t(n), s.handle()); r != 0 {
		return d.fail(r, fmt.Sprintf("cuMemcpyDtoHAsync(%#x, %d)", uint64(src), n))
	}
	return nil
}

// MemcpyPeerAsync copies n bytes from src in srcCtx to dst in dstCtx,
// ordered on s (cuMemcpyPeerAsync).
func (d *Driver) MemcpyPeerAsync(dst DevicePtr, dstCtx *Context, src DevicePtr, srcCtx *Context, n uint64, s *Stream) error {
	if r := C.lc_cuMemcpyPeerAsync(d.fn[symMemcpyPeerAsync], C.lc_dptr(dst), dstCtx.h, C.lc_dptr(src), srcCtx.h, C.size_t(n), s.handle()); r != 0 {
		return d.fail(r, fmt.Sprintf("cuMemcpyPeerAsync(device %d %#x <- device %d %#x, %d)", dstCtx.dev, uint64(dst), srcCtx.dev, uint64(src), n))
	}
	return nil
}

// HostAllocFlags are the CU_MEMHOSTALLOC_* flags.
type HostAllocFlags uint32

const (
	// HostAllocPortable makes the memory pinned for every context.
	HostAllocPortable HostAllocFlags = 0x1
	// HostAllocDeviceMap maps the memory into the device address space.
	HostAllocDeviceMap HostAllocFlags = 0x2
	// HostAllocWriteCombined allocates write-combined memory.
	HostAllocWriteCombined HostAllocFlags = 0x4
)

// MemHostAlloc allocates n bytes of page-locked host memory
// (cuMemHostAlloc). Free it with MemFreeHost.
func (d *Driver) MemHostAlloc(n uint64, flags HostAllocFlags) (unsafe.Pointer, error) {
	o := C.lc_cuMemHostAlloc(d.fn[symMemHostAlloc], C.size_t(n), C.uint(flags))
	if o.r != 0 {
		return nil, d.fail(o.r, fmt.Sprintf("cuMemHostAlloc(%d, %#x)", n, uint32(flags)))
	}
	return o.h, nil
}

// MemHostGetDevicePointer returns the device address of memory from
// MemHostAlloc with HostAllocDeviceMap.
func (d *Driver) MemHostGetDevicePointer(host unsafe.Pointer) (DevicePtr, error) {
	var p C.lc_dptr
	if r := C.lc_cuMemHostGetDevicePointer(d.fn[symMemHostGetDevicePointer], &p, host); r != 0 {
		return 0, d.fail(r, "cuMemHostGetDevicePointer")
	}
	return DevicePtr(p), nil
}

// MemFreeHost frees memory from MemHostAlloc.
func (d *Driver) MemFreeHost(host unsafe.Pointer) error {
	if r := C.lc_cuMemFreeHost(d.fn[symMemFreeHost], host); r != 0 {
		return d.fail(r, "cuMemFreeHost")
	}
	return nil
}

// HostRegister flags (CU_MEMHOSTREGISTER_*).
const (
	// HostRegisterPortable pins the memory for every context.
	HostRegisterPortable HostAllocFlags = 0x1
	// HostRegisterDeviceMap maps the memory into the device address space.
	HostRegisterDeviceMap HostAllocFlags = 0x2
)

// MemHostRegister page-locks n bytes of existing host memory at p (a
// shared-memory mapping, say) and maps it for the device
// (cuMemHostRegister); undo it with MemHostUnregister before unmapping.
func (d *Driver) MemHostRegister(p unsafe.Pointer, n uint64, flags HostAllocFlags) error {
	if err := d.need(symMemHostRegister); err != nil {
		return err
	}
	if r := C.lc_cuMemHostRegister(d.fn[symMemHostRegister], p, C.size_t(n), C.uint(flags)); r != 0 {
		return d.fail(r, fmt.Sprintf("cuMemHostRegister(%p, %d, %#x)", p, n, uint32(flags)))
	}
	return nil
}

// MemHostUnregister undoes MemHostRegister.
func (d *Driver) MemHostUnregister(p unsafe.Pointer) error {
	if err := d.need(symMemHostUnregister); err != nil {
		return err
	}
	if r := C.lc_cuMemHostUnregister(d.fn[symMemHostUnregister], p); r != 0 {
		return d.fail(r, "cuMemHostUnregister")
	}
	return nil
}

// MappedMem is page-locked host memory mapped into the device address
// space: the CPU writes abort flags and reads error records through Host,
// kernels use Dev.
type MappedMem struct {
	d    *Driver
	Host unsafe.Pointer
	Dev  DevicePtr
	Size uint64
}

// AllocMapped allocates n zeroed bytes of portable, device-mapped host
// memory (cuMemHostAlloc with DEVICEMAP|PORTABLE, then
// cuMemHostGetDevicePointer).
func (d *Driver) AllocMapped(n uint64) (*MappedMem, error) {
	h, err := d.MemHostAlloc(n, HostAllocDeviceMap|HostAllocPortable)
	if err != nil {
		return nil, err
	}
	clear(unsafe.Slice((*byte)(h), n))
	p, err := d.MemHostGetDevicePointer(h)
	if err != nil {
		_ = d.MemFreeHost(h)
		return nil, err
	}
	return &MappedMem{d: d, Host: h, Dev: p, Size: n}, nil
}

// Bytes returns the host view of m. Memory the device writes concurrently
// should be read with sync/atomic instead.
func (m *MappedMem) Bytes() []byte { return unsafe.Slice((*byte)(m.Host), m.Size) }

// Free releases m.
func (m *MappedMem) Free() error { return m.d.MemFreeHost(m.Host) }
