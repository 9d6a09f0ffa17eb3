package knobs

import (
	"strings"
	"testing"
	"time"
)

func env(m map[string]string) func(string) (string, bool) {
	return func(name string) (string, bool) {
		v, ok := m[name]
		return v, ok
	}
}

// A value a knob cannot take is refused with an error naming the variable
// and the value, and leaves the knob at its default; the others are read.
func TestLoadRefusesBadValues(t *testing.T) {
	for _, bad := range []string{"abc", "-1", "1000", "2.5"} {
		s := Load(env(map[string]string{NetLanes.Name: bad, NetStripeMin.Name: "1M"}))
		err := s.Err()
		if err == nil || !strings.Contains(err.Error(), `LUACOLL_NET_LANES="`+bad+`"`) || !strings.Contains(err.Error(), "from 0 to 8") {
			t.Errorf("NET_LANES=%s: %v, want an error naming the variable and its range", bad, err)
		}
		if _, ok := s.Value(NetLanes.Knob); ok {
			t.Errorf("NET_LANES=%s: kept", bad)
		}
		// info --tuning shows the refused value as such, not the default.
		for _, e := range s.Effective() {
			if e.Knob == NetLanes.Knob && (e.Value != bad || e.Source != "refused") {
				t.Errorf("NET_LANES=%s: listed as %q (%s)", bad, e.Value, e.Source)
			}
		}
		if v, ok := s.Value(NetStripeMin.Knob); !ok || v != "1M" {
			t.Errorf("NET_STRIPE_MIN: %q %v, want 1M", v, ok)
		}
	}
	s := Load(env(map[string]string{Prelaunch.Name: "yes", SyncSpin.Name: "2e6", HostCache.Name: "32MiB", PlanLines.Name: "4K"}))
	for _, want := range []string{`LUACOLL_PRELAUNCH="yes": want one of 0, 1, 2`, `LUACOLL_SYNC_SPIN_US="2e6"`, `LUACOLL_HOST_CACHE="32MiB"`} {
		if s.Err() == nil || !strings.Contains(s.Err().Error(), want) {
			t.Errorf("Err = %v, want it to name %s", s.Err(), want)
		}
	}
	if v, ok := PlanLines.From(s); !ok || v != 4096 {
		t.Errorf("PLAN_LINES: %d %v", v, ok)
	}
}

// LUACOLL_TRANSPORT is checked for its form as the others are: a bad
// one is refused where the job starts, naming the variable.
func TestTransportForm(t *testing.T) {
	for _, good := range []string{"net", "*=net", "1=net,3=shm", " 2 = nvl , * = net"} {
		if err := Load(env(map[string]string{Transport.Name: good})).Err(); err != nil {
			t.Errorf("%q: %v", good, err)
		}
	}
	for bad, want := range map[string]string{"abc": "want net", "self": "self cannot be forced", "x=net": `peer "x" is not a rank`, "1=net,2=wire": `"2=wire"`} {
		err := Load(env(map[string]string{Transport.Name: bad})).Err()
		if err == nil || !strings.Contains(err.Error(), "LUACOLL_TRANSPORT=") || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want an error naming the variable and %q", bad, err, want)
		}
	}
}

