package cuda

/*
#cgo LDFLAGS: -ldl
#include "lc_cuda.h"
*/
import "C"

import (
	"fmt"
	"os"
	"unsafe"
)

// sym indexes the resolved entry points of a Driver.
type sym int

const (
	symGetErrorName sym = iota
	symGetErrorString
	symInit
	symDriverGetVersion
	symDeviceGetCount
	symDeviceGet
	symDeviceGetName
	symDeviceGetUuid
	symDeviceGetPCIBusId
	symDeviceTotalMem
	symDeviceGetAttribute
	symDeviceCanAccessPeer
	symDevicePrimaryCtxRetain
	symDevicePrimaryCtxRelease
	symCtxSetCurrent
	symCtxSynchronize
	symCtxEnablePeerAccess
	symMemGetInfo
	symStreamCreate
	symStreamDestroy
	symStreamSynchronize
	symStreamQuery
	symStreamWaitEvent
	symEventCreate
	symEventRecord
	symEventQuery
	symEventSynchronize
	symEventElapsedTime
	symEventDestroy
	symMemAlloc
	symMemFree
	symMemsetD8Async
	symMemcpyAsync
	symMemcpyHtoD
	symMemcpyDtoH
	symMemcpyHtoDAsync
	symMemcpyDtoHAsync
	symMemcpyPeerAsync
	symMemHostAlloc
	symMemHostGetDevicePointer
	symMemFreeHost
	symMemHostRegister
	symMemHostUnregister
	symModuleLoadData
	symModuleGetFunction
	symModuleUnload
	symLaunchKernel
	symMemGetAllocationGranularity
	symMemCreate
	symMemExportToShareableHandle
	symMemImportFromShareableHandle
	symMemAddressReserve
	symMemAddressFree
	symMemMap
	symMemUnmap
	symMemSetAccess
	symMemRelease
	symIpcGetMemHandle
	symIpcOpenMemHandle
	symIpcCloseMemHandle
	symStreamWriteValue64
	symStreamWaitValue64
	symStreamBeginCapture
	symStreamEndCapture
	symGraphInstantiateWithFlags
	symGraphLaunch
	symLaunchHostFunc
	symGraphGetNodes
	symGraphNodeGetType
	symGraphExecDestroy
	symGraphDestroy
	symGraphCreate
	symGraphAddKernelNode
	symGraphExecKernelNodeSetParams
	numSyms
)

// symbol is one row of the resolution table: the base name given to
// cuGetProcAddress, the CUDA version whose ABI the trampoline implements
// (e.g. 3020 selects cuMemAlloc_v2), and whether the driver may lack it.
type symbol struct {
	name     string
	version  int
	optional bool
}

