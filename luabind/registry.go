package luabind

import (
	"fmt"
	"sort"
	"strings"

	lua "github.com/yuin/gopher-lua"
)

// Entry is one Lua function or method.
type Entry struct {
	// Name as a user writes it: "lc.window", "w:put", "b:fill", "help".
	Name string
	// Args is the argument list, e.g. "(peer, dst_off, src, src_off, n)".
	Args string
	// Returns describes the results ("" for none).
	Returns string
	// Doc says what it does.
	Doc string
	// Group is the section of the reference it belongs to.
	Group string
	// Field marks a value (lc.rank) rather than a function.
	Field bool
	fn    func(s *State, L *lua.LState, mt lua.LValue) int // mt: the receiver's metatable (methods)
	// refusal, set for collective entries, makes a call that raises before
	// its exchange take part anyway (collective.go).
	refusal *refusal
}

// Receiver returns the object prefix of a method ("w" for "w:put") or "".
func (e *Entry) Receiver() string {
	if i := strings.IndexByte(e.Name, ':'); i > 0 {
		return e.Name[:i]
	}
	return ""
}

// Short returns the name without its prefix ("put" for "w:put", "window" for "lc.window").
func (e *Entry) Short() string {
	if i := strings.LastIndexAny(e.Name, ".:"); i >= 0 {
		return e.Name[i+1:]
	}
	return e.Name
}

// Signature is the name with its arguments.
func (e *Entry) Signature() string {
	if e.Field {
		return e.Name
	}
	return e.Name + e.Args
}

// receivers maps a method prefix to its userdata type name and what it is.
var receivers = map[string]struct{ typ, what string }{
	"b":  {"luacoll.buffer", "buffer"},
	"w":  {"luacoll.window", "window"},
	"t":  {"luacoll.timer", "timer"},
	"ag": {"luacoll.allgather", "persistent all-gather"},
	"p":  {"luacoll.plan", "plan"},
}

// groups orders the reference's sections.
var groups = []string{"Ranks", "Local buffers", "Windows", "Reductions", "Timing", "Persistent all-gather", "Plans", "Help"}

// Registry is the ordered list of every entry.
type Registry struct {
	entries []*Entry
	byName  map[string]*Entry
}

func newRegistry(entries ...[]*Entry) *Registry {
	r := &Registry{byName: map[string]*Entry{}}
	for _, list := range entries {
		for _, e := range list {
			if _, dup := r.byName[e.Name]; dup {
				panic(fmt.Sprintf("luabind: %s registered twice", e.Name))
			}
			r.byName[e.Name] = e
			r.entries = append(r.entries, e)
		}
	}
	return r
}

// Entries returns every entry in reference order.
func (r *Registry) Entries() []*Entry {
	out := append([]*Entry(nil), r.entries...)
	rank := map[string]int{}
	for i, g := range groups {
		rank[g] = i
	}
	sort.SliceStable(out, func(i, j int) bool { return rank[out[i].Group] < rank[out[j].Group] })
	return out
}

// Lookup finds an entry by name; "put", "w.put" and "window:put" find "w:put".
func (r *Registry) Lookup(name string) *Entry {
	if e := r.byName[name]; e != nil {
		return e
	}
	if e := r.byName["lc."+name]; e != nil {
		return e
	}
	name = strings.TrimPrefix(strings.TrimPrefix(name, "luacoll."), "lc.")
	short, recv := name, ""
	if i := strings.LastIndexAny(name, ".:"); i >= 0 {
		short, recv = name[i+1:], receiverAlias[name[:i]]
	}
	for _, e := range r.entries {
		// "b:put" names a buffer's put, which there is none of: it does
		// not find w:put.
		if e.Short() == short && (recv == "" || e.Receiver() == recv) {
			return e
		}
	}
	return nil
}

// receiverAlias is the receiver an explicit prefix of a name means
// ("window:put" is w:put).
var receiverAlias = map[string]string{"w": "w", "window": "w", "b": "b", "buffer": "b", "p": "p", "plan": "p",
	"ag": "ag", "allgather": "ag", "t": "t", "timer": "t"}

// Methods returns the entries of one receiver ("w").
func (r *Registry) Methods(recv string) []*Entry {
	var out []*Entry
	for _, e := range r.entries {
		if e.Receiver() == recv {
			out = append(out, e)
		}
	}
	return out
}

// Names returns every completion candidate: "luacoll.window", "lc.window",
// and method names as ":put".
func (r *Registry) Names() []string {
	var out []string
	for _, e := range r.entries {
		switch {
		case e.Receiver() != "":
			out = append(out, ":"+e.Short())
		case strings.HasPrefix(e.Name, "lc."):
			out = append(out, e.Name, "luacoll."+e.Short())
		default:
			out = append(out, e.Name)
		}
	}
	sort.Strings(out)
	return dedup(out)
}

func dedup(s []string) []string {
	out := s[:0]
	for i, v := range s {
		if i == 0 || v != s[i-1] {
			out = append(out, v)
		}
	}
	return out
}

// Help returns the text help() prints: the whole list, or one entry.
func (r *Registry) Help(name string) (string, bool) {
	var b strings.Builder
	if name == "" {
		b.WriteString("luacoll Lua API (help(\"name\") for one entry, e.g. help(\"w:put\"))\n")
		last := ""
		for _, e := range r.Entries() {
			if e.Group != last {
				fmt.Fprintf(&b, "\n%s\n", e.Group)
				last = e.Group
			}
			first, _, _ := strings.Cut(e.Doc, ". ")
			fmt.Fprintf(&b, "  %-58s %s\n", e.Signature(), strings.TrimSuffix(first, "."))
		}
		return b.String(), true
	}
	e := r.Lookup(name)
	if e == nil {
		return fmt.Sprintf("no entry named %q; help() lists them all", name), false
	}
	fmt.Fprintf(&b, "%s\n  %s\n", e.Signature(), e.Doc)
	if e.Returns != "" {
		fmt.Fprintf(&b, "  returns: %s\n", e.Returns)
	}
	return b.String(), true
}

// Markdown renders the API reference (docs/lua-api.md).
func (r *Registry) Markdown() string {
	var b strings.Builder
	b.WriteString("# luacoll Lua API reference\n\n")
	b.WriteString("Generated from the function registry (`luacoll docs`); `help()` prints the same text.\n")
	b.WriteString("The module is preloaded: `local lc = require(\"luacoll\")`, also the globals `lc` and `luacoll`.\n")
	b.WriteString("Sizes, offsets, ids and values are integers; values above 2^53 are refused.\n")
	b.WriteString("Calls marked **collective** must be made by every rank in the same order with the same arguments.\n")
	b.WriteString("Lua is 5.1 (gopher-lua); string.format raises Lua 5.1's errors for a missing or mistyped argument, and string.rep refuses results over 1 GiB.\n")
	last := ""
	for _, e := range r.Entries() {
		if e.Group != last {
			fmt.Fprintf(&b, "\n## %s\n\n| call | returns | what it does |\n| --- | --- | --- |\n", e.Group)
			last = e.Group
		}
		ret := e.Returns
		if ret == "" {
			ret = "-"
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s |\n", e.Signature(), ret, strings.ReplaceAll(e.Doc, "|", "\\|"))
	}
	return b.String()
}
