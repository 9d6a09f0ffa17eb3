package cuda

/*
#include "lc_cuda.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"math"
	"unsafe"
)

// Module is a loaded CUDA module (CUmodule).
type Module struct {
	d *Driver
	h unsafe.Pointer
}

// Function is a kernel of a Module (CUfunction).
type Function struct {
	d    *Driver
	h    unsafe.Pointer
	name string
}

// ModuleLoadData loads a CUBIN (or NUL-terminated PTX) image into the
// current context (cuModuleLoadData).
func (d *Driver) ModuleLoadData(image []byte) (*Module, error) {
	if len(image) == 0 {
		return nil, &Error{Call: "cuModuleLoadData(0 bytes)", Code: ErrorInvalidValue, Name: d.ErrorName(ErrorInvalidValue)}
	}
	o := C.lc_cuModuleLoadData(d.fn[symModuleLoadData], unsafe.Pointer(&image[0]))
	if o.r != 0 {
		return nil, d.fail(o.r, fmt.Sprintf("cuModuleLoadData(%d bytes)", len(image)))
	}
	return &Module{d: d, h: o.h}, nil
}

// Function looks up the kernel with the given (unmangled, extern "C") name.
func (m *Module) Function(name string) (*Function, error) {
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	o := C.lc_cuModuleGetFunction(m.d.fn[symModuleGetFunction], m.h, cname)
	if o.r != 0 {
		return nil, m.d.fail(o.r, fmt.Sprintf("cuModuleGetFunction(%q)", name))
	}
	return &Function{d: m.d, h: o.h, name: name}, nil
}

// Unload unloads the module (cuModuleUnload).
func (m *Module) Unload() error {
	if r := C.lc_cuModuleUnload(m.d.fn[symModuleUnload], m.h); r != 0 {
		return m.d.fail(r, "cuModuleUnload")
	}
	return nil
}

// Name returns the kernel name.
func (f *Function) Name() string { return f.name }

// MaxKernelArgs is the most arguments a KernelArgs can hold.
const MaxKernelArgs = C.LC_MAX_ARGS

// KernelArgs is a kernel argument list. Each argument takes an 8-byte slot;
// 32-bit arguments occupy its low half, which is what the kernel reads on a
// little-endian machine. The list is copied by value into C memory (the C
// stack of the launch trampoline), so no Go pointer reaches the driver.
// The zero value is an empty list.
type KernelArgs struct {
	v   [MaxKernelArgs]uint64
	n   int
	err error
}

func (a *KernelArgs) push(v uint64) *KernelArgs {
	if a.n == MaxKernelArgs {
		if a.err == nil {
			a.err = fmt.Errorf("more than %d kernel arguments", MaxKernelArgs)
		}
		return a
	}
	a.v[a.n] = v
	a.n++
	return a
}

// U64 appends an unsigned 64-bit argument.
func (a *KernelArgs) U64(v uint64) *KernelArgs { return a.push(v) }

// I64 appends a signed 64-bit argument.
func (a *KernelArgs) I64(v int64) *KernelArgs { return a.push(uint64(v)) }

// U32 appends an unsigned 32-bit argument.
func (a *KernelArgs) U32(v uint32) *KernelArgs { return a.push(uint64(v)) }

// I32 appends a signed 32-bit argument.
func (a *KernelArgs) I32(v int32) *KernelArgs { return a.push(uint64(uint32(v))) }

// F32 appends a float argument.
func (a *KernelArgs) F32(v float32) *KernelArgs { return a.push(uint64(math.Float32bits(v))) }

// Ptr appends a device pointer argument.
func (a *KernelArgs) Ptr(p DevicePtr) *KernelArgs { return a.push(uint64(p)) }

// Len returns the number of arguments.
func (a *KernelArgs) Len() int { return a.n }

// Reset empties the list for reuse.
func (a *KernelArgs) Reset() { *a = KernelArgs{} }

// Dim3 is a grid or block shape.
type Dim3 struct{ X, Y, Z uint32 }

// D1 returns the one-dimensional shape {x, 1, 1}.
func D1(x uint32) Dim3 { return Dim3{x, 1, 1} }

// ErrBadLaunch is wrapped by LaunchKernel for arguments rejected before
// reaching the driver.
var ErrBadLaunch = errors.New("invalid kernel launch")

// c copies the arguments into the C table (nil: none).
func (a *KernelArgs) c(kernel string) (C.lc_args, error) {
	var ca C.lc_args
	if a == nil {
		return ca, nil
	}
	if a.err != nil {
		return ca, fmt.Errorf("launching %s: %w: %v", kernel, ErrBadLaunch, a.err)
	}
	for i := 0; i < a.n; i++ {
		ca.v[i] = C.ulonglong(a.v[i])
	}
	ca.n = C.int(a.n)
	return ca, nil
}

// LaunchKernel enqueues f on s (nil: default stream) with the given grid,
// block, dynamic shared memory and arguments (cuLaunchKernel). The current
// context must be the one f was loaded into.
func (d *Driver) LaunchKernel(f *Function, grid, block Dim3, sharedMem uint32, s *Stream, args *KernelArgs) error {
	ca, err := args.c(f.name)
	if err != nil {
		return err
	}
	z := func(v uint32) C.uint {
		if v == 0 {
			return 1
		}
		return C.uint(v)
	}
	r := C.lc_cuLaunchKernel(d.fn[symLaunchKernel], f.h, z(grid.X), z(grid.Y), z(grid.Z),
		z(block.X), z(block.Y), z(block.Z), C.uint(sharedMem), s.handle(), ca)
	if r != 0 {
		return d.fail(r, fmt.Sprintf("cuLaunchKernel(%s, grid %dx%dx%d, block %dx%dx%d)", f.name,
			grid.X, grid.Y, grid.Z, block.X, block.Y, block.Z))
	}
	return nil
}
