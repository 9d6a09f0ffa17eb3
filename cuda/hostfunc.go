package cuda

/*
#include <stdint.h>
*/
import "C"

import (
	"sync"
	"sync/atomic"
	"unsafe"
)

// HostFunc is a Go function a stream runs on a driver thread once the work
// enqueued before it has completed (cuLaunchHostFunc); captured into a
// graph, it becomes a host node that runs at every replay. It must not call
// CUDA. Free it once no stream or graph can run it any more; a launch that
// runs after Free does nothing.
type HostFunc struct {
	id uintptr
}

// hostFuncs maps the ids the driver hands back to the functions: the one
// table the C trampoline can reach (it gets nothing else), so an id freed
// early is a miss, never a crash on the driver's thread.
var (
	hostFuncs  sync.Map // uintptr -> func()
	hostFuncID atomic.Uintptr
)

// NewHostFunc wraps fn.
func NewHostFunc(fn func()) *HostFunc {
	id := hostFuncID.Add(1)
	hostFuncs.Store(id, fn)
	return &HostFunc{id: id}
}

// Free releases the function.
func (f *HostFunc) Free() {
	if f != nil && f.id != 0 {
		hostFuncs.Delete(f.id)
		f.id = 0
	}
}

//export lcHostFuncGo
func lcHostFuncGo(p unsafe.Pointer) { runHostFunc(uintptr(p)) }

// runHostFunc runs the function of id, if it was not freed.
func runHostFunc(id uintptr) {
	if fn, ok := hostFuncs.Load(id); ok {
		fn.(func())()
	}
}
