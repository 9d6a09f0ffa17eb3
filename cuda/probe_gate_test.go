package cuda

import (
	"fmt"
	"testing"
	"unsafe"
)

// Machine probes of the two latency floors that bound luacoll's goals,
// measured with raw driver calls and two small kernels, no luacoll layers:
// GPU 0 and GPU 1 driven from one process with peer access
// (LUACOLL_PROBE=1; skipped otherwise).
//
// TestProbeGatedCopies: what a safe back-to-back all-gather of 2 ranks can
// cost per exec at most, by the mechanism that holds each copy until the
// peer is ready. TestProbeOrderedFlag: the one-way latency of a flag with
// and without an 8-byte store ordered before it.

const probeGateSrc = `
typedef unsigned long long u64;
__device__ __forceinline__ u64 gtime() { u64 t; asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); return t; }
__device__ __forceinline__ u64 ld_acq(const u64 *p) {
	u64 v; asm volatile("ld.acquire.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory"); return v; }
__device__ __forceinline__ u64 ld_rlx(const u64 *p) {
	u64 v; asm volatile("ld.relaxed.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory"); return v; }
__device__ __forceinline__ void st_rlx(u64 *p, u64 v) {
	asm volatile("st.relaxed.sys.global.u64 [%0], %1;" :: "l"(p), "l"(v) : "memory"); }
__device__ __forceinline__ void st_rel(u64 *p, u64 v) {
	asm volatile("st.release.sys.global.u64 [%0], %1;" :: "l"(p), "l"(v) : "memory"); }
// spin_geq waits until *p >= v; after 2 s it records v in err[0] and
// returns false.
__device__ bool spin_geq(const u64 *p, u64 v, u64 *err) {
	const u64 t0 = gtime();
	while ((long long)(ld_acq(p) - v) < 0) {
		if (gtime() - t0 > 2000000000ull) { err[0] = v; return false; }
	}
	return true;
}
// gate holds a stream between two copies of a 2-rank all-gather: it says
// "done k-1" (my copy k-1 has ended: it ran before this kernel), waits for
// the peer's "done k-1", then says "ready k" and waits for the peer's. With
// waits == 0 it only stores (the handshake-free ceiling).
extern "C" __global__ void gate(u64 *peer_done, u64 *my_done, u64 *peer_ready, u64 *my_ready, u64 k, u64 *err, int waits) {
	if (k > 1) { st_rlx(peer_done, k - 1); if (waits) spin_geq(my_done, k - 1, err); }
	st_rlx(peer_ready, k);
	if (waits) spin_geq(my_ready, k, err);
}
// pingpong: the first side sends i then waits for i, the other waits then
// sends, iters times. mode 0: the flag alone; 1: an 8-byte data store,
// then a release store of the flag; 2: data, fence.acq_rel.sys, relaxed
// flag; 3: as 1 with the data in the flag's own 128-byte line. The
// receiver checks the data (err[1] counts mismatches); the first side
// stores its elapsed ns in err[2].
extern "C" __global__ void pingpong(u64 *peer_flag, u64 *my_flag, u64 *peer_data, u64 *my_data, u64 iters, int first, int mode, u64 *err) {
	const u64 t0 = gtime();
	for (u64 i = 1; i <= iters; i++) {
		if (!first) {
			if (!spin_geq(my_flag, i, err)) return;
			if (mode != 0 && ld_rlx(my_data) != i) err[1]++;
		}
		if (mode == 0) {
			st_rlx(peer_flag, i);
		} else if (mode == 2) {
			st_rlx(peer_data, i);
			asm volatile("fence.acq_rel.sys;" ::: "memory");
			st_rlx(peer_flag, i);
		} else {
			st_rlx(peer_data, i);
			st_rel(peer_flag, i);
		}
		if (first) {
			if (!spin_geq(my_flag, i, err)) return;
			if (mode != 0 && ld_rlx(my_data) != i) err[1]++;
		}
	}
	if (first) err[2] = gtime() - t0;
}
`

// probePair is GPU 0 and GPU 1 with peer access both ways, a stream, the
// probe kernels and a 4 KiB block of zeroed device memory on each.
type probePair struct {
	t       *testing.T
	d       *Driver
	ctx     [2]*Context
	s       [2]*Stream
	gate    [2]*Function
	pp      [2]*Function
	flags   [2]DevicePtr // 4 KiB each: see the offsets below
	e0, e1  [2]*Event
	modules [2]*Module
}

// Offsets in a probePair's flag block (bytes).
const (
	offDone, offReady, offErr, offFlag = 0, 128, 256, 512
	offDataFar                         = 2048 // another 128-byte line
	offDataNear                        = offFlag + 8
	probeFlagBytes                     = 4096
)

