package engine

import (
	"errors"
	"testing"

	"github.com/luacoll/luacoll/window"
)

// A window holds one reservation at a time; its slots are named while it
// lasts, and a release (even twice, even after another took the window)
// frees only what it reserved.
func TestReserveSlots(t *testing.T) {
	c := &Comm{}
	w, other := &window.Window{}, &window.Window{}
	if _, _, ok := c.ReservedSlots(w); ok || c.Reserved(w) {
		t.Fatal("a fresh window has reserved slots")
	}
	r, err := c.ReserveSlots(w, 7, 3)
	if err != nil {
		t.Fatal(err)
	}
	if sig, bar, ok := c.ReservedSlots(w); !ok || sig != 7 || bar != 3 {
		t.Fatalf("reserved slots %d, %d, %v; want 7, 3", sig, bar, ok)
	}
	if _, err := c.ReserveSlots(w, 1, 1); !errors.Is(err, ErrSlotsReserved) {
		t.Fatalf("second reservation: %v, want ErrSlotsReserved", err)
	}
	if _, err := c.ReserveSlots(other, 1, 0); err != nil {
		t.Fatalf("another window: %v", err)
	}
	r.Release()
	if c.Reserved(w) {
		t.Fatal("released, still reserved")
	}
	r2, err := c.ReserveSlots(w, 2, 1)
	if err != nil {
		t.Fatal(err)
	}
	r.Release() // the old one's second release leaves the new one be
	if sig, _, ok := c.ReservedSlots(w); !ok || sig != 2 {
		t.Fatalf("the new reservation is gone (%d, %v)", sig, ok)
	}
	r2.Release()
	if !c.Reserved(other) {
		t.Fatal("releasing w freed the other window's slots")
	}
}
