package kernels

import "encoding/binary"

// Host reference implementations of the data kernels, bit-exact with the
// device, so that the host backend produces and checks the same data.

const (
	// Golden is 2^64 divided by the golden ratio, the splitmix64 increment.
	Golden uint64 = 0x9E3779B97F4A7C15
	// CheckStep is the per-word position constant of Checksum.
	CheckStep uint64 = 0xD6E8FEB86659FD93
)

// Mix64 is splitmix64's output function, a bijection on uint64:
//
//	z = (z ^ z>>30) * 0xBF58476D1CE4E5B9
//	z = (z ^ z>>27) * 0x94D049BB133111EB
//	return z ^ z>>31
func Mix64(z uint64) uint64 {
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9
	z = (z ^ (z >> 27)) * 0x94D049BB133111EB
	return z ^ (z >> 31)
}

// RandWord returns word i of the pseudo-random stream of seed:
// Mix64(seed + (i+1)*Golden), i.e. the i-th splitmix64 output. Each word
// depends only on (seed, i), so the device computes them in parallel.
func RandWord(seed, i uint64) uint64 { return Mix64(seed + (i+1)*Golden) }

// FillRand fills b like the fill kernel's rand mode: byte k is byte k%8
// (little endian) of RandWord(seed, k/8).
func FillRand(b []byte, seed uint64) {
	var w [8]byte
	i := uint64(0)
	for ; len(b) >= 8; i++ {
		binary.LittleEndian.PutUint64(b, RandWord(seed, i))
		b = b[8:]
	}
	if len(b) > 0 {
		binary.LittleEndian.PutUint64(w[:], RandWord(seed, i))
		copy(b, w[:])
	}
}

// FillIota32 fills dst like the fill kernel's iota mode: dst[i] = start+i
// (mod 2^32), stored little endian.
func FillIota32(dst []uint32, start uint32) {
	for i := range dst {
		dst[i] = start + uint32(i)
	}
}

// Checksum is the checksum kernel's function over b:
//
//	len(b)*Golden + Σ_i Mix64(w_i ^ i*CheckStep)   (mod 2^64)
//
// where w_i is the i-th 8-byte little-endian word of b, the last one
// zero-padded. It is a sum, so partial results over word-aligned pieces
// combine by addition (see ChecksumPart).
func Checksum(b []byte) uint64 {
	return uint64(len(b))*Golden + ChecksumPart(b, 0)
}

// ChecksumPart returns Σ Mix64(w_i ^ i*CheckStep) over the words of b,
// numbering them from firstWord. It leaves out the length term of Checksum.
func ChecksumPart(b []byte, firstWord uint64) uint64 {
	var sum uint64
	i := firstWord
	for ; len(b) >= 8; i++ {
		sum += Mix64(binary.LittleEndian.Uint64(b) ^ (i * CheckStep))
		b = b[8:]
	}
	if len(b) > 0 {
		var w [8]byte
		copy(w[:], b)
		sum += Mix64(binary.LittleEndian.Uint64(w[:]) ^ (i * CheckStep))
	}
	return sum
}

// CountDiff is the equal kernel's function: the number of positions
// k < min(len(a), len(b)) where a[k] != b[k].
func CountDiff(a, b []byte) uint64 {
	n := min(len(a), len(b))
	var c uint64
	for k := 0; k < n; k++ {
		if a[k] != b[k] {
			c++
		}
	}
	return c
}
