package trace

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
)

// Checked is what Check found in a trace.
type Checked struct {
	Events   int
	ByPhase  map[string]int
	ByName   map[string]int
	Ranks    []int // pids with a process_name, in order of appearance
	Slices   map[[2]int]int
	Instants map[[2]int]int
	// Flows counts the flows whose both ends are in the trace.
	Flows int
}

// Check validates a merged trace: the Trace Event Format's object form,
// the fields each phase needs with their types (name, ph, pid, tid; ts for
// slices and instants; dur for slices; an instant's scope; a metadata
// event's args), a process name for every process, and the order of each
// track: every event starts no earlier than the one before it on the same
// track ended (slices do not overlap). A flow's ends ("s", "f") need an
// integer id and a category, lie inside their track's slices rather than
// after them, and every end has its start.
func Check(data []byte) (Checked, error) {
	c := Checked{ByPhase: map[string]int{}, ByName: map[string]int{}, Slices: map[[2]int]int{}, Instants: map[[2]int]int{}}
	var top struct {
		TraceEvents []json.RawMessage `json:"traceEvents"`
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		return c, fmt.Errorf("not a JSON object: %w", err)
	}
	if _, ok := raw["traceEvents"]; !ok {
		return c, fmt.Errorf("no traceEvents array")
	}
	if err := json.Unmarshal(data, &top); err != nil {
		return c, fmt.Errorf("traceEvents: %w", err)
	}
	flowStarts, flowEnds := map[string]bool{}, map[string]bool{}
	named := map[int]bool{}
	used := map[int]bool{}
	lastEnd := map[[2]int]float64{}
	for i, rawEv := range top.TraceEvents {
		var ev map[string]any
		if err := json.Unmarshal(rawEv, &ev); err != nil {
			return c, fmt.Errorf("event %d: %w", i, err)
		}
		where := func(format string, a ...any) error {
			return fmt.Errorf("event %d (%s): %s", i, rawEv, fmt.Sprintf(format, a...))
		}
		h, problem := readHeader(ev)
		if problem != "" {
			return c, where("%s", problem)
		}
		name, ph, pid, tid := h.name, h.ph, h.pid, h.tid
		c.Events++
		c.ByPhase[ph]++
		c.ByName[name]++
		if ph == PhaseMeta {
			if problem := c.meta(h, named); problem != "" {
				return c, where("%s", problem)
			}
			continue
		}
		used[pid] = true
		ts, ok := ev["ts"].(float64)
		if !ok || ts < 0 || math.IsInf(ts, 0) {
			return c, where("ts: want a number >= 0")
		}
		end := ts
		track := [2]int{pid, tid}
		switch ph {
		case PhaseComplete:
			dur, ok := ev["dur"].(float64)
			if !ok || dur < 0 {
				return c, where("dur: want a number >= 0")
			}
			end = ts + dur
			c.Slices[track]++
		case PhaseInstant:
			if s, ok := ev["s"]; ok && s != "t" && s != "p" && s != "g" {
				return c, where("s: want t, p or g")
			}
			c.Instants[track]++
		case PhaseFlowStart, PhaseFlowEnd:
			id, ok := ev["id"].(float64)
			cat, _ := ev["cat"].(string)
			if !ok || id != math.Trunc(id) || id < 0 || cat == "" {
				return c, where("a flow needs an integer id and a cat")
			}
			key := cat + "/" + name + "/" + strconv.FormatFloat(id, 'f', 0, 64)
			if ph == PhaseFlowStart {
				flowStarts[key] = true
			} else {
				flowEnds[key] = true
			}
			continue // inside a slice of its track, not after it
		default:
			return c, where("ph %q: want X, i, M, s or f", ph)
		}
		// Half a nanosecond of slack for the decimal microseconds.
		if prev, ok := lastEnd[track]; ok && ts < prev-0.0005 {
			return c, where("starts at %.3f us, before the previous event of rank %d track %d ended (%.3f us)", ts, pid, tid, prev)
		}
		lastEnd[track] = max(end, lastEnd[track])
	}
	for k := range flowEnds {
		if !flowStarts[k] {
			return c, fmt.Errorf("flow %s ends but never starts", k)
		}
		c.Flows++
	}
	for pid := range used {
		if !named[pid] {
			return c, fmt.Errorf("process %d has events but no process_name", pid)
		}
	}
	return c, nil
}

// header is what every event has: name, phase, process and thread, and
// its args where it has them.
type header struct {
	name, ph string
	pid, tid int
	args     map[string]any
}

// readHeader reads an event's header and checks its types (cat, where
// present, too); problem says what is wrong.
func readHeader(ev map[string]any) (h header, problem string) {
	var ok bool
	if h.name, ok = ev["name"].(string); !ok || h.name == "" {
		return h, "name: want a non-empty string"
	}
	if h.ph, ok = ev["ph"].(string); !ok {
		return h, "ph: want a string"
	}
	if h.pid, ok = integer(ev["pid"]); !ok {
		return h, "pid: want an integer"
	}
	if h.tid, ok = integer(ev["tid"]); !ok {
		return h, "tid: want an integer"
	}
	if v, ok := ev["cat"]; ok {
		if _, ok := v.(string); !ok {
			return h, "cat: want a string"
		}
	}
	var hasArgs bool
	h.args, hasArgs = ev["args"].(map[string]any)
	if v, ok := ev["args"]; ok && !hasArgs {
		return h, fmt.Sprintf("args: want an object, got %T", v)
	}
	return h, ""
}

// meta checks a metadata event and notes a process's name (named: the
// processes named so far); problem says what is wrong.
func (c *Checked) meta(h header, named map[int]bool) (problem string) {
	switch h.name {
	case "process_name", "thread_name":
		if s, ok := h.args["name"].(string); !ok || s == "" {
			return "args.name: want a non-empty string"
		}
		if h.name == "process_name" && !named[h.pid] {
			named[h.pid] = true
			c.Ranks = append(c.Ranks, h.pid)
		}
	case "process_sort_index", "thread_sort_index":
		if _, ok := integer(h.args["sort_index"]); !ok {
			return "args.sort_index: want an integer"
		}
	default:
		return "unknown metadata event"
	}
	return ""
}

// integer reports whether v is a JSON number without a fraction.
func integer(v any) (int, bool) {
	f, ok := v.(float64)
	if !ok || f != math.Trunc(f) || math.Abs(f) > 1<<53 {
		return 0, false
	}
	return int(f), true
}
