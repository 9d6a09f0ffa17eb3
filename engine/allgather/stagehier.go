package allgather

import (
	"fmt"
	"sync/atomic"

	"github.com/luacoll/luacoll/window"
)

// The staged protocol in two levels (auto's small execs on the CUDA proxy
// path with several ranks a node): the staging window of stage.go, its
// rows by sender of the chunk (the origin), but each chunk crosses the
// network once. In exec k (parity par = k mod 2) a rank
//
//  1. put_signals its chunk into the staging row of its counterparts
//     (the ranks of its index on the other nodes) and of its node's
//     ranks, setting their slot par to tag(k, n);
//  2. for each counterpart, waits for its tag, copies its chunk into
//     place and forwards it to the node's ranks, into their row of that
//     counterpart: plain puts, the last with a signal that sets slot
//     par+2 to tag(k, n), ordered after the puts before it;
//  3. for each rank of its node, waits for its tag in slot par, then in
//     slot par+2 (the chunks it forwarded), copying each chunk into place.
//
// Every rank writes only into ranks it also receives from in every exec
// (its counterparts and its node's ranks), so stage.go's argument holds:
// a rank reaches exec k+2 only after it saw each of them in exec k+1,
// which they sent after they finished exec k. A counterpart's chunk takes
// one network message, not one to every rank of the other node.
//
// A rank that refuses exec k sets its tag for the refusal in slot par of
// every peer (refuseStaged), also of those it sends nothing to here: a
// rank waiting for what a node's rank forwards from such a partner looks
// at the partner's slot too (fwdMismatch), and fails at once, as a
// direct staged exec would, rather than at the timeout.

// stageSlots is the staging window's signal slots: the own chunks' tags
// by parity, then the forwarded chunks' tags by parity.
const stageSlots = 4

// noteForwarded marks a wait for the chunks a rank of the node forwards
// (transport.WaitNote.Op of stageWait).
const noteForwarded = 1

