package trace

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
)

// Every event encodes to a JSON object whose fields read back as written,
// whatever the strings hold.
func TestEventEncoding(t *testing.T) {
	e := event{name: "wait \"x\"\n\x01\xff", cat: "window", ph: PhaseComplete, ts: 1234567, dur: -1, tid: TIDStream,
		args: []arg{{"s", "a\\b\tc"}, {"b", true}, {"i", -3}, {"u", uint64(1) << 63}, {"d", 1500 * time.Nanosecond}, {"x", 1.5}}}
	b := appendEvent(nil, 7, &e)
	var got map[string]any
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	want := map[string]any{"name": "wait \"x\"\n\x01\ufffd", "cat": "window", "ph": "X", "ts": 1234.567, "dur": -0.001,
		"pid": 7.0, "tid": 1.0, "args": map[string]any{"s": "a\\b\tc", "b": true, "i": -3.0, "u": float64(uint64(1) << 63), "d": 1.5, "x": nil}}
	gb, _ := json.Marshal(got)
	wb, _ := json.Marshal(want)
	if !bytes.Equal(gb, wb) {
		t.Fatalf("decoded\n%s\nwant\n%s", gb, wb)
	}
	if !strings.Contains(string(b), `"ts":1234.567,"dur":-0.001`) {
		t.Fatalf("times not in microseconds with three decimals: %s", b)
	}
}

// FuzzAppendString: any string encodes to a JSON string that decodes to
// the same text (invalid UTF-8 replaced).
func FuzzAppendString(f *testing.F) {
	for _, s := range []string{"", "plain", "\"\\\n\t\x00\x7f", "\xff\xfe", "ü€𝄞", "\u2028"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		b := appendString(nil, s)
		var got string
		if err := json.Unmarshal(b, &got); err != nil {
			t.Fatalf("%q -> %s: %v", s, b, err)
		}
		if want := strings.ToValidUTF8(s, "\ufffd"); got != want && !strings.Contains(s, "\ufffd") {
			// (Go's ToValidUTF8 folds a run of bad bytes into one
			// replacement; the encoder replaces each byte.)
			if strings.ReplaceAll(got, "\ufffd", "") != strings.ReplaceAll(want, "\ufffd", "") {
				t.Fatalf("%q -> %q", s, got)
			}
		}
	})
}

// FuzzReadPart: a part file of any content is read without a panic, and
// what it returns are whole JSON events; the lines that are not count as
// torn.
func FuzzReadPart(f *testing.F) {
	f.Add([]byte("[\n{\"name\":\"a\",\"ph\":\"i\",\"ts\":1.000,\"pid\":0,\"tid\":0},\n{\"name\":\"b\",\"ph\":\"X\",\"ts\":2.000,\"dur\":1.0,\"pid\":0,\"tid\":1},\n{\"na"))
	f.Add([]byte("[\n"))
	f.Add([]byte("{}\n]"))
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := ReadPart(bytes.NewReader(data), 3)
		if err != nil {
			return // an over-long line
		}
		for _, ev := range p.Events {
			if !json.Valid(ev) {
				t.Fatalf("invalid event returned: %q", ev)
			}
		}
		if p.End < 0 && len(p.Events) == 0 {
			t.Fatalf("end %v with no events", p.End)
		}
	})
}

// A part cut in the middle of a line (a rank killed while writing) keeps
// every whole event before the cut.
func TestReadPartTorn(t *testing.T) {
	var b []byte
	b = append(b, "[\n"...)
	for i := range 3 {
		b = appendEvent(b, 2, &event{name: "put", ph: PhaseComplete, ts: time.Duration(i) * time.Microsecond, dur: time.Microsecond, tid: TIDStream})
		b = append(b, ",\n"...)
	}
	cut := b[:len(b)-20]
	p, err := ReadPart(bytes.NewReader(cut), 2)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Events) != 2 || p.Torn != 1 || p.End != 2*time.Microsecond {
		t.Fatalf("%d events, %d torn, end %v; want 2, 1, 2us", len(p.Events), p.Torn, p.End)
	}
}

type fakeClock struct {
	skew  time.Duration // job clock = local clock - skew
	delay []time.Duration
	i     int
}

func (f *fakeClock) JobClock(context.Context) (time.Duration, error) {
	if f.i >= len(f.delay) {
		return 0, errors.New("no more")
	}
	d := f.delay[f.i]
	f.i++
	time.Sleep(d) // the request's way
	return time.Since(epoch.Add(f.skew)), nil
}

var epoch = time.Now()

// Align keeps the reading with the shortest round trip: the clock it
// returns is off by no more than half of that round trip.
func TestAlignKeepsTheShortestRoundTrip(t *testing.T) {
	f := &fakeClock{skew: 5 * time.Second, delay: []time.Duration{20 * time.Millisecond, 0, 10 * time.Millisecond}}
	c, err := Align(context.Background(), f, 3)
	if err != nil {
		t.Fatal(err)
	}
	if !c.Aligned || c.RTT > 5*time.Millisecond {
		t.Fatalf("aligned %v, rtt %v: want the short round trip", c.Aligned, c.RTT)
	}
	// Job time 0 is local epoch+skew.
	if off := c.Zero.Sub(epoch.Add(f.skew)); off < -c.RTT || off > c.RTT {
		t.Fatalf("zero off by %v (rtt %v)", off, c.RTT)
	}
	if _, err := Align(context.Background(), f, 2); err == nil {
		t.Fatal("a failing clock read did not fail Align")
	}
}
