package kernels

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/luacoll/luacoll/cuda"
)

// Kernel names (extern "C" symbols of the program).
const (
	KernelPut        = "lc_put"
	KernelPutMulti   = "lc_put_multi"
	KernelSignal     = "lc_signal"
	KernelWait       = "lc_wait"
	KernelBarrier    = "lc_barrier"
	KernelCounterAdd = "lc_counter_add"
	KernelFillByte   = "lc_fill_byte"
	KernelFillIota32 = "lc_fill_iota32"
	KernelFillRand   = "lc_fill_rand"
	KernelChecksum   = "lc_checksum"
	KernelEqual      = "lc_equal"
	KernelPingPong   = "lc_pingpong"
	KernelProxyCall  = "lc_proxy_call"
)

// Names lists every kernel of the program; Load looks each one up, so
// that none is loaded later while other kernels run.
func Names() []string {
	return append([]string{KernelPut, KernelPutMulti, KernelSignal, KernelWait, KernelBarrier, KernelCounterAdd, KernelFillByte,
		KernelFillIota32, KernelFillRand, KernelChecksum, KernelEqual, KernelPingPong,
		KernelPutSignal, KernelPPPutSignal, KernelPPPutSignalLL, KernelBarrierLoop, KernelPutSignalWait, KernelWaitPutSignal, KernelPrelaunched,
		KernelAGPReady, KernelAGPDone, KernelAGPDoneReady, KernelAGPOne, KernelAGPLL, KernelAGPCopy, KernelAGPStaged, KernelPlan, KernelPlanMid, KernelPlanServe, KernelProxyCall}, reduceKernels()...)
}

// Options configure Load.
type Options struct {
	// CacheDir holds compiled CUBINs; "" means DefaultCacheDir().
	CacheDir string
	// NoCache compiles every time and writes nothing.
	NoCache bool
	// NVRTC is the compiler to use; nil loads one when a compile is needed.
	NVRTC *cuda.NVRTC
	// PutBlocksPerSM is the put kernel's grid per SM, 1 to 32 (0: 8; the
	// caller reads it from knobs.PutBlocksPerSM).
	PutBlocksPerSM int
	// Notice, when not nil, is told CompileNotice's line before Load
	// compiles (not when it reads the program from the cache), and why a
	// program it compiled could not be cached.
	Notice func(line string)
}

// Kernels is the kernel program loaded into one context. Its launch methods
// enqueue on the given stream and return without waiting; the calling OS
// thread must have the context current (see cuda.Context). It is safe for
// concurrent use: after Load only the one-kernel graph cache changes, under
// its own lock.
type Kernels struct {
	drv   *cuda.Driver
	ctx   *cuda.Context
	mods  []*cuda.Module // one a part of the program (parts.go)
	perSM int            // blocks per SM of the bandwidth kernels (Options.PutBlocksPerSM, default 8)
	fnMu  sync.Mutex
	fn    map[string]*cuda.Function
	// graphs holds a one-kernel graph per kernel and stream, for streams
	// that launch through graphs (cuda.Stream.GraphLaunch); gMu guards it,
	// noGraphs and their launches. noGraphs: a driver without the
	// entry points, or a graph that could not be made.
	gMu      sync.Mutex
	graphs   map[graphKey]*cuda.KernelGraph
	noGraphs bool
	sms      int
	compiled *Compiled
}

