package allgather

import (
	"errors"
	"fmt"
	"strings"

	"github.com/luacoll/luacoll/transport"
	"github.com/luacoll/luacoll/window"
)

// The all-gather's algorithms on the window's own operations: "direct",
// "ring" and "hier" (two levels). They run wherever a window reaches its
// peers, network peers included, which the host protocol (host.go)
// cannot map.
//
// Every exec k starts with the guard barrier (where the all-gather has a
// staging window, stage.go, the exchange of tags there instead). A sender
// p's first message of exec k to a receiver sets p's row of the
// receiver's reserved slot to t = tag(k, n*msgs) (agMsgTag: n scaled by
// msgs, more than the messages one sender sends one receiver in an exec),
// and each later one adds 1: after j messages the row holds t + j - 1,
// whose n field, divided by msgs, is still n. Direct sends one message;
// ring and hier m. A put_signal's signal is ordered after every earlier
// put to that peer (transport/net fences it behind them, a mapped peer's
// copies run in order), so a receiver waiting for the j-th message waits
// until the row is >= t + j - 1 (the last: equal to t + m - 1). Every
// one of these waits fails at once on a tag of exec k whose n is not its
// own (a sender that passed another n, or refused the exec: agMsgMismatch)
// even where the comparison would hold, so a ring or hier rank never
// forwards a chunk that did not come; ranks further on fail at their
// timeout, or as soon as that failure fails the job. Between execs the
// slot holds a tag of the last exec, so the algorithms can follow one
// another on a window and a later all-gather finds its exec count there.
//
// The tag's exec field wraps every 2^23 execs, where tag(k, n) would be
// below the rows' last tags and a row not written since the last wrap
// could hold what looks like this exec's tag: the field skips 0, and the
// exec that wraps first zeroes this rank's rows of the slot (nothing is in
// flight after the guard barrier) and meets the others at a second
// barrier before anything is sent, so every row is 0 again.

// agLayout is what ring and hier need to know of the job's nodes.
type agLayout struct {
	groups [][]int // ranks per node, nodes in the order of their lowest rank
	mine   int     // this rank's node
	li     int     // this rank's index in its node
}

// nodeGroups groups the ranks into nodes: two ranks share a node when
// neither reaches the other over the network. Every rank computes the same
// grouping from the topology's whole matrix. A nil topology is one node.
func nodeGroups(topo *transport.Topology, size, me int) (agLayout, error) {
	leader := make([]int, size)
	for r := 0; r < size; r++ {
		leader[r] = r
		if topo == nil || len(topo.Net) < size {
			leader[r] = 0
			continue
		}
		for q := 0; q < r; q++ {
			if !topo.Net[r][q] && !topo.Net[q][r] {
				leader[r] = q
				break
			}
		}
	}
	var l agLayout
	index := map[int]int{}
	for r := 0; r < size; r++ {
		g, ok := index[leader[r]]
		if !ok {
			g = len(l.groups)
			index[leader[r]] = g
			l.groups = append(l.groups, nil)
		}
		if r == me {
			l.mine, l.li = g, len(l.groups[g])
		}
		l.groups[g] = append(l.groups[g], r)
	}
	for g, ranks := range l.groups {
		if len(ranks) != len(l.groups[0]) {
			return l, fmt.Errorf("node %d has %d ranks and node 0 has %d: hier needs the same number of ranks on every node", g, len(ranks), len(l.groups[0]))
		}
	}
	return l, nil
}

// String says how the ranks are laid out: "2 nodes x 4 ranks".
func (l agLayout) String() string {
	return fmt.Sprintf("%d nodes x %d ranks", len(l.groups), len(l.groups[0]))
}

// agHierPieces is how many pieces hier cuts a chunk into, so that a node
// forwards the first pieces of a remote chunk while the rest still cross
// the network: one per MiB, 1 to 8, never more than n bytes.
func agHierPieces(n uint64) uint64 {
	p := min(max((n+(1<<20)-1)>>20, 1), 8)
	return max(min(p, n), 1)
}

