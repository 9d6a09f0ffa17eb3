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
// staging window, stage.go, the exchange of tags there instead) and ends, for every sender p
// whose messages a rank receives, with p's row of the reserved slot equal
// to tag(k, n): direct sets it with its one put_signal; ring and hier,
// whose senders send m messages per exec to one receiver, add 1 with each
// of the first m-1 and set tag(k, n) with the last. Between execs the
// slot therefore holds a tag, as direct leaves it, so the algorithms can
// follow one another on a window and a later all-gather finds its exec
// count there. A receiver waiting for the j-th message of exec k from p
// (j < m) waits until the row is >= base + j, base being tag(k-1, ...)
// seen at the end of exec k-1; a put_signal's signal is ordered after
// every earlier put to that peer (transport/net fences it behind them, a
// mapped peer's copies run in order), so j messages counted means the
// first j arrived. The last message's wait is an equality with tag(k, n),
// so a sender that passed another n (or refused the exec) fails it at
// once, as in direct; in ring and hier only the ranks receiving from that
// sender see it, and their failure fails the job.
//
// The tag's exec field wraps every 2^23 execs, where tag(k, n) would be
// below base and a row not written since the last wrap could hold what
// looks like this exec's tag: the field skips 0, and the exec that wraps
// first zeroes this rank's rows of the slot (nothing is in flight after
// the guard barrier) and meets the others at a second barrier before
// anything is sent, so every base is 0 again.

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
	tag    uint64
	src    *window.Buffer // this rank's chunk (the window itself in place)
	srcOff uint64
	got    map[int]uint64 // messages waited for so far, per sender
}

// send puts len bytes from local at localOff into peer's window at off,
// with the signal of a non-last (add 1) or last (set tag) message.
func (e *agExec) send(peer int, off uint64, local *window.Buffer, localOff, n uint64, last bool) error {
	sig := &window.Sig{ID: e.ag.sig, Value: 1, Op: window.SigAdd}
	if last {
		sig = &window.Sig{ID: e.ag.sig, Value: e.tag, Op: window.SigSet}
	}
	t := window.Transfer{Peer: peer, PeerOff: off, Local: local, LocalOff: localOff, N: n}
	if err := e.ag.w.PutSignal(t, sig, nil); err != nil {
		return e.ag.errf("exec #%d: put to rank %d: %w", e.k, peer, err)
	}
	return nil
}

// sendOwn sends this rank's chunk bytes [off, off+n) to peer.
func (e *agExec) sendOwn(peer int, off, n uint64, last bool) error {
	me := uint64(e.ag.me)
	return e.send(peer, me*e.n+off, e.src, e.srcOff+off, n, last)
}

// wait enqueues the wait for the next message from p: the last one of the
// exec (the tag) or the next count.
func (e *agExec) wait(p int, last bool) {
	ag, k, n := e.ag, e.k, e.n
	e.got[p]++
	spec := transport.WaitSpec{Slots: []transport.Addr{ag.inbox[p]}, Mode: transport.WaitSum,
		Cmp: transport.CmpGe, Value: ag.base[p] + e.got[p], Timeout: ag.w.Options().Timeout,
		Fail: func(obs uint64, cause error) error { return ag.waitError(p, k, n, obs, cause) }}
	if last {
		spec.Cmp, spec.Value, spec.Mismatch = transport.CmpEq, e.tag, agMismatch
		ag.base[p] = e.tag
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
	e := &agExec{ag: ag, k: ag.k, n: n, tag: agTag(ag.k, n), src: src, srcOff: srcOff, got: map[int]uint64{}}
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
	for p := range ag.base {
		if p != me {
			st.Store64(ag.inbox[p], 0)
			ag.base[p] = 0
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
		if err := e.sendOwn((me+i)%size, 0, e.n, true); err != nil {
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
			if err := e.sendOwn(right, 0, e.n, last); err != nil {
				return err
			}
		} else {
			c := uint64((me - s + size) % size)
			if err := e.send(right, c*e.n, buf, c*e.n, e.n, last); err != nil {
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
			if err := e.sendOwn(peer, off, n, i == pieces-1); err != nil {
				return err
			}
		}
	}
	for i := 1; i < ln; i++ {
		if err := e.sendOwn(locals[(l.li+i)%ln], 0, e.n, nodes == 1); err != nil {
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
				last := g == nodes-1 && i == pieces-1
				if err := e.send(locals[(l.li+j)%ln], at+off, buf, at+off, n, last); err != nil {
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
		// error names the partners (or their link to p), not p.
		e.waitForwarded(p, e.ag.partners(p))
	}
	return nil
}

// waitForwarded enqueues the wait for the last message of the exec from
// local rank p, which forwards its partners' chunks (hier); a wait that
// fails after p's own chunk arrived names the partners.
func (e *agExec) waitForwarded(p int, partners []int) {
	ag, k, n := e.ag, e.k, e.n
	start := ag.base[p]
	e.got[p]++
	spec := transport.WaitSpec{Slots: []transport.Addr{ag.inbox[p]}, Mode: transport.WaitSum,
		Cmp: transport.CmpEq, Value: e.tag, Mismatch: agMismatch, Timeout: ag.w.Options().Timeout,
		Fail: func(obs uint64, cause error) error {
			if obs > start && obs-start < 1<<tagNBits && obs>>tagNBits == start>>tagNBits {
				return ag.forwardError(p, partners, k, n, obs-start, cause)
			}
			err := ag.waitError(p, k, n, obs, cause)
			if errors.Is(cause, transport.ErrTimeout) {
				// Nothing of p's came: p may itself be held up by a
				// partner, before it sent anything here.
				err = fmt.Errorf("%w; rank %d also forwards here the chunks of %s on another node, and a rank it waits for holds it up too (rank %d's own error names it)",
					err, p, rankList(partners), p)
			}
			return err
		}}
	ag.base[p] = e.tag
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
