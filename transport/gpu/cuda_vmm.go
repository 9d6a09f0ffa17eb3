package gpu

import (
	"context"
	"errors"
	"fmt"
	"time"

	"golang.org/x/sys/unix"

	"github.com/luacoll/luacoll/cuda"
	"github.com/luacoll/luacoll/transport"
)

// vmmPassTimeout bounds the passing of descriptors once every rank has said
// it exported one (each rank then sends and receives at once, so only a
// rank that stopped answering makes it run out).
const vmmPassTimeout = 60 * time.Second

// vmmMapping is one mapped VMM allocation: its handle and address range.
type vmmMapping struct {
	h    cuda.MemHandle
	va   cuda.DevicePtr
	size uint64
}

func roundUp(n, to uint64) uint64 { return (max(n, 1) + to - 1) / to * to }

// vmmMap reserves address space for size bytes, maps h there and gives
// this rank's device read-write access.
func (b *CUDABackend) vmmMap(h cuda.MemHandle, size, gran uint64) (cuda.DevicePtr, error) {
	va, err := b.drv.MemAddressReserve(roundUp(size, gran), gran)
	if err != nil {
		return 0, err
	}
	if err = b.drv.MemMap(va, size, 0, h); err == nil {
		if err = b.drv.MemSetAccess(va, size, b.dev); err != nil {
			_ = b.drv.MemUnmap(va, size)
		}
	}
	if err != nil {
		_ = b.drv.MemAddressFree(va, roundUp(size, gran))
		return 0, err
	}
	return va, nil
}

// vmmMapAt maps h at va, a place in a reserved range (0: reserve one for
// it, as vmmMap), and gives this device read-write access.
func (b *CUDABackend) vmmMapAt(va cuda.DevicePtr, h cuda.MemHandle, size, gran uint64) (cuda.DevicePtr, error) {
	if va == 0 {
		return b.vmmMap(h, size, gran)
	}
	if err := b.drv.MemMap(va, size, 0, h); err != nil {
		return 0, err
	}
	if err := b.drv.MemSetAccess(va, size, b.dev); err != nil {
		_ = b.drv.MemUnmap(va, size)
		return 0, err
	}
	return va, nil
}

// vmmUnmap undoes vmmMap and releases the handle.
func (b *CUDABackend) vmmUnmap(m vmmMapping, gran uint64) error {
	return errors.Join(b.drv.MemUnmap(m.va, m.size), b.drv.MemAddressFree(m.va, roundUp(m.size, gran)), b.drv.MemRelease(m.h))
}

// vmmAllocAt creates size bytes (whole granules) of this device's memory,
// exportable as a file descriptor, maps them at at (a place in a reserved
// range; 0: in a reservation of their own) and zeroes them.
func (b *CUDABackend) vmmAllocAt(at cuda.DevicePtr, size, gran uint64) (vmmMapping, error) {
	n := roundUp(size, gran)
	h, err := b.drv.MemCreate(b.dev, n)
	if err != nil {
		return vmmMapping{}, err
	}
	va, err := b.vmmMapAt(at, h, n, gran)
	if err != nil {
		_ = b.drv.MemRelease(h)
		return vmmMapping{}, err
	}
	m := vmmMapping{h: h, va: va, size: n}
	if err = b.drv.MemsetD8Async(va, 0, n, b.aux); err == nil {
		err = b.aux.Synchronize()
	}
	if err != nil {
		if at != 0 {
			_ = errors.Join(b.drv.MemUnmap(va, n), b.drv.MemRelease(h))
		} else {
			_ = b.vmmUnmap(m, gran)
		}
		return vmmMapping{}, err
	}
	b.live.Add(1)
	return m, nil
}

// passVMM sends fd to every peer and receives every peer's descriptor
// (passFDs to all).
func (b *CUDABackend) passVMM(ctx context.Context, rank, n int, tag uint64, fd int, st *cudaShare, use func(p, pfd int) error) {
	peers := make([]int, 0, n-1)
	for i := 1; i < n; i++ {
		peers = append(peers, (rank+i)%n)
	}
	b.passFDs(ctx, peers, tag, fd, st, use)
}

