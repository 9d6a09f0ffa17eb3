package gpu

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/luacoll/luacoll/cuda"
	"github.com/luacoll/luacoll/kernels"
	"github.com/luacoll/luacoll/transport"
	"github.com/luacoll/luacoll/transport/shm"
)

// The proxy path: a CUDA window with network peers.
//
// A network transport writes a window with the host's CPU (or a NIC), so
// such a window lives in host memory that the device maps: a shared-memory
// file, page-locked and mapped for the device (cuMemHostRegister). The
// device's kernels and copies reach it through the mapping, UCX through
// the host address, which unified addressing makes the same number; the
// peers of this host map the file as the host backend's peers do (their
// class is shm), the others are reached through the network.
//
// Network operations enqueued on the rank's stream are run by the host:
// the stream is drained first (so that a put reads what the device wrote
// before it), then the operation is posted and, for a put or a get, waited
// for until its buffers may be reused. Sources and destinations in device
// memory go through a pinned staging buffer. Sync flushes the network
// (remote completion) after the device work.

// hostRange is a window region that lives in device-mapped host memory.
type hostRange struct{ base, end transport.Addr }

// hostMapped reports whether the n bytes at a lie in host memory a
// network can read and write directly.
func (b *CUDABackend) hostMapped(a transport.Addr, n uint64) bool {
	b.hmu.Lock()
	defer b.hmu.Unlock()
	for _, r := range b.hostRanges {
		if a >= r.base && a.Add(n) <= r.end {
			return true
		}
	}
	return false
}

func (b *CUDABackend) addHostRange(base transport.Addr, size uint64) {
	b.hmu.Lock()
	b.hostRanges = append(b.hostRanges, hostRange{base, base.Add(size)})
	b.hmu.Unlock()
}

func (b *CUDABackend) dropHostRange(base transport.Addr) {
	b.hmu.Lock()
	defer b.hmu.Unlock()
	for i, r := range b.hostRanges {
		if r.base == base {
			b.hostRanges = append(b.hostRanges[:i], b.hostRanges[i+1:]...)
			return
		}
	}
}

// shareProxy is Share for a job with network peers: every rank's part is
// an anonymous shared-memory file, page-locked and mapped for the device
// (cuMemHostRegister); the peers of this host map it too (descriptors
// passed through the rank's box, as the host backend does), the others
// reach it through the network. It is collective: two exchanges bracket
// the passing, so every rank learns whether all could share.
func (b *CUDABackend) shareProxy(ctx context.Context, ex transport.Exchanger, topo *transport.Topology, size uint64, ipc string) (*transport.Region, error) {
	b.quiesce()
	defer onThread()()
	rank, n := ex.Rank(), ex.Size()
	psize := shm.PageRound(size)
	var st cudaShare
	if ipc == transport.IPCSymmetric {
		st.Err = "symmetric windows need every peer reachable by CUDA IPC (nvl), and some are reached over the network"
	}
	var local []int // the peers of this host
	for i := 1; i < n; i++ {
		if p := (rank + i) % n; topo.Mappable(p) {
			local = append(local, p)
		}
	}
	pm := &proxyMaps{b: b, psize: psize, mapped: make([][]byte, n), registered: make([]bool, n)}
	if st.Err == "" {
		if err := b.current(); err != nil {
			st.Err = err.Error()
		}
	}
	if st.Err == "" && len(local) > 0 && b.box == nil {
		var err error
		if b.box, err = transport.OpenFDBox(b.job, rank); err != nil {
			b.box = nil
			st.Err = err.Error()
		}
	}
	fd := -1
	if st.Err == "" {
		name := fmt.Sprintf("%sr%d-h%d", transport.SegmentPrefix(b.job), rank, b.shares+1)
		var err error
		if fd, pm.mapped[rank], err = shm.CreateSegment(name, psize); err == nil {
			err = pm.register(rank)
		}
		if err != nil {
			st.Err = fmt.Sprintf("host memory for a window with network peers: %v", err)
		}
	}
	b.shares++
	tag := b.shares
	_, err := exchangeCUDA(ctx, ex, st)
	if err == nil {
		if e := b.current(); e != nil {
			st.Err = e.Error()
		}
		if len(local) > 0 {
			b.passFDs(ctx, local, tag, fd, &st, func(p, pfd int) error {
				m, e := shm.MapSegment(pfd, psize)
				if e != nil {
					return fmt.Errorf("mapping rank %d's window: %w", p, e)
				}
				pm.mapped[p] = m
				if e := pm.register(p); e != nil {
					return fmt.Errorf("registering rank %d's window with the device: %w", p, e)
				}
				return nil
			})
		}
	}
	err = b.endPass(ctx, ex, st, err, fd, tag)
	if err != nil {
		for r := range pm.mapped {
			_ = pm.release(r)
		}
		return nil, err
	}
	return pm.region(rank, size), nil
}

