package cost

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// Fit returns the cost measured as times (seconds per op) at sizes
// (bytes, increasing): the times themselves, to interpolate between, the
// start cost where the line through the two smallest sizes meets zero bytes
// (kept within 0 and the smallest time), and the per-byte cost of the line
// through the two largest (where caches no longer hold the data), for
// sizes past them.
func Fit(sizes []uint64, times []float64) (Cost, error) {
	k := len(sizes)
	if k != len(times) || k < 2 {
		return Cost{}, fmt.Errorf("fit: want two or more (size, time) points, got %d sizes and %d times", len(sizes), len(times))
	}
	c := Cost{Sizes: append([]uint64(nil), sizes...), TimesNs: make([]float64, k)}
	for i, n := range sizes {
		if times[i] <= 0 {
			return Cost{}, fmt.Errorf("fit: time %v at %d bytes", times[i], n)
		}
		if i > 0 && n <= sizes[i-1] {
			return Cost{}, fmt.Errorf("fit: sizes must increase (%v)", sizes)
		}
		c.TimesNs[i] = times[i] * 1e9
	}
	t, x := c.TimesNs, func(i int) float64 { return float64(sizes[i]) }
	c.BetaNs = (t[k-1] - t[k-2]) / (x(k-1) - x(k-2))
	if c.BetaNs < 0 {
		c.BetaNs = t[k-1] / x(k-1)
	}
	c.AlphaNs = t[0] - x(0)*(t[1]-t[0])/(x(1)-x(0))
	c.AlphaNs = max(0, min(c.AlphaNs, t[0]))
	return c, nil
}

// Merge returns m with the classes of each of add's modes put in (add's
// replace m's of the same name, but for a Switch add did not measure:
// that is measured apart, with more ranks than CPUs), add's time and
// command, add's machine among m's (once each), and add's note in place of
// the parts of m's that describe what add measured again, so a model can
// be measured class by class (shm in one run, net in another, with
// --nodes).
func Merge(m, add *Model) (*Model, error) {
	if m.Backend != add.Backend {
		return nil, fmt.Errorf("model: measured on the %s backend, the existing one on %s", add.Backend, m.Backend)
	}
	out := *m
	out.Modes = map[string]map[string]Params{}
	for mode, classes := range m.Modes {
		out.Modes[mode] = map[string]Params{}
		for k, p := range classes {
			out.Modes[mode][k] = p
		}
	}
	for mode, classes := range add.Modes {
		if out.Modes[mode] == nil {
			out.Modes[mode] = map[string]Params{}
		}
		for k, p := range classes {
			if old, ok := out.Modes[mode][k]; ok && p.Switch.zero() {
				// Measured apart, with more ranks than CPUs.
				p.Switch = old.Switch
			}
			out.Modes[mode][k] = p
		}
	}
	// The commands, as the machines and the notes, of every run that
	// made it.
	out.Made, out.Command = add.Made, joinOnce(m.Command, add.Command)
	out.Machine = joinOnce(m.Machine, add.Machine)
	out.Note = mergeNotes(m.Note, add.Note)
	return &out, out.Check()
}

// joinOnce is a; b, the machines of a model made in several runs, each
// named once.
func joinOnce(a, b string) string {
	parts := strings.Split(a, "; ")
	if a == "" {
		parts = nil
	}
	for _, p := range strings.Split(b, "; ") {
		if p != "" && !slices.Contains(parts, p) {
			parts = append(parts, p)
		}
	}
	return strings.Join(parts, "; ")
}

// noteStart matches where a part of a calibration's note begins: the
// class (or "switch") and its ranks ("nvl, 2 ranks: ...").
var noteStart = regexp.MustCompile(`(^|\. )([a-z]+), \d+ ranks`)

// noteParts splits a note into its parts, each with what it describes
// (the class, or "" for a note of another form, kept whole).
func noteParts(note string) (keys, parts []string) {
	idx := noteStart.FindAllStringSubmatchIndex(note, -1)
	if len(idx) == 0 {
		if note != "" {
			return []string{""}, []string{note}
		}
		return nil, nil
	}
	if head := strings.TrimSpace(note[:idx[0][4]]); head != "" {
		keys, parts = append(keys, ""), append(parts, head)
	}
	for i, m := range idx {
		to := len(note)
		if i+1 < len(idx) {
			to = idx[i+1][4]
		}
		keys = append(keys, note[m[4]:m[5]])
		parts = append(parts, strings.TrimSpace(note[m[4]:to]))
	}
	return keys, parts
}

// mergeNotes is old's note with the parts new describes again replaced by
// new's.
func mergeNotes(old, add string) string {
	if add == "" {
		return old
	}
	addKeys, addParts := noteParts(add)
	oldKeys, oldParts := noteParts(old)
	var out []string
	for i, k := range oldKeys {
		if k == "" || !slices.Contains(addKeys, k) {
			out = append(out, oldParts[i])
		}
	}
	return strings.Join(append(out, addParts...), " ")
}
