package cost

import (
	"math"
	"strings"
	"testing"
)

func TestFitRecoversLine(t *testing.T) {
	sizes := []uint64{1 << 10, 1 << 14, 1 << 18, 1 << 22}
	times := make([]float64, len(sizes))
	for i, n := range sizes {
		times[i] = (2000 + 0.25*float64(n)) * 1e-9
	}
	c, err := Fit(sizes, times)
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(c.AlphaNs-2000) > 1e-6*2000 || math.Abs(c.BetaNs-0.25) > 1e-9 {
		t.Fatalf("fit %+v, want alpha 2000 ns, beta 0.25 ns/B", c)
	}
	for _, n := range []uint64{100, 1 << 10, 5000, 1 << 20, 1 << 24} {
		a, l := c.Of(n)
		if want := 2000 + 0.25*float64(n); math.Abs(a+l-want) > 1e-6*want || a != 2000 {
			t.Errorf("%d bytes: %v + %v ns, want %v (start 2000)", n, a, l, want)
		}
	}
	for _, bad := range []struct {
		sizes []uint64
		times []float64
		want  string
	}{
		{[]uint64{1}, []float64{1}, "two or more"},
		{[]uint64{1, 2}, []float64{1, 0}, "time 0 at 2 bytes"},
		{[]uint64{4, 4}, []float64{1, 2}, "sizes must increase"},
	} {
		if _, err := Fit(bad.sizes, bad.times); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("Fit(%v, %v): %v, want %q", bad.sizes, bad.times, err, bad.want)
		}
	}
}

// Measured times that are not a line (a copy that leaves the cache) are
// interpolated between, and the start cost stays within the first time.
func TestCostInterpolates(t *testing.T) {
	c, err := Fit([]uint64{1000, 2000, 4000}, []float64{0.5e-6, 0.6e-6, 2.6e-6})
	if err != nil {
		t.Fatal(err)
	}
	if c.AlphaNs != 400 || c.BetaNs != 1 {
		t.Fatalf("fit %+v: want alpha 400, beta 1", c)
	}
	for n, want := range map[uint64]float64{500: 450, 1500: 550, 3000: 1600, 5000: 3600} {
		a, l := c.Of(n)
		if math.Abs(a+l-want) > 1e-9 || a != 400 {
			t.Errorf("%d bytes: %v + %v, want %v", n, a, l, want)
		}
	}
}

func TestMergeAddsClasses(t *testing.T) {
	a := &Model{Machine: "m", Backend: "host", Modes: map[string]map[string]Params{"host": {"shm": {Put: Cost{AlphaNs: 1, BetaNs: 1}}}}}
	b := &Model{Machine: "m", Backend: "host", Made: "later", Modes: map[string]map[string]Params{"host": {"net": {Put: Cost{AlphaNs: 9, BetaNs: 9}}}}}
	m, err := Merge(a, b)
	if err != nil {
		t.Fatal(err)
	}
	if m.Modes["host"]["shm"].Put.AlphaNs != 1 || m.Modes["host"]["net"].Put.AlphaNs != 9 || m.Made != "later" {
		t.Fatalf("merged %+v", m)
	}
	if len(a.Modes["host"]) != 1 {
		t.Fatal("Merge changed its input")
	}
	if _, err := Merge(a, &Model{Backend: "cuda", Modes: b.Modes}); err == nil || !strings.Contains(err.Error(), "cuda backend") {
		t.Fatalf("merging backends: %v", err)
	}
}

// A class measured again with a CPU per rank keeps the switch cost that
// was measured apart, with more ranks than CPUs; a new switch replaces it.
func TestMergeKeepsSwitch(t *testing.T) {
	a := &Model{Machine: "m", Backend: "host", Modes: map[string]map[string]Params{"host": {"self": {Put: Cost{AlphaNs: 1}, Switch: Cost{AlphaNs: 3000}}}}}
	b := &Model{Machine: "m", Backend: "host", Modes: map[string]map[string]Params{"host": {"self": {Put: Cost{AlphaNs: 2}}}}}
	m, err := Merge(a, b)
	if err != nil {
		t.Fatal(err)
	}
	if p := m.Modes["host"]["self"]; p.Put.AlphaNs != 2 || p.Switch.AlphaNs != 3000 {
		t.Fatalf("merged self %+v: want the new put and the old switch", p)
	}
	b.Modes["host"]["self"] = Params{Put: Cost{AlphaNs: 2}, Switch: Cost{AlphaNs: 2500}}
	if m, err = Merge(a, b); err != nil || m.Modes["host"]["self"].Switch.AlphaNs != 2500 {
		t.Fatalf("merged %+v, %v: want the new switch", m, err)
	}
}

// A merged model names each machine once, and its note describes each
// class once: the new run's part replaces the old one's for a class
// measured again.
func TestMergeNoteAndMachine(t *testing.T) {
	a := &Model{Machine: "vm A; vm B", Backend: "cuda", Note: "nvl, 2 ranks: stream: hop 0.80 us. net, 2 ranks: stream: hop 7.31 us.",
		Command: "luacoll calibrate -n 2 -o m.json", Modes: map[string]map[string]Params{"stream": {"nvl": {}, "net": {}}}}
	b := &Model{Machine: "vm B", Backend: "cuda", Note: "net, 2 ranks: stream: hop 6.98 us.",
		Command: "luacoll calibrate -n 2 --nodes 2 -o m.json", Modes: map[string]map[string]Params{"stream": {"net": {}}}}
	m, err := Merge(a, b)
	if err != nil {
		t.Fatal(err)
	}
	if m.Machine != "vm A; vm B" {
		t.Errorf("machine %q", m.Machine)
	}
	// Every run's command stays beside the notes its classes carry.
	if want := "luacoll calibrate -n 2 -o m.json; luacoll calibrate -n 2 --nodes 2 -o m.json"; m.Command != want {
		t.Errorf("command %q, want %q", m.Command, want)
	}
	if want := "nvl, 2 ranks: stream: hop 0.80 us. net, 2 ranks: stream: hop 6.98 us."; m.Note != want {
		t.Errorf("note %q, want %q", m.Note, want)
	}
	c := &Model{Machine: "vm C", Backend: "cuda", Note: "switch, 4 ranks on 2 CPUs: 2.52 us (the ring plan's steps: 3.10 us).",
		Modes: map[string]map[string]Params{"stream": {"self": {}}}}
	if m, err = Merge(m, c); err != nil {
		t.Fatal(err)
	}
	if m.Machine != "vm A; vm B; vm C" || !strings.HasSuffix(m.Note, "6.98 us. switch, 4 ranks on 2 CPUs: 2.52 us (the ring plan's steps: 3.10 us).") {
		t.Errorf("machine %q, note %q", m.Machine, m.Note)
	}
	// A note of another form is kept whole.
	if got := mergeNotes("made by hand", "nvl, 2 ranks: x."); got != "made by hand nvl, 2 ranks: x." {
		t.Errorf("note %q", got)
	}
}
