package main

import (
	"strings"
	"testing"
)

func TestParseMemLimit(t *testing.T) {
	for _, c := range []struct {
		in   string
		want int64
	}{{"0", 0}, {"3.5G", 3584 << 20}, {"512M", 512 << 20}, {"64k", 64 << 10}, {"4096", 4096}} {
		if got, err := parseMemLimit(c.in); err != nil || got != c.want {
			t.Errorf("%q: %d, %v; want %d", c.in, got, err, c.want)
		}
	}
	for _, bad := range []string{"", "G", "-1G", "3x", "NaN", "Inf", "1e30G"} {
		if v, err := parseMemLimit(bad); err == nil || !strings.Contains(err.Error(), "want bytes") {
			t.Errorf("%q: %d, %v; want an error", bad, v, err)
		}
	}
}

// FuzzParseMemLimit: any text is a limit of zero or more bytes, or an
// error saying what is wanted.
func FuzzParseMemLimit(f *testing.F) {
	for _, s := range []string{"3.5G", "0", "1e3M", "-0", "0x10", "9e18"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := parseMemLimit(s)
		if err != nil {
			if !strings.Contains(err.Error(), "want bytes") {
				t.Fatalf("%q: error %v", s, err)
			}
			return
		}
		if v < 0 {
			t.Fatalf("%q: %d bytes", s, v)
		}
	})
}
