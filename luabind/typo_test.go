package luabind

import "testing"

func TestClosest(t *testing.T) {
	names := []string{"put", "put_signal", "wait_signal", "window", "rank", "size", "fill", "run"}
	for _, c := range []struct{ in, want string }{
		{"put_sgnal", "put_signal"},
		{"put_signl", "put_signal"},
		{"windw", "window"},
		{"widnow", "window"}, // neighbours swapped: one edit
		{"rnk", "rank"},
		{"fil", "fill"},
		{"rn", "run"},
		{"nosuch", ""},
		{"x", ""},
		{"wait_signals_from_everyone", ""},
	} {
		if got := closest(c.in, append([]string(nil), names...)); got != c.want {
			t.Errorf("closest(%q) = %q, want %q", c.in, got, c.want)
		}
	}
	if d := editDistance("kitten", "sitting"); d != 3 {
		t.Errorf("editDistance(kitten, sitting) = %d, want 3", d)
	}
}
