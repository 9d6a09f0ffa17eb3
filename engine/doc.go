// Package engine is a rank's world: the communicator (Comm) that a rank
// opens once its environment is known, with checked collectives (every
// call's name and arguments compared across ranks), windows and buffers on
// the chosen backend, CPU placement, and the persistent all-gather built on
// windows.
//
// Its sub-packages hold the rest: bootstrap (how ranks meet and hear of
// failures), launch (starting ranks, reading launcher environments, CPU
// binding modes), trace (the --trace timeline), bench (the benchmarks) and
// enginetest (in-process jobs for tests). engine imports bootstrap, launch,
// trace, window and transport; it is
// imported by luabind, repl, bench and the CLI, never by its sub-packages.
package engine
