package engine

import (
	"errors"
	"fmt"

	"github.com/luacoll/luacoll/window"
)

// ErrSlotsReserved is ReserveSlots on a window whose slots are reserved
// already.
var ErrSlotsReserved = errors.New("the window's slots are reserved already")

// Reservation is a claim on one signal slot and one barrier slot of a
// window, made by ReserveSlots: while it lasts, ReservedSlots names them,
// and the Lua API refuses a script's own signals, waits, barriers and
// inbox resets there. A window holds at most one reservation.
type Reservation struct {
	c        *Comm
	w        *window.Window
	sig, bar int
}

// ReserveSlots claims signal slot sig and barrier slot bar of w for code
// that drives them itself (their values are its protocol's); it fails with
// ErrSlotsReserved when w holds a reservation already. Not collective.
func (c *Comm) ReserveSlots(w *window.Window, sig, bar int) (*Reservation, error) {
	c.resMu.Lock()
	defer c.resMu.Unlock()
	if c.reserved[w] != nil {
		return nil, fmt.Errorf("window %d: %w", w.ID(), ErrSlotsReserved)
	}
	if c.reserved == nil {
		c.reserved = map[*window.Window]*Reservation{}
	}
	r := &Reservation{c: c, w: w, sig: sig, bar: bar}
	c.reserved[w] = r
	return r, nil
}

// Reserved reports whether w's slots are reserved (ReserveSlots would
// fail).
func (c *Comm) Reserved(w *window.Window) bool {
	_, _, ok := c.ReservedSlots(w)
	return ok
}

// ReservedSlots says which of w's slots are reserved (its signal slot and
// its barrier slot), if any: the script's own signals, waits and barriers
// there would corrupt what their owner writes.
func (c *Comm) ReservedSlots(w *window.Window) (sig, bar int, ok bool) {
	c.resMu.Lock()
	defer c.resMu.Unlock()
	r := c.reserved[w]
	if r == nil {
		return 0, 0, false
	}
	return r.sig, r.bar, true
}

// Release ends the reservation (a second call does nothing).
func (r *Reservation) Release() {
	r.c.resMu.Lock()
	defer r.c.resMu.Unlock()
	if r.c.reserved[r.w] == r {
		delete(r.c.reserved, r.w)
	}
}
