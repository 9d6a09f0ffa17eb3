package cuda

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/luacoll/luacoll/cuda"
	"github.com/luacoll/luacoll/kernels"
	"github.com/luacoll/luacoll/knobs"
	"github.com/luacoll/luacoll/transport"
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
	if b.k, err = kernels.Load(drv, b.ctx, kernels.Options{PutBlocksPerSM: int(knobs.PutBlocksPerSM.Or(0))}); err != nil {
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

func (b *CUDABackend) current() error { return b.ctx.SetCurrent() }

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

type cudaShare struct {
	Handle []byte `json:"h,omitempty"`
	Size   uint64 `json:"s,omitempty"` // VMM: the exported allocation's size
	Err    string `json:"err,omitempty"`
}

// ipcReach says why topo rules out a GPU window ("" when every peer can be
// mapped).
func ipcReach(topo *transport.Topology) string {
	for r, k := range topo.Kinds {
		if k == transport.KindNet {
			return fmt.Sprintf("rank %d is reached over the network (transport net): windows with network peers live in host memory the GPU maps, and the host runs their network operations (the proxy path)", r)
		}
		if k != transport.KindSelf && k != transport.KindNVL {
			return fmt.Sprintf("rank %d is reachable only by transport %s; GPU windows need CUDA IPC (nvl) to every peer", r, k)
		}
	}
	return ""
}

// SetTimeoutHint gives the device waits' timeouts an explanation (ranks
// that share this GPU without MPS); "" for none. Call it before the
// streams run.
func (b *CUDABackend) SetTimeoutHint(hint string) { b.timeoutHint = hint }

// timeoutCause is what a device wait that ran out of time failed with.
func (b *CUDABackend) timeoutCause() error {
	if b.timeoutHint == "" {
		return transport.ErrTimeout
	}
	return &transport.TimeoutHint{Hint: b.timeoutHint}
}

// SymmetricSupport implements transport.SymmetricCapable: symmetric
// windows need every peer reachable by CUDA IPC (nvl) and a device that
// supports VMM memory exported as file descriptors.
func (b *CUDABackend) SymmetricSupport(topo *transport.Topology) (bool, string) {
	if why := ipcReach(topo); why != "" {
		return false, why
	}
	for _, a := range []struct {
		attr cuda.DeviceAttribute
		what string
	}{{cuda.AttrVirtualMemoryManagement, "virtual memory management"}, {cuda.AttrHandleTypePosixFDSupported, "VMM handles as file descriptors"}} {
		v, err := b.drv.DeviceAttribute(b.dev, a.attr)
		if err != nil {
			return false, err.Error()
		}
		if v == 0 {
			return false, fmt.Sprintf("device %d does not support %s", b.ordinal, a.what)
		}
	}
	return true, ""
}

// Share implements Memory: device memory exported with a legacy IPC handle
// and opened by every same-host peer, or with ipc IPCVMM, see shareVMM.
func (b *CUDABackend) Share(ctx context.Context, ex transport.Exchanger, topo *transport.Topology, size uint64, ipc string) (*transport.Region, error) {
	if topo.AnyNet() {
		return b.shareProxy(ctx, ex, topo, size, ipc)
	}
	switch ipc {
	case transport.IPCVMM:
		return b.shareVMM(ctx, ex, topo, size, false)
	case transport.IPCSymmetric:
		return b.shareVMM(ctx, ex, topo, size, true)
	}
	defer onThread()()
	rank, n := ex.Rank(), ex.Size()
	var local cuda.DevicePtr
	st := cudaShare{Err: ipcReach(topo)}
	if st.Err == "" {
		p, err := b.alloc(size)
		if err != nil {
			st.Err = err.Error()
		} else {
			local = p
			h, err := b.drv.IpcGetMemHandle(p)
			if err != nil {
				st.Err = err.Error()
			} else {
				st.Handle = h[:]
			}
		}
	}
	all, err := exchangeCUDA(ctx, ex, st)
	opened := make([]cuda.DevicePtr, n)
	closePeers := func() error {
		var errs []error
		b.quiesce()
		_ = b.current()
		for r, p := range opened {
			if p != 0 && r != rank {
				if e := b.drv.IpcCloseMemHandle(p); e != nil {
					errs = append(errs, fmt.Errorf("closing rank %d's window: %w", r, e))
				}
			}
			opened[r] = 0
		}
		return errors.Join(errs...)
	}
	if err == nil {
		// The exchange may have moved this goroutine to another thread.
		if e := b.current(); e != nil {
			st.Err = e.Error()
		}
		for r, s := range all {
			if st.Err != "" {
				break
			}
			if r == rank {
				opened[r] = local
				continue
			}
			var h cuda.IpcMemHandle
			copy(h[:], s.Handle)
			p, e := b.drv.IpcOpenMemHandle(h)
			if e != nil {
				st = cudaShare{Err: fmt.Sprintf("opening rank %d's window: %v", r, e)}
				break
			}
			opened[r] = p
		}
		if st.Err == "" {
			st = cudaShare{}
		}
		_, err = exchangeCUDA(ctx, ex, st)
	}
	if err != nil {
		_ = closePeers()
		if local != 0 {
			_ = b.free(local)
		}
		return nil, err
	}
	peers := make([]transport.Addr, n)
	for r, p := range opened {
		peers[r] = transport.Addr(p)
	}
	freeLocal := func() error {
		if local == 0 {
			return nil
		}
		p := local
		local = 0
		return b.free(p)
	}
	return transport.NewRegion(size, transport.Addr(local), peers, closePeers, freeLocal), nil
}

func exchangeCUDA(ctx context.Context, ex transport.Exchanger, st cudaShare) ([]cudaShare, error) {
	raw, _ := json.Marshal(st)
	got, err := ex.AllGather(ctx, raw)
	if err != nil {
		return nil, err
	}
	out := make([]cudaShare, len(got))
	var msgs []string
	for r, g := range got {
		if err := json.Unmarshal(g, &out[r]); err != nil {
			return nil, fmt.Errorf("status from rank %d: %w", r, err)
		}
		if out[r].Err != "" {
			msgs = append(msgs, fmt.Sprintf("rank %d: %s", r, out[r].Err))
		}
	}
	if len(msgs) > 0 {
		return nil, fmt.Errorf("sharing GPU memory: %s", strings.Join(msgs, "; "))
	}
	return out, nil
}

// Alloc implements Memory.
func (b *CUDABackend) Alloc(size uint64) (*transport.Region, error) {
	if b.hostBuffers.Load() {
		return b.allocHost(size)
	}
	p, err := b.alloc(size)
	if err != nil {
		return nil, fmt.Errorf("allocating %d bytes on %s: %w", size, b.Name(), err)
	}
	done := false
	return transport.NewRegion(size, transport.Addr(p), nil, nil, func() error {
		if done {
			return nil
		}
		done = true
		return b.free(p)
	}), nil
}

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

// RefCopy is the reference a put is measured against: one cuMemcpyAsync of
// n bytes from src to dst (peer memory) on the side stream, timed by
// events around it (device clock, no launch or synchronization in it).
func (b *CUDABackend) RefCopy(dst, src transport.Addr, n uint64) (time.Duration, error) {
	var took time.Duration
	err := b.onAux(func() error {
		e0, err := b.drv.NewTimingEvent()
		if err != nil {
			return err
		}
		defer e0.Destroy()
		e1, err := b.drv.NewTimingEvent()
		if err != nil {
			return err
		}
		defer e1.Destroy()
		if err := e0.Record(b.aux); err != nil {
			return err
		}
		if err := b.drv.MemcpyAsync(cuda.DevicePtr(dst), cuda.DevicePtr(src), n, b.aux); err != nil {
			return err
		}
		if err := e1.Record(b.aux); err != nil {
			return err
		}
		if err := b.aux.Synchronize(); err != nil {
			return err
		}
		ms, err := e0.ElapsedMs(e1)
		took = time.Duration(float64(ms) * float64(time.Millisecond))
		return err
	})
	return took, err
}

// DevicePingPong runs one side of a device-initiated ping-pong of iters
// round trips and returns the device-measured time. raw selects the bare
// flag ping-pong (stores to peerSlot, spins on mySlot); otherwise each
// step is a put of n bytes from src to peerData followed by the signal.
// Both ranks must call it at about the same time; slots must start at 0.
// local says the peer runs on this GPU: its signals then need only GPU
// scope (release store and acquire load), not system scope.
func (b *CUDABackend) DevicePingPong(raw bool, peerData, src transport.Addr, n uint64, peerSlot, mySlot transport.Addr, iters uint64, initiator bool, timeout time.Duration, local bool) (time.Duration, error) {
	// src is a private buffer: 10 and 11 may read it before each wait.
	variant := orderingPutSignal
	if local {
		variant = orderingPutSignalLocal
	}
	ns, err := b.runAux(func(s *cuda.Stream, out cuda.DevicePtr) error {
		if raw {
			return b.k.PingPong(s, cuda.DevicePtr(mySlot), cuda.DevicePtr(peerSlot), iters, initiator, timeout, out)
		}
		return b.k.PutSignalPingPong(s, cuda.DevicePtr(peerData), cuda.DevicePtr(src), n, cuda.DevicePtr(peerSlot),
			cuda.DevicePtr(mySlot), iters, initiator, timeout, out, variant)
	})
	return b.pingPongTime("device ping-pong", ns, err, timeout)
}

// pingPongTime is a ping-pong loop's result: its device time, or why it
// has none (what names the loop; ns is ^0 when the peer did not answer).
func (b *CUDABackend) pingPongTime(what string, ns uint64, err error, timeout time.Duration) (time.Duration, error) {
	if err != nil {
		return 0, err
	}
	if ns == ^uint64(0) {
		if b.timeoutHint != "" {
			return 0, fmt.Errorf("%s: no answer from the peer within %v (%s)", what, timeout, b.timeoutHint)
		}
		return 0, fmt.Errorf("%s: no answer from the peer within %v", what, timeout)
	}
	return time.Duration(ns), nil
}

// DeviceLinePingPong runs one side of the put_signal ping-pong whose 8-byte
// payloads travel in their signals' 16-byte lines (kernels'
// PutSignalPingPongLL): peerLine is the peer's line as mapped here, myLine
// this rank's; each arrival leaves the payload at myData and the round in
// mySlot. Lines must start at 0; src is private. Both ranks must call it
// at about the same time.
func (b *CUDABackend) DeviceLinePingPong(peerLine, myLine, myData, src, mySlot transport.Addr, iters uint64, initiator bool, timeout time.Duration) (time.Duration, error) {
	ns, err := b.runAux(func(s *cuda.Stream, out cuda.DevicePtr) error {
		return b.k.PutSignalPingPongLL(s, cuda.DevicePtr(peerLine), cuda.DevicePtr(myLine), cuda.DevicePtr(myData),
			cuda.DevicePtr(src), cuda.DevicePtr(mySlot), iters, initiator, timeout, out)
	})
	return b.pingPongTime("device line ping-pong", ns, err, timeout)
}

// DeviceBarrierLoop runs iters barriers back to back on the device over
// rows (rows[p]: rank p's row of len(rows) slots, as mapped here, all 0)
// and returns the device-measured time. local says every rank runs on this
// GPU (GPU-scope ordering suffices). flat, when set, is the symmetric
// window the rows lie in (rows[p] = flat.Base + p*flat.Stride + the same
// offset): the kernel then finds every row by arithmetic, with no table.
func (b *CUDABackend) DeviceBarrierLoop(rows []transport.Addr, rank int, iters uint64, timeout time.Duration, local bool, flat *transport.FlatRange) (time.Duration, error) {
	variant := orderingBarrier
	if local {
		variant = orderingBarrierLocal
	}
	if flat != nil {
		for p, r := range rows {
			if uint64(r)-uint64(rows[0]) != uint64(p)*flat.Stride {
				return 0, fmt.Errorf("device barrier loop: rank %d's row is not at base + %d*stride", p, p)
			}
		}
	}
	table := make([]byte, 8*len(rows))
	for i, r := range rows {
		binary.LittleEndian.PutUint64(table[8*i:], uint64(r))
	}
	var ns uint64
	err := b.onAux(func() error {
		if flat != nil {
			if err := b.k.BarrierLoop(b.aux, 0, cuda.DevicePtr(rows[0]), flat.Stride, uint32(rank), uint32(len(rows)), iters, timeout, b.result.Dev, variant); err != nil {
				return err
			}
			if err := b.aux.Synchronize(); err != nil {
				return err
			}
			ns = atomic.LoadUint64((*uint64)(b.result.Host))
			return nil
		}
		p, err := b.drv.MemAlloc(uint64(len(table)))
		if err != nil {
			return err
		}
		defer b.drv.MemFree(p) // after the sync below: the kernel reads it
		// On the side stream, in order with the kernel below (a plain HtoD
		// from pageable memory may still be in flight when it returns).
		if err := b.drv.MemcpyHtoDAsync(p, unsafe.Pointer(unsafe.SliceData(table)), uint64(len(table)), b.aux); err != nil {
			return err
		}
		if err := b.k.BarrierLoop(b.aux, p, 0, 0, uint32(rank), uint32(len(rows)), iters, timeout, b.result.Dev, variant); err != nil {
			return err
		}
		if err := b.aux.Synchronize(); err != nil {
			return err
		}
		ns = atomic.LoadUint64((*uint64)(b.result.Host))
		return nil
	})
	if err != nil {
		return 0, err
	}
	if ns == ^uint64(0) {
		return 0, fmt.Errorf("device barrier loop: peers did not arrive within %v", timeout)
	}
	return time.Duration(ns), nil
}

// The memory-ordering variants of the device-loop benchmarks (see
// signal_put.cu): the fastest correct ones measured, across GPUs and with
// every rank on this GPU (docs/results/knobs-retired.md has the figures
// of the others).
const (
	orderingPutSignal      = 11 // release store, acquire load of the flag, source read before the wait
	orderingPutSignalLocal = 10 // GPU scope, the poll itself the acquire, source read before the wait
	orderingBarrier        = 6  // release stores to the peers only, acquire load of each peer's slot
	orderingBarrierLocal   = 8  // 6 at GPU scope
)

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

// CUDAStream is a rank's CUstream. Copies use the copy engines
// (cuMemcpyAsync) or the put kernel; a "set" signal is a stream memory
// write, an "add" a one-thread atomic kernel; waits are one-thread kernels
// with a device-side timeout that record failures in host-mapped memory.
type CUDAStream struct {
	b     *CUDABackend
	s     *cuda.Stream
	rec   *cuda.MappedMem
	abort *transport.Abort
	stop  chan struct{}
	// path is the current operations' path: "ce", "sm" or "auto".
	path string

	mu      sync.Mutex
	err     error
	pending []*transport.WaitSpec
	// idle: the stream was seen drained and nothing was enqueued since;
	// gen counts enqueues (both under mu).
	idle bool
	gen  uint64
	// memops are the waits enqueued as stream memory operations (no SM, no
	// device-side timeout): Sync watches them and releases one that times
	// out or is aborted (see watch).
	memops []*memopWait
	memErr error
	// memFail is the wait behind memErr, whose full error Sync builds once
	// it released mu (see waitFailure).
	memFail   *waitFailure
	interrupt error
	events    []*cuda.Event
	planSide  *sideStream // plans' own-memory copies (cuda_plan.go)
	// held is a put_signal or a wait not launched yet: the next call may
	// share its launch (see hold); anything else launches it first.
	held      heldOp
	heldTimer *time.Timer
	timerGen  uint64 // the generation the timer was armed for
	// done is a host-mapped word where fused launches store their
	// sequence number as they end; doneSeq is the last number given out,
	// doneTail whether that launch is the last work enqueued (then Sync
	// can see the stream's work finish without asking the driver).
	done     *cuda.MappedMem
	doneSeq  uint64
	doneTail bool
	// pre is the prelaunched-step state (nil unless LUACOLL_PRELAUNCH=1).
	pre *prelaunch
	// stamps are the trace's timing events (cuda_stamp.go).
	stamps cudaStamps
	// proxy runs the operations on network peers (cuda_proxy.go).
	proxy proxyState
	// onInterrupt are called by Interrupt (OnInterrupt), after it;
	// onReport by a Sync that returns an error (OnReport).
	onInterrupt, onReport []func(error)
	// plans are the device plans launched since the last Sync (their
	// failures name their steps; see blamePlan).
	plans []*DevicePlan
}

// heldOp is an operation kept back for one call, so that a put_signal
// followed by a wait (or a wait followed by a put_signal), the two halves
// of a host-issued step, cost one launch; and so that an all-gather exec's
// done kernel and the next exec's ready kernel are one launch when the
// execs follow each other.
type heldOp struct {
	put  *kernels.PutSignalSpec
	wait *heldWait
	agp  *heldAGP
	plan *heldPlan
	gen  uint64
}

// heldPlan is the last launch of a plan's replay in stream mode (its last
// run of steps): when the next call replays the same plan, one launch
// ends that replay and starts the next (RunPlanSegments).
type heldPlan struct {
	p    *DevicePlan
	spec kernels.PlanSpec
}

// heldAGP is the done kernel of an all-gather exec of n bytes per rank.
type heldAGP struct {
	a *CUDAAGP
	n uint64
}

type heldWait struct {
	spec  kernels.WaitSpec // as the wait kernel takes it
	ws    *transport.WaitSpec
	memop bool // alone it would have been a stream memory operation
	flags cuda.WaitValueFlags
}

// holdFor is how long an operation may stay held when no call follows:
// then a timer launches it, so nothing waits on it for longer.
const holdFor = 20 * time.Microsecond

// flushLocked launches the held operation, if any, as it would have been
// launched alone. s.mu is held.
func (s *CUDAStream) flushLocked() {
	h := s.held
	if h.put == nil && h.wait == nil && h.agp == nil && h.plan == nil {
		return
	}
	s.held = heldOp{gen: h.gen + 1}
	s.runLocked(func() error {
		switch {
		case h.put != nil:
			p := h.put
			return s.b.k.PutSignal(s.s, p.Dst, p.Src, p.N, p.Slot, p.Op, p.Value)
		case h.agp != nil:
			return h.agp.a.ak.Done(s.s, h.agp.a.done, h.agp.n)
		case h.plan != nil:
			return s.b.k.Plan(s.s, h.plan.spec)
		}
		w := h.wait
		if w.memop {
			if err := s.s.WaitValue64(w.spec.Slots, w.spec.Value, w.flags); err != nil {
				return err
			}
			s.memops = append(s.memops, &memopWait{spec: w.ws, slot: transport.Addr(w.spec.Slots), enq: time.Now()})
		} else if err := s.b.k.Wait(s.s, w.spec); err != nil {
			return err
		}
		s.pending = append(s.pending, w.ws)
		return nil
	})
}

// runLocked enqueues the work f does on the stream (s.mu held, any held
// operation dealt with): nothing once the stream has failed, and an error
// of f fails it. It reports whether f ran without error.
func (s *CUDAStream) runLocked(f func() error) bool {
	s.cancelPreLocked()
	s.doneTail = false
	s.gen++
	s.idle = false
	if s.err != nil {
		return false
	}
	if err := s.b.current(); err != nil {
		s.err = err
		return false
	}
	if err := f(); err != nil {
		s.err = err
		return false
	}
	return true
}

// holdLocked keeps h back (s.mu is held) and arms the timer that launches
// it if no call comes.
func (s *CUDAStream) holdLocked(h heldOp) {
	s.gen++
	s.idle = false
	h.gen = s.held.gen + 1
	s.held = h
	s.timerGen = h.gen
	if s.heldTimer == nil {
		s.heldTimer = time.AfterFunc(holdFor, s.onHoldTimer)
		return
	}
	s.heldTimer.Reset(holdFor)
}

// onHoldTimer launches the operation the timer was armed for, if it is
// still held.
func (s *CUDAStream) onHoldTimer() {
	defer onThread()()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.held.gen == s.timerGen {
		s.flushLocked()
	}
}

func (s *CUDAStream) enqueue(f func() error) {
	defer onThread()()
	s.lock()
	defer s.mu.Unlock()
	s.flushLocked()
	s.runLocked(f)
}

// AutoSMCopyMax is the largest copy that path "auto" gives to the put
// kernel; larger copies go to the copy engines.
const AutoSMCopyMax = 64 << 10

// SetPath implements PathSetter.
func (s *CUDAStream) SetPath(path string) { s.path = path }

// Copy implements Stream.
func (s *CUDAStream) Copy(dst, src transport.Addr, n uint64) {
	if n == 0 || s.copyOnHost(dst, src, n) {
		return
	}
	sm := s.path == "sm" || (s.path == "auto" && n <= AutoSMCopyMax)
	s.enqueue(func() error {
		if sm {
			return s.b.k.Put(s.s, cuda.DevicePtr(dst), cuda.DevicePtr(src), n)
		}
		return s.b.drv.MemcpyAsync(cuda.DevicePtr(dst), cuda.DevicePtr(src), n, s.s)
	})
}

// copyOnHost makes a copy with the host's CPUs when both ranges lie in
// device-mapped host memory (the proxy path's windows and buffers) and
// the stream is idle, so that nothing on it can come before the copy:
// there is no launch to make, and the stream stays idle for the network
// operation or host-polled wait that usually comes next, which then need
// not drain it. Device work enqueued later sees the bytes (a launch orders
// the host's earlier writes before it). A copy engine moves such memory
// over PCIe twice (32 MiB took about 5 ms on the GPU machine); a large
// copy is spread over goroutines (transport.Memmove). It reports whether
// it made the copy.
func (s *CUDAStream) copyOnHost(dst, src transport.Addr, n uint64) bool {
	if !s.b.hostMapped(dst, n) || !s.b.hostMapped(src, n) {
		return false
	}
	s.lock()
	defer s.mu.Unlock()
	// Idle means nothing is held back either: holding an operation clears it.
	if !s.idle || s.err != nil || s.s.Capturing() {
		return false
	}
	transport.Memmove(transport.HostBytes(dst, n), transport.HostBytes(src, n))
	return true
}

type sideStream struct {
	s          *cuda.Stream
	fork, join *cuda.Event
}

// PutSignal implements PutSignaler: on the kernel path (and on "auto" for
// copies up to AutoSMCopyMax) the data and the signal go in one launch.
func (s *CUDAStream) PutSignal(dst, src transport.Addr, n uint64, slot transport.Addr, add bool, v uint64) bool {
	defer onThread()()
	if !(s.path == "sm" || (s.path == "auto" && n <= AutoSMCopyMax)) {
		return false
	}
	op := kernels.SignalSet
	if add {
		op = kernels.SignalAdd
	}
	p := kernels.PutSignalSpec{Dst: cuda.DevicePtr(dst), Src: cuda.DevicePtr(src), N: n, Slot: cuda.DevicePtr(slot), Op: op, Value: v}
	s.lock()
	defer s.mu.Unlock()
	if w := s.held.wait; w != nil {
		// A wait then this put_signal: one launch.
		s.launchFusedLocked(w.ws, true, p, w.spec)
		return true
	}
	s.flushLocked()
	s.holdLocked(heldOp{put: &p})
	return true
}

// launchFusedLocked launches the held operation together with the one
// being issued (s.mu held): the put + signal p and the wait w in one
// kernel (w first when waitFirst), or through a prelaunched kernel; ws is
// the wait to account for.
func (s *CUDAStream) launchFusedLocked(ws *transport.WaitSpec, waitFirst bool, p kernels.PutSignalSpec, w kernels.WaitSpec) {
	s.gen++
	s.idle = false
	s.held = heldOp{gen: s.held.gen + 1}
	if s.pre != nil {
		s.pre.hold = false
		if s.takePreLocked(ws, waitFirst, p, w) {
			return
		}
		s.dropPreLocked() // a waiting kernel that could not take it
		s.pre.launched++
		defer s.pre.kick()
	}
	if s.err != nil {
		return
	}
	if err := s.b.current(); err != nil {
		s.err = err
		return
	}
	var err error
	if waitFirst {
		err = s.b.k.WaitPutSignal(s.s, w, p, s.nextDone())
	} else {
		err = s.b.k.PutSignalWait(s.s, p, w, s.nextDone())
	}
	if err != nil {
		s.err = err
		s.doneTail = false // no report will come
		return
	}
	s.pending = append(s.pending, ws)
}

// nextDone numbers a fused launch about to be enqueued (s.mu held) and
// makes it the stream's last work; under capture it reports nothing.
func (s *CUDAStream) nextDone() kernels.Done {
	if s.s.Capturing() {
		s.doneTail = false
		return kernels.Done{}
	}
	s.doneSeq++
	s.doneTail = true
	return kernels.Done{Ptr: s.done.Dev, Seq: s.doneSeq}
}

// doneSeen spins until the host-mapped done word reaches seq, for at most
// d; it reports whether it did.
func (s *CUDAStream) doneSeen(seq uint64, d time.Duration) bool {
	w := (*uint64)(s.done.Host)
	until := time.Now().Add(d)
	for i := 0; ; i++ {
		if atomic.LoadUint64(w) >= seq {
			return true
		}
		if i&63 == 63 && time.Now().After(until) {
			return false
		}
	}
}

// Store64 implements Stream.
func (s *CUDAStream) Store64(dst transport.Addr, v uint64) {
	sm := s.path == "sm"
	s.enqueue(func() error {
		if sm {
			return s.b.k.Signal(s.s, cuda.DevicePtr(dst), kernels.SignalSet, v)
		}
		return s.s.WriteValue64(cuda.DevicePtr(dst), v, cuda.WriteValueDefault)
	})
}

// Add64 implements Stream.
func (s *CUDAStream) Add64(dst transport.Addr, v uint64) {
	s.enqueue(func() error { return s.b.k.Signal(s.s, cuda.DevicePtr(dst), kernels.SignalAdd, v) })
}

// memopWait is a wait enqueued as cuStreamWaitValue64 on one slot.
type memopWait struct {
	spec     *transport.WaitSpec
	slot     transport.Addr
	enq      time.Time
	delta    uint64 // added to the slot to release the wait; undone after
	released bool
}

// memopCmp reports whether a comparison has a stream memory operation.
func memopCmp(c transport.Cmp) (cuda.WaitValueFlags, bool) {
	switch c {
	case transport.CmpGe:
		return cuda.WaitValueGEQ, true
	case transport.CmpEq:
		return cuda.WaitValueEQ, true
	}
	return 0, false
}

// Wait implements Stream. On paths "ce" and "auto" a wait on single slots
// with >= or == is a stream memory operation (no SM); a wait on a sum, any
// other comparison, and path "sm" use the one-thread wait kernel with its
// device-side timeout.
func (s *CUDAStream) Wait(w transport.WaitSpec) {
	defer onThread()()
	if len(w.Slots) == 0 || s.proxyWait(w) {
		return
	}
	groups := [][]transport.Addr{w.Slots}
	if w.Mode == transport.WaitEach {
		groups = groups[:0]
		for _, a := range w.Slots {
			groups = append(groups, []transport.Addr{a})
		}
	}
	flags, memop := memopCmp(w.Cmp)
	memop = memop && s.path != "sm"
	for _, g := range groups {
		if len(g) != 1 {
			memop = false
		}
	}
	if len(groups) == 1 {
		if spec, ok := s.waitSpec(w, groups[0]); ok {
			ws := w
			hw := &heldWait{spec: spec, ws: &ws, memop: memop, flags: flags}
			s.lock()
			defer s.mu.Unlock()
			if p := s.held.put; p != nil {
				// A put_signal then this wait: one launch.
				s.launchFusedLocked(&ws, false, *p, spec)
				return
			}
			s.flushLocked()
			s.holdLocked(heldOp{wait: hw})
			return
		}
	}
	s.enqueue(func() error {
		ws := w
		for _, g := range groups {
			if memop {
				if err := s.s.WaitValue64(cuda.DevicePtr(g[0]), w.Value, flags); err != nil {
					return err
				}
				s.memops = append(s.memops, &memopWait{spec: &ws, slot: g[0], enq: time.Now()})
				continue
			}
			spec, ok := s.waitSpec(w, g)
			if !ok {
				return errors.New("wait: slots are not evenly spaced")
			}
			if err := s.b.k.Wait(s.s, spec); err != nil {
				return err
			}
		}
		s.pending = append(s.pending, &ws)
		return nil
	})
}

// waitSpec builds the wait kernel's arguments for one group of slots
// (evenly spaced); ok is false when they are not.
func (s *CUDAStream) waitSpec(w transport.WaitSpec, g []transport.Addr) (kernels.WaitSpec, bool) {
	stride := uint64(8)
	if len(g) > 1 {
		stride = uint64(g[1] - g[0])
		for i := 2; i < len(g); i++ {
			if uint64(g[i]-g[i-1]) != stride {
				return kernels.WaitSpec{}, false
			}
		}
	}
	return kernels.WaitSpec{Slots: cuda.DevicePtr(g[0]), Count: uint32(len(g)), Stride: stride,
		Cmp: w.Cmp, Value: w.Value, Timeout: w.Timeout, Abort: s.b.flag.Dev, Record: s.rec.Dev}, true
}

// readSlot reads a 64-bit slot of device memory now (on the side stream).
func (s *CUDAStream) readSlot(a transport.Addr) (uint64, error) {
	var b [8]byte
	if err := s.b.drv.MemcpyDtoH(b[:], cuda.DevicePtr(a)); err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint64(b[:]), nil
}

// addSlot atomically adds v to a slot (a one-thread kernel on the side stream).
func (s *CUDAStream) addSlot(a transport.Addr, v uint64) error {
	s.b.mu.Lock()
	defer s.b.mu.Unlock()
	if err := s.b.k.Signal(s.b.aux, cuda.DevicePtr(a), kernels.SignalAdd, v); err != nil {
		return err
	}
	return s.b.aux.Synchronize()
}

// watch runs while Sync waits: a memory-operation wait has no timeout of
// its own, so when one has waited longer than its timeout, or the job is
// aborting, or the stream was interrupted, watch records the error and
// releases it (and every later one) by adding to its slot what it lacks;
// undoRelease takes the additions back once the stream has drained. The
// record is poisoned too, so that the wait kernels behind return at once.
func (s *CUDAStream) watch(now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var cause error
	if err := s.abort.Err(); err != nil {
		cause = err
	} else if s.interrupt != nil {
		cause = s.interrupt
	} else if s.memErr != nil {
		cause = s.memErr
	}
	for _, m := range s.memops {
		if m.released {
			continue
		}
		v, err := s.readSlot(m.slot)
		if err != nil {
			return
		}
		if m.spec.Cmp.Holds(v, m.spec.Value) {
			continue
		}
		if cause == nil && now.Sub(m.enq) < m.spec.Timeout {
			return // the first wait still blocking is within its time
		}
		if s.memErr == nil {
			c := cause
			if c == nil {
				c = s.b.timeoutCause()
			}
			s.memErr = fmt.Errorf("wait: %v (observed %d, target %d)", c, v, m.spec.Value)
			if m.spec.Fail != nil || m.spec.Describe != nil {
				s.memFail = &waitFailure{spec: m.spec, observed: v, cause: c}
			}
			cause = s.memErr
			// Poison the record: the wait kernels behind give up at once.
			r := (*[4]uint64)(s.rec.Host)
			atomic.StoreUint64(&r[1], v)
			atomic.StoreUint64(&r[2], m.spec.Value)
			atomic.StoreUint32((*uint32)(s.rec.Host), uint32(kernels.StatusAborted))
		}
		m.delta = m.spec.Value - v
		if s.addSlot(m.slot, m.delta) == nil {
			m.released = true
		}
	}
}

// undoRelease takes back what watch added to released slots.
func (s *CUDAStream) undoRelease() {
	for _, m := range s.memops {
		if m.released && m.delta != 0 {
			_ = s.addSlot(m.slot, -m.delta)
		}
	}
	s.memops = s.memops[:0]
}

// Host implements Stream: the callback runs once everything before it has
// completed (the stream is synchronized first).
func (s *CUDAStream) Host(fn func() error) {
	if err := s.Sync(context.Background()); err != nil {
		s.mu.Lock()
		if s.err == nil {
			s.err = err
		}
		s.mu.Unlock()
		return
	}
	if err := fn(); err != nil {
		s.mu.Lock()
		if s.err == nil {
			s.err = err
		}
		s.mu.Unlock()
	}
}

type cudaMark struct {
	ev *cuda.Event
	s  *CUDAStream
}

func (m *cudaMark) Since(earlier transport.Mark) (time.Duration, error) {
	defer onThread()()
	e, ok := earlier.(*cudaMark)
	if !ok || m.ev == nil || e.ev == nil {
		return 0, errors.New("marks of different streams")
	}
	if err := m.s.b.current(); err != nil {
		return 0, err
	}
	ms, err := e.ev.ElapsedMs(m.ev)
	if err != nil {
		return 0, err
	}
	return time.Duration(float64(ms) * float64(time.Millisecond)), nil
}

// Mark implements Stream with a timing event.
func (s *CUDAStream) Mark() transport.Mark {
	m := &cudaMark{s: s}
	s.enqueue(func() error {
		ev, err := s.b.drv.NewTimingEvent()
		if err != nil {
			return err
		}
		s.events = append(s.events, ev)
		m.ev = ev
		return ev.Record(s.s)
	})
	return m
}

// syncSpin is how long Sync polls the stream without yielding its thread
// (LUACOLL_SYNC_SPIN_US, default 100 us; 0: yield from the start). A
// goroutine that yields may come back on another OS thread, where the
// context is not current: polling in place keeps a short sync at the cost
// of one launch and one query.
var syncSpin = knobs.SyncSpin.Or(100 * time.Microsecond)

// Sync implements Stream.
func (s *CUDAStream) Sync(ctx context.Context) error {
	err := s.syncDevice(ctx)
	if err == nil {
		err = s.flushNet()
	}
	if err != nil {
		s.mu.Lock()
		hooks := append([]func(error){}, s.onReport...)
		s.mu.Unlock()
		for _, h := range hooks {
			h(err)
		}
	}
	return err
}

// syncDevice is Sync without the network flush: it returns once the
// device work enqueued so far has completed.
func (s *CUDAStream) syncDevice(ctx context.Context) error {
	// The context stays current on this thread for the whole call.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := s.b.current(); err != nil {
		return err
	}
	s.lock()
	s.flushLocked()
	tail, seq := s.doneTail && s.err == nil, s.doneSeq
	idle, gen := s.idle, s.gen
	s.mu.Unlock()
	cancelled := false
	// When the last work is a fused launch, its own report that it ended
	// is the stream draining: that launch wrote everything it writes
	// (released before the report) and nothing follows it. Otherwise, or
	// when the report is late, ask the driver.
	spinning, spinUntil := syncSpin > 0, time.Now().Add(syncSpin)
	fast := idle || (tail && spinning && s.doneSeen(seq, syncSpin))
	if !fast && s.pre != nil {
		// A prelaunched kernel would keep the stream busy.
		s.mu.Lock()
		s.cancelPreLocked()
		s.mu.Unlock()
	}
	for i := 0; !fast; i++ {
		done, err := s.s.Query()
		if err != nil {
			return fmt.Errorf("sync: %w", transport.ExplainDeviceFault(err, s.abort))
		}
		if done {
			break
		}
		if spinning {
			if i&15 != 0 || time.Now().Before(spinUntil) {
				continue
			}
			spinning, i = false, 0
		}
		if i > 2000 {
			if i%16 == 0 {
				s.watch(time.Now())
			}
			select {
			case <-ctx.Done():
				if !cancelled {
					// Interrupt the waits and keep draining: the stream
					// must be idle before anyone reuses it.
					cancelled = true
					s.Interrupt(context.Cause(ctx))
				}
			case <-time.After(20 * time.Microsecond):
			}
		} else {
			runtime.Gosched()
		}
	}
	s.lock()
	s.undoRelease()
	// Nothing enqueued since the stream was seen drained: it is idle.
	s.idle = s.gen == gen
	err := s.err
	s.err = nil
	if tail && !fast && atomic.LoadUint64((*uint64)(s.done.Host)) < seq && err == nil {
		// The stream is idle and the last step never reported its end: a
		// prelaunched kernel left (on an abort) before it read the step.
		cause := s.abort.Err()
		if cause == nil {
			cause = s.interrupt
		}
		if cause == nil {
			cause = errors.New("its kernel ended first")
		}
		err = fmt.Errorf("sync: a put_signal + wait step was not run: %w", cause)
	}
	// A failed wait's error is built after mu is released: describing it
	// may read device memory (which peers did not signal), and a read
	// takes every stream's lock while a kernel is prelaunched.
	var fail *waitFailure
	memErr, memFail := s.memErr, s.memFail
	s.memErr, s.memFail = nil, nil
	rec := kernels.ReadRecord(s.rec.Host)
	if rec.Status != kernels.StatusOK {
		wf := s.blame(rec)
		kernels.ClearRecord(s.rec.Host)
		if memErr != nil {
			wf = waitFailure{plain: memErr}
			if memFail != nil {
				wf = *memFail
			}
		}
		if err == nil {
			fail = &wf
		}
	} else if err == nil && memErr != nil {
		fail = &waitFailure{plain: memErr}
		if memFail != nil {
			fail = memFail
		}
	}
	if s.interrupt != nil && s.abort.Err() == nil {
		atomic.StoreUint32((*uint32)(s.b.flag.Host), 0)
	}
	if err == nil && fail == nil && s.interrupt != nil {
		err = s.interrupt
	}
	s.interrupt = nil
	s.pending = s.pending[:0]
	clear(s.plans)
	s.plans = s.plans[:0]
	s.mu.Unlock()
	if fail != nil {
		err = fail.err()
	}
	if cancelled && err == nil {
		err = fmt.Errorf("sync: %w", context.Cause(ctx))
	}
	return err
}

