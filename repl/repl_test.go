package repl

import (
	"bufio"
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite the golden transcripts in testdata/repl")

// luacollBin is the luacoll binary built for these tests.
var luacollBin string

func TestMain(m *testing.M) {
	flag.Parse()
	dir, err := os.MkdirTemp("", "luacoll-repl-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	luacollBin = filepath.Join(dir, "luacoll")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	out, err := exec.CommandContext(ctx, "go", "build", "-o", luacollBin, "github.com/luacoll/luacoll").CombinedOutput()
	cancel()
	if err != nil {
		fmt.Fprintf(os.Stderr, "building luacoll: %v\n%s", err, out)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// Unit tests of the pieces.

func TestFormatRanks(t *testing.T) {
	for _, c := range []struct {
		in   []int
		want string
	}{
		{[]int{0}, "0"},
		{[]int{0, 1}, "0,1"},
		{[]int{0, 1, 2, 3}, "0-3"},
		{[]int{2, 0}, "0,2"},
		{[]int{0, 1, 2, 5}, "0-2,5"},
		{[]int{0, 2, 3, 4, 7, 8}, "0,2-4,7,8"},
		{nil, ""},
	} {
		if got := formatRanks(c.in); got != c.want {
			t.Errorf("formatRanks(%v) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestParseRanks(t *testing.T) {
	for _, c := range []struct {
		in   string
		want []int
		err  string
	}{
		{"0,2", []int{0, 2}, ""},
		{"1-3", []int{1, 2, 3}, ""},
		{"3, 0 ,1-2", []int{0, 1, 2, 3}, ""},
		{"2,2", []int{2}, ""},
		{"4", nil, "no rank 4 (the ranks are 0-3)"},
		{"0-100000000", nil, "no rank 4"},
		{"x", nil, "not a rank"},
		{"3-1", nil, "not a rank"},
		{"-1", nil, "not a rank"},
		{",", nil, "no ranks given"},
	} {
		got, err := parseRanks(c.in, 4)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("parseRanks(%q) error %v, want %q", c.in, err, c.err)
			}
			continue
		}
		if err != nil || !slices.Equal(got, c.want) {
			t.Errorf("parseRanks(%q) = %v, %v; want %v", c.in, got, err, c.want)
		}
	}
}

func render(gs []group) string {
	var b strings.Builder
	for _, g := range gs {
		for _, l := range g.lines {
			fmt.Fprintf(&b, "[%s] %s\n", formatRanks(g.ranks), l.text)
		}
	}
	return b.String()
}

func TestGroupReplies(t *testing.T) {
	rs := []reply{
		{rank: 3, values: []string{"42"}},
		{rank: 0, values: []string{"42"}},
		{rank: 1, output: "hello\nworld\n", values: []string{"a", "b"}},
		{rank: 2, values: []string{"42"}},
		{rank: 4},
		{rank: 5, err: "stdin:1: rank 5: w:put: bad argument 'peer'"},
		{rank: 6, err: "stdin:1: rank 6: w:put: bad argument 'peer'"},
		{rank: 7, err: "stdin:1: rank 7: w:sync: aborted: rank 1 failed"},
	}
	want := "" +
		"[0,2,3] 42\n" +
		"[1] hello\n[1] world\n[1] a\tb\n" +
		"[5,6] error: stdin:1: w:put: bad argument 'peer'\n" +
		"[7] error: stdin:1: rank 7: w:sync: aborted: rank 1 failed\n"
	if got := render(groupReplies(rs)); got != want {
		t.Errorf("grouped:\n%s\nwant:\n%s", got, want)
	}
	// An error is never merged with the same text printed.
	rs = []reply{{rank: 0, output: "error: x\n"}, {rank: 1, err: "x"}}
	if gs := groupReplies(rs); len(gs) != 2 {
		t.Errorf("output and error merged: %+v", gs)
	}
	// Only a rank's own "rank R: " after a position is dropped; another
	// rank's number stays.
	rs = []reply{
		{rank: 0, err: "stdin:1: rank 0: lc.barrier: rank 1 failed: bye"},
		{rank: 2, err: "stdin:1: rank 2: lc.barrier: rank 1 failed: bye"},
		{rank: 3, err: "stdin:1: lc.barrier: worker rank 3: x"},
		{rank: 4, err: "stdin:1: lc.barrier: worker rank 4: x"},
	}
	want = "[0,2] error: stdin:1: lc.barrier: rank 1 failed: bye\n" +
		"[3] error: stdin:1: lc.barrier: worker rank 3: x\n" +
		"[4] error: stdin:1: lc.barrier: worker rank 4: x\n"
	if got := render(groupReplies(rs)); got != want {
		t.Errorf("normalized:\n%s\nwant:\n%s", got, want)
	}
}

func TestCaptureLimit(t *testing.T) {
	c := &capture{limit: 10}
	fmt.Fprint(c, "12345")
	fmt.Fprint(c, "6789abcdef")
	got := c.take()
	if got != "123456789a\n(5 more bytes of output dropped)\n" {
		t.Errorf("take = %q", got)
	}
	if c.take() != "" {
		t.Error("take did not reset")
	}
}

func TestCompleteCommand(t *testing.T) {
	got, n := completeCommand(":r")
	if n != 2 || len(got) != 1 || string(got[0]) != "anks" {
		t.Errorf("completeCommand(:r) = %q, %d", got, n)
	}
	got, _ = completeCommand(":")
	if len(got) != len(commandNames()) {
		t.Errorf("completeCommand(:) = %q", got)
	}
	dir := t.TempDir()
	for _, f := range []string{"ring.lua", "ring.txt", "rings/"} {
		p := filepath.Join(dir, f)
		if strings.HasSuffix(f, "/") {
			if err := os.Mkdir(p, 0o755); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.WriteFile(p, nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, n = completeCommand(":load " + dir + "/ri")
	var names []string
	for _, g := range got {
		names = append(names, string(g))
	}
	if n != 2 || !slices.Equal(names, []string{"ng.lua", "ngs/"}) {
		t.Errorf("completeCommand(:load ri) = %q, %d", names, n)
	}
}

// Whole sessions through the binary.

// transcript is a golden session: sections "-- name --" hold the command
// line's flags (args), what is piped in (input), and what comes out
// (output, stderr, status).
type transcript struct {
	header   string
	sections map[string]string
}

var transcriptOrder = []string{"args", "input", "output", "stderr", "status"}

func parseTranscript(text string) (*transcript, error) {
	tr := &transcript{sections: map[string]string{}}
	cur := ""
	var b strings.Builder
	flush := func() {
		if cur == "" {
			tr.header = b.String()
		} else {
			tr.sections[cur] = b.String()
		}
		b.Reset()
	}
	for _, l := range strings.SplitAfter(text, "\n") {
		trimmed := strings.TrimSuffix(l, "\n")
		if strings.HasPrefix(trimmed, "-- ") && strings.HasSuffix(trimmed, " --") && len(trimmed) > 6 {
			flush()
			cur = strings.TrimSuffix(strings.TrimPrefix(trimmed, "-- "), " --")
			if !slices.Contains(transcriptOrder, cur) {
				return nil, fmt.Errorf("unknown section %q", cur)
			}
			continue
		}
		b.WriteString(l)
	}
	flush()
	if _, ok := tr.sections["input"]; !ok {
		return nil, fmt.Errorf("no input section")
	}
	return tr, nil
}

func (tr *transcript) String() string {
	var b strings.Builder
	b.WriteString(tr.header)
	for _, name := range transcriptOrder {
		text, ok := tr.sections[name]
		if !ok {
			continue
		}
		fmt.Fprintf(&b, "-- %s --\n%s", name, text)
	}
	return b.String()
}

// runSession runs `luacoll repl args` with input piped in.
func runSession(t *testing.T, dir string, env []string, args []string, input string) (stdout, stderr string, status int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, luacollBin, append([]string{"repl"}, args...)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdin = strings.NewReader(input)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	cmd.WaitDelay = 5 * time.Second
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("session did not end in time; output so far:\n%s\nstderr:\n%s", out.String(), errb.String())
	}
	status = 0
	if ee, ok := err.(*exec.ExitError); ok {
		status = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return out.String(), errb.String(), status
}

func TestGoldenTranscripts(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "testdata", "repl", "*.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no transcripts in testdata/repl")
	}
	for _, file := range files {
		t.Run(strings.TrimSuffix(filepath.Base(file), ".txt"), func(t *testing.T) {
			t.Parallel()
			raw, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			tr, err := parseTranscript(string(raw))
			if err != nil {
				t.Fatalf("%s: %v", file, err)
			}
			args := strings.Fields(tr.sections["args"])
			stdout, stderr, status := runSession(t, filepath.Dir(file), nil, args, tr.sections["input"])
			got := &transcript{header: tr.header, sections: map[string]string{
				"input": tr.sections["input"], "output": stdout, "status": fmt.Sprintf("%d\n", status)}}
			if a, ok := tr.sections["args"]; ok {
				got.sections["args"] = a
			}
			if stderr != "" {
				got.sections["stderr"] = stderr
			}
			if *update {
				if err := os.WriteFile(file, []byte(got.String()), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			if got.String() != string(raw) {
				t.Errorf("%s differs (go test ./repl -update rewrites it):\n--- got\n%s\n--- want\n%s", file, got, raw)
			}
		})
	}
}

// shmEntries lists the shared-memory segments of a job.
func shmEntries(t *testing.T, job string) []string {
	t.Helper()
	entries, err := os.ReadDir("/dev/shm")
	if err != nil {
		t.Skipf("no /dev/shm: %v", err)
	}
	var out []string
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), "luacoll-"+job+"-") {
			out = append(out, e.Name())
		}
	}
	return out
}

// jobProcesses lists the processes whose environment names the job.
func jobProcesses(job string) []string {
	procs, _ := filepath.Glob("/proc/[0-9]*/environ")
	var out []string
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		if bytes.Contains(b, []byte("\x00LUACOLL_JOB="+job+"\x00")) || bytes.HasPrefix(b, []byte("LUACOLL_JOB="+job+"\x00")) {
			out = append(out, filepath.Base(filepath.Dir(p)))
		}
	}
	return out
}

func TestSessionLeavesNothingBehind(t *testing.T) {
	tmp := t.TempDir()
	input := "w = lc.window{bytes = 4096}\nb = lc.buffer(64)\n" +
		"w:put((lc.rank + 1) % lc.size, 0, b, 0, 64); w:sync()\n" +
		":on 0\nprint(lc.info().job)\n"
	stdout, stderr, status := runSession(t, tmp, []string{"TMPDIR=" + tmp}, []string{"-n", "3"}, input)
	if status != 0 || stderr != "" {
		t.Fatalf("status %d, stderr %q, stdout:\n%s", status, stderr, stdout)
	}
	var job string
	for _, l := range strings.Split(stdout, "\n") {
		if rest, ok := strings.CutPrefix(l, "[0] "); ok {
			job = rest
		}
	}
	if job == "" {
		t.Fatalf("no job id in:\n%s", stdout)
	}
	if left := shmEntries(t, job); len(left) > 0 {
		t.Errorf("shared memory left behind: %v", left)
	}
	if left := jobProcesses(job); len(left) > 0 {
		t.Errorf("processes left behind: %v", left)
	}
	entries, _ := os.ReadDir(tmp)
	for _, e := range entries {
		t.Errorf("left in TMPDIR: %s", e.Name())
	}
}

func TestRefusesAnExternalLauncher(t *testing.T) {
	_, stderr, status := runSession(t, t.TempDir(), []string{"RANK=0", "WORLD_SIZE=1"}, nil, "")
	if status != 2 || !strings.Contains(stderr, "starts its own ranks") {
		t.Errorf("status %d, stderr %q", status, stderr)
	}
}

// liveSession is a piped session driven line by line.
type liveSession struct {
	t     *testing.T
	cmd   *exec.Cmd
	stdin io.WriteCloser
	outW  *io.PipeWriter
	lines chan string
	seen  []string
	errb  bytes.Buffer
}

func startSession(t *testing.T, ctx context.Context, args ...string) *liveSession {
	t.Helper()
	ls := &liveSession{t: t, lines: make(chan string, 100)}
	ls.cmd = exec.CommandContext(ctx, luacollBin, append([]string{"repl"}, args...)...)
	ls.cmd.Dir = t.TempDir()
	stdin, err := ls.cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	ls.stdin = stdin
	outR, outW := io.Pipe()
	ls.outW = outW
	ls.cmd.Stdout = outW
	ls.cmd.Stderr = &ls.errb
	ls.cmd.WaitDelay = 5 * time.Second
	if err := ls.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(outR)
		for sc.Scan() {
			ls.lines <- sc.Text()
		}
		close(ls.lines)
	}()
	return ls
}

func (ls *liveSession) send(line string) { fmt.Fprintln(ls.stdin, line) }

func (ls *liveSession) signal(sig os.Signal) {
	if err := ls.cmd.Process.Signal(sig); err != nil {
		ls.t.Fatal(err)
	}
}

// expect waits for an output line that contains want.
func (ls *liveSession) expect(want string, within time.Duration) {
	ls.t.Helper()
	timer := time.NewTimer(within)
	defer timer.Stop()
	for {
		select {
		case l, ok := <-ls.lines:
			if !ok {
				ls.t.Fatalf("output ended before %q; it was:\n%s", want, strings.Join(ls.seen, "\n"))
			}
			ls.seen = append(ls.seen, l)
			if strings.Contains(l, want) {
				return
			}
		case <-timer.C:
			ls.t.Fatalf("no %q within %v; the output:\n%s", want, within, strings.Join(ls.seen, "\n"))
		}
	}
}

// end closes the input and returns the exit status.
func (ls *liveSession) end() int {
	ls.stdin.Close()
	err := ls.cmd.Wait()
	ls.outW.Close()
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode()
	}
	if err != nil {
		ls.t.Fatal(err)
	}
	return 0
}

// TestCtrlCInterruptsAPipedSession sends SIGINT while a chunk waits on
// the stream: the wait ends long before its timeout and the session goes
// on with the stream usable.
func TestCtrlCInterruptsAPipedSession(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	defer cancel()
	ls := startSession(t, ctx, "-n", "2", "--timeout", "60s")
	ls.send(`w = lc.window{bytes = 64}; print("ready")`)
	ls.expect("[0,1] ready", 20*time.Second)
	ls.send(`w:wait_signal(0, ">=", 1); w:sync()`)
	time.Sleep(300 * time.Millisecond)
	start := time.Now()
	ls.signal(syscall.SIGINT)
	ls.expect("[0,1] error: stdin:1: w:sync: sync: interrupted", 10*time.Second)
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("the interrupt took %v", d)
	}
	ls.send(`w:signal((lc.rank + 1) % lc.size, 0); w:wait_signal(0, ">=", 1); w:sync(); return w:read_signal(0)`)
	ls.expect("[0,1] 1", 10*time.Second)
	// A pure Lua loop stops too.
	ls.send(`while true do end`)
	time.Sleep(300 * time.Millisecond)
	ls.signal(syscall.SIGINT)
	ls.expect("[0,1] error: stdin:1: interrupted", 10*time.Second)
	// An interrupted collective is reported as leaving the ranks out of step.
	ls.send(`if lc.rank == 1 then while true do end end; lc.barrier()`)
	time.Sleep(500 * time.Millisecond)
	ls.signal(syscall.SIGINT)
	ls.expect("[0] error: stdin:1: rank 0: lc.barrier: barrier(): bootstrap allgather #", 10*time.Second)
	ls.expect("the interrupt left a collective unfinished on rank 0", 10*time.Second)
	if status := ls.end(); status != 1 {
		t.Errorf("exit status %d, want 1 (chunks failed); stderr:\n%s", status, ls.errb.String())
	}
}

// TestSecondCtrlCKillsAStuckRank: a rank that does not stop on the
// interrupt (it is inside a command) is killed by a second Ctrl-C, and the
// session goes on with the others.
func TestSecondCtrlCKillsAStuckRank(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	defer cancel()
	ls := startSession(t, ctx, "-n", "2", "--timeout", "5s")
	ls.send(":on 1")
	ls.expect("chunks run on rank 1", 20*time.Second)
	ls.send(`os.execute("sleep 30")`)
	time.Sleep(300 * time.Millisecond)
	ls.signal(syscall.SIGINT)
	ls.expect("waiting for rank 1 to stop; Ctrl-C again kills it", 10*time.Second)
	ls.signal(syscall.SIGINT)
	ls.expect("rank 1 died (killed: it did not stop after the interrupt); rank 0 is alive; "+
		"collectives and window waits now fail on every rank, local Lua still works", 10*time.Second)
	ls.send(":all")
	ls.send("lc.rank")
	ls.expect("[0] 0", 10*time.Second)
	if status := ls.end(); status != 1 {
		t.Errorf("exit status %d, want 1 (a rank died); stderr:\n%s", status, ls.errb.String())
	}
}

// A rank that dies while the session waits for input is announced at
// once, not after the next line.
func TestDeathAnnouncedAtOnce(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	defer cancel()
	ls := startSession(t, ctx, "-n", "3", "--timeout", "5s")
	ls.send(`if lc.rank == 1 then os.execute("(sleep 1; kill -9 $PPID) >/dev/null 2>&1 &") end; print("armed")`)
	ls.expect("[0-2] armed", 20*time.Second)
	start := time.Now()
	ls.expect("rank 1 died (its process ended or dropped the connection); ranks 0,2 are alive", 10*time.Second)
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("announced after %v", d)
	}
	ls.send("lc.rank")
	ls.expect("[0] 0", 10*time.Second)
	if status := ls.end(); status != 1 {
		t.Errorf("exit status %d, want 1 (a rank died); stderr:\n%s", status, ls.errb.String())
	}
}

