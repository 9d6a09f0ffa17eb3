package luabind

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/luacoll/luacoll/engine"
	"github.com/luacoll/luacoll/engine/enginetest"
	"github.com/luacoll/luacoll/transport/inproc"
)

// newChunkState makes a one-rank State over real shared memory; the
// returned buffer collects its print output.
func newChunkState(t *testing.T, timeout time.Duration) (*State, *bytes.Buffer) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	g := inproc.NewGroup(1)
	comm, err := enginetest.OpenInProc(ctx, g, 0, enginetest.JobID("ct"), engine.Options{Timeout: timeout})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	s := New(comm, &out)
	t.Cleanup(func() {
		_ = comm.Close(errors.New("test over"))
		s.Close()
	})
	return s, &out
}

func TestIncomplete(t *testing.T) {
	cases := []struct {
		chunk string
		want  bool
	}{
		{"1 + 1", false},
		{"x = 1", false},
		{"print(1)", false},
		{"for i = 1, 3 do", true},
		{"for i = 1, 3 do\n print(i)", true},
		{"for i = 1, 3 do\n print(i)\nend", false},
		{"function f()", true},
		{"x = {", true},
		{"print(", true},
		{"x = [[abc", true},
		{"--[[ comment", true},
		{"x = = 1", false},   // an error before the end: complete
		{"x = 'abc", false},  // an unfinished short string is an error
		{"x = 'abc\\", true}, // unless the line ends with a backslash
		{")", false},
		{"=(1 +", true},
		{"", false},
	}
	for _, c := range cases {
		if got := Incomplete(c.chunk); got != c.want {
			t.Errorf("Incomplete(%q) = %v, want %v", c.chunk, got, c.want)
		}
	}
}

func TestEvalValuesLikeLuaI(t *testing.T) {
	s, out := newChunkState(t, 3*time.Second)
	ctx := context.Background()
	cases := []struct {
		chunk string
		want  []string
	}{
		{"1 + 1", []string{"2"}},
		{"'a', nil, true, 2.5", []string{"a", "nil", "true", "2.5"}},
		{"x = 5", []string{}},
		{"x", []string{"5"}},
		{"nil", []string{"nil"}},
		{"=x + 1", []string{"6"}},
		{"luacoll.rank, luacoll.size", []string{"0", "1"}},
		{"local y = 2\nreturn y * x", []string{"10"}},
		{"print('hi')", []string{}},
		{"setmetatable({}, {__tostring = function() return 'custom' end})", []string{"custom"}},
	}
	for _, c := range cases {
		got, err := s.Eval(ctx, c.chunk, "stdin")
		if err != nil {
			t.Fatalf("Eval(%q): %v", c.chunk, err)
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("Eval(%q) = %q, want %q", c.chunk, got, c.want)
		}
	}
	if out.String() != "hi\n" {
		t.Errorf("print output %q, want %q", out.String(), "hi\n")
	}
	// A failing __tostring is reported, not raised.
	got, err := s.Eval(ctx, "setmetatable({}, {__tostring = function() error('no') end})", "stdin")
	if err != nil || len(got) != 1 || !strings.Contains(got[0], "__tostring failed") {
		t.Errorf("failing __tostring: %q, %v", got, err)
	}
}

func TestEvalErrorsKeepTheState(t *testing.T) {
	s, _ := newChunkState(t, 3*time.Second)
	ctx := context.Background()
	if _, err := s.Eval(ctx, "kept = 42", "stdin"); err != nil {
		t.Fatal(err)
	}
	for chunk, want := range map[string]string{
		"error('boom')":             "stdin:1: boom",
		"x = = 1":                   "stdin:1:",
		"\nnil_value.field = 1":     "stdin:2:",
		"luacoll.buffer('x')":       "rank 0: lc.buffer: bad argument #1 'nbytes'",
		"luacoll.window{bytes = 8}": "", // works; the next line checks the state
	} {
		_, err := s.Eval(ctx, chunk, "stdin")
		if want == "" {
			if err != nil {
				t.Errorf("Eval(%q): %v", chunk, err)
			}
			continue
		}
		var se *ScriptError
		if !errors.As(err, &se) || !strings.Contains(se.Msg, want) {
			t.Errorf("Eval(%q) error = %v, want it to contain %q", chunk, err, want)
		}
	}
	got, err := s.Eval(ctx, "kept", "stdin")
	if err != nil || !slices.Equal(got, []string{"42"}) {
		t.Errorf("state lost after errors: %q, %v", got, err)
	}
}

