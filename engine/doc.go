// Package engine is a rank's world: the communicator (Comm) that a rank
// opens once its environment is known, with checked collectives (every
// call's name and arguments compared across ranks), windows and buffers on
// the chosen backend, CPU placement, the reservation of a window's slots
// for code that drives them itself, and the trace of operations enqueued
// outside a window.
//
// Its sub-packages hold the rest: bootstrap (how ranks meet and hear of
// failures), launch (starting ranks, reading launcher environments, CPU
// binding modes), trace (the --trace timeline), allgather (the persistent
// all-gather, built on a Comm and its windows), plan (recorded schedules),
// bench (the benchmarks) and enginetest (in-process jobs for tests).
// engine is imported by allgather, plan, bench, luabind, repl and the CLI,
// never by bootstrap, launch or trace.
//
// Imports: engine/bootstrap, engine/launch, engine/launch/cpuset, engine/trace, transport, transport/knobs, transport/launchenv, transport/net, transport/shm, window
package engine