// agPiece is the offset and length of piece i of pieces of an n-byte chunk.
func agPiece(n, pieces, i uint64) (uint64, uint64) {
	size := n / pieces
	off := i * size
	if i == pieces-1 {
		return off, n - off
	}
	return off, size
}

// agExec is one exec of an algorithm on window operations.
type agExec struct {
	ag     *Persistent
	k, n   uint64
	tag    uint64         // agMsgTag(k, n, msgs): what the first message sets
	src    *window.Buffer // this rank's chunk (the window itself in place)
	srcOff uint64
	got    map[int]uint64 // messages waited for so far, per sender
	sent   map[int]bool   // receivers sent to so far
}

// agMsgTag is the tag of exec k with n bytes a rank on window operations:
// n scaled by msgs, so that the messages counted on top keep n readable.
func agMsgTag(k, n, msgs uint64) uint64 { return agTag(k, n*msgs) }

// agMsgMismatch says that obs, the row of a sender awaited at tag want
// (agMsgTag(k, n, msgs) + j), is a tag of exec k whose n is another: a
// refusal, or a sender that passed another n.
func agMsgMismatch(want, obs, msgs uint64) bool {
	return obs>>tagNBits == want>>tagNBits && (obs&tagNMask)/msgs != (want&tagNMask)/msgs
}

// agMsgObserved is obs, a sender's row, as the unscaled tag its errors
// read (agRefusedN stays as it is).
func agMsgObserved(obs, msgs uint64) uint64 {
	if obs&tagNMask == agRefusedN {
		return obs
	}
	return agTag(obs>>tagNBits, (obs&tagNMask)/msgs)
}

// send puts len bytes from local at localOff into peer's window at off,
// with the signal of the first message to peer in the exec (set the tag)
// or of a later one (add 1).
func (e *agExec) send(peer int, off uint64, local *window.Buffer, localOff, n uint64) error {
	sig := &window.Sig{ID: e.ag.sig, Value: 1, Op: window.SigAdd}
	if !e.sent[peer] {
		sig = &window.Sig{ID: e.ag.sig, Value: e.tag, Op: window.SigSet}
		e.sent[peer] = true
	}
	t := window.Transfer{Peer: peer, PeerOff: off, Local: local, LocalOff: localOff, N: n}
	if err := e.ag.w.PutSignal(t, sig, nil); err != nil {
		return e.ag.errf("exec #%d: put to rank %d: %w", e.k, peer, err)
	}
	return nil
}

// sendOwn sends this rank's chunk bytes [off, off+n) to peer.
func (e *agExec) sendOwn(peer int, off, n uint64) error {
	me := uint64(e.ag.me)
	return e.send(peer, me*e.n+off, e.src, e.srcOff+off, n)
}

// wait enqueues the wait for the next message from p: the last one of the
// exec (the tag) or the next count. A count's wait fails too on a tag of
// this exec other than the one awaited (a refusal, another n): that tag
// is above any count, and a wait that passed on it would forward a chunk
// that never came.
func (e *agExec) wait(p int, last bool) {
	ag, k, n, msgs := e.ag, e.k, e.n, e.ag.msgs
	e.got[p]++
	spec := transport.WaitSpec{Slots: []transport.Addr{ag.inbox[p]}, Mode: transport.WaitSum,
		Cmp: transport.CmpGe, Value: e.tag + e.got[p] - 1, Timeout: ag.w.Options().Timeout,
		Mismatch: func(want, obs uint64) bool { return agMsgMismatch(want, obs, msgs) },
		Fail:     func(obs uint64, cause error) error { return ag.waitError(p, k, n, agMsgObserved(obs, msgs), cause) }}
	if last {
		spec.Cmp = transport.CmpEq
	}
	ag.w.Rank().Stream.Wait(spec)
}

