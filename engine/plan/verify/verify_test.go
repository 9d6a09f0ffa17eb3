package verify

import (
	"fmt"
	"strings"
	"testing"

	"github.com/luacoll/luacoll/engine/plan"
	"github.com/luacoll/luacoll/transport"
	"github.com/luacoll/luacoll/window"
)

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

func site(line int) plan.Site { return plan.Site{File: "ag.lua", Line: line} }

func shape(n int, N uint64) plan.Shape {
	return plan.Shape{Ranks: n, Bytes: N * uint64(n), Signals: 8, Counters: 8, Barriers: 4, Buffers: []uint64{N * uint64(n), N}}
}

func begin(me int, N uint64) []plan.Op {
	return []plan.Op{
		{Kind: plan.Barrier, Bar: 0, Site: site(lineBarrier)},
		{Kind: plan.Put, Peer: me, Off: uint64(me) * N, Buf: 1, N: N, Site: site(lineOwn)},
		{Kind: plan.Flush, Site: site(lineFlush)},
	}
}

func ringLists(n int, N uint64) []plan.List {
	lists := make([]plan.List, n)
	for me := range lists {
		ops := begin(me, N)
		right, left := (me+1)%n, (me-1+n)%n
		for s := 0; s < n-1; s++ {
			chunk := uint64((me - s + n) % n)
			ops = append(ops,
				plan.Op{Kind: plan.PutSignal, Peer: right, Off: chunk * N, Buf: plan.WindowBuf, BufOff: chunk * N, N: N, Sig: 0, SigValue: 1, Site: site(linePut)},
				plan.Op{Kind: plan.WaitSignalFrom, Peer: left, Sig: 0, Cmp: transport.CmpGe, Value: uint64(s + 1), Site: site(lineWait)})
		}
		lists[me] = plan.List{Shape: shape(n, N), Ops: ops}
	}
	return lists
}

func directLists(n int, N uint64) []plan.List {
	lists := make([]plan.List, n)
	for me := range lists {
		ops := begin(me, N)
		for i := 1; i < n; i++ {
			ops = append(ops, plan.Op{Kind: plan.PutSignal, Peer: (me + i) % n, Off: uint64(me) * N, Buf: plan.WindowBuf, BufOff: uint64(me) * N, N: N, Sig: 0, SigValue: 1, Site: site(linePut)})
		}
		ops = append(ops, plan.Op{Kind: plan.WaitSignal, Sig: 0, Cmp: transport.CmpGe, Value: uint64(n - 1), Site: site(lineWait)})
		lists[me] = plan.List{Shape: shape(n, N), Ops: ops}
	}
	return lists
}

func allgather(n int, N uint64, withSrc bool) Options {
	c := Collective{Kind: "allgather", N: N}
	if withSrc {
		for r := 0; r < n; r++ {
			c.Src = append(c.Src, Source{Buf: 1})
		}
	}
	return Options{Collective: c}
}

func mustOK(t *testing.T, rep *Report) {
	t.Helper()
	if !rep.OK {
		var b strings.Builder
		for _, p := range rep.Problems {
			fmt.Fprintf(&b, "\n  %s", p)
		}
		t.Fatalf("not ok:%s", b.String())
	}
}

func TestVerifyCorrectSchedules(t *testing.T) {
	const odd = 1000003%4096 + 13
	for _, n := range []int{1, 2, 3, 4, 8} {
		for _, N := range []uint64{odd, 1, 4096} {
			for name, mk := range map[string]func(int, uint64) []plan.List{"ring": ringLists, "direct": directLists} {
				for _, withSrc := range []bool{false, true} {
					rep := Verify(mk(n, N), allgather(n, N, withSrc))
					t.Run(fmt.Sprintf("%s/n%d/N%d/src%v", name, n, N, withSrc), func(t *testing.T) { mustOK(t, rep) })
				}
			}
		}
	}
	// Steps: ring = barrier, own put, flush, then n-1 put_signal+wait pairs
	// chained around the ring; direct's chain is much shorter.
	ring, direct := Verify(ringLists(8, 64), allgather(8, 64, true)), Verify(directLists(8, 64), allgather(8, 64, true))
	if ring.Steps <= direct.Steps || ring.Steps < 2*7 {
		t.Fatalf("steps: ring %d, direct %d", ring.Steps, direct.Steps)
	}
	if got := fmt.Sprint(ring.Ops); got != "[17 17 17 17 17 17 17 17]" {
		t.Fatalf("ops %s", got)
	}
}

