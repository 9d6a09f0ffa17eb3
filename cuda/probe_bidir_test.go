package cuda

import (
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// Machine probes: measurements that explain a ceiling, run by hand on a GPU
// machine (LUACOLL_PROBE=1); skipped otherwise.

const (
	probeEnv      = "LUACOLL_PROBE"
	probeChildEnv = "LUACOLL_PROBE_CHILD"
	probeBytes    = 1 << 30
	probeReps     = 7
)

func needProbe(t *testing.T) *gpu {
	t.Helper()
	if os.Getenv(probeEnv) == "" {
		t.Skip("machine probe: set " + probeEnv + "=1 on a GPU machine")
	}
	return needGPU(t)
}

// needProbePair is needProbe for probes of GPU 0 and GPU 1 from one
// process: it also returns device 1 and its primary context, with peer
// access enabled both ways, and leaves GPU 0's context current.
func needProbePair(t *testing.T) (*gpu, Device, *Context) {
	t.Helper()
	g := needProbe(t)
	if n, _ := g.d.DeviceCount(); n < 2 {
		t.Skip("needs 2 GPUs")
	}
	dev1, err := g.d.DeviceGet(1)
	must(t, err)
	ctx1, err := g.d.PrimaryCtxRetain(dev1)
	must(t, err)
	must(t, g.ctx.EnablePeerAccess(ctx1))
	must(t, ctx1.EnablePeerAccess(g.ctx))
	must(t, g.ctx.SetCurrent())
	return g, dev1, ctx1
}

// copyOp is one copy of probeBytes on a stream of a context.
type copyOp struct {
	ctx      *Context
	s        *Stream
	e0, e1   *Event
	dst, src DevicePtr
}

func newCopyOp(t *testing.T, d *Driver, ctx *Context, dst, src DevicePtr) *copyOp {
	t.Helper()
	must(t, ctx.SetCurrent())
	s, err := d.StreamCreate()
	must(t, err)
	e0, err := d.NewTimingEvent()
	must(t, err)
	e1, err := d.NewTimingEvent()
	must(t, err)
	return &copyOp{ctx: ctx, s: s, e0: e0, e1: e1, dst: dst, src: src}
}

func (o *copyOp) enqueue(d *Driver) error {
	if err := o.ctx.SetCurrent(); err != nil {
		return err
	}
	if err := o.e0.Record(o.s); err != nil {
		return err
	}
	if err := d.MemcpyAsync(o.dst, o.src, probeBytes, o.s); err != nil {
		return err
	}
	return o.e1.Record(o.s)
}

// gbps waits for the op and returns its bandwidth by its own events.
func (o *copyOp) gbps() (float64, error) {
	if err := o.ctx.SetCurrent(); err != nil {
		return 0, err
	}
	if err := o.e1.Synchronize(); err != nil {
		return 0, err
	}
	ms, err := o.e0.ElapsedMs(o.e1)
	if err != nil {
		return 0, err
	}
	return probeBytes / (float64(ms) * 1e-3) / 1e9, nil
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/2]
}

// runOps runs the ops together probeReps times and returns each op's
// median bandwidth.
func runOps(t *testing.T, d *Driver, ops ...*copyOp) []float64 {
	t.Helper()
	got := make([][]float64, len(ops))
	for range probeReps {
		for _, o := range ops {
			must(t, o.enqueue(d))
		}
		for i, o := range ops {
			g, err := o.gbps()
			must(t, err)
			got[i] = append(got[i], g)
		}
	}
	out := make([]float64, len(ops))
	for i := range got {
		out[i] = median(got[i])
	}
	return out
}

// vmmAlloc creates size bytes on dev and maps them with access for devs.
func vmmAlloc(t *testing.T, d *Driver, dev Device, size uint64, devs ...Device) (DevicePtr, MemHandle) {
	t.Helper()
	gran, err := d.MemGetAllocationGranularity(dev, GranularityRecommended)
	must(t, err)
	size = (size + gran - 1) / gran * gran
	h, err := d.MemCreate(dev, size)
	must(t, err)
	return vmmMap(t, d, h, size, gran, devs...), h
}

func vmmMap(t *testing.T, d *Driver, h MemHandle, size, gran uint64, devs ...Device) DevicePtr {
	t.Helper()
	va, err := d.MemAddressReserve(size, gran)
	must(t, err)
	must(t, d.MemMap(va, size, 0, h))
	must(t, d.MemSetAccess(va, size, devs...))
	return va
}

