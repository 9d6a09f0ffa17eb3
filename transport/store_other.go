//go:build !amd64

package transport

import "sync/atomic"

// storeRelease stores v at p with (at least) release order.
func storeRelease(p *uint64, v uint64) { atomic.StoreUint64(p, v) }