// find returns the problems of a kind.
func find(rep *Report, kind string) []Problem {
	var out []Problem
	for _, p := range rep.Problems {
		if p.Kind == kind {
			out = append(out, p)
		}
	}
	return out
}

func has(t *testing.T, rep *Report, kind string, rank, line int, text string) Problem {
	t.Helper()
	for _, p := range rep.Problems {
		if p.Kind == kind && p.Rank == rank && p.Site.Line == line && strings.Contains(p.Msg, text) {
			return p
		}
	}
	var b strings.Builder
	for _, p := range rep.Problems {
		fmt.Fprintf(&b, "\n  %s", p)
	}
	t.Fatalf("no %s problem on rank %d at line %d containing %q; got:%s", kind, rank, line, text, b.String())
	return Problem{}
}

func TestVerifyPlantedBugs(t *testing.T) {
	const n, N = 4, 100
	t.Run("missing signal", func(t *testing.T) {
		l := ringLists(n, N)
		l[2].Ops[3].Kind = plan.Put // step 0 of rank 2: no signal to rank 3
		l[2].Ops[3].Site = site(99)
		rep := Verify(l, allgather(n, N, true))
		// Rank 3 takes rank 2's next signal for the missing one and forwards
		// a chunk still arriving, then waits for a last signal forever.
		p := has(t, rep, "race", 3, linePut, "while rank 2's put (op 4, ag.lua:99) writes them")
		if p.Other == nil || p.Other.Rank != 2 || p.Other.Site.Line != 99 {
			t.Fatalf("%s: other %v", p, p.Other)
		}
		p = has(t, rep, "deadlock", 3, lineWait, "waits for signal 0 from rank 2 >= 3, which is 2")
		if p.Op != 9 || p.Replay != 1 {
			t.Fatalf("op %d: %s", p.Op, p)
		}
	})
	t.Run("wrong peer", func(t *testing.T) {
		l := ringLists(n, N)
		l[1].Ops[5].Peer = 3 // step 1 of rank 1 goes to rank 3, not 2
		l[1].Ops[5].Site = site(98)
		rep := Verify(l, allgather(n, N, true))
		// Rank 2 waits for a second signal from rank 1 forever; rank 1's
		// chunk lands in rank 3 over rank 3's own chunk writes.
		has(t, rep, "deadlock", 2, lineWait, "from rank 1 >= 3, which is 2; rank 1 signals rank 3 instead at op 6 (ag.lua:98), which rank 3 never waits for")
	})
	t.Run("off by one", func(t *testing.T) {
		l := directLists(n, N)
		l[2].Ops[4].Off++ // rank 2's put to rank 3 lands one byte late
		l[2].Ops[4].Site = site(97)
		rep := Verify(l, allgather(n, N, true))
		// Op 5 of rank 2 is its put to rank 0: rank 0's chunk 2 is one byte
		// late, and its last byte lands on chunk 3, which rank 3 writes.
		has(t, rep, "postcondition", 0, 0, "rank 0's window bytes [200, 201) hold rank 0's window bytes from offset 200 (as they were before the plan), expected rank 2's chunk: rank 2's source b1 bytes from offset 0 of replay 2 (never written")
		has(t, rep, "postcondition", 2, 97, "rank 0's window bytes [201, 300) hold rank 2's source b1 bytes from offset 0 of replay 2, expected rank 2's chunk: rank 2's source b1 bytes from offset 1 of replay 2")
		has(t, rep, "postcondition", 2, 97, "rank 0's window bytes [300, 301) hold rank 2's source b1 bytes from offset 99 of replay 2, expected rank 3's chunk")
		// and at the end of replay 1, blamed on the wait that let it through
		has(t, rep, "result", 0, lineWait, "at the end of replay 1, rank 0's window bytes [200, 201) (chunk 2) hold rank 0's window bytes from offset 200")
		has(t, rep, "race", 2, 97, "in rank 0's window")
	})
	t.Run("two unordered puts", func(t *testing.T) {
		l := directLists(n, N)
		// rank 1 also writes its chunk over rank 2's in rank 0.
		l[1].Ops = append(l[1].Ops[:len(l[1].Ops)-1], plan.Op{Kind: plan.Put, Peer: 0, Off: 2 * N, Buf: plan.WindowBuf, BufOff: N, N: N, Site: site(96)}, l[1].Ops[len(l[1].Ops)-1])
		rep := Verify(l, Options{Replays: 1})
		p := find(rep, "race")
		if len(p) == 0 {
			t.Fatalf("no race: %v", rep.Problems)
		}
		found := false
		for _, x := range p {
			involves := (x.Rank == 1 && x.Site.Line == 96) || (x.Other != nil && x.Other.Rank == 1 && x.Other.Site.Line == 96)
			if involves && strings.Contains(x.Msg, "two writes into one range") && strings.Contains(x.Msg, "rank 0's window") {
				found = true
			}
		}
		if !found {
			t.Fatalf("races do not name rank 1's line 96: %v", p)
		}
	})
	t.Run("source reused before flush", func(t *testing.T) {
		l := directLists(n, N)
		for me := range l {
			// put straight from the buffer, then refill it at once
			ops := []plan.Op{l[me].Ops[0]}
			for i := 1; i < n; i++ {
				ops = append(ops, plan.Op{Kind: plan.PutSignal, Peer: (me + i) % n, Off: uint64(me) * N, Buf: 1, N: N, Sig: 0, SigValue: 1, Site: site(linePut)})
			}
			ops = append(ops, plan.Op{Kind: plan.Fill, Buf: 1, FillKind: transport.FillRandU32, FillArg: 5, Site: site(95)})
			ops = append(ops, l[me].Ops[len(l[me].Ops)-1])
			l[me].Ops = ops
		}
		rep := Verify(l, Options{Replays: 1})
		for r := 0; r < n; r++ {
			has(t, rep, "race", r, 95, "source overwritten before its put completed locally")
		}
		// With a flush between, it is fine.
		for me := range l {
			ops := l[me].Ops
			k := len(ops) - 2
			l[me].Ops = append(ops[:k:k], append([]plan.Op{{Kind: plan.Flush, Site: site(94)}}, ops[k:]...)...)
		}
		mustOK(t, Verify(l, Options{Replays: 1}))
	})
	t.Run("wait on a slot nobody signals", func(t *testing.T) {
		l := ringLists(n, N)
		l[0].Ops = append(l[0].Ops, plan.Op{Kind: plan.WaitSignalFrom, Peer: 3, Sig: 5, Cmp: transport.CmpGe, Value: 1, Site: site(93)})
		rep := Verify(l, Options{})
		p := has(t, rep, "deadlock", 0, 93, "signal 5 from rank 3 >= 1, which is 0")
		if !strings.Contains(p.Msg, "rank 3 signals it no more in this replay") || p.Op != len(l[0].Ops) {
			t.Fatalf("%s", p)
		}
		for _, p := range rep.Problems[1:] {
			if p.OpName != "barrier" || !strings.Contains(p.Msg, "waiting for rank 0 (blocked at op 10") {
				t.Fatalf("the others wait for rank 0 in the next barrier: %s", p)
			}
		}
	})
	t.Run("no guard barrier", func(t *testing.T) {
		// Without the barrier, replay 2's puts overwrite chunks that a slow
		// peer may still be forwarding from replay 1.
		l := ringLists(n, N)
		for me := range l {
			l[me].Ops = l[me].Ops[1:]
		}
		rep := Verify(l, Options{})
		p := find(rep, "race")
		if len(p) == 0 || p[0].Replay != 2 {
			t.Fatalf("want a race in replay 2: %v", rep.Problems)
		}
		mustOK(t, Verify(l, Options{Replays: 1, Collective: allgather(n, N, true).Collective}))
	})
	t.Run("set signals", func(t *testing.T) {
		l := directLists(n, N)
		for me := range l {
			for i := range l[me].Ops {
				if l[me].Ops[i].Kind == plan.PutSignal {
					l[me].Ops[i].SigOp = window.SigSet
				}
			}
		}
		has(t, Verify(l, Options{Replays: 1}), "replay", 1, lineWait, "\"set\"")
	})
	t.Run("bounds", func(t *testing.T) {
		l := ringLists(n, N)
		l[3].Ops[3].Off = 4*N - 1
		l[1].Ops = append(l[1].Ops, plan.Op{Kind: plan.WaitSignal, Sig: 8, Site: site(92)})
		rep := Verify(l, Options{})
		has(t, rep, "bounds", 3, linePut, "bad argument 'n'")
		has(t, rep, "bounds", 1, 92, "bad argument 'sig': signal 8 is outside 0..7")
	})
	t.Run("in flight at the end", func(t *testing.T) {
		// direct with plain puts and a separate signal before them: the
		// counts match, but nothing orders the data before the signal.
		l := directLists(n, N)
		for me := range l {
			ops := l[me].Ops[:3:3]
			for i := 1; i < n; i++ {
				ops = append(ops, plan.Op{Kind: plan.Signal, Peer: (me + i) % n, Sig: 0, SigValue: 1, Site: site(91)})
			}
			for i := 1; i < n; i++ {
				ops = append(ops, plan.Op{Kind: plan.Put, Peer: (me + i) % n, Off: uint64(me) * N, BufOff: uint64(me) * N, N: N, Site: site(90)})
			}
			l[me].Ops = append(ops, l[me].Ops[len(l[me].Ops)-1])
		}
		rep := Verify(l, Options{Replays: 1, Collective: allgather(n, N, true).Collective})
		has(t, rep, "postcondition", 1, 90, "is not known to have arrived when rank 2's plan ends")
	})
}