func TestSplitArgs(t *testing.T) {
	for _, c := range []struct {
		in   string
		want []string
		err  string
	}{
		{"f.lua a b", []string{"f.lua", "a", "b"}, ""},
		{`  f.lua  "a b"  'c d' e"f g"h `, []string{"f.lua", "a b", "c d", "ef gh"}, ""},
		{`"" x`, []string{"", "x"}, ""},
		{`"a \"q\" \\ b"`, []string{`a "q" \ b`}, ""},
		{`'it''s'`, []string{"its"}, ""},
		{`f.lua "open`, nil, `unclosed "`},
		{"", nil, ""},
	} {
		got, err := splitArgs(c.in)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%q: error %v, want %q", c.in, err, c.err)
			}
			continue
		}
		if err != nil || !slices.Equal(got, c.want) {
			t.Errorf("%q: got %q, %v; want %q", c.in, got, err, c.want)
		}
	}
}

// FuzzSplitArgs: splitting never panics, and text without quotes or
// backslashes splits at spaces and tabs only.
func FuzzSplitArgs(f *testing.F) {
	for _, s := range []string{"f.lua a b", `"a b" 'c'`, `"\`, `'`, `a"b"c`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, err := splitArgs(s)
		if strings.ContainsAny(s, "\"'\\") {
			return
		}
		want := strings.FieldsFunc(s, func(r rune) bool { return r == ' ' || r == '\t' })
		if err != nil || len(got) != len(want) || (len(want) > 0 && !slices.Equal(got, want)) {
			t.Fatalf("%q: %q, %v; want %q", s, got, err, want)
		}
	})
}

