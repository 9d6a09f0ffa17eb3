package gpu

import (
	"time"

	"github.com/luacoll/luacoll/cuda"
	"github.com/luacoll/luacoll/kernels"
	"github.com/luacoll/luacoll/transport"
)

// The small interfaces through which the layers above reach a CUDA stream
// or backend: they assert a rank's transport.Stream or transport.Backend
// to one of these, never to the concrete types, so that each names what it
// uses. *CUDAStream and *CUDABackend implement them.

// AGPStream is a stream that runs the persistent all-gather's device
// protocol (agp.go).
type AGPStream interface {
	transport.Stream
	NewAGP(cfg AGPConfig) (*CUDAAGP, error)
}

// ProxyStream is a stream whose work can call into a host thread (the
// proxy path's graph mode): calls, host functions, graphs, and the hooks
// that tie the thread's failures and interrupts to the stream.
type ProxyStream interface {
	transport.Stream
	NewProxyCall(timeout time.Duration) (*ProxyCall, error)
	HostOnce(fn func())
	Capture(fn func(cs *cuda.Stream) error) (*CUDAGraph, error)
	Fail(err error)
	OnInterrupt(fn func(error)) (remove func())
	OnReport(fn func(error)) (remove func())
}

// GraphStream is a stream that runs work of the caller's own on the
// driver's stream, eagerly (Enqueue) or captured into a graph (Capture),
// with the device's context current on the calling thread (Current).
type GraphStream interface {
	transport.Stream
	Current() error
	Enqueue(fn func(cs *cuda.Stream) error)
	Capture(fn func(cs *cuda.Stream) error) (*CUDAGraph, error)
}

// PlanStream is a stream that runs a plan's steps in the plan interpreter
// (cuda_plan.go): in one kernel a run, as launches, or as a graph.
type PlanStream interface {
	transport.Stream
	RunPlan(p *DevicePlan, rep0, times uint64, timeout time.Duration, gpuScope bool, moves []kernels.PlanMove)
	RunPlanSegments(p *DevicePlan, steps []kernels.PlanStep, segs []PlanSegment, rep0, times uint64, timeout time.Duration, gpuScope bool, kmax uint64)
	CapturePlan(p *DevicePlan, steps []kernels.PlanStep, timeout time.Duration, gpuScope bool, kmax uint64) (*CUDAGraph, error)
	LaunchPlan(p *DevicePlan, g *CUDAGraph, times int)
	RewritePlan(p *DevicePlan, steps []kernels.PlanStep) error
	DestroyPlanGraph(g *CUDAGraph) error
	FreePlan(p *DevicePlan) error
}

// RewritePlan implements PlanStream: p.Rewrite on this stream.
func (s *CUDAStream) RewritePlan(p *DevicePlan, steps []kernels.PlanStep) error {
	return p.Rewrite(s, steps)
}

// HostOnce enqueues fn as a one-off host function on the stream, freed
// once it ran.
func (s *CUDAStream) HostOnce(fn func()) {
	var f *cuda.HostFunc
	f = cuda.NewHostFunc(func() {
		fn()
		f.Free()
	})
	s.HostFunc(f)
}

// PlanBackend is a backend that builds device plans.
type PlanBackend interface {
	transport.Backend
	NewDevicePlan(steps []kernels.PlanStep, fail func(step int, observed, target uint64, cause error) error) (*DevicePlan, error)
}

// SetGPUShared implements transport.GPUSharer: prelaunched steps are on
// as PrelaunchDefault says for a rank that does or does not share its GPU.
func (b *CUDABackend) SetGPUShared(shared bool) { b.SetPrelaunch(PrelaunchDefault(shared)) }

var (
	_ AGPStream           = (*CUDAStream)(nil)
	_ ProxyStream         = (*CUDAStream)(nil)
	_ GraphStream         = (*CUDAStream)(nil)
	_ PlanStream          = (*CUDAStream)(nil)
	_ PlanBackend         = (*CUDABackend)(nil)
	_ transport.GPUSharer = (*CUDABackend)(nil)
)

var (
	_ transport.TimeoutHinter  = (*CUDABackend)(nil)
	_ transport.HostBufferUser = (*CUDABackend)(nil)
)
