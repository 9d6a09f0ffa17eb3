//go:build !race

package simrank

import "testing"

// TestRingClosedForm1024 is the 1,024-rank ring: recorded, verified and
// estimated (tens of seconds; not under -short, nor the race detector).
func TestRingClosedForm1024(t *testing.T) {
	if testing.Short() {
		t.Skip("1,024 simulated ranks take tens of seconds")
	}
	ringClosedForm(t, 1024, 1<<20)
}
