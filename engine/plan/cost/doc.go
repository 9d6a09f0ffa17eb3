// Package cost predicts how long one replay of a plan takes: every rank's
// op list (package plan, the input the verifier takes) is simulated against
// a model of the machine (per transport class and replay mode, a start cost
// alpha and a per-byte cost beta for puts, signals, waits, copies and
// barriers), giving each op's start and end time on every rank, the time
// per rank, and the critical path split into link time and start cost.
// On the host backend, ranks that outnumber their host's CPUs take turns
// on them (cpus.go); with Input.Replays the estimate also gives the time
// of a replay in a loop of replays back to back (replays.go), as the
// benches and luacoll calibrate time them; a put or copy reading bytes
// another rank wrote pays the model's moved cost for them (moved.go), and
// on the host backend a replay whose bytes outgrow the processors' cache
// pays the memory's cost for the part that does not fit (memory.go).
// calib.go holds what luacoll calibrate fits with the model itself (the
// switch cost).
//
// It is a pure core: no I/O beyond decoding a model's JSON, no window, no
// replay. The models shipped per backend (models/*.json) are embedded.
//
// Imports: engine/plan, transport, window
package cost