// execWindow enqueues one exec on the window's own operations: the guard
// barrier, the own chunk into place, then the algorithm's puts and waits.
func (ag *Persistent) execWindow(src *window.Buffer, srcOff, n uint64, inPlace bool) error {
	if ag.staged(n) {
		return ag.execStaged(src, srcOff, n, inPlace)
	}
	w := ag.w
	me := ag.me
	own := uint64(me) * n
	if ag.stage != nil && (ag.k+1)&tagKMask != 0 {
		// The guard on the staging window's slots (stage.go).
		ag.k++
		if err := ag.stageGuard(ag.k, n); err != nil {
			return err
		}
	} else if err := ag.nextExec(); err != nil {
		return err
	}
	e := &agExec{ag: ag, k: ag.k, n: n, tag: agMsgTag(ag.k, n, ag.msgs), src: src, srcOff: srcOff, got: map[int]uint64{}, sent: map[int]bool{}}
	if inPlace {
		e.src, e.srcOff = w.Buffer(), own
	}
	if !inPlace && n > 0 {
		if err := w.Put(window.Transfer{Peer: me, PeerOff: own, Local: src, LocalOff: srcOff, N: n}); err != nil {
			return ag.errf("exec #%d: own chunk: %w", e.k, err)
		}
	}
	switch ag.algoFor(n) {
	case "ring":
		return e.ring()
	case "hier":
		return e.hier()
	}
	return e.direct()
}

// nextExec counts the next exec and enqueues its guard barrier, with the
// wrap's reset where the tag's exec field wraps.
func (ag *Persistent) nextExec() error {
	ag.k++
	if err := ag.w.Barrier(ag.bar); err != nil {
		return ag.errf("exec #%d: guard barrier: %w", ag.k, err)
	}
	if ag.k&tagKMask != 0 {
		return nil
	}
	st, me := ag.w.Rank().Stream, ag.me
	for p := range ag.inbox {
		if p != me {
			st.Store64(ag.inbox[p], 0)
		}
	}
	if err := ag.w.Barrier(ag.bar); err != nil {
		return ag.errf("exec #%d: barrier after the tags' wrap: %w", ag.k, err)
	}
	ag.k++
	return nil
}

// direct: one put_signal (set tag) to every peer, peers in the order
// rank+1, rank+2, ..., then a wait for every peer's tag.
func (e *agExec) direct() error {
	me, size := e.ag.me, e.ag.size
	for i := 1; i < size; i++ {
		if err := e.sendOwn((me+i)%size, 0, e.n); err != nil {
			return err
		}
	}
	for i := 1; i < size; i++ {
		e.wait((me+i)%size, true)
	}
	return nil
}

// ring: size-1 steps; in step s a rank sends chunk rank-s to its right
// neighbour (its own chunk from the source in step 0, then what arrived
// in the step before) and waits for chunk rank-s-1 from its left.
func (e *agExec) ring() error {
	me, size := e.ag.me, e.ag.size
	right, left := (me+1)%size, (me-1+size)%size
	buf := e.ag.w.Buffer()
	for s := 0; s < size-1; s++ {
		last := s == size-2
		if s == 0 {
			if err := e.sendOwn(right, 0, e.n); err != nil {
				return err
			}
		} else {
			c := uint64((me - s + size) % size)
			if err := e.send(right, c*e.n, buf, c*e.n, e.n); err != nil {
				return err
			}
		}
		e.wait(left, last)
	}
	return nil
}

