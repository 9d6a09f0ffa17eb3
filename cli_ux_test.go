package main

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
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
