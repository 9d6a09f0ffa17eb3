package main

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// loopScript makes and frees windows for ever, after saying its job id and
// that it loops (files in arg[1]).
const loopScript = `local lc = require("luacoll")
local function mark(name, text) local f = io.open(arg[1] .. "/" .. name, "w"); f:write(text); f:close() end
mark("job", lc.info().job)
lc.barrier()
mark("looping" .. lc.rank, "")
while true do local w = lc.window{ bytes = 1048576 }; w:free() end`

// waitFiles waits until every named file exists in dir.
func waitFiles(t *testing.T, dir string, names ...string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for _, n := range names {
		for {
			if _, err := os.Stat(filepath.Join(dir, n)); err == nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s never appeared in %s", n, dir)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// waitGone waits until the processes have ended.
func waitGone(t *testing.T, pids ...int) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for _, pid := range pids {
		for syscall.Kill(pid, 0) == nil {
			if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err == nil && strings.Contains(string(b), ") Z ") {
				break // a zombie: it has ended
			}
			if time.Now().After(deadline) {
				t.Fatalf("process %d still runs", pid)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// jobLeftovers lists what job left in /dev/shm and dir (its TMPDIR).
func jobLeftovers(t *testing.T, dir, tmp string) []string {
	t.Helper()
	job, err := os.ReadFile(filepath.Join(dir, "job"))
	if err != nil || len(job) == 0 {
		t.Fatalf("no job id: %v", err)
	}
	var out []string
	entries, _ := os.ReadDir("/dev/shm")
	for _, e := range entries {
		if strings.Contains(e.Name(), string(job)) {
			out = append(out, "/dev/shm/"+e.Name())
		}
	}
	if tmp != "" {
		entries, _ := os.ReadDir(tmp)
		for _, e := range entries {
			out = append(out, filepath.Join(tmp, e.Name()))
		}
	}
	return out
}

// A job killed with SIGKILL while its ranks make and free windows leaves
// nothing in /dev/shm (nor in TMPDIR), whatever the moment: under
// luacoll's launcher with the launcher killed too, and under an external
// launcher with one rank killed.
func TestKill9LeavesNothing(t *testing.T) {
	s := writeScript(t, loopScript)
	for i, delay := range []time.Duration{0, 150 * time.Millisecond, 400 * time.Millisecond} {
		t.Run(fmt.Sprintf("luacoll launcher %d", i), func(t *testing.T) {
			dir, tmp := t.TempDir(), t.TempDir()
			cmd := exec.Command(bin, "run", "-n", "3", "--timeout", "60s", s, dir)
			cmd.Env = append(cleanEnv(), "TMPDIR="+tmp)
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			waitFiles(t, dir, "looping0", "looping1", "looping2")
			time.Sleep(delay)
			ranks := []int{findRank(t, cmd.Process.Pid, 0), findRank(t, cmd.Process.Pid, 1), findRank(t, cmd.Process.Pid, 2)}
			_ = syscall.Kill(ranks[1], syscall.SIGKILL)
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			waitGone(t, ranks...)
			if left := jobLeftovers(t, dir, tmp); len(left) > 0 {
				t.Errorf("left behind: %v", left)
			}
		})
		t.Run(fmt.Sprintf("external launcher %d", i), func(t *testing.T) {
			dir, tmp := t.TempDir(), t.TempDir()
			port := freePort(t)
			var cmds []*exec.Cmd
			for r := 1; r >= 0; r-- {
				cmd := exec.Command(bin, "run", "--timeout", "60s", s, dir)
				cmd.Env = append(cleanEnv(), "TMPDIR="+tmp, "RANK="+strconv.Itoa(r), "WORLD_SIZE=2", "LOCAL_RANK="+strconv.Itoa(r),
					"LOCAL_WORLD_SIZE=2", "MASTER_ADDR=127.0.0.1", "MASTER_PORT="+port)
				if err := cmd.Start(); err != nil {
					t.Fatal(err)
				}
				cmds = append(cmds, cmd)
			}
			waitFiles(t, dir, "looping0", "looping1")
			time.Sleep(delay)
			_ = cmds[0].Process.Kill() // rank 1
			_ = cmds[0].Wait()
			done := make(chan error, 1)
			go func() { done <- cmds[1].Wait() }()
			select {
			case err := <-done:
				if err == nil {
					t.Error("rank 0 exited 0 after rank 1 was killed")
				}
			case <-time.After(20 * time.Second):
				_ = cmds[1].Process.Kill()
				t.Fatal("rank 0 did not stop after rank 1 was killed")
			}
			if left := jobLeftovers(t, dir, tmp); len(left) > 0 {
				t.Errorf("left behind: %v", left)
			}
		})
	}
}

func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	_, port, _ := strings.Cut(l.Addr().String(), ":")
	return port
}

// replSession starts `luacoll repl -n 2` with TMPDIR=tmp and waits until it
// answers.
func replSession(t *testing.T, tmp string) (*exec.Cmd, io.WriteCloser, *bufio.Scanner) {
	t.Helper()
	cmd := exec.Command(bin, "repl", "-n", "2")
	cmd.Env = append(cleanEnv(), "TMPDIR="+tmp)
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(out)
	ask(t, in, sc, `print("up")`, "[0,1] up")
	return cmd, in, sc
}

// ask sends a chunk to a session and waits for a line.
func ask(t *testing.T, in io.Writer, sc *bufio.Scanner, chunk, want string) {
	t.Helper()
	fmt.Fprintln(in, chunk)
	for sc.Scan() {
		if sc.Text() == want {
			return
		}
	}
	t.Fatalf("no %q after %q", want, chunk)
}

// luacoll clean removes what killed jobs left (a REPL's control socket
// directory, an old build's /dev/shm segment) and keeps what a live one
// uses: a running session's directory, a segment a process holds.
func TestCleanRemovesOnlyTheDead(t *testing.T) {
	tmp := t.TempDir()
	dead, _, _ := replSession(t, tmp)
	if err := dead.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = dead.Wait()
	live, liveIn, liveOut := replSession(t, tmp)
	defer func() {
		liveIn.Close()
		_ = live.Wait()
	}()
	deadDir, _ := filepath.Glob(filepath.Join(tmp, fmt.Sprintf("luacoll-repl-%d-*", dead.Process.Pid)))
	liveDir, _ := filepath.Glob(filepath.Join(tmp, fmt.Sprintf("luacoll-repl-%d-*", live.Process.Pid)))
	if len(deadDir) != 1 || len(liveDir) != 1 {
		t.Fatalf("the sessions' directories: killed %v, running %v", deadDir, liveDir)
	}
	job := fmt.Sprintf("cleantest%d", time.Now().UnixNano())
	oldSeg := fmt.Sprintf("/dev/shm/luacoll-%s-r0-s1", job)
	heldSeg := fmt.Sprintf("/dev/shm/luacoll-%s-r1-s1", job)
	for _, p := range []string{oldSeg, heldSeg} {
		if err := os.WriteFile(p, []byte("x"), 0o600); err != nil {
			t.Skipf("no /dev/shm: %v", err)
		}
		defer os.Remove(p)
	}
	held, err := os.Open(heldSeg)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()

	r := luacoll(t, []string{"TMPDIR=" + tmp}, "clean", "--dry-run")
	if r.code != 0 || !strings.Contains(r.stdout, "would remove "+deadDir[0]) || !strings.Contains(r.stdout, "would remove "+oldSeg) {
		t.Fatalf("dry run: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if _, err := os.Stat(deadDir[0]); err != nil {
		t.Fatalf("the dry run removed %s", deadDir[0])
	}
	r = luacoll(t, []string{"TMPDIR=" + tmp}, "clean")
	for _, want := range []string{
		"removed " + deadDir[0] + " (directory, unused)",
		"removed " + oldSeg + " (segment of job " + job + ", unused)",
		fmt.Sprintf("kept %s (directory, in use: process %d, which made it, is running)", liveDir[0], live.Process.Pid),
		fmt.Sprintf("kept %s (segment of job %s, in use: open in process %d)", heldSeg, job, os.Getpid()),
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("clean does not say %q:\n%s%s", want, r.stdout, r.stderr)
		}
	}
	for p, want := range map[string]bool{deadDir[0]: false, oldSeg: false, liveDir[0]: true, heldSeg: true} {
		if _, err := os.Stat(p); (err == nil) != want {
			t.Errorf("%s exists: %v, want %v", p, err == nil, want)
		}
	}
	// The running session still works.
	ask(t, liveIn, liveOut, "1 + 1", "[0,1] 2")
}
