package transport

import (
	"fmt"
	"runtime"
	"sync"
	"unsafe"
)

// Addr is a location a stream can read or write: a process address on the
// host backend, a device address on CUDA. Host addresses always point into
// memory mapped outside the Go heap (mmap), so the collector never moves or
// frees what they name.
type Addr uint64

// Add returns a+off.
func (a Addr) Add(off uint64) Addr { return a + Addr(off) }

func (a Addr) String() string { return fmt.Sprintf("0x%x", uint64(a)) }

// ptr turns a host address back into a pointer. The bits are reinterpreted
// rather than converted because the memory is mmap'd, not Go-managed.
func (a Addr) ptr() unsafe.Pointer {
	return *(*unsafe.Pointer)(unsafe.Pointer(&a))
}

// Pointer returns host address a as a pointer, for calls into C libraries.
func (a Addr) Pointer() unsafe.Pointer { return a.ptr() }

// HostBytes returns the n bytes at host address a as a slice. It must only
// be called with addresses of host memory that stays mapped while the slice
// is in use.
func HostBytes(a Addr, n uint64) []byte {
	if n == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(a.ptr()), n)
}

// hostU64 returns the 8-byte word at host address a.
func hostU64(a Addr) *uint64 { return (*uint64)(a.ptr()) }

// AddrOf returns the host address of the first byte of b. b must be memory
// mapped outside the Go heap (see Addr).
func AddrOf(b []byte) Addr {
	p := unsafe.Pointer(unsafe.SliceData(b))
	return *(*Addr)(unsafe.Pointer(&p))
}

// MemmoveSplit is the size from which Memmove spreads a copy over several
// goroutines (ranges that do not overlap), MemmovePart the least each one
// copies.
const (
	MemmoveSplit = 2 << 20
	MemmovePart  = 512 << 10
)

// Memmove copies src to dst as copy does (ranges may overlap); a copy of
// MemmoveSplit bytes or more between ranges that do not overlap is spread
// over up to 8 goroutines, as many as GOMAXPROCS allows (one core copies
// host memory at a fraction of what the memory system takes).
func Memmove(dst, src []byte) { plainCopy.move(dst, src) }

// CachedPiece is the piece MemmoveCached copies at a time: below the size
// from which Go's runtime copies with non-temporal stores (1 MiB on amd64),
// which leave the data in memory, out of the caches.
const CachedPiece = 512 << 10

// MemmoveCached is Memmove for ranges that do not overlap, copying
// CachedPiece bytes at a time so that the copy stays in the caches: the
// better choice when the data is read again soon and what a collective
// writes fits in the last-level cache (CacheBytes).
func MemmoveCached(dst, src []byte) { cachedCopy.move(dst, src) }

// copyWay is how a copy of ranges that do not overlap is done: from split
// bytes on, spread over goroutines of part bytes at least (up to 8, as
// many as GOMAXPROCS allows), each copying piece bytes at a time (0:
// whole).
type copyWay struct{ split, part, piece uint64 }

var (
	plainCopy  = copyWay{split: MemmoveSplit, part: MemmovePart}
	cachedCopy = copyWay{split: MemmoveSplit, part: MemmovePart, piece: CachedPiece}
)

// move copies src to dst the way w says (overlapping ranges: one copy).
func (w copyWay) move(dst, src []byte) {
	n := uint64(min(len(src), len(dst)))
	if n == 0 {
		return
	}
	d, sp := uintptr(unsafe.Pointer(unsafe.SliceData(dst))), uintptr(unsafe.Pointer(unsafe.SliceData(src)))
	overlap := d < sp+uintptr(n) && sp < d+uintptr(n)
	if overlap {
		copy(dst, src)
		return
	}
	parts := min(uint64(runtime.GOMAXPROCS(0)), 8, n/w.part)
	if n < w.split || parts < 2 {
		copyPieces(dst[:n], src[:n], w.piece)
		return
	}
	per := (n/parts + 4095) &^ 4095
	var wg sync.WaitGroup
	for off := uint64(0); off < n; off += per {
		end := min(off+per, n)
		wg.Add(1)
		go func() {
			defer wg.Done()
			copyPieces(dst[off:end], src[off:end], w.piece)
		}()
	}
	wg.Wait()
}

// copyPieces copies src to dst (the same length, apart) piece bytes at a
// time (0: at once).
func copyPieces(dst, src []byte, piece uint64) {
	n := uint64(len(src))
	if piece == 0 || n <= piece {
		copy(dst, src)
		return
	}
	for off := uint64(0); off < n; off += piece {
		end := min(off+piece, n)
		copy(dst[off:end], src[off:end])
	}
}
