package launch

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestSharedGPUs(t *testing.T) {
	tests := []struct {
		n       int
		gpus    []int
		devices int
		want    []GPUShare
	}{
		{4, nil, 4, nil},
		{4, nil, 2, []GPUShare{{0, []int{0, 2}}, {1, []int{1, 3}}}},
		{3, nil, 1, []GPUShare{{0, []int{0, 1, 2}}}},
		{2, nil, 0, nil}, // device count unknown
		{2, []int{0, 0}, 0, []GPUShare{{0, []int{0, 1}}}},
		{3, []int{1, 0, 1}, 8, []GPUShare{{1, []int{0, 2}}}},
		{4, []int{0, 1}, 2, nil}, // ranks past the list fail on their own
		{1, []int{0}, 1, nil},
	}
	for _, tt := range tests {
		if got := SharedGPUs(tt.n, tt.gpus, tt.devices); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("SharedGPUs(%d, %v, %d) = %v, want %v", tt.n, tt.gpus, tt.devices, got, tt.want)
		}
	}
}

func TestPlanMPS(t *testing.T) {
	shares := []GPUShare{{0, []int{0, 2}}, {1, []int{1, 3}}}
	const ctl, running = "/usr/bin/nvidia-cuda-mps-control", "nvidia-cuda-mps pid 812"
	tests := []struct {
		name             string
		mode             string
		shares           []GPUShare
		control, running string
		start            bool
		note             []string // substrings; none: no note
		err              string
	}{
		{"auto, no sharing", MPSAuto, nil, ctl, "", false, nil, ""},
		{"auto, shared", MPSAuto, shares, ctl, "", true,
			[]string{"ranks 0,2 share GPU 0 and ranks 1,3 share GPU 1: starting a private MPS control daemon"}, ""},
		{"auto, shared, no control", MPSAuto, shares, "", "", false,
			[]string{"ranks 0,2 share GPU 0 and ranks 1,3 share GPU 1 without MPS (nvidia-cuda-mps-control not found in PATH)",
				"take turns on the GPU", "device put_signal", "time out", "use --mps on", "--gpus"}, ""},
		{"auto, shared, MPS running", MPSAuto, shares, ctl, running, false,
			[]string{"MPS is already running (nvidia-cuda-mps pid 812)", "starts no daemon", "--mps on"}, ""},
		{"off, shared", MPSOff, shares, ctl, "", false, []string{"without MPS (--mps off)", "use --mps on"}, ""},
		{"off, no sharing", MPSOff, nil, ctl, "", false, nil, ""},
		{"on, no sharing", MPSOn, nil, ctl, "", true, nil, ""},
		{"on, MPS running", MPSOn, shares, ctl, running, true, []string{"already running", "its own private daemon"}, ""},
		{"on, no control", MPSOn, shares, "", "", false, nil, "--mps on: nvidia-cuda-mps-control not found in PATH"},
		{"bad mode", "yes", nil, ctl, "", false, nil, `--mps "yes": want auto, on or off`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			plan, err := PlanMPS(tt.mode, tt.shares, tt.control, tt.running)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("err %v, want %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if plan.Start != tt.start {
				t.Errorf("start %v, want %v", plan.Start, tt.start)
			}
			if len(tt.note) == 0 && plan.Note != "" {
				t.Errorf("note %q, want none", plan.Note)
			}
			for _, w := range tt.note {
				if !strings.Contains(plan.Note, w) {
					t.Errorf("note %q lacks %q", plan.Note, w)
				}
			}
		})
	}
}

