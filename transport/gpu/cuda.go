package gpu

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/luacoll/luacoll/cuda"
	"github.com/luacoll/luacoll/kernels"
	"github.com/luacoll/luacoll/transport"
	"github.com/luacoll/luacoll/transport/knobs"
)

// CUDABackend keeps a rank's memory on one GPU: windows in device memory
// shared with same-host peers through CUDA IPC, a CUstream for the stream,
// copy engines or kernels for data and NVRTC-compiled kernels for signals,
// waits (with a device-side timeout and a host-mapped abort flag) and data
// checks. Every entry point makes the rank's context current on the calling
// thread first, so any goroutine may call it.
type CUDABackend struct {
	drv     *cuda.Driver
	ctx     *cuda.Context
	dev     cuda.Device
	ordinal int
	uuid    string
	byUUID  map[string]cuda.Device
	k       *kernels.Kernels
	job     string
	// flag is the host-mapped abort flag every device wait watches.
	flag *cuda.MappedMem
	// result receives checksum and equal results (host-mapped, 8 bytes).
	result *cuda.MappedMem
	aux    *cuda.Stream // for synchronous checks
	mu     sync.Mutex   // guards aux and result
	live   atomic.Int64 // device allocations not yet freed
	// timeoutHint explains device waits' timeouts (SetTimeoutHint).
	timeoutHint string
	// streams are the rank streams made here (see quiesce).
	smu     sync.Mutex
	streams []*CUDAStream
	// prelaunch: new streams prelaunch fused steps (see SetPrelaunch).
	prelaunch bool
	// box passes VMM windows' file descriptors (opened by the first one);
	// shares counts the VMM windows, tagging their descriptors.
	box    *transport.FDBox
	shares uint64
	// hostRanges are the windows in device-mapped host memory (the proxy
	// path, cuda_proxy.go).
	hmu        sync.Mutex
	hostRanges []hostRange
	// hostBuffers: buffers are device-mapped host memory too (a job
	// with network peers; see UseHostBuffers).
	hostBuffers atomic.Bool
	// planFuse lets a plan's replays in stream mode share a launch where
	// one replay's last run of steps meets the next one's first
	// (knobs.PlanFuse).
	planFuse bool
}

// By default the last run of steps of a plan's replay in stream mode and
// the first of the next share one launch, also across p:run calls (the
// last one is held back until the next call, or launched alone by
// anything else on the stream, a sync, or 20 us without a call);
// knobs.PlanFuse set to "0" gives every run its own launch.

// NewCUDABackend opens GPU gpus[localRank] (or localRank modulo the device
// count when gpus is empty) for job; localRank is the rank's index among
// the ranks that share this machine's devices.
func NewCUDABackend(job string, localRank int, gpus []int) (*CUDABackend, error) {
	defer onThread()()
	drv, err := cuda.Load()
	if err != nil {
		return nil, fmt.Errorf("cuda backend: %w", err)
	}
	n, err := drv.DeviceCount()
	if err != nil {
		return nil, fmt.Errorf("cuda backend: %w", err)
	}
	if n == 0 {
		return nil, errors.New("cuda backend: no CUDA device")
	}
	ord := localRank % n
	if len(gpus) > 0 {
		if localRank >= len(gpus) {
			return nil, fmt.Errorf("cuda backend: --gpus lists %d devices, rank %d of this machine has none", len(gpus), localRank)
		}
		ord = gpus[localRank]
		if ord >= n {
			return nil, fmt.Errorf("cuda backend: --gpus names device %d, this host has %d", ord, n)
		}
	}
	b := &CUDABackend{drv: drv, ordinal: ord, job: job, byUUID: map[string]cuda.Device{}}
	if v := knobs.Prelaunch.Get(); v == "1" || v == "2" {
		b.prelaunch = true // until SetPrelaunch says otherwise
	}
	b.planFuse = knobs.PlanFuse.Get() != "0"
	for i := 0; i < n; i++ {
		d, err := drv.DeviceGet(i)
		if err != nil {
			return nil, fmt.Errorf("cuda backend: %w", err)
		}
		u, err := drv.DeviceUUID(d)
		if err != nil {
			return nil, fmt.Errorf("cuda backend: %w", err)
		}
		b.byUUID[u] = d
		if i == ord {
			b.dev, b.uuid = d, u
		}
	}
	if b.ctx, err = drv.PrimaryCtxRetain(b.dev); err != nil {
		return nil, fmt.Errorf("cuda backend: device %d: %w", ord, err)
	}
	fail := func(err error) (*CUDABackend, error) {
		_ = b.Close()
		return nil, fmt.Errorf("cuda backend: device %d: %w", ord, err)
	}
	if err := b.ctx.SetCurrent(); err != nil {
		return fail(err)
	}
	// The first run of a build compiles the kernels, and says so: one rank
	// of the machine compiles while the others wait for its cache file
	// (kernels.Load), so one line.
	notice := func(line string) { fmt.Fprintf(os.Stderr, "luacoll: %s\n", line) }
	if b.k, err = kernels.Load(drv, b.ctx, kernels.Options{PutBlocksPerSM: int(knobs.PutBlocksPerSM.Or(0)), Notice: notice}); err != nil {
		return fail(err)
	}
	if b.flag, err = drv.AllocMapped(64); err != nil {
		return fail(err)
	}
	if b.result, err = drv.AllocMapped(64); err != nil {
		return fail(err)
	}
	if b.aux, err = drv.StreamCreate(); err != nil {
		return fail(err)
	}
	return b, nil
}

