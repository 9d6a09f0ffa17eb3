// Package transport moves bytes between ranks: it classifies every peer
// (self, same-host shared memory, GPU peer over NVLink, another host) and
// registers, exchanges and maps memory regions per class.
//
// Imports: kernels, transport/knobs, transport/launchenv
package transport
