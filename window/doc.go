// Package window implements one-sided windows: a data buffer every peer can
// write, per-sender signal rows, monotonic barrier slots and local-completion
// counters, each operation turned into ordered operations on the rank's
// stream. It also holds local buffers, the sources and destinations of puts.
//
// Imports: transport
package window