// proxyMaps are the mappings of one window of the proxy path: every
// rank's part as mapped here (nil where it is not) and whether the device
// has it registered.
type proxyMaps struct {
	b          *CUDABackend
	psize      uint64
	mapped     [][]byte
	registered []bool
}

// release unregisters and unmaps rank r's part.
func (pm *proxyMaps) release(r int) error {
	var errs []error
	if pm.registered[r] {
		errs = append(errs, pm.b.drv.MemHostUnregister(unsafe.Pointer(&pm.mapped[r][0])))
		pm.registered[r] = false
	}
	if pm.mapped[r] != nil {
		errs = append(errs, unix.Munmap(pm.mapped[r]))
		pm.mapped[r] = nil
	}
	return errors.Join(errs...)
}

// register pins rank r's mapping for the device, which must see it at the
// host's address (unified addressing).
func (pm *proxyMaps) register(r int) error {
	p := unsafe.Pointer(&pm.mapped[r][0])
	if err := pm.b.drv.MemHostRegister(p, pm.psize, cuda.HostRegisterPortable|cuda.HostRegisterDeviceMap); err != nil {
		return err
	}
	pm.registered[r] = true
	d, err := pm.b.drv.MemHostGetDevicePointer(p)
	if err == nil && uintptr(d) != uintptr(p) {
		err = errors.New("the device sees registered host memory at another address (no unified addressing)")
	}
	return err
}

// region is the window's Region of size bytes a rank: rank's own part
// among the host ranges of the proxy path until it is closed, and the
// parts of the peers mapped here until they are unmapped.
func (pm *proxyMaps) region(rank int, size uint64) *transport.Region {
	b := pm.b
	addrs := make([]transport.Addr, len(pm.mapped))
	for r, m := range pm.mapped {
		if m != nil {
			// The peers' parts mapped here are such memory too: a
			// copy or signal into them runs on the host where the
			// stream is idle (copyOnHost, signalOnHost).
			addrs[r] = transport.AddrOf(m)
			b.addHostRange(addrs[r], size)
		}
	}
	me := addrs[rank]
	unmapPeers := func() error {
		b.quiesce()
		defer onThread()()
		errs := []error{b.current()}
		for r := range pm.mapped {
			if r != rank {
				if pm.mapped[r] != nil {
					b.dropHostRange(addrs[r])
				}
				errs = append(errs, pm.release(r))
			}
		}
		return errors.Join(errs...)
	}
	closeAll := func() error {
		b.quiesce()
		defer onThread()()
		if pm.mapped[rank] == nil {
			return nil
		}
		b.dropHostRange(me)
		return errors.Join(b.current(), pm.release(rank))
	}
	reg := transport.NewRegion(size, me, addrs, unmapPeers, closeAll)
	reg.HostShared = true
	return reg
}

// proxyState is what a CUDAStream keeps for network operations.
type proxyState struct {
	mu   sync.Mutex
	nets []transport.Network
	// dirty: operations were posted since the last flush.
	dirty   bool
	timeout time.Duration
	staging *cuda.MappedMem
}

// UseNetwork implements transport.NetworkUser.
func (s *CUDAStream) UseNetwork(n transport.Network) {
	p := &s.proxy
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, m := range p.nets {
		if m == n {
			return
		}
	}
	p.nets = append(p.nets, n)
}

