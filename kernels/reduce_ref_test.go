package kernels

import (
	"encoding/binary"
	"math"
	"testing"
)

func TestF16Conversions(t *testing.T) {
	for _, c := range []struct {
		h uint16
		f float32
	}{{0x3c00, 1}, {0xc000, -2}, {0x7bff, 65504}, {0x0001, 1.0 / (1 << 24)}, {0x0400, 1.0 / (1 << 14)}, {0x7c00, float32(math.Inf(1))}, {0x8000, float32(math.Copysign(0, -1))}} {
		if got := F16ToF32(c.h); math.Float32bits(got) != math.Float32bits(c.f) {
			t.Errorf("F16ToF32(%#04x) = %v, want %v", c.h, got, c.f)
		}
		if got := F32ToF16(c.f); got != c.h {
			t.Errorf("F32ToF16(%v) = %#04x, want %#04x", c.f, got, c.h)
		}
	}
	for h := 0; h < 1<<16; h++ {
		f := F16ToF32(uint16(h))
		if f != f {
			if g := F32ToF16(f); F16ToF32(g) == F16ToF32(g) {
				t.Fatalf("NaN %#04x came back as %#04x", h, g)
			}
			continue
		}
		if g := F32ToF16(f); g != uint16(h) {
			t.Fatalf("%#04x -> %v -> %#04x", h, f, g)
		}
		// Halfway to the next half up (same sign) rounds to the even one,
		// a hair above it rounds away.
		if h&0x7fff >= 0x7bff {
			continue
		}
		next := F16ToF32(uint16(h + 1))
		mid := float32((float64(f) + float64(next)) / 2)
		even := uint16(h)
		if h&1 == 1 {
			even = uint16(h + 1)
		}
		if g := F32ToF16(mid); g != even {
			t.Fatalf("midpoint of %#04x and %#04x -> %#04x, want %#04x", h, h+1, g, even)
		}
		above := math.Nextafter32(mid, next)
		if g := F32ToF16(above); g != uint16(h+1) {
			t.Fatalf("just past the midpoint of %#04x -> %#04x", h, g)
		}
	}
	if g := F32ToF16(65520); g != 0x7c00 {
		t.Errorf("65520 -> %#04x, want infinity", g)
	}
	if g := F32ToF16(65519); g != 0x7bff {
		t.Errorf("65519 -> %#04x, want 65504", g)
	}
}

func TestBF16Conversions(t *testing.T) {
	for h := 0; h < 1<<16; h++ {
		f := BF16ToF32(uint16(h))
		if f != f {
			continue
		}
		if g := F32ToBF16(f); g != uint16(h) {
			t.Fatalf("%#04x -> %v -> %#04x", h, f, g)
		}
	}
	// 1 + 2^-8 lies halfway between 1 (0x3f80) and 1 + 2^-7 (0x3f81): to even.
	if g := F32ToBF16(1 + 1.0/256); g != 0x3f80 {
		t.Errorf("tie -> %#04x, want 0x3f80", g)
	}
	if g := F32ToBF16(1 + 3.0/256); g != 0x3f82 {
		t.Errorf("tie -> %#04x, want 0x3f82", g)
	}
	if g := F32ToBF16(float32(math.NaN())); BF16ToF32(g) == BF16ToF32(g) {
		t.Errorf("NaN -> %#04x", g)
	}
}

