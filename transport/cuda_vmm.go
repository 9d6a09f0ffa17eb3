package transport

import (
	"context"
	"errors"
	"fmt"
	"time"

	"golang.org/x/sys/unix"

	"github.com/luacoll/luacoll/cuda"
)

// vmmRecvTimeout bounds the wait for a peer's descriptor once every rank
// has said it exported one.
const vmmRecvTimeout = 60 * time.Second

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

// vmmUnmap undoes vmmMap and releases the handle.
func (b *CUDABackend) vmmUnmap(m vmmMapping, gran uint64) error {
	return errors.Join(b.drv.MemUnmap(m.va, m.size), b.drv.MemAddressFree(m.va, roundUp(m.size, gran)), b.drv.MemRelease(m.h))
}

// vmmAlloc creates size bytes (whole granules) of this device's memory,
// exportable as a file descriptor, maps them here and zeroes them.
func (b *CUDABackend) vmmAlloc(size, gran uint64) (vmmMapping, error) {
	n := roundUp(size, gran)
	h, err := b.drv.MemCreate(b.dev, n)
	if err != nil {
		return vmmMapping{}, err
	}
	va, err := b.vmmMap(h, n, gran)
	if err != nil {
		_ = b.drv.MemRelease(h)
		return vmmMapping{}, err
	}
	m := vmmMapping{h: h, va: va, size: n}
	if err = b.drv.MemsetD8Async(va, 0, n, b.aux); err == nil {
		err = b.aux.Synchronize()
	}
	if err != nil {
		_ = b.vmmUnmap(m, gran)
		return vmmMapping{}, err
	}
	b.live.Add(1)
	return m, nil
}

// shareVMM is Share with ipc IPCVMM: this rank's part is cuMemCreate
// memory exported as a POSIX file descriptor; every rank passes its
// descriptor to every peer through their descriptor boxes (SCM_RIGHTS over
// a Unix socket), and each imports and maps the peers' parts. Two
// exchanges bracket the passing, so every box is open before anything is
// sent and every rank learns of any rank's failure.
func (b *CUDABackend) shareVMM(ctx context.Context, ex Exchanger, topo *Topology, size uint64) (*Region, error) {
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
	if st.Err == "" {
		if err := b.current(); err != nil {
			st.Err = err.Error()
		}
	}
	if st.Err == "" && b.box == nil {
		if b.box, err = OpenFDBox(b.job, rank); err != nil {
			b.box = nil
			st.Err = err.Error()
		}
	}
	if st.Err == "" {
		if local, err = b.vmmAlloc(size, gran); err == nil {
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
		return errors.Join(b.current(), b.vmmUnmap(m, gran))
	}
	peers := make([]vmmMapping, n)
	closePeers := func() error {
		b.quiesce()
		defer onThread()()
		errs := []error{b.current()}
		for r, m := range peers {
			if m.va != 0 && r != rank {
				if err := b.vmmUnmap(m, gran); err != nil {
					errs = append(errs, fmt.Errorf("unmapping rank %d's window: %w", r, err))
				}
			}
			peers[r] = vmmMapping{}
		}
		return errors.Join(errs...)
	}
	all, err := exchangeCUDA(ctx, ex, st)
	if err == nil {
		// Send while receiving: a sender blocks while its peer's queue is full.
		sent := make(chan error, 1)
		go func() {
			var errs []error
			for i := 1; i < n; i++ {
				errs = append(errs, b.box.Send((rank+i)%n, tag, fd))
			}
			sent <- errors.Join(errs...)
		}()
		// The exchange may have moved this goroutine to another thread.
		if e := b.current(); e != nil {
			st.Err = e.Error()
		}
		for i := 1; i < n && st.Err == ""; i++ {
			p := (rank + i) % n
			pfd, e := b.box.Recv(ctx, p, tag, vmmRecvTimeout)
			if e != nil {
				st.Err = e.Error()
				break
			}
			h, e := b.drv.MemImportFromFD(pfd)
			_ = unix.Close(pfd)
			if e != nil {
				st.Err = fmt.Sprintf("importing rank %d's window: %v", p, e)
				break
			}
			va, e := b.vmmMap(h, all[p].Size, gran)
			if e != nil {
				_ = b.drv.MemRelease(h)
				st.Err = fmt.Sprintf("mapping rank %d's window: %v", p, e)
				break
			}
			peers[p] = vmmMapping{h: h, va: va, size: all[p].Size}
		}
		if e := <-sent; e != nil && st.Err == "" {
			st.Err = e.Error()
		}
		if st.Err == "" {
			st = cudaShare{}
		}
		_, err = exchangeCUDA(ctx, ex, st)
	}
	if fd >= 0 {
		_ = unix.Close(fd)
	}
	if err != nil {
		_ = closePeers()
		_ = freeLocal()
		return nil, err
	}
	addrs := make([]Addr, n)
	for r, m := range peers {
		addrs[r] = Addr(m.va)
	}
	addrs[rank] = Addr(local.va)
	return NewRegion(size, Addr(local.va), addrs, closePeers, freeLocal), nil
}
