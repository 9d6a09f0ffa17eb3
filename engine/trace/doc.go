// Package trace records a job's timeline for ui.perfetto.dev and
// chrome://tracing. Each rank's Recorder is told of every window operation
// (a slice on the rank's stream track from enqueue, or the end of the
// operation before it, to completion), every sync, collective and error
// (the script's track), and appends them to its part file as it goes: a
// JSON array left open, one event a line, which these viewers read as it
// is. A Job merges the ranks' parts into one file once they exited; a rank
// that died leaves what it wrote up to then. Times are job time, rank 0's
// clock since the job started, which every rank reads over the bootstrap
// when it starts (Align).
//
// It imports window; engine wires it in, and the CLI's
// launchers merge with it.
//
// Imports: transport, window
package trace