// current makes the backend's context current on the calling thread; once
// the backend is closed (a plan or window freed after its rank's comm
// closed) it says so instead.
func (b *CUDABackend) current() error {
	if b.ctx == nil {
		return errBackendClosed
	}
	return b.ctx.SetCurrent()
}

// errBackendClosed is what the backend's calls say after Close.
var errBackendClosed = errors.New("the CUDA backend is closed")

// onThread keeps the calling goroutine on its OS thread until the function
// it returns runs (defer onThread()()): a context is current per thread,
// and a goroutine that moved to another thread between making it current
// and a driver call would make that call without it (for graph launches
// the driver then faults instead of failing).
func onThread() func() {
	runtime.LockOSThread()
	return runtime.UnlockOSThread
}

// Name implements Backend.
func (b *CUDABackend) Name() string { return fmt.Sprintf("cuda:%d", b.ordinal) }

// Identity implements Backend.
func (b *CUDABackend) Identity() transport.Identity { return transport.LocalIdentity("cuda:" + b.uuid) }

// Describe implements Backend: every device the driver shows this rank
// (cuda.Driver.DescribeDevice, as `luacoll info` reads them; what could not
// be read is named in Model), the driver's version and NVRTC's and NCCL's
// (each loaded for the question and closed again).
func (b *CUDABackend) Describe() transport.Description {
	lib := func(l cuda.LibInfo) string {
		if !l.Found {
			return "not found"
		}
		return l.Version
	}
	desc := transport.Description{Versions: map[string]string{
		"cuda_driver": b.drv.VersionString(),
		"nvrtc":       lib(cuda.ProbeNVRTC()),
		"nccl":        lib(cuda.ProbeNCCL()),
	}, MPS: "unknown"}
	n, err := b.drv.DeviceCount()
	if err != nil {
		n = 0
	}
	for i := range n {
		di := transport.DeviceInfo{Name: fmt.Sprintf("cuda:%d", i), Mine: i == b.ordinal}
		d, err := b.drv.DeviceGet(i)
		if err != nil {
			di.Model = "unknown: " + err.Error()
			desc.Devices = append(desc.Devices, di)
			continue
		}
		c := b.drv.DescribeDevice(i, d)
		di.Model, di.UUID, di.PCIBusID, di.MemoryBytes = c.Name, c.UUID, c.PCIBusID, c.TotalMem
		di.ComputeCapability = fmt.Sprintf("%d.%d", c.CCMajor, c.CCMinor)
		di.Multicast = c.Multicast
		if i == b.ordinal {
			desc.MPS = c.MPS
		}
		if c.Err != "" {
			di.Model += " (unknown: " + c.Err + ")"
		}
		desc.Devices = append(desc.Devices, di)
	}
	return desc
}

var _ transport.CPULocal = (*CUDABackend)(nil)

