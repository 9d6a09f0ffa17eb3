package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/luacoll/luacoll/engine/launch"
)

// --mps through the command line. There is no GPU in CI: the ranks of
// these jobs may fail to open CUDA; what is checked is what the launcher
// does around them. The daemon is a stand-in script (as in engine/launch)
// that records its calls.

const fakeMPSControl = `#!/bin/sh
echo "call [$*] pipe=$CUDA_MPS_PIPE_DIRECTORY log=$CUDA_MPS_LOG_DIRECTORY" >> "$FAKE_MPS_RECORD"
case "$1" in
-d)
  mkdir -p "$CUDA_MPS_PIPE_DIRECTORY"
  sleep 600 </dev/null >/dev/null 2>&1 &
  echo $! > "$CUDA_MPS_LOG_DIRECTORY/daemon.pid"
  : > "$CUDA_MPS_PIPE_DIRECTORY/control"
  exit 0 ;;
"")
  read cmd
  echo "stdin $cmd pipe=$CUDA_MPS_PIPE_DIRECTORY" >> "$FAKE_MPS_RECORD"
  [ "$cmd" = quit ] && kill "$(cat "$CUDA_MPS_LOG_DIRECTORY/daemon.pid")"
  exit 0 ;;
esac
exit 2
`

// fakeMPSPath returns a PATH whose nvidia-cuda-mps-control is the fake,
// and the fake's record file.
func fakeMPSPath(t *testing.T) (path, record string) {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, launch.MPSControlProgram), []byte(fakeMPSControl), 0o755); err != nil {
		t.Fatal(err)
	}
	return dir + ":/usr/bin:/bin", filepath.Join(dir, "record")
}

// withoutMPSControl is a PATH with no nvidia-cuda-mps-control.
func withoutMPSControl(t *testing.T) string { return t.TempDir() }

// procsWithEnv lists the processes whose environment holds kv.
func procsWithEnv(kv string) []string {
	entries, _ := os.ReadDir("/proc")
	var out []string
	for _, e := range entries {
		env, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err == nil && bytes.Contains(append([]byte{0}, env...), append(append([]byte{0}, kv...), 0)) {
			out = append(out, e.Name())
		}
	}
	return out
}

// checkJobDaemon: one daemon started and told to quit with the same pipe
// directory, nothing of it left.
func checkJobDaemon(t *testing.T, record string) {
	t.Helper()
	data, err := os.ReadFile(record)
	if err != nil {
		t.Fatalf("the MPS control program was never called: %v", err)
	}
	started := regexp.MustCompile(`(?m)^call \[-d\] pipe=(\S+) log=\S+$`).FindAllStringSubmatch(string(data), -1)
	quit := regexp.MustCompile(`(?m)^stdin quit pipe=(\S+)$`).FindAllStringSubmatch(string(data), -1)
	if len(started) != 1 || len(quit) != 1 || started[0][1] != quit[0][1] {
		t.Fatalf("calls:\n%s\nwant one start and one quit with the same pipe directory", data)
	}
	pipe := started[0][1]
	if left := procsWithEnv("CUDA_MPS_PIPE_DIRECTORY=" + pipe); len(left) > 0 {
		t.Errorf("MPS processes left: %v", left)
	}
	if _, err := os.Stat(filepath.Dir(pipe)); !os.IsNotExist(err) {
		t.Errorf("job directory left: %s (%v)", filepath.Dir(pipe), err)
	}
}

