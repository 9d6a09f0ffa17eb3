package cuda

/*
#include <stdint.h>
*/
import "C"

import (
	"runtime/cgo"
	"unsafe"
)

// HostFunc is a Go function a stream runs on a driver thread once the work
// enqueued before it has completed (cuLaunchHostFunc); captured into a
// graph, it becomes a host node that runs at every replay. It must not call
// CUDA. Free it once no stream or graph can run it any more.
type HostFunc struct {
	h cgo.Handle
}

// NewHostFunc wraps fn.
func NewHostFunc(fn func()) *HostFunc { return &HostFunc{h: cgo.NewHandle(fn)} }

// Free releases the function.
func (f *HostFunc) Free() {
	if f != nil && f.h != 0 {
		f.h.Delete()
		f.h = 0
	}
}

//export lcHostFuncGo
func lcHostFuncGo(p unsafe.Pointer) {
	h := cgo.Handle(uintptr(p))
	if fn, ok := h.Value().(func()); ok {
		fn()
	}
}
