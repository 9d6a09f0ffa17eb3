package cuda

/*
#include "lc_cuda.h"
*/
import "C"

import (
	"fmt"
	"unsafe"
)

// IpcMemHandle is a legacy CUDA IPC memory handle (CUipcMemHandle): opaque
// bytes that another process opens with IpcOpenMemHandle.
type IpcMemHandle [64]byte

// ipcLazyEnablePeerAccess is CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS.
const ipcLazyEnablePeerAccess = 0x1

// IpcGetMemHandle exports the MemAlloc allocation containing p.
func (d *Driver) IpcGetMemHandle(p DevicePtr) (IpcMemHandle, error) {
	var h IpcMemHandle
	if err := d.need(symIpcGetMemHandle); err != nil {
		return h, err
	}
	if r := C.lc_cuIpcGetMemHandle(d.fn[symIpcGetMemHandle], (*C.lc_ipc_mem_handle)(unsafe.Pointer(&h[0])), C.lc_dptr(p)); r != 0 {
		return h, d.fail(r, fmt.Sprintf("cuIpcGetMemHandle(%#x)", uint64(p)))
	}
	return h, nil
}

// IpcOpenMemHandle maps memory exported by another process into the current
// context, enabling peer access lazily
// (CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS). A process cannot open its own
// handles.
func (d *Driver) IpcOpenMemHandle(h IpcMemHandle) (DevicePtr, error) {
	if err := d.need(symIpcOpenMemHandle); err != nil {
		return 0, err
	}
	var p C.lc_dptr
	if r := C.lc_cuIpcOpenMemHandle(d.fn[symIpcOpenMemHandle], &p, (*C.lc_ipc_mem_handle)(unsafe.Pointer(&h[0])), ipcLazyEnablePeerAccess); r != 0 {
		return 0, d.fail(r, "cuIpcOpenMemHandle(CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS)")
	}
	return DevicePtr(p), nil
}

// IpcCloseMemHandle unmaps memory from IpcOpenMemHandle.
func (d *Driver) IpcCloseMemHandle(p DevicePtr) error {
	if err := d.need(symIpcCloseMemHandle); err != nil {
		return err
	}
	if r := C.lc_cuIpcCloseMemHandle(d.fn[symIpcCloseMemHandle], C.lc_dptr(p)); r != 0 {
		return d.fail(r, fmt.Sprintf("cuIpcCloseMemHandle(%#x)", uint64(p)))
	}
	return nil
}
