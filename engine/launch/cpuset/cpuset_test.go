package cpuset

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"testing"
)

func TestParseFormat(t *testing.T) {
	for _, c := range []struct {
		in   string
		want []int
		out  string
	}{
		{"", nil, ""},
		{"0", []int{0}, "0"},
		{"0-3", []int{0, 1, 2, 3}, "0-3"},
		{"0-3,8-11\n", []int{0, 1, 2, 3, 8, 9, 10, 11}, "0-3,8-11"},
		{" 5, 1,2 ,3-4,9", []int{1, 2, 3, 4, 5, 9}, "1-5,9"},
		{"2,2,1-2", []int{1, 2}, "1-2"},
		{"1023", []int{1023}, "1023"},
	} {
		got, err := Parse(c.in)
		if err != nil {
			t.Fatalf("Parse(%q): %v", c.in, err)
		}
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("Parse(%q) = %v, want %v", c.in, got, c.want)
		}
		if f := Format(got); f != c.out {
			t.Errorf("Format(%v) = %q, want %q", got, f, c.out)
		}
	}
	for _, bad := range []string{"a", "1-", "-1", "3-1", "1-2-3", "1,,2", "1024", "+1", "0x1", "1 2"} {
		if _, err := Parse(bad); err == nil || !strings.Contains(err.Error(), "cpu list") {
			t.Errorf("Parse(%q): err = %v, want a cpu list error", bad, err)
		}
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{"0-3,8-11", "1", "", "5,1,2", "0-1023", "3-1", "x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		cpus, err := Parse(s)
		if err != nil {
			return
		}
		for i, c := range cpus {
			if c < 0 || c >= Max || (i > 0 && c <= cpus[i-1]) {
				t.Fatalf("Parse(%q) = %v: not sorted, unique and in range", s, cpus)
			}
		}
		again, err := Parse(Format(cpus))
		if err != nil || !reflect.DeepEqual(again, cpus) {
			t.Fatalf("round trip of %q: %v -> %q -> %v, %v", s, cpus, Format(cpus), again, err)
		}
	})
}

func seq(a, b int) []int {
	var out []int
	for c := a; c <= b; c++ {
		out = append(out, c)
	}
	return out
}

func TestSplit(t *testing.T) {
	all := seq(0, 31)
	got := Split([]Member{{"h", all}, {"h", all}}, 2, nil)
	if !reflect.DeepEqual(got, [][]int{seq(0, 15), seq(16, 31)}) {
		t.Errorf("2 ranks on 32 CPUs: %v", got)
	}
	// Uneven: the first ranks get one more.
	got = Split([]Member{{"h", seq(0, 6)}, {"h", seq(0, 6)}, {"h", seq(0, 6)}}, 1, nil)
	if !reflect.DeepEqual(got, [][]int{seq(0, 2), seq(3, 4), seq(5, 6)}) {
		t.Errorf("3 ranks on 7 CPUs: %v", got)
	}
	// Too few CPUs for min: no shares.
	got = Split([]Member{{"h", seq(0, 2)}, {"h", seq(0, 2)}}, 2, nil)
	if !reflect.DeepEqual(got, [][]int{nil, nil}) {
		t.Errorf("2 ranks on 3 CPUs, min 2: %v", got)
	}
	// Two hosts, and two GPU-local sets on one host, ranks interleaved.
	a, b := seq(0, 7), seq(8, 15)
	got = Split([]Member{{"x", a}, {"x", b}, {"x", a}, {"x", b}, {"y", a}}, 2, nil)
	want := [][]int{seq(0, 3), seq(8, 11), seq(4, 7), seq(12, 15), seq(0, 7)}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("mixed: %v, want %v", got, want)
	}
	// Hardware threads: CPUs n and n+4 share a core. Whole cores go to
	// one rank; with fewer cores than ranks the threads are shared out.
	sib := func(c int) int { return c % 4 }
	ht := seq(0, 7)
	got2 := Split([]Member{{"h", ht}, {"h", ht}}, 2, sib)
	if !reflect.DeepEqual(got2, [][]int{{0, 1, 4, 5}, {2, 3, 6, 7}}) {
		t.Errorf("2 ranks on 4 cores x 2 threads: %v", got2)
	}
	got2 = Split([]Member{{"h", ht}, {"h", ht}, {"h", ht}}, 2, sib)
	if !reflect.DeepEqual(got2, [][]int{{0, 1, 4, 5}, {2, 6}, {3, 7}}) {
		t.Errorf("3 ranks on 4 cores x 2 threads: %v", got2)
	}
	got2 = Split([]Member{{"h", ht}, {"h", ht}, {"h", ht}, {"h", ht}, {"h", ht}, {"h", ht}}, 1, sib)
	if !reflect.DeepEqual(got2, [][]int{{0, 1}, {2, 3}, {4}, {5}, {6}, {7}}) {
		t.Errorf("6 ranks on 4 cores x 2 threads: %v", got2)
	}
	// The plan owns its slices.
	got[0][0] = 99
	if a[0] != 0 {
		t.Error("Split aliases its input")
	}
}

