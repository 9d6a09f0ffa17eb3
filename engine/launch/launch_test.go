package launch

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/luacoll/luacoll/engine/bootstrap"
)

// The launcher tests run this test binary as the worker: with
// LUACOLL_TEST_WORKER set, TestLaunchWorkerProcess plays a rank and exits.
const testWorkerEnv = "LUACOLL_TEST_WORKER"

func TestLaunchWorkerProcess(t *testing.T) {
	mode := os.Getenv(testWorkerEnv)
	if mode == "" {
		t.Skip("runs only as a launched worker")
	}
	os.Exit(testWorker(mode))
}

// testWorker is a rank's behaviour in the launcher tests; it returns the
// exit code.
func testWorker(mode string) int {
	rank, _ := strconv.Atoi(os.Getenv(EnvRank))
	perRank := func(name string) int {
		parts := strings.Split(os.Getenv(name), ",")
		if rank < len(parts) {
			v, _ := strconv.Atoi(parts[rank])
			return v
		}
		return 0
	}
	switch mode {
	case "print":
		for i := range 50 {
			// Two writes per line: the launcher must put them together.
			fmt.Fprintf(os.Stdout, "rank %d line %d ", rank, i)
			fmt.Fprintf(os.Stdout, "%s\n", strings.Repeat("x", 100))
		}
		fmt.Fprintf(os.Stderr, "rank %d on stderr\n", rank)
		fmt.Fprintf(os.Stdout, "rank %d tail", rank)
		return 0
	case "exit":
		// LUACOLL_TEST_AFTER names, per rank, a rank to outlive (-1: none).
		dir := os.Getenv("LUACOLL_TEST_DIR")
		pidFile := func(r int) string { return filepath.Join(dir, fmt.Sprintf("pid-%d", r)) }
		if err := os.WriteFile(pidFile(rank)+".tmp", []byte(strconv.Itoa(os.Getpid())), 0o600); err != nil {
			return 2
		}
		if err := os.Rename(pidFile(rank)+".tmp", pidFile(rank)); err != nil {
			return 2
		}
		if after := perRank("LUACOLL_TEST_AFTER"); after >= 0 {
			waitForExit(pidFile(after))
			time.Sleep(200 * time.Millisecond)
		}
		return perRank("LUACOLL_TEST_CODES")
	case "selfkill":
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		time.Sleep(10 * time.Second)
		return 0
	case "sleep":
		if fail, err := strconv.Atoi(os.Getenv("LUACOLL_TEST_FAIL")); err == nil && fail == rank {
			fmt.Println("failing")
			return 4
		}
		fmt.Println("sleeping")
		time.Sleep(60 * time.Second)
		return 0
	case "join":
		// Rank LUACOLL_TEST_FAIL fails at once; the others wait for the
		// end of the join pipe and say when they saw it.
		if fail, err := strconv.Atoi(os.Getenv("LUACOLL_TEST_FAIL")); err == nil && fail == rank {
			return 4
		}
		fd, err := strconv.Atoi(os.Getenv(EnvJoinFD))
		if err != nil || fd < 3 {
			return 3
		}
		var b [1]byte
		n, err := os.NewFile(uintptr(fd), "join").Read(b[:])
		fmt.Printf("rank %d: join pipe ended (%d, %v)\n", rank, n, err)
		return 0
	case "env", "shm":
		return testWorkerBootstrap(mode)
	case "mps":
		return testWorkerMPS(rank)
	case "progress":
		// Rank 0 draws on the descriptor it was handed; nobody else has one.
		f := ProgressFile(os.Getenv, nil)
		switch {
		case f == nil && rank == 0:
			return 3
		case f != nil && rank != 0:
			return 4
		case f != nil:
			fmt.Fprintf(f, "\rrank %d progress", rank)
		}
		return 0
	}
	fmt.Fprintf(os.Stderr, "unknown worker mode %q\n", mode)
	return 2
}

