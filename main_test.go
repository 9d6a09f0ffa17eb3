package main

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/luacoll/luacoll/engine/launch"
	"github.com/luacoll/luacoll/engine/launch/cpuset"
)

var bin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "luacoll-cli")
	if err != nil {
		panic(err)
	}
	bin = filepath.Join(dir, "luacoll")
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	if err != nil {
		fmt.Fprintf(os.Stderr, "building luacoll: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

type result struct {
	stdout, stderr string
	code           int
	took           time.Duration
}

func luacoll(t *testing.T, env []string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append(cleanEnv(), env...)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	start := time.Now()
	err := cmd.Run()
	r := result{stdout: o.String(), stderr: e.String(), took: time.Since(start)}
	if ee, ok := err.(*exec.ExitError); ok {
		r.code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("luacoll %v: %v", args, err)
	}
	return r
}

// cleanEnv drops launcher variables the test runner may have.
func cleanEnv() []string {
	var out []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch {
		case strings.HasPrefix(k, "LUACOLL_"), strings.HasPrefix(k, "SLURM_"), strings.HasPrefix(k, "OMPI_"), strings.HasPrefix(k, "PMIX_"),
			k == "RANK", k == "WORLD_SIZE", k == "LOCAL_RANK", k == "LOCAL_WORLD_SIZE", k == "MASTER_ADDR", k == "MASTER_PORT":
			continue
		}
		out = append(out, kv)
	}
	return out
}

func writeScript(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "s.lua")
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// namesIn lists the names in dir that keep accepts.
func namesIn(dir string, keep func(string) bool) []string {
	entries, _ := os.ReadDir(dir)
	var out []string
	for _, e := range entries {
		if keep(e.Name()) {
			out = append(out, e.Name())
		}
	}
	return out
}

// setOf is names as a set.
func setOf(names []string) map[string]bool {
	seen := map[string]bool{}
	for _, n := range names {
		seen[n] = true
	}
	return seen
}

func shmLeftovers(t *testing.T) []string {
	t.Helper()
	return namesIn("/dev/shm", func(n string) bool { return strings.HasPrefix(n, "luacoll-") })
}

func checkClean(t *testing.T, before []string) {
	t.Helper()
	seen := setOf(before)
	// A segment that a process maps or holds belongs to a job still
	// running on this machine (an older build's), not to this test.
	if found, err := launch.FindLeftovers("/dev/shm"); err == nil {
		for _, l := range found {
			if l.InUse != "" {
				seen[filepath.Base(l.Path)] = true
			}
		}
	}
	for _, s := range shmLeftovers(t) {
		if !seen[s] {
			t.Errorf("shared-memory segment left behind: /dev/shm/%s", s)
		}
	}
}

// runAtSizes runs `luacoll run -n N script...` for each N and requires
// success, want on stdout, and no shared-memory segment left behind.
func runAtSizes(t *testing.T, sizes []string, script []string, want string) {
	t.Helper()
	for _, n := range sizes {
		before := shmLeftovers(t)
		r := luacoll(t, nil, append([]string{"run", "-n", n}, script...)...)
		if r.code != 0 || !strings.Contains(r.stdout, want) {
			t.Fatalf("-n %s: exit %d\nstdout:\n%s\nstderr:\n%s", n, r.code, r.stdout, r.stderr)
		}
		checkClean(t, before)
	}
}

func TestTourAtSeveralSizes(t *testing.T) {
	runAtSizes(t, []string{"1", "2", "4", "8"}, nil, "[0] tour done")
}

func TestPersistentAllGatherScript(t *testing.T) {
	runAtSizes(t, []string{"2", "4", "8"}, []string{"tests/agp.lua"}, "[0] agp: 7 passed, 0 failed")
}

func TestPersistentAllGatherMismatchScript(t *testing.T) {
	runAtSizes(t, []string{"2", "3"}, []string{"tests/agp_mismatch.lua"}, "[0] agp_mismatch: 3 passed, 0 failed")
}

func TestRequireFindsFilesNextToTheScript(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "mysched.lua"), []byte(`return { answer = function() return 42 end }`), 0o644); err != nil {
		t.Fatal(err)
	}
	main := filepath.Join(dir, "main.lua")
	if err := os.WriteFile(main, []byte(`local m = require("mysched"); local ag = require("allgather")
assert(type(ag.ring) == "function"); print("answer", m.answer())`), 0o644); err != nil {
		t.Fatal(err)
	}
	r := luacoll(t, nil, "run", "-n", "2", main)
	if r.code != 0 || !strings.Contains(r.stdout, "[1] answer\t42") {
		t.Fatalf("exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
}

func TestWindowSuite(t *testing.T) {
	runAtSizes(t, []string{"2", "4", "8"}, []string{"tests/suite.lua"}, "[0] suite: 10 passed, 0 failed")
}

// The symmetric-window script on the host backend: the option is accepted,
// every window says why it is not symmetric, and data moves as usual.
func TestSymmetricScriptOnHost(t *testing.T) {
	runAtSizes(t, []string{"2", "3"}, []string{"tests/symmetric.lua"}, "[0] symmetric: 8 passed, 0 failed")
}

func TestLinesArePrefixedAndWhole(t *testing.T) {
	s := writeScript(t, `local lc = require("luacoll")
for i = 1, 200 do print(("rank=%d line=%d %s"):format(lc.rank, i, string.rep("x", 100))) end
print("args:", arg[1], arg[2], #arg)`)
	r := luacoll(t, nil, "run", "-n", "4", s, "alpha", "beta")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	re := regexp.MustCompile(`^\[(\d)\] rank=(\d) line=\d+ x{100}$`)
	count := 0
	for _, line := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
		if strings.Contains(line, "args:") {
			if !strings.HasSuffix(line, "args:\talpha\tbeta\t2") {
				t.Errorf("args line %q", line)
			}
			continue
		}
		m := re.FindStringSubmatch(line)
		if m == nil || m[1] != m[2] {
			t.Fatalf("mangled line %q", line)
		}
		count++
	}
	if count != 800 {
		t.Fatalf("%d lines, want 800", count)
	}
	r = luacoll(t, nil, "run", "-n", "2", "--no-prefix", s)
	if strings.Contains(r.stdout, "[0]") {
		t.Fatalf("--no-prefix output has prefixes")
	}
}