// TestProbeBidirSingleProcess: copy-engine copies between GPU 0 and GPU 1
// from one process, one direction and both at once, pushes and pulls, on
// cuMemAlloc and on VMM memory.
func TestProbeBidirSingleProcess(t *testing.T) {
	g, dev1, ctx1 := needProbePair(t)
	d := g.d
	// Each buffer: [0, B) source, [B, 2B) destination.
	must(t, g.ctx.SetCurrent())
	a0, err := d.MemAlloc(2 * probeBytes)
	must(t, err)
	must(t, ctx1.SetCurrent())
	a1, err := d.MemAlloc(2 * probeBytes)
	must(t, err)
	must(t, g.ctx.SetCurrent())
	v0, _ := vmmAlloc(t, d, g.dev, 2*probeBytes, g.dev, dev1)
	v1, _ := vmmAlloc(t, d, dev1, 2*probeBytes, g.dev, dev1)
	for _, m := range []struct {
		name   string
		b0, b1 DevicePtr
	}{{"cuMemAlloc", a0, a1}, {"VMM", v0, v1}} {
		push01 := newCopyOp(t, d, g.ctx, m.b1+probeBytes, m.b0)
		push10 := newCopyOp(t, d, ctx1, m.b0+probeBytes, m.b1)
		pull01 := newCopyOp(t, d, ctx1, m.b1+probeBytes, m.b0) // GPU 1 reads GPU 0
		pull10 := newCopyOp(t, d, g.ctx, m.b0+probeBytes, m.b1)
		uni := runOps(t, d, push01)
		uniPull := runOps(t, d, pull01)
		bi := runOps(t, d, push01, push10)
		biPull := runOps(t, d, pull01, pull10)
		t.Logf("MEASURED one process, %s, 1 GiB copy engine: push 0->1 %.1f GB/s; pull 0->1 %.1f; both directions push %.1f + %.1f; both pull %.1f + %.1f",
			m.name, uni[0], uniPull[0], bi[0], bi[1], biPull[0], biPull[1])
	}
}

// TestProbeBidirTwoProcess: the same copies from two processes (GPU 0 here,
// GPU 1 in a child), each pushing or pulling through its own mapping of the
// other's memory: legacy IPC handles, then VMM memory passed as a file
// descriptor.
func TestProbeBidirTwoProcess(t *testing.T) {
	g := needProbe(t)
	d := g.d
	if n, _ := d.DeviceCount(); n < 2 {
		t.Skip("needs 2 GPUs")
	}
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_SEQPACKET, 0)
	must(t, err)
	child := os.NewFile(uintptr(fds[1]), "probe-child")
	cmd := exec.Command(os.Args[0], "-test.run=^TestProbeChild$", "-test.v")
	cmd.Env = append(os.Environ(), probeChildEnv+"=1")
	cmd.ExtraFiles = []*os.File{child}
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	must(t, cmd.Start())
	child.Close()
	peer := probeSide{t: t, d: d, ctx: g.ctx, dev: g.dev, fd: fds[0]}
	res := peer.run(true)
	must(t, cmd.Wait())
	for _, l := range res {
		t.Log("MEASURED " + l)
	}
}

