// Package bench measures the window stack and the persistent all-gather:
// put bandwidth against a reference copy, ping-pong and barrier latency
// (host-issued and device-initiated), and the all-gather against NCCL or a
// Lua schedule, with a progress bar on the launcher's terminal. The plot
// sub-package draws the charts (SVG, PNG).
//
// Only the CLI and tests import it.
//
// Imports: cuda, engine, engine/allgather, engine/bench/mpi, engine/launch, engine/plan, kernels, transport, transport/gpu, window
package bench
