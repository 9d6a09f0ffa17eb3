package cuda

/*
#include "lc_cuda.h"
*/
import "C"

import (
	"fmt"
	"unsafe"
)

// Device is a CUDA device ordinal handle (CUdevice).
type Device int32

// DeviceAttribute is a CUdevice_attribute.
type DeviceAttribute int

// Device attributes used by luacoll (values from cuda.h, CUDA 12/13).
const (
	AttrMaxThreadsPerBlock          DeviceAttribute = 1
	AttrClockRate                   DeviceAttribute = 13
	AttrMultiprocessorCount         DeviceAttribute = 16
	AttrIntegrated                  DeviceAttribute = 18
	AttrCanMapHostMemory            DeviceAttribute = 19
	AttrConcurrentKernels           DeviceAttribute = 31
	AttrPCIBusID                    DeviceAttribute = 33
	AttrPCIDeviceID                 DeviceAttribute = 34
	AttrMemoryClockRate             DeviceAttribute = 36
	AttrGlobalMemoryBusWidth        DeviceAttribute = 37
	AttrL2CacheSize                 DeviceAttribute = 38
	AttrAsyncEngineCount            DeviceAttribute = 40
	AttrUnifiedAddressing           DeviceAttribute = 41
	AttrPCIDomainID                 DeviceAttribute = 50
	AttrComputeCapabilityMajor      DeviceAttribute = 75
	AttrComputeCapabilityMinor      DeviceAttribute = 76
	AttrVirtualMemoryManagement     DeviceAttribute = 102
	AttrHandleTypePosixFDSupported  DeviceAttribute = 103
	AttrMemoryPoolsSupported        DeviceAttribute = 115
	AttrGPUDirectRDMASupported      DeviceAttribute = 116
	AttrCanUse64BitStreamMemOps     DeviceAttribute = 122
	AttrCanUseStreamWaitValueNor    DeviceAttribute = 123
	AttrMaxThreadsPerMultiprocessor DeviceAttribute = 39
	// AttrMulticastSupported says whether the device supports NVLink
	// multicast objects. luacoll only reports it: it never creates one.
	AttrMulticastSupported DeviceAttribute = 132
	// AttrMPSEnabled says whether contexts created on the device are
	// shared through an MPS server (this process is an MPS client).
	AttrMPSEnabled DeviceAttribute = 133
)

// DeviceCount returns cuDeviceGetCount.
func (d *Driver) DeviceCount() (int, error) {
	var n C.int
	if r := C.lc_cuDeviceGetCount(d.fn[symDeviceGetCount], &n); r != 0 {
		return 0, d.fail(r, "cuDeviceGetCount")
	}
	return int(n), nil
}

// DeviceGet returns the device with the given ordinal.
func (d *Driver) DeviceGet(ordinal int) (Device, error) {
	var dev C.lc_dev
	if r := C.lc_cuDeviceGet(d.fn[symDeviceGet], &dev, C.int(ordinal)); r != 0 {
		return 0, d.fail(r, fmt.Sprintf("cuDeviceGet(%d)", ordinal))
	}
	return Device(dev), nil
}

// DeviceName returns the marketing name, e.g. "NVIDIA H100 80GB HBM3".
func (d *Driver) DeviceName(dev Device) (string, error) {
	var buf [256]byte
	if r := C.lc_cuDeviceGetName(d.fn[symDeviceGetName], (*C.char)(unsafe.Pointer(&buf[0])), C.int(len(buf)), C.lc_dev(dev)); r != 0 {
		return "", d.fail(r, fmt.Sprintf("cuDeviceGetName(%d)", dev))
	}
	return cstr(buf[:]), nil
}

// DeviceUUID returns the device UUID formatted as nvidia-smi does,
// "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx".
func (d *Driver) DeviceUUID(dev Device) (string, error) {
	if err := d.need(symDeviceGetUuid); err != nil {
		return "", err
	}
	var u [16]byte
	if r := C.lc_cuDeviceGetUuid(d.fn[symDeviceGetUuid], (*C.uchar)(unsafe.Pointer(&u[0])), C.lc_dev(dev)); r != 0 {
		return "", d.fail(r, fmt.Sprintf("cuDeviceGetUuid(%d)", dev))
	}
	return fmt.Sprintf("GPU-%x-%x-%x-%x-%x", u[0:4], u[4:6], u[6:8], u[8:10], u[10:16]), nil
}

// DevicePCIBusID returns the PCI address, "dddd:bb:dd.f".
func (d *Driver) DevicePCIBusID(dev Device) (string, error) {
	var buf [64]byte
	if r := C.lc_cuDeviceGetPCIBusId(d.fn[symDeviceGetPCIBusId], (*C.char)(unsafe.Pointer(&buf[0])), C.int(len(buf)), C.lc_dev(dev)); r != 0 {
		return "", d.fail(r, fmt.Sprintf("cuDeviceGetPCIBusId(%d)", dev))
	}
	return cstr(buf[:]), nil
}

// DeviceTotalMem returns the device memory size in bytes.
func (d *Driver) DeviceTotalMem(dev Device) (uint64, error) {
	var n C.size_t
	if r := C.lc_cuDeviceTotalMem(d.fn[symDeviceTotalMem], &n, C.lc_dev(dev)); r != 0 {
		return 0, d.fail(r, fmt.Sprintf("cuDeviceTotalMem(%d)", dev))
	}
	return uint64(n), nil
}

// DeviceAttribute returns cuDeviceGetAttribute(attr, dev).
func (d *Driver) DeviceAttribute(dev Device, attr DeviceAttribute) (int, error) {
	var v C.int
	if r := C.lc_cuDeviceGetAttribute(d.fn[symDeviceGetAttribute], &v, C.int(attr), C.lc_dev(dev)); r != 0 {
		return 0, d.fail(r, fmt.Sprintf("cuDeviceGetAttribute(%d, %d)", attr, dev))
	}
	return int(v), nil
}

// DeviceComputeCapability returns the compute capability (9, 0 for an H100).
func (d *Driver) DeviceComputeCapability(dev Device) (major, minor int, err error) {
	if major, err = d.DeviceAttribute(dev, AttrComputeCapabilityMajor); err != nil {
		return 0, 0, err
	}
	if minor, err = d.DeviceAttribute(dev, AttrComputeCapabilityMinor); err != nil {
		return 0, 0, err
	}
	return major, minor, nil
}

// DeviceCanAccessPeer reports whether dev can map memory of peer
// (cuDeviceCanAccessPeer).
func (d *Driver) DeviceCanAccessPeer(dev, peer Device) (bool, error) {
	var v C.int
	if r := C.lc_cuDeviceCanAccessPeer(d.fn[symDeviceCanAccessPeer], &v, C.lc_dev(dev), C.lc_dev(peer)); r != 0 {
		return false, d.fail(r, fmt.Sprintf("cuDeviceCanAccessPeer(%d, %d)", dev, peer))
	}
	return v != 0, nil
}

// cstr returns the NUL-terminated prefix of b.
func cstr(b []byte) string {
	for i, c := range b {
		if c == 0 {
			return string(b[:i])
		}
	}
	return string(b)
}
