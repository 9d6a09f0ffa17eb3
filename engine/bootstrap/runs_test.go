package bootstrap

import (
	"bytes"
	"testing"
)

// Values go as runs of equal neighbours and come back in order; a run's
// values share their bytes.
func TestRunsRoundTrip(t *testing.T) {
	for _, vals := range [][][]byte{
		{},
		{nil},
		{[]byte("a"), []byte("a"), []byte("a")},
		{[]byte("a"), nil, []byte(""), []byte("b"), []byte("b"), []byte("a")},
	} {
		f := newFrame(frResult, 0)
		f.runs(vals)
		r := frameReader{b: f.b[5:]}
		got := r.runs(len(vals))
		if r.err != nil || len(got) != len(vals) || len(r.b) != 0 {
			t.Fatalf("%q: %q, %v", vals, got, r.err)
		}
		for i := range vals {
			if !bytes.Equal(got[i], vals[i]) {
				t.Fatalf("%q: value %d is %q", vals, i, got[i])
			}
		}
	}
	f := newFrame(frResult, 0)
	f.runs([][]byte{[]byte("xy"), []byte("xy"), []byte("z")})
	if want := 5 + 4 + (4 + 4 + 2) + (4 + 4 + 1); len(f.b) != want {
		t.Errorf("3 values in 2 runs: %d bytes, want %d", len(f.b), want)
	}
	// Too many or too few values for n, a run of 0: errors.
	for _, n := range []int{2, 4} {
		r := frameReader{b: f.b[5:]}
		if r.runs(n); r.err == nil {
			t.Errorf("3 values read as %d", n)
		}
	}
	zero := newFrame(frResult, 0)
	zero.u32(1)
	zero.u32(0)
	zero.bytes([]byte("a"))
	if r := (frameReader{b: zero.b[5:]}); r.runs(1) != nil || r.err == nil {
		t.Error("a run of 0 values was accepted")
	}
}

// FuzzRuns: reading runs from any bytes never panics, and what it reads
// is n values.
func FuzzRuns(f *testing.F) {
	g := newFrame(frResult, 0)
	g.runs([][]byte{[]byte("a"), []byte("a"), []byte("b")})
	f.Add(g.b[5:], 3)
	f.Fuzz(func(t *testing.T, b []byte, n int) {
		if n < 0 || n > 1<<16 {
			return
		}
		r := frameReader{b: b}
		out := r.runs(n)
		if r.err == nil && len(out) != n {
			t.Fatalf("%d values for %d", len(out), n)
		}
	})
}