// passFDs sends fd to peers and receives each one's descriptor under tag (FDBox.Pass: a loop that never blocks). Each descriptor
// received is handed to use (and closed after) while st has no error; once
// st has one, the loop only finishes its sends and keeps taking in, so no
// peer is left waiting on this rank. It ends when every send is done and
// every peer's descriptor came, or at vmmPassTimeout or ctx's end
// (recorded in st).
func (b *CUDABackend) passFDs(ctx context.Context, peers []int, tag uint64, fd int, st *cudaShare, use func(p, pfd int) error) {
	err := b.box.Pass(ctx, peers, tag, fd, vmmPassTimeout, func(p, pfd int) error {
		if st.Err != "" {
			return nil // failed before the passing: only take in
		}
		return use(p, pfd)
	})
	if err != nil && st.Err == "" {
		st.Err = err.Error()
	}
}

// shareVMM is Share with ipc IPCVMM: this rank's part is cuMemCreate
// memory exported as a POSIX file descriptor; every rank passes its
// descriptor to every peer through their descriptor boxes (SCM_RIGHTS over
// a Unix socket), and each imports and maps the peers' parts. Two
// exchanges bracket the passing, so every box is open before anything is
// sent and every rank learns of any rank's failure.
//
// With flat (a symmetric window), every rank allocates the same whole
// granules and maps every part, its own included, into one reserved range
// at base + r*stride; the region says so (Region.Flat).
func (b *CUDABackend) shareVMM(ctx context.Context, ex transport.Exchanger, topo *transport.Topology, size uint64, flat bool) (*transport.Region, error) {
	b.quiesce()
	defer onThread()()
	rank, n := ex.Rank(), ex.Size()
	st := cudaShare{Err: ipcReach(topo)}
	var local vmmMapping
	fd := -1
	gran, err := b.drv.MemGetAllocationGranularity(b.dev, cuda.GranularityRecommended)
	if err != nil && st.Err == "" {
		st.Err = err.Error()
	}
	var fr *flatRange
	if flat && st.Err == "" {
		if fr, err = b.reserveFlat(roundUp(size, gran), gran, n); err != nil {
			st.Err = err.Error()
		}
	}
	if st.Err == "" {
		if err := b.current(); err != nil {
			st.Err = err.Error()
		}
	}
	if st.Err == "" && b.box == nil {
		if b.box, err = transport.OpenFDBox(b.job, rank); err != nil {
			b.box = nil
			st.Err = err.Error()
		}
	}
	if st.Err == "" {
		if local, err = b.vmmAllocAt(fr.at(rank), size, gran); err == nil {
			if fd, err = b.drv.MemExportToFD(local.h); err != nil {
				fd = -1
			}
		}
		if err != nil {
			st.Err = err.Error()
		}
		st.Size = local.size
	}
	b.shares++
	tag := b.shares
	freeLocal := func() error {
		if local.va == 0 {
			return nil
		}
		b.quiesce()
		defer onThread()()
		m := local
		local = vmmMapping{}
		b.live.Add(-1)
		return errors.Join(b.current(), fr.unmap(b, m, gran), fr.release(b))
	}
	peers := make([]vmmMapping, n)
	closePeers := func() error {
		b.quiesce()
		defer onThread()()
		errs := []error{b.current()}
		for r, m := range peers {
			if m.va != 0 && r != rank {
				if err := fr.unmap(b, m, gran); err != nil {
					errs = append(errs, fmt.Errorf("unmapping rank %d's window: %w", r, err))
				}
			}
			peers[r] = vmmMapping{}
		}
		return errors.Join(errs...)
	}
	all, err := exchangeCUDA(ctx, ex, st)
	if err == nil {
		// The exchange may have moved this goroutine to another thread.
		if e := b.current(); e != nil {
			st.Err = e.Error()
		}
		b.passVMM(ctx, rank, n, tag, fd, &st, func(p, pfd int) error {
			h, e := b.drv.MemImportFromFD(pfd)
			if e != nil {
				return fmt.Errorf("importing rank %d's window: %w", p, e)
			}
			if fr != nil && all[p].Size != fr.stride {
				_ = b.drv.MemRelease(h)
				return fmt.Errorf("rank %d's part of a symmetric window is %d bytes, this rank's %d", p, all[p].Size, fr.stride)
			}
			va, e := b.vmmMapAt(fr.at(p), h, all[p].Size, gran)
			if e != nil {
				_ = b.drv.MemRelease(h)
				return fmt.Errorf("mapping rank %d's window: %w", p, e)
			}
			peers[p] = vmmMapping{h: h, va: va, size: all[p].Size}
			return nil
		})
	}
	err = b.endPass(ctx, ex, st, err, fd, tag)
	if err != nil {
		_ = closePeers()
		if local.va != 0 {
			_ = freeLocal()
		} else {
			_ = fr.release(b)
		}
		return nil, err
	}
	addrs := make([]transport.Addr, n)
	for r, m := range peers {
		addrs[r] = transport.Addr(m.va)
	}
	addrs[rank] = transport.Addr(local.va)
	reg := transport.NewRegion(size, transport.Addr(local.va), addrs, closePeers, freeLocal)
	if fr != nil {
		reg.Flat = &transport.FlatRange{Base: transport.Addr(fr.base), Stride: fr.stride, Granularity: gran}
	}
	return reg, nil
}

