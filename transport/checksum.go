package transport

import (
	"encoding/binary"

	"github.com/luacoll/luacoll/kernels"
)

// The data functions below are the device kernels' own (kernels' host
// references), so that buffers filled or checked on the host backend and
// on a GPU hold and report exactly the same bytes.

// Checksum is b:checksum's function: len(b)*Golden plus, over the
// little-endian 8-byte words w_i of b (the last zero-padded), the sum of
// Mix64(w_i ^ i*CheckStep), modulo 2^64 (see kernels.Checksum).
func Checksum(b []byte) uint64 { return kernels.Checksum(b) }

// FillIota writes 32-bit little-endian words counting from start; a partial
// last word gets the leading bytes of its value.
func FillIota(b []byte, start uint32) {
	var w [4]byte
	for i := 0; i < len(b); i += 4 {
		binary.LittleEndian.PutUint32(w[:], start+uint32(i/4))
		copy(b[i:], w[:])
	}
}

// FillRand writes the pseudo-random stream of seed (see kernels.FillRand).
func FillRand(b []byte, seed uint64) { kernels.FillRand(b, seed) }
