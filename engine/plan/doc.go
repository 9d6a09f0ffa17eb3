// Package plan holds recorded schedules: the list of window operations one
// rank's schedule enqueues (its plan), its wire and text forms, and the
// replay of a list over the window API without the interpreter that
// recorded it (Plan.Run). Package plan/verify checks every rank's list
// against the others before anything runs.
//
// Imports: cuda, kernels, transport, transport/gpu, transport/knobs, window
package plan
