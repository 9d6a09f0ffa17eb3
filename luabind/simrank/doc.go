// Package simrank runs a script's plans for ranks that are only simulated:
// no windows, no processes, no transport. `luacoll check --layout NxM`
// uses it to verify and estimate plans at a thousand ranks on one machine.
//
// The script runs once per simulated rank, one rank at a time in one
// process, each in a fresh Lua state whose lc module records op lists and
// nothing else: lc.rank, lc.size, lc.nodes (from the layout), lc.window
// and lc.buffer (shapes, no memory), lc.plan (the body's window and buffer
// operations become the rank's list), and p:verify, p:estimate, p:ops and
// p:info. Ranks run from the last to rank 0, so that when rank 0 makes a
// plan every rank's list for it is there: rank 0 verifies it (engine/plan/
// verify), estimates its time on the layout (engine/plan/cost) and gets
// the real reports, while the others get a report marked pending. What
// needs data or a real rank (a wait outside a plan, reading a buffer, a
// timer, a built-in collective) raises "check --simulate: X needs real
// ranks". Memory is the op lists (each rank's once) and one Lua state.
//
// Imports: engine/plan, engine/plan/cost, engine/plan/verify, luabind, scripts, transport, window
package simrank
