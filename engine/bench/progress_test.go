package bench

import (
	"strings"
	"testing"
)

func TestProgressBar(t *testing.T) {
	var b strings.Builder
	p := newProgressBar(&b, 6)
	p.show(2, "measuring 4096 bytes")
	if got := b.String(); !strings.HasPrefix(got, "\r\033[K[########................] 2/6 sizes, ") || !strings.HasSuffix(got, " s, measuring 4096 bytes") {
		t.Errorf("bar %q", got)
	}
	b.Reset()
	p.show(6, "done")
	p.clear()
	if got := b.String(); !strings.Contains(got, "[########################] 6/6") || !strings.HasSuffix(got, "\r\033[K") {
		t.Errorf("full bar then clear: %q", got)
	}
	var nobar *progressBar
	nobar.show(1, "x") // no writer: draws nothing, no panic
	newProgressBar(nil, 3).show(1, "x")
	nobar.clear()
}