func TestVerifyOtherCollectives(t *testing.T) {
	const N = 33
	for _, n := range []int{2, 3, 5} {
		// pairwise all-to-all from buffer b1 (n chunks)
		lists := make([]plan.List, n)
		for me := range lists {
			sh := shape(n, N)
			sh.Buffers[1] = N * uint64(n)
			ops := []plan.Op{{Kind: plan.Barrier, Site: site(1)}, {Kind: plan.Put, Peer: me, Off: uint64(me) * N, Buf: 1, BufOff: uint64(me) * N, N: N, Site: site(2)}}
			for i := 1; i < n; i++ {
				p := (me + i) % n
				ops = append(ops, plan.Op{Kind: plan.PutSignal, Peer: p, Off: uint64(me) * N, Buf: 1, BufOff: uint64(p) * N, N: N, Sig: 1, SigValue: 1, Site: site(3)})
			}
			ops = append(ops, plan.Op{Kind: plan.WaitSignal, Sig: 1, Cmp: transport.CmpGe, Value: uint64(n - 1), Site: site(4)})
			lists[me] = plan.List{Shape: sh, Ops: ops}
		}
		c := Collective{Kind: "alltoall", N: N}
		mustOK(t, Verify(lists, Options{Collective: c}))
		for r := 0; r < n; r++ {
			c.Src = append(c.Src, Source{Buf: 1})
		}
		mustOK(t, Verify(lists, Options{Collective: c}))
		if n > 2 {
			lists[1].Ops[2].BufOff = 0 // rank 1 sends chunk 0 to rank 2
			lists[1].Ops[2].Site = site(77)
			rep := Verify(lists, Options{Collective: c})
			has(t, rep, "postcondition", 1, 77, "expected rank 1's chunk 2")
		}

		// broadcast from root 1 (root puts its buffer into everyone's window
		// at 0, then signals)
		root := 1 % n
		lists = make([]plan.List, n)
		for me := range lists {
			ops := []plan.Op{{Kind: plan.Barrier, Site: site(1)}}
			if me == root {
				for i := 1; i < n; i++ {
					ops = append(ops, plan.Op{Kind: plan.PutSignal, Peer: (me + i) % n, Buf: 1, N: N, Sig: 2, SigValue: 1, Site: site(2)})
				}
			} else {
				ops = append(ops, plan.Op{Kind: plan.WaitSignalFrom, Peer: root, Sig: 2, Cmp: transport.CmpGe, Value: 1, Site: site(3)})
			}
			lists[me] = plan.List{Shape: shape(n, N), Ops: ops}
		}
		bc := Collective{Kind: "broadcast", N: N, Root: root}
		mustOK(t, Verify(lists, Options{Collective: bc}))
		bc.Root = (root + 1) % n
		rep := Verify(lists, Options{Collective: bc})
		if rep.OK {
			t.Fatalf("n=%d: broadcast from the wrong root passed", n)
		}
	}
}

