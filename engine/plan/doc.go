// Package plan holds recorded schedules: the list of window operations one
// rank's schedule enqueues (its plan), the check of every rank's list
// against the others before anything runs (Verify: deadlocks, races, the
// collective's result, bounds), and the replay of a list over the window
// API without the interpreter that recorded it (Plan.Run).
//
// Verify does no I/O and needs no window: it is a simulation of the lists,
// deterministic for given input, so synthetic lists test it in pure Go.
//
// Imports: cuda, kernels, transport, transport/cuda, window
package plan
