package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/luacoll/luacoll/engine"
	"github.com/luacoll/luacoll/engine/bootstrap"
	"github.com/luacoll/luacoll/engine/launch"
	"github.com/luacoll/luacoll/transport"
	"github.com/luacoll/luacoll/window"
)

// TestBenchRowsAsMeasured: bench put prints each size's row as soon as it
// is measured, and a sweep stopped at a later size keeps the rows it
// finished. The 1 KiB row must arrive while the 64 MiB size is still
// being measured (100 iterations of 64 MiB puts and copies: seconds), and
// stay on the output when the run is interrupted then.
func TestBenchRowsAsMeasured(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "bench", "put", "-n", "2", "-b", "1K", "-e", "64M", "-f", "65536", "--iters", "100")
	cmd.Env = cleanEnv()
	var e bytes.Buffer
	cmd.Stderr = &e
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	lines := make(chan string)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	var got []string
	sawRow := false
	for l := range lines {
		got = append(got, l)
		if f := strings.Fields(l); len(f) == 6 && f[0] == "1024" {
			sawRow = true
			break
		}
	}
	if !sawRow {
		_ = cmd.Wait()
		t.Fatalf("no 1 KiB row:\n%s\n%s", strings.Join(got, "\n"), e.String())
	}
	go func() { _ = cmd.Wait(); close(exited) }()
	select {
	case <-exited:
		t.Fatalf("the first row came only when the whole sweep had ended:\n%s", strings.Join(got, "\n"))
	default:
	}
	_ = cmd.Process.Signal(os.Interrupt)
	for l := range lines {
		got = append(got, l)
	}
	<-exited
	all := strings.Join(got, "\n")
	if strings.Contains(all, "67108864") {
		t.Errorf("the 64 MiB size finished before the interrupt; the test proves nothing:\n%s", all)
	}
	if !strings.Contains(all, "# luacoll bench put") {
		t.Errorf("header missing:\n%s", all)
	}
}

// TestTyposNamed: in a script, a misspelled method or lc. function is
// named with the object it was looked up on and the closest name.
func TestTyposNamed(t *testing.T) {
	for _, c := range []struct{ line, want string }{
		{"w:put_sgnal(1, 0)", ":3: window has no method put_sgnal; did you mean put_signal?"},
		{"lc.windw{bytes = 8}", ":3: luacoll (lc) has no field windw; did you mean window?"},
		{"w:nosuch()", ":3: window has no method nosuch\n"},
	} {
		s := writeScript(t, "local lc = require(\"luacoll\")\nlocal w = lc.window{ bytes = 64 }\n"+c.line+"\n")
		r := luacoll(t, nil, "run", "-n", "1", s)
		if r.code == 0 || !strings.Contains(r.stderr, c.want) {
			t.Errorf("%s: exit %d, stderr lacks %q:\n%s", c.line, r.code, c.want, r.stderr)
		}
	}
}

// TestTimeoutReportedOnce: a wait that times out is reported once, by the
// rank that waited, naming that rank once, with a hint at --timeout; the
// rank it stopped says nothing of its own.
func TestTimeoutReportedOnce(t *testing.T) {
	s := writeScript(t, `local lc = require("luacoll")
local w = lc.window{ bytes = 64 }
local long = lc.window{ bytes = 64, timeout_ms = 60000 }
if lc.rank == 0 then w:wait_signal(0, ">=", 1); w:sync() end
long:wait_signal(0, ">=", 1)
long:sync()`)
	r := luacoll(t, nil, "run", "-n", "2", "--timeout", "300ms", s)
	if r.code != 1 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	var own []string
	for _, l := range strings.Split(r.stderr, "\n") {
		if strings.HasPrefix(l, "[0] ") {
			own = append(own, l)
		}
	}
	if len(own) != 2 || !strings.Contains(own[0], "timed out after 300ms") || strings.Count(own[0], "rank 0: ") != 1 {
		t.Errorf("rank 0 does not say its timeout once, naming itself once:\n%s", r.stderr)
	}
	if l := rowAfter(r.stderr, "[1]"); l != nil && !strings.Contains(strings.Join(l, " "), "rank 0 failed") {
		t.Errorf("rank 1 gave a cause of its own:\n%s", r.stderr)
	}
	if !strings.Contains(r.stderr, "--timeout (300ms in this run)") {
		t.Errorf("no hint at --timeout:\n%s", r.stderr)
	}
	// A window's own timeout_ms is not --timeout's: no hint then.
	s = writeScript(t, `local lc = require("luacoll")
local w = lc.window{ bytes = 64, timeout_ms = 200 }
if lc.rank == 0 then w:wait_signal(0, ">=", 1) else os.execute("sleep 1") end
w:sync()`)
	r = luacoll(t, nil, "run", "-n", "2", "--timeout", "5s", s)
	if r.code != 1 || !strings.Contains(r.stderr, "timed out after 200ms") || strings.Contains(r.stderr, "hint") {
		t.Errorf("timeout_ms: exit %d\n%s", r.code, r.stderr)
	}
}

