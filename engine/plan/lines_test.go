package plan

import (
	"testing"

	"github.com/luacoll/luacoll/kernels"
	"github.com/luacoll/luacoll/transport"
	"github.com/luacoll/luacoll/window"
)

func pingPongLists(n int) []List {
	lists := make([]List, n)
	for q := range lists {
		lists[q] = List{Shape: shape(n, 8)}
	}
	put := func(peer int) Op {
		return Op{Kind: PutSignal, Peer: peer, Buf: 1, N: 8, SigValue: 1, Site: site(linePut)}
	}
	wait := func(peer int) Op {
		return Op{Kind: WaitSignalFrom, Peer: peer, Cmp: transport.CmpGe, Value: 1, Site: site(lineWait)}
	}
	lists[0].Ops = []Op{put(1), wait(1)}
	lists[1].Ops = []Op{wait(0), put(0)}
	return lists
}

// Which put_signals travel in lines, and which wait drains each.
func TestLines(t *testing.T) {
	t.Run("ping-pong", func(t *testing.T) {
		got, most := Lines(pingPongLists(3), 8)
		want := map[LineRef]LineInfo{{0, 0}: {Receiver: 1, Index: 0, Count: 1, Drain: 0}, {1, 1}: {Receiver: 0, Index: 0, Count: 1, Drain: 1}}
		if most != 1 || len(got) != len(want) {
			t.Fatalf("got %v (most %d), want %v", got, most, want)
		}
		for k, v := range want {
			if got[k] != v {
				t.Errorf("%v: got %+v, want %+v", k, got[k], v)
			}
		}
	})
	t.Run("ring", func(t *testing.T) {
		// Step s's put_signal is the (s+1)-th on the right's row: the
		// right's wait of step s drains it (ops: 3 to begin, then put,
		// wait per step).
		const n = 4
		got, most := Lines(ringLists(n, 8), 8)
		if most != n-1 || len(got) != n*(n-1) {
			t.Fatalf("%d lines, most %d: %v", len(got), most, got)
		}
		for me := 0; me < n; me++ {
			for s := 0; s < n-1; s++ {
				li, ok := got[LineRef{me, 3 + 2*s}]
				if !ok || li.Receiver != (me+1)%n || li.Drain != 4+2*s || li.Index != s {
					t.Errorf("rank %d step %d: %+v %v", me, s, li, ok)
				}
			}
		}
	})
	t.Run("direct", func(t *testing.T) {
		const n = 5
		got, most := Lines(directLists(n, 3), 8)
		if most != n-1 || len(got) != n*(n-1) {
			t.Fatalf("%d lines, most %d", len(got), most)
		}
		for ref, li := range got {
			if li.Drain != 3+n-1 {
				t.Errorf("%v drained before op %d, want the wait (%d)", ref, li.Drain, 3+n-1)
			}
		}
	})
	t.Run("wide", func(t *testing.T) {
		// Above 8 bytes a put_signal takes a line per 8 bytes, its
		// lines one after another in the receiver's area; above the
		// limit, none.
		const n = 4
		lists := directLists(n, 20)
		got, most := Lines(lists, 20)
		if most != 3*(n-1) || len(got) != n*(n-1) {
			t.Fatalf("%d lines, most %d", len(got), most)
		}
		for q := 0; q < n; q++ {
			used := map[int]bool{}
			for ref, li := range got {
				if li.Receiver != q {
					continue
				}
				if li.Count != 3 || li.Index%3 != 0 {
					t.Errorf("%v: %+v, want 3 lines from a multiple of 3", ref, li)
				}
				used[li.Index] = true
			}
			if len(used) != n-1 {
				t.Errorf("rank %d: line areas from %v, want %d apart", q, used, n-1)
			}
		}
		if got, most := Lines(lists, 19); len(got) != 0 || most != 0 {
			t.Fatalf("limit 19: got %v", got)
		}
		if LineCount(1) != 1 || LineCount(8) != 1 || LineCount(9) != 2 || LineCount(16384) != 2048 {
			t.Fatal("LineCount")
		}
	})
	none := func(name string, edit func(lists []List)) {
		t.Run(name, func(t *testing.T) {
			lists := pingPongLists(2)
			edit(lists)
			if got, most := Lines(lists, 8); len(got) != 0 || most != 0 {
				t.Fatalf("got %v", got)
			}
		})
	}
	none("more than 8 bytes", func(l []List) { l[0].Ops[0].N, l[1].Ops[1].N = 9, 9 })
	none("a set signal", func(l []List) { l[0].Ops[0].SigOp, l[1].Ops[1].SigOp = window.SigSet, window.SigSet })
	none("a wait that needs none", func(l []List) { l[1].Ops[0].Value, l[0].Ops[1].Value = 0, 0 })
	none("an equality wait", func(l []List) { l[1].Ops[0].Cmp, l[0].Ops[1].Cmp = transport.CmpEq, transport.CmpEq })
	none("other puts beside", func(l []List) {
		for q := range l {
			l[q].Ops = append(l[q].Ops, Op{Kind: Put, Peer: 1 - q, Buf: 1, N: 8, Off: 8})
		}
	})
	none("a signal counter", func(l []List) { l[0].Ops[0].Kind, l[1].Ops[1].Kind = PutSignalCounter, PutSignalCounter })
	t.Run("a wait needing lines drained only later", func(t *testing.T) {
		// Rank 2 waits for 2 of 3 signals, then for all 3: no single line
		// is needed by the first wait, so all would drain at the second,
		// and the first would spin on a slot only those drains raise.
		const n = 4
		lists := make([]List, n)
		for q := range lists {
			lists[q] = List{Shape: shape(n, 8)}
		}
		for q := 0; q < n; q++ {
			if q != 2 {
				lists[q].Ops = []Op{{Kind: PutSignal, Peer: 2, Off: uint64(q) * 8, Buf: 1, N: 8, SigValue: 1}}
			}
		}
		lists[2].Ops = []Op{
			{Kind: WaitSignal, Cmp: transport.CmpGe, Value: 2},
			{Kind: WaitSignal, Cmp: transport.CmpGe, Value: 3},
		}
		if got, most := Lines(lists, 8); len(got) != 0 || most != 0 {
			t.Fatalf("got %v", got)
		}
	})
	t.Run("covered waits", func(t *testing.T) {
		// Every wait of the ping-pong, the ring and direct is brought to
		// its target by the drains before it.
		for name, lists := range map[string][]List{"ping-pong": pingPongLists(2), "ring": ringLists(4, 8), "direct": directLists(4, 8)} {
			ls := planLines(lists, 8)
			for q, l := range lists {
				for i, o := range l.Ops {
					if o.Kind.IsWait() && !ls.covered[LineRef{q, i}] {
						t.Errorf("%s: rank %d's op %d (%s) not covered", name, q, i, o.Kind)
					}
				}
			}
		}
		// A pure signal beside the line on the same row: the wait still
		// polls for it.
		lists := pingPongLists(2)
		lists[0].Ops = append([]Op{{Kind: Signal, Peer: 1, SigValue: 1}}, lists[0].Ops...)
		lists[1].Ops[0].Value = 2
		ls := planLines(lists, 8)
		if li, ok := ls.lines[LineRef{0, 1}]; !ok || li.Drain != 0 {
			t.Fatalf("rank 0's line: %+v %v", li, ok)
		}
		if ls.covered[LineRef{1, 0}] {
			t.Fatal("a wait that needs an ordered signal too was covered")
		}
	})
	t.Run("a peer gets from the sender", func(t *testing.T) {
		lists := pingPongLists(2)
		// Rank 0 fills its window, which rank 1 reads: rank 0's line
		// would not release the fill.
		lists[0].Ops = append([]Op{{Kind: Fill, Buf: WindowBuf}}, lists[0].Ops...)
		lists[1].Ops = append(lists[1].Ops, Op{Kind: Get, Peer: 0, Buf: 1, N: 8})
		got, _ := Lines(lists, 8)
		if _, ok := got[LineRef{0, 1}]; ok || len(got) != 1 {
			t.Fatalf("got %v, want rank 1's line only", got)
		}
	})
	t.Run("a peer reduces from the sender", func(t *testing.T) {
		// Rank 0 reduces into its window, which rank 1 reads with
		// reduce_from: rank 0's line would not release the reduction.
		red := Op{Kind: Reduce, Buf: WindowBuf, BufOff: 64, Src: 1, N: 8}
		lists := pingPongLists(2)
		lists[0].Ops = append([]Op{red}, lists[0].Ops...)
		if got, _ := Lines(lists, 8); len(got) != 2 {
			t.Fatalf("without a reader: got %v, want both lines", got)
		}
		lists[1].Ops = append(lists[1].Ops, Op{Kind: ReduceFrom, Peer: 0, Off: 64, Buf: 1, N: 8})
		got, _ := Lines(lists, 8)
		if _, ok := got[LineRef{0, 1}]; ok || len(got) != 1 {
			t.Fatalf("got %v, want rank 1's line only", got)
		}
		// A reduce_from into its own window (not a buffer) is a write a
		// reader sees too.
		lists = pingPongLists(2)
		lists[0].Ops = append([]Op{{Kind: ReduceFrom, Peer: 1, Buf: WindowBuf, BufOff: 64, N: 8}}, lists[0].Ops...)
		lists[1].Ops = append(lists[1].Ops, Op{Kind: Get, Peer: 0, Off: 64, Buf: 1, N: 8})
		got, _ = Lines(lists, 8)
		if _, ok := got[LineRef{0, 1}]; ok {
			t.Fatalf("got %v: rank 0's reduce_from into its window beside its line", got)
		}
	})
}

// A drain sends the next line before its payload only where no peer
// reads this rank's window: a get or a reduce_from from it rules it out.
func TestSendFirst(t *testing.T) {
	for _, c := range []struct {
		name string
		read *Op
		want uint32
	}{
		{"no reader", nil, kernels.LineSendFirst},
		{"get", &Op{Kind: Get, Peer: 0, Buf: 1, N: 8}, 0},
		{"reduce_from", &Op{Kind: ReduceFrom, Peer: 0, Buf: 1, N: 8}, 0},
		{"reduce_from of another rank", &Op{Kind: ReduceFrom, Peer: 2, Buf: 1, N: 8}, kernels.LineSendFirst},
	} {
		lists := pingPongLists(3)
		if c.read != nil {
			lists[1].Ops = append(lists[1].Ops, *c.read)
		}
		cm := &compiler{p: &Plan{lists: lists}, me: 0}
		cm.planDrains()
		if cm.sendFirst != c.want {
			t.Errorf("%s: sendFirst %d, want %d", c.name, cm.sendFirst, c.want)
		}
	}
}
