// Package allgather is the persistent all-gather: New prepares one over a
// window of a rank's engine.Comm (collective), Exec enqueues an exec,
// Destroy ends it, Info says what runs. It holds one file per protocol:
// host.go (the host backend's own, on mapped memory), device.go (the CUDA
// one, whose device side is transport/gpu's AGP), sched.go (direct, ring
// and hier on the window's operations, network peers included), stage.go
// (small direct execs staged through a private window) and proxy.go (graph
// mode on the proxy path, where the host drives the network).
//
// It reaches the Comm through its exported methods (collectives, windows,
// ReserveSlots for the slots it owns, TraceOp), window memory through
// window.Window.Raw, and the CUDA stream through the small interfaces of
// transport/gpu.
//
// Imports: engine, engine/bootstrap, transport, transport/gpu, transport/knobs, transport/shm, window
package allgather