func TestRunningMPS(t *testing.T) {
	proc := t.TempDir()
	for pid, comm := range map[string]string{"1": "systemd", "812": "nvidia-cuda-mps", "813": "nvidia-cuda-mps",
		"900": "bash", "self": "x", "77": "nvidia-smi"} {
		if err := os.MkdirAll(filepath.Join(proc, pid), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(proc, pid, "comm"), []byte(comm+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if got, want := RunningMPS(proc), "nvidia-cuda-mps pid 812, pid 813"; got != want {
		t.Errorf("RunningMPS = %q, want %q", got, want)
	}
	// An exited daemon not yet reaped (state Z) runs nothing.
	if err := os.WriteFile(filepath.Join(proc, "813", "stat"), []byte("813 (nvidia-cuda-mps) Z 1 813 813 0 -1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(proc, "812", "stat"), []byte("812 (nvidia-cuda-mps) S 1 812 812 0 -1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, want := RunningMPS(proc), "nvidia-cuda-mps pid 812"; got != want {
		t.Errorf("RunningMPS with 813 a zombie = %q, want %q", got, want)
	}
	os.Remove(filepath.Join(proc, "813", "stat"))
	if got := RunningMPS(filepath.Join(proc, "absent")); got != "" {
		t.Errorf("no process table: %q", got)
	}
	if err := os.WriteFile(filepath.Join(proc, "812", "comm"), []byte("sleep\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	os.RemoveAll(filepath.Join(proc, "813"))
	if got := RunningMPS(proc); got != "" {
		t.Errorf("RunningMPS without MPS = %q", got)
	}
}

func TestProcessesWithEnv(t *testing.T) {
	mark := fmt.Sprintf("LUACOLL_TEST_MARK=%d-%d", os.Getpid(), time.Now().UnixNano())
	cmd := exec.Command("sleep", "60")
	cmd.Env = append(os.Environ(), mark)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}()
	if got := processesWithEnv("/proc", mark); len(got) != 1 || got[0] != cmd.Process.Pid {
		t.Fatalf("processesWithEnv = %v, want [%d]", got, cmd.Process.Pid)
	}
	if got := processesWithEnv("/proc", mark+"x"); len(got) != 0 {
		t.Errorf("a longer value matched: %v", got)
	}
	// A child that does not carry the mark is found through its parent.
	if got := withChildren("/proc", []int{os.Getpid()}); !slices.Contains(got, cmd.Process.Pid) || got[0] != os.Getpid() {
		t.Errorf("withChildren(this process) = %v, want it and %d", got, cmd.Process.Pid)
	}
	if got := withChildren("/proc", nil); got != nil {
		t.Errorf("withChildren(nil) = %v", got)
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	if got := processesWithEnv("/proc", mark); len(got) != 0 {
		t.Errorf("after the kill: %v", got)
	}
}

// fakeMPSControl stands in for nvidia-cuda-mps-control: it records each
// call (arguments, pipe and log directories, the command read from stdin)
// in $FAKE_MPS_RECORD; with -d it leaves a process that carries its
// environment, as the daemon does, and makes the control socket's file;
// "quit" on stdin ends that process. FAKE_MPS_FAIL, FAKE_MPS_NO_CONTROL
// and FAKE_MPS_IGNORE_QUIT make it misbehave.
const fakeMPSControl = `#!/bin/sh
echo "call [$*] pipe=$CUDA_MPS_PIPE_DIRECTORY log=$CUDA_MPS_LOG_DIRECTORY" >> "$FAKE_MPS_RECORD"
case "$1" in
-d)
  if [ -n "$FAKE_MPS_FAIL" ]; then echo "fake daemon refuses: $FAKE_MPS_FAIL" >&2; exit 1; fi
  mkdir -p "$CUDA_MPS_PIPE_DIRECTORY"
  sleep 600 </dev/null >/dev/null 2>&1 &
  echo $! > "$CUDA_MPS_LOG_DIRECTORY/daemon.pid"
  [ -n "$FAKE_MPS_NO_CONTROL" ] || : > "$CUDA_MPS_PIPE_DIRECTORY/control"
  exit 0 ;;
"")
  read cmd
  echo "stdin $cmd pipe=$CUDA_MPS_PIPE_DIRECTORY" >> "$FAKE_MPS_RECORD"
  if [ "$cmd" = quit ] && [ -z "$FAKE_MPS_IGNORE_QUIT" ]; then
    kill "$(cat "$CUDA_MPS_LOG_DIRECTORY/daemon.pid")"
  fi
  exit 0 ;;
esac
exit 2
`

// writeFakeMPS writes the fake control program into a new directory and
// returns its path and the record file.
func writeFakeMPS(t *testing.T) (control, record string) {
	t.Helper()
	dir := t.TempDir()
	control = filepath.Join(dir, MPSControlProgram)
	if err := os.WriteFile(control, []byte(fakeMPSControl), 0o755); err != nil {
		t.Fatal(err)
	}
	return control, filepath.Join(dir, "record")
}

// testWorkerMPS reports the rank's MPS environment and then does what
// LUACOLL_TEST_MPS says for it: ok, fail, kill (itself, with SIGKILL) or
// sleep.
func testWorkerMPS(rank int) int {
	pipe := os.Getenv(EnvMPSPipe)
	_, err := os.Stat(filepath.Join(pipe, "control"))
	fmt.Printf("mps pipe=%s log=%s mark=%s control=%v\n", pipe, os.Getenv(EnvMPSLog), os.Getenv(EnvMPS), err == nil)
	what := strings.Split(os.Getenv("LUACOLL_TEST_MPS"), ",")
	if rank >= len(what) {
		return 0
	}
	switch what[rank] {
	case "fail":
		return 3
	case "kill":
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		time.Sleep(time.Minute)
	case "sleep":
		time.Sleep(time.Minute)
	}
	return 0
}

// mpsCalls parses the fake's record: the pipe directory of each call.
type mpsCalls struct{ daemon, quit []string }

func readMPSRecord(t *testing.T, record string) mpsCalls {
	t.Helper()
	data, err := os.ReadFile(record)
	if err != nil {
		t.Fatalf("the fake MPS control program was never called: %v", err)
	}
	var c mpsCalls
	daemonRE := regexp.MustCompile(`^call \[-d\] pipe=(\S+) log=(\S+)$`)
	quitRE := regexp.MustCompile(`^stdin quit pipe=(\S+)$`)
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		if m := daemonRE.FindStringSubmatch(line); m != nil {
			c.daemon = append(c.daemon, m[1])
			if filepath.Dir(m[1]) != filepath.Dir(m[2]) {
				t.Errorf("pipe and log directories in different job directories: %q", line)
			}
		}
		if m := quitRE.FindStringSubmatch(line); m != nil {
			c.quit = append(c.quit, m[1])
		}
	}
	return c
}

// checkMPSStopped checks that the job's daemon was started once, told to
// quit with the same pipe directory, and left no process and no directory.
func checkMPSStopped(t *testing.T, record string, ranks []string) {
	t.Helper()
	c := readMPSRecord(t, record)
	if len(c.daemon) != 1 || len(c.quit) != 1 || c.daemon[0] != c.quit[0] {
		t.Fatalf("daemon started with %v, told to quit with %v; want one each, the same", c.daemon, c.quit)
	}
	pipe := c.daemon[0]
	if !strings.HasPrefix(filepath.Base(filepath.Dir(pipe)), "luacoll-") {
		t.Errorf("pipe directory %s is not in a job directory", pipe)
	}
	for r, out := range ranks {
		want := fmt.Sprintf("mps pipe=%s log=%s mark=job control=true", pipe, filepath.Join(filepath.Dir(pipe), "mps-log"))
		if !strings.Contains(out, want) {
			t.Errorf("rank %d said %q, want %q", r, out, want)
		}
	}
	if left := processesWithEnv("/proc", EnvMPSPipe+"="+pipe); len(left) > 0 {
		t.Errorf("processes of the job's MPS daemon left: %v", left)
	}
	if _, err := os.Stat(filepath.Dir(pipe)); !os.IsNotExist(err) {
		t.Errorf("job directory %s left: %v", filepath.Dir(pipe), err)
	}
}

// rankLines returns each rank's "mps ..." line from the prefixed output.
func rankLines(out *recorder, n int) []string {
	lines := make([]string, n)
	for _, w := range out.lines() {
		for r := range n {
			if p := fmt.Sprintf("[%d] mps ", r); strings.HasPrefix(w, p) {
				lines[r] = strings.TrimPrefix(w, fmt.Sprintf("[%d] ", r))
			}
		}
	}
	return lines
}

// TestLaunchMPS: the daemon runs for the job and is gone after it, however
// the job ends: success, a failing rank, a rank killed with SIGKILL, an
// interrupt.
func TestLaunchMPS(t *testing.T) {
	for _, tt := range []struct {
		name      string
		what      string
		interrupt bool
		code      int
	}{
		{"success", "ok,ok", false, 0},
		{"failing rank", "ok,fail", false, 3},
		{"killed rank", "kill,sleep", false, 128 + 9},
		{"interrupt", "sleep,sleep", true, interruptCode},
	} {
		t.Run(tt.name, func(t *testing.T) {
			control, record := writeFakeMPS(t)
			cfg, stdout, stderr := workerConfig(t, 2, "mps", "LUACOLL_TEST_MPS="+tt.what, "FAKE_MPS_RECORD="+record)
			cfg.Prefix = true
			cfg.Grace = 2 * time.Second
			cfg.MPS = &MPSConfig{Control: control, Timeout: 5 * time.Second}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if tt.interrupt {
				go func() {
					deadline := time.Now().Add(20 * time.Second)
					for time.Now().Before(deadline) && len(stdout.lines()) < 2 {
						time.Sleep(10 * time.Millisecond)
					}
					cancel()
				}()
			}
			res, err := Launch(ctx, cfg)
			if (err != nil) != tt.interrupt {
				t.Errorf("Launch error %v", err)
			}
			if res.ExitCode != tt.code {
				t.Errorf("exit code %d, want %d; stderr %q", res.ExitCode, tt.code, stderr.lines())
			}
			checkMPSStopped(t, record, rankLines(stdout, 2))
		})
	}
}

// TestLaunchMPSDaemonProblems: a daemon that cannot start fails the launch
// before any rank runs, naming its output; one that never makes its
// control socket is stopped; one that ignores quit is killed, and the
// user is told.
func TestLaunchMPSDaemonProblems(t *testing.T) {
	t.Run("start fails", func(t *testing.T) {
		control, record := writeFakeMPS(t)
		cfg, stdout, _ := workerConfig(t, 2, "mps", "FAKE_MPS_RECORD="+record, "FAKE_MPS_FAIL=no GPU")
		cfg.MPS = &MPSConfig{Control: control, Timeout: 5 * time.Second}
		_, _, err := launch(t, cfg)
		if err == nil || !strings.Contains(err.Error(), "starting the control daemon") ||
			!strings.Contains(err.Error(), "fake daemon refuses: no GPU") {
			t.Fatalf("Launch error %v", err)
		}
		if len(stdout.lines()) != 0 {
			t.Errorf("ranks ran: %q", stdout.lines())
		}
		c := readMPSRecord(t, record)
		if len(c.daemon) != 1 || len(c.quit) != 1 {
			t.Errorf("calls %+v", c)
		}
		if _, err := os.Stat(filepath.Dir(c.daemon[0])); !os.IsNotExist(err) {
			t.Errorf("job directory left: %v", err)
		}
	})
	t.Run("no control socket", func(t *testing.T) {
		control, record := writeFakeMPS(t)
		cfg, _, _ := workerConfig(t, 2, "mps", "FAKE_MPS_RECORD="+record, "FAKE_MPS_NO_CONTROL=1")
		cfg.MPS = &MPSConfig{Control: control, Timeout: 500 * time.Millisecond}
		_, _, err := launch(t, cfg)
		if err == nil || !strings.Contains(err.Error(), "did not make") {
			t.Fatalf("Launch error %v", err)
		}
		checkMPSStopped(t, record, nil)
	})
	t.Run("quit ignored", func(t *testing.T) {
		control, record := writeFakeMPS(t)
		cfg, stdout, stderr := workerConfig(t, 2, "mps", "FAKE_MPS_RECORD="+record, "FAKE_MPS_IGNORE_QUIT=1")
		cfg.Prefix = true
		// Long enough for the fake daemon to start on a loaded machine.
		cfg.MPS = &MPSConfig{Control: control, Timeout: 2 * time.Second}
		res, _, err := launch(t, cfg)
		if err != nil || res.ExitCode != 0 {
			t.Fatalf("exit %d, %v", res.ExitCode, err)
		}
		checkMPSStopped(t, record, rankLines(stdout, 2))
		if !strings.Contains(strings.Join(stderr.lines(), ""), "did not quit within 2s; killed pids") {
			t.Errorf("stderr %q does not say the daemon was killed", stderr.lines())
		}
	})
}

// A launch without MPS leaves the ranks' MPS variables alone, and a stale
// LUACOLL_MPS in the launcher's environment does not reach them.
func TestLaunchWithoutMPS(t *testing.T) {
	cfg, stdout, _ := workerConfig(t, 1, "mps", EnvMPS+"=job")
	cfg.Prefix = true
	if res, _, err := launch(t, cfg); err != nil || res.ExitCode != 0 {
		t.Fatalf("exit %d, %v", res.ExitCode, err)
	}
	if got := rankLines(stdout, 1)[0]; !strings.Contains(got, "mark= ") {
		t.Errorf("rank saw %q", got)
	}
}

func TestMPSThreadPercentage(t *testing.T) {
	for _, c := range []struct {
		shares []GPUShare
		want   int
	}{
		{nil, 0},
		{[]GPUShare{{Device: 0, Ranks: []int{0, 1}}}, 50},
		{[]GPUShare{{Device: 0, Ranks: []int{0, 2}}, {Device: 1, Ranks: []int{1, 3, 5}}}, 33},
		{[]GPUShare{{Device: 0, Ranks: make([]int, 200)}}, 1},
	} {
		if got := MPSThreadPercentage(c.shares); got != c.want {
			t.Errorf("%v: %d, want %d", c.shares, got, c.want)
		}
	}
}
