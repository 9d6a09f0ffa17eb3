package allgather

import (
	"context"
	"fmt"

	"github.com/luacoll/luacoll/transport"
	"github.com/luacoll/luacoll/transport/knobs"
	"github.com/luacoll/luacoll/window"
)

// The staged protocol of the all-gather on window operations: small
// direct execs with no guard, as the host protocol's eager execs
// (host.go) but through the window API, so that network peers take
// part.
//
// A private window holds a staging area of two parities x N senders x
// stageMax bytes and signal slots 0 and 1 (by exec parity). In exec k each
// rank put_signals its chunk into every peer's staging area of parity
// k mod 2, row sender, setting the peer's slot k mod 2 to tag(k, n); it
// then waits for every peer's tag and copies each chunk out into its
// window itself. Nobody writes into another rank's window. A rank cannot
// reach exec k+2 (parity k mod 2 again) before it has seen every peer's
// exec k+1 tag, which that peer sent after it finished exec k: no
// handshake is needed before the data moves.
//
// With a staging window, the execs that are not staged (larger ones,
// ring and hier) take their guard on the same slots instead of the
// window's barrier: each rank sets every peer's slot k mod 2 to tag(k, n)
// and waits for every peer's tag(k, n) in its own. So ranks that pass
// different n fail at once whichever protocol each picked (each sees a
// tag of exec k with another n), and a rank that refuses exec k (it does
// not know n) sets the slots to its refused tag, which ends either wait
// at once; no slot of the window is written out of turn and the barrier
// is used alike by every rank (at the tag's wrap only).

// agNetEagerMax is the largest n per rank that is staged
// (knobs.AGPNetEagerMax overrides it; 0: never staged): on 2 logical
// nodes of 1 and of 2 GPUs, staging up to 64 KiB a rank saved the guard's
// round trip and took less time than the guarded execs at 16-64 KiB a
// rank (docs/results/allgather-auto.md, "Two GPUs a node").
const agNetEagerMax = 64 << 10

// openStage (collective) makes the staging window, where direct execs
// can run on window operations.
func (ag *Persistent) openStage(ctx context.Context, call string) error {
	c := ag.c
	n := uint64(ag.size)
	eager := ag.eagerLimit(knobs.AGPNetEagerMax, agNetEagerMax)
	if eager == 0 || n < 2 {
		return nil
	}
	sw, err := c.NewWindow(ctx, call+":stage", window.Options{Bytes: 2 * n * eager, Signals: stageSlots, Counters: 1,
		Barriers: 1, Timeout: ag.w.Options().Timeout})
	if err != nil {
		return fmt.Errorf("rank %d: %s: %w", ag.me, call, err)
	}
	ag.stage, ag.stageMax = sw, eager
	// Every wait's slot, listed once (queued waits share them).
	me := ag.me
	for par := range ag.stageIn {
		ag.stageIn[par] = make([][]transport.Addr, n)
		for p := range ag.stageIn[par] {
			ag.stageIn[par][p] = []transport.Addr{sw.Raw().LocalSignal(p, par)}
		}
	}
	ag.stageBell, ag.stageDescribe = sw.Raw().Bell(me), ag.describeHostWait
	if ag.stageHier {
		ag.stageFwd = make([]func(want, obs uint64) bool, n)
		for _, p := range ag.layout.groups[ag.layout.mine] {
			ag.stageFwd[p] = ag.fwdMismatch(p)
		}
	}
	return nil
}

// staged reports whether an exec of n bytes per rank runs staged.
func (ag *Persistent) staged(n uint64) bool {
	if ag.stage == nil || n > ag.stageMax || (ag.k+1)&tagKMask == 0 {
		return false // the tag's wrap goes through nextExec's barriers
	}
	return ag.run == "direct" || n <= ag.directUpTo || ag.stageHier
}

// stageRow is the offset of sender's chunk in a staging area of parity par.
func (ag *Persistent) stageRow(par, sender int) uint64 {
	return (uint64(par*ag.size) + uint64(sender)) * ag.stageMax
}