func TestEvalInterruptsPureLua(t *testing.T) {
	s, _ := newChunkState(t, 3*time.Second)
	ctx, cancel := context.WithCancelCause(context.Background())
	time.AfterFunc(50*time.Millisecond, func() { cancel(errors.New("interrupted")) })
	start := time.Now()
	_, err := s.Eval(ctx, "while true do end", "stdin")
	if err == nil || !strings.Contains(err.Error(), "interrupted") {
		t.Fatalf("error %v, want one naming the interrupt", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("interrupt took %v", d)
	}
	got, err := s.Eval(context.Background(), "1 + 2", "stdin")
	if err != nil || !slices.Equal(got, []string{"3"}) {
		t.Errorf("after the interrupt: %q, %v", got, err)
	}
}

func TestEvalInterruptsAStreamWait(t *testing.T) {
	s, _ := newChunkState(t, 20*time.Second)
	bg := context.Background()
	if _, err := s.Eval(bg, "w = luacoll.window{bytes = 64}", "stdin"); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancelCause(bg)
	cause := errors.New("interrupted")
	time.AfterFunc(100*time.Millisecond, func() {
		cancel(cause)
		s.Comm.Rank.Stream.Interrupt(cause)
	})
	start := time.Now()
	_, err := s.Eval(ctx, `w:wait_signal(0, ">=", 1); w:sync()`, "stdin")
	if err == nil || !strings.Contains(err.Error(), "interrupted") {
		t.Fatalf("error %v, want one naming the interrupt", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("interrupt took %v", d)
	}
	// Drain what the interrupt left, then the stream works again.
	_ = s.Comm.Sync(bg)
	got, err := s.Eval(bg, `w:signal(0, 0); w:wait_signal(0, ">=", 1); w:sync(); return w:read_signal(0)`, "stdin")
	if err != nil || !slices.Equal(got, []string{"1"}) {
		t.Errorf("stream after the interrupt: %q, %v", got, err)
	}
}

func TestComplete(t *testing.T) {
	s, _ := newChunkState(t, 3*time.Second)
	if _, err := s.Eval(context.Background(), "w = luacoll.window{bytes = 64}; b = luacoll.buffer(8); myvalue = 1", "stdin"); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		word     string
		contains []string
		absent   []string
	}{
		{"pri", []string{"print"}, []string{"pairs"}},
		{"myv", []string{"myvalue"}, nil},
		{"whi", []string{"while"}, nil},
		{"string.fo", []string{"string.format"}, []string{"string.len"}},
		{"w:pu", []string{"w:put", "w:put_signal", "w:put_counter"}, []string{"w:get", "w:fill"}},
		{"b:fi", []string{"b:fill"}, []string{"b:free"}},
		{"w:", []string{"w:sync", "w:free", "w:barrier"}, []string{"w:fill"}},
		{"unknown:wait_s", []string{"unknown:wait_signal", "unknown:wait_signal_from"}, nil},
		{"luacoll.win", []string{"luacoll.window"}, nil},
		{"lc.all", []string{"lc.allgather"}, nil},
		{"he", []string{"help"}, nil},
	}
	for _, c := range cases {
		got := s.Complete(c.word)
		for _, w := range c.contains {
			if !slices.Contains(got, w) {
				t.Errorf("Complete(%q) = %q, missing %q", c.word, got, w)
			}
		}
		for _, w := range c.absent {
			if slices.Contains(got, w) {
				t.Errorf("Complete(%q) = %q, should not offer %q", c.word, got, w)
			}
		}
		if !slices.IsSorted(got) {
			t.Errorf("Complete(%q) = %q, not sorted", c.word, got)
		}
	}
}