func TestVerifyShapes(t *testing.T) {
	l := ringLists(3, 8)
	l[2].Shape.Signals = 4
	rep := Verify(l, Options{})
	if rep.OK || rep.Problems[0].Kind != "shape" || rep.Problems[0].Rank != 2 {
		t.Fatalf("%v", rep.Problems)
	}
	rep = Verify(ringLists(3, 8)[:2], Options{})
	if rep.OK || rep.Problems[0].Kind != "shape" {
		t.Fatalf("%v", rep.Problems)
	}
	rep = Verify(ringLists(3, 8), Options{Collective: Collective{Kind: "allgather", N: 9}})
	has(t, rep, "postcondition", 0, 0, "needs 27 bytes of window; it has 24")
	rep = Verify(ringLists(3, 8), Options{Collective: Collective{Kind: "reduce", N: 1}})
	has(t, rep, "postcondition", 0, 0, "unknown collective")
}

func TestVerifyLargeRing(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	mustOK(t, Verify(ringLists(64, 1<<20), allgather(64, 1<<20, true)))
}

// BenchmarkVerifyRing64 is the verification of a 64-rank ring all-gather
// plan (two replays, with its result): the budget is 1 s.
func BenchmarkVerifyRing64(b *testing.B) {
	lists := ringLists(64, 1<<20)
	opt := allgather(64, 1<<20, true)
	for b.Loop() {
		if rep := Verify(lists, opt); !rep.OK {
			b.Fatal(rep.Summary())
		}
	}
}