// execStaged enqueues one staged exec.
func (ag *Persistent) execStaged(src *window.Buffer, srcOff, n uint64, inPlace bool) error {
	w, sw := ag.w, ag.stage
	me, size := ag.me, ag.size
	ag.k++
	k, tag, par := ag.k, agTag(ag.k, n), int(ag.k&1)
	own := uint64(me) * n
	if inPlace {
		src, srcOff = w.Buffer(), own
	}
	if ag.stageHier {
		return ag.execStagedHier(src, srcOff, n, inPlace)
	}
	for i := 1; i < size; i++ {
		p := (me + i) % size
		t := window.Transfer{Peer: p, PeerOff: ag.stageRow(par, me), Local: src, LocalOff: srcOff, N: n}
		if err := sw.PutSignal(t, &window.Sig{ID: par, Value: tag, Op: window.SigSet}, nil); err != nil {
			return ag.errf("exec #%d: put to rank %d: %w", k, p, err)
		}
	}
	if !inPlace && n > 0 {
		if err := w.Put(window.Transfer{Peer: me, PeerOff: own, Local: src, LocalOff: srcOff, N: n}); err != nil {
			return ag.errf("exec #%d: own chunk: %w", k, err)
		}
	}
	for i := 1; i < size; i++ {
		p := (me - i + size) % size
		ag.stageWait(p, par, k, n, tag)
		if n > 0 {
			t := window.Transfer{Peer: me, PeerOff: uint64(p) * n, Local: sw.Buffer(), LocalOff: ag.stageRow(par, p), N: n}
			if err := w.Put(t); err != nil {
				return ag.errf("exec #%d: rank %d's chunk into place: %w", k, p, err)
			}
		}
	}
	return nil
}

// stageWait enqueues the wait for peer p's tag in this rank's slot par
// (par+2: the chunks p forwards, execStagedHier).
func (ag *Persistent) stageWait(p, par int, k, n, tag uint64) {
	note, mismatch := transport.WaitNote{A: uint64(p), B: k, C: n}, agMismatch
	if par >= 2 {
		note.Op, mismatch = noteForwarded, ag.stageFwd[p]
	}
	ag.stage.Rank().Stream.Wait(transport.WaitSpec{Slots: ag.stageIn[par][p], Mode: transport.WaitSum,
		Cmp: transport.CmpEq, Value: tag, Timeout: ag.w.Options().Timeout, Mismatch: mismatch, Bell: ag.stageBell,
		Describe: ag.stageDescribe, Note: note})
}

// stageGuard is the guard of exec k (n bytes per rank) when it is not
// staged but a staging window exists: this rank's tag(k, n) to every
// peer's slot k mod 2, then a wait for every peer's in its own.
func (ag *Persistent) stageGuard(k, n uint64) error {
	me, size := ag.me, ag.size
	tag, par := agTag(k, n), int(k&1)
	for i := 1; i < size; i++ {
		p := (me + i) % size
		if err := ag.stage.Signal(p, window.Sig{ID: par, Value: tag, Op: window.SigSet}); err != nil {
			return ag.errf("exec #%d: guard: %w", k, err)
		}
	}
	if err := ag.signalForwards(par, tag); err != nil {
		return ag.errf("exec #%d: guard: %w", k, err)
	}
	for i := 1; i < size; i++ {
		ag.stageWait((me-i+size)%size, par, k, n, tag)
	}
	return nil
}

// signalForwards sets this rank's slot par+2 in its node's ranks to tag
// where execs are staged in two levels (nothing otherwise): a refusal
// ends their waits for this rank's forwards, and a guard keeps the slot
// within two execs of the count, as the slots par are, so that no tag
// left there one wrap of the exec field ago looks like a later exec's.
func (ag *Persistent) signalForwards(par int, tag uint64) error {
	if !ag.stageHier {
		return nil
	}
	l := ag.layout
	for _, p := range l.groups[l.mine] {
		if p == ag.me {
			continue
		}
		if err := ag.stage.Signal(p, window.Sig{ID: 2 + par, Value: tag, Op: window.SigSet}); err != nil {
			return err
		}
	}
	return nil
}

// refuseStaged is RefuseExec with a staging window: the refused tag in
// every peer's slot k mod 2, where every protocol waits first.
func (ag *Persistent) refuseStaged() error {
	me, size := ag.me, ag.size
	ag.k++
	tag, par := agTag(ag.k, agRefusedN), int(ag.k&1)
	for i := 1; i < size; i++ {
		if err := ag.stage.Signal((me+i)%size, window.Sig{ID: par, Value: tag, Op: window.SigSet}); err != nil {
			return ag.errf("refused exec #%d: %w", ag.k, err)
		}
	}
	// The node's ranks wait for this rank's forwarded chunks too.
	if err := ag.signalForwards(par, tag); err != nil {
		return ag.errf("refused exec #%d: %w", ag.k, err)
	}
	return nil
}