// waitForExit waits (up to 20s) until the process whose pid is in file
// has exited.
func waitForExit(file string) {
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if b, err := os.ReadFile(file); err == nil {
			stat, err := os.ReadFile("/proc/" + string(b) + "/stat")
			if err != nil {
				return
			}
			// The state follows the command name in parentheses.
			if i := bytes.LastIndexByte(stat, ')'); i >= 0 && i+2 < len(stat) && stat[i+2] == 'Z' {
				return
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// testWorkerBootstrap reads the rank's environment, meets the other ranks
// and all-gathers the rank numbers.
func testWorkerBootstrap(mode string) int {
	env, ok, err := RankEnvFromEnv(os.Getenv)
	if err != nil || !ok {
		fmt.Fprintf(os.Stderr, "rank env: ok=%v err=%v\n", ok, err)
		return 2
	}
	stripped := os.Getenv("WORLD_SIZE") == "" && os.Getenv("SLURM_PROCID") == ""
	if env.Source != SourceLuacoll {
		stripped = true
	}
	fmt.Printf("env rank=%d size=%d local=%d/%d node=%d fd=%d prefixed=%v source=%s stripped=%v\n",
		env.Rank, env.Size, env.LocalRank, env.LocalSize, env.Node, env.ListenFD, env.Prefixed, env.Source, stripped)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cfg := bootstrap.Config{Rank: env.Rank, Size: env.Size, Addr: env.Addr, JobID: env.JobID,
		Timeout: 15 * time.Second, Host: "test"}
	if env.ListenFD > 0 {
		f := os.NewFile(uintptr(env.ListenFD), "listener")
		ln, err := net.FileListener(f)
		f.Close()
		if err != nil {
			fmt.Fprintf(os.Stderr, "inherited listener: %v\n", err)
			return 2
		}
		cfg.Listener = ln
	}
	b, err := bootstrap.Connect(ctx, cfg)
	if err != nil {
		fmt.Fprintf(os.Stderr, "connect: %v\n", err)
		return 3
	}
	all, err := b.AllGather(ctx, []byte(strconv.Itoa(env.Rank)))
	if err != nil {
		fmt.Fprintf(os.Stderr, "allgather: %v\n", err)
		b.Fail(err.Error())
		b.Close()
		return 4
	}
	parts := make([]string, len(all))
	for i, d := range all {
		parts[i] = string(d)
	}
	fmt.Printf("gathered %s job=%s\n", strings.Join(parts, ","), b.JobID())
	if mode == "shm" && env.Rank == 0 {
		p := filepath.Join(shmDir, SegmentPrefix(b.JobID())+"leftover")
		if err := os.WriteFile(p, []byte("x"), 0o600); err != nil {
			fmt.Fprintf(os.Stderr, "segment: %v\n", err)
			return 5
		}
		fmt.Printf("created %s\n", p)
	}
	if err := b.Close(); err != nil {
		fmt.Fprintf(os.Stderr, "close: %v\n", err)
		return 6
	}
	return 0
}

// recorder keeps every Write separately.
type recorder struct {
	mu     sync.Mutex
	writes []string
}

func (r *recorder) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.writes = append(r.writes, string(p))
	return len(p), nil
}

func (r *recorder) lines() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.writes...)
}

// workerConfig launches this test binary in the given worker mode.
func workerConfig(t *testing.T, n int, mode string, extraEnv ...string) (LaunchConfig, *recorder, *recorder) {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	stdout, stderr := &recorder{}, &recorder{}
	// GORACE: a race-enabled worker would otherwise linger a second at exit.
	env := append(os.Environ(), testWorkerEnv+"="+mode, "GORACE=atexit_sleep_ms=0")
	env = append(env, extraEnv...)
	return LaunchConfig{
		N: n, Path: self, Args: []string{"-test.run=^TestLaunchWorkerProcess$", "-test.timeout=60s"},
		Env: env, Stdout: stdout, Stderr: stderr, Grace: 5 * time.Second,
	}, stdout, stderr
}

func launch(t *testing.T, cfg LaunchConfig) (LaunchResult, time.Duration, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	start := time.Now()
	res, err := Launch(ctx, cfg)
	return res, time.Since(start), err
}

