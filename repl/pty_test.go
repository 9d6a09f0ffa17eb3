package repl

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// tmuxSession drives the REPL in a real terminal: a detached tmux session
// on a private server.
type tmuxSession struct {
	t    *testing.T
	sock string
}

func (m *tmuxSession) run(args ...string) string {
	m.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "tmux", append([]string{"-S", m.sock, "-f", "/dev/null"}, args...)...)
	cmd.Env = append(os.Environ(), "TMUX=")
	out, err := cmd.CombinedOutput()
	if err != nil {
		m.t.Fatalf("tmux %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

func (m *tmuxSession) screen() string { return m.run("capture-pane", "-p", "-t", "repl") }

// keys sends literal text, then named keys (Enter, Tab, C-c, C-d).
func (m *tmuxSession) keys(text string, named ...string) {
	m.t.Helper()
	if text != "" {
		m.run("send-keys", "-t", "repl", "-l", text)
	}
	for _, k := range named {
		m.run("send-keys", "-t", "repl", k)
	}
}

// lastLine is the last non-empty line on the screen.
func lastLine(screen string) string {
	lines := strings.Split(strings.TrimRight(screen, "\n "), "\n")
	return strings.TrimRight(lines[len(lines)-1], " ")
}

// waitFor polls the screen until ok holds.
func (m *tmuxSession) waitFor(what string, within time.Duration, ok func(screen string) bool) string {
	m.t.Helper()
	deadline := time.Now().Add(within)
	for {
		s := m.screen()
		if ok(s) {
			return s
		}
		if time.Now().After(deadline) {
			m.t.Fatalf("no %s within %v; the screen:\n%s", what, within, s)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (m *tmuxSession) waitPrompt(what string) string {
	m.t.Helper()
	return m.waitFor(what, 15*time.Second, func(s string) bool { return lastLine(s) == ">" })
}

func TestTerminalSession(t *testing.T) {
	if _, err := exec.LookPath("tmux"); err != nil {
		t.Skip("tmux is not installed")
	}
	dir := t.TempDir()
	home := filepath.Join(dir, "home")
	if err := os.Mkdir(home, 0o700); err != nil {
		t.Fatal(err)
	}
	m := &tmuxSession{t: t, sock: filepath.Join(dir, "tmux.sock")}
	cmdline := fmt.Sprintf("env HOME='%s' '%s' repl -n 2 --timeout 60s", home, luacollBin)
	m.run("new-session", "-d", "-s", "repl", "-x", "120", "-y", "50", cmdline)
	t.Cleanup(func() { _ = exec.Command("tmux", "-S", m.sock, "kill-server").Run() })
	m.run("set-option", "-t", "repl", "remain-on-exit", "on")

	s := m.waitPrompt("first prompt")
	if !strings.Contains(s, "luacoll repl: 2 ranks on host") {
		t.Errorf("no banner:\n%s", s)
	}

	// Tab completes globals, then methods of a window. (Keys that come
	// before the line editor has the terminal again, on a loaded machine,
	// are echoed by the terminal too, before the prompt: the line ends
	// with the completion.)
	m.keys("prin", "Tab")
	m.waitFor("completion of prin", 5*time.Second, func(s string) bool { return strings.HasSuffix(lastLine(s), "> print") })
	m.keys("(lc.rank + 1)", "Enter")
	m.waitFor("answers", 10*time.Second, func(s string) bool {
		return strings.Contains(s, "[0] 1\n[1] 2") && lastLine(s) == ">"
	})
	m.keys("w = lc.window{bytes = 64}", "Enter")
	m.waitPrompt("prompt after the window")
	m.keys("w:wait_s", "Tab")
	m.waitFor("completion of w:wait_s", 5*time.Second, func(s string) bool { return strings.HasSuffix(lastLine(s), "> w:wait_signal") })

	// Ctrl-C interrupts a wait that would last the whole 60s timeout.
	m.keys(`(0, ">=", 1); w:sync()`, "Enter")
	time.Sleep(500 * time.Millisecond)
	if l := lastLine(m.screen()); l == ">" {
		t.Fatalf("the wait ended by itself; screen:\n%s", m.screen())
	}
	start := time.Now()
	m.keys("", "C-c")
	s = m.waitFor("the interrupt", 10*time.Second, func(s string) bool {
		return strings.Contains(s, "[0,1] error: stdin:1: w:sync:") && strings.Contains(s, "interrupted") && lastLine(s) == ">"
	})
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("the interrupt took %v", d)
	}
	if strings.Contains(s, "stream broken") {
		t.Errorf("the stream was left broken:\n%s", s)
	}

	// The stream works after the interrupt, and chunks continue on >>.
	m.keys("w:signal((lc.rank + 1) % lc.size, 0); w:wait_signal(0, \">=\", 1); w:sync(); return w:read_signal(0)", "Enter")
	m.waitFor("a signal after the interrupt", 10*time.Second, func(s string) bool { return strings.Contains(s, "[0,1] 1\n") })
	m.keys("for i = 1, 2 do", "Enter")
	m.waitFor("the continuation prompt", 5*time.Second, func(s string) bool { return lastLine(s) == ">>" })
	m.keys("print(i * 10) end", "Enter")
	m.waitFor("the loop's output", 10*time.Second, func(s string) bool {
		return strings.Contains(s, "[0,1] 10\n[0,1] 20") && lastLine(s) == ">"
	})

	// Tables show their contents.
	m.keys(`{1, {a = "x"}, n = lc.rank}`, "Enter")
	m.waitFor("a table", 10*time.Second, func(s string) bool {
		return strings.Contains(s, "[0] {1, {a = \"x\"}, n = 0}\n[1] {1, {a = \"x\"}, n = 1}") && lastLine(s) == ">"
	})
	// A rank that dies while the prompt waits is announced above it.
	m.keys(`if lc.rank == 1 then os.execute("(sleep 1; kill -9 $PPID) >/dev/null 2>&1 &") end`, "Enter")
	m.waitFor("the death of rank 1, with no key pressed", 10*time.Second, func(s string) bool {
		return strings.Contains(s, "rank 1 died (its process ended or dropped the connection); rank 0 is alive") && lastLine(s) == ">"
	})

	// Ctrl-C at the prompt drops the line; Ctrl-D ends the session.
	m.keys("not run", "C-c")
	m.waitPrompt("prompt after Ctrl-C")
	m.keys("", "C-d")
	// tmux may see the terminal close before it learns the exit status.
	m.waitFor("the end of the session", 15*time.Second, func(string) bool {
		return strings.HasPrefix(m.run("display-message", "-p", "-t", "repl", "#{pane_dead}"), "1")
	})
	for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		f := strings.Fields(m.run("display-message", "-p", "-t", "repl", "#{pane_dead_status} #{pane_dead_signal}"))
		if len(f) > 0 {
			if len(f) != 1 || f[0] != "0" {
				t.Errorf("the session ended with status/signal %q, want status 0", f)
			}
			break
		}
	}
	hist, err := os.ReadFile(filepath.Join(home, ".luacoll_history"))
	if err != nil || !strings.Contains(string(hist), "w = lc.window{bytes = 64}") {
		t.Errorf("history: %q, %v", hist, err)
	}
	if strings.Contains(string(hist), "not run") {
		t.Errorf("an interrupted line went into the history: %q", hist)
	}
}

// At a terminal, Ctrl-\ while a chunk is stuck shows each rank's Lua
// traceback and wait, not Go's dump, and ends the session with status 1.
func TestTerminalCtrlBackslash(t *testing.T) {
	if _, err := exec.LookPath("tmux"); err != nil {
		t.Skip("tmux is not installed")
	}
	dir := t.TempDir()
	m := &tmuxSession{t: t, sock: filepath.Join(dir, "tmux.sock")}
	cmdline := fmt.Sprintf("env HOME='%s' '%s' repl -n 2 --timeout 60s", dir, luacollBin)
	m.run("new-session", "-d", "-s", "repl", "-x", "200", "-y", "50", cmdline)
	t.Cleanup(func() { _ = exec.Command("tmux", "-S", m.sock, "kill-server").Run() })
	m.run("set-option", "-t", "repl", "remain-on-exit", "on")
	m.waitPrompt("first prompt")
	m.keys(`w = lc.window{bytes = 64}; w:wait_signal(0, ">=", 1); w:sync()`, "Enter")
	time.Sleep(500 * time.Millisecond)
	m.keys("", `C-\`)
	s := m.waitFor("the ranks' reports", 15*time.Second, func(s string) bool {
		return strings.Contains(s, "SIGQUIT: each rank showed where it was")
	})
	for _, want := range []string{`\[0\] stdin:1: rank 0: w:sync: window 0: wait_signal\(sig 0, sum over all peers\) >= 1 .*aborted: SIGQUIT`,
		`\[1\] stdin:1: rank 1: w:sync: window 0: wait_signal\(sig 0, sum over all peers\) >= 1 .*aborted: SIGQUIT`,
		`\[0\]\s+stdin:1: in main chunk`, `\[1\]\s+stdin:1: in main chunk`} {
		if !regexp.MustCompile(want).MatchString(s) {
			t.Errorf("the screen lacks %s:\n%s", want, s)
		}
	}
	if strings.Contains(s, "goroutine ") || strings.Contains(s, "died") {
		t.Errorf("Go's dump or a death notice is on the screen:\n%s", s)
	}
	for _, f := range regexp.MustCompile(`Go stacks: (\S+)`).FindAllStringSubmatch(s, -1) {
		os.Remove(f[1])
	}
	m.waitFor("the end of the session", 15*time.Second, func(string) bool {
		return strings.HasPrefix(m.run("display-message", "-p", "-t", "repl", "#{pane_dead}"), "1")
	})
	for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if f := strings.Fields(m.run("display-message", "-p", "-t", "repl", "#{pane_dead_status}")); len(f) > 0 {
			if f[0] != "1" {
				t.Errorf("the session ended with status %q, want 1", f)
			}
			break
		}
	}
}