// TestBenchFailureReportedOnce: a bench rank's failure names the rank
// once and hints at --timeout after a timeout; a rank stopped by another
// rank's failure gives way to it (says nothing under luacoll's launcher,
// one line under another).
func TestBenchFailureReportedOnce(t *testing.T) {
	comm := &engine.Comm{Abort: transport.NewAbort()}
	var b strings.Builder
	we := &window.WaitError{Rank: 1, Window: 0, Op: "barrier(id 0, epoch 2, every peer)", Cond: ">= 2", Msg: "timed out after 10s", Observed: 1}
	code := reportRankFailure(&b, "luacoll bench put", launch.RankEnv{Rank: 1, Source: launch.SourceLuacoll}, comm, we, 10*time.Second)
	want := "luacoll bench put: rank 1: window 0: barrier(id 0, epoch 2, every peer) >= 2: timed out after 10s; last value seen 1\n" +
		"luacoll bench put: hint: waits and bootstrap calls give up after --timeout (10s in this run); a busy machine or a large size may need more, e.g. --timeout 30s\n"
	if code != 1 || b.String() != want {
		t.Errorf("timeout: exit %d\n%s\nwant\n%s", code, b.String(), want)
	}
	peer := fmt.Errorf("bench.put.check: bootstrap allgather: %w", &bootstrap.RankError{Rank: 1, Reason: "window 0: timed out"})
	for _, c := range []struct {
		source string
		want   string
	}{{launch.SourceLuacoll, ""}, {launch.SourceOpenMPI, "luacoll bench put: rank 0: stopped: rank 1 failed\n"}} {
		b.Reset()
		code = reportRankFailure(&b, "luacoll bench put", launch.RankEnv{Rank: 0, Source: c.source}, comm, peer, 10*time.Second)
		if code != launch.ExitPeerFailed || b.String() != c.want {
			t.Errorf("%v: stopped by rank 1: exit %d, said %q, want %q", c.source, code, b.String(), c.want)
		}
	}
}

// TestNeighbourHabits: -np as mpirun writes it, -e CODE as lua -e (alone
// or before a script), lc as a global in scripts as in the REPL, and size
// flags that bench pingpong and barrier would ignore are refused.
func TestNeighbourHabits(t *testing.T) {
	r := luacoll(t, nil, "run", "-np", "2", "-e", "print('rank', lc.rank, lc.size)")
	if r.code != 0 || !strings.Contains(r.stdout, "[0] rank\t0\t2") || !strings.Contains(r.stdout, "[1] rank\t1\t2") {
		t.Errorf("run -np 2 -e: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	s := writeScript(t, "print(x, arg[1], lc.rank)\n") // no require: lc is a global
	r = luacoll(t, nil, "run", "-e", "x = 41", "-e", "x = x + 1", s, "a")
	if r.code != 0 || strings.TrimSpace(r.stdout) != "[0] 42\ta\t0" {
		t.Errorf("run -e -e script: exit %d\n%q\n%s", r.code, r.stdout, r.stderr)
	}
	r = luacoll(t, nil, "run", "-e", "x = = 1")
	if r.code != 1 || !strings.Contains(r.stderr, "-e: (command line):1: syntax error") {
		t.Errorf("run -e with a syntax error: exit %d\n%s", r.code, r.stderr)
	}
	r = luacoll(t, nil, "run", "-e", "error('boom')")
	if r.code != 1 || !strings.Contains(r.stderr, "(command line):1: boom") {
		t.Errorf("run -e error: exit %d\n%s", r.code, r.stderr)
	}
	// lc.log's format errors name lc.log and the argument; a string too
	// large for memory is a Lua error, not the runtime's abort.
	for code, want := range map[string]string{
		`lc.log("%d %s", "abc")`: "rank 0: lc.log: bad argument #2 (number expected, got string)",
		`lc.log(nil)`:            "rank 0: lc.log: bad argument #1 'fmt' (string expected, got nil)",
		`string.rep("x", 2^40)`:  "string.rep: 1099511627776 copies of 1 bytes",
	} {
		r = luacoll(t, nil, "run", "-e", code)
		if r.code != 1 || !strings.Contains(r.stderr, want) || strings.Contains(r.stderr, "goroutine ") {
			t.Errorf("run -e %s: exit %d\n%s", code, r.code, r.stderr)
		}
	}
	for _, args := range [][]string{{"pingpong", "-b", "8", "-e", "1M"}, {"barrier", "-f", "2"}} {
		r = luacoll(t, nil, append([]string{"bench"}, args...)...)
		if r.code != 2 || !strings.Contains(r.stderr, "sweeps no sizes") || r.stdout != "" {
			t.Errorf("bench %v: exit %d, want a refusal\n%s\n%s", args, r.code, r.stdout, r.stderr)
		}
	}
	// What the ranks could only refuse once started is refused first.
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"bench", "pingpong", "--iters", "0"}, "--iters 0: must be positive"},
		{[]string{"bench", "put", "-n", "1"}, "-n 1: bench put needs at least 2 ranks"},
		{[]string{"bench", "allgather", "--algo", "lua:ring", "--plan-mode", "device"}, "--plan-mode device needs --device cuda"},
	} {
		r = luacoll(t, nil, c.args...)
		if r.code != 2 || !strings.Contains(r.stderr, c.want) || r.stdout != "" {
			t.Errorf("%v: exit %d, want 2 and %q\n%s\n%s", c.args, r.code, c.want, r.stdout, r.stderr)
		}
	}
}

