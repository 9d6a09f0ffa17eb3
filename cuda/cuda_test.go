package cuda

import (
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
	"unsafe"
)

// gpu is the driver and device-0 primary context shared by the GPU tests.
type gpu struct {
	d   *Driver
	ctx *Context
	dev Device
}

var loadGPU = sync.OnceValues(func() (*gpu, error) {
	d, dev, ctx, err := LoadPrimary(0)
	if err != nil {
		return nil, err
	}
	return &gpu{d: d, ctx: ctx, dev: dev}, nil
})

// needGPU skips the test without a driver or device, and otherwise locks
// the goroutine to its thread and makes the context current there.
func needGPU(t *testing.T) *gpu {
	t.Helper()
	g, err := loadGPU()
	if err != nil {
		t.Skipf("no usable CUDA driver/device: %v", err)
	}
	runtime.LockOSThread()
	t.Cleanup(runtime.UnlockOSThread)
	if err := g.ctx.SetCurrent(); err != nil {
		t.Fatal(err)
	}
	return g
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func alloc(t *testing.T, d *Driver, n uint64) DevicePtr {
	t.Helper()
	p, err := d.MemAlloc(n)
	must(t, err)
	t.Cleanup(func() { _ = d.MemFree(p) })
	return p
}

func stream(t *testing.T, d *Driver) *Stream {
	t.Helper()
	s, err := d.StreamCreate()
	must(t, err)
	t.Cleanup(func() { _ = s.Destroy() })
	return s
}

func randBytes(n int, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, 7))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// ---------------------------------------------------------------------------
// Tests that need no GPU.

func TestErrorFormat(t *testing.T) {
	err := error(&Error{Call: "cuMemAlloc(268435456)", Code: ErrorOutOfMemory, Name: "CUDA_ERROR_OUT_OF_MEMORY"})
	if got, want := err.Error(), "cuMemAlloc(268435456): CUDA_ERROR_OUT_OF_MEMORY"; got != want {
		t.Fatalf("Error() = %q, want %q", got, want)
	}
	wrapped := fmt.Errorf("window alloc: %w", err)
	if !errors.Is(wrapped, &Error{Code: ErrorOutOfMemory}) || !IsCode(wrapped, ErrorOutOfMemory) {
		t.Fatal("errors.Is/IsCode do not see the code through wrapping")
	}
	if errors.Is(wrapped, &Error{Code: ErrorInvalidValue}) {
		t.Fatal("errors.Is matched a different code")
	}
	if got := errorName(nil, 2); got != "CUDA_ERROR_OUT_OF_MEMORY" {
		t.Fatalf("fallback name %q", got)
	}
	if got := errorName(nil, 12345); got != "CUDA_ERROR_12345" {
		t.Fatalf("unknown name %q", got)
	}
}

func TestSymbolTable(t *testing.T) {
	seen := map[string]bool{}
	for s, e := range symbolTable {
		if e.name == "" || e.version < 2000 {
			t.Errorf("symbol %d: bad entry %+v", s, e)
		}
		if seen[e.name] {
			t.Errorf("duplicate symbol %s", e.name)
		}
		seen[e.name] = true
		if strings.HasPrefix(e.name, "cuMulticast") {
			t.Errorf("%s must never be resolved", e.name)
		}
		if strings.HasSuffix(e.name, "_v2") || strings.HasSuffix(e.name, "_v3") {
			t.Errorf("%s: resolve by base name and version, not by suffix", e.name)
		}
	}
}

func TestLoadMissingLibrary(t *testing.T) {
	_, err := LoadLibrary("libcuda-does-not-exist.so.1")
	if !errors.Is(err, ErrNoDriver) {
		t.Fatalf("err = %v, want ErrNoDriver", err)
	}
}

func TestNCCLVersionString(t *testing.T) {
	for code, want := range map[int]string{22105: "2.21.5", 2708: "2.7.8", 22703: "2.27.3"} {
		if got := ncclVersionString(code); got != want {
			t.Errorf("ncclVersionString(%d) = %q, want %q", code, got, want)
		}
	}
	if got := NormPCIBusID("00000000:3B:00.0"); got != "0000:3b:00.0" {
		t.Errorf("NormPCIBusID = %q", got)
	}
}

