// Package net reaches peers whose memory this process cannot map (another
// host, or another logical node) through UCX: one context and worker per
// rank, an endpoint per peer made once and shared by every window, each
// window's region registered with ucp_mem_map and its packed remote key
// exchanged over the bootstrap, and the operations of transport.RemoteOp
// (put, get, 8-byte store; adds and put_signals as active messages) posted without waiting, fenced where
// a signal must land after its data, completed locally (Quiet) or remotely
// (Flush) when the stream needs it. A progress goroutine drives the worker
// while the rank does something else, sleeping on UCX's event descriptor.
//
// UCX is loaded at run time (dlopen of libucs.so.0 and libucp.so.0) through
// a small C shim with its own declarations, so nothing from UCX is needed
// to build, and a job without network peers never loads it.
//
// Imports: transport, transport/knobs
package net