// Remote implements transport.RemoteStream: the stream is drained, then
// the host runs op (see the proxy path above).
func (s *CUDAStream) Remote(op transport.RemoteOp) {
	fail := func(err error) {
		s.mu.Lock()
		if s.err == nil {
			s.err = err
		}
		s.mu.Unlock()
	}
	if s.s.Capturing() {
		fail(fmt.Errorf("%s: network operations cannot be captured in a CUDA graph", op.What))
		return
	}
	if err := s.syncDevice(context.Background()); err != nil {
		fail(err)
		return
	}
	if err := s.runRemote(op); err != nil {
		fail(transport.ExplainPeerLost(err, s.abort))
	}
}

func (s *CUDAStream) cancelNet() error { return s.abort.Err() }

// runRemote runs one network operation on the host, the device idle.
func (s *CUDAStream) runRemote(op transport.RemoteOp) error {
	p := &s.proxy
	p.mu.Lock()
	defer p.mu.Unlock()
	if op.Timeout > p.timeout {
		p.timeout = op.Timeout
	}
	timeout := p.timeout
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	if op.Kind == transport.RemoteFlush {
		return s.flushNetLocked(timeout)
	}
	n := op.Ref.Key.Network()
	known := false
	for _, m := range p.nets {
		known = known || m == n
	}
	if !known {
		p.nets = append(p.nets, n)
	}
	var staged *cuda.MappedMem
	if (op.Kind == transport.RemotePut || op.Kind == transport.RemotePutSignal || op.Kind == transport.RemoteGet) &&
		op.N > 0 && !s.b.hostMapped(op.Local, op.N) {
		var err error
		if staged, err = s.stagingLocked(op.N); err != nil {
			return fmt.Errorf("%s: %w", op.What, err)
		}
		if op.Kind != transport.RemoteGet {
			if err := s.b.copySync(cuda.DevicePtr(staged.Dev), cuda.DevicePtr(op.Local), op.N); err != nil {
				return fmt.Errorf("%s: staging %d bytes: %w", op.What, op.N, err)
			}
		}
	}
	post := op
	if staged != nil {
		post.Local = transport.Addr(staged.Dev)
	}
	if err := n.Post(post); err != nil {
		return err
	}
	p.dirty = true
	switch op.Kind {
	case transport.RemotePut, transport.RemotePutSignal, transport.RemoteGet:
		// The source may be reused, the destination read, once this
		// returns: wait for local completion.
		if err := n.Quiet(s.cancelNet, timeout); err != nil {
			return err
		}
	}
	if staged != nil && op.Kind == transport.RemoteGet {
		if err := s.b.copySync(cuda.DevicePtr(op.Local), cuda.DevicePtr(staged.Dev), op.N); err != nil {
			return fmt.Errorf("%s: copying %d bytes out of staging: %w", op.What, op.N, err)
		}
	}
	return nil
}

// stagingLocked returns the stream's staging buffer, at least n bytes.
func (s *CUDAStream) stagingLocked(n uint64) (*cuda.MappedMem, error) {
	p := &s.proxy
	if p.staging != nil && p.staging.Size >= n {
		return p.staging, nil
	}
	if p.staging != nil {
		_ = p.staging.Free()
		p.staging = nil
	}
	m, err := s.b.drv.AllocMapped(allocSize(max(n, 1<<20)))
	if err != nil {
		return nil, fmt.Errorf("allocating %d bytes of pinned staging: %w", n, err)
	}
	p.staging = m
	return m, nil
}

// copySync copies n bytes between any two addresses the device reaches
// and returns when they landed.
func (b *CUDABackend) copySync(dst, src cuda.DevicePtr, n uint64) error {
	defer onThread()()
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.current(); err != nil {
		return err
	}
	if err := b.drv.MemcpyAsync(dst, src, n, b.aux); err != nil {
		return err
	}
	return b.aux.Synchronize()
}

// flushNetLocked waits until every posted network operation completed at
// its target (p.mu held).
func (s *CUDAStream) flushNetLocked(timeout time.Duration) error {
	p := &s.proxy
	if !p.dirty {
		return nil
	}
	var errs []error
	for _, n := range p.nets {
		if err := n.Flush(s.cancelNet, timeout); err != nil {
			errs = append(errs, transport.ExplainPeerLost(err, s.abort))
		}
	}
	p.dirty = false
	return errors.Join(errs...)
}

// flushNet is Sync's flush: remote completion of what was posted.
func (s *CUDAStream) flushNet() error {
	p := &s.proxy
	p.mu.Lock()
	defer p.mu.Unlock()
	timeout := p.timeout
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	if err := s.flushNetLocked(timeout); err != nil {
		return fmt.Errorf("sync: flush: %w", err)
	}
	return nil
}