// execStagedHier enqueues exec ag.k of the two-level staged protocol;
// src at srcOff holds this rank's chunk (the window's own place in place).
func (ag *Persistent) execStagedHier(src *window.Buffer, srcOff, n uint64, inPlace bool) error {
	w, sw, l := ag.w, ag.stage, ag.layout
	me, k := ag.me, ag.k
	tag, par := agTag(k, n), int(k&1)
	nodes, locals := len(l.groups), l.groups[l.mine]
	ln := len(locals)
	sig := &window.Sig{ID: par, Value: tag, Op: window.SigSet}
	put := func(p int, what string, t window.Transfer, s *window.Sig) error {
		var err error
		if s != nil {
			err = sw.PutSignal(t, s, nil)
		} else if t.N > 0 {
			err = sw.Put(t)
		}
		if err != nil {
			return ag.errf("exec #%d: %s to rank %d: %w", k, what, p, err)
		}
		return nil
	}
	into := func(p int) error { // p's chunk from the staging row into place
		if n == 0 {
			return nil
		}
		t := window.Transfer{Peer: me, PeerOff: uint64(p) * n, Local: sw.Buffer(), LocalOff: ag.stageRow(par, p), N: n}
		if err := w.Put(t); err != nil {
			return ag.errf("exec #%d: rank %d's chunk into place: %w", k, p, err)
		}
		return nil
	}
	mine := window.Transfer{PeerOff: ag.stageRow(par, me), Local: src, LocalOff: srcOff, N: n}
	for g := 1; g < nodes; g++ {
		mine.Peer = l.groups[(l.mine+g)%nodes][l.li]
		if err := put(mine.Peer, "put", mine, sig); err != nil {
			return err
		}
	}
	for i := 1; i < ln; i++ {
		mine.Peer = locals[(l.li+i)%ln]
		if err := put(mine.Peer, "put", mine, sig); err != nil {
			return err
		}
	}
	if !inPlace && n > 0 {
		if err := w.Put(window.Transfer{Peer: me, PeerOff: uint64(me) * n, Local: src, LocalOff: srcOff, N: n}); err != nil {
			return ag.errf("exec #%d: own chunk: %w", k, err)
		}
	}
	fwd := &window.Sig{ID: 2 + par, Value: tag, Op: window.SigSet}
	for g := 1; g < nodes; g++ {
		from := l.groups[(l.mine-g+nodes)%nodes][l.li]
		ag.stageWait(from, par, k, n, tag)
		if err := into(from); err != nil {
			return err
		}
		row := ag.stageRow(par, from)
		for i := 1; i < ln; i++ {
			p := locals[(l.li+i)%ln]
			t := window.Transfer{Peer: p, PeerOff: row, Local: sw.Buffer(), LocalOff: row, N: n}
			var s *window.Sig
			if g == nodes-1 {
				s = fwd
			}
			if err := put(p, fmt.Sprintf("forwarding rank %d's chunk", from), t, s); err != nil {
				return err
			}
		}
	}
	for i := 1; i < ln; i++ {
		li := (l.li - i + ln) % ln
		p := locals[li]
		ag.stageWait(p, par, k, n, tag)
		if err := into(p); err != nil {
			return err
		}
		if nodes == 1 {
			continue
		}
		ag.stageWait(p, 2+par, k, n, tag)
		for h := 0; h < nodes; h++ {
			if h != l.mine {
				if err := into(l.groups[h][li]); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// partners are the ranks whose chunks local rank p forwards (hier and
// two-level staging): p's counterparts on the other nodes, in node order.
func (ag *Persistent) partners(p int) []int {
	l := ag.layout
	var out []int
	for li, q := range l.groups[l.mine] {
		if q != p {
			continue
		}
		for h := range l.groups {
			if h != l.mine {
				out = append(out, l.groups[h][li])
			}
		}
	}
	return out
}

// refusedBy is the one of partners (a local rank's, see partners) that
// refused the exec whose tag is want (its refusal in this rank's slot of
// that exec's parity), or -1. Waits on the staging window are host waits
// (its slots are in host memory on every path that stages), so the slot
// is read here.
func (ag *Persistent) refusedBy(partners []int, want uint64) int {
	k := want >> tagNBits
	for _, q := range partners {
		v := atomic.LoadUint64((*uint64)(ag.stageIn[k&1][q][0].Pointer()))
		if v>>tagNBits == k && v&tagNMask == agRefusedN {
			return q
		}
	}
	return -1
}

// fwdMismatch is the Mismatch of the wait for what local rank p forwards:
// p's tag for this exec with another n, or a partner's refusal of it. A
// wait calls it at every look, so p's partners are listed once, here.
func (ag *Persistent) fwdMismatch(p int) func(want, obs uint64) bool {
	partners := ag.partners(p)
	return func(want, obs uint64) bool {
		return agMismatch(want, obs) || ag.refusedBy(partners, want) >= 0
	}
}

// forwardedError is the error of a wait for the chunks local rank p
// forwards from its counterparts on the other nodes (execStagedHier):
// waitError's where p's own tag for the exec says why (a refusal, another
// n), a partner's refusal, else what did not deliver.
func (ag *Persistent) forwardedError(p int, k, n, obs uint64, cause error) error {
	if obs>>tagNBits == k&tagKMask {
		return ag.waitError(p, k, n, obs, cause)
	}
	partners := ag.partners(p)
	if q := ag.refusedBy(partners, agTag(k, n)); q >= 0 {
		return ag.errf("exec #%d: rank %d refused it (that rank's error says why)", k, q)
	}
	who := rankList(partners)
	return ag.errf("exec #%d: waiting for the chunks rank %d forwards from %s on another node (n=%d): %s; %s did not deliver them to rank %d (or the network between them failed), or rank %d stopped (its own error or %s's names the cause)",
		k, p, who, n, ag.failWhat(cause), who, p, p, who)
}