// TestQuitShowsWhereEachRankIs: Ctrl-\ (SIGQUIT) while a chunk is stuck
// makes each rank print its Lua traceback and the wait it is in, with its
// Go stacks in a file it names, not Go's dump; the session then ends.
func TestQuitShowsWhereEachRankIs(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	defer cancel()
	ls := startSession(t, ctx, "-n", "2", "--timeout", "60s")
	ls.send(`w = lc.window{bytes = 64}; print("ready")`)
	ls.expect("[0,1] ready", 20*time.Second)
	ls.send(`local function step() if lc.rank == 0 then w:wait_signal(0, ">=", 1); w:sync() end; while true do end end; step()`)
	time.Sleep(300 * time.Millisecond)
	ls.signal(syscall.SIGQUIT)
	ls.expect("SIGQUIT: each rank showed where it was", 15*time.Second)
	status := ls.end()
	out := ls.errb.String()
	if status != 1 {
		t.Errorf("exit status %d, want 1; stderr:\n%s", status, out)
	}
	for _, want := range []string{"luacoll: SIGQUIT",
		"[0] stdin:1: rank 0: w:sync: window 0: wait_signal(sig 0, sum over all peers) >= 1 (enqueued at stdin:1): " +
			"aborted: SIGQUIT (where each rank is); last value seen 0",
		"[0] \tstdin:1: in function 'step'",
		"[1] rank 1: stdin:1: SIGQUIT (where each rank is)",
		"[1] \tstdin:1: in function 'step'"} {
		if !strings.Contains(out, want) {
			t.Errorf("stderr lacks %q:\n%.3000s", want, out)
		}
	}
	if strings.Contains(out, "goroutine 1 ") {
		t.Errorf("the Go runtime's dump is on stderr:\n%.3000s", out)
	}
	files := regexp.MustCompile(`\[(\d)\] rank \d: Go stacks: (\S+)`).FindAllStringSubmatch(out, -1)
	if len(files) != 2 {
		t.Fatalf("%d ranks named their Go stacks' file:\n%s", len(files), out)
	}
	for _, f := range files {
		b, err := os.ReadFile(f[2])
		if err != nil || !strings.Contains(string(b), "repl.(*worker)") {
			t.Errorf("rank %s: Go stacks %s: %v\n%.500s", f[1], f[2], err, b)
		}
		os.Remove(f[2])
	}
}