// symbolTable is read-only data: the entry points this package uses. The
// versions are those of the PFN_<name>_v<version> prototypes the trampolines
// in lc_cuda.h follow.
var symbolTable = [numSyms]symbol{
	symGetErrorName:            {"cuGetErrorName", 6000, false},
	symGetErrorString:          {"cuGetErrorString", 6000, false},
	symInit:                    {"cuInit", 2000, false},
	symDriverGetVersion:        {"cuDriverGetVersion", 2020, false},
	symDeviceGetCount:          {"cuDeviceGetCount", 2000, false},
	symDeviceGet:               {"cuDeviceGet", 2000, false},
	symDeviceGetName:           {"cuDeviceGetName", 2000, false},
	symDeviceGetUuid:           {"cuDeviceGetUuid", 11040, true},
	symDeviceGetPCIBusId:       {"cuDeviceGetPCIBusId", 4010, false},
	symDeviceTotalMem:          {"cuDeviceTotalMem", 3020, false},
	symDeviceGetAttribute:      {"cuDeviceGetAttribute", 2000, false},
	symDeviceCanAccessPeer:     {"cuDeviceCanAccessPeer", 4000, false},
	symDevicePrimaryCtxRetain:  {"cuDevicePrimaryCtxRetain", 7000, false},
	symDevicePrimaryCtxRelease: {"cuDevicePrimaryCtxRelease", 11000, false},
	symCtxSetCurrent:           {"cuCtxSetCurrent", 4000, false},
	symCtxSynchronize:          {"cuCtxSynchronize", 2000, false},
	symCtxEnablePeerAccess:     {"cuCtxEnablePeerAccess", 4000, false},
	symMemGetInfo:              {"cuMemGetInfo", 3020, false},
	symStreamCreate:            {"cuStreamCreate", 2000, false},
	symStreamDestroy:           {"cuStreamDestroy", 4000, false},
	symStreamSynchronize:       {"cuStreamSynchronize", 2000, false},
	symStreamQuery:             {"cuStreamQuery", 2000, false},
	symStreamWaitEvent:         {"cuStreamWaitEvent", 3020, false},
	symEventCreate:             {"cuEventCreate", 2000, false},
	symEventRecord:             {"cuEventRecord", 2000, false},
	symEventQuery:              {"cuEventQuery", 2000, false},
	symEventSynchronize:        {"cuEventSynchronize", 2000, false},
	symEventElapsedTime:        {"cuEventElapsedTime", 2000, false},
	symEventDestroy:            {"cuEventDestroy", 4000, false},
	symMemAlloc:                {"cuMemAlloc", 3020, false},
	symMemFree:                 {"cuMemFree", 3020, false},
	symMemsetD8Async:           {"cuMemsetD8Async", 3020, false},
	symMemcpyAsync:             {"cuMemcpyAsync", 4000, false},
	symMemcpyHtoD:              {"cuMemcpyHtoD", 3020, false},
	symMemcpyDtoH:              {"cuMemcpyDtoH", 3020, false},
	symMemcpyHtoDAsync:         {"cuMemcpyHtoDAsync", 3020, false},
	symMemcpyDtoHAsync:         {"cuMemcpyDtoHAsync", 3020, false},
	symMemcpyPeerAsync:         {"cuMemcpyPeerAsync", 4000, false},
	symMemHostAlloc:            {"cuMemHostAlloc", 2020, false},
	symMemHostGetDevicePointer: {"cuMemHostGetDevicePointer", 3020, false},
	symMemFreeHost:             {"cuMemFreeHost", 2000, false},
	symMemHostRegister:         {"cuMemHostRegister", 6050, true},
	symMemHostUnregister:       {"cuMemHostUnregister", 4000, true},
	symModuleLoadData:          {"cuModuleLoadData", 2000, false},
	symModuleGetFunction:       {"cuModuleGetFunction", 2000, false},
	symModuleUnload:            {"cuModuleUnload", 2000, false},
	symLaunchKernel:            {"cuLaunchKernel", 4000, false},

	symMemGetAllocationGranularity:  {"cuMemGetAllocationGranularity", 10020, true},
	symMemCreate:                    {"cuMemCreate", 10020, true},
	symMemExportToShareableHandle:   {"cuMemExportToShareableHandle", 10020, true},
	symMemImportFromShareableHandle: {"cuMemImportFromShareableHandle", 10020, true},
	symMemAddressReserve:            {"cuMemAddressReserve", 10020, true},
	symMemAddressFree:               {"cuMemAddressFree", 10020, true},
	symMemMap:                       {"cuMemMap", 10020, true},
	symMemUnmap:                     {"cuMemUnmap", 10020, true},
	symMemSetAccess:                 {"cuMemSetAccess", 10020, true},
	symMemRelease:                   {"cuMemRelease", 10020, true},

	symIpcGetMemHandle:   {"cuIpcGetMemHandle", 4010, true},
	symIpcOpenMemHandle:  {"cuIpcOpenMemHandle", 11000, true},
	symIpcCloseMemHandle: {"cuIpcCloseMemHandle", 4010, true},

	// The v2 stream memory operations (CUDA 11.7 ABI, the default since
	// CUDA 12), governed by CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS.
	symStreamWriteValue64: {"cuStreamWriteValue64", 11070, true},
	symStreamWaitValue64:  {"cuStreamWaitValue64", 11070, true},

	symStreamBeginCapture:        {"cuStreamBeginCapture", 10010, true},
	symStreamEndCapture:          {"cuStreamEndCapture", 10000, true},
	symGraphInstantiateWithFlags: {"cuGraphInstantiateWithFlags", 11040, true},
	symGraphLaunch:               {"cuGraphLaunch", 10000, true},
	symLaunchHostFunc:            {"cuLaunchHostFunc", 10000, true},
	symGraphGetNodes:             {"cuGraphGetNodes", 10000, true},
	symGraphNodeGetType:          {"cuGraphNodeGetType", 10000, true},
	symGraphExecDestroy:          {"cuGraphExecDestroy", 10000, true},
	symGraphDestroy:              {"cuGraphDestroy", 10000, true},
	// Kernel nodes with CUDA_KERNEL_NODE_PARAMS_v2 (the CUDA 12 ABI).
	symGraphCreate:                  {"cuGraphCreate", 10000, true},
	symGraphAddKernelNode:           {"cuGraphAddKernelNode", 12000, true},
	symGraphExecKernelNodeSetParams: {"cuGraphExecKernelNodeSetParams", 12000, true},
}