func TestProbe(t *testing.T) {
	info := Probe()
	t.Logf("luacoll info:\n%s", info)
	if !info.Available {
		if info.Reason == "" {
			t.Fatal("unavailable without a reason")
		}
		return
	}
	if len(info.Devices) == 0 || info.DriverVersion < 12000 {
		t.Fatalf("available but devices=%d driver=%d", len(info.Devices), info.DriverVersion)
	}
	for _, d := range info.Devices {
		if d.Err != "" {
			t.Errorf("GPU%d: %s", d.Index, d.Err)
		}
		if d.SMs == 0 || d.TotalMem == 0 || d.CCMajor == 0 {
			t.Errorf("GPU%d: incomplete %+v", d.Index, d)
		}
		if d.Multicast != MulticastSupported && d.Multicast != MulticastNotSupported {
			t.Errorf("GPU%d: multicast %q", d.Index, d.Multicast)
		}
		if d.MPS != "on" && d.MPS != "off" && d.MPS != "unknown" {
			t.Errorf("GPU%d: MPS %q", d.Index, d.MPS)
		}
		t.Logf("GPU%d: multicast %s, MPS %s", d.Index, d.Multicast, d.MPS)
	}
	if m := info.NVMLP2P; m != nil {
		for i, row := range m {
			if len(m) != len(info.Devices) || len(row) != len(m) || row[i] != "X" {
				t.Errorf("NVML P2P matrix %q", m)
			}
		}
	}
}

// The report shows both peer-access matrices, the driver's and NVML's.
func TestInfoString(t *testing.T) {
	info := Info{Available: true, DriverVersion: 13000, DriverPath: "libcuda.so.1",
		Devices: []DeviceInfo{{Index: 0, Name: "A", Multicast: MulticastSupported, MPS: "off"},
			{Index: 1, Name: "B", Multicast: MulticastNotSupported, MPS: "unknown"}},
		P2P:      [][]bool{{false, true}, {true, false}},
		NVMLP2P:  [][]string{{"X", "OK+NVL"}, {"topology", "X"}},
		Topology: [][]string{{"X", "NV18"}, {"NV18", "X"}},
		NVML:     LibInfo{Found: true, Version: "13"}, NVRTC: LibInfo{Err: "missing"}}
	s := info.String()
	for _, want := range []string{"CUDA driver: 13.0 (13000)", "P2P (cuDeviceCanAccessPeer):\n        GPU0   GPU1   \n  GPU0  X      OK",
		"P2P writes (NVML):\n        GPU0   GPU1   \n  GPU0  X      OK+NVL \n  GPU1  topology", "Topology (NVML):", "NV18", "NVRTC: not found: missing",
		"GPU0: A, ", "multicast supported, not used, MPS off\n", "GPU1: B, ", "multicast not supported, MPS unknown\n"} {
		if !strings.Contains(s, want) {
			t.Errorf("report misses %q:\n%s", want, s)
		}
	}
}

func TestNVRTC(t *testing.T) {
	n, err := LoadNVRTC()
	if err != nil {
		if !errors.Is(err, ErrNoNVRTC) || !strings.Contains(err.Error(), "install the CUDA runtime compiler") {
			t.Fatalf("unexpected error: %v", err)
		}
		t.Skipf("%v", err)
	}
	defer n.Close()
	ma, mi := n.Version()
	t.Logf("NVRTC %d.%d at %s", ma, mi, n.Path())
	const src = `extern "C" __global__ void k(int *p) { *p = 42; }`
	cubin, _, err := n.CompileCUBIN(src, "k.cu", []string{"--gpu-architecture=sm_80"})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(cubin, []byte("\x7fELF")) {
		t.Fatalf("not an ELF CUBIN: % x", cubin[:min(len(cubin), 8)])
	}
	_, log, err := n.CompileCUBIN(`extern "C" __global__ void k() { undefined_thing(); }`, "bad.cu", []string{"--gpu-architecture=sm_80"})
	var ne *NVRTCError
	if !errors.As(err, &ne) || !strings.Contains(log, "undefined_thing") {
		t.Fatalf("compile error not reported with its log: %v / %q", err, log)
	}
}

func TestLocalCPUListOfMissingDevice(t *testing.T) {
	if got := LocalCPUList("fffe:ff:1f.7"); got != "" {
		t.Errorf("LocalCPUList of a missing device = %q", got)
	}
}

// ---------------------------------------------------------------------------
// GPU tests.

