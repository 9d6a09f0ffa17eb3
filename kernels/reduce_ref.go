package kernels

import (
	"fmt"
	"math"
	"sync"
	"unsafe"
)

// DType is the element type of a reduction. Its values are the device's
// type codes (reduce.cu's LC_DT_*).
type DType uint8

// The element types of reductions.
const (
	F32 DType = iota
	F64
	F16
	BF16
	I32
	I64
	U32
	U64
	numDTypes
)

var dtypeNames = [numDTypes]string{"f32", "f64", "f16", "bf16", "i32", "i64", "u32", "u64"}
var dtypeSizes = [numDTypes]uint64{4, 8, 2, 2, 4, 8, 4, 8}

// String returns the type's name as scripts spell it ("f32", "bf16", ...).
func (t DType) String() string {
	if t < numDTypes {
		return dtypeNames[t]
	}
	return fmt.Sprintf("dtype(%d)", uint8(t))
}

// Valid reports whether t is one of the element types.
func (t DType) Valid() bool { return t < numDTypes }

// Size is the element's size in bytes.
func (t DType) Size() uint64 { return dtypeSizes[t] }

// Float reports whether the type is a floating-point one.
func (t DType) Float() bool { return t <= BF16 }

// DTypes lists every element type in code order.
func DTypes() []DType {
	out := make([]DType, numDTypes)
	for i := range out {
		out[i] = DType(i)
	}
	return out
}

// ParseDType accepts "f32", "f64", "f16", "bf16", "i32", "i64", "u32", "u64"
// and the aliases "float", "double", "half", "int", "long".
func ParseDType(s string) (DType, error) {
	for i, n := range dtypeNames {
		if s == n {
			return DType(i), nil
		}
	}
	switch s {
	case "float":
		return F32, nil
	case "double":
		return F64, nil
	case "half":
		return F16, nil
	case "int":
		return I32, nil
	case "long":
		return I64, nil
	}
	return 0, fmt.Errorf("unknown element type %q (want f32, f64, f16, bf16, i32, i64, u32 or u64)", s)
}

// RedOp is a reduction operator. Its values are the device's codes
// (reduce.cu's LC_RED_*).
type RedOp uint8

// The reduction operators.
const (
	Sum RedOp = iota
	Prod
	Min
	Max
	numRedOps
)

var redOpNames = [numRedOps]string{"sum", "prod", "min", "max"}

// String returns the operator's name ("sum", "prod", "min", "max").
func (o RedOp) String() string {
	if o < numRedOps {
		return redOpNames[o]
	}
	return fmt.Sprintf("redop(%d)", uint8(o))
}

// Idempotent reports whether x op x is x (min and max): an element
// reduced in twice gives the same result.
func (o RedOp) Idempotent() bool { return o == Min || o == Max }

// Valid reports whether o is one of the operators.
func (o RedOp) Valid() bool { return o < numRedOps }

// RedOps lists every operator in code order.
func RedOps() []RedOp { return []RedOp{Sum, Prod, Min, Max} }

// ParseRedOp accepts "sum", "prod", "min", "max" (and "add", "mul").
func ParseRedOp(s string) (RedOp, error) {
	for i, n := range redOpNames {
		if s == n {
			return RedOp(i), nil
		}
	}
	switch s {
	case "add":
		return Sum, nil
	case "mul":
		return Prod, nil
	}
	return 0, fmt.Errorf("unknown reduction op %q (want sum, prod, min or max)", s)
}

// ReduceBytes is the host reference of the reduce kernel: for each of the
// len(dst)/t.Size() elements, dst[i] = dst[i] op src[i]. Integers wrap;
// min and max compare with < and > (dst is kept when either is NaN);
// f16 and bf16 are widened to f32, combined, and rounded back to nearest
// even. dst and src must be aligned to the element size and of the same
// length (the window layer checks); they may be the same range.
func ReduceBytes(dst, src []byte, t DType, op RedOp) {
	n := len(dst) / int(t.Size())
	if n == 0 {
		return
	}
	d, s := unsafe.Pointer(unsafe.SliceData(dst)), unsafe.Pointer(unsafe.SliceData(src))
	if op == Sum {
		if done := sumVector(t, d, s, n); done > 0 {
			if done == n {
				return
			}
			off := uintptr(done) * uintptr(t.Size())
			d, s, n = unsafe.Add(d, off), unsafe.Add(s, off), n-done
		}
	}
	switch t {
	case F32:
		reduceNum(unsafe.Slice((*float32)(d), n), unsafe.Slice((*float32)(s), n), op)
	case F64:
		reduceNum(unsafe.Slice((*float64)(d), n), unsafe.Slice((*float64)(s), n), op)
	case I32:
		reduceNum(unsafe.Slice((*int32)(d), n), unsafe.Slice((*int32)(s), n), op)
	case I64:
		reduceNum(unsafe.Slice((*int64)(d), n), unsafe.Slice((*int64)(s), n), op)
	case U32:
		reduceNum(unsafe.Slice((*uint32)(d), n), unsafe.Slice((*uint32)(s), n), op)
	case U64:
		reduceNum(unsafe.Slice((*uint64)(d), n), unsafe.Slice((*uint64)(s), n), op)
	case F16:
		reduceF16(unsafe.Slice((*uint16)(d), n), unsafe.Slice((*uint16)(s), n), op)
	case BF16:
		reduceBF16(unsafe.Slice((*uint16)(d), n), unsafe.Slice((*uint16)(s), n), op)
	}
}

