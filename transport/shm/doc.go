// Package shm is the host backend: windows in shared memory (memfd) that
// every peer on the same host maps, and the host stream.
//
// Imports: cuda, transport
package shm