// closeProxy waits for what is still posted (bounded) and frees staging.
func (s *CUDAStream) closeProxy() {
	p := &s.proxy
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.dirty {
		for _, n := range p.nets {
			_ = n.Quiet(nil, 5*time.Second)
		}
		p.dirty = false
	}
	if p.staging != nil {
		_ = p.staging.Free()
		p.staging = nil
	}
}

// proxyWait runs w on the host when the stream drives a network and every
// slot lies in device-mapped host memory (a window of the proxy path): the
// device is drained, then the host polls the slots, driving the networks,
// until the condition holds, the wait times out, or the job aborts. A
// failure becomes the stream's error, as a device wait's would. It reports
// whether it took w.
func (s *CUDAStream) proxyWait(w transport.WaitSpec) bool {
	p := &s.proxy
	p.mu.Lock()
	nets := p.nets
	p.mu.Unlock()
	if len(nets) == 0 {
		return false
	}
	for _, a := range w.Slots {
		if !s.b.hostMapped(a, 8) {
			return false
		}
	}
	fail := func(err error) {
		s.mu.Lock()
		if s.err == nil {
			s.err = err
		}
		s.mu.Unlock()
	}
	if err := s.syncDevice(context.Background()); err != nil {
		fail(err)
		return true
	}
	observe := func() (uint64, bool) {
		if w.Mode == transport.WaitEach {
			for _, a := range w.Slots {
				if v := atomic.LoadUint64((*uint64)(a.Pointer())); !w.Cmp.Holds(v, w.Value) {
					return v, false
				}
			}
			return w.Value, true
		}
		var sum uint64
		for _, a := range w.Slots {
			sum += atomic.LoadUint64((*uint64)(a.Pointer()))
		}
		return sum, w.Cmp.Holds(sum, w.Value)
	}
	timeout := w.Timeout
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	var start time.Time
	for i := 0; ; i++ {
		v, ok := observe()
		if w.Mismatch != nil && w.Mismatch(w.Value, v) {
			fail(w.Failed(v, transport.ErrMismatch))
			return true
		}
		if ok {
			return true
		}
		for _, n := range nets {
			n.Progress()
		}
		if i&255 != 255 {
			continue
		}
		if start.IsZero() {
			start = time.Now()
		}
		var cause error
		if err := s.abort.Err(); err != nil {
			cause = err
		} else {
			s.mu.Lock()
			cause = s.interrupt
			s.mu.Unlock()
		}
		if cause == nil && time.Since(start) > timeout {
			cause = s.b.timeoutCause()
		}
		if cause != nil {
			fail(w.Failed(v, cause))
			return true
		}
		if time.Since(start) > time.Millisecond {
			time.Sleep(20 * time.Microsecond)
		} else {
			runtime.Gosched()
		}
	}
}

// UseHostBuffers makes later buffers (Alloc) device-mapped host memory,
// like the windows of the proxy path, so that network operations read and
// write them in place instead of through staging. The engine calls it for
// a job with network peers.
func (b *CUDABackend) UseHostBuffers() { b.hostBuffers.Store(true) }

// allocHost is Alloc in device-mapped host memory.
func (b *CUDABackend) allocHost(size uint64) (*transport.Region, error) {
	defer onThread()()
	if err := b.current(); err != nil {
		return nil, err
	}
	m, err := b.drv.AllocMapped(allocSize(size))
	if err != nil {
		return nil, fmt.Errorf("allocating %d bytes of device-mapped host memory on %s: %w", size, b.Name(), err)
	}
	if uintptr(m.Dev) != uintptr(m.Host) {
		_ = m.Free()
		return nil, fmt.Errorf("allocating %d bytes on %s: device-mapped host memory has a device address other than its host address", size, b.Name())
	}
	local := transport.Addr(m.Dev)
	b.addHostRange(local, size)
	freed := false
	return transport.NewRegion(size, local, nil, nil, func() error {
		if freed {
			return nil
		}
		freed = true
		b.quiesce()
		defer onThread()()
		b.dropHostRange(local)
		return m.Free()
	}), nil
}

