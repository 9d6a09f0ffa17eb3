package main

import (
	"regexp"
	"strings"
	"testing"
)

// checkOps records the shipped all-gather schedules and, on rank 0, prints
// every op of its list: what real and simulated ranks must agree on.
const checkOps = `
local lc = require("luacoll")
local ag = require("allgather")
local n = 96
local w = lc.window{ bytes = n * lc.size, signals = 1, counters = 1, barriers = 1 }
local src = lc.buffer(n)
for _, algo in ipairs{ "ring", "direct", "hier" } do
  local p = lc.plan(ag[algo], w, src, 0, n)
  local rep = p:verify{ collective = "allgather", n = n, src = src }
  if lc.rank == 0 then
    assert(rep.ok, rep.summary)
    for i, o in ipairs(p:ops()) do
      print(algo, i, o.op, o.peer, o.off, o.n, o.src, o.src_off, o.value, o.line)
    end
  end
  p:run{ times = 3 }
  p:free()
end
`

// rank0Lines are rank 0's output lines of a check run, without the
// estimates (which only simulated ranks print) and with "made and
// verified" (simulated ranks verify a plan once when p:verify follows) as
// "verified".
func rank0Lines(out string) []string {
	var keep []string
	made := regexp.MustCompile(`check: plan (\d+) \(([^)]*)\), made: .*`)
	for _, l := range strings.Split(out, "\n") {
		switch {
		case !strings.HasPrefix(l, "[0] "), strings.Contains(l, ": estimate "), strings.HasPrefix(l, "[0]   ranks end"), made.MatchString(l):
			continue
		}
		keep = append(keep, strings.Replace(l, "made and verified as", "verified as", 1))
	}
	return keep
}

// Simulated ranks record the same op lists as real ones and the verifier
// says the same of them: check -n 4 on real ranks of this process against
// check -n 4 --simulate, rank 0's ops and reports line by line; then 64
// simulated ranks in 8 nodes, every plan verified with the ops the
// schedules make there.
func TestCheckSimulatedMatchesReal(t *testing.T) {
	script := writeScript(t, checkOps)
	real := luacoll(t, nil, "check", "-n", "4", script)
	sim := luacoll(t, nil, "check", "-n", "4", "--simulate", script)
	if real.code != 0 || sim.code != 0 {
		t.Fatalf("real: exit %d\n%s\n%s\nsimulated: exit %d\n%s\n%s", real.code, real.stdout, real.stderr, sim.code, sim.stdout, sim.stderr)
	}
	a, b := rank0Lines(real.stdout), rank0Lines(sim.stdout)
	if len(a) < 20 || strings.Join(a, "\n") != strings.Join(b, "\n") {
		t.Fatalf("real and simulated ranks differ:\nreal:\n%s\nsimulated:\n%s", strings.Join(a, "\n"), strings.Join(b, "\n"))
	}
	if !strings.Contains(sim.stdout, "3 plans verified at 4 simulated ranks (layout 1x4), no problems") ||
		strings.Count(sim.stdout, ": estimate ") != 3 {
		t.Fatalf("simulated summary:\n%s", sim.stdout)
	}
	r := luacoll(t, nil, "check", "-n", "64", "--layout", "8x8", script)
	// ring: barrier, own put, 63 put_signals and waits, flush; direct: 63
	// put_signals and one wait; hier (8 nodes of 8): 7 pieces out, 7 local
	// puts, 7 waits each forwarded to 7, 7 local waits.
	for _, want := range []string{
		"plan 1 (" + script + ":8), made and verified as allgather: ok: 64 ranks, ops 129, ",
		"plan 2 (" + script + ":8), made and verified as allgather: ok: 64 ranks, ops 67, ",
		"plan 3 (" + script + ":8), made and verified as allgather: ok: 64 ranks, ops 80, ",
		"3 plans verified at 64 simulated ranks (layout 8x8), no problems",
		"shm within a node, net between",
	} {
		if r.code != 0 || !strings.Contains(r.stdout, want) {
			t.Fatalf("64 ranks: want %q; exit %d\n%s\n%s", want, r.code, r.stdout, r.stderr)
		}
	}
}

// Bad flags of simulated ranks are usage errors naming the flag.
func TestCheckSimulatedUsage(t *testing.T) {
	script := writeScript(t, checkOps)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-n", "8", "--layout", "3x3", script}, "--layout 3x3 places 9 ranks, -n says 8"},
		{[]string{"-n", "8", "--layout", "8by1", script}, `--layout "8by1": want NODESxRANKS`},
		{[]string{"-n", "9000", "--simulate", script}, "want 1..8192 simulated ranks"},
		{[]string{"-n", "0", "--simulate", script}, "-n 0: want 1..8192 simulated ranks"},
		{[]string{"--simulate", "--layout", "4x2", script}, "--simulate and --layout 4x2: give one"},
		{[]string{"-n", "4", "--simulate", "--model", "nope.json", script}, "--model open nope.json"},
		{[]string{"-n", "4", "--simulate", "--mode", "graph", script}, `--mode "graph": the model has [host]`},
		{[]string{"-n", "4", "--simulate", "--ahead", "3", script}, "--ahead 3: want 0, 1 or 2"},
		{[]string{"-n", "4", "--simulate", "--memory-limit", "lots", script}, `--memory-limit "lots": want bytes`},
		{[]string{"-n", "4", "--cpuprofile", "x.prof", script}, "--cpuprofile is for simulated ranks"},
		{[]string{"-n", "4", "--simulate", "--budget", "-1", script}, "--budget -1: want 0 (the default) or a positive count"},
	} {
		r := luacoll(t, nil, append([]string{"check"}, c.args...)...)
		if r.code != 2 || !strings.Contains(r.stderr, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want 2 and %q", c.args, r.code, r.stderr, c.want)
		}
	}
	// A bound too small for the plan: the verification stops, claims
	// nothing, and says how to raise the bound; the default verifies it.
	r := luacoll(t, nil, "check", "-n", "8", "--layout", "2x4", "--budget", "100", "bench/ag-sim.lua", "ring", "1024")
	if r.code != 1 || !strings.Contains(r.stdout, "the bound is 100)") || !strings.Contains(r.stdout, "luacoll check --budget raises the bound") ||
		!strings.Contains(r.stdout, "1 of 1 verifications found problems (1 plans") {
		t.Errorf("--budget 100: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	r = luacoll(t, nil, "check", "-n", "8", "--layout", "2x4", "bench/ag-sim.lua", "ring", "1024")
	if r.code != 0 || !strings.Contains(r.stdout, "no problems") {
		t.Errorf("the default budget: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	// Without -n, the layout gives the rank count.
	r = luacoll(t, nil, "check", "--layout", "3x2", "bench/ag-sim.lua", "ring", "1024")
	if r.code != 0 || !strings.Contains(r.stdout, "at 6 simulated ranks (layout 3x2), no problems") {
		t.Errorf("--layout 3x2 without -n: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
}
