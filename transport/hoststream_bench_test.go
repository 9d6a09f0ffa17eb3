package transport

import (
	"context"
	"testing"
	"time"
)

// BenchmarkHostStreamInline is the cost of a store and a wait that holds
// at once, both run on the caller (no peer: the software's own share of a
// signal round).
func BenchmarkHostStreamInline(b *testing.B) {
	words := hostWords(b, 512)
	s := NewHostStream(NewAbort(), PolicyDedicated)
	defer s.Close()
	slot, bell := words[0], words[128]
	slots := []Addr{slot}
	fail := func(uint64, error) error { return nil }
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		s.Store64Ring(slot, uint64(i+1), bell)
		s.Wait(WaitSpec{Slots: slots, Cmp: CmpGe, Value: uint64(i + 1), Timeout: time.Second, Bell: bell, Fail: fail})
	}
	if err := s.Sync(context.Background()); err != nil {
		b.Fatal(err)
	}
}