func TestLaunchOutputLines(t *testing.T) {
	cfg, stdout, stderr := workerConfig(t, 4, "print")
	cfg.Prefix = true
	res, _, err := launch(t, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode != 0 || res.FirstFailed != -1 || len(res.Ranks) != 4 {
		t.Fatalf("result %+v", res)
	}
	for r, x := range res.Ranks {
		if x.Rank != r || x.Code != 0 || x.Signal != 0 || x.Duration <= 0 {
			t.Errorf("rank %d: %+v", r, x)
		}
	}
	lineRE := regexp.MustCompile(`^\[(\d)\] rank (\d) line (\d+) x{100}\n$`)
	tailRE := regexp.MustCompile(`^\[(\d)\] rank (\d) tail\n$`)
	next := make([]int, 4)
	tails := make([]bool, 4)
	for _, w := range stdout.lines() {
		if m := lineRE.FindStringSubmatch(w); m != nil {
			r, _ := strconv.Atoi(m[1])
			i, _ := strconv.Atoi(m[3])
			if m[1] != m[2] || i != next[r] || tails[r] {
				t.Errorf("line out of place: %q (expected line %d of rank %d)", w, next[r], r)
			}
			next[r]++
			continue
		}
		if m := tailRE.FindStringSubmatch(w); m != nil && m[1] == m[2] {
			r, _ := strconv.Atoi(m[1])
			tails[r] = true
			continue
		}
		t.Errorf("write is not one whole prefixed line: %q", w)
	}
	for r := range 4 {
		if next[r] != 50 || !tails[r] {
			t.Errorf("rank %d: %d lines, tail %v", r, next[r], tails[r])
		}
	}
	errLines := stderr.lines()
	slices.Sort(errLines)
	want := []string{"[0] rank 0 on stderr\n", "[1] rank 1 on stderr\n", "[2] rank 2 on stderr\n", "[3] rank 3 on stderr\n"}
	if !slices.Equal(errLines, want) {
		t.Errorf("stderr %q, want %q", errLines, want)
	}
}

// LaunchConfig.Progress reaches rank 0 alone, as a descriptor it writes to
// directly (partial lines included), and a value of EnvProgressFD in the
// launcher's own environment does not leak to the ranks.
func TestLaunchProgressFile(t *testing.T) {
	pf, err := os.Create(filepath.Join(t.TempDir(), "progress"))
	if err != nil {
		t.Fatal(err)
	}
	defer pf.Close()
	cfg, stdout, stderr := workerConfig(t, 3, "progress", EnvProgressFD+"=3")
	cfg.Progress = pf
	res, _, err := launch(t, cfg)
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("exit %d, %v; stdout %q stderr %q", res.ExitCode, err, stdout.lines(), stderr.lines())
	}
	data, err := os.ReadFile(pf.Name())
	if err != nil {
		t.Fatal(err)
	}
	if string(data) != "\rrank 0 progress" {
		t.Errorf("progress file holds %q, want rank 0's line alone", data)
	}
	if len(stdout.lines()) != 0 || len(stderr.lines()) != 0 {
		t.Errorf("progress leaked into the output: %q %q", stdout.lines(), stderr.lines())
	}
	// Without Progress, rank 0 has no descriptor and says so (exit 3).
	cfg, _, _ = workerConfig(t, 2, "progress", EnvProgressFD+"=3")
	if res, _, _ := launch(t, cfg); res.ExitCode != 3 || res.FirstFailed != 0 {
		t.Errorf("without Progress: %+v", res)
	}
}

func TestLaunchSingleRankPassesOutputThrough(t *testing.T) {
	cfg, stdout, _ := workerConfig(t, 1, "print")
	if _, _, err := launch(t, cfg); err != nil {
		t.Fatal(err)
	}
	got := strings.Join(stdout.lines(), "")
	var want strings.Builder
	for i := range 50 {
		fmt.Fprintf(&want, "rank 0 line %d %s\n", i, strings.Repeat("x", 100))
	}
	want.WriteString("rank 0 tail") // a partial last line stays partial
	if got != want.String() {
		t.Errorf("stdout differs:\n%q\nwant\n%q", got, want.String())
	}
}

