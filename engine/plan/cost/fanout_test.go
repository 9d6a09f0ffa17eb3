package cost

import (
	"testing"

	"github.com/luacoll/luacoll/engine/plan"
	"github.com/luacoll/luacoll/transport"
)

// In stream and graph mode a rank's own copy and its put_signals of the
// same chunk to two peers are one launch: the rank pays one start (the
// peers' 1,000 ns), the two peers' bytes one after the other on its
// links out (0.1 ns a byte each), the own copy beside them (0.01 ns a
// byte), and one signal (50 ns), where host mode pays the three puts and
// two signals one after another. Puts from different sources, or no
// larger than what the mode's interpreter keeps, stay one after another.
func TestFanOutGroupsPuts(t *testing.T) {
	const n = 1 << 20
	m := testModel(50)
	m.Modes["stream"], m.Modes["graph"] = m.Modes["host"], m.Modes["host"]
	// lists: each rank copies its chunk into place, then puts it to the
	// two others (the second from the window's copy of it: apart).
	lists := func(apart bool, n uint64) []plan.List {
		out := make([]plan.List, 3)
		for me := range out {
			ops := []plan.Op{{Kind: plan.Put, Peer: me, Off: uint64(me) * n, Buf: 1, N: n}}
			for i := 1; i < 3; i++ {
				o := putSig((me+i)%3, uint64(me)*n, 1, 0, n)
				if apart && i == 2 {
					o.Buf, o.BufOff = plan.WindowBuf, uint64(me)*n
				}
				ops = append(ops, o)
			}
			out[me] = agList(3, n, ops)
		}
		return out
	}
	self, peer, sig := 100+0.01*n, 1000+0.1*n, 50.0
	group := 1000 + 2*0.1*n + sig
	for _, c := range []struct {
		mode  string
		apart bool
		n     uint64
		want  float64
	}{
		{"host", false, n, self + 2*(peer+sig)},
		{"stream", false, n, group},
		{"graph", false, n, group},
		{"device", false, n, self + 2*(peer+sig)},
		// The second peer's put reads other bytes: two launches, the first
		// of the own copy and the first peer's put.
		{"stream", true, n, peer + sig + peer + sig},
		// 64 KiB stays in stream mode's interpreter, not in graph mode's.
		{"stream", false, 64 << 10, (100 + 0.01*65536) + 2*(1000+0.1*65536+sig)},
		{"graph", false, 64 << 10, 1000 + 2*0.1*65536 + sig},
	} {
		m.Modes["device"] = m.Modes["host"]
		res, err := Estimate(m, Input{Lists: lists(c.apart, c.n), Mode: c.mode})
		if err != nil {
			t.Fatal(err)
		}
		near(t, c.mode+" rank 0", res.PerRank[0], c.want, 1e-9)
	}
	// Ranks that reach each other over the network enqueue their plans op
	// by op (no launches of their own): the same lists pay the three puts
	// and two signals one after another in stream mode too (5,000 ns and
	// 0.5 ns a byte a put to a peer), the own copy at the net class's copy
	// cost (2,000 ns and 0.2 ns a byte: where the window lives then).
	np := m.Modes["stream"]["net"]
	np.Copy = Cost{AlphaNs: 2000, BetaNs: 0.2}
	m.Modes["stream"]["net"] = np
	net := func(from, to int) transport.PeerKind {
		if from == to {
			return transport.KindSelf
		}
		return transport.KindNet
	}
	res, err := Estimate(m, Input{Lists: lists(false, n), Mode: "stream", Class: net})
	if err != nil {
		t.Fatal(err)
	}
	near(t, "stream over the network, rank 0", res.PerRank[0], 2000+0.2*n+2*(5000+0.5*n+sig), 1e-9)
}

// A group's signals land when its bytes have: rank 0 put_signals one
// chunk to ranks 1 and 2 (stream mode), and both waits end with the group
// (two peers' bytes on rank 0's links out, then the signal), not rank 1's
// after its own bytes alone. Two put_signals to one peer are two launches
// (the first signal stays between them), and a group never reaches into
// the next replay.
func TestFanOutSignalsAndLimits(t *testing.T) {
	const n = 1 << 20
	m := testModel(50)
	m.Modes["stream"] = m.Modes["host"]
	one := func(ops []plan.Op) []plan.List {
		return []plan.List{
			agList(3, n, ops),
			agList(3, n, []plan.Op{waitFrom(0, 1)}),
			agList(3, n, []plan.Op{waitFrom(0, uint64(len(ops)-1))}),
		}
	}
	group := 1000 + 2*0.1*n + 50.0
	res, err := Estimate(m, Input{Lists: one([]plan.Op{putSig(1, 0, 1, 0, n), putSig(2, 0, 1, 0, n)}), Mode: "stream"})
	if err != nil {
		t.Fatal(err)
	}
	near(t, "rank 1's wait", res.PerRank[1], group+50, 1e-9)
	near(t, "rank 2's wait", res.PerRank[2], group+50, 1e-9)

	lists := []plan.List{
		agList(3, n, []plan.Op{putSig(1, 0, 1, 0, n), putSig(1, n, 1, 0, n)}),
		agList(3, n, []plan.Op{waitFrom(0, 2)}),
		agList(3, n, nil),
	}
	if res, err = Estimate(m, Input{Lists: lists, Mode: "stream"}); err != nil {
		t.Fatal(err)
	}
	near(t, "two put_signals to one peer", res.PerRank[0], 2*(1000+0.1*n+50), 1e-9)

	lists = []plan.List{
		agList(3, n, []plan.Op{{Kind: plan.Put, Peer: 1, Buf: 1, N: n}, {Kind: plan.Put, Peer: 2, Buf: 1, N: n}}),
		agList(3, n, nil),
		agList(3, n, nil),
	}
	if res, err = Estimate(m, Input{Lists: lists, Mode: "stream", Replays: 4}); err != nil {
		t.Fatal(err)
	}
	near(t, "a replay in a loop", res.Steady, res.Time, 1e-9)
	near(t, "one replay", res.Time, 1000+2*0.1*n, 1e-9)
}