type number interface {
	~float32 | ~float64 | ~int32 | ~int64 | ~uint32 | ~uint64
}

// reduceNum is one loop per operator, four elements a turn, with the
// bounds checks hoisted.
func reduceNum[T number](d, s []T, op RedOp) {
	s = s[:len(d)]
	switch op {
	case Sum:
		i := 0
		for ; i+4 <= len(d); i += 4 {
			d4, s4 := d[i:i+4:i+4], s[i:i+4:i+4]
			d4[0] += s4[0]
			d4[1] += s4[1]
			d4[2] += s4[2]
			d4[3] += s4[3]
		}
		for ; i < len(d); i++ {
			d[i] += s[i]
		}
	case Prod:
		for i := range d {
			d[i] *= s[i]
		}
	case Min:
		for i := range d {
			if s[i] < d[i] {
				d[i] = s[i]
			}
		}
	case Max:
		for i := range d {
			if s[i] > d[i] {
				d[i] = s[i]
			}
		}
	}
}

// reduceBF16 and reduceF16 are one loop per operator with the conversions
// inlined (f16 widens through a table): bf16 sums ran about 5 x faster so
// than through conversion functions passed as values.
func reduceBF16(d, s []uint16, op RedOp) {
	s = s[:len(d)]
	switch op {
	case Sum:
		for i := range d {
			d[i] = F32ToBF16(BF16ToF32(d[i]) + BF16ToF32(s[i]))
		}
	case Prod:
		for i := range d {
			d[i] = F32ToBF16(BF16ToF32(d[i]) * BF16ToF32(s[i]))
		}
	case Min:
		for i := range d {
			if BF16ToF32(s[i]) < BF16ToF32(d[i]) {
				d[i] = s[i]
			}
		}
	case Max:
		for i := range d {
			if BF16ToF32(s[i]) > BF16ToF32(d[i]) {
				d[i] = s[i]
			}
		}
	}
}

func reduceF16(d, s []uint16, op RedOp) {
	s = s[:len(d)]
	w := f16Table()
	switch op {
	case Sum:
		for i := range d {
			d[i] = F32ToF16(w[d[i]] + w[s[i]])
		}
	case Prod:
		for i := range d {
			d[i] = F32ToF16(w[d[i]] * w[s[i]])
		}
	case Min:
		for i := range d {
			if w[s[i]] < w[d[i]] {
				d[i] = s[i]
			}
		}
	case Max:
		for i := range d {
			if w[s[i]] > w[d[i]] {
				d[i] = s[i]
			}
		}
	}
}

// f16Table is F16ToF32 of every half, made once.
var f16Table = sync.OnceValue(func() *[1 << 16]float32 {
	var t [1 << 16]float32
	for h := range t {
		t[h] = F16ToF32(uint16(h))
	}
	return &t
})

// BF16ToF32 widens a bfloat16 (the top half of a float32) exactly.
func BF16ToF32(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }

// F32ToBF16 rounds a float32 to the nearest bfloat16, ties to even; NaNs
// stay NaNs (quiet).
func F32ToBF16(f float32) uint16 {
	b := math.Float32bits(f)
	if b&0x7fffffff > 0x7f800000 {
		return uint16(b>>16) | 0x40
	}
	b += 0x7fff + (b>>16)&1
	return uint16(b >> 16)
}

// F16ToF32 widens an IEEE binary16 exactly.
func F16ToF32(h uint16) float32 {
	sign := uint32(h>>15) << 31
	exp := uint32(h>>10) & 0x1f
	man := uint32(h) & 0x3ff
	switch {
	case exp == 0x1f: // inf, NaN
		return math.Float32frombits(sign | 0x7f800000 | man<<13)
	case exp != 0:
		return math.Float32frombits(sign | (exp+112)<<23 | man<<13)
	case man == 0:
		return math.Float32frombits(sign)
	}
	// Subnormal: man * 2^-24, exact in float32.
	f := float32(man) * (1.0 / (1 << 24))
	if sign != 0 {
		f = -f
	}
	return f
}

// F32ToF16 rounds a float32 to the nearest IEEE binary16, ties to even
// (what the device's cvt.rn.f16.f32 does); overflow gives infinity, NaNs
// stay NaNs (quiet).
func F32ToF16(f float32) uint16 {
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	abs := b & 0x7fffffff
	switch {
	case abs > 0x7f800000: // NaN
		return sign | 0x7e00 | uint16(abs>>13)&0x3ff
	case abs >= 0x477ff000: // rounds to 65536 or more: infinity
		return sign | 0x7c00
	case abs >= 0x38800000: // normal half (2^-14 and up)
		// Rebias the exponent (127 -> 15) and round the 13 dropped bits.
		v := abs - 0x38000000
		v += 0xfff + (v>>13)&1
		return sign | uint16(v>>13)
	case abs < 0x33000000: // below half the least subnormal (2^-25): zero
		return sign
	}
	// Subnormal half: the value in units of 2^-24, rounded to even.
	exp := abs >> 23
	man := abs&0x7fffff | 0x800000
	shift := 126 - exp // man * 2^(exp-150) / 2^-24 = man >> (126-exp)
	q := man >> shift
	rem := man & (1<<shift - 1)
	half := uint32(1) << (shift - 1)
	if rem > half || rem == half && q&1 == 1 {
		q++
	}
	return sign | uint16(q)
}
