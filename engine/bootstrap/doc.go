// Package bootstrap is how the ranks of a job find each other and talk
// before (and beside) any window exists: rank 0 runs a hub that admits
// every rank, and each rank connects to it as a client.
//
// The hub matches sequence-numbered collectives (all-gather, broadcast,
// barrier), routes point-to-point messages between ranks, and spreads the
// news of a rank that failed or died so that no rank waits for a dead
// peer. Files: wire.go (frame format), outbox.go (ordered non-blocking
// writes), client.go (Connect and the rank's view), calls.go (collectives,
// send/receive, fail, close), dispatch.go (frames from the hub), hub.go
// (the server), errors.go (RankError, TimeoutError), unix.go (meeting at a
// Unix socket in a private directory, for jobs on one host).
//
// It imports only transport (for the abort flag and the Exchanger
// interface it implements); engine and the launcher build on it.
//
// Imports: transport
package bootstrap