func newProbePair(t *testing.T) *probePair {
	g, _, ctx1 := needProbePair(t)
	d := g.d
	p := &probePair{t: t, d: d, ctx: [2]*Context{g.ctx, ctx1}}
	cubin := probeGateCubin(t, g)
	var err error
	for i, c := range p.ctx {
		must(t, c.SetCurrent())
		p.s[i], err = d.StreamCreate()
		must(t, err)
		p.modules[i], err = d.ModuleLoadData(cubin)
		must(t, err)
		p.gate[i], err = p.modules[i].Function("gate")
		must(t, err)
		p.pp[i], err = p.modules[i].Function("pingpong")
		must(t, err)
		p.flags[i], err = d.MemAlloc(probeFlagBytes)
		must(t, err)
		p.e0[i], err = d.NewTimingEvent()
		must(t, err)
		p.e1[i], err = d.NewTimingEvent()
		must(t, err)
	}
	t.Cleanup(func() {
		for i, c := range p.ctx {
			_ = c.SetCurrent()
			_ = d.MemFree(p.flags[i])
			_ = p.modules[i].Unload()
		}
		_ = g.ctx.SetCurrent()
	})
	return p
}

// probeGateCubin compiles the probe kernels for g's device.
func probeGateCubin(t *testing.T, g *gpu) []byte {
	t.Helper()
	nv, err := LoadNVRTC()
	if err != nil {
		t.Skipf("no NVRTC: %v", err)
	}
	defer nv.Close()
	ma, mi, err := g.d.DeviceComputeCapability(g.dev)
	must(t, err)
	cubin, log, err := nv.CompileCUBIN(probeGateSrc, "probe_gate.cu", []string{fmt.Sprintf("--gpu-architecture=sm_%d%d", ma, mi)})
	if err != nil {
		t.Fatalf("%v\n%s", err, log)
	}
	return cubin
}

// TestProbeGateKernels: the probes' kernels compile and load on any GPU
// (the probes themselves need two), so a machine with two finds them ready.
func TestProbeGateKernels(t *testing.T) {
	g := needGPU(t)
	mod, err := g.d.ModuleLoadData(probeGateCubin(t, g))
	must(t, err)
	defer mod.Unload()
	for _, name := range []string{"gate", "pingpong"} {
		if _, err := mod.Function(name); err != nil {
			t.Error(err)
		}
	}
}

// reset zeroes both flag blocks and waits for it.
func (p *probePair) reset() {
	for i, c := range p.ctx {
		must(p.t, c.SetCurrent())
		must(p.t, p.d.MemsetD8Async(p.flags[i], 0, probeFlagBytes, p.s[i]))
		must(p.t, p.s[i].Synchronize())
	}
}

// word reads the 8-byte word at off in GPU i's flag block.
func (p *probePair) word(i int, off uint64) uint64 {
	var b [8]byte
	must(p.t, p.ctx[i].SetCurrent())
	must(p.t, p.d.MemcpyDtoH(b[:], p.flags[i]+DevicePtr(off)))
	return *(*uint64)(unsafe.Pointer(&b[0]))
}

// Ways to hold a copy until the peer is ready.
const (
	gateNone       = iota // copies back to back, no handshake (unsafe: the ceiling)
	gateKernelFree        // the one-thread kernel between copies, storing but never waiting
	gateKernel            // the one-thread kernel: done and ready handshakes
	gateMemOps            // stream memory operations: write the peer's flag, wait on ours
)

var gateNames = []string{
	"copies back to back (no handshake)",
	"one-thread kernel between copies, no waiting",
	"one-thread kernel: done + ready handshake",
	"stream memory operations: done + ready handshake",
}

// gated runs warm+iters iterations of "hold, then copy n bytes into the
// peer" on both GPUs at once and returns each side's time per iteration
// over the last iters (us).
func (p *probePair) gated(how int, src, dst [2]DevicePtr, n uint64, warm, iters int) [2]float64 {
	t, d := p.t, p.d
	p.reset()
	hold := func(i int, k uint64) error {
		me, peer := p.flags[i], p.flags[1-i]
		switch how {
		case gateKernel, gateKernelFree:
			waits := int32(0)
			if how == gateKernel {
				waits = 1
			}
			var a KernelArgs
			a.Ptr(peer + offDone).Ptr(me + offDone).Ptr(peer + offReady).Ptr(me + offReady).U64(k).Ptr(me + offErr).I32(waits)
			return d.LaunchKernel(p.gate[i], D1(1), D1(1), 0, p.s[i], &a)
		case gateMemOps:
			if k > 1 {
				if err := p.s[i].WriteValue64(peer+offDone, k-1, WriteValueDefault); err != nil {
					return err
				}
				if err := p.s[i].WaitValue64(me+offDone, k-1, WaitValueGEQ); err != nil {
					return err
				}
			}
			if err := p.s[i].WriteValue64(peer+offReady, k, WriteValueDefault); err != nil {
				return err
			}
			return p.s[i].WaitValue64(me+offReady, k, WaitValueGEQ)
		}
		return nil
	}
	for k := 1; k <= warm+iters; k++ {
		for i := range 2 {
			must(t, p.ctx[i].SetCurrent())
			if k == warm+1 {
				must(t, p.e0[i].Record(p.s[i]))
			}
			must(t, hold(i, uint64(k)))
			must(t, d.MemcpyAsync(dst[1-i], src[i], n, p.s[i]))
		}
	}
	var out [2]float64
	for i := range 2 {
		must(t, p.ctx[i].SetCurrent())
		must(t, p.e1[i].Record(p.s[i]))
		must(t, p.e1[i].Synchronize())
		ms, err := p.e0[i].ElapsedMs(p.e1[i])
		must(t, err)
		out[i] = float64(ms) * 1e3 / float64(iters)
		if e := p.word(i, offErr); e != 0 {
			t.Fatalf("%s: GPU %d timed out waiting for %d", gateNames[how], i, e)
		}
	}
	return out
}

