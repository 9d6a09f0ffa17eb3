package main

import (
	"strconv"
	"strings"
	"testing"
)

// bench/estimate.lua puts p:estimate beside the measured replay for every
// shipped all-gather schedule on the host backend: each schedule and size
// gets a measured and a predicted time, both positive, and their ratio.
// How near the ratio is to 1 depends on the machine's load, so it is
// recorded in docs/results/cost-model.md, not asserted.
func TestEstimateBesideMeasured(t *testing.T) {
	r := luacoll(t, nil, "run", "-n", "2", "bench/estimate.lua", "-", "1024,65536", "3")
	if r.code != 0 {
		t.Fatalf("exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	seen := map[string]bool{}
	for _, line := range strings.Split(r.stdout, "\n") {
		f := strings.Fields(strings.TrimPrefix(line, "[0]"))
		if len(f) != 6 || (f[0] != "ring" && f[0] != "direct" && f[0] != "hier") {
			continue
		}
		var v [4]float64
		for i := range v {
			x, err := strconv.ParseFloat(strings.TrimSuffix(f[i+2], "%"), 64)
			if err != nil || x < 0 {
				t.Fatalf("%q: field %d (%s) is not a number >= 0", line, i+3, f[i+2])
			}
			v[i] = x
		}
		if !(v[0] > 0) || !(v[1] > 0) {
			t.Errorf("%q: measured %v us, predicted %v us: want both positive", line, v[0], v[1])
		}
		// The fields are printed to 0.01: the ratio of the rounded times
		// is off by up to that much of each, besides the ratio's own.
		ratio := v[1] / v[0]
		if tol := 0.0051 + ratio*(0.0051/v[0]+0.0051/v[1]); ratio-v[2] > tol || v[2]-ratio > tol {
			t.Errorf("%q: the ratio %v is not predicted / measured (%.4f, within %.4f)", line, v[2], ratio, tol)
		}
		seen[f[0]+" "+f[1]] = true
		t.Logf("%s", strings.TrimSpace(line))
	}
	for _, algo := range []string{"ring", "direct", "hier"} {
		for _, n := range []string{"1024", "65536"} {
			if !seen[algo+" "+n] {
				t.Errorf("no line for %s at %s bytes a rank\n%s", algo, n, r.stdout)
			}
		}
	}
}