func TestDriverAndDevice(t *testing.T) {
	g := needGPU(t)
	d := g.d
	n, err := d.DeviceCount()
	must(t, err)
	name, err := d.DeviceName(g.dev)
	must(t, err)
	bus, err := d.DevicePCIBusID(g.dev)
	must(t, err)
	mem, err := d.DeviceTotalMem(g.dev)
	must(t, err)
	ma, mi, err := d.DeviceComputeCapability(g.dev)
	must(t, err)
	// sysfs names the device by its bus id: the GPU's near CPUs are there
	// (some containers and WSL have no such entry).
	if _, err := os.Stat("/sys/bus/pci/devices/" + NormPCIBusID(bus)); err != nil {
		t.Logf("bus id %q (%q) not in sysfs: %v", bus, NormPCIBusID(bus), err)
	} else if cpus := LocalCPUList(bus); cpus == "" || strings.ContainsAny(cpus, " \n") {
		t.Errorf("LocalCPUList(%q) = %q", bus, cpus)
	}
	uuid := "?"
	if d.Has("cuDeviceGetUuid") {
		uuid, err = d.DeviceUUID(g.dev)
		must(t, err)
	}
	t.Logf("driver %s (%d) via %s; %d device(s); GPU0 %s sm_%d%d %.1f GiB %s %s; missing optional: %v",
		d.VersionString(), d.Version(), d.getProc, n, name, ma, mi, float64(mem)/(1<<30), bus, uuid, d.Missing())
	for _, a := range []struct {
		name string
		attr DeviceAttribute
	}{
		{"SMs", AttrMultiprocessorCount}, {"async engines", AttrAsyncEngineCount}, {"UVA", AttrUnifiedAddressing},
		{"VMM", AttrVirtualMemoryManagement}, {"POSIX FD", AttrHandleTypePosixFDSupported},
		{"64-bit stream mem ops", AttrCanUse64BitStreamMemOps}, {"wait NOR", AttrCanUseStreamWaitValueNor},
		{"PCI bus", AttrPCIBusID}, {"PCI domain", AttrPCIDomainID}, {"can map host", AttrCanMapHostMemory},
	} {
		v, err := d.DeviceAttribute(g.dev, a.attr)
		must(t, err)
		t.Logf("  %-22s %d", a.name, v)
	}
	for i := 0; i < n; i++ {
		for j := 0; j < n; j++ {
			if i != j {
				ok, err := d.DeviceCanAccessPeer(Device(i), Device(j))
				must(t, err)
				t.Logf("  peer %d->%d: %v", i, j, ok)
			}
		}
	}
	free, total, err := d.MemGetInfo()
	must(t, err)
	t.Logf("  memory free %.1f / %.1f GiB", float64(free)/(1<<30), float64(total)/(1<<30))
	if d.Has("cuMulticastCreate") {
		t.Fatal("cuMulticastCreate must not be resolvable through this package")
	}
}

func TestAllocErrorNamesCall(t *testing.T) {
	g := needGPU(t)
	_, err := g.d.MemAlloc(1 << 50)
	var ce *Error
	if !errors.As(err, &ce) || ce.Name != "CUDA_ERROR_OUT_OF_MEMORY" || ce.Call != "cuMemAlloc(1125899906842624)" {
		t.Fatalf("err = %#v", err)
	}
	t.Logf("error text: %v", err)
}

func TestRoundTrip(t *testing.T) {
	g := needGPU(t)
	d := g.d
	const n = 4<<20 + 3
	src := randBytes(n, 1)
	p := alloc(t, d, n)
	must(t, d.MemcpyHtoD(p, src))
	got := make([]byte, n)
	must(t, d.MemcpyDtoH(got, p))
	if !bytes.Equal(got, src) {
		t.Fatal("H2D/D2H round trip mismatch")
	}
}

