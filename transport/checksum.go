package transport

import "encoding/binary"

// Mix64 is the 64-bit finalizer both backends use for checksums and random
// fills (a splitmix64 step).
func Mix64(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// Checksum is the checksum of b that every backend computes the same way:
// the little-endian 8-byte words w_i of b (the last one zero-padded) give
// n + sum_i Mix64(w_i ^ (i * 0x100000001b3)), modulo 2^64. A sum of
// independent terms lets a GPU compute it in parallel.
func Checksum(b []byte) uint64 {
	h := uint64(len(b))
	i := 0
	for ; i+8 <= len(b); i += 8 {
		w := binary.LittleEndian.Uint64(b[i:])
		h += Mix64(w ^ (uint64(i/8) * 0x100000001b3))
	}
	if i < len(b) {
		var tail [8]byte
		copy(tail[:], b[i:])
		w := binary.LittleEndian.Uint64(tail[:])
		h += Mix64(w ^ (uint64(i/8) * 0x100000001b3))
	}
	return h
}

// FillIota writes 32-bit little-endian words counting from start; a partial
// last word gets the leading bytes of its value.
func FillIota(b []byte, start uint32) {
	var w [4]byte
	for i := 0; i < len(b); i += 4 {
		binary.LittleEndian.PutUint32(w[:], start+uint32(i/4))
		copy(b[i:], w[:])
	}
}

// FillRand writes the pseudo-random 32-bit words low32(Mix64(seed + i)).
func FillRand(b []byte, seed uint64) {
	var w [4]byte
	for i := 0; i < len(b); i += 4 {
		binary.LittleEndian.PutUint32(w[:], uint32(Mix64(seed+uint64(i/4))))
		copy(b[i:], w[:])
	}
}
