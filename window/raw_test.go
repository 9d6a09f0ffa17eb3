package window

import (
	"context"
	"encoding/binary"
	"fmt"
	"testing"
)

// Raw's addresses are the slots and bytes the window's own operations
// use: a store through Raw.Signal is what ReadSignalFrom reads at the
// peer, a put lands at Raw.LocalData, a barrier's epoch is in
// Raw.LocalBarrier and counted by BarrierEpoch.
func TestRawAddresses(t *testing.T) {
	job(t, 2, func(r *Rank) error {
		ctx := context.Background()
		w, err := r.NewWindow(ctx, opts(64))
		if err != nil {
			return err
		}
		me, peer := r.ID(), 1-r.ID()
		raw := w.Raw()
		if raw.Bell(me) == 0 || raw.Bell(peer) == 0 || raw.Data(peer, 0) == 0 || raw.Flat() != nil {
			return fmt.Errorf("host window: bells %#x %#x, peer data %#x, flat %v", raw.Bell(me), raw.Bell(peer), raw.Data(peer, 0), raw.Flat())
		}
		// A store to the peer's slot 3 through Raw.
		r.Stream.Store64(raw.Signal(peer, me, 3), uint64(40+me))
		src, err := r.NewBuffer(8)
		if err != nil {
			return err
		}
		defer src.Free()
		if err := src.Write(0, []byte{byte(me + 1), 2, 3, 4, 5, 6, 7, 8}); err != nil {
			return err
		}
		if err := w.Put(Transfer{Peer: peer, PeerOff: 16, Local: src, N: 8}); err != nil {
			return err
		}
		for range 2 {
			if err := w.Barrier(1); err != nil {
				return err
			}
		}
		if err := w.Sync(ctx); err != nil {
			return err
		}
		if v, err := w.ReadSignalFrom(peer, 3); err != nil || v != uint64(40+peer) {
			return fmt.Errorf("slot 3 from rank %d: %d (%v), want %d", peer, v, err, 40+peer)
		}
		if e := raw.BarrierEpoch(1); e != 2 || e.Use(1) != 3 {
			return fmt.Errorf("barrier 1's epoch %d (next use %d), want 2 (3)", e, e.Use(1))
		}
		// Copy what arrived (the put, the peer's barrier row) out through
		// Raw's local addresses.
		got, err := r.NewBuffer(16)
		if err != nil {
			return err
		}
		defer got.Free()
		at, _ := got.Addr()
		r.Stream.Copy(at, raw.LocalData(16), 8)
		r.Stream.Copy(at.Add(8), raw.LocalBarrier(peer, 1), 8)
		if err := w.Sync(ctx); err != nil {
			return err
		}
		b, err := got.Read(0, 16)
		if err != nil {
			return err
		}
		if b[0] != byte(peer+1) || b[7] != 8 {
			return fmt.Errorf("put from rank %d reads %v at Raw.LocalData(16)", peer, b[:8])
		}
		if v := binary.LittleEndian.Uint64(b[8:]); v != 2 {
			return fmt.Errorf("rank %d's row of barrier 1 holds %d, want epoch 2", peer, v)
		}
		// AdvanceBarrier counts uses without enqueueing any.
		if before := raw.AdvanceBarrier(1, 3); before != 2 || raw.BarrierEpoch(1) != 5 {
			return fmt.Errorf("AdvanceBarrier: before %d, after %d; want 2, 5", before, raw.BarrierEpoch(1))
		}
		if before := raw.AdvancePairBarrier(peer, 0, 1); before != 0 || raw.PairBarrierEpoch(peer, 0) != 1 {
			return fmt.Errorf("AdvancePairBarrier: before %d, after %d; want 0, 1", before, raw.PairBarrierEpoch(peer, 0))
		}
		return w.Free(ctx)
	})
}
