package plan

import "github.com/luacoll/luacoll/transport"

// Synthetic lists of the schedules of scripts/lib/allgather.lua, as
// recording them gives: every op at its own "line" so tests can point at
// one.
const (
	lineBarrier = 10 + iota
	lineOwn
	lineFlush
	linePut
	lineWait
)

func site(line int) Site { return Site{File: "ag.lua", Line: line} }

func shape(n int, N uint64) Shape {
	return Shape{Ranks: n, Bytes: N * uint64(n), Signals: 8, Counters: 8, Barriers: 4, Buffers: []uint64{N * uint64(n), N}}
}

func begin(me int, N uint64) []Op {
	return []Op{
		{Kind: Barrier, Bar: 0, Site: site(lineBarrier)},
		{Kind: Put, Peer: me, Off: uint64(me) * N, Buf: 1, N: N, Site: site(lineOwn)},
		{Kind: Flush, Site: site(lineFlush)},
	}
}

func ringLists(n int, N uint64) []List {
	lists := make([]List, n)
	for me := range lists {
		ops := begin(me, N)
		right, left := (me+1)%n, (me-1+n)%n
		for s := 0; s < n-1; s++ {
			chunk := uint64((me - s + n) % n)
			ops = append(ops,
				Op{Kind: PutSignal, Peer: right, Off: chunk * N, Buf: WindowBuf, BufOff: chunk * N, N: N, Sig: 0, SigValue: 1, Site: site(linePut)},
				Op{Kind: WaitSignalFrom, Peer: left, Sig: 0, Cmp: transport.CmpGe, Value: uint64(s + 1), Site: site(lineWait)})
		}
		lists[me] = List{Shape: shape(n, N), Ops: ops}
	}
	return lists
}

func directLists(n int, N uint64) []List {
	lists := make([]List, n)
	for me := range lists {
		ops := begin(me, N)
		for i := 1; i < n; i++ {
			ops = append(ops, Op{Kind: PutSignal, Peer: (me + i) % n, Off: uint64(me) * N, Buf: WindowBuf, BufOff: uint64(me) * N, N: N, Sig: 0, SigValue: 1, Site: site(linePut)})
		}
		ops = append(ops, Op{Kind: WaitSignal, Sig: 0, Cmp: transport.CmpGe, Value: uint64(n - 1), Site: site(lineWait)})
		lists[me] = List{Shape: shape(n, N), Ops: ops}
	}
	return lists
}
