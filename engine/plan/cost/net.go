package cost

import "github.com/luacoll/luacoll/transport"

// A flush completes the rank's operations remotely. Between ranks of one
// host (shm) or GPUs of one machine (nvl) a put has landed when it ends,
// so a flush waits for nothing more (its cost is the self class's). A put
// or signal to a network peer ends locally (the transport has the bytes);
// the flush that follows waits until the peer acknowledged it, a round
// trip after it landed. The model charges that trip as two of the net
// class's one-way hops (its Signal and Wait start costs: the calibrated
// 8-byte put_signal -> wait latency), from the later of the flush's own
// start and the last landing. The calibrated puts hold a k-th of such a
// trip (k of a size a replay, then one flush), a small excess at the sizes
// where k is large.

// outNet notes that rank r's put or signal to peer q lands at at, when q
// is a network peer.
func (s *sim) outNet(r, q int, at float64) {
	if s.class(r, q) != transport.KindNet {
		return
	}
	rk := &s.ranks[r]
	if !rk.netOut || at > rk.netLand {
		rk.netLand = at
	}
	rk.netOut = true
}

// flushTrip is the round trip a flush over the network waits for once
// its last put landed.
func (s *sim) flushTrip() float64 {
	n := s.tab[transport.KindNet]
	return 2 * (n.Signal.AlphaNs + n.Wait.AlphaNs)
}