// The typed readers read the process's set back, empty means unset, and
// Or gives the default where a knob is unset.
func TestTypedReaders(t *testing.T) {
	t.Cleanup(func() { Reload() })
	t.Setenv(HostCache.Name, "32M")
	t.Setenv(HostSpin.Name, "2.5")
	t.Setenv(AGPProtocol.Name, "staged")
	t.Setenv(NetLanes.Name, "")
	if err := Reload().Err(); err != nil {
		t.Fatal(err)
	}
	if v, ok := HostCache.Get(); !ok || v != 32<<20 {
		t.Errorf("HOST_CACHE = %d %v, want 32 MiB", v, ok)
	}
	if d := HostSpin.Or(time.Second); d != 2500*time.Nanosecond {
		t.Errorf("HOST_SPIN_US = %v, want 2.5us", d)
	}
	if got := AGPProtocol.Get(); got != "staged" {
		t.Errorf("AGP_PROTOCOL = %q", got)
	}
	if _, ok := NetLanes.Get(); ok {
		t.Error("NET_LANES= counts as set")
	}
	if got := NetStripeMin.Or(7); got != 7 {
		t.Errorf("NET_STRIPE_MIN unset: %d, want the default given", got)
	}
	text := Current().Text()
	for _, want := range []string{"LUACOLL_HOST_CACHE", "32M bytes (environment)", "LUACOLL_NET_LANES", "(default)", "debug knobs:"} {
		if !strings.Contains(text, want) {
			t.Errorf("Text lacks %q:\n%s", want, text)
		}
	}
}

// The registry's rules: at most 12 tuning knobs, few debug ones, every one
// named LUACOLL_*, once, with a default and one line of doc, and in the
// generated tables.
func TestRegistry(t *testing.T) {
	count := map[Class]int{}
	seen := map[string]bool{}
	md := Markdown()
	for _, k := range All() {
		count[k.Class]++
		if !strings.HasPrefix(k.Name, "LUACOLL_") || seen[k.Name] {
			t.Errorf("%q: not LUACOLL_ or registered twice", k.Name)
		}
		seen[k.Name] = true
		if k.Default == "" || k.Doc == "" || strings.Contains(k.Doc, "\n") || strings.Contains(k.Doc+k.Default, "|") {
			t.Errorf("%s: default %q, doc %q: want both, one line, no |", k.Name, k.Default, k.Doc)
		}
		if k.Class != Tuning && k.Class != Debug {
			t.Errorf("%s: class %q", k.Name, k.Class)
		}
		if !strings.Contains(md, "| `"+k.Name+"` |") {
			t.Errorf("docs lack %s", k.Name)
		}
		if got, ok := Lookup(k.Name); !ok || got != k {
			t.Errorf("Lookup(%s) = %v", k.Name, got)
		}
	}
	if count[Tuning] > 12 || count[Debug] > 6 {
		t.Errorf("%d tuning and %d debug knobs, want at most 12 and 6", count[Tuning], count[Debug])
	}
}

// FuzzLoad sets every knob to the same arbitrary value: Load never
// panics, a value it keeps reads back through the typed readers, and a
// value it refuses is named with its variable.
func FuzzLoad(f *testing.F) {
	for _, v := range []string{"0", "1", "2", "8", "32M", "1.5", "-1", "abc", "1e400", "18446744073709551615G", "ce+kernel", " 4 ", ""} {
		f.Add(v)
	}
	f.Fuzz(func(t *testing.T, v string) {
		s := Load(func(string) (string, bool) { return v, true })
		for _, k := range All() {
			kept, ok := s.Value(k)
			refused := s.Err() != nil && strings.Contains(s.Err().Error(), k.Name+"=")
			if ok == refused && strings.TrimSpace(v) != "" {
				t.Fatalf("%s=%q: kept %v, refused %v", k.Name, v, ok, refused)
			}
			if ok && kept != strings.TrimSpace(v) {
				t.Fatalf("%s=%q: kept %q", k.Name, v, kept)
			}
		}
		if u, ok := NetStripeMin.From(s); ok && (u < 4096 || u > 1<<40) {
			t.Fatalf("NET_STRIPE_MIN=%q read as %d, out of its range", v, u)
		}
		if d, ok := SyncSpin.From(s); ok && (d < 0 || d > time.Second) {
			t.Fatalf("SYNC_SPIN_US=%q read as %v, out of its range", v, d)
		}
		if w := Prelaunch.From(s); w != "" && w != "0" && w != "1" && w != "2" {
			t.Fatalf("PRELAUNCH=%q read as %q", v, w)
		}
	})
}