// FuzzVerify: any op lists (small ranks, offsets and slots drawn from the
// input, out-of-range ones included, with or without an inbox read after a
// reset) are verified without a panic, and the same input gives the same
// report.
func FuzzVerify(f *testing.F) {
	f.Add([]byte{3, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15})
	f.Add([]byte{2, 2, 1, 0, 0, 8, 9, 1, 1, 0, 0, 9, 0, 0, 0, 5})
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) < 2 {
			return
		}
		n := int(b[0]%4) + 1
		b = b[1:]
		lists := make([]plan.List, n)
		for r := range lists {
			lists[r].Shape = plan.Shape{Ranks: n, Bytes: 64, Signals: 2, Counters: 2, Barriers: 2, Buffers: []uint64{64, 32}}
		}
		for i := 0; i+4 <= len(b) && i < 4*64; i += 4 {
			x, y, z, w := b[i], b[i+1], b[i+2], b[i+3]
			o := plan.Op{Kind: plan.Kind(x % byte(plan.ReduceFrom+1)), Peer: int(y%5) - 0, Off: uint64(z % 80), Buf: int(w % 3), BufOff: uint64(z % 40),
				N: uint64(w % 48), Sig: int(y % 3), SigValue: uint64(z%3 + 1), SigOp: window.SignalOp(x >> 7),
				Ctr: int(w % 3), CtrValue: 1, Cmp: transport.Cmp(y % 6), Value: uint64(w % 4), Bar: int(z % 3),
				Src: int(y % 3), SrcOff: uint64(y % 40), DType: transport.DType(z % 3), RedOp: transport.RedOp(w % 2),
				Site: plan.Site{File: "f.lua", Line: i/4 + 1}}
			r := int(x>>5) % n
			lists[r].Ops = append(lists[r].Ops, o)
		}
		if b[0]&0x40 != 0 {
			// a rank that reset its inbox: rows from what it held
			rows := lists[0].Shape.Rows()
			lists[0].Inbox, lists[0].Replayed = make([]uint64, rows), make([]uint64, rows)
			for i := range rows {
				lists[0].Inbox[i], lists[0].Replayed[i] = uint64(b[i%len(b)]%3), uint64(b[(i+1)%len(b)]%2)
			}
		}
		opt := Options{Collective: Collective{Kind: []string{"", "allgather", "alltoall", "broadcast", "reduce_scatter", "allreduce"}[int(b[0])%6], N: uint64(b[0] % 20), Root: int(b[0]>>4) % n}}
		a, c := Verify(lists, opt), Verify(lists, opt)
		if a.OK != c.OK || len(a.Problems) != len(c.Problems) || a.Steps != c.Steps {
			t.Fatalf("two verifications differ: %s / %s", a.Summary(), c.Summary())
		}
		for i := range a.Problems {
			if a.Problems[i].String() != c.Problems[i].String() {
				t.Fatalf("problem %d differs: %s / %s", i, a.Problems[i], c.Problems[i])
			}
		}
		_ = a.Summary()
	})
}