func TestLaunchExitCodeOfFirstFailure(t *testing.T) {
	// Rank 1 fails after rank 2 has failed; ranks 0 and 3 exit 0.
	cfg, _, _ := workerConfig(t, 4, "exit", "LUACOLL_TEST_CODES=0,3,7,0", "LUACOLL_TEST_AFTER=-1,2,-1,-1",
		"LUACOLL_TEST_DIR="+t.TempDir())
	res, _, err := launch(t, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode != 7 || res.FirstFailed != 2 {
		t.Errorf("exit code %d of rank %d, want 7 of rank 2", res.ExitCode, res.FirstFailed)
	}
	for r, want := range []int{0, 3, 7, 0} {
		if res.Ranks[r].Code != want || res.Ranks[r].Signal != 0 {
			t.Errorf("rank %d: %+v, want code %d", r, res.Ranks[r], want)
		}
	}
}

func TestLaunchKillsOthersAfterGrace(t *testing.T) {
	cfg, stdout, _ := workerConfig(t, 3, "sleep", "LUACOLL_TEST_FAIL=1")
	cfg.Grace = 300 * time.Millisecond
	res, took, err := launch(t, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if took > 10*time.Second {
		t.Errorf("launch took %v", took)
	}
	if res.ExitCode != 4 || res.FirstFailed != 1 {
		t.Errorf("exit code %d of rank %d, want 4 of rank 1", res.ExitCode, res.FirstFailed)
	}
	for _, r := range []int{0, 2} {
		x := res.Ranks[r]
		if x.Signal != syscall.SIGKILL || x.Code != 128+int(syscall.SIGKILL) {
			t.Errorf("rank %d: %+v, want killed", r, x)
		}
		if x.Duration < cfg.Grace {
			t.Errorf("rank %d: killed after %v, before the grace of %v", r, x.Duration, cfg.Grace)
		}
	}
	if out := strings.Join(stdout.lines(), ""); !strings.Contains(out, "failing") {
		t.Errorf("stdout %q", out)
	}
}

// The launcher closes the join pipe of every rank when one fails, so that
// ranks still joining the job stop at once, not after their timeout.
func TestLaunchJoinPipeEndsOnFailure(t *testing.T) {
	cfg, stdout, _ := workerConfig(t, 3, "join", "LUACOLL_TEST_FAIL=1")
	res, took, err := launch(t, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if res.FirstFailed != 1 || res.ExitCode != 4 {
		t.Errorf("first failed %d, exit %d", res.FirstFailed, res.ExitCode)
	}
	for _, r := range []int{0, 2} {
		if x := res.Ranks[r]; x.Code != 0 || x.Signal != 0 {
			t.Errorf("rank %d: %+v: did not see the pipe end", r, x)
		}
		if want := fmt.Sprintf("rank %d: join pipe ended (0, EOF)", r); !strings.Contains(strings.Join(stdout.lines(), ""), want) {
			t.Errorf("no %q in %q", want, stdout.lines())
		}
	}
	if took >= cfg.Grace {
		t.Errorf("took %v: the ranks waited out the grace of %v", took, cfg.Grace)
	}
}

func TestLaunchInterrupt(t *testing.T) {
	cfg, stdout, _ := workerConfig(t, 2, "sleep", "LUACOLL_TEST_FAIL=-1")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		// Interrupt once both ranks are running.
		deadline := time.Now().Add(20 * time.Second)
		for len(stdout.lines()) < 2 && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		cancel()
	}()
	start := time.Now()
	res, err := Launch(ctx, cfg)
	if !errors.Is(err, context.Canceled) {
		t.Errorf("error %v, want context.Canceled", err)
	}
	if took := time.Since(start); took > 20*time.Second {
		t.Errorf("interrupted launch took %v", took)
	}
	if res.ExitCode != 130 {
		t.Errorf("exit code %d, want 130", res.ExitCode)
	}
	for r, x := range res.Ranks {
		if x.Signal != syscall.SIGINT {
			t.Errorf("rank %d: %+v, want SIGINT", r, x)
		}
	}
}

func TestLaunchBootstrapAcrossProcesses(t *testing.T) {
	cfg, stdout, stderr := workerConfig(t, 4, "env",
		// Another launcher's variables must not reach the ranks.
		"RANK=9", "WORLD_SIZE=10", "MASTER_ADDR=10.9.9.9", "SLURM_PROCID=3", "OMPI_COMM_WORLD_RANK=2",
		EnvListenFD+"=7")
	cfg.Prefix = true
	res, _, err := launch(t, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode != 0 {
		t.Fatalf("exit code %d (rank %d); stderr %q", res.ExitCode, res.FirstFailed, stderr.lines())
	}
	if len(res.JobID) != 16 {
		t.Errorf("job id %q", res.JobID)
	}
	out := stdout.lines()
	for r := range 4 {
		fd := 0
		if r == 0 {
			fd = 3
		}
		want := []string{
			fmt.Sprintf("[%d] env rank=%d size=4 local=%d/4 node=0 fd=%d prefixed=true source=luacoll stripped=true\n", r, r, r, fd),
			fmt.Sprintf("[%d] gathered 0,1,2,3 job=%s\n", r, res.JobID),
		}
		for _, w := range want {
			if !slices.Contains(out, w) {
				t.Errorf("missing %q in %q", w, out)
			}
		}
	}
}

func TestLaunchRemovesLeftoverSegments(t *testing.T) {
	if _, err := os.Stat(shmDir); err != nil {
		t.Skipf("no %s: %v", shmDir, err)
	}
	cfg, stdout, stderr := workerConfig(t, 2, "shm")
	res, _, err := launch(t, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode != 0 {
		t.Fatalf("exit code %d; stderr %q", res.ExitCode, stderr.lines())
	}
	want := "created " + filepath.Join(shmDir, SegmentPrefix(res.JobID)+"leftover") + "\n"
	out := strings.Join(stdout.lines(), "")
	if !strings.Contains(out, want) {
		t.Fatalf("stdout %q lacks %q", out, want)
	}
	if _, err := os.Stat(filepath.Join(shmDir, SegmentPrefix(res.JobID)+"leftover")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("leftover segment still there: %v", err)
	}
}

func TestRemoveJobSegments(t *testing.T) {
	if SegmentPrefix("abc") != "luacoll-abc-" {
		t.Fatalf("SegmentPrefix = %q", SegmentPrefix("abc"))
	}
	dir := t.TempDir()
	for _, name := range []string{"luacoll-abc-1", "luacoll-abc-win-2", "luacoll-abcd-1", "luacoll-ab-1", "other"} {
		if err := os.WriteFile(filepath.Join(dir, name), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	removed, err := removeSegmentsIn(dir, "abc")
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(removed)
	want := []string{filepath.Join(dir, "luacoll-abc-1"), filepath.Join(dir, "luacoll-abc-win-2")}
	if !slices.Equal(removed, want) {
		t.Errorf("removed %q, want %q", removed, want)
	}
	left, _ := os.ReadDir(dir)
	if len(left) != 3 {
		t.Errorf("%d files left, want 3", len(left))
	}
	for _, bad := range []string{"", "../x", "a/b", "*"} {
		if _, err := RemoveJobSegments(bad); err == nil {
			t.Errorf("job %q: no error", bad)
		}
	}
	if removed, err := removeSegmentsIn(filepath.Join(dir, "missing"), "abc"); err != nil || removed != nil {
		t.Errorf("missing dir: %v, %v", removed, err)
	}
}

func TestLaunchBadExecutable(t *testing.T) {
	_, err := Launch(context.Background(), LaunchConfig{N: 2, Path: filepath.Join(t.TempDir(), "nothing")})
	if err == nil || !strings.Contains(err.Error(), "starting rank 0 of 2") {
		t.Errorf("error %v", err)
	}
	if _, err := Launch(context.Background(), LaunchConfig{N: 0, Path: "/bin/true"}); err == nil {
		t.Errorf("0 ranks: no error")
	}
}

// TestExternalLauncherTorchrun starts three ranks the way torchrun would
// and checks that they meet, rank 0 coming last.
func TestExternalLauncherTorchrun(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	base := childBaseEnv(os.Environ())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	outs := make([]bytes.Buffer, 3)
	errs := make([]bytes.Buffer, 3)
	cmds := make([]*exec.Cmd, 3)
	for _, r := range []int{2, 1, 0} {
		if r == 0 {
			time.Sleep(300 * time.Millisecond)
		}
		cmd := exec.CommandContext(ctx, self, "-test.run=^TestLaunchWorkerProcess$", "-test.timeout=60s")
		cmd.Env = append(slices.Clip(base), testWorkerEnv+"=env", "GORACE=atexit_sleep_ms=0", fmt.Sprintf("RANK=%d", r), "WORLD_SIZE=3",
			"LOCAL_RANK="+strconv.Itoa(r), "LOCAL_WORLD_SIZE=3", "MASTER_ADDR=127.0.0.1", fmt.Sprintf("MASTER_PORT=%d", port))
		cmd.Stdout, cmd.Stderr = &outs[r], &errs[r]
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds[r] = cmd
	}
	for r, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Errorf("rank %d: %v; stderr %q", r, err, errs[r].String())
		}
	}
	var job string
	for r := range 3 {
		out := outs[r].String()
		wantEnv := fmt.Sprintf("env rank=%d size=3 local=%d/3 node=0 fd=0 prefixed=false source=torchrun", r, r)
		if !strings.Contains(out, wantEnv) {
			t.Errorf("rank %d: output %q lacks %q", r, out, wantEnv)
		}
		m := regexp.MustCompile(`gathered 0,1,2 job=([0-9a-f]{16})\n`).FindStringSubmatch(out)
		if m == nil {
			t.Errorf("rank %d: output %q lacks the gathered ranks", r, out)
			continue
		}
		if job == "" {
			job = m[1]
		} else if m[1] != job {
			t.Errorf("rank %d: job %s, rank 0 has %s", r, m[1], job)
		}
	}
}
