package cost

import (
	"github.com/luacoll/luacoll/engine/plan"
	"github.com/luacoll/luacoll/transport"
	"github.com/luacoll/luacoll/window"
)

// The op lists scripts/lib/allgather.lua's ring, direct and hier record
// (without staging): each rank's n bytes come from b1 and land at rank*n
// of every window; one signal slot counts the chunks.

func agShape(ranks int, n uint64) plan.Shape {
	return plan.Shape{Ranks: ranks, Bytes: uint64(ranks) * n, Signals: 1, Counters: 1, Barriers: 1,
		Buffers: []uint64{uint64(ranks) * n, n}}
}

func agList(ranks int, n uint64, ops []plan.Op) plan.List {
	return plan.List{Shape: agShape(ranks, n), Ops: ops}
}

func putSig(peer int, off uint64, buf int, bufOff, n uint64) plan.Op {
	return plan.Op{Kind: plan.PutSignal, Peer: peer, Off: off, Buf: buf, BufOff: bufOff, N: n, SigValue: 1, SigOp: window.SigAdd}
}

func waitFrom(peer int, v uint64) plan.Op {
	return plan.Op{Kind: plan.WaitSignalFrom, Peer: peer, Cmp: transport.CmpGe, Value: v}
}

// opening is the barrier and the rank's own copy every schedule starts with.
func opening(me int, n uint64) []plan.Op {
	return []plan.Op{{Kind: plan.Barrier}, {Kind: plan.Put, Peer: me, Off: uint64(me) * n, Buf: 1, N: n}}
}

func ringLists(ranks int, n uint64) []plan.List {
	lists := make([]plan.List, ranks)
	for me := range lists {
		right, left := (me+1)%ranks, (me-1+ranks)%ranks
		ops := opening(me, n)
		for s := 0; s < ranks-1; s++ {
			chunk := uint64((me - s + ranks) % ranks)
			if s == 0 {
				ops = append(ops, putSig(right, chunk*n, 1, 0, n))
			} else {
				ops = append(ops, putSig(right, chunk*n, 0, chunk*n, n))
			}
			ops = append(ops, waitFrom(left, uint64(s+1)))
		}
		lists[me] = agList(ranks, n, append(ops, plan.Op{Kind: plan.Flush}))
	}
	return lists
}

func directLists(ranks int, n uint64) []plan.List {
	lists := make([]plan.List, ranks)
	for me := range lists {
		ops := opening(me, n)
		for i := 1; i < ranks; i++ {
			ops = append(ops, putSig((me+i)%ranks, uint64(me)*n, 1, 0, n))
		}
		ops = append(ops, plan.Op{Kind: plan.WaitSignal, Cmp: transport.CmpGe, Value: uint64(ranks - 1)}, plan.Op{Kind: plan.Flush})
		lists[me] = agList(ranks, n, ops)
	}
	return lists
}

// hierLists is allgather.hier over nodes of per ranks each (contiguous),
// chunks sent between nodes in pieces.
func hierLists(nodes, per int, n uint64, pieces int) []plan.List {
	ranks := nodes * per
	piece := func(p int) (uint64, uint64) {
		base := n / uint64(pieces)
		off := uint64(p) * base
		if p == pieces-1 {
			return off, n - off
		}
		return off, base
	}
	lists := make([]plan.List, ranks)
	for me := range lists {
		mine, li := me/per, me%per
		local := func(i int) int { return mine*per + (li+i)%per }
		ops := append(opening(me, n), plan.Op{Kind: plan.Flush})
		for k := 1; k < nodes; k++ {
			peer := ((mine+k)%nodes)*per + li
			for p := 0; p < pieces; p++ {
				off, l := piece(p)
				ops = append(ops, putSig(peer, uint64(me)*n+off, 0, uint64(me)*n+off, l))
			}
		}
		for i := 1; i < per; i++ {
			ops = append(ops, putSig(local(i), uint64(me)*n, 0, uint64(me)*n, n))
		}
		got := map[int]uint64{}
		for k := 1; k < nodes; k++ {
			from := ((mine+nodes-k)%nodes)*per + li
			for p := 0; p < pieces; p++ {
				off, l := piece(p)
				got[from]++
				ops = append(ops, waitFrom(from, got[from]))
				for i := 1; i < per; i++ {
					ops = append(ops, putSig(local(i), uint64(from)*n+off, 0, uint64(from)*n+off, l))
				}
			}
		}
		for i := 1; i < per; i++ {
			ops = append(ops, waitFrom(local(i), uint64(1+(nodes-1)*pieces)))
		}
		lists[me] = agList(ranks, n, ops)
	}
	return lists
}

// layout is nodes of per ranks each: self, local within a node, net between.
func layout(per int, localKind transport.PeerKind) func(a, b int) transport.PeerKind {
	return func(a, b int) transport.PeerKind {
		switch {
		case a == b:
			return transport.KindSelf
		case a/per == b/per:
			return localKind
		}
		return transport.KindNet
	}
}