func TestMemcpyAsyncAndEvents(t *testing.T) {
	g := needGPU(t)
	d := g.d
	s := stream(t, d)
	const n = 256 << 20
	a, b := alloc(t, d, n), alloc(t, d, n)
	must(t, d.MemsetD8Async(a, 0x5a, n, s))
	must(t, d.MemsetD8Async(b, 0, n, s))
	start, err := d.NewTimingEvent()
	must(t, err)
	end, err := d.NewTimingEvent()
	must(t, err)
	syncEv, err := d.NewSyncEvent()
	must(t, err)
	defer start.Destroy()
	defer end.Destroy()
	defer syncEv.Destroy()
	must(t, d.MemcpyAsync(b, a, n, s)) // warm-up
	const iters = 10
	must(t, start.Record(s))
	for range iters {
		must(t, d.MemcpyAsync(b, a, n, s))
	}
	must(t, end.Record(s))
	must(t, syncEv.Record(s))
	must(t, syncEv.Synchronize())
	done, err := s.Query()
	must(t, err)
	if !done {
		t.Fatal("stream not idle after its last event completed")
	}
	if _, err := start.ElapsedMs(syncEv); err == nil {
		t.Fatal("ElapsedMs with a timing-disabled event should fail")
	} else {
		t.Logf("disable-timing event rejected as expected: %v", err)
	}
	ms, err := start.ElapsedMs(end)
	must(t, err)
	gbs := float64(2*n*iters) / (float64(ms) / 1e3) / 1e9
	t.Logf("MEASURED cuMemcpyAsync D2D 256 MiB: %.3f ms each, %.0f GB/s (read+write)", float64(ms)/iters, gbs)
	// Spot-check contents.
	tail := make([]byte, 4096)
	must(t, d.MemcpyDtoH(tail, b.Add(n-4096)))
	if !bytes.Equal(tail, bytes.Repeat([]byte{0x5a}, 4096)) {
		t.Fatal("copy content mismatch")
	}
	// Async H2D/D2H through pinned host memory.
	h, err := d.MemHostAlloc(1<<20, HostAllocPortable)
	must(t, err)
	defer d.MemFreeHost(h)
	hb := unsafe.Slice((*byte)(h), 1<<20)
	copy(hb, randBytes(1<<20, 9))
	want := append([]byte(nil), hb...)
	must(t, d.MemcpyHtoDAsync(a, h, 1<<20, s))
	must(t, s.Synchronize()) // the source must stay intact until the copy ran
	clear(hb)
	must(t, d.MemcpyDtoHAsync(h, a, 1<<20, s))
	must(t, s.Synchronize())
	if !bytes.Equal(hb, want) {
		t.Fatal("pinned async round trip mismatch")
	}
}

func TestHostMapped(t *testing.T) {
	g := needGPU(t)
	d := g.d
	m, err := d.AllocMapped(4096)
	must(t, err)
	defer m.Free()
	s := stream(t, d)
	// The device writes through the mapped pointer; the host sees it.
	must(t, d.MemsetD8Async(m.Dev.Add(64), 0xab, 8, s))
	must(t, s.Synchronize())
	if v := atomic.LoadUint64((*uint64)(unsafe.Add(m.Host, 64))); v != 0xabababababababab {
		t.Fatalf("host sees %#x", v)
	}
	// The host writes; a device copy reads it.
	atomic.StoreUint64((*uint64)(m.Host), 0x1122334455667788)
	p := alloc(t, d, 8)
	must(t, d.MemcpyAsync(p, m.Dev, 8, s))
	must(t, s.Synchronize())
	got := make([]byte, 8)
	must(t, d.MemcpyDtoH(got, p))
	if *(*uint64)(unsafe.Pointer(&got[0])) != 0x1122334455667788 {
		t.Fatalf("device read %x", got)
	}
}

func TestPeerCopy(t *testing.T) {
	g := needGPU(t)
	d := g.d
	n, err := d.DeviceCount()
	must(t, err)
	s := stream(t, d)
	// With one GPU this still exercises cuMemcpyPeerAsync (same context).
	peerCtx := g.ctx
	if n > 1 {
		dev1, err := d.DeviceGet(1)
		must(t, err)
		peerCtx, err = d.PrimaryCtxRetain(dev1)
		must(t, err)
		defer peerCtx.Release()
		must(t, g.ctx.EnablePeerAccess(peerCtx))
		must(t, g.ctx.EnablePeerAccess(peerCtx)) // already enabled: no error
		must(t, g.ctx.SetCurrent())
	}
	a := alloc(t, d, 1<<20)
	must(t, peerCtx.SetCurrent())
	b, err := d.MemAlloc(1 << 20)
	must(t, err)
	defer func() { _ = peerCtx.SetCurrent(); _ = d.MemFree(b); _ = g.ctx.SetCurrent() }()
	must(t, g.ctx.SetCurrent())
	src := randBytes(1<<20, 3)
	must(t, d.MemcpyHtoD(a, src))
	// From pageable memory the DMA may still be in flight, and s (a
	// non-blocking stream) does not wait for the default stream.
	must(t, g.ctx.Synchronize())
	must(t, d.MemcpyPeerAsync(b, peerCtx, a, g.ctx, 1<<20, s))
	must(t, s.Synchronize())
	got := make([]byte, 1<<20)
	must(t, d.MemcpyDtoH(got, b))
	if !bytes.Equal(got, src) {
		t.Fatal("peer copy mismatch")
	}
}