// endPass ends a share's passing of descriptors: unless the first
// exchange failed (err), the second one, where every rank learns whether
// all mapped every part; then this rank's descriptor is closed and any
// descriptor left over in the box (a failure cut the receiving short) is
// discarded, so that none keeps a peer's memory alive. Every send ended
// before the second exchange.
func (b *CUDABackend) endPass(ctx context.Context, ex transport.Exchanger, st cudaShare, err error, fd int, tag uint64) error {
	if err == nil {
		_, err = exchangeCUDA(ctx, ex, cudaShare{Err: st.Err})
	}
	if fd >= 0 {
		_ = unix.Close(fd)
	}
	if b.box != nil {
		b.box.Discard(tag)
	}
	return err
}

// flatRange is the reserved range of a symmetric window; a nil *flatRange
// stands for "each mapping in its own reservation".
type flatRange struct {
	base   cuda.DevicePtr
	stride uint64
	n      int
}

// reserveFlat reserves n parts of stride bytes in one range.
func (b *CUDABackend) reserveFlat(stride, gran uint64, n int) (*flatRange, error) {
	base, err := b.drv.MemAddressReserve(stride*uint64(n), gran)
	if err != nil {
		return nil, fmt.Errorf("reserving %d x %d bytes for a symmetric window: %w", n, stride, err)
	}
	return &flatRange{base: base, stride: stride, n: n}, nil
}

// at is where rank r's part goes (0: anywhere).
func (f *flatRange) at(r int) cuda.DevicePtr {
	if f == nil {
		return 0
	}
	return f.base + cuda.DevicePtr(uint64(r)*f.stride)
}

// unmap undoes a mapping made at(r) (vmmUnmapAt) or in its own reservation.
func (f *flatRange) unmap(b *CUDABackend, m vmmMapping, gran uint64) error {
	if f == nil {
		return b.vmmUnmap(m, gran)
	}
	return errors.Join(b.drv.MemUnmap(m.va, m.size), b.drv.MemRelease(m.h))
}

// release frees the reserved range once every part is unmapped.
func (f *flatRange) release(b *CUDABackend) error {
	if f == nil || f.base == 0 {
		return nil
	}
	err := b.drv.MemAddressFree(f.base, f.stride*uint64(f.n))
	f.base = 0
	return err
}
