package launchenv

import (
	"strings"
	"testing"
)

// Get reads the protocol's variables and nothing else: a knob set in the
// environment is not read through it.
func TestGetReadsOnlyTheProtocol(t *testing.T) {
	t.Setenv("LUACOLL_RANK", "3")
	t.Setenv("LUACOLL_NET_LANES", "2")
	if got := Get("LUACOLL_RANK"); got != "3" {
		t.Errorf("Get(LUACOLL_RANK) = %q, want 3", got)
	}
	if got := Get("LUACOLL_NET_LANES"); got != "" {
		t.Errorf("Get(LUACOLL_NET_LANES) = %q: a knob read as the launcher's", got)
	}
	md := Markdown()
	seen := map[string]bool{}
	for _, v := range Vars {
		if !strings.HasPrefix(v.Name, "LUACOLL_") || seen[v.Name] || v.Doc == "" || strings.Contains(v.Doc, "|") {
			t.Errorf("%q: want a LUACOLL_ name, once, with one line of doc", v.Name)
		}
		seen[v.Name] = true
		if !strings.Contains(md, "| `"+v.Name+"` |") {
			t.Errorf("the table lacks %s", v.Name)
		}
	}
}