func TestVMMExportImportFD(t *testing.T) {
	g := needGPU(t)
	d := g.d
	if !d.Has("cuMemCreate") {
		t.Skip("no VMM entry points")
	}
	vmm, _ := d.DeviceAttribute(g.dev, AttrVirtualMemoryManagement)
	fdok, _ := d.DeviceAttribute(g.dev, AttrHandleTypePosixFDSupported)
	if vmm == 0 || fdok == 0 {
		t.Skipf("VMM %d, POSIX FD handles %d", vmm, fdok)
	}
	gran, err := d.MemGetAllocationGranularity(g.dev, GranularityRecommended)
	must(t, err)
	minGran, err := d.MemGetAllocationGranularity(g.dev, GranularityMinimum)
	must(t, err)
	size := 4 * gran
	h, err := d.MemCreate(g.dev, size)
	must(t, err)
	fd, err := d.MemExportToFD(h)
	must(t, err)
	defer syscall.Close(fd)
	h2, err := d.MemImportFromFD(fd)
	must(t, err)
	va1, err := d.MemAddressReserve(size, gran)
	must(t, err)
	va2, err := d.MemAddressReserve(size, gran)
	must(t, err)
	must(t, d.MemMap(va1, size, 0, h))
	must(t, d.MemMap(va2, size, 0, h2))
	must(t, d.MemSetAccess(va1, size, g.dev))
	must(t, d.MemSetAccess(va2, size, g.dev))
	src := randBytes(int(size), 5)
	must(t, d.MemcpyHtoD(va1, src))
	got := make([]byte, size)
	must(t, d.MemcpyDtoH(got, va2))
	if !bytes.Equal(got, src) {
		t.Fatal("imported mapping does not alias the exported allocation")
	}
	must(t, d.MemUnmap(va1, size))
	must(t, d.MemUnmap(va2, size))
	must(t, d.MemAddressFree(va1, size))
	must(t, d.MemAddressFree(va2, size))
	must(t, d.MemRelease(h2))
	must(t, d.MemRelease(h))
	t.Logf("VMM: granularity min %d recommended %d; %d bytes exported as fd %d, imported, mapped twice, aliasing verified", minGran, gran, size, fd)
}

const ipcChildEnv = "LUACOLL_CUDA_IPC_CHILD"

