package kernels

import (
	"unsafe"

	"golang.org/x/sys/cpu"
)

//go:noescape
func addF32AVX2(d, s unsafe.Pointer, n int)

//go:noescape
func addF64AVX2(d, s unsafe.Pointer, n int)

//go:noescape
func addI32AVX2(d, s unsafe.Pointer, n int)

//go:noescape
func addI64AVX2(d, s unsafe.Pointer, n int)

// haveAVX2 is whether the sums below run (read once: the CPU does not change).
var haveAVX2 = cpu.X86.HasAVX2

// sumVector adds the first elements of s to d's, n elements of type t in
// all, with vector instructions, and returns how many it did (a multiple
// of 32 bytes' worth; 0 for types or CPUs it does not take). Each element
// is one IEEE addition, as in the scalar loop, so the bits are the same.
func sumVector(t DType, d, s unsafe.Pointer, n int) int {
	if !haveAVX2 {
		return 0
	}
	var done int
	switch t {
	case F32:
		done = n &^ 7
		addF32AVX2(d, s, done)
	case F64:
		done = n &^ 3
		addF64AVX2(d, s, done)
	case I32, U32:
		done = n &^ 7
		addI32AVX2(d, s, done)
	case I64, U64:
		done = n &^ 3
		addI64AVX2(d, s, done)
	}
	return done
}
