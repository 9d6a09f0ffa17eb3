package cuda

/*
#include "lc_cuda.h"
*/
import "C"

import (
	"fmt"
	"unsafe"
)

// MemHandle is a VMM physical allocation (CUmemGenericAllocationHandle).
type MemHandle uint64

// memHandleTypePosixFD is CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR.
const memHandleTypePosixFD = 0x1

// GranularityFlag is a CUmemAllocationGranularity_flags value.
type GranularityFlag int

const (
	// GranularityMinimum is the smallest allowed size/alignment.
	GranularityMinimum GranularityFlag = 0
	// GranularityRecommended is the size/alignment for best performance.
	GranularityRecommended GranularityFlag = 1
)

// MemGetAllocationGranularity returns the granularity of pinned device
// allocations on dev that can be exported as POSIX file descriptors.
func (d *Driver) MemGetAllocationGranularity(dev Device, flag GranularityFlag) (uint64, error) {
	if err := d.need(symMemGetAllocationGranularity); err != nil {
		return 0, err
	}
	var g C.size_t
	if r := C.lc_cuMemGetAllocationGranularity(d.fn[symMemGetAllocationGranularity], &g, C.lc_dev(dev), memHandleTypePosixFD, C.int(flag)); r != 0 {
		return 0, d.fail(r, fmt.Sprintf("cuMemGetAllocationGranularity(device %d, %d)", dev, flag))
	}
	return uint64(g), nil
}

// MemCreate creates size bytes of pinned physical memory on dev that can be
// exported as a POSIX file descriptor (cuMemCreate with
// CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR). size must be a multiple of the
// granularity.
func (d *Driver) MemCreate(dev Device, size uint64) (MemHandle, error) {
	if err := d.need(symMemCreate); err != nil {
		return 0, err
	}
	var h C.lc_memhandle
	if r := C.lc_cuMemCreate(d.fn[symMemCreate], &h, C.size_t(size), C.lc_dev(dev), memHandleTypePosixFD); r != 0 {
		return 0, d.fail(r, fmt.Sprintf("cuMemCreate(%d, device %d)", size, dev))
	}
	return MemHandle(h), nil
}

// MemExportToFD exports h as a file descriptor that another process can
// import (after receiving it over a Unix socket). The caller owns the fd.
func (d *Driver) MemExportToFD(h MemHandle) (int, error) {
	if err := d.need(symMemExportToShareableHandle); err != nil {
		return -1, err
	}
	var fd C.int
	if r := C.lc_cuMemExportToFD(d.fn[symMemExportToShareableHandle], &fd, C.lc_memhandle(h), memHandleTypePosixFD); r != 0 {
		return -1, d.fail(r, fmt.Sprintf("cuMemExportToShareableHandle(%#x, POSIX_FILE_DESCRIPTOR)", uint64(h)))
	}
	return int(fd), nil
}

// MemImportFromFD imports an allocation exported by MemExportToFD. The fd
// stays owned by the caller.
func (d *Driver) MemImportFromFD(fd int) (MemHandle, error) {
	if err := d.need(symMemImportFromShareableHandle); err != nil {
		return 0, err
	}
	var h C.lc_memhandle
	if r := C.lc_cuMemImportFromFD(d.fn[symMemImportFromShareableHandle], &h, C.int(fd), memHandleTypePosixFD); r != 0 {
		return 0, d.fail(r, fmt.Sprintf("cuMemImportFromShareableHandle(fd %d, POSIX_FILE_DESCRIPTOR)", fd))
	}
	return MemHandle(h), nil
}

// MemAddressReserve reserves size bytes of device virtual address space.
func (d *Driver) MemAddressReserve(size, alignment uint64) (DevicePtr, error) {
	if err := d.need(symMemAddressReserve); err != nil {
		return 0, err
	}
	var p C.lc_dptr
	if r := C.lc_cuMemAddressReserve(d.fn[symMemAddressReserve], &p, C.size_t(size), C.size_t(alignment)); r != 0 {
		return 0, d.fail(r, fmt.Sprintf("cuMemAddressReserve(%d, %d)", size, alignment))
	}
	return DevicePtr(p), nil
}

// MemAddressFree returns a reservation from MemAddressReserve.
func (d *Driver) MemAddressFree(p DevicePtr, size uint64) error {
	if err := d.need(symMemAddressFree); err != nil {
		return err
	}
	if r := C.lc_cuMemAddressFree(d.fn[symMemAddressFree], C.lc_dptr(p), C.size_t(size)); r != 0 {
		return d.fail(r, fmt.Sprintf("cuMemAddressFree(%#x, %d)", uint64(p), size))
	}
	return nil
}

// MemMap maps size bytes of h, from offset, at the reserved address p.
func (d *Driver) MemMap(p DevicePtr, size, offset uint64, h MemHandle) error {
	if err := d.need(symMemMap); err != nil {
		return err
	}
	if r := C.lc_cuMemMap(d.fn[symMemMap], C.lc_dptr(p), C.size_t(size), C.size_t(offset), C.lc_memhandle(h)); r != 0 {
		return d.fail(r, fmt.Sprintf("cuMemMap(%#x, %d, %d, %#x)", uint64(p), size, offset, uint64(h)))
	}
	return nil
}

// MemUnmap unmaps the range [p, p+size).
func (d *Driver) MemUnmap(p DevicePtr, size uint64) error {
	if err := d.need(symMemUnmap); err != nil {
		return err
	}
	if r := C.lc_cuMemUnmap(d.fn[symMemUnmap], C.lc_dptr(p), C.size_t(size)); r != 0 {
		return d.fail(r, fmt.Sprintf("cuMemUnmap(%#x, %d)", uint64(p), size))
	}
	return nil
}

// MemSetAccess grants read-write access to the mapped range [p, p+size) to
// each of devs (cuMemSetAccess with CU_MEM_ACCESS_FLAGS_PROT_READWRITE).
func (d *Driver) MemSetAccess(p DevicePtr, size uint64, devs ...Device) error {
	if err := d.need(symMemSetAccess); err != nil {
		return err
	}
	if len(devs) == 0 || len(devs) > 64 {
		return fmt.Errorf("cuMemSetAccess(%#x, %d): %d devices, want 1 to 64", uint64(p), size, len(devs))
	}
	ids := make([]C.int, len(devs))
	for i, dev := range devs {
		ids[i] = C.int(dev)
	}
	if r := C.lc_cuMemSetAccess(d.fn[symMemSetAccess], C.lc_dptr(p), C.size_t(size), (*C.int)(unsafe.Pointer(&ids[0])), C.int(len(ids))); r != 0 {
		return d.fail(r, fmt.Sprintf("cuMemSetAccess(%#x, %d, devices %v)", uint64(p), size, devs))
	}
	return nil
}

// MemRelease releases a handle from MemCreate or MemImportFromFD; the memory
// is freed once it is also unmapped everywhere.
func (d *Driver) MemRelease(h MemHandle) error {
	if err := d.need(symMemRelease); err != nil {
		return err
	}
	if r := C.lc_cuMemRelease(d.fn[symMemRelease], C.lc_memhandle(h)); r != 0 {
		return d.fail(r, fmt.Sprintf("cuMemRelease(%#x)", uint64(h)))
	}
	return nil
}