func TestFailingRankStopsEveryone(t *testing.T) {
	before := shmLeftovers(t)
	s := writeScript(t, `local lc = require("luacoll")
local w = lc.window{ bytes = 64 }
if lc.rank == 2 then error("boom") end
w:wait_signal(0, ">=", 1)   -- nobody signals: only the failure can end this
w:sync()`)
	r := luacoll(t, nil, "run", "-n", "4", "--timeout", "60s", s)
	if r.code != 1 {
		t.Fatalf("exit %d, want 1\n%s", r.code, r.stderr)
	}
	if r.took > 20*time.Second {
		t.Fatalf("took %v: the others waited for their timeout", r.took)
	}
	if !strings.Contains(r.stderr, "[2] ") || !strings.Contains(r.stderr, "s.lua:3: boom") {
		t.Fatalf("stderr lacks rank 2's error:\n%s", r.stderr)
	}
	for _, rk := range []string{"0", "1", "3"} {
		if !regexp.MustCompile(`\[` + rk + `\] .*rank 2 failed`).MatchString(r.stderr) {
			t.Errorf("rank %s does not name rank 2:\n%s", rk, r.stderr)
		}
	}
	checkClean(t, before)
}

func TestExitStatusOfFirstFailingRank(t *testing.T) {
	s := writeScript(t, `local lc = require("luacoll")
if lc.rank == 1 then os.exit(7) end
lc.barrier()`)
	r := luacoll(t, nil, "run", "-n", "3", "--timeout", "60s", s)
	if r.code != 7 {
		t.Fatalf("exit %d, want 7\n%s", r.code, r.stderr)
	}
	if !strings.Contains(r.stderr, "rank 1 failed: exited early with os.exit(7) at ") {
		t.Fatalf("stderr does not say rank 1 exited early:\n%s", r.stderr)
	}
}

