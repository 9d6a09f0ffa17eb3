package trace

import (
	"strconv"
	"time"
	"unicode/utf8"
)

// Events are written in the Trace Event Format (the JSON that
// chrome://tracing and ui.perfetto.dev read): "X" complete slices with a
// duration, "i" instants, "M" metadata naming processes and threads, "s"
// and "f" the two ends of a flow (flow.go). The
// process id is the rank, the thread id a track of it (TIDHost, TIDStream);
// times are microseconds of job time (ns precision). Each event is one
// line, its keys always in the same order.

// Track (thread) ids of a rank.
const (
	// TIDHost is the script's own thread: syncs, collectives, errors.
	TIDHost = 0
	// TIDStream is the rank's stream: a slice per window operation.
	TIDStream = 1
)

// Phases written.
const (
	PhaseComplete = "X"
	PhaseInstant  = "i"
	PhaseMeta     = "M"
)

// arg is one key of an event's args; v is a string, bool, int, uint64 or
// time.Duration (written in microseconds).
type arg struct {
	k string
	v any
}

// event is one trace event before encoding.
type event struct {
	name  string
	cat   string
	ph    string
	ts    time.Duration // job time
	dur   time.Duration // PhaseComplete only
	tid   int
	scope string // PhaseInstant: "t", "p" or "g"
	args  []arg
	// id is a flow event's; bindEnclosing binds its end to the slice
	// that encloses it ("bp":"e") rather than the next one.
	id            uint64
	bindEnclosing bool
}

// appendEvent encodes e for rank pid as one JSON object.
func appendEvent(b []byte, pid int, e *event) []byte {
	b = append(b, `{"name":`...)
	b = appendString(b, e.name)
	if e.cat != "" {
		b = append(b, `,"cat":`...)
		b = appendString(b, e.cat)
	}
	b = append(b, `,"ph":`...)
	b = appendString(b, e.ph)
	b = append(b, `,"ts":`...)
	b = appendMicros(b, e.ts)
	if e.ph == PhaseComplete {
		b = append(b, `,"dur":`...)
		b = appendMicros(b, e.dur)
	}
	b = append(b, `,"pid":`...)
	b = strconv.AppendInt(b, int64(pid), 10)
	b = append(b, `,"tid":`...)
	b = strconv.AppendInt(b, int64(e.tid), 10)
	if e.ph == PhaseInstant && e.scope != "" {
		b = append(b, `,"s":`...)
		b = appendString(b, e.scope)
	}
	if e.ph == PhaseFlowStart || e.ph == PhaseFlowEnd {
		b = append(b, `,"id":`...)
		b = strconv.AppendUint(b, e.id, 10)
		if e.bindEnclosing {
			b = append(b, `,"bp":"e"`...)
		}
	}
	if len(e.args) > 0 {
		b = append(b, `,"args":{`...)
		for i, a := range e.args {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendString(b, a.k)
			b = append(b, ':')
			b = appendValue(b, a.v)
		}
		b = append(b, '}')
	}
	return append(b, '}')
}

func appendValue(b []byte, v any) []byte {
	switch x := v.(type) {
	case string:
		return appendString(b, x)
	case bool:
		return strconv.AppendBool(b, x)
	case int:
		return strconv.AppendInt(b, int64(x), 10)
	case uint64:
		return strconv.AppendUint(b, x, 10)
	case time.Duration:
		return appendMicros(b, x)
	}
	return append(b, "null"...)
}

// appendMicros writes d as microseconds with three decimals.
func appendMicros(b []byte, d time.Duration) []byte {
	ns := int64(d)
	if ns < 0 {
		b = append(b, '-')
		ns = -ns
	}
	b = strconv.AppendInt(b, ns/1000, 10)
	frac := ns % 1000
	b = append(b, '.', byte('0'+frac/100), byte('0'+frac/10%10), byte('0'+frac%10))
	return b
}

// appendString writes s as a JSON string (invalid UTF-8 becomes U+FFFD).
func appendString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\':
				b = append(b, '\\', c)
			case c == '\n':
				b = append(b, '\\', 'n')
			case c == '\t':
				b = append(b, '\\', 't')
			case c < 0x20 || c == 0x7f:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&15])
			default:
				b = append(b, c)
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, `\ufffd`...)
		} else {
			b = append(b, s[i:i+size]...)
		}
		i += size
	}
	return append(b, '"')
}