// BenchmarkVerifyRing256 is BenchmarkVerifyRing64 at 256 ranks: the
// issue's budget is 10 s.
func BenchmarkVerifyRing256(b *testing.B) {
	lists := ringLists(256, 1<<20)
	opt := allgather(256, 1<<20, true)
	for b.Loop() {
		if rep := Verify(lists, opt); !rep.OK {
			b.Fatal(rep.Summary())
		}
	}
}

// BenchmarkVerifyDirect64 is a 64-rank direct all-gather (a sum wait per
// rank: a held-back run for each) with two replays.
func BenchmarkVerifyDirect64(b *testing.B) {
	lists := directLists(64, 1<<20)
	opt := allgather(64, 1<<20, true)
	for b.Loop() {
		if rep := Verify(lists, opt); !rep.OK {
			b.Fatal(rep.Summary())
		}
	}
}

// A meter counts every op of every replay by the end of a clean run, and
// stops short of the total in one that reaches its work bound.
func TestVerifyMeter(t *testing.T) {
	var m Meter
	opt := allgather(16, 64, true)
	opt.Meter = &m
	mustOK(t, Verify(ringLists(16, 64), opt))
	done, total := m.Done()
	if total != 2*16*int64(len(ringLists(16, 64)[0].Ops)) || done != total {
		t.Fatalf("meter %d of %d after a clean run", done, total)
	}
	var short Meter
	opt.Meter, opt.Budget = &short, 200
	Verify(ringLists(16, 64), opt)
	if done, total := short.Done(); done == 0 || done >= total {
		t.Fatalf("meter %d of %d after a stopped run", done, total)
	}
}

// A plan past the work bound is not claimed ok: Verify stops and says so.
func TestVerifyStops(t *testing.T) {
	opt := allgather(16, 64, true)
	opt.Budget = 1000
	rep := Verify(ringLists(16, 64), opt)
	if rep.OK || len(find(rep, "stopped")) != 1 || !strings.Contains(rep.Summary(), "verification stopped after") {
		t.Fatalf("%s", rep.Summary())
	}
	opt = allgather(8, 64, true)
	opt.Budget = 1000
	if rep := Verify(directLists(8, 64), opt); rep.OK || len(find(rep, "stopped")) != 1 {
		t.Fatalf("direct: %s", rep.Summary())
	}
}

// BenchmarkVerifyDirect256 is the 256-rank direct all-gather: 256 sum
// waits a replay, each with its held-back run.
func BenchmarkVerifyDirect256(b *testing.B) {
	lists := directLists(256, 1<<20)
	opt := allgather(256, 1<<20, true)
	for b.Loop() {
		if rep := Verify(lists, opt); !rep.OK {
			b.Fatal(rep.Summary())
		}
	}
}

// Options.Done stops a verification as the budget does, said as an
// interruption; left open, the same lists verify.
func TestVerifyDone(t *testing.T) {
	opt := allgather(16, 64, true)
	done := make(chan struct{})
	opt.Done = done
	if rep := Verify(ringLists(16, 64), opt); !rep.OK {
		t.Fatalf("open: %s", rep.Summary())
	}
	close(done)
	rep := Verify(ringLists(16, 64), opt)
	if rep.OK || len(find(rep, "stopped")) != 1 || !strings.Contains(rep.Summary(), "interrupted; nothing is claimed") {
		t.Fatalf("closed: %s", rep.Summary())
	}
}