// TestProbeGatedCopies: per-iteration time of a 2-rank all-gather's data
// movement (each GPU copies n bytes into the other, both at once) held by
// each mechanism, in one run. The all-gather of 2n total bytes reaches
// busbw = n / time; 380 GB/s at 256 MiB total is 353.2 us per exec.
func TestProbeGatedCopies(t *testing.T) {
	p := newProbePair(t)
	const maxN = 512 << 20
	var src, dst [2]DevicePtr
	for i, c := range p.ctx {
		must(t, c.SetCurrent())
		var err error
		src[i], err = p.d.MemAlloc(maxN)
		must(t, err)
		// Whole 2 MiB pages (see transport.allocSize).
		dst[i], err = p.d.MemAlloc(maxN + 2<<20)
		must(t, err)
		must(t, p.d.MemsetD8Async(src[i], byte(i+1), maxN, p.s[i]))
	}
	defer func() {
		for i, c := range p.ctx {
			_ = c.SetCurrent()
			_ = p.d.MemFree(src[i])
			_ = p.d.MemFree(dst[i])
		}
	}()
	for _, n := range []uint64{128 << 20, maxN} {
		for round := range 2 {
			for how := range gateNames {
				iters := 100
				if n == maxN {
					iters = 30
				}
				us := p.gated(how, src, dst, n, 5, iters)
				t.Logf("MEASURED %d MiB per direction, round %d, %s: %.1f / %.1f us per exec (GPU 0 / 1), busbw %.1f / %.1f GB/s",
					n>>20, round+1, gateNames[how], us[0], us[1], float64(n)/us[0]/1e3, float64(n)/us[1]/1e3)
			}
		}
	}
	// The copies landed: the last byte of each destination holds the
	// peer's fill value.
	for i := range 2 {
		var b [1]byte
		must(t, p.ctx[i].SetCurrent())
		must(t, p.d.MemcpyDtoH(b[:], dst[i]+maxN-1))
		if b[0] != byte(2-i) {
			t.Fatalf("GPU %d: destination ends in %d, want %d", i, b[0], 2-i)
		}
	}
}

// TestProbeOrderedFlag: one-way latency of a flag ping-pong between
// one-thread kernels on the two GPUs, the flag alone and with an 8-byte
// store that must be visible before it (the ordering a put_signal needs).
func TestProbeOrderedFlag(t *testing.T) {
	p := newProbePair(t)
	const iters = 20000
	names := []string{
		"flag alone (relaxed store, acquire poll)",
		"8-byte data in another line, then release store of the flag",
		"8-byte data, fence.acq_rel.sys, relaxed flag",
		"8-byte data in the flag's own 128-byte line, then release store",
	}
	for round := range 3 {
		for mode, name := range names {
			p.reset()
			data := uint64(offDataFar)
			if mode == 3 {
				data = offDataNear
			}
			for i := range 2 {
				me, peer := p.flags[i], p.flags[1-i]
				var a KernelArgs
				a.Ptr(peer + offFlag).Ptr(me + offFlag).Ptr(peer + DevicePtr(data)).Ptr(me + DevicePtr(data)).U64(iters).I32(int32(1 - i)).I32(int32(mode)).Ptr(me + offErr)
				must(t, p.ctx[i].SetCurrent())
				must(t, p.d.LaunchKernel(p.pp[i], D1(1), D1(1), 0, p.s[i], &a))
			}
			for i := range 2 {
				must(t, p.ctx[i].SetCurrent())
				must(t, p.s[i].Synchronize())
				if e := p.word(i, offErr); e != 0 {
					t.Fatalf("%s: GPU %d timed out waiting for %d", name, i, e)
				}
				if bad := p.word(i, offErr+8); bad != 0 {
					t.Fatalf("%s: GPU %d saw the flag before the data %d times", name, i, bad)
				}
			}
			ns := p.word(0, offErr+16)
			t.Logf("MEASURED round %d, %s: %.3f us one way (%d round trips)", round+1, name, float64(ns)/1e3/2/iters, iters)
		}
	}
}