// TestReduceBytes: every type and op on values where the answer is known,
// integers wrapping, halves rounded once.
func TestReduceBytes(t *testing.T) {
	ints := func(t DType, vs ...int64) []byte {
		p := make([]byte, len(vs)*int(t.Size()))
		for i, v := range vs {
			switch t.Size() {
			case 4:
				binary.LittleEndian.PutUint32(p[4*i:], uint32(v))
			case 8:
				binary.LittleEndian.PutUint64(p[8*i:], uint64(v))
			}
		}
		return p
	}
	for _, dt := range []DType{I32, I64, U32, U64} {
		for _, c := range []struct {
			op     RedOp
			a, b   []int64
			expect []int64
		}{
			{Sum, []int64{1, -1, 5, 7, 100}, []int64{2, -3, -5, 1, 1}, []int64{3, -4, 0, 8, 101}},
			{Prod, []int64{3, -2, 0, 7, 1}, []int64{4, 5, 9, -1, 1}, []int64{12, -10, 0, -7, 1}},
			{Min, []int64{3, 9, 0, 7, 1}, []int64{4, 5, 9, 2, 1}, []int64{3, 5, 0, 2, 1}},
			{Max, []int64{3, 9, 0, 7, 1}, []int64{4, 5, 9, 2, 1}, []int64{4, 9, 9, 7, 1}},
		} {
			d, s := ints(dt, c.a...), ints(dt, c.b...)
			ReduceBytes(d, s, dt, c.op)
			if string(d) != string(ints(dt, c.expect...)) {
				t.Errorf("%s %s: got % x", dt, c.op, d)
			}
		}
	}
	// Signed and unsigned min differ on negative numbers.
	d, s := ints(I32, -1), ints(I32, 1)
	ReduceBytes(d, s, I32, Min)
	if int32(binary.LittleEndian.Uint32(d)) != -1 {
		t.Errorf("i32 min(-1, 1) = %d", int32(binary.LittleEndian.Uint32(d)))
	}
	d, s = ints(U32, -1), ints(U32, 1)
	ReduceBytes(d, s, U32, Min)
	if binary.LittleEndian.Uint32(d) != 1 {
		t.Errorf("u32 min(2^32-1, 1) = %d", binary.LittleEndian.Uint32(d))
	}
	// Wrapping: i64 max + 1.
	d, s = ints(I64, math.MaxInt64), ints(I64, 1)
	ReduceBytes(d, s, I64, Sum)
	if int64(binary.LittleEndian.Uint64(d)) != math.MinInt64 {
		t.Errorf("i64 wrap: %d", int64(binary.LittleEndian.Uint64(d)))
	}
	floats := func(vs ...float64) (f32, f64, f16, bf16 []byte) {
		f32, f64 = make([]byte, 4*len(vs)), make([]byte, 8*len(vs))
		f16, bf16 = make([]byte, 2*len(vs)), make([]byte, 2*len(vs))
		for i, v := range vs {
			binary.LittleEndian.PutUint32(f32[4*i:], math.Float32bits(float32(v)))
			binary.LittleEndian.PutUint64(f64[8*i:], math.Float64bits(v))
			binary.LittleEndian.PutUint16(f16[2*i:], F32ToF16(float32(v)))
			binary.LittleEndian.PutUint16(bf16[2*i:], F32ToBF16(float32(v)))
		}
		return
	}
	for _, c := range []struct {
		op           RedOp
		a, b, expect []float64
	}{
		{Sum, []float64{1.5, -2, 0.25}, []float64{2.25, 0.5, 0.25}, []float64{3.75, -1.5, 0.5}},
		{Prod, []float64{1.5, -2, 0.25}, []float64{2, 0.5, -4}, []float64{3, -1, -1}},
		{Min, []float64{1.5, -2, 0.25}, []float64{2, 0.5, -4}, []float64{1.5, -2, -4}},
		{Max, []float64{1.5, -2, 0.25}, []float64{2, 0.5, -4}, []float64{2, 0.5, 0.25}},
	} {
		a32, a64, a16, ab := floats(c.a...)
		b32, b64, b16, bb := floats(c.b...)
		e32, e64, e16, eb := floats(c.expect...)
		for _, x := range []struct {
			dt      DType
			d, s, e []byte
		}{{F32, a32, b32, e32}, {F64, a64, b64, e64}, {F16, a16, b16, e16}, {BF16, ab, bb, eb}} {
			ReduceBytes(x.d, x.s, x.dt, c.op)
			if string(x.d) != string(x.e) {
				t.Errorf("%s %s: got % x, want % x", x.dt, c.op, x.d, x.e)
			}
		}
	}
	// 1 + 2^-7 is a bf16 (7 bits of mantissa): the sum is exact.
	_, _, _, x := floats(1)
	_, _, _, y := floats(1.0 / 128)
	ReduceBytes(x, y, BF16, Sum)
	if BF16ToF32(binary.LittleEndian.Uint16(x)) != 1+1.0/128 {
		t.Errorf("bf16 1 + 2^-7 = %v", BF16ToF32(binary.LittleEndian.Uint16(x)))
	}
}

func FuzzParseDTypeRedOp(f *testing.F) {
	for _, s := range []string{"f32", "bf16", "u64", "sum", "max", "", "F32", "float", "avg"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if dt, err := ParseDType(s); err == nil {
			if back, err := ParseDType(dt.String()); err != nil || back != dt || dt.Size() == 0 {
				t.Fatalf("%q -> %v -> %v, %v", s, dt, back, err)
			}
		} else if err.Error() == "" {
			t.Fatal("empty error")
		}
		if op, err := ParseRedOp(s); err == nil {
			if back, err := ParseRedOp(op.String()); err != nil || back != op {
				t.Fatalf("%q -> %v -> %v, %v", s, op, back, err)
			}
		}
	})
}