func TestKilledRankMidWait(t *testing.T) {
	before := shmLeftovers(t)
	dir := t.TempDir()
	s := writeScript(t, `local lc = require("luacoll")
local w = lc.window{ bytes = 4096 }
local f = io.open(arg[1] .. "/pid" .. lc.rank, "w"); f:write(tostring(lc.rank)); f:close()
w:wait_signal(0, ">=", 1)
w:sync()`)
	// Each rank writes a marker; the test finds rank 1's process and kills it.
	cmd := exec.Command(bin, "run", "-n", "3", "--timeout", "60s", s, dir)
	cmd.Env = cleanEnv()
	var e bytes.Buffer
	cmd.Stderr = &e
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	var victim int
	for victim == 0 && time.Now().Before(deadline) {
		if _, err := os.Stat(filepath.Join(dir, "pid1")); err == nil {
			victim = findRank(t, cmd.Process.Pid, 1)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if victim == 0 {
		cmd.Process.Kill()
		t.Fatal("rank 1 never started")
	}
	time.Sleep(100 * time.Millisecond)
	start := time.Now()
	syscall.Kill(victim, syscall.SIGKILL)
	err := cmd.Wait()
	ee, _ := err.(*exec.ExitError)
	if ee == nil || ee.ExitCode() != 137 {
		t.Fatalf("exit %v, want 137\n%s", err, e.String())
	}
	if time.Since(start) > 20*time.Second {
		t.Fatalf("others took %v to stop", time.Since(start))
	}
	if !strings.Contains(e.String(), "rank 1 died") {
		t.Fatalf("stderr does not name rank 1:\n%s", e.String())
	}
	checkClean(t, before)
	if kids := children(cmd.Process.Pid); len(kids) > 0 {
		t.Fatalf("processes left: %v", kids)
	}
}

// findRank returns the pid of the child of launcher whose LUACOLL_RANK is rank.
func findRank(t *testing.T, launcher, rank int) int {
	for _, pid := range children(launcher) {
		env, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
		if err != nil {
			continue
		}
		for _, kv := range bytes.Split(env, []byte{0}) {
			if string(kv) == "LUACOLL_RANK="+strconv.Itoa(rank) {
				return pid
			}
		}
	}
	return 0
}

func children(ppid int) []int {
	entries, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		f := strings.Fields(s[i+1:])
		if len(f) > 1 && f[1] == strconv.Itoa(ppid) {
			out = append(out, pid)
		}
	}
	return out
}

// syncBuffer is a bytes.Buffer safe to read while a command writes it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestRanksMayFinishFarApart(t *testing.T) {
	s := writeScript(t, `local lc = require("luacoll")
local w = lc.window{ bytes = 64 }
if lc.rank == 1 then local t = lc.now(); while lc.now() - t < 2 do end end
print("done")`)
	r := luacoll(t, nil, "run", "-n", "2", "--timeout", "500ms", s)
	if r.code != 0 || strings.Count(r.stdout, "done") != 2 {
		t.Fatalf("exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
}

func TestInterruptStopsBusyRanks(t *testing.T) {
	before := shmLeftovers(t)
	s := writeScript(t, `local lc = require("luacoll")
local w = lc.window{ bytes = 64, timeout_ms = 600000 }
print("started")
if lc.rank == 1 then while true do end end
w:wait_signal(0, ">=", 1)
w:sync()`)
	cmd, e := startTwoRanks(t, s)
	start := time.Now()
	_ = cmd.Process.Signal(os.Interrupt)
	err := cmd.Wait()
	ee, _ := err.(*exec.ExitError)
	if ee == nil || ee.ExitCode() != 130 {
		t.Fatalf("exit %v, want 130\n%s", err, e.String())
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("took %v to stop", d)
	}
	if !strings.Contains(e.String(), "interrupted") {
		t.Errorf("stderr does not say interrupted:\n%s", e.String())
	}
	checkClean(t, before)
}

func TestTimedOutCollectiveFailsTheJob(t *testing.T) {
	s := writeScript(t, `local lc = require("luacoll")
if lc.rank == 0 then
  local ok, err = pcall(lc.barrier)
  assert(not ok)
  local t = lc.now(); while lc.now() - t < 3 do end
else
  local t = lc.now(); while lc.now() - t < 1.5 do end
  lc.barrier()
  print("rank 1 passed a barrier rank 0 had left")
end`)
	r := luacoll(t, nil, "run", "-n", "2", "--timeout", "500ms", s)
	if r.code == 0 || strings.Contains(r.stdout, "passed a barrier") || !strings.Contains(r.stderr, "no answer within 500ms") {
		t.Fatalf("exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
}

func TestCollectiveMismatch(t *testing.T) {
	s := writeScript(t, `local lc = require("luacoll")
if lc.rank == 0 then lc.barrier() else lc.window{ bytes = 64 } end`)
	r := luacoll(t, nil, "run", "-n", "3", s)
	if r.code == 0 || !strings.Contains(r.stderr, "differs across ranks") || !strings.Contains(r.stderr, "barrier()") {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
}

func TestWaitTimeoutFailsTheRun(t *testing.T) {
	s := writeScript(t, `local lc = require("luacoll")
local w = lc.window{ bytes = 64 }
w:wait_signal_from((lc.rank + 1) % lc.size, 1, "==", 3)
w:sync()`)
	r := luacoll(t, nil, "run", "-n", "2", "--timeout", "300ms", s)
	if r.code != 1 || !strings.Contains(r.stderr, "timed out after 300ms") || !strings.Contains(r.stderr, "s.lua:3") {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
}

// TestExternalLaunchers starts the ranks by hand with each launcher's
// variables, as torchrun, Slurm or mpirun would.
func TestExternalLaunchers(t *testing.T) {
	s := writeScript(t, `local lc = require("luacoll")
local all = lc.allgather(lc.rank)
local w = lc.window{ bytes = 64 }
w:signal((lc.rank + 1) % lc.size, 0)
w:wait_signal(0, "==", 1)
w:sync()
print(("rank %d of %d local %d/%d saw %d"):format(lc.rank, lc.size, lc.local_rank, lc.local_size, #all))`)
	vars := map[string]func(rank, size int, port string) []string{
		"torchrun": func(r, n int, port string) []string {
			return []string{"RANK=" + strconv.Itoa(r), "WORLD_SIZE=" + strconv.Itoa(n), "LOCAL_RANK=" + strconv.Itoa(r),
				"LOCAL_WORLD_SIZE=" + strconv.Itoa(n), "MASTER_ADDR=127.0.0.1", "MASTER_PORT=" + port}
		},
		"slurm": func(r, n int, port string) []string {
			return []string{"SLURM_PROCID=" + strconv.Itoa(r), "SLURM_NTASKS=" + strconv.Itoa(n), "SLURM_LOCALID=" + strconv.Itoa(r),
				"SLURM_NODEID=0", "SLURM_NTASKS_PER_NODE=" + strconv.Itoa(n), "LUACOLL_ADDR=127.0.0.1:" + port}
		},
		"openmpi": func(r, n int, port string) []string {
			return []string{"OMPI_COMM_WORLD_RANK=" + strconv.Itoa(r), "OMPI_COMM_WORLD_SIZE=" + strconv.Itoa(n),
				"OMPI_COMM_WORLD_LOCAL_RANK=" + strconv.Itoa(r), "OMPI_COMM_WORLD_LOCAL_SIZE=" + strconv.Itoa(n),
				"LUACOLL_ADDR=127.0.0.1:" + port}
		},
		// One host and no address: the job meets at a socket named after
		// the launcher's job id (the port, unique to this run, stands in).
		"openmpi one host": func(r, n int, port string) []string {
			return []string{"OMPI_COMM_WORLD_RANK=" + strconv.Itoa(r), "OMPI_COMM_WORLD_SIZE=" + strconv.Itoa(n),
				"OMPI_COMM_WORLD_LOCAL_RANK=" + strconv.Itoa(r), "OMPI_COMM_WORLD_LOCAL_SIZE=" + strconv.Itoa(n),
				"OMPI_MCA_ess_base_jobid=" + port, "PMIX_NAMESPACE=" + port}
		},
		"slurm one host": func(r, n int, port string) []string {
			return []string{"SLURM_PROCID=" + strconv.Itoa(r), "SLURM_NTASKS=" + strconv.Itoa(n), "SLURM_LOCALID=" + strconv.Itoa(r),
				"SLURM_NODEID=0", "SLURM_STEP_NUM_NODES=1", "SLURM_JOB_ID=" + port, "SLURM_STEP_ID=0"}
		},
	}
	for name, mk := range vars {
		t.Run(name, func(t *testing.T) {
			l, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			port := strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
			l.Close()
			const n = 3
			outs := make([]result, n)
			var wg sync.WaitGroup
			for r := n - 1; r >= 0; r-- { // rank 0 last: the others must wait for it
				wg.Add(1)
				go func(r int) {
					defer wg.Done()
					outs[r] = luacoll(t, mk(r, n, port), "run", s)
				}(r)
				time.Sleep(50 * time.Millisecond)
			}
			wg.Wait()
			for r, o := range outs {
				want := fmt.Sprintf("[%d] rank %d of 3 local %d/3 saw 3", r, r, r)
				if o.code != 0 || !strings.Contains(o.stdout, want) {
					t.Errorf("rank %d: exit %d, stdout %q, stderr %q", r, o.code, o.stdout, o.stderr)
				}
			}
		})
	}
}

func TestHelpEverywhere(t *testing.T) {
	for _, args := range [][]string{{"help"}, {"--help"}, {"run", "--help"}, {"bench", "--help"}, {"docs", "--help"}, {"info", "--help"}, {"repl", "--help"}, {"help", "run"}, {"clean", "--help"}, {"help", "clean"}} {
		r := luacoll(t, nil, args...)
		if r.code != 0 || len(r.stdout+r.stderr) < 40 {
			t.Errorf("%v: exit %d, output %q", args, r.code, r.stdout+r.stderr)
		}
	}
	r := luacoll(t, nil, "version")
	if r.code != 0 || !strings.HasPrefix(r.stdout, "luacoll ") {
		t.Errorf("version: %d %q", r.code, r.stdout)
	}
	for _, args := range [][]string{{"frobnicate"}, {"run", "--device", "tpu"}, {"run", "-n", "-3"}, {"run", "no-such.lua"}, {"run", "--timeout", "0s"}, {"bench", "put", "-b", "1X"}} {
		r := luacoll(t, nil, args...)
		if r.code == 0 || r.stderr == "" {
			t.Errorf("%v: exit %d, stderr %q", args, r.code, r.stderr)
		}
	}
}

// tableRows returns the fields of each row of a bench table (a line that
// is not a # comment) that has cols columns, not counting the words that
// may end a row past them (the all-gather's protocol, a reduction's
// schedule, a plan's mode).
func tableRows(out string, cols int) [][]string {
	var rows [][]string
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		for len(f) > cols { // trailing words (a protocol, a schedule, a mode) go
			if _, err := strconv.ParseFloat(f[len(f)-1], 64); err == nil {
				break
			}
			f = f[:len(f)-1]
		}
		if len(f) == cols && !strings.HasPrefix(line, "#") {
			rows = append(rows, f)
		}
	}
	return rows
}

func TestBenchHostRuns(t *testing.T) {
	r := luacoll(t, nil, "bench", "put", "-b", "64K", "-e", "1M", "--iters", "2")
	if r.code != 0 || !strings.Contains(r.stdout, "ratio") {
		t.Fatalf("%d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	// The legend names the ref column as the table does.
	if !strings.Contains(r.stdout, "ref GB/s") || !strings.Contains(r.stdout, "; ref = in-process copy of the same size, as the host stream copies") {
		t.Errorf("legend and column disagree:\n%s", r.stdout)
	}
	rows := tableRows(r.stdout, 6) // size time put ref ratio #wrong
	for _, f := range rows {
		if f[5] != "0" {
			t.Errorf("wrong data: %v", f)
		}
	}
	if len(rows) != 3 {
		t.Fatalf("%d rows:\n%s", len(rows), r.stdout)
	}
	for _, algo := range []string{"lua:ring", "lua:direct", "direct"} {
		r = luacoll(t, nil, "bench", "allgather", "-n", "2", "-b", "1K", "-e", "16K", "--iters", "20", "--stress", "--algo", algo)
		if r.code != 0 || !strings.Contains(r.stdout, "#wrong") {
			t.Fatalf("allgather %s: %d\n%s\n%s", algo, r.code, r.stdout, r.stderr)
		}
		rows := tableRows(r.stdout, 7) // size count type time algbw busbw #wrong
		for _, f := range rows {
			if f[6] != "0" {
				t.Errorf("allgather %s: wrong chunks: %v", algo, f)
			}
		}
		if len(rows) != 3 {
			t.Errorf("allgather %s: %d rows:\n%s", algo, len(rows), r.stdout)
		}
	}
	r = luacoll(t, nil, "bench", "pingpong", "--iters", "200")
	if r.code != 0 || !strings.Contains(r.stdout, "one-way latency") {
		t.Fatalf("%d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	// how... size iters one-way rtt ratio #wrong: 8 bytes, 200 round trips, payload checked
	if f := rowAfter(r.stdout, "host-issued put_signal + wait"); len(f) != 6 || f[0] != "8" || f[1] != "200" || f[5] != "0" {
		t.Errorf("ping-pong row %q:\n%s", f, r.stdout)
	}
	r = luacoll(t, nil, "bench", "barrier", "-n", "3", "--iters", "200")
	if f := rowAfter(r.stdout, "host-issued window barrier"); r.code != 0 || len(f) != 3 || f[0] != "3" || f[1] != "200" {
		t.Errorf("barrier: exit %d, row %q:\n%s\n%s", r.code, f, r.stdout, r.stderr)
	}
}

// rowAfter returns the fields after label on the first line of out that
// starts (after spaces) with it.
func rowAfter(out, label string) []string {
	for _, l := range strings.Split(out, "\n") {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(l), label); ok {
			return strings.Fields(rest)
		}
	}
	return nil
}

// TestCPUBinding checks that --cpu-bind spread gives the ranks disjoint
// shares of this machine's CPUs, none keeps the inherited set, and a bad
// mode or a mode differing across ranks is an error.
func TestCPUBinding(t *testing.T) {
	allowed, err := cpuset.Current()
	if err != nil {
		t.Fatal(err)
	}
	s := writeScript(t, `local lc = require("luacoll")
print("cpus " .. lc.info().cpus)`)
	cpusOf := func(r result) map[int]string {
		got := map[int]string{}
		for _, line := range strings.Split(r.stdout, "\n") {
			var rank int
			var list string
			if n, _ := fmt.Sscanf(line, "[%d] cpus %s", &rank, &list); n == 2 {
				got[rank] = list
			}
		}
		return got
	}
	all := cpuset.Format(allowed)
	r := luacoll(t, nil, "run", "-n", "2", "--cpu-bind", "none", s)
	if got := cpusOf(r); r.code != 0 || got[0] != all || got[1] != all {
		t.Errorf("--cpu-bind none: exit %d, cpus %v, want %s for both\n%s", r.code, got, all, r.stderr)
	}
	r = luacoll(t, nil, "run", "-n", "2", "--cpu-bind", "spread", s)
	got := cpusOf(r)
	if r.code != 0 || len(got) != 2 {
		t.Fatalf("--cpu-bind spread: exit %d, cpus %v\n%s", r.code, got, r.stderr)
	}
	// The benchmarks say where the ranks ran.
	b := luacoll(t, nil, "bench", "pingpong", "-n", "2", "--iters", "50", "--cpu-bind", "spread")
	want := fmt.Sprintf("# CPUs: rank 0 on %s, rank 1 on %s (--cpu-bind spread)", got[0], got[1])
	if got[0] == got[1] {
		want = fmt.Sprintf("# CPUs: every rank on %s (--cpu-bind spread)", got[0])
	}
	if b.code != 0 || !strings.Contains(b.stdout, want+"\n") {
		t.Errorf("bench pingpong: exit %d, no %q in\n%s%s", b.code, want, b.stdout, b.stderr)
	}
	if len(allowed) >= 2 {
		// Two non-empty, disjoint shares of the allowed CPUs, covering them.
		a, errA := cpuset.Parse(got[0])
		b, errB := cpuset.Parse(got[1])
		union, _ := cpuset.Parse(got[0] + "," + got[1])
		if errA != nil || errB != nil || len(a) == 0 || len(b) == 0 || len(cpuset.Intersect(a, b)) != 0 || cpuset.Format(union) != all {
			t.Errorf("--cpu-bind spread on CPUs %s: rank 0 on %q, rank 1 on %q", all, got[0], got[1])
		}
	}
	// More ranks than CPUs: auto deals one CPU to each in turn (a job
	// held to k of this machine's CPUs with taskset, k+1 ranks).
	if ts, err := exec.LookPath("taskset"); err == nil {
		k := min(2, len(allowed))
		held := cpuset.Format(allowed[:k])
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, ts, "-c", held, bin, "run", "-n", strconv.Itoa(k+1), "--cpu-bind", "auto", s)
		cmd.Env = cleanEnv()
		out, err := cmd.CombinedOutput()
		got := cpusOf(result{stdout: string(out)})
		for r := 0; r <= k; r++ {
			if want := strconv.Itoa(allowed[r%k]); err != nil || got[r] != want {
				t.Errorf("%d ranks held to CPUs %s: rank %d on %q, want %s (%v)\n%s", k+1, held, r, got[r], want, err, out)
			}
		}
	} else {
		t.Log("no taskset: the dealt binding of crowded ranks is not checked here")
	}
	r = luacoll(t, nil, "run", "-n", "2", "--cpu-bind", "near", s)
	if r.code != 2 || !strings.Contains(r.stderr, `--cpu-bind "near"`) {
		t.Errorf("bad mode: exit %d\n%s", r.code, r.stderr)
	}
	// Ranks started by hand with different modes fail together.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
	l.Close()
	outs := make([]result, 2)
	var wg sync.WaitGroup
	for r, mode := range []string{"spread", "none"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			env := []string{"RANK=" + strconv.Itoa(r), "WORLD_SIZE=2", "LOCAL_RANK=" + strconv.Itoa(r),
				"LOCAL_WORLD_SIZE=2", "MASTER_ADDR=127.0.0.1", "MASTER_PORT=" + port}
			outs[r] = luacoll(t, env, "run", "--timeout", "20s", "--cpu-bind", mode, s)
		}()
	}
	wg.Wait()
	for r, o := range outs {
		if o.code == 0 || !strings.Contains(o.stderr, "cpu_bind(spread)") || !strings.Contains(o.stderr, "cpu_bind(none)") {
			t.Errorf("rank %d with differing modes: exit %d\n%s", r, o.code, o.stderr)
		}
	}
}

// A --json file that cannot be written is refused before the benchmark
// runs, and the check leaves nothing behind where it can write.
func TestBenchJSONCheckedFirst(t *testing.T) {
	r := luacoll(t, nil, "bench", "pingpong", "--json", "/nonexistent-dir/p.jsonl")
	if r.code != 2 || !strings.Contains(r.stderr, `--json "/nonexistent-dir/p.jsonl": cannot write there`) || r.stdout != "" {
		t.Errorf("exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	dir := t.TempDir()
	if err := checkWritable(filepath.Join(dir, "x.jsonl")); err != nil {
		t.Fatal(err)
	}
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Errorf("the check left %v", left)
	}
	// A directory where the file should go is refused before anything
	// runs, for --json as for --trace.
	for _, args := range [][]string{{"bench", "pingpong", "--json", dir}, {"run", "--trace", dir, "-e", "print(1)"}} {
		r = luacoll(t, nil, args...)
		if r.code != 2 || !strings.Contains(r.stderr, "is a directory: name a file") || r.stdout != "" {
			t.Errorf("%v: exit %d, stdout %q, stderr %q", args, r.code, r.stdout, r.stderr)
		}
	}
}

// -n2 works like -n 2; a luacoll flag after the script goes to the script,
// with a warning.
func TestAttachedAndMisplacedFlags(t *testing.T) {
	s := writeScript(t, `local lc = require("luacoll")
print(("rank %d of %d args %s"):format(lc.rank, lc.size, table.concat(arg, ",")))`)
	r := luacoll(t, nil, "run", "-n3", s)
	if r.code != 0 || !strings.Contains(r.stdout, "[2] rank 2 of 3 args \n") {
		t.Errorf("-n3: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = luacoll(t, nil, "run", "-n2", s, "-n", "4", "--timeout=1s", "x")
	if r.code != 0 || !strings.Contains(r.stdout, "[1] rank 1 of 2 args -n,4,--timeout=1s,x") {
		t.Errorf("flags after the script: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	want := `luacoll run: warning: -n, --timeout=1s after the script name are the script's arguments (arg[1], ...); luacoll's flags go before the script name`
	if strings.Count(r.stderr, want) != 1 {
		t.Errorf("stderr should warn once: %q", r.stderr)
	}
}

// A backend that does not open on any rank (no GPU here) is reported once
// for the whole job, with the ranks it failed on and a pointer to
// luacoll info; not once per rank with every rank's message.
func TestBackendFailureReportedOnce(t *testing.T) {
	r := luacoll(t, nil, "run", "--device", "cuda", "-n", "4")
	if r.code == 0 {
		t.Skip("the CUDA backend opens on this machine")
	}
	if r.code != 1 || strings.Count(r.stderr, "\n") != 1 || !strings.Contains(r.stderr, "failed on ranks 0-3: ") ||
		!strings.Contains(r.stderr, "'luacoll info' says which GPUs and libraries this machine has") {
		t.Errorf("exit %d, stderr:\n%s", r.code, r.stderr)
	}
}

// --cpu-bind spread with more ranks on the host than CPUs says it cannot
// give each one, once, and fails (it used to run them unbound silently).
func TestCPUBindSpreadTooFew(t *testing.T) {
	allowed, err := cpuset.Current()
	if err != nil {
		t.Fatal(err)
	}
	n := len(allowed) + 1
	r := luacoll(t, nil, "run", "-n", strconv.Itoa(n), "--cpu-bind", "spread")
	want := fmt.Sprintf("cpu_bind(spread) failed on ranks 0-%d: %d ranks on one host share %d CPUs (%s): too few for one each (--cpu-bind auto or none runs them unbound)",
		n-1, n, len(allowed), cpuset.Format(allowed))
	if n == 2 {
		want = strings.Replace(want, "ranks 0-1", "ranks 0,1", 1)
	}
	if r.code != 1 || strings.Count(r.stderr, "\n") != 1 || !strings.Contains(r.stderr, want) {
		t.Errorf("exit %d, stderr:\n%s\nwant once: %s", r.code, r.stderr, want)
	}
}

// --no-prefix holds under another launcher too: neither print nor lc.log
// prefixes lines there.
func TestNoPrefixUnderExternalLauncher(t *testing.T) {
	s := writeScript(t, `local lc = require("luacoll")
lc.log("log %d", lc.rank)
print("print")`)
	port := freePort(t)
	r := luacoll(t, []string{"RANK=0", "WORLD_SIZE=1", "MASTER_ADDR=127.0.0.1", "MASTER_PORT=" + port}, "run", "--no-prefix", s)
	if r.code != 0 || r.stdout != "log 0\nprint\n" {
		t.Errorf("exit %d, stdout %q\n%s", r.code, r.stdout, r.stderr)
	}
}

// The mismatch error counts the script's own collectives (the second is
// #2) and, on the host backend, says nothing of CUDA's ipc.
func TestCollectiveMismatchNumbering(t *testing.T) {
	s := writeScript(t, `local lc = require("luacoll")
lc.barrier()
if lc.rank == 0 then lc.barrier() else lc.window{ bytes = 64 } end`)
	r := luacoll(t, nil, "run", "-n", "2", s)
	if r.code == 0 || !strings.Contains(r.stderr, "collective call #2 differs across ranks: rank 0 called barrier(); rank 1 called lc.window{") ||
		strings.Contains(r.stderr, "(ipc") {
		t.Errorf("exit %d\n%s", r.code, r.stderr)
	}
}

// The help lists every embedded script, and each one it lists runs as
// named.
func TestHelpListsEmbeddedScripts(t *testing.T) {
	r := luacoll(t, nil, "help")
	for _, name := range []string{"examples/tour.lua", "examples/info.lua", "bench/pingpong.lua", "bench/put_bw.lua",
		"tests/suite.lua", "tests/agp.lua", "tests/agp_mismatch.lua", "tests/fail_wait.lua", "tests/kill_wait.lua"} {
		if !strings.Contains(r.stdout, name) {
			t.Errorf("luacoll help does not list %s:\n%s", name, r.stdout)
		}
	}
	r = luacoll(t, nil, "repl", "--help")
	if !strings.Contains(r.stdout+r.stderr, "~/.luacoll_history") {
		t.Errorf("repl --help does not name the history file:\n%s", r.stdout+r.stderr)
	}
}

// A script that does not compile is reported once, before any rank runs.
func TestSyntaxErrorReportedOnce(t *testing.T) {
	s := writeScript(t, "local x = 1\nx = = 2\n")
	r := luacoll(t, nil, "run", "-n", "3", s)
	want := "luacoll run: " + s + ":2: syntax error near '='\n"
	if r.code != 1 || r.stderr != want || r.stdout != "" {
		t.Errorf("exit %d, stdout %q, stderr %q, want %q", r.code, r.stdout, r.stderr, want)
	}
}

// SIGQUIT to the launcher reaches every rank, which shows where its
// script is: its Lua traceback and the wait it was in, with what it waits
// for and the value seen; the Go stacks go to a file it names.
func TestQuitDumpsEveryRank(t *testing.T) {
	before := shmLeftovers(t)
	s := writeScript(t, `local lc = require("luacoll")
local w = lc.window{ bytes = 64, timeout_ms = 600000 }
print("started")
local function step()
  if lc.rank == 0 then w:wait_signal(0, ">=", 1); w:sync() end
  while true do end
end
step()`)
	cmd, e := startTwoRanks(t, s)
	time.Sleep(100 * time.Millisecond) // into the wait
	_ = cmd.Process.Signal(syscall.SIGQUIT)
	err := cmd.Wait()
	if ee, _ := err.(*exec.ExitError); ee == nil || ee.ExitCode() == 0 {
		t.Fatalf("exit %v, want a failure\n%s", err, e.String())
	}
	out := e.String()
	base := filepath.Base(s)
	for _, want := range []string{"luacoll: SIGQUIT",
		"[0] " + s + ":5: rank 0: w:sync: window 0: wait_signal(sig 0, sum over all peers) >= 1 (enqueued at " + s + ":5): aborted: SIGQUIT (where each rank is); last value seen 0",
		"[0] \t" + s + ":5: in function 'step'",
		"[1] rank 1: " + s + ":6: stopped: SIGQUIT (where each rank is)",
		"[1] \t" + s + ":8: in main chunk"} {
		if !strings.Contains(out, want) {
			t.Errorf("stderr lacks %q:\n%.3000s", want, out)
		}
	}
	if strings.Contains(out, "goroutine 1 ") {
		t.Errorf("the Go runtime's dump is on stderr:\n%.3000s", out)
	}
	files := regexp.MustCompile(`\[(\d)\] rank \d: Go stacks: (\S+)`).FindAllStringSubmatch(out, -1)
	if len(files) != 2 {
		t.Fatalf("%d ranks named their Go stacks' file (%s):\n%s", len(files), base, out)
	}
	for _, f := range files {
		b, err := os.ReadFile(f[2])
		if err != nil || !strings.Contains(string(b), "goroutine ") || !strings.Contains(string(b), "luabind.RunRank") {
			t.Errorf("rank %s: Go stacks %s: %v\n%.500s", f[1], f[2], err, b)
		}
		os.Remove(f[2])
	}
	checkClean(t, before)
}

// startTwoRanks runs script on 2 ranks with a 60 s timeout and returns once
// both printed "started" (or 20 s passed); stderr collects in the buffer.
func startTwoRanks(t *testing.T, script string) (*exec.Cmd, *syncBuffer) {
	t.Helper()
	return startRun(t, 2, "run", "-n", "2", "--timeout", "60s", script)
}

// startRun starts luacoll with args and returns once n ranks printed
// "started" (or 20 s passed); stderr collects in the buffer.
func startRun(t *testing.T, n int, args ...string) (*exec.Cmd, *syncBuffer) {
	t.Helper()
	cmd, _, e := startRunSaying(t, "started", n, args...)
	return cmd, e
}

// startRunSaying starts luacoll with args and waits (60 s at most) until
// its stdout says says n times; it returns the command and its stdout and
// stderr as they grow.
func startRunSaying(t *testing.T, says string, n int, args ...string) (*exec.Cmd, *syncBuffer, *syncBuffer) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = cleanEnv()
	var o, e syncBuffer
	cmd.Stdout, cmd.Stderr = &o, &e
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for strings.Count(o.String(), says) < n && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	return cmd, &o, &e
}

// waitingScript prints "started" on every rank, then rank 0 waits for a
// signal that never comes (10 minutes) while the others end theirs.
const waitingScript = `local lc = require("luacoll")
local w = lc.window{ bytes = 64, timeout_ms = 600000 }
print("started")
w:wait_signal(0, ">=", 1)
w:sync()`