// TestProbeChild is the child of TestProbeBidirTwoProcess.
func TestProbeChild(t *testing.T) {
	if os.Getenv(probeChildEnv) == "" {
		t.Skip("helper for TestProbeBidirTwoProcess")
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	d, err := Load()
	must(t, err)
	dev1, err := d.DeviceGet(1)
	must(t, err)
	ctx1, err := d.PrimaryCtxRetain(dev1)
	must(t, err)
	must(t, ctx1.SetCurrent())
	p := probeSide{t: t, d: d, ctx: ctx1, dev: dev1, fd: 3}
	p.run(false)
}

type probeSide struct {
	t   *testing.T
	d   *Driver
	ctx *Context
	dev Device
	fd  int
}

func (p *probeSide) send(msg string, fd int) {
	var oob []byte
	if fd >= 0 {
		oob = syscall.UnixRights(fd)
	}
	must(p.t, syscall.Sendmsg(p.fd, []byte(msg), oob, nil, 0))
}

func (p *probeSide) recv() (string, int) {
	buf := make([]byte, 4096)
	oob := make([]byte, syscall.CmsgSpace(4))
	n, oobn, _, _, err := syscall.Recvmsg(p.fd, buf, oob, 0)
	must(p.t, err)
	fd := -1
	if oobn > 0 {
		msgs, err := syscall.ParseSocketControlMessage(oob[:oobn])
		must(p.t, err)
		rights, err := syscall.ParseUnixRights(&msgs[0])
		must(p.t, err)
		fd = rights[0]
	}
	return string(buf[:n]), fd
}

// both runs op on both sides at once probeReps times (the parent says go,
// the child answers with its figure; an idle child copies nothing) and
// returns the two medians (the child gets zeros).
func (p *probeSide) both(parent bool, op *copyOp, childIdle bool) (float64, float64) {
	t, d := p.t, p.d
	var mine, theirs []float64
	for range probeReps {
		if parent {
			p.send("go", -1)
			must(t, op.enqueue(d))
			g, err := op.gbps()
			must(t, err)
			mine = append(mine, g)
			r, _ := p.recv()
			f, err := strconv.ParseFloat(r, 64)
			must(t, err)
			theirs = append(theirs, f)
			continue
		}
		p.recv()
		g := 0.0
		if !childIdle {
			must(t, op.enqueue(d))
			var err error
			g, err = op.gbps()
			must(t, err)
		}
		p.send(strconv.FormatFloat(g, 'f', 2, 64), -1)
	}
	if !parent {
		return 0, 0
	}
	return median(mine), median(theirs)
}

// trade sends this side's IPC handle of mem (and fd, if >= 0) and opens
// the other side's; it returns the mapping of the other side's memory and
// the fd received (or -1).
func (p *probeSide) trade(mem DevicePtr, fd int) (DevicePtr, int) {
	t, d := p.t, p.d
	h, err := d.IpcGetMemHandle(mem)
	must(t, err)
	p.send(hex.EncodeToString(h[:]), fd)
	msg, pfd := p.recv()
	raw, err := hex.DecodeString(msg)
	must(t, err)
	var ph IpcMemHandle
	copy(ph[:], raw)
	peer, err := d.IpcOpenMemHandle(ph)
	must(t, err)
	return peer, pfd
}

// run: both sides allocate 2 GiB (legacy) and 2 GiB (VMM), trade handles,
// then for each variant both copy 1 GiB at once (see both). The parent
// returns the result lines.
func (p *probeSide) run(parent bool) []string {
	t, d := p.t, p.d
	must(t, p.ctx.SetCurrent())
	legacy, err := d.MemAlloc(2 * probeBytes)
	must(t, err)
	gran, err := d.MemGetAllocationGranularity(p.dev, GranularityRecommended)
	must(t, err)
	vm, vh := vmmAlloc(t, d, p.dev, 2*probeBytes, p.dev)
	vfd, err := d.MemExportToFD(vh)
	must(t, err)
	peerLegacy, pfd := p.trade(legacy, vfd)
	pvh, err := d.MemImportFromFD(pfd)
	must(t, err)
	peerVM := vmmMap(t, d, pvh, 2*probeBytes, gran, p.dev)
	variants := []struct {
		name            string
		own, peer       DevicePtr
		pull, childIdle bool
	}{
		{"legacy IPC, parent pushes alone", legacy, peerLegacy, false, true},
		{"legacy IPC, both push", legacy, peerLegacy, false, false},
		{"legacy IPC, both pull", legacy, peerLegacy, true, false},
		{"VMM fd, parent pushes alone", vm, peerVM, false, true},
		{"VMM fd, both push", vm, peerVM, false, false},
		{"VMM fd, both pull", vm, peerVM, true, false},
	}
	// Then the same with random bytes in every source.
	fill := func() {
		buf := make([]byte, probeBytes)
		r := rand.New(rand.NewPCG(uint64(p.dev)+1, 7))
		for i := 0; i < len(buf); i += 8 {
			binary.LittleEndian.PutUint64(buf[i:], r.Uint64())
		}
		must(t, p.ctx.SetCurrent())
		must(t, d.MemcpyHtoD(legacy, buf))
		must(t, d.MemcpyHtoD(vm, buf))
	}
	variants = append(variants, variants[1], variants[4])
	variants[len(variants)-2].name = "random data, legacy IPC, both push"
	variants[len(variants)-1].name = "random data, VMM fd, both push"
	var lines []string
	for i, v := range variants {
		if i == len(variants)-2 {
			fill()
		}
		op := newCopyOp(t, d, p.ctx, v.peer+probeBytes, v.own)
		if v.pull {
			op = newCopyOp(t, d, p.ctx, v.own+probeBytes, v.peer)
		}
		a, b := p.both(parent, op, v.childIdle)
		lines = append(lines, fmt.Sprintf("two processes, %s, 1 GiB copy engine: GPU0 side %.1f GB/s, GPU1 side %.1f GB/s", v.name, a, b))
	}
	// Allocations shaped like a window: the data buffer with a little
	// more after it (1 GiB + 1 KiB), the source a separate 1 GiB.
	for _, extra := range []uint64{1024, 2 << 20} {
		must(t, p.ctx.SetCurrent())
		w, err := d.MemAlloc(probeBytes + extra)
		must(t, err)
		src, err := d.MemAlloc(probeBytes)
		must(t, err)
		pw, _ := p.trade(w, -1)
		a, b := p.both(parent, newCopyOp(t, d, p.ctx, pw, src), false)
		lines = append(lines, fmt.Sprintf("two processes, legacy IPC, window-shaped (1 GiB + %d, separate source), both push: %.1f / %.1f GB/s", extra, a, b))
	}
	// Streams: the same bidirectional push on six streams in turn.
	for i := range 6 {
		a, b := p.both(parent, newCopyOp(t, d, p.ctx, peerLegacy+probeBytes, legacy), false)
		lines = append(lines, fmt.Sprintf("two processes, legacy IPC, both push on stream %d: %.1f / %.1f GB/s", i, a, b))
	}
	if parent {
		lines = append(lines, p.launchCosts()...)
	}
	return lines
}

// timeLaunches runs launch n times, each followed by polling s until it
// drains, and returns the median host time of the launch call alone and
// of launch + drain, in us.
func timeLaunches(t *testing.T, s *Stream, n int, launch func(i int) error) (float64, float64) {
	var enq, tot []float64
	for i := range n {
		t0 := time.Now()
		must(t, launch(i))
		t1 := time.Now()
		for {
			done, err := s.Query()
			must(t, err)
			if done {
				break
			}
		}
		enq = append(enq, t1.Sub(t0).Seconds()*1e6)
		tot = append(tot, time.Since(t0).Seconds()*1e6)
	}
	return median(enq), median(tot)
}

// launchCosts times host enqueue of an empty kernel with 14 arguments,
// of a captured one-kernel graph, and of a one-kernel graph whose
// arguments are set before each launch.
func (p *probeSide) launchCosts() []string {
	t, d := p.t, p.d
	nv, err := LoadNVRTC()
	if err != nil {
		return []string{"launch costs: no NVRTC: " + err.Error()}
	}
	defer nv.Close()
	ma, mi, err := d.DeviceComputeCapability(p.dev)
	must(t, err)
	const src = `extern "C" __global__ void nop(unsigned long long a0, unsigned long long a1, unsigned long long a2,
	unsigned long long a3, unsigned long long a4, unsigned long long a5, unsigned long long a6, unsigned long long a7,
	unsigned long long a8, unsigned long long a9, unsigned long long a10, unsigned long long a11,
	unsigned long long a12, unsigned long long *p) { if (p) *p = a0 + a12; }`
	cubin, _, err := nv.CompileCUBIN(src, "nop.cu", []string{fmt.Sprintf("--gpu-architecture=sm_%d%d", ma, mi)})
	must(t, err)
	mod, err := d.ModuleLoadData(cubin)
	must(t, err)
	f, err := mod.Function("nop")
	must(t, err)
	s, err := d.StreamCreate()
	must(t, err)
	args := func(i int) *KernelArgs {
		var a KernelArgs
		for j := range 13 {
			a.U64(uint64(i + j))
		}
		return a.Ptr(0)
	}
	const n = 2000
	enq, tot := timeLaunches(t, s, n, func(i int) error { return d.LaunchKernel(f, D1(1), D1(32), 0, s, args(i)) })
	must(t, s.BeginCapture(CaptureModeThreadLocal))
	must(t, d.LaunchKernel(f, D1(1), D1(32), 0, s, args(0)))
	gr, err := s.EndCapture()
	must(t, err)
	ge, err := gr.Instantiate(0)
	must(t, err)
	genq, gtot := timeLaunches(t, s, n, func(int) error { return ge.Launch(s) })
	kg, err := d.NewKernelGraph(f, 1, 32, args(0))
	must(t, err)
	defer kg.Destroy()
	kenq, ktot := timeLaunches(t, s, n, func(i int) error { return kg.Launch(1, 32, s, args(i)) })
	return []string{
		fmt.Sprintf("one-kernel graph, arguments set per launch: set + launch %.2f us, + completion seen %.2f us", kenq, ktot),
		fmt.Sprintf("empty kernel (14 args): enqueue %.2f us, enqueue + completion seen %.2f us (medians of %d)", enq, tot, n),
		fmt.Sprintf("captured one-kernel graph: launch %.2f us, launch + completion seen %.2f us", genq, gtot),
	}
}