// TestOutputDetails: every command's help goes to stdout (so | less
// works) and a bad flag's to stderr; info --json has snake_case keys
// only; a host all-gather bench says "baseline: none" when none was asked
// for, and its plot's title does not say "graph false".
func TestOutputDetails(t *testing.T) {
	for _, args := range [][]string{{"help", "run"}, {"help", "repl"}, {"help", "check"}, {"help", "info"}, {"help", "docs"},
		{"help", "clean"}, {"help", "bench"}, {"bench", "allgather", "--help"}, {"bench", "put", "-h"}, {"run", "--help"}} {
		r := luacoll(t, nil, args...)
		if r.code != 0 || r.stderr != "" || !strings.Contains(r.stdout, "Usage: ") {
			t.Errorf("%v: exit %d, stdout %.80q, stderr %.200q", args, r.code, r.stdout, r.stderr)
		}
	}
	r := luacoll(t, nil, "run", "--no-such-flag")
	if r.code != 2 || r.stdout != "" || !strings.Contains(r.stderr, "flag provided but not defined: -no-such-flag") || !strings.Contains(r.stderr, "Usage: ") {
		t.Errorf("bad flag: exit %d, stdout %q, stderr %.200q", r.code, r.stdout, r.stderr)
	}

	r = luacoll(t, nil, "info", "--json")
	var v any
	if err := json.Unmarshal([]byte(r.stdout), &v); r.code != 0 || err != nil {
		t.Fatalf("info --json: exit %d, %v\n%s", r.code, err, r.stdout)
	}
	snake := regexp.MustCompile(`^[a-z][a-z0-9_]*$`)
	var walk func(path string, v any)
	walk = func(path string, v any) {
		switch x := v.(type) {
		case map[string]any:
			for k, e := range x {
				if !snake.MatchString(k) {
					t.Errorf("info --json: key %s.%s is not snake_case", path, k)
				}
				walk(path+"."+k, e)
			}
		case []any:
			for _, e := range x {
				walk(path+"[]", e)
			}
		}
	}
	walk("", v)

	svg := filepath.Join(t.TempDir(), "ag.svg")
	r = luacoll(t, nil, "bench", "allgather", "-n", "2", "-b", "1K", "-e", "4K", "--iters", "5", "--plot", svg)
	if r.code != 0 || !strings.Contains(r.stdout, "# baseline: none (--vs nccl, mpi or direct adds one)\n") || strings.Contains(r.stdout, "not requested") {
		t.Errorf("bench allgather: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	b, err := os.ReadFile(svg)
	if err != nil || !strings.Contains(string(b), "all-gather busbw, 2 ranks, host") || strings.Contains(string(b), "graph false") {
		t.Errorf("plot title: %v\n%.600s", err, b)
	}
}

// TestReadmeCommandParsing: the README's command lines are found with
// their comments cut and continuation lines joined, and alternatives
// expand to each command.
func TestReadmeCommandParsing(t *testing.T) {
	text := "Text\n\n    bin/luacoll run -n 4 a.lua   # four ranks\n    bin/luacoll repl -e 'x = 1 # not a comment' # one\n" +
		"    make test\n    mpirun -np 8 -H a:4,b:4 \\\n        bin/luacoll run s.lua   # two hosts\nbin/luacoll not indented\n"
	got := readmeCommands(text)
	want := []readmeLine{{3, "bin/luacoll run -n 4 a.lua"}, {4, "bin/luacoll repl -e 'x = 1 # not a comment'"}, {6, "mpirun -np 8 -H a:4,b:4 bin/luacoll run s.lua"}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("got %v\nwant %v", got, want)
	}
	if got := expandReadme("bin/luacoll bench put|pingpong -n 2"); fmt.Sprint(got) != "[bin/luacoll bench put -n 2 bin/luacoll bench pingpong -n 2]" {
		t.Errorf("alternatives: %q", got)
	}
	if got := expandReadme("bin/luacoll help [command]"); fmt.Sprint(got) != "[bin/luacoll help bin/luacoll help run]" {
		t.Errorf("[command]: %q", got)
	}
}
