package verify

import (
	"unsafe"

	"golang.org/x/sys/cpu"
)

//go:noescape
func joinClockAVX2(vc, at unsafe.Pointer, n int) bool

// haveAVX2 is whether joinVector runs (read once: the CPU does not change).
var haveAVX2 = cpu.X86.HasAVX2

// joinVector raises the first entries of vc to at's with vector
// instructions, as joinClock does, and returns how many it did (a
// multiple of 8; 0 where the CPU has no AVX2) and whether any rose.
func joinVector(vc, at []uint32) (int, bool) {
	n := len(vc) &^ 7
	if !haveAVX2 || n == 0 {
		return 0, false
	}
	return n, joinClockAVX2(unsafe.Pointer(&vc[0]), unsafe.Pointer(&at[0]), n)
}