// LocalCPUList implements CPULocal: the device's PCI function's
// local_cpulist in sysfs.
func (b *CUDABackend) LocalCPUList() string {
	bus, err := b.drv.DevicePCIBusID(b.dev)
	if err != nil {
		return ""
	}
	return cuda.LocalCPUList(bus)
}

// GPUPeer implements Backend: the same GPU, or one with peer access.
func (b *CUDABackend) GPUPeer(id transport.Identity) bool {
	u, ok := strings.CutPrefix(id.Device, "cuda:")
	if !ok {
		return false
	}
	d, ok := b.byUUID[u]
	if !ok {
		return false
	}
	if d == b.dev {
		return true
	}
	can, err := b.drv.DeviceCanAccessPeer(b.dev, d)
	return err == nil && can
}

// allocSize is what alloc asks the driver for: size rounded up to 256
// bytes, and from 1 MiB up to whole 2 MiB pages (so 1 MiB takes 2 MiB). Peers map a window with
// legacy IPC; an allocation that ends inside a 2 MiB page measured 310
// GB/s per direction when two GPUs copy into each other's window at once,
// against 390 for one of whole pages (2 x H200, copy engines, 1 GiB).
func allocSize(size uint64) uint64 {
	round := uint64(256)
	if size >= 1<<20 {
		round = 2 << 20
	}
	if size == 0 {
		return round
	}
	return (size + round - 1) / round * round
}

func (b *CUDABackend) alloc(size uint64) (cuda.DevicePtr, error) {
	b.quiesce()
	defer onThread()()
	if err := b.current(); err != nil {
		return 0, err
	}
	n := allocSize(size)
	p, err := b.drv.MemAlloc(n)
	if err != nil {
		return 0, err
	}
	if err = b.drv.MemsetD8Async(p, 0, n, b.aux); err == nil {
		err = b.aux.Synchronize()
	}
	if err != nil {
		_ = b.drv.MemFree(p)
		return 0, err
	}
	b.live.Add(1)
	return p, nil
}

func (b *CUDABackend) free(p cuda.DevicePtr) error {
	if b.ctx == nil {
		return nil // closed: releasing the context freed everything
	}
	b.quiesce()
	defer onThread()()
	if err := b.current(); err != nil {
		return err
	}
	b.live.Add(-1)
	return b.drv.MemFree(p)
}

// Live is the number of device allocations not yet freed (tests).
func (b *CUDABackend) Live() int64 { return b.live.Load() }

// Read implements Backend.
func (b *CUDABackend) Read(dst []byte, src transport.Addr) error {
	b.quiesce()
	defer onThread()()
	if len(dst) == 0 {
		return nil
	}
	if err := b.current(); err != nil {
		return err
	}
	return b.drv.MemcpyDtoH(dst, cuda.DevicePtr(src))
}

