package bench

import "testing"

// TestSamplesExactWhileFew: up to maxSamples timings the median is the
// exact one, as a full sort gives.
func TestSamplesExactWhileFew(t *testing.T) {
	var s samples
	for _, v := range []float64{5, 1, 4, 2, 3} {
		s.add(v)
	}
	if m := s.median(); m != 3 {
		t.Fatalf("median of 1..5 = %v, want 3", m)
	}
	var e samples
	if m := e.median(); m != 0 {
		t.Fatalf("median of nothing = %v, want 0", m)
	}
}

// TestSamplesBoundedAndSpread: a run far longer than maxSamples keeps at
// most maxSamples timings, spread over the whole run: the median of a
// run whose timings grow steadily is near the middle one, and a run whose
// second half is slow is not summarised by its first half.
func TestSamplesBoundedAndSpread(t *testing.T) {
	const n = 20*maxSamples + 123
	var s samples
	for i := range n {
		s.add(float64(i))
	}
	if len(s.kept) > maxSamples || cap(s.kept) > 2*maxSamples {
		t.Fatalf("kept %d timings (cap %d), bound %d", len(s.kept), cap(s.kept), maxSamples)
	}
	if len(s.kept) < maxSamples/2 {
		t.Fatalf("kept only %d timings", len(s.kept))
	}
	mid := float64(n) / 2
	if m := s.median(); m < mid*0.98 || m > mid*1.02 {
		t.Fatalf("median %v, want about %v", m, mid)
	}
	if last := s.kept[len(s.kept)-1]; last < float64(n)*0.95 {
		t.Fatalf("the last kept timing is %v of %d: the end of the run is not represented", last, n)
	}
}
