package knobs

import (
	"fmt"
	"strings"
)

// Markdown returns the registry as the docs' tables: one for the tuning
// knobs and one for the debug knobs.
func Markdown() string {
	var b strings.Builder
	for _, c := range []struct {
		class Class
		title string
		intro string
	}{
		{Tuning, "Tuning knobs", "They change how fast a run goes, never what it computes."},
		{Debug, "Debug knobs", "They force a choice or turn an optimisation off, to look into a run or to measure one way against another."},
	} {
		fmt.Fprintf(&b, "## %s\n%s\n\n| variable | what | unit | default |\n| --- | --- | --- | --- |\n", c.title, c.intro)
		for _, k := range All() {
			if k.Class == c.class {
				fmt.Fprintf(&b, "| `%s` | %s | %s | %s |\n", k.Name, k.Doc, k.Unit, k.Default)
			}
		}
		b.WriteString("\n")
	}
	return b.String()
}

// Text returns the values in effect as `luacoll info --tuning` prints
// them: one line a knob, its value and where it came from (a refused value
// is not listed: Err names it).
func (s *Set) Text() string {
	var b strings.Builder
	width := 0
	for _, k := range registry {
		width = max(width, len(k.Name))
	}
	class := Class("")
	for _, e := range s.Effective() {
		if e.Knob.Class != class {
			class = e.Knob.Class
			fmt.Fprintf(&b, "%s knobs:\n", class)
		}
		v := e.Value
		if e.Knob.Unit != "" && e.Source == "environment" {
			v += " " + e.Knob.Unit
		}
		fmt.Fprintf(&b, "  %-*s  %s (%s)\n", width, e.Knob.Name, v, e.Source)
	}
	return b.String()
}
