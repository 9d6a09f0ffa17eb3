// Package verify checks a plan before anything runs: every rank's recorded
// list (package plan) against the others, for bounds, deadlocks, races,
// waits that another replay's signal can satisfy, and the declared
// collective's result at the end of every replay.
//
// It is a pure core: no I/O, no window, no replay or device code. Verify
// simulates the lists, deterministic for given input, so synthetic lists
// and the cases of testdata/ (op lists in the plans' text format) test it
// in plain Go.
//
// Imports: engine/plan, transport, window
package verify
