package window

import (
	"encoding/binary"
	"fmt"

	"github.com/luacoll/luacoll/transport"
)

// Buffer is memory on the rank's device that can be a source or a
// destination of window operations. It is not remotely accessible. A
// window's own data buffer is also available as a Buffer (a view).
type Buffer struct {
	r     *Rank
	reg   *transport.Region // nil for a view
	base  transport.Addr
	size  uint64
	name  string
	freed func() bool
	own   bool // freed flag below is ours
	dead  bool
}

// Private reports that no peer writes b: it is an allocation of its own
// (NewBuffer), not a window's memory.
func (b *Buffer) Private() bool { return b.reg != nil }

// NewBuffer allocates n zeroed bytes on the rank's device.
func (r *Rank) NewBuffer(n uint64) (*Buffer, error) {
	if n > MaxBytes {
		return nil, argErr("nbytes", "%d is larger than the limit %d", n, uint64(MaxBytes))
	}
	if err := r.checkHostFit(n); err != nil {
		return nil, fmt.Errorf("rank %d: buffer of %d bytes: %w", r.ID(), n, err)
	}
	reg, err := r.Backend.Alloc(n)
	if err != nil {
		return nil, fmt.Errorf("rank %d: buffer of %d bytes: %w", r.ID(), n, err)
	}
	b := &Buffer{r: r, reg: reg, base: reg.Local, size: n, name: "buffer", own: true}
	b.freed = func() bool { return b.dead }
	return b, nil
}

// Size returns the buffer's length in bytes.
func (b *Buffer) Size() uint64 { return b.size }

// Name describes the buffer in errors.
func (b *Buffer) Name() string { return b.name }

// Freed reports whether the buffer (or the window it views) was freed.
func (b *Buffer) Freed() bool { return b.freed() }

// Addr returns the buffer's device address, or an error once freed.
func (b *Buffer) Addr() (transport.Addr, error) {
	if b.freed() {
		return 0, &ErrFreed{What: b.name}
	}
	return b.base, nil
}

func (b *Buffer) check(offArg, nArg string, off, n uint64) error {
	if b.freed() {
		return &ErrFreed{What: b.name}
	}
	return checkRange(offArg, nArg, off, n, b.size, b.name)
}

// settle waits for the rank's stream so that synchronous accesses see
// everything enqueued before them.
func (b *Buffer) settle() error {
	return b.r.Sync(b.r.ctx())
}

// Fill enqueues a fill of the whole buffer.
func (b *Buffer) Fill(kind transport.FillKind, arg uint64) error {
	if b.freed() {
		return &ErrFreed{What: b.name}
	}
	b.r.Backend.Fill(b.r.Stream, b.base, b.size, kind, arg)
	return nil
}

// Read returns n bytes at off.
func (b *Buffer) Read(off, n uint64) ([]byte, error) { return b.read("n", off, n) }

// read is Read blaming nArg for a length that runs past the end (the
// fixed-width reads have no length argument: they blame off).
func (b *Buffer) read(nArg string, off, n uint64) ([]byte, error) {
	if err := b.check("off", nArg, off, n); err != nil {
		return nil, err
	}
	if err := b.settle(); err != nil {
		return nil, err
	}
	out := make([]byte, n)
	if err := b.r.Backend.Read(out, b.base.Add(off)); err != nil {
		return nil, fmt.Errorf("%s: read %d bytes at %d: %w", b.name, n, off, err)
	}
	return out, nil
}

// Write stores p at off.
func (b *Buffer) Write(off uint64, p []byte) error { return b.write("s", off, p) }

// write is Write blaming pArg for data that runs past the end.
func (b *Buffer) write(pArg string, off uint64, p []byte) error {
	if err := b.check("off", pArg, off, uint64(len(p))); err != nil {
		return err
	}
	if err := b.settle(); err != nil {
		return err
	}
	if err := b.r.Backend.Write(b.base.Add(off), p); err != nil {
		return fmt.Errorf("%s: write %d bytes at %d: %w", b.name, len(p), off, err)
	}
	return nil
}

// GetU32 reads a little-endian 32-bit value.
func (b *Buffer) GetU32(off uint64) (uint32, error) {
	p, err := b.read("off", off, 4)
	if err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint32(p), nil
}

// SetU32 writes a little-endian 32-bit value.
func (b *Buffer) SetU32(off uint64, v uint32) error {
	var p [4]byte
	binary.LittleEndian.PutUint32(p[:], v)
	return b.write("off", off, p[:])
}

// GetU64 reads a little-endian 64-bit value.
func (b *Buffer) GetU64(off uint64) (uint64, error) {
	p, err := b.read("off", off, 8)
	if err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint64(p), nil
}

// SetU64 writes a little-endian 64-bit value.
func (b *Buffer) SetU64(off uint64, v uint64) error {
	var p [8]byte
	binary.LittleEndian.PutUint64(p[:], v)
	return b.write("off", off, p[:])
}

// Checksum returns transport.Checksum of n bytes at off.
func (b *Buffer) Checksum(off, n uint64) (uint64, error) {
	if err := b.check("off", "n", off, n); err != nil {
		return 0, err
	}
	if err := b.settle(); err != nil {
		return 0, err
	}
	return b.r.Backend.Checksum(b.base.Add(off), n)
}

// Equal reports whether n bytes at off equal n bytes of other at otherOff.
func (b *Buffer) Equal(other *Buffer, off, otherOff, n uint64) (bool, error) {
	if err := b.check("off", "n", off, n); err != nil {
		return false, err
	}
	if other.freed() {
		return false, argErr("other", "%s has been freed", other.name)
	}
	if err := checkRange("other_off", "n", otherOff, n, other.size, other.name); err != nil {
		return false, err
	}
	if err := b.settle(); err != nil {
		return false, err
	}
	return b.r.Backend.Equal(b.base.Add(off), other.base.Add(otherOff), n)
}

// Release frees an owned buffer at teardown without waiting for the
// stream (the caller has drained it). Views and freed buffers are left.
func (b *Buffer) Release() {
	if b.own && !b.dead {
		b.dead = true
		_ = b.reg.Close()
	}
}

// Free releases the buffer; a view cannot be freed (free its window).
func (b *Buffer) Free() error {
	if !b.own {
		return fmt.Errorf("%s is a window's buffer: free the window instead", b.name)
	}
	if b.dead {
		return &ErrFreed{What: b.name}
	}
	// Operations already enqueued may still use it.
	if err := b.settle(); err != nil {
		b.dead = true
		_ = b.reg.Close()
		return err
	}
	b.dead = true
	return b.reg.Close()
}

// checkHostFit refuses a host buffer of n bytes that would not fit the
// host's available memory were every rank of this host to make one, as
// windows are checked (scripts run the same code on every rank): the
// memory is only promised at allocation, and filling it past what the
// host has wakes the out-of-memory killer instead of failing clearly.
func (r *Rank) checkHostFit(n uint64) error {
	if r.Backend == nil || r.Backend.Name() != "host" {
		return nil
	}
	here := 1
	if r.Topo != nil {
		for p := range r.N() {
			if p != r.ID() && r.Topo.Mappable(p) {
				here++
			}
		}
	}
	return transport.CheckMemoryFitOf("buffer", n, here, r.MemInfo)
}
