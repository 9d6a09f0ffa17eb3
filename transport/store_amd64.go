package transport

// storeRelease stores v at p with release order and nothing more: a plain
// MOV, which x86 never lets pass an earlier store (atomic.StoreUint64 is
// an XCHG, which also waits until the line is this core's: a full
// fence). Being assembly, the call is also a compiler barrier.
//
//go:noescape
func storeRelease(p *uint64, v uint64)
