package kernels

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"unsafe"
)

// scalarSum is the scalar loop alone, the reference of the vector sums.
func scalarSum(d, s []byte, t DType) {
	n := len(d) / int(t.Size())
	dp, sp := unsafe.Pointer(unsafe.SliceData(d)), unsafe.Pointer(unsafe.SliceData(s))
	switch t {
	case F32:
		reduceNum(unsafe.Slice((*float32)(dp), n), unsafe.Slice((*float32)(sp), n), Sum)
	case F64:
		reduceNum(unsafe.Slice((*float64)(dp), n), unsafe.Slice((*float64)(sp), n), Sum)
	case I32, U32:
		reduceNum(unsafe.Slice((*uint32)(dp), n), unsafe.Slice((*uint32)(sp), n), Sum)
	case I64, U64:
		reduceNum(unsafe.Slice((*uint64)(dp), n), unsafe.Slice((*uint64)(sp), n), Sum)
	}
}

// fillSpecial writes random elements of t with, for floats, NaNs (with
// payloads), infinities, signed zeros and subnormals among them.
func fillSpecial(b []byte, t DType, r *rand.Rand) {
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	if !t.Float() {
		return
	}
	esz := int(t.Size())
	for i := 0; i+esz <= len(b); i += esz {
		var v uint64
		switch r.IntN(8) {
		case 0:
			v = math.Float64bits(math.NaN()) | uint64(r.Uint32()&0xffff)
			if t == F32 {
				v = uint64(math.Float32bits(float32(math.NaN())) | r.Uint32()&0xffff)
			}
		case 1:
			v = math.Float64bits(math.Inf(1 - 2*r.IntN(2)))
			if t == F32 {
				v = uint64(math.Float32bits(float32(math.Inf(1 - 2*r.IntN(2)))))
			}
		case 2:
			v = uint64(r.Uint32() & 0x7fffff) // a subnormal (or zero)
		case 3:
			v = 1 << (8*esz - 1) // -0
		default:
			continue
		}
		for k := 0; k < esz; k++ {
			b[i+k] = byte(v >> (8 * k))
		}
	}
}

// The vector sums give every element the bits of the scalar loop, for
// every length (the tail done by the loop) and for unaligned vectors, and
// touch nothing past the range. A NaN is a NaN: which input's payload a
// sum of two keeps depends on the order the compiler put the operands in
// (the race detector's build differs), in the scalar loop too.
func TestSumVectorBitsAsScalar(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, dt := range []DType{F32, F64, I32, U32, I64, U64} {
		esz := int(dt.Size())
		for _, n := range []int{1, 3, 7, 8, 9, 31, 32, 33, 64, 255, 256, 1000, 4099} {
			for _, skew := range []int{0, 1} {
				t.Run(fmt.Sprintf("%s/%d/skew%d", dt, n, skew), func(t *testing.T) {
					off := skew * esz
					d := make([]byte, (n+2)*esz+off)
					s := make([]byte, (n+2)*esz+off)
					fillSpecial(d, dt, r)
					fillSpecial(s, dt, r)
					want := append([]byte(nil), d...)
					scalarSum(want[off:off+n*esz], s[off:off+n*esz], dt)
					ReduceBytes(d[off:off+n*esz], s[off:off+n*esz], dt, Sum)
					for i := 0; i < len(d); i += esz {
						got, exp := d[i:i+esz], want[i:i+esz]
						if !bytes.Equal(got, exp) && !(isNaN(got, dt) && isNaN(exp, dt)) {
							t.Fatalf("element %d: % x, want % x", (i-off)/esz, got, exp)
						}
					}
				})
			}
		}
	}
}

// isNaN reports whether the element b (little-endian) of float type t is a NaN.
func isNaN(b []byte, t DType) bool {
	switch t {
	case F32:
		return math.IsNaN(float64(math.Float32frombits(binary.LittleEndian.Uint32(b))))
	case F64:
		return math.IsNaN(math.Float64frombits(binary.LittleEndian.Uint64(b)))
	}
	return false
}