// waitFailure is a failed wait whose error is built later, outside the
// stream's lock (WaitSpec.Failed may read device memory); plain, when
// set, is the error itself.
type waitFailure struct {
	spec     *transport.WaitSpec
	observed uint64
	cause    error
	plain    error
	build    func() error // when set, builds the error (a device plan's wait)
}

func (f *waitFailure) err() error {
	if f.plain != nil {
		return f.plain
	}
	if f.build != nil {
		return f.build()
	}
	return f.spec.Failed(f.observed, f.cause)
}

// blame finds the wait a failure record belongs to: the first pending
// wait whose target matches and whose condition the observed value misses.
func (s *CUDAStream) blame(rec kernels.Record) waitFailure {
	cause := s.b.timeoutCause()
	if rec.Status == kernels.StatusMismatch {
		cause = transport.ErrMismatch
	}
	if rec.Status == kernels.StatusAborted {
		if cause = s.abort.Err(); cause == nil {
			cause = s.interrupt
		}
		if cause == nil {
			cause = errors.New("aborted")
		}
	}
	if rec.Slot == kernels.ProxyCallSlot {
		return waitFailure{plain: fmt.Errorf("a graph's call into the host got no answer: %w (call %d, %d answered)", cause, rec.Target, rec.Observed)}
	}
	if wf, ok := s.blamePlan(rec, cause); ok {
		return wf
	}
	for _, w := range s.pending {
		if w.Value == rec.Target && !w.Cmp.Holds(rec.Observed, w.Value) && (w.Fail != nil || w.Describe != nil) {
			return waitFailure{spec: w, observed: rec.Observed, cause: cause}
		}
	}
	if len(s.pending) > 0 && (s.pending[0].Fail != nil || s.pending[0].Describe != nil) {
		return waitFailure{spec: s.pending[0], observed: rec.Observed, cause: cause}
	}
	return waitFailure{plain: fmt.Errorf("device wait: %v (observed %d, target %d)", cause, rec.Observed, rec.Target)}
}