// Fail makes err the stream's error, as a failed operation's would be:
// the next Sync reports it. Host functions that run on the stream (graph
// mode on the proxy path) report their failures through it.
func (s *CUDAStream) Fail(err error) {
	s.mu.Lock()
	if s.err == nil {
		s.err = err
	}
	s.mu.Unlock()
}

// OnInterrupt adds fn to what Interrupt calls (with its cause), so that
// work the stream waits for elsewhere (a host function's own stream) ends
// with it; the returned function removes it.
func (s *CUDAStream) OnInterrupt(fn func(error)) (remove func()) {
	return s.addHook(&s.onInterrupt, fn)
}

// OnReport adds fn to what a Sync that returns an error calls with it (the
// failure has then been reported); the returned function removes it.
func (s *CUDAStream) OnReport(fn func(error)) (remove func()) { return s.addHook(&s.onReport, fn) }

// addHook appends fn to list (guarded by s.mu); removing it leaves a
// no-op in its place, so the others keep their positions.
func (s *CUDAStream) addHook(list *[]func(error), fn func(error)) func() {
	s.mu.Lock()
	defer s.mu.Unlock()
	id := len(*list)
	*list = append(*list, fn)
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		(*list)[id] = func(error) {}
	}
}

// HostFunc enqueues f: it runs on a driver thread once the work before it
// has completed, and the work after it waits for it.
func (s *CUDAStream) HostFunc(f *cuda.HostFunc) {
	s.enqueue(func() error { return s.s.LaunchHostFunc(f) })
}

// ProxyCall lets a CUDA graph hand work to a host thread without a host
// node: its kernel (kernels.ProxyCall) rings a host-mapped bell with the
// call's number and spins until the host answers in a host-mapped done
// word. A host node costs a wake-up of the driver's callback thread; a
// host thread that polls the bell answers within microseconds.
type ProxyCall struct {
	s          *CUDAStream
	bell, done *cuda.MappedMem
	calls      cuda.DevicePtr
	timeout    time.Duration
}

// NewProxyCall makes a call for s whose kernel gives up after timeout
// (<= 0: never) with a failure the next Sync reports.
func (s *CUDAStream) NewProxyCall(timeout time.Duration) (*ProxyCall, error) {
	b := s.b
	calls, err := b.alloc(8)
	if err != nil {
		return nil, fmt.Errorf("proxy call: %w", err)
	}
	pc := &ProxyCall{s: s, calls: calls, timeout: timeout}
	fail := func(err error) (*ProxyCall, error) {
		pc.Free()
		return nil, fmt.Errorf("proxy call: %w", err)
	}
	if err := b.Write(transport.Addr(calls), make([]byte, 8)); err != nil {
		return fail(err)
	}
	defer onThread()()
	if err := b.current(); err != nil {
		return fail(err)
	}
	if pc.bell, err = b.drv.AllocMapped(64); err != nil {
		return fail(err)
	}
	if pc.done, err = b.drv.AllocMapped(64); err != nil {
		return fail(err)
	}
	return pc, nil
}

// Launch enqueues one call on raw (s's stream, or a capture of it).
func (pc *ProxyCall) Launch(raw *cuda.Stream) error {
	return pc.s.b.k.ProxyCall(raw, kernels.ProxyCallSpec{Calls: pc.calls, Bell: pc.bell.Dev, Done: pc.done.Dev,
		Timeout: pc.timeout, Abort: pc.s.b.flag.Dev, Record: pc.s.rec.Dev})
}

// Rung is the number of the last call rung (0: none yet).
func (pc *ProxyCall) Rung() uint64 { return atomic.LoadUint64((*uint64)(pc.bell.Host)) }

// Answer tells the calls up to number e that their work is done.
func (pc *ProxyCall) Answer(e uint64) { atomic.StoreUint64((*uint64)(pc.done.Host), e) }

// Free releases the call's memory; no launch of it may still run.
func (pc *ProxyCall) Free() {
	defer onThread()()
	_ = pc.s.b.current()
	if pc.bell != nil {
		_ = pc.bell.Free()
		pc.bell = nil
	}
	if pc.done != nil {
		_ = pc.done.Free()
		pc.done = nil
	}
	if pc.calls != 0 {
		_ = pc.s.b.free(pc.calls)
		pc.calls = 0
	}
}
