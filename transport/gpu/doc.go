// Package gpu is the CUDA backend of the transport layer (named apart from
// the driver binding, package luacoll/cuda, which it imports): the backend
// (cuda.go), windows in device memory shared over CUDA IPC handles
// (cuda_share.go) or VMM (cuda_vmm.go), a stream per rank whose operations
// run as copy-engine copies, stream memory operations or kernels
// (cuda_stream.go), with waits watched from the host (cuda_wait.go); the
// benchmarks' device loops (cuda_bench.go);
// graphs (cuda_graph.go), the plan interpreter's launches (cuda_plan.go),
// prelaunched fused steps (cuda_prelaunch.go), the proxy path for windows
// with network peers (cuda_proxy.go), the persistent all-gather's device
// protocol (agp.go) and the clock stamps of the trace (stamp.go). The
// layers above reach its streams through the small interfaces of
// seams.go, never the concrete types.
//
// Imports: cuda, kernels, transport, transport/knobs, transport/shm
package gpu
