package cost

import "github.com/luacoll/luacoll/transport"

// A flush completes the rank's operations remotely. Between ranks of one
// host (shm) or GPUs of one machine (nvl) a put has landed when it ends,
// so a flush waits for nothing more (its cost is the self class's). A put
// or signal to a network peer returns at once; the flush that follows
// asks the peer and waits for its answer, which leaves once the put has
// landed there. The simulation holds a put's stream until it lands (its
// start cost is the network's one-way latency), so the flush ends the net
// class's Trip after the later of its own start and the last landing: the
// answer's way back, which luacoll calibrate measures as the one-way hop
// of its 8-byte put_signal -> wait ping-pong (and takes out of the puts it
// calibrates, whose plans end with such a flush). A model without a Trip
// charges the model's own hop: the 8-byte put, then the signal's and the
// wait's start costs. docs/results/cost-model.md has the runs this was
// checked with.

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

// flushTrip is what a flush over the network waits for once its last
// put landed: the peer's answer on its way back.
func (s *sim) flushTrip() float64 {
	n := s.tab[transport.KindNet]
	if n.Trip.AlphaNs > 0 {
		return n.Trip.AlphaNs
	}
	a, l := n.Put.Of(8)
	return a + l + n.Signal.AlphaNs + n.Wait.AlphaNs
}