// Load compiles (or reads from the cache) the kernel program for the device
// of ctx and loads it into ctx, which it makes current on the calling
// thread.
func Load(drv *cuda.Driver, ctx *cuda.Context, opts Options) (*Kernels, error) {
	if err := ctx.SetCurrent(); err != nil {
		return nil, fmt.Errorf("load kernels: %w", err)
	}
	dev := ctx.Device()
	major, minor, err := drv.DeviceComputeCapability(dev)
	if err != nil {
		return nil, fmt.Errorf("load kernels: %w", err)
	}
	sms, err := drv.DeviceAttribute(dev, cuda.AttrMultiprocessorCount)
	if err != nil {
		return nil, fmt.Errorf("load kernels: %w", err)
	}
	dir := ""
	if !opts.NoCache {
		dir = opts.CacheDir
		if dir == "" {
			if dir, err = DefaultCacheDir(); err != nil {
				dir = "" // no usable cache location: compile every time
			}
		}
	}
	arch := Arch{major, minor}
	c, err := compileTelling(opts.NVRTC, arch, dir, opts.Notice)
	if err != nil {
		return nil, fmt.Errorf("load kernels on device %d: %w", dev, err)
	}
	mods, err := loadParts(drv, c)
	if err != nil && c.CacheHit {
		// A cache file that parses but does not load: rebuild it, under the
		// lock (unless another process rebuilt it meanwhile).
		first := fmt.Errorf("the cached program (%s): %w", c.Path, err)
		compile := func() (*Compiled, error) { return compileNow(opts.NVRTC, arch) }
		if c, err = cached(compile, arch, dir, CacheFile(c.Parts), opts.Notice); err == nil {
			mods, err = loadParts(drv, c)
		}
		if err != nil {
			err = errors.Join(first, err)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("load kernels on device %d: %w", dev, err)
	}
	k := &Kernels{drv: drv, ctx: ctx, mods: mods, fn: make(map[string]*cuda.Function), sms: sms, compiled: c, perSM: 8,
		noGraphs: !drv.KernelGraphs()}
	if v := opts.PutBlocksPerSM; v >= 1 && v <= 32 {
		k.perSM = v
	}
	for _, name := range Names() {
		f, err := lookup(mods, name)
		if err != nil {
			_ = k.unload()
			return nil, fmt.Errorf("load kernels on device %d: kernel %s: %w", dev, name, err)
		}
		k.fn[name] = f
	}
	return k, nil
}

// Compiled says how the program was obtained (cache hit, path, time).
func (k *Kernels) Compiled() *Compiled { return k.compiled }

// Close unloads the modules; ctx must be current.
func (k *Kernels) Close() error {
	k.gMu.Lock()
	for key, g := range k.graphs {
		_ = g.Destroy()
		delete(k.graphs, key)
	}
	k.gMu.Unlock()
	if err := k.unload(); err != nil {
		return fmt.Errorf("unload kernels: %w", err)
	}
	return nil
}

// unload unloads every part's module.
func (k *Kernels) unload() error {
	var errs []error
	for _, m := range k.mods {
		errs = append(errs, m.Unload())
	}
	k.mods = nil
	return errors.Join(errs...)
}

const (
	bulkThreads = 512
	bulkBytes   = 16 * bulkThreads // bytes one block moves per grid-stride step
)

// bulkGrid picks the grid of a bandwidth kernel over n bytes: enough blocks
// to cover n once, at most perSM per SM (the loops are grid-stride).
func (k *Kernels) bulkGrid(n uint64) uint32 { return k.bulkGridPer(n, k.perSM) }

// bulkGridPer is bulkGrid with perSM blocks per SM at most (<= 0: the
// default).
func (k *Kernels) bulkGridPer(n uint64, perSM int) uint32 {
	if perSM <= 0 {
		perSM = k.perSM
	}
	g := (n + bulkBytes - 1) / bulkBytes
	g = min(g, uint64(perSM*k.sms))
	return uint32(max(g, 1))
}

func (k *Kernels) launch(name string, grid, block uint32, s *cuda.Stream, a *cuda.KernelArgs) error {
	f, err := k.function(name)
	if err != nil {
		return err
	}
	if s.GraphLaunch() {
		if ok, err := k.graphLaunch(f, grid, block, s, a); ok {
			return err
		}
	}
	return k.drv.LaunchKernel(f, cuda.D1(grid), cuda.D1(block), 0, s, a)
}

// launchPlain is launch without the one-kernel graph, for kernels that
// wait on the GPU for the host's commands: the previous launch of them is
// usually still running, and updating a graph's arguments while an
// instance of it runs waits for that instance.
func (k *Kernels) launchPlain(name string, grid, block uint32, s *cuda.Stream, a *cuda.KernelArgs) error {
	f, err := k.function(name)
	if err != nil {
		return err
	}
	return k.drv.LaunchKernel(f, cuda.D1(grid), cuda.D1(block), 0, s, a)
}

type graphKey struct {
	f *cuda.Function
	s *cuda.Stream
}

// graphLaunch enqueues f through its one-kernel graph for s, made on
// first use: on the machines measured, setting a graph's arguments and
// launching it takes about 1.3 us less host time than cuLaunchKernel
// (3.7 against 5.0 us on 2 x H200 VMs). Each stream has its own graph: a
// graph's launches are ordered after one another, whatever the stream.
// It reports false (and launches nothing) when graphs are off or a graph
// cannot be made, which turns them off for good: the caller then uses
// cuLaunchKernel.
func (k *Kernels) graphLaunch(f *cuda.Function, grid, block uint32, s *cuda.Stream, a *cuda.KernelArgs) (bool, error) {
	k.gMu.Lock()
	defer k.gMu.Unlock()
	if k.noGraphs {
		return false, nil
	}
	key := graphKey{f, s}
	g := k.graphs[key]
	if g == nil {
		var err error
		if g, err = k.drv.NewKernelGraph(f, grid, block, a); err != nil {
			if errors.Is(err, cuda.ErrBadLaunch) {
				// The arguments, not graphs: report it as a launch would.
				return true, fmt.Errorf("kernel %s: %w", f.Name(), err)
			}
			k.noGraphs = true
			return false, nil
		}
		if k.graphs == nil {
			k.graphs = make(map[graphKey]*cuda.KernelGraph)
		}
		k.graphs[key] = g
	}
	if err := g.Launch(grid, block, s, a); err != nil {
		return true, fmt.Errorf("kernel %s: %w", f.Name(), err)
	}
	return true, nil
}

// ForgetStream destroys the graphs made for s (before s is destroyed).
func (k *Kernels) ForgetStream(s *cuda.Stream) {
	k.gMu.Lock()
	defer k.gMu.Unlock()
	for key, g := range k.graphs {
		if key.s == s {
			_ = g.Destroy()
			delete(k.graphs, key)
		}
	}
}

// function returns a kernel of the program by name: the ones Names lists
// are looked up at Load, any other on first use.
func (k *Kernels) function(name string) (*cuda.Function, error) {
	k.fnMu.Lock()
	defer k.fnMu.Unlock()
	if f := k.fn[name]; f != nil {
		return f, nil
	}
	f, err := lookup(k.mods, name)
	if err != nil {
		return nil, fmt.Errorf("kernel %s: %w", name, err)
	}
	k.fn[name] = f
	return f, nil
}

func (k *Kernels) single(name string, s *cuda.Stream, a *cuda.KernelArgs) error {
	return k.launch(name, 1, 1, s, a)
}

// Put copies n bytes from src to dst (either may be peer-mapped memory)
// with 16-byte accesses where the two share alignment.
func (k *Kernels) Put(s *cuda.Stream, dst, src cuda.DevicePtr, n uint64) error {
	if n == 0 {
		return nil
	}
	var a cuda.KernelArgs
	a.Ptr(dst).Ptr(src).U64(n)
	return k.launch(KernelPut, k.bulkGrid(n), bulkThreads, s, &a)
}

// PutMultiMax is the most places one PutMulti writes.
const PutMultiMax = 8

// PutMulti copies n bytes from src to each of dsts (1 to PutMultiMax
// places, none overlapping src or another) in one kernel, the grid dealt
// among the places; as Put, with 16-byte accesses where a place and src
// share alignment.
func (k *Kernels) PutMulti(s *cuda.Stream, dsts []cuda.DevicePtr, src cuda.DevicePtr, n uint64) error {
	if len(dsts) == 0 || len(dsts) > PutMultiMax {
		return fmt.Errorf("put to %d places: %w: 1 to %d", len(dsts), ErrBadSpec, PutMultiMax)
	}
	if n == 0 {
		return nil
	}
	if len(dsts) == 1 {
		return k.Put(s, dsts[0], src, n)
	}
	var a cuda.KernelArgs
	a.Ptr(src).U64(n).U32(uint32(len(dsts)))
	for i := range PutMultiMax {
		var d cuda.DevicePtr
		if i < len(dsts) {
			d = dsts[i]
		}
		a.Ptr(d)
	}
	per := max(k.bulkGrid(n*uint64(len(dsts)))/uint32(len(dsts)), 1)
	return k.launch(KernelPutMulti, per*uint32(len(dsts)), bulkThreads, s, &a)
}

// SignalOp selects what Signal does to the slot.
type SignalOp int32

const (
	// SignalSet stores the value.
	SignalSet SignalOp = 0
	// SignalAdd adds the value atomically (system scope).
	SignalAdd SignalOp = 1
)

// Signal enqueues a system-scope release of value into the 64-bit slot
// (set or add): every write ordered before it on s is visible to whoever
// observes the new value.
func (k *Kernels) Signal(s *cuda.Stream, slot cuda.DevicePtr, op SignalOp, value uint64) error {
	if op != SignalSet && op != SignalAdd {
		return fmt.Errorf("signal: unknown op %d", op)
	}
	var a cuda.KernelArgs
	a.Ptr(slot).U64(value).I32(int32(op))
	return k.single(KernelSignal, s, &a)
}

// Cmp is a wait comparison on unsigned 64-bit values.
type Cmp int32

// Comparisons, in the order of the device constants.
const (
	CmpEQ Cmp = iota // ==
	CmpNE            // ~=
	CmpLT            // <
	CmpLE            // <=
	CmpGT            // >
	CmpGE            // >=
)

var cmpNames = [...]string{"==", "~=", "<", "<=", ">", ">="}

// String returns the Lua spelling ("==", "~=", "<", "<=", ">", ">=").
func (c Cmp) String() string {
	if c < 0 || int(c) >= len(cmpNames) {
		return fmt.Sprintf("Cmp(%d)", int32(c))
	}
	return cmpNames[c]
}

// ParseCmp parses a Lua comparison operator; "!=" is accepted for "~=".
func ParseCmp(s string) (Cmp, error) {
	if s == "!=" {
		return CmpNE, nil
	}
	for i, n := range cmpNames {
		if n == s {
			return Cmp(i), nil
		}
	}
	return 0, fmt.Errorf("unknown comparison %q (want ==, ~=, <, <=, > or >=)", s)
}

// Holds reports whether v cmp target holds, as the device evaluates it.
func (c Cmp) Holds(v, target uint64) bool {
	switch c {
	case CmpEQ:
		return v == target
	case CmpNE:
		return v != target
	case CmpLT:
		return v < target
	case CmpLE:
		return v <= target
	case CmpGT:
		return v > target
	}
	return v >= target
}

// WaitSpec describes a device-side wait.
type WaitSpec struct {
	Slots   cuda.DevicePtr // first 64-bit slot
	Count   uint32         // number of slots summed (>= 1)
	Stride  uint64         // bytes between slots (multiple of 8; 0 or 8 = contiguous)
	Cmp     Cmp
	Value   uint64         // the sum is compared with Value
	Timeout time.Duration  // <= 0: wait without a time limit
	Abort   cuda.DevicePtr // device address of a host-mapped uint32 flag, or 0
	Record  cuda.DevicePtr // device address of a host-mapped error record, or 0
}

// ErrBadSpec is wrapped by launchers for arguments they reject.
var ErrBadSpec = errors.New("invalid kernel arguments")

func nanos(d time.Duration) uint64 {
	if d <= 0 {
		return 0
	}
	return uint64(d)
}

// Wait enqueues a wait until the sum of the slots satisfies the comparison.
// On timeout or abort the kernel fills the record (if any) and returns, and
// the stream moves on: check the record (CheckRecord) after synchronizing.
func (k *Kernels) Wait(s *cuda.Stream, w WaitSpec) error {
	if err := w.check("wait"); err != nil {
		return err
	}
	var a cuda.KernelArgs
	w.push(&a)
	return k.single(KernelWait, s, &a)
}

// BarrierSpec describes one rank's arrival at a window barrier.
type BarrierSpec struct {
	// Epoch is this rank's barrier counter (8 bytes of device memory,
	// zeroed once, then owned by the barrier kernel).
	Epoch cuda.DevicePtr
	// Rows is a device array of Size pointers: entry p is rank p's slot
	// row (Size 64-bit slots) as mapped on this device; entry Rank is
	// this rank's own row. Rows must be zeroed once before first use.
	Rows    cuda.DevicePtr
	Rank    uint32
	Size    uint32
	Timeout time.Duration
	Abort   cuda.DevicePtr
	Record  cuda.DevicePtr
}

// Barrier enqueues this rank's barrier: it bumps Epoch to e, writes e into
// its slot of every row, and waits until all slots of its own row reach e.
func (k *Kernels) Barrier(s *cuda.Stream, b BarrierSpec) error {
	if b.Size == 0 || b.Rank >= b.Size || b.Epoch%8 != 0 || b.Rows%8 != 0 {
		return fmt.Errorf("barrier(rank %d of %d): %w", b.Rank, b.Size, ErrBadSpec)
	}
	var a cuda.KernelArgs
	a.Ptr(b.Epoch).Ptr(b.Rows).U32(b.Rank).U32(b.Size).U64(nanos(b.Timeout)).Ptr(b.Abort).Ptr(b.Record)
	return k.single(KernelBarrier, s, &a)
}

// CounterAdd adds value to the 64-bit counter after all prior work on s
// (a local completion counter).
func (k *Kernels) CounterAdd(s *cuda.Stream, counter cuda.DevicePtr, value uint64) error {
	var a cuda.KernelArgs
	a.Ptr(counter).U64(value)
	return k.single(KernelCounterAdd, s, &a)
}

// ProxyCallSlot is the slot field of a failure record that lc_proxy_call
// wrote (sync.cu's LC_PROXY_SLOT).
const ProxyCallSlot = 0x7ffffffe

// ProxyCallSpec is one call of stream work into a host thread (see
// lc_proxy_call): Calls is the kernel's call count (8 bytes of device
// memory, zeroed once), Bell and Done host-mapped words.
type ProxyCallSpec struct {
	Calls, Bell, Done cuda.DevicePtr
	Timeout           time.Duration // <= 0: none
	Abort, Record     cuda.DevicePtr
}

// ProxyCall enqueues a call: the count rung into Bell, then a wait until
// Done reaches it.
func (k *Kernels) ProxyCall(s *cuda.Stream, p ProxyCallSpec) error {
	if p.Calls == 0 || p.Bell == 0 || p.Done == 0 {
		return fmt.Errorf("proxy call: %w", ErrBadSpec)
	}
	strong := int32(1) // fence the bell, poll with system-scope acquire loads
	var a cuda.KernelArgs
	a.Ptr(p.Calls).Ptr(p.Bell).Ptr(p.Done).U64(nanos(p.Timeout)).Ptr(p.Abort).Ptr(p.Record).I32(strong)
	return k.single(KernelProxyCall, s, &a)
}

// FillByte sets n bytes at dst to b.
func (k *Kernels) FillByte(s *cuda.Stream, dst cuda.DevicePtr, n uint64, b byte) error {
	if n == 0 {
		return nil
	}
	var a cuda.KernelArgs
	a.Ptr(dst).U64(n).U32(uint32(b))
	return k.launch(KernelFillByte, k.bulkGrid(n), bulkThreads, s, &a)
}

// FillIota32 writes count uint32 values start, start+1, ... at dst (4-byte
// aligned); see the host FillIota32.
func (k *Kernels) FillIota32(s *cuda.Stream, dst cuda.DevicePtr, count uint64, start uint32) error {
	if dst%4 != 0 {
		return fmt.Errorf("fill iota32 at %#x: %w: not 4-byte aligned", uint64(dst), ErrBadSpec)
	}
	if count == 0 {
		return nil
	}
	var a cuda.KernelArgs
	a.Ptr(dst).U64(count).U32(start)
	return k.launch(KernelFillIota32, k.bulkGrid(4*count), bulkThreads, s, &a)
}

// FillRand writes n pseudo-random bytes at dst; see the host FillRand.
func (k *Kernels) FillRand(s *cuda.Stream, dst cuda.DevicePtr, n uint64, seed uint64) error {
	if n == 0 {
		return nil
	}
	var a cuda.KernelArgs
	a.Ptr(dst).U64(n).U64(seed)
	return k.launch(KernelFillRand, k.bulkGrid(n), bulkThreads, s, &a)
}

// Checksum zeroes the 64-bit result at out and then stores there the
// checksum of the n bytes at src; see the host Checksum.
func (k *Kernels) Checksum(s *cuda.Stream, src cuda.DevicePtr, n uint64, out cuda.DevicePtr) error {
	if err := k.drv.MemsetD8Async(out, 0, 8, s); err != nil {
		return fmt.Errorf("checksum: %w", err)
	}
	var a cuda.KernelArgs
	a.Ptr(src).U64(n).Ptr(out)
	return k.launch(KernelChecksum, k.bulkGrid(n), bulkThreads, s, &a)
}

// Equal zeroes the 64-bit result at out and then stores there the number of
// differing bytes between the n-byte ranges at a and b (0: equal).
func (k *Kernels) Equal(s *cuda.Stream, a, b cuda.DevicePtr, n uint64, out cuda.DevicePtr) error {
	if err := k.drv.MemsetD8Async(out, 0, 8, s); err != nil {
		return fmt.Errorf("equal: %w", err)
	}
	if n == 0 {
		return nil
	}
	var args cuda.KernelArgs
	args.Ptr(a).Ptr(b).U64(n).Ptr(out)
	return k.launch(KernelEqual, k.bulkGrid(n), bulkThreads, s, &args)
}

// PingPong enqueues one side of the raw flag ping-pong benchmark: plain
// volatile 64-bit stores to peer and spins on mine, iters round trips. Both
// flags must start at 0 and both sides must run concurrently (two streams,
// or two devices). outNs (may be 0) receives the elapsed device-clock
// nanoseconds, or ^0 on timeout.
func (k *Kernels) PingPong(s *cuda.Stream, mine, peer cuda.DevicePtr, iters uint64, initiator bool, timeout time.Duration, outNs cuda.DevicePtr) error {
	init := int32(0)
	if initiator {
		init = 1
	}
	var a cuda.KernelArgs
	a.Ptr(mine).Ptr(peer).U64(iters).I32(init).U64(nanos(timeout)).Ptr(outNs)
	return k.single(KernelPingPong, s, &a)
}
