package allgather

import (
	"context"
	"fmt"

	"github.com/luacoll/luacoll/transport"
	"github.com/luacoll/luacoll/transport/knobs"
	"github.com/luacoll/luacoll/window"
)

// The persistent all-gather on the host backend.
//
// Its slots live in a private window, made with the all-gather: signal
// slots 0 and 1 (by exec parity) and 2 of every sender's row, and, as its
// data, a staging area of two parities x N senders x eagerMax bytes.
//
// Up to eagerMax bytes per rank an exec k is eager: each rank copies its
// chunk into every peer's staging area of parity k mod 2, row sender, and
// sets that peer's slot (k mod 2) to tag(k, n); a rank waits for each
// peer's tag and copies the chunk out into its window itself. No rank ever
// writes into another's window, and a rank cannot start exec k+2 (writing
// parity k mod 2 again) before every peer has finished exec k+1, hence
// exec k's copies out: no handshake is needed before the data moves.
//
// Larger execs put straight into the peers' windows: each rank first sets
// every peer's slot (k mod 2) to tag(k, n) ("ready": it has finished exec
// k-1, and its caller, having called exec k, no longer reads the result),
// copies its own chunk, then for each peer in the order rank+1, rank+2, ...
// waits for that peer's ready tag, puts the chunk and sets the peer's slot
// 2 to tag(k, n); last it waits for every peer's slot 2.
//
// A slot of parity k mod 2 is written next at exec k+2, which a peer
// cannot reach before this rank has seen its tag, and slot 2 at exec k+1,
// after this rank's ready tag: equality waits are safe back to back. Both
// protocols put tag(k, n) in the same slot, so ranks passing different n
// see each other's tag for exec k and fail at once, whichever protocol
// each size picks.
//
// knobs.AGPHostEagerMax overrides agHostEagerMax; the protocol plans its
// copies with transport.HostCacheBytes.
const agHostSlotDone = 2

// agHostEagerMax is the largest n per rank that goes through the staging
// area (docs/results/host.md has the measurements behind it).
const agHostEagerMax = 16 << 10

// agHost is the host protocol's state: addresses worked out once.
type agHost struct {
	st       transport.Stream
	ringer   transport.Ringer
	eagerMax uint64
	// per peer p (index p; own entries unused):
	stageOut [2][]transport.Addr // where this rank's chunk goes in p's staging, by parity
	stageIn  [2][]transport.Addr // p's chunk in this rank's staging, by parity
	tagOut   [3][]transport.Addr // this rank's row of p's slots 0, 1, 2
	tagIn    [3][][]transport.Addr
	bellOut  []transport.Addr // p's bell
	bellIn   transport.Addr   // this rank's bell
	describe func(transport.WaitSpec, uint64, error) error
	// cached copies the puts of an exec through the caches (nil: the
	// stream cannot), for n up to cachedMax per rank (see execHost).
	cached    transport.CachedCopier
	cachedMax uint64
}

// openHost (collective) makes the private window of the host protocol.
func (ag *Persistent) openHost(ctx context.Context, call string) error {
	c := ag.c
	me, n := ag.me, ag.size
	eager := ag.eagerLimit(knobs.AGPHostEagerMax, agHostEagerMax)
	cache := transport.HostCacheBytes()
	sw, err := c.NewWindow(ctx, call+":host", window.Options{Bytes: max(64, 2*uint64(n)*eager), Signals: 3, Counters: 1,
		Barriers: 1, Timeout: ag.w.Options().Timeout})
	if err != nil {
		return fmt.Errorf("rank %d: %s: %w", me, call, err)
	}
	ag.syncw = sw
	raw := sw.Raw()
	h := &agHost{st: c.Rank.Stream, eagerMax: eager, bellOut: make([]transport.Addr, n), bellIn: raw.Bell(me)}
	h.ringer, _ = h.st.(transport.Ringer)
	h.describe = ag.describeHostWait
	h.cached, _ = h.st.(transport.CachedCopier)
	// What the host's ranks write, ranks x n bytes per window, fits in
	// half the cache.
	h.cachedMax = cache / 2 / (uint64(max(1, c.Env.LocalSize)) * uint64(n))
	for par := 0; par < 2; par++ {
		h.stageOut[par] = make([]transport.Addr, n)
		h.stageIn[par] = make([]transport.Addr, n)
	}
	for s := 0; s < 3; s++ {
		h.tagOut[s] = make([]transport.Addr, n)
		h.tagIn[s] = make([][]transport.Addr, n)
	}
	for p := 0; p < n; p++ {
		for par := 0; par < 2; par++ {
			h.stageOut[par][p] = raw.Data(p, (uint64(par*n)+uint64(me))*eager)
			h.stageIn[par][p] = raw.Data(me, (uint64(par*n)+uint64(p))*eager)
		}
		for s := 0; s < 3; s++ {
			h.tagOut[s][p] = raw.Signal(p, me, s)
			h.tagIn[s][p] = []transport.Addr{raw.Signal(me, p, s)}
		}
		h.bellOut[p] = raw.Bell(p)
	}
	ag.host = h
	return nil
}