// DefaultLibrary is the driver library Load opens.
const DefaultLibrary = "libcuda.so.1"

// Driver is a loaded CUDA driver: the resolved entry points of one
// libcuda.so.1. It is safe for concurrent use; the current context is
// per OS thread (see the package documentation).
type Driver struct {
	lib     unsafe.Pointer
	path    string
	getProc string
	version int
	fn      [numSyms]unsafe.Pointer
}

// Load opens libcuda.so.1, resolves the driver entry points and calls
// cuInit(0). Without a driver the error wraps ErrNoDriver; a driver that
// finds no device fails cuInit with CUDA_ERROR_NO_DEVICE.
func Load() (*Driver, error) {
	return LoadLibrary(DefaultLibrary)
}

// LoadLibrary is Load for a driver library at path.
//
// Unless the environment says otherwise, modules load eagerly
// (CUDA_MODULE_LOADING=EAGER): with lazy loading the first launch of a
// kernel loads it, and loading waits for kernels already running, so a
// kernel spinning on a peer that waits for this launch would hold it back
// until its timeout.
func LoadLibrary(path string) (*Driver, error) {
	if os.Getenv("CUDA_MODULE_LOADING") == "" {
		_ = os.Setenv("CUDA_MODULE_LOADING", "EAGER")
	}
	cpath := C.CString(path)
	defer C.free(unsafe.Pointer(cpath))
	lib := C.lc_dlopen(cpath)
	if lib == nil {
		return nil, fmt.Errorf("dlopen %s: %s: %w", path, dlerror(), ErrNoDriver)
	}
	d := &Driver{lib: lib, path: path}
	gp, v2 := d.lookupGetProc()
	if gp == nil {
		C.lc_dlclose(lib)
		return nil, fmt.Errorf("%s has neither cuGetProcAddress_v2 nor cuGetProcAddress: %w", path, ErrNoDriver)
	}
	// Error names first, so that every later failure can be named.
	for _, s := range []sym{symGetErrorName, symGetErrorString, symInit} {
		if err := d.resolve(gp, v2, s); err != nil {
			return nil, err
		}
	}
	if r := C.lc_cuInit(d.fn[symInit], 0); r != 0 {
		return nil, d.fail(r, "cuInit(0)")
	}
	for s := sym(0); s < numSyms; s++ {
		if d.fn[s] != nil {
			continue
		}
		if err := d.resolve(gp, v2, s); err != nil {
			return nil, err
		}
	}
	var v C.int
	if r := C.lc_cuDriverGetVersion(d.fn[symDriverGetVersion], &v); r != 0 {
		return nil, d.fail(r, "cuDriverGetVersion")
	}
	d.version = int(v)
	return d, nil
}

