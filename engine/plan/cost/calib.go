package cost

import (
	"fmt"

	"github.com/luacoll/luacoll/engine/plan"
	"github.com/luacoll/luacoll/transport"
	"github.com/luacoll/luacoll/window"
)

// ExchangeLists are the op lists of luacoll calibrate's switch plans
// (scripts/bench/calibrate.lua): every rank makes steps steps, each an
// 8-byte put_signal from its buffer to the window of rank to(rank), then
// a wait for the one from rank from(rank), and then a flush.
func ExchangeLists(ranks, steps int, to, from func(int) int) []plan.List {
	shape := plan.Shape{Ranks: ranks, Bytes: 16, Signals: 2, Buffers: []uint64{16, 8}}
	lists := make([]plan.List, ranks)
	for me := range lists {
		p, q := to(me), from(me)
		ops := make([]plan.Op, 0, 2*steps+1)
		for k := 1; k <= steps; k++ {
			ops = append(ops,
				plan.Op{Kind: plan.PutSignal, Peer: p, Buf: 1, N: 8, SigValue: 1, SigOp: window.SigAdd},
				plan.Op{Kind: plan.WaitSignalFrom, Peer: q, Cmp: transport.CmpGe, Value: uint64(k)})
		}
		lists[me] = plan.List{Shape: shape, Ops: append(ops, plan.Op{Kind: plan.Flush})}
	}
	return lists
}

// FitSwitch returns the Switch (ns) under which m's host estimate of lists
// (their ranks sharing cpus CPUs) in a loop of replays replays takes
// measured ns a replay (Result.Steady): the cost of a processor's passing
// from one rank to another that the model needs to give the time measured
// (0 when it gives more without one). m is not changed.
func FitSwitch(m *Model, lists []plan.List, cpus, replays int, measured float64) (float64, error) {
	params, ok := m.Modes["host"]["self"]
	if !ok {
		return 0, fmt.Errorf("cost: the model has no host self class")
	}
	mc := *m
	mc.Modes = map[string]map[string]Params{"host": {}}
	for k, p := range m.Modes["host"] {
		mc.Modes["host"][k] = p
	}
	at := func(sw float64) (float64, error) {
		params.Switch = Cost{AlphaNs: sw}
		mc.Modes["host"]["self"] = params
		res, err := Estimate(&mc, Input{Lists: lists, Mode: "host", CPUs: cpus, Replays: replays})
		if err != nil {
			return 0, err
		}
		return res.Steady, nil
	}
	lo, hi := 0.0, measured
	t, err := at(lo)
	if err != nil || t >= measured {
		return 0, err
	}
	for range 60 {
		mid := (lo + hi) / 2
		t, err := at(mid)
		if err != nil {
			return 0, err
		}
		if t < measured {
			lo = mid
		} else {
			hi = mid
		}
	}
	return (lo + hi) / 2, nil
}
