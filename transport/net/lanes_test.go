package net

import (
	"strings"
	"testing"
)

// A bad LUACOLL_NET_LANES or LUACOLL_NET_STRIPE_MIN is an error naming
// the variable, not ignored or clamped.
func TestLaneKnobsAreChecked(t *testing.T) {
	for _, bad := range []string{"abc", "-1", "1000", "9", "2.5"} {
		if _, err := laneCount(bad); err == nil || !strings.Contains(err.Error(), LanesEnv+"="+bad) {
			t.Errorf("lanes %q: %v", bad, err)
		}
	}
	for in, want := range map[string]int{"0": 0, "3": 3, "8": 8} {
		if n, err := laneCount(in); err != nil || n != want {
			t.Errorf("lanes %q: %d, %v; want %d", in, n, err, want)
		}
	}
	if n, err := laneCount(""); err != nil || n < 0 || n > 4 {
		t.Errorf("default lanes: %d, %v", n, err)
	}
	for _, bad := range []string{"abc", "-5", "1.5"} {
		if _, err := stripeFrom(bad); err == nil || !strings.Contains(err.Error(), StripeMinEnv+"="+bad) {
			t.Errorf("stripe %q: %v", bad, err)
		}
	}
	if v, err := stripeFrom("100"); err != nil || v != 4096 {
		t.Errorf("stripe 100: %d, %v", v, err)
	}
	if v, err := stripeFrom(""); err != nil || v != stripeMin {
		t.Errorf("stripe default: %d, %v", v, err)
	}
}