// Write implements Backend. A plain cuMemcpyHtoD from pageable memory may
// return before its DMA has landed, and the rank's stream does not wait
// for the legacy default stream; so the copy goes on the side stream and
// is waited for, and later stream work sees the bytes.
func (b *CUDABackend) Write(dst transport.Addr, src []byte) error {
	b.quiesce()
	defer onThread()()
	if len(src) == 0 {
		return nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.current(); err != nil {
		return err
	}
	if err := b.drv.MemcpyHtoDAsync(cuda.DevicePtr(dst), unsafe.Pointer(unsafe.SliceData(src)), uint64(len(src)), b.aux); err != nil {
		return err
	}
	return b.aux.Synchronize()
}

// Fill implements Backend.
func (b *CUDABackend) Fill(s transport.Stream, dst transport.Addr, n uint64, kind transport.FillKind, arg uint64) {
	cs, ok := s.(*CUDAStream)
	if !ok {
		return
	}
	cs.enqueue(func() error {
		p := cuda.DevicePtr(dst)
		switch kind {
		case transport.FillConst:
			return b.k.FillByte(cs.s, p, n, byte(arg))
		case transport.FillRandU32:
			return b.k.FillRand(cs.s, p, n, arg)
		}
		if err := b.k.FillIota32(cs.s, p, n/4, uint32(arg)); err != nil {
			return err
		}
		if tail := n % 4; tail > 0 {
			// The partial last word gets the leading bytes of its value.
			v := uint32(arg) + uint32(n/4)
			for i := uint64(0); i < tail; i++ {
				if err := b.drv.MemsetD8Async(p.Add(n-tail+i), byte(v>>(8*i)), 1, cs.s); err != nil {
					return err
				}
			}
		}
		return nil
	})
}

// onAux runs f with the side stream to itself and the context current on
// the calling thread, after cancelling any waiting prelaunched kernel.
func (b *CUDABackend) onAux(f func() error) error {
	b.quiesce()
	defer onThread()()
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.current(); err != nil {
		return err
	}
	return f()
}

// runAux enqueues f on the side stream, waits for it, and returns the
// 64-bit result it left in host-mapped memory.
func (b *CUDABackend) runAux(f func(s *cuda.Stream, out cuda.DevicePtr) error) (uint64, error) {
	var v uint64
	err := b.onAux(func() error {
		if err := f(b.aux, b.result.Dev); err != nil {
			return err
		}
		if err := b.aux.Synchronize(); err != nil {
			return err
		}
		v = atomic.LoadUint64((*uint64)(b.result.Host))
		return nil
	})
	return v, err
}

// Checksum implements Backend.
func (b *CUDABackend) Checksum(src transport.Addr, n uint64) (uint64, error) {
	return b.runAux(func(s *cuda.Stream, out cuda.DevicePtr) error {
		return b.k.Checksum(s, cuda.DevicePtr(src), n, out)
	})
}

// Equal implements Backend.
func (b *CUDABackend) Equal(a, c transport.Addr, n uint64) (bool, error) {
	diff, err := b.runAux(func(s *cuda.Stream, out cuda.DevicePtr) error {
		return b.k.Equal(s, cuda.DevicePtr(a), cuda.DevicePtr(c), n, out)
	})
	return diff == 0 && err == nil, err
}

// Close implements Backend.
func (b *CUDABackend) Close() error {
	b.quiesce()
	defer onThread()()
	if b.ctx == nil {
		return nil
	}
	var errs []error
	if err := b.current(); err != nil {
		errs = append(errs, err)
	}
	if b.aux != nil {
		errs = append(errs, b.aux.Destroy())
	}
	if b.box != nil {
		errs = append(errs, b.box.Close())
	}
	if b.k != nil {
		errs = append(errs, b.k.Close())
	}
	for _, m := range []*cuda.MappedMem{b.flag, b.result} {
		if m != nil {
			errs = append(errs, m.Free())
		}
	}
	errs = append(errs, b.ctx.Release())
	b.ctx = nil
	return errors.Join(errs...)
}

// NewStream implements Backend.
func (b *CUDABackend) NewStream(abort *transport.Abort) (transport.Stream, error) {
	defer onThread()()
	if err := b.current(); err != nil {
		return nil, err
	}
	s, err := b.drv.StreamCreate()
	if err != nil {
		return nil, err
	}
	rec, err := b.drv.AllocMapped(kernels.RecordSize)
	if err != nil {
		_ = s.Destroy()
		return nil, err
	}
	done, err := b.drv.AllocMapped(64)
	if err != nil {
		_ = rec.Free()
		_ = s.Destroy()
		return nil, err
	}
	// The rank's stream launches its kernels through one-kernel graphs
	// (less host time per launch); its captures are its own (cuda.Stream
	// tracks them).
	s.SetGraphLaunch(true)
	cs := &CUDAStream{b: b, s: s, rec: rec, done: done, abort: abort, stop: make(chan struct{})}
	if b.prelaunch {
		if cs.pre, err = newPrelaunch(b.drv); err != nil {
			_ = done.Free()
			_ = rec.Free()
			_ = s.Destroy()
			return nil, err
		}
		if cs.serve, err = newPlanServer(b.drv); err != nil {
			_ = cs.pre.mem.Free()
			_ = done.Free()
			_ = rec.Free()
			_ = s.Destroy()
			return nil, err
		}
		go cs.prelauncher()
	}
	b.smu.Lock()
	b.streams = append(b.streams, cs)
	b.smu.Unlock()
	// A job abort raises the device-visible flag, so that waits end now.
	go func() {
		select {
		case <-abort.Done():
			atomic.StoreUint32((*uint32)(b.flag.Host), 1)
		case <-cs.stop:
		}
	}()
	return cs, nil
}

var _ transport.Backend = (*CUDABackend)(nil)
