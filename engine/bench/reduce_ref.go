package bench

import (
	"encoding/binary"
	"math"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/luacoll/luacoll/kernels"
	"github.com/luacoll/luacoll/transport"
)

// The reductions' data: element i of rank r's input in the run of seed is
// a function of (seed, r, i) alone, so every rank computes the reference
// of any element without the others' inputs.

// redWord is the random word of element i of rank r.
func redWord(seed uint64, r int, i uint64) uint64 {
	return kernels.Mix64(seed ^ uint64(r+1)*kernels.CheckStep ^ (i+1)*kernels.Golden)
}

// redFloat is a float element's value before it is rounded to its type:
// in [-1, 1) for sums, min and max; in [0.5, 1.5) for products, so that
// they neither vanish nor grow past the type.
func redFloat(w uint64, op transport.RedOp) float64 {
	u := float64(w>>11) / (1 << 53)
	if op == kernels.Prod {
		return 0.5 + u
	}
	return 2*u - 1
}

// putElem writes element w (a word, or a float's value) in type t at p.
func putElem(p []byte, t transport.DType, op transport.RedOp, w uint64) {
	switch t {
	case kernels.F32:
		binary.LittleEndian.PutUint32(p, math.Float32bits(float32(redFloat(w, op))))
	case kernels.F64:
		binary.LittleEndian.PutUint64(p, math.Float64bits(redFloat(w, op)))
	case kernels.F16:
		binary.LittleEndian.PutUint16(p, kernels.F32ToF16(float32(redFloat(w, op))))
	case kernels.BF16:
		binary.LittleEndian.PutUint16(p, kernels.F32ToBF16(float32(redFloat(w, op))))
	case kernels.I32, kernels.U32:
		binary.LittleEndian.PutUint32(p, uint32(w))
	default:
		binary.LittleEndian.PutUint64(p, w)
	}
}

// redInput fills p with rank r's elements first, first+1, ... of the run.
func redInput(p []byte, t transport.DType, op transport.RedOp, seed uint64, r int, first uint64) {
	sz := t.Size()
	inParts(uint64(len(p))/sz, func(from, to uint64) {
		for k := from; k < to; k++ {
			putElem(p[k*sz:], t, op, redWord(seed, r, first+k))
		}
	})
}

// redPart is the fewest elements a goroutine of inParts takes.
const redPart = 1 << 20

// inParts calls f over [0, n) in parts of at least redPart elements, on
// as many goroutines as the process may run at once (the host side of a
// large size: filling and checking 1 GiB a rank took minutes on one).
func inParts(n uint64, f func(from, to uint64)) {
	parts := min(uint64(runtime.GOMAXPROCS(0)), n/redPart)
	if parts <= 1 {
		f(0, n)
		return
	}
	var wg sync.WaitGroup
	for i := range parts {
		from, to := n*i/parts, n*(i+1)/parts
		wg.Add(1)
		go func() {
			defer wg.Done()
			f(from, to)
		}()
	}
	wg.Wait()
}

// floatOf reads an element of a float type as a float64 (exactly).
func floatOf(p []byte, t transport.DType) float64 {
	switch t {
	case kernels.F32:
		return float64(math.Float32frombits(binary.LittleEndian.Uint32(p)))
	case kernels.F64:
		return math.Float64frombits(binary.LittleEndian.Uint64(p))
	case kernels.F16:
		return float64(kernels.F16ToF32(binary.LittleEndian.Uint16(p)))
	}
	return float64(kernels.BF16ToF32(binary.LittleEndian.Uint16(p)))
}

// redTolerance is the relative error a float reduction over ranks may
// carry: a rounding to the type at each of the ranks-1 steps, twice over.
func redTolerance(t transport.DType, ranks int) float64 {
	eps := map[transport.DType]float64{kernels.F32: 0x1p-24, kernels.F64: 0x1p-53, kernels.F16: 0x1p-11, kernels.BF16: 0x1p-8}[t]
	return 2 * float64(ranks) * eps
}

// redWrong compares got, elements first, first+1, ... of the reduction
// over ranks ranks of the run's inputs, with the host reference: integers
// exactly (wrapping), min and max exactly, float sums and products within
// redTolerance of the sum of magnitudes (or the product's). It returns
// how many elements are wrong.
func redWrong(got []byte, t transport.DType, op transport.RedOp, seed uint64, ranks int, first uint64) int {
	var wrong atomic.Int64
	inParts(uint64(len(got))/t.Size(), func(from, to uint64) {
		wrong.Add(int64(redWrongRange(got, t, op, seed, ranks, first, from, to)))
	})
	return int(wrong.Load())
}

// redWrongRange is redWrong over elements [from, to) of got.
func redWrongRange(got []byte, t transport.DType, op transport.RedOp, seed uint64, ranks int, first, from, to uint64) int {
	sz := t.Size()
	var e, a [8]byte
	wrong := 0
	tol := redTolerance(t, ranks)
	for k := from; k < to; k++ {
		g := got[k*sz : (k+1)*sz]
		if !t.Float() {
			acc := a[:sz]
			putElem(acc, t, op, redWord(seed, 0, first+k))
			for r := 1; r < ranks; r++ {
				putElem(e[:sz], t, op, redWord(seed, r, first+k))
				kernels.ReduceBytes(acc, e[:sz], t, op)
			}
			if string(acc) != string(g) {
				wrong++
			}
			continue
		}
		ref, mag := 0.0, 0.0
		for r := 0; r < ranks; r++ {
			putElem(e[:sz], t, op, redWord(seed, r, first+k))
			v := floatOf(e[:sz], t)
			switch {
			case r == 0:
				ref = v
			case op == kernels.Sum:
				ref += v
			case op == kernels.Prod:
				ref *= v
			case op == kernels.Min:
				ref = math.Min(ref, v)
			default:
				ref = math.Max(ref, v)
			}
			mag += math.Abs(v)
		}
		if op == kernels.Prod {
			mag = math.Abs(ref)
		}
		if d := math.Abs(floatOf(g, t) - ref); d > tol*mag || d != d {
			wrong++
		}
	}
	return wrong
}
