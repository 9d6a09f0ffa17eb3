package plan

import (
	"strings"
	"testing"
)

// TestParseOpRoundTrip: every op of the sample list reads back from its
// text.
func TestParseOpRoundTrip(t *testing.T) {
	for i, o := range append(sampleList().Ops, reduceList().Ops...) {
		got, err := ParseOp(o.String())
		if o.Site.File == "" {
			o.Site = Site{} // "@?" keeps no line
		}
		if err != nil || got != o {
			t.Errorf("op %d %q: %+v, %v", i, o, got, err)
		}
	}
	if o, err := ParseOp("barrier id=1 @f.lua:x"); err != nil || o.Site != (Site{File: "f.lua:x"}) || o.Bar != 1 {
		t.Errorf("a site with a colon and no line: %+v, %v", o, err)
	}
	for _, bad := range []string{"", "jump", "put peer", "put peer=x", "put src=q", "put bogus=1", "signal sigop=mul", "fill kind=zero",
		"reduce type=f8", "reduce_from redop=xor", "reduce src=q"} {
		if _, err := ParseOp(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

// FuzzParseOp: no text makes ParseOp panic, and an op it accepts reads
// back the same from its own String.
func FuzzParseOp(f *testing.F) {
	for _, o := range append(sampleList().Ops, reduceList().Ops...) {
		f.Add(o.String())
	}
	f.Add("wait_signal sig=0 cmp=>= value=2 @ag.lua:5")
	f.Fuzz(func(t *testing.T, s string) {
		o, err := ParseOp(s)
		if err != nil {
			return
		}
		if o.Site.File == "" || strings.ContainsAny(o.Site.File, " \t\n\v\f\r\u0085\u00a0:") {
			return // "@?" and sites with spaces or colons do not round-trip
		}
		if o.Site.Line <= 0 {
			o.Site.Line = 0
		}
		again, err := ParseOp(o.String())
		if err != nil {
			t.Fatalf("%q -> %q: %v", s, o.String(), err)
		}
		if again.Site.Line <= 0 {
			again.Site.Line = 0
		}
		if again.String() != o.String() {
			t.Fatalf("%q -> %q -> %q", s, o.String(), again.String())
		}
	})
}