func TestDeal(t *testing.T) {
	two := seq(0, 1)
	got := Deal([]Member{{"h", two}, {"h", two}, {"h", two}, {"h", two}}, nil)
	if !reflect.DeepEqual(got, [][]int{{0}, {1}, {0}, {1}}) {
		t.Errorf("4 ranks on 2 CPUs: %v", got)
	}
	// Groups with a CPU each for every rank are Split's: nil here. Other
	// hosts are dealt apart.
	got = Deal([]Member{{"h", two}, {"h", two}, {"h", two}, {"x", two}, {"x", two}}, nil)
	if !reflect.DeepEqual(got, [][]int{{0}, {1}, {0}, nil, nil}) {
		t.Errorf("3 ranks on h, 2 on x: %v", got)
	}
	// Hardware threads: CPUs n and n+2 share a core; every core's first
	// thread goes before any second one.
	sib := func(c int) int { return c % 2 }
	four := seq(0, 3)
	m := make([]Member, 6)
	for i := range m {
		m[i] = Member{"h", four}
	}
	got = Deal(m, sib)
	if !reflect.DeepEqual(got, [][]int{{0}, {1}, {2}, {3}, {0}, {1}}) {
		t.Errorf("6 ranks on 2 cores x 2 threads: %v", got)
	}
}

func TestIntersect(t *testing.T) {
	if got := Intersect(seq(0, 9), []int{3, 5, 11}); !reflect.DeepEqual(got, []int{3, 5}) {
		t.Errorf("Intersect = %v", got)
	}
	if got := Intersect(nil, seq(0, 3)); len(got) != 0 {
		t.Errorf("Intersect with empty = %v", got)
	}
}

// threadCPUs reads every thread's allowed list from /proc.
func threadCPUs(t *testing.T) map[string]string {
	t.Helper()
	dirs, err := filepath.Glob("/proc/self/task/*/status")
	if err != nil || len(dirs) == 0 {
		t.Skipf("no /proc/self/task: %v", err)
	}
	out := map[string]string{}
	for _, p := range dirs {
		b, err := os.ReadFile(p)
		if err != nil {
			continue // the thread exited
		}
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "Cpus_allowed_list:"); ok {
				out[p] = strings.TrimSpace(v)
			}
		}
	}
	return out
}

func TestApplyBindsEveryThread(t *testing.T) {
	orig, err := Current()
	if err != nil {
		t.Fatal(err)
	}
	if len(orig) < 2 {
		t.Skip("needs two CPUs")
	}
	// Start some threads first, so there is more than one to bind.
	done := make(chan struct{})
	for i := 0; i < 3; i++ {
		go func() { runtime.LockOSThread(); <-done }()
	}
	defer close(done)
	defer func() {
		if err := Apply(orig); err != nil {
			t.Errorf("restore: %v", err)
		}
	}()
	one := orig[len(orig)-1:]
	if err := Apply(one); err != nil {
		t.Fatal(err)
	}
	got := threadCPUs(t)
	for p, list := range got {
		if list != Format(one) {
			t.Errorf("%s: allowed %q, want %q", p, list, Format(one))
		}
	}
	if len(got) < 2 {
		t.Errorf("only %d threads seen", len(got))
	}
	if cur, _ := Current(); !reflect.DeepEqual(cur, one) {
		t.Errorf("Current = %v, want %v", cur, one)
	}
	if err := Apply(nil); err == nil {
		t.Error("Apply(nil) succeeded")
	}
	if err := Apply([]int{Max}); err == nil {
		t.Errorf("Apply([%d]) succeeded", Max)
	}
}

func TestCoreOf(t *testing.T) {
	core := CoreOf()
	cpus, err := Current()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cpus {
		k := core(c)
		b, err := os.ReadFile(fmt.Sprintf("/sys/devices/system/cpu/cpu%d/topology/thread_siblings_list", c))
		if err != nil {
			if k != c {
				t.Errorf("cpu %d without sysfs topology: core %d", c, k)
			}
			continue
		}
		sib, _ := Parse(string(b))
		if len(sib) == 0 || k != sib[0] || k > c {
			t.Errorf("cpu %d: core %d, siblings %q", c, k, b)
		}
	}
	if k := core(Max + 7); k != Max+7 {
		t.Errorf("unknown cpu: core %d", k)
	}
}
