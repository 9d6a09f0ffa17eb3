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
		{"1 +", true}, // a bare expression cut after an operator
		{"lc.rank +", true},
		{"1 + + 2", false},
		{"x = 'abc' ..", true},
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

// Tables show their contents like a pretty printer: the list part in
// order, then the other keys sorted, nested tables inside, strings quoted;
// a table inside itself is marked, not followed; long and deep tables are
// cut with a count of what is left out. A __tostring metamethod wins.
func TestEvalPrettyPrintsTables(t *testing.T) {
	s, _ := newChunkState(t, 3*time.Second)
	ctx := context.Background()
	for _, c := range []struct{ chunk, want string }{
		{"{}", "{}"},
		{"{1, 2, 3}", "{1, 2, 3}"},
		{`{1, "two", x = 1, [10] = true, b = {c = "d"}, [2.5] = false}`, `{1, "two", [2.5] = false, [10] = true, b = {c = "d"}, x = 1}`},
		{`{["a key"] = 1, ["end"] = 2, ok_1 = 3}`, `{["a key"] = 1, ["end"] = 2, ok_1 = 3}`},
		{"(function() local t = {1}; t.self = t; t.sub = {up = t}; return t end)()", "{1, self = <cycle>, sub = {up = <cycle>}}"},
		{"(function() local s = {1}; return {s, s} end)()", "{{1}, {1}}"}, // shared, not a cycle
		{"{{{{{1}}}}}", "{{{{{...}}}}}"},
		{"(function() local t = {}; for i = 1, 30 do t[i] = i end; return t end)()",
			"{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, ... (10 more)}"},
		{`{s = "a\nb\"c"}`, `{s = "a\nb\"c"}`},
		{"setmetatable({}, {__tostring = function() return 'custom' end})", "custom"},
		{"{luacoll.window}", "{<function>}"},
	} {
		got, err := s.Eval(ctx, c.chunk, "stdin")
		if err != nil || len(got) != 1 || got[0] != c.want {
			t.Errorf("%s: got %q, %v; want %q", c.chunk, got, err, c.want)
		}
	}
	// Very long output is cut too.
	got, err := s.Eval(ctx, "(function() local t = {}; for i = 1, 20 do t['key' .. i] = string.rep('x', 300) end; return t end)()", "stdin")
	if err != nil || len(got) != 1 || len(got[0]) > 2500 || !strings.HasSuffix(got[0], "...}") {
		t.Errorf("long table: %d bytes, %v: %.80q...", len(got[0]), err, got)
	}
}

// EvalScript runs a file as lua does: arg holds its name and arguments,
// ... its arguments, and what it returns is shown.
func TestEvalScriptArgs(t *testing.T) {
	s, out := newChunkState(t, 3*time.Second)
	ctx := context.Background()
	got, err := s.EvalScript(ctx, "local a, b = ...\nprint(arg[0], #arg, arg[1], arg[2], a, b)\nreturn a .. b", "f.lua", []string{"x", "y"})
	if err != nil || !slices.Equal(got, []string{"xy"}) || out.String() != "f.lua\t2\tx\ty\tx\ty\n" {
		t.Errorf("got %q, %v, output %q", got, err, out.String())
	}
	got, err = s.Eval(ctx, "#arg, arg[0]", "stdin")
	if err != nil || !slices.Equal(got, []string{"2", "f.lua"}) {
		t.Errorf("arg after the script: %q, %v", got, err)
	}
	if _, err := s.EvalScript(ctx, "x = = 1", "bad.lua", nil); err == nil || err.Error() != "bad.lua:1: syntax error near '='" {
		t.Errorf("syntax error: %v", err)
	}
}

// ChunkSyntax finds a chunk's syntax error as Eval would report it,
// without a rank, and accepts what Eval runs.
func TestChunkSyntax(t *testing.T) {
	for _, c := range []struct{ chunk, want string }{
		{"1 + 1", ""},
		{"x = 1", ""},
		{"=x", ""},
		{"x = = 1", "stdin:1: syntax error near '='"},
		{"for i = 1, 2 do", "stdin:1: syntax error near <eof>"},
	} {
		err := ChunkSyntax(c.chunk, "stdin")
		if (err == nil) != (c.want == "") || (err != nil && err.Error() != c.want) {
			t.Errorf("%q: %v, want %q", c.chunk, err, c.want)
		}
	}
	if err := ScriptSyntax("x = = 1\n", "f.lua"); err == nil || err.Error() != "f.lua:1: syntax error near '='" {
		t.Errorf("ScriptSyntax: %v", err)
	}
	if err := ScriptSyntax("#!/usr/bin/env luacoll\nx = = 1\n", "f.lua"); err == nil || err.Error() != "f.lua:2: syntax error near '='" {
		t.Errorf("ScriptSyntax after #!: %v", err)
	}
	if err := ScriptSyntax("\uFEFF#!/usr/bin/env luacoll\nx = 1\n", "f.lua"); err != nil {
		t.Errorf("ScriptSyntax with a BOM and #!: %v", err)
	}
}