// Interrupt implements Stream: the running and queued device waits end at
// once (through the abort flag); copies already queued still complete.
func (s *CUDAStream) Interrupt(cause error) {
	s.mu.Lock()
	s.cancelPreLocked()
	s.interrupt = cause
	hooks := append([]func(error){}, s.onInterrupt...)
	s.mu.Unlock()
	atomic.StoreUint32((*uint32)(s.b.flag.Host), 1)
	for _, h := range hooks {
		h(cause)
	}
}

// Close implements Stream.
func (s *CUDAStream) Close() {
	defer onThread()()
	select {
	case <-s.stop:
		return
	default:
	}
	close(s.stop)
	s.mu.Lock()
	if s.heldTimer != nil {
		s.heldTimer.Stop()
	}
	s.mu.Unlock()
	_ = s.b.current()
	// Drain through Sync, which releases waits that would never end.
	s.Interrupt(errors.New("stream closing"))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	_ = s.syncDevice(ctx)
	cancel()
	s.closeProxy()
	// A kernel still running after that may yet write its record and end
	// report: then keep their host memory rather than free it under it.
	drained, qerr := s.s.Query()
	keepHost := qerr == nil && !drained
	for _, ev := range s.events {
		_ = ev.Destroy()
	}
	s.closeStamps()
	if sd := s.planSide; sd != nil {
		_ = sd.s.Synchronize()
		_ = sd.s.Destroy()
		_ = sd.fork.Destroy()
		_ = sd.join.Destroy()
	}
	s.b.k.ForgetStream(s.s)
	_ = s.s.Destroy()
	if !keepHost {
		_ = s.rec.Free()
		_ = s.done.Free()
		if s.pre != nil {
			s.pre.report()
			_ = s.pre.mem.Free()
		}
	}
	s.b.smu.Lock()
	for i, o := range s.b.streams {
		if o == s {
			s.b.streams = append(s.b.streams[:i], s.b.streams[i+1:]...)
			break
		}
	}
	s.b.smu.Unlock()
}

var _ transport.Backend = (*CUDABackend)(nil)