func TestMPSFlagErrors(t *testing.T) {
	noCtl := "PATH=" + withoutMPSControl(t)
	torchrun := []string{"RANK=0", "WORLD_SIZE=1", noCtl}
	for _, c := range []struct {
		env  []string
		args []string
		want string
	}{
		{nil, []string{"run", "--mps", "yes"}, `--mps "yes": want auto, on or off`},
		{nil, []string{"bench", "pingpong", "--mps", "1"}, `--mps "1": want auto, on or off`},
		{nil, []string{"repl", "--mps", "always"}, `--mps "always": want auto, on or off`},
		{nil, []string{"run", "--mps", "on"}, "--mps on: MPS shares a GPU between processes; it needs --device cuda"},
		{[]string{noCtl}, []string{"run", "-n", "2", "--device", "cuda", "--mps", "on"}, "--mps on: nvidia-cuda-mps-control not found in PATH"},
		{[]string{noCtl}, []string{"bench", "allgather", "--device", "cuda", "--mps", "on"}, "nvidia-cuda-mps-control not found in PATH"},
		{torchrun, []string{"run", "--device", "cuda", "--mps", "on"}, "under torchrun, start one on each host before the job"},
	} {
		r := luacoll(t, c.env, c.args...)
		if r.code != 2 || !strings.Contains(r.stderr, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want 2 and %q", c.args, r.code, r.stderr, c.want)
		}
	}
}

// Ranks that share a GPU without MPS are named before the run, with what
// is slow and the flag that helps.
func TestMPSSharedGPUWarning(t *testing.T) {
	if running := launch.RunningMPS("/proc"); running != "" {
		t.Skipf("MPS is running on this host (%s): auto would use it", running)
	}
	noCtl := "PATH=" + withoutMPSControl(t)
	script := writeScript(t, `print("ran")`)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--mps", "off"}, "luacoll run: ranks 0,1 share GPU 0 without MPS (--mps off): their CUDA contexts take turns"},
		{nil, "luacoll run: ranks 0,1 share GPU 0 without MPS (nvidia-cuda-mps-control not found in PATH)"},
	} {
		args := append([]string{"run", "-n", "2", "--device", "cuda", "--gpus", "0,0"}, c.args...)
		r := luacoll(t, []string{noCtl}, append(args, script)...)
		if !strings.HasPrefix(r.stderr, c.want) || !strings.Contains(r.stderr, "use --mps on") {
			t.Errorf("%v: stderr %q, want it to start with %q", c.args, r.stderr, c.want)
		}
	}
	// Ranks on separate GPUs hear nothing about MPS.
	r := luacoll(t, []string{noCtl}, "run", "-n", "2", "--device", "cuda", "--gpus", "0,1", script)
	if strings.Contains(r.stderr, "MPS") {
		t.Errorf("separate GPUs: stderr %q", r.stderr)
	}
}

// The job's own daemon: started before the ranks, stopped after them,
// with run and with the REPL.
func TestMPSDaemonForTheJob(t *testing.T) {
	script := writeScript(t, `local lc = require("luacoll")
print("mps", lc.info().mps, lc.info().mps_daemon)`)
	t.Run("run", func(t *testing.T) {
		path, record := fakeMPSPath(t)
		r := luacoll(t, []string{"PATH=" + path, "FAKE_MPS_RECORD=" + record},
			"run", "-n", "2", "--device", "cuda", "--gpus", "0,0", "--mps", "on", script)
		checkJobDaemon(t, record)
		if r.code == 0 && !strings.Contains(r.stdout, "mps") {
			t.Errorf("ranks succeeded but printed %q", r.stdout)
		}
	})
	t.Run("auto", func(t *testing.T) {
		if running := launch.RunningMPS("/proc"); running != "" {
			t.Skipf("MPS is running on this host (%s): auto would use it", running)
		}
		path, record := fakeMPSPath(t)
		r := luacoll(t, []string{"PATH=" + path, "FAKE_MPS_RECORD=" + record},
			"run", "-n", "2", "--device", "cuda", "--gpus", "0,0", script)
		if !strings.HasPrefix(r.stderr, "luacoll run: ranks 0,1 share GPU 0: starting a private MPS control daemon for the job") {
			t.Errorf("stderr %q", r.stderr)
		}
		checkJobDaemon(t, record)
	})
	t.Run("repl", func(t *testing.T) {
		path, record := fakeMPSPath(t)
		cmd := exec.Command(bin, "repl", "-n", "2", "--device", "cuda", "--gpus", "0,0", "--mps", "on")
		cmd.Env = append(cleanEnv(), "PATH="+path, "FAKE_MPS_RECORD="+record)
		cmd.Stdin = strings.NewReader("print(1)\n")
		_, _ = cmd.CombinedOutput()
		checkJobDaemon(t, record)
	})
}