func (h *agHost) signal(slot transport.Addr, v uint64, bell transport.Addr) {
	if h.ringer != nil {
		h.ringer.Store64Ring(slot, v, bell)
		return
	}
	h.st.Store64(slot, v)
}

// put copies n bytes from src to dst on the stream, through the caches when
// cached.
func (h *agHost) put(cached bool, dst, src transport.Addr, n uint64) {
	if cached {
		h.cached.CopyCached(dst, src, n)
		return
	}
	h.st.Copy(dst, src, n)
}

func (ag *Persistent) hostWait(p, slot int, k, n, tag uint64) {
	h := ag.host
	h.st.Wait(transport.WaitSpec{Slots: h.tagIn[slot][p], Mode: transport.WaitSum, Cmp: transport.CmpEq, Value: tag,
		Timeout: ag.w.Options().Timeout, Bell: h.bellIn, Describe: h.describe,
		Note: transport.WaitNote{A: uint64(p), B: k, C: n}, Mismatch: agMismatch})
}

// agMismatch: a peer's tag for the same exec with another n can never turn
// into the one awaited.
func agMismatch(want, obs uint64) bool {
	return obs>>tagNBits == want>>tagNBits && obs != want
}

// eagerLimit is the largest n per rank an exec stages: def, or knob's
// value, in whole 64-byte lines, no more than a window's share per rank
// rounded up to whole lines (an exec's n is at most the share, so the
// largest exec a window takes is staged too where the limit allows).
func (ag *Persistent) eagerLimit(knob *knobs.UintKnob, def uint64) uint64 {
	share := (ag.w.Options().Bytes/uint64(ag.size) + 63) &^ 63
	return min(knob.Or(def)&^63, share)
}

// describeHostWait is the error of a host wait of the protocol (Note: peer,
// exec, n).
func (ag *Persistent) describeHostWait(w transport.WaitSpec, obs uint64, cause error) error {
	if w.Note.Op == noteForwarded {
		return ag.forwardedError(int(w.Note.A), w.Note.B, w.Note.C, obs, cause)
	}
	return ag.waitError(int(w.Note.A), w.Note.B, w.Note.C, obs, cause)
}

// execHost enqueues exec k of the host protocol: from is this rank's chunk
// (already in place when inPlace).
func (ag *Persistent) execHost(from transport.Addr, n uint64, inPlace bool) {
	h := ag.host
	me, size := ag.me, ag.size
	ag.k++
	k := ag.k
	tag := agTag(k, n)
	par := int(k & 1)
	base := ag.w.Raw().Data(me, 0)
	own := uint64(me) * n
	if n <= h.eagerMax {
		if !inPlace && n > 0 {
			h.st.Copy(base.Add(own), from, n)
		}
		for i := 1; i < size; i++ {
			p := (me + i) % size
			if n > 0 {
				h.st.Copy(h.stageOut[par][p], from, n)
			}
			h.signal(h.tagOut[par][p], tag, h.bellOut[p])
		}
		for i := 1; i < size; i++ {
			p := (me - i + size) % size
			ag.hostWait(p, par, k, n, tag)
			if n > 0 {
				h.st.Copy(base.Add(uint64(p)*n), h.stageIn[par][p], n)
			}
		}
		return
	}
	for i := 1; i < size; i++ {
		p := (me + i) % size
		h.signal(h.tagOut[par][p], tag, h.bellOut[p])
	}
	// Go copies 1 MiB or more with stores that bypass the caches (on
	// amd64; elsewhere the pieces cost nothing). When every window this
	// host's ranks write fits in half the last-level cache, copies through
	// it are faster: 2 ranks on the 2-core machine, 2-8 MiB all-gathers
	// took a third to two fifths of the time (44-270 against 151-600 us);
	// past it, they were slower (32 MiB: 2.3-3.1 ms against 1.3-2.4).
	cached := h.cached != nil && n <= h.cachedMax
	if !inPlace {
		h.put(cached, base.Add(own), from, n)
	}
	for i := 1; i < size; i++ {
		p := (me + i) % size
		ag.hostWait(p, par, k, n, tag)
		h.put(cached, ag.w.Raw().Data(p, own), from, n)
		h.signal(h.tagOut[agHostSlotDone][p], tag, h.bellOut[p])
	}
	for i := 1; i < size; i++ {
		p := (me - i + size) % size
		ag.hostWait(p, agHostSlotDone, k, n, tag)
	}
}

// refuseHost takes part in exec k of the host protocol for a rank that
// refused it: it sets every peer's slot (k mod 2), the first each peer
// waits on in either protocol, to the refused mark, so that their waits
// fail at once (agMismatch) naming this rank; it moves no data.
func (ag *Persistent) refuseHost() {
	h := ag.host
	me, size := ag.me, ag.size
	ag.k++
	tag := agTag(ag.k, agRefusedN)
	par := int(ag.k & 1)
	for i := 1; i < size; i++ {
		p := (me + i) % size
		h.signal(h.tagOut[par][p], tag, h.bellOut[p])
	}
}