func dlerror() string {
	if s := C.lc_dlerror(); s != nil {
		return C.GoString(s)
	}
	return "unknown dlopen error"
}

func (d *Driver) lookupGetProc() (unsafe.Pointer, bool) {
	for _, c := range []struct {
		name string
		v2   bool
	}{{"cuGetProcAddress_v2", true}, {"cuGetProcAddress", false}} {
		cname := C.CString(c.name)
		p := C.lc_dlsym(d.lib, cname)
		C.free(unsafe.Pointer(cname))
		if p != nil {
			d.getProc = c.name
			return p, c.v2
		}
	}
	return nil, false
}

func (d *Driver) resolve(gp unsafe.Pointer, v2 bool, s sym) error {
	e := symbolTable[s]
	cname := C.CString(e.name)
	defer C.free(unsafe.Pointer(cname))
	var res, status C.int
	flag := C.int(0)
	if v2 {
		flag = 1
	}
	p := C.lc_resolve(gp, flag, cname, C.int(e.version), &res, &status)
	if res == 0 && p != nil {
		d.fn[s] = p
		return nil
	}
	if e.optional {
		return nil
	}
	call := fmt.Sprintf("%s(%q, version %d)", d.getProc, e.name, e.version)
	if res == 0 {
		return &Error{Call: call, Code: ErrorNotFound, Name: "CUDA_ERROR_NOT_FOUND"}
	}
	return d.fail(res, call)
}

// fail builds the *Error for a non-zero CUresult.
func (d *Driver) fail(r C.int, call string) error {
	return &Error{Call: call, Code: int(r), Name: d.ErrorName(int(r))}
}

// need returns an error when the optional entry point s is missing.
func (d *Driver) need(s sym) error {
	if d.fn[s] != nil {
		return nil
	}
	e := symbolTable[s]
	return fmt.Errorf("%s (ABI %d): %w", e.name, e.version, &Error{Call: e.name, Code: ErrorNotFound, Name: "CUDA_ERROR_NOT_FOUND"})
}

// ErrorName returns cuGetErrorName(code), e.g. "CUDA_ERROR_OUT_OF_MEMORY".
func (d *Driver) ErrorName(code int) string {
	return errorName(func(c int) string {
		if d == nil {
			return ""
		}
		if s := C.lc_cuGetErrorName(d.fn[symGetErrorName], C.int(c)); s != nil {
			return C.GoString(s)
		}
		return ""
	}, code)
}

// ErrorString returns cuGetErrorString(code), a sentence describing it.
func (d *Driver) ErrorString(code int) string {
	if s := C.lc_cuGetErrorString(d.fn[symGetErrorString], C.int(code)); s != nil {
		return C.GoString(s)
	}
	return d.ErrorName(code)
}

// Version returns cuDriverGetVersion, e.g. 13000 for CUDA 13.0.
func (d *Driver) Version() int { return d.version }

// VersionString formats Version as "13.0".
func (d *Driver) VersionString() string {
	return fmt.Sprintf("%d.%d", d.version/1000, d.version%1000/10)
}

// Path returns the library Load opened.
func (d *Driver) Path() string { return d.path }

// Has reports whether the driver provides the entry point with the given
// base name (e.g. "cuMemCreate", "cuStreamWaitValue64") at the ABI version
// this package uses. Names outside the package's table report false.
func (d *Driver) Has(name string) bool {
	for s, e := range symbolTable {
		if e.name == name {
			return d.fn[s] != nil
		}
	}
	return false
}

// Missing lists the optional entry points this driver lacks.
func (d *Driver) Missing() []string {
	var out []string
	for s, e := range symbolTable {
		if d.fn[s] == nil {
			out = append(out, e.name)
		}
	}
	return out
}