// TestLegacyIPC exports a cuMemAlloc buffer with cuIpcGetMemHandle and has a
// child process (this test binary, re-executed) open it, check it and
// overwrite it.
func TestLegacyIPC(t *testing.T) {
	g := needGPU(t)
	d := g.d
	if !d.Has("cuIpcGetMemHandle") {
		t.Skip("no legacy IPC entry points")
	}
	const n = 1 << 20
	p := alloc(t, d, n)
	must(t, d.MemcpyHtoD(p, randBytes(n, 11)))
	h, err := d.IpcGetMemHandle(p)
	must(t, err)
	// Opening one's own handle is refused; the error must name the call.
	if _, err := d.IpcOpenMemHandle(h); err == nil {
		t.Log("note: driver opened an IPC handle in its own process")
	} else {
		t.Logf("same-process open refused as expected: %v", err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestIPCChild$", "-test.v")
	cmd.Env = append(os.Environ(), ipcChildEnv+"="+hex.EncodeToString(h[:]))
	start := time.Now()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	if !bytes.Contains(out, []byte("IPC child ok")) {
		t.Fatalf("child did not run the check:\n%s", out)
	}
	got := make([]byte, n)
	must(t, d.MemcpyDtoH(got, p))
	if !bytes.Equal(got, randBytes(n, 12)) {
		t.Fatal("child's write through the IPC mapping not visible")
	}
	t.Logf("legacy IPC across processes verified (child took %v)", time.Since(start).Round(time.Millisecond))
}

func TestIPCChild(t *testing.T) {
	hx := os.Getenv(ipcChildEnv)
	if hx == "" {
		t.Skip("helper for TestLegacyIPC")
	}
	g := needGPU(t)
	raw, err := hex.DecodeString(hx)
	if err != nil || len(raw) != 64 {
		t.Fatalf("bad handle %q", hx)
	}
	var h IpcMemHandle
	copy(h[:], raw)
	p, err := g.d.IpcOpenMemHandle(h)
	must(t, err)
	got := make([]byte, 1<<20)
	must(t, g.d.MemcpyDtoH(got, p))
	if !bytes.Equal(got, randBytes(1<<20, 11)) {
		t.Fatal("IPC mapping content mismatch")
	}
	must(t, g.d.MemcpyHtoD(p, randBytes(1<<20, 12)))
	must(t, g.d.IpcCloseMemHandle(p))
	t.Log("IPC child ok")
}

func TestStreamMemOps(t *testing.T) {
	g := needGPU(t)
	d := g.d
	if ok, _ := d.DeviceAttribute(g.dev, AttrCanUse64BitStreamMemOps); ok == 0 || !d.Has("cuStreamWaitValue64") {
		t.Skip("64-bit stream memory operations unsupported")
	}
	waiter, writer := stream(t, d), stream(t, d)
	flag := alloc(t, d, 64)
	must(t, d.MemsetD8Async(flag, 0, 64, writer))
	must(t, writer.Synchronize())
	const n = 1 << 20
	src, dst := alloc(t, d, n), alloc(t, d, n)
	data := randBytes(n, 21)
	must(t, d.MemcpyHtoD(src, data))
	must(t, d.MemsetD8Async(dst, 0, n, waiter))

	// The waiter blocks on flag >= 5, then copies.
	must(t, waiter.WaitValue64(flag, 5, WaitValueGEQ))
	must(t, d.MemcpyAsync(dst, src, n, waiter))
	time.Sleep(20 * time.Millisecond)
	if done, err := waiter.Query(); err != nil || done {
		t.Fatalf("waiter ran ahead of the flag (done=%v err=%v)", done, err)
	}
	must(t, writer.WriteValue64(flag, 3, WriteValueDefault)) // not enough
	must(t, writer.Synchronize())
	time.Sleep(5 * time.Millisecond)
	if done, _ := waiter.Query(); done {
		t.Fatal("waiter passed at 3 < 5")
	}
	t0 := time.Now()
	must(t, writer.WriteValue64(flag, 7, WriteValueDefault))
	must(t, waiter.Synchronize())
	t.Logf("MEASURED host-observed write->wait release: %v", time.Since(t0))
	got := make([]byte, n)
	must(t, d.MemcpyDtoH(got, dst))
	if !bytes.Equal(got, data) {
		t.Fatal("copy after the wait is wrong")
	}
	// EQ: the write comes first here, so a failure leaves no blocked wait.
	must(t, writer.WriteValue64(flag.Add(8), 42, WriteValueDefault))
	must(t, writer.Synchronize())
	must(t, waiter.WaitValue64(flag.Add(8), 42, WaitValueEQ))
	must(t, waiter.Synchronize())
	// The no-barrier flavour is refused by the v2 API; the error names it.
	if err := writer.WriteValue64(flag.Add(8), 43, WriteValueNoMemoryBarrier); err != nil {
		if !IsCode(err, ErrorInvalidValue) || !strings.Contains(err.Error(), "cuStreamWriteValue64(") {
			t.Fatalf("unexpected error: %v", err)
		}
		t.Logf("WriteValueNoMemoryBarrier refused as documented: %v", err)
	} else {
		must(t, writer.Synchronize())
		t.Log("note: this driver accepts WriteValueNoMemoryBarrier")
	}

	// Device round trip cost: 1000 write/wait pairs ping-ponged between
	// the two streams, timed with events.
	e0, err := d.NewTimingEvent()
	must(t, err)
	e1, err := d.NewTimingEvent()
	must(t, err)
	defer e0.Destroy()
	defer e1.Destroy()
	a, b := flag.Add(16), flag.Add(24)
	must(t, e0.Record(writer))
	const iters = 1000
	for i := uint64(1); i <= iters; i++ {
		must(t, writer.WriteValue64(a, i, WriteValueDefault))
		must(t, waiter.WaitValue64(a, i, WaitValueGEQ))
		must(t, waiter.WriteValue64(b, i, WriteValueDefault))
		must(t, writer.WaitValue64(b, i, WaitValueGEQ))
	}
	must(t, e1.Record(writer))
	must(t, e1.Synchronize())
	ms, err := e0.ElapsedMs(e1)
	must(t, err)
	t.Logf("MEASURED stream write/wait value64 ping-pong: %.2f us per round trip", float64(ms)*1e3/iters)
}

func TestGraphCapture(t *testing.T) {
	g := needGPU(t)
	d := g.d
	if !d.Has("cuStreamBeginCapture") || !d.Has("cuGraphGetNodes") {
		t.Skip("no graph entry points")
	}
	memops, _ := d.DeviceAttribute(g.dev, AttrCanUse64BitStreamMemOps)
	s := stream(t, d)
	const n = 1 << 16
	src, dst, flag := alloc(t, d, n), alloc(t, d, n), alloc(t, d, 8)
	data := randBytes(n, 31)
	must(t, d.MemcpyHtoD(src, data))
	must(t, d.MemsetD8Async(flag, 0, 8, s))
	must(t, s.Synchronize())

	must(t, s.BeginCapture(CaptureModeThreadLocal))
	must(t, d.MemsetD8Async(dst, 0, n, s))
	must(t, d.MemcpyAsync(dst, src, n, s))
	if memops != 0 {
		must(t, s.WriteValue64(flag, 99, WriteValueDefault))
	}
	gr, err := s.EndCapture()
	must(t, err)
	defer gr.Destroy()
	counts, err := gr.NodeCounts()
	must(t, err)
	t.Logf("captured graph nodes: %v", counts)
	if counts["memcpy"] != 1 || counts["memset"] != 1 {
		t.Fatalf("node counts %v", counts)
	}
	if memops != 0 && counts["mem_op"] != 1 {
		t.Fatalf("stream write not captured as a mem_op node: %v", counts)
	}
	ge, err := gr.Instantiate(0)
	must(t, err)
	defer ge.Destroy()
	must(t, ge.Launch(s))
	must(t, s.Synchronize())
	got := make([]byte, n)
	must(t, d.MemcpyDtoH(got, dst))
	if !bytes.Equal(got, data) {
		t.Fatal("graph copy mismatch")
	}
	if memops != 0 {
		v := make([]byte, 8)
		must(t, d.MemcpyDtoH(v, flag))
		if v[0] != 99 {
			t.Fatalf("graph write value = %v", v)
		}
	}
	// Replay cost.
	e0, _ := d.NewTimingEvent()
	e1, _ := d.NewTimingEvent()
	defer e0.Destroy()
	defer e1.Destroy()
	must(t, e0.Record(s))
	for range 100 {
		must(t, ge.Launch(s))
	}
	must(t, e1.Record(s))
	must(t, e1.Synchronize())
	ms, _ := e0.ElapsedMs(e1)
	t.Logf("MEASURED graph (memset+memcpy 64 KiB+write) replay: %.2f us each", float64(ms)*1e3/100)
}

func TestModuleLaunch(t *testing.T) {
	g := needGPU(t)
	d := g.d
	nv, err := LoadNVRTC()
	if err != nil {
		t.Skip(err)
	}
	defer nv.Close()
	ma, mi, err := d.DeviceComputeCapability(g.dev)
	must(t, err)
	const src = `extern "C" __global__ void fill(unsigned long long *p, unsigned long long v, unsigned int n, int add) {
	unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n) p[i] = v + (unsigned long long)(i * add);
}`
	cubin, _, err := nv.CompileCUBIN(src, "fill.cu", []string{fmt.Sprintf("--gpu-architecture=sm_%d%d", ma, mi)})
	must(t, err)
	mod, err := d.ModuleLoadData(cubin)
	must(t, err)
	defer mod.Unload()
	f, err := mod.Function("fill")
	must(t, err)
	if _, err := mod.Function("nope"); err == nil || !strings.Contains(err.Error(), `cuModuleGetFunction("nope")`) {
		t.Fatalf("missing function error: %v", err)
	}
	const n = 1000
	p := alloc(t, d, 8*n)
	s := stream(t, d)
	var args KernelArgs
	args.Ptr(p).U64(1 << 40).U32(n).I32(3)
	must(t, d.LaunchKernel(f, D1(4), D1(256), 0, s, &args))
	must(t, s.Synchronize())
	got := make([]byte, 8*n)
	must(t, d.MemcpyDtoH(got, p))
	for i := 0; i < n; i++ {
		v := *(*uint64)(unsafe.Pointer(&got[8*i]))
		if v != 1<<40+uint64(3*i) {
			t.Fatalf("p[%d] = %d", i, v)
		}
	}
	// The same kernel through a one-kernel graph, arguments changed per
	// launch: each launch must see its own arguments.
	if d.KernelGraphs() {
		kg, err := d.NewKernelGraph(f, 4, 256, &args)
		must(t, err)
		defer kg.Destroy()
		for k := uint64(1); k <= 3; k++ {
			var ka KernelArgs
			ka.Ptr(p).U64(k << 32).U32(n).I32(int32(k))
			must(t, kg.Launch(4, 256, s, &ka))
			must(t, s.Synchronize())
			must(t, d.MemcpyDtoH(got, p))
			for i := 0; i < n; i++ {
				if v := *(*uint64)(unsafe.Pointer(&got[8*i])); v != k<<32+k*uint64(i) {
					t.Fatalf("graph launch %d: p[%d] = %d", k, i, v)
				}
			}
		}
		// Fewer blocks: only the first 256 values change.
		var ka KernelArgs
		ka.Ptr(p).U64(7).U32(n).I32(0)
		must(t, kg.Launch(1, 256, s, &ka))
		must(t, s.Synchronize())
		must(t, d.MemcpyDtoH(got, p))
		if v0, v300 := *(*uint64)(unsafe.Pointer(&got[0])), *(*uint64)(unsafe.Pointer(&got[8*300])); v0 != 7 || v300 != 3<<32+900 {
			t.Fatalf("graph launch with 1 block: p[0] = %d, p[300] = %d", v0, v300)
		}
	} else {
		t.Log("driver without kernel graph entry points")
	}
	var tooMany KernelArgs
	for range MaxKernelArgs + 1 {
		tooMany.U32(0)
	}
	if err := d.LaunchKernel(f, D1(1), D1(1), 0, s, &tooMany); !errors.Is(err, ErrBadLaunch) {
		t.Fatalf("too many args: %v", err)
	}
}

// A host function runs in stream order, once per launch, and captured into
// a graph it becomes a host node that runs at every replay.
func TestLaunchHostFunc(t *testing.T) {
	g := needGPU(t)
	d := g.d
	s, err := d.StreamCreate()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Destroy()
	var calls atomic.Int64
	f := NewHostFunc(func() { calls.Add(1) })
	defer f.Free()
	for range 3 {
		if err := s.LaunchHostFunc(f); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Synchronize(); err != nil {
		t.Fatal(err)
	}
	if c := calls.Load(); c != 3 {
		t.Fatalf("%d calls after 3 launches", c)
	}
	if err := s.BeginCapture(CaptureModeThreadLocal); err != nil {
		t.Fatal(err)
	}
	lerr := s.LaunchHostFunc(f)
	gr, err := s.EndCapture()
	if lerr != nil || err != nil {
		t.Fatal(lerr, err)
	}
	defer gr.Destroy()
	if c := calls.Load(); c != 3 {
		t.Fatalf("capturing ran the function: %d calls", c)
	}
	nodes, err := gr.NodeCounts()
	if err != nil || nodes["host"] != 1 {
		t.Fatalf("graph nodes %v (%v); want one host node", nodes, err)
	}
	ex, err := gr.Instantiate(0)
	if err != nil {
		t.Fatal(err)
	}
	defer ex.Destroy()
	for range 5 {
		if err := ex.Launch(s); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Synchronize(); err != nil {
		t.Fatal(err)
	}
	if c := calls.Load(); c != 8 {
		t.Fatalf("%d calls after 5 replays; want 8", c)
	}
}

// The trampoline runs a host function by its id, and an id freed before
// the driver got to it is a miss, not a crash.
func TestHostFuncFreedIsANoOp(t *testing.T) {
	calls := 0
	f := NewHostFunc(func() { calls++ })
	id := f.id
	runHostFunc(id)
	f.Free()
	runHostFunc(id)
	f.Free()
	if calls != 1 {
		t.Fatalf("%d calls; want 1 (before Free only)", calls)
	}
}