// hier: the ranks with the same index on every node exchange their chunks
// directly, in pieces (the network level); each rank sends its chunk to
// its node's ranks, then forwards every piece that arrives from another
// node to them as soon as it is in, so the two levels overlap.
func (e *agExec) hier() error {
	l := e.ag.layout
	nodes, locals := len(l.groups), l.groups[l.mine]
	ln := len(locals)
	buf := e.ag.w.Buffer()
	pieces := agHierPieces(e.n)
	for g := 1; g < nodes; g++ {
		peer := l.groups[(l.mine+g)%nodes][l.li]
		for i := uint64(0); i < pieces; i++ {
			off, n := agPiece(e.n, pieces, i)
			if err := e.sendOwn(peer, off, n); err != nil {
				return err
			}
		}
	}
	for i := 1; i < ln; i++ {
		if err := e.sendOwn(locals[(l.li+i)%ln], 0, e.n); err != nil {
			return err
		}
	}
	for g := 1; g < nodes; g++ {
		from := l.groups[(l.mine-g+nodes)%nodes][l.li]
		at := uint64(from) * e.n
		for i := uint64(0); i < pieces; i++ {
			off, n := agPiece(e.n, pieces, i)
			e.wait(from, i == pieces-1)
			for j := 1; j < ln; j++ {
				if err := e.send(locals[(l.li+j)%ln], at+off, buf, at+off, n); err != nil {
					return err
				}
			}
		}
	}
	for i := 1; i < ln; i++ {
		p := locals[(l.li+i)%ln]
		if nodes == 1 {
			e.wait(p, true)
			continue
		}
		// p's last message is a piece it forwards from its partners on
		// the other nodes: when p's own chunk came and that did not, the
		// error names the partners (or their link to p), not p. p sends
		// its own chunk and every piece of the other nodes' chunks.
		e.waitForwarded(p, e.ag.partners(p), 1+pieces*uint64(nodes-1))
	}
	return nil
}

// waitForwarded enqueues the wait for the last message of the exec from
// local rank p, which forwards its partners' chunks (hier); a wait that
// fails after p's own chunk arrived names the partners.
func (e *agExec) waitForwarded(p int, partners []int, m uint64) {
	ag, k, n, msgs, start := e.ag, e.k, e.n, e.ag.msgs, e.tag
	e.got[p] += m
	spec := transport.WaitSpec{Slots: []transport.Addr{ag.inbox[p]}, Mode: transport.WaitSum,
		Cmp: transport.CmpEq, Value: e.tag + m - 1, Timeout: ag.w.Options().Timeout,
		Mismatch: func(want, obs uint64) bool { return agMsgMismatch(want, obs, msgs) },
		Fail: func(obs uint64, cause error) error {
			if obs >= start && obs-start < m && !agMsgMismatch(start, obs, msgs) {
				return ag.forwardError(p, partners, k, n, obs-start+1, cause)
			}
			err := ag.waitError(p, k, n, agMsgObserved(obs, msgs), cause)
			if errors.Is(cause, transport.ErrTimeout) {
				// Nothing of p's came: p may itself be held up by a
				// partner, before it sent anything here.
				err = fmt.Errorf("%w; rank %d also forwards here the chunks of %s on another node, and a rank it waits for holds it up too (rank %d's own error names it)",
					err, p, rankList(partners), p)
			}
			return err
		}}
	ag.w.Rank().Stream.Wait(spec)
}

// forwardError is the error of a wait for the chunks local rank p forwards
// from partners (other nodes), after got of p's messages arrived (its own
// chunk among them): the partners, or their link to p, did not deliver,
// or p stopped before it forwarded them.
func (ag *Persistent) forwardError(p int, partners []int, k, n, got uint64, cause error) error {
	who := rankList(partners)
	return ag.errf("exec #%d: rank %d sent its own chunk (%d of its messages came) but not the chunks it forwards from %s on another node: "+
		"%s did not deliver them to rank %d (or the network between them failed), or rank %d stopped (n=%d): %s", k, p, got, who, who, p, p, n, ag.failWhat(cause))
}

// rankList names ranks: "rank 3", "ranks 3, 5".
func rankList(ranks []int) string {
	if len(ranks) == 1 {
		return fmt.Sprintf("rank %d", ranks[0])
	}
	names := make([]string, len(ranks))
	for i, q := range ranks {
		names[i] = fmt.Sprint(q)
	}
	return "ranks " + strings.Join(names, ", ")
}

// NodeGroups groups the job's ranks into nodes as the all-gather does (two
// ranks share a node when neither reaches the other over the network),
// from the topology every rank holds, with no communication: the ranks of
// each node in order, nodes in the order of their lowest rank; node and
// local are this rank's node and its index there. err says when nodes
// hold different numbers of ranks (the groups are still returned).
func NodeGroups(topo *transport.Topology, size, me int) (groups [][]int, node, local int, err error) {
	l, err := nodeGroups(topo, size, me)
	return l.groups, l.mine, l.li, err
}
