package launch

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Several ranks on one GPU: without MPS their contexts take turns on the
// device, so kernels that wait for each other crawl or time out. The
// launcher can give a job its own MPS control daemon: pipe and log
// directories under the job's temporary directory, the ranks started as
// its clients, the daemon told to quit when the job ends however it ends.

// MPS modes (--mps).
const (
	MPSAuto = "auto" // a daemon when ranks share a GPU and one can be started
	MPSOn   = "on"   // always a daemon (an error when there is no control program)
	MPSOff  = "off"  // never
)

// MPSControlProgram is the MPS control program, looked up in PATH.
const MPSControlProgram = "nvidia-cuda-mps-control"

// Variables of MPS clients, and the one luacoll's launcher adds.
const (
	EnvMPSPipe = "CUDA_MPS_PIPE_DIRECTORY"
	EnvMPSLog  = "CUDA_MPS_LOG_DIRECTORY"
	// EnvMPSThreads caps the share of a GPU's SMs an MPS client may use.
	EnvMPSThreads = "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"
	// EnvMPS is MPSDaemonJob in the ranks of a job whose launcher started
	// a private MPS control daemon for it.
	EnvMPS       = "LUACOLL_MPS"
	MPSDaemonJob = "job"
)

// defaultMPSTimeout bounds the daemon's start and its stop.
const defaultMPSTimeout = 10 * time.Second

// CheckMPSMode accepts auto, on and off.
func CheckMPSMode(mode string) error {
	switch mode {
	case MPSAuto, MPSOn, MPSOff:
		return nil
	}
	return fmt.Errorf("want auto, on or off")
}

// GPUShare is a device that several local ranks use.
type GPUShare struct {
	Device int
	Ranks  []int
}

// SharedGPUs returns the devices that more than one of n local ranks use,
// as the CUDA backend picks them: gpus[r] when gpus is given (--gpus),
// else r modulo devices. With neither it knows nothing and returns nil.
func SharedGPUs(n int, gpus []int, devices int) []GPUShare {
	byDev := map[int][]int{}
	for r := range n {
		switch {
		case len(gpus) > 0:
			if r >= len(gpus) {
				continue // the rank fails with its own error
			}
			byDev[gpus[r]] = append(byDev[gpus[r]], r)
		case devices > 0:
			byDev[r%devices] = append(byDev[r%devices], r)
		}
	}
	var out []GPUShare
	for d, rs := range byDev {
		if len(rs) > 1 {
			out = append(out, GPUShare{Device: d, Ranks: rs})
		}
	}
	slices.SortFunc(out, func(a, b GPUShare) int { return a.Device - b.Device })
	return out
}

// MPSThreadPercentage is the share of a GPU's SMs each MPS client gets
// when ranks share GPUs: 100 over the most ranks on one GPU, so that every
// rank's kernels can run at once (a kernel that spins waiting for a peer
// on its GPU must leave room for the peer's); 0 when no GPU is shared.
// Measured on one H100: with two ranks and no cap, the one-kernel
// all-gather of path sm timed out; with 50 it passed.
func MPSThreadPercentage(shares []GPUShare) int {
	most := 0
	for _, s := range shares {
		most = max(most, len(s.Ranks))
	}
	if most < 2 {
		return 0
	}
	return max(1, 100/most)
}

// describeShares reads "ranks 0,2 share GPU 0 and ranks 1,3 share GPU 1".
func describeShares(shares []GPUShare) string {
	parts := make([]string, len(shares))
	for i, s := range shares {
		rs := make([]string, len(s.Ranks))
		for j, r := range s.Ranks {
			rs[j] = strconv.Itoa(r)
		}
		parts[i] = fmt.Sprintf("ranks %s share GPU %d", strings.Join(rs, ","), s.Device)
	}
	return strings.Join(parts, " and ")
}

// MPSPlan is what PlanMPS decided.
type MPSPlan struct {
	// Start asks for a private MPS control daemon for the job.
	Start bool
	// Note is what to tell the user before the run ("" for nothing).
	Note string
}

// PlanMPS decides, for an --mps mode, whether the job gets its own MPS
// control daemon. shares are the devices ranks share (SharedGPUs), control
// the path of nvidia-cuda-mps-control ("" when there is none), running a
// description of an MPS already running on the host ("" when none is).
func PlanMPS(mode string, shares []GPUShare, control, running string) (MPSPlan, error) {
	if err := CheckMPSMode(mode); err != nil {
		return MPSPlan{}, fmt.Errorf("--mps %q: %w", mode, err)
	}
	slow := func(why, fix string) string {
		return fmt.Sprintf("%s without MPS (%s): their CUDA contexts take turns on the GPU, so device-side "+
			"waits between them (device put_signal, ping-pong, barriers, the all-gather's sync kernels) take "+
			"milliseconds a step or time out; %s, or give each rank its own GPU (--gpus, fewer ranks)",
			describeShares(shares), why, fix)
	}
	switch mode {
	case MPSOff:
		if len(shares) > 0 {
			return MPSPlan{Note: slow("--mps off", "use --mps on")}, nil
		}
		return MPSPlan{}, nil
	case MPSOn:
		if control == "" {
			return MPSPlan{}, fmt.Errorf("--mps on: %s not found in PATH (it comes with the NVIDIA driver's "+
				"utilities, e.g. Debian's nvidia-cuda-mps)", MPSControlProgram)
		}
		plan := MPSPlan{Start: true}
		if running != "" {
			plan.Note = fmt.Sprintf("MPS is already running (%s); this job starts its own private daemon beside it", running)
		}
		return plan, nil
	}
	if len(shares) == 0 {
		return MPSPlan{}, nil
	}
	switch {
	case running != "":
		return MPSPlan{Note: fmt.Sprintf("%s; MPS is already running (%s), so this job starts no daemon of its "+
			"own: the ranks are its clients if it serves this user (else use --mps on)", describeShares(shares), running)}, nil
	case control == "":
		return MPSPlan{Note: slow(MPSControlProgram+" not found in PATH",
			"install it (it comes with the NVIDIA driver's utilities) and use --mps on")}, nil
	}
	return MPSPlan{Start: true, Note: describeShares(shares) + ": starting a private MPS control daemon for the job"}, nil
}

// RunningMPS describes the MPS control daemons and servers running on
// this host ("nvidia-cuda-mps-control pid 812"), from the process table
// under procDir ("/proc"); "" when there are none.
func RunningMPS(procDir string) string {
	entries, err := os.ReadDir(procDir)
	if err != nil {
		return ""
	}
	var found []string
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		comm, err := os.ReadFile(filepath.Join(procDir, e.Name(), "comm"))
		if err != nil {
			continue
		}
		// The kernel keeps 15 characters of the name. A zombie (an
		// exited daemon whose parent never reaped it, as under a
		// container's init that does not) serves nobody.
		name := strings.TrimSpace(string(comm))
		if strings.HasPrefix(name, "nvidia-cuda-mps") && !exited(filepath.Join(procDir, e.Name(), "stat")) {
			found = append(found, fmt.Sprintf("pid %d", pid))
		}
	}
	if len(found) == 0 {
		return ""
	}
	return "nvidia-cuda-mps " + strings.Join(found, ", ")
}

// exited reports whether the process whose /proc stat file is at path has
// exited and waits to be reaped (state Z or X); a missing or unreadable
// file says no.
func exited(path string) bool {
	b, err := os.ReadFile(path)
	if err != nil {
		return false
	}
	// "pid (comm) S ...": the name may hold spaces and parentheses.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		return false
	}
	return b[i+2] == 'Z' || b[i+2] == 'X'
}

// MPSConfig asks Launch to run the ranks as clients of a private MPS
// control daemon.
type MPSConfig struct {
	// Control is the nvidia-cuda-mps-control program.
	Control string
	// Timeout bounds the daemon's start and its stop (default 10s).
	Timeout time.Duration
}

// mpsDaemon is a job's running MPS control daemon.
type mpsDaemon struct {
	cfg        MPSConfig
	dir        string   // the job's temporary directory, removed at stop
	pipe, logs string   // CUDA_MPS_PIPE_DIRECTORY, CUDA_MPS_LOG_DIRECTORY
	env        []string // the daemon's environment
}

// clientEnv is what a rank needs to be the daemon's client.
func (d *mpsDaemon) clientEnv() []string {
	return []string{EnvMPSPipe + "=" + d.pipe, EnvMPSLog + "=" + d.logs, EnvMPS + "=" + MPSDaemonJob}
}

// MPSTempBase is where the MPS daemons' job directories go: the system's
// temporary directory, unless its path leaves too little room for the
// daemon's sockets.
func MPSTempBase() string {
	if t := os.TempDir(); len(t) <= 48 {
		return t
	}
	return "/tmp"
}

// startMPS starts `nvidia-cuda-mps-control -d` with pipe and log
// directories in a new temporary directory of the job, and waits until
// its control socket exists. base is the environment (nil: os.Environ()).
func startMPS(cfg MPSConfig, job string, base []string) (*mpsDaemon, error) {
	if cfg.Timeout <= 0 {
		cfg.Timeout = defaultMPSTimeout
	}
	if base == nil {
		base = os.Environ()
	}
	// Named after this process (see TempDir): `luacoll clean` stops the
	// daemon and removes the directory once the launcher is gone.
	dir, err := os.MkdirTemp(MPSTempBase(), fmt.Sprintf("luacoll-mps-%d-%s-", os.Getpid(), job))
	if err != nil {
		return nil, fmt.Errorf("mps: job directory: %w", err)
	}
	d := &mpsDaemon{cfg: cfg, dir: dir, pipe: filepath.Join(dir, "mps-pipe"), logs: filepath.Join(dir, "mps-log")}
	for _, p := range []string{d.pipe, d.logs} {
		if err := os.Mkdir(p, 0o700); err != nil {
			_ = os.RemoveAll(dir)
			return nil, fmt.Errorf("mps: %w", err)
		}
	}
	for _, kv := range base {
		k, _, _ := strings.Cut(kv, "=")
		if k != EnvMPSPipe && k != EnvMPSLog {
			d.env = append(d.env, kv)
		}
	}
	d.env = append(d.env, EnvMPSPipe+"="+d.pipe, EnvMPSLog+"="+d.logs)

	// Its output goes to a file: a daemon that keeps the descriptors of
	// the command that started it would hold a pipe open for good.
	outPath := filepath.Join(dir, "start.out")
	out, err := os.Create(outPath)
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("mps: %w", err)
	}
	cmd := exec.Command(cfg.Control, "-d")
	cmd.Env, cmd.Stdout, cmd.Stderr = d.env, out, out
	err = runWithin(cmd, cfg.Timeout)
	out.Close()
	said, _ := os.ReadFile(outPath)
	if err != nil {
		d.stop()
		return nil, fmt.Errorf("mps: starting the control daemon (%s -d): %w%s", cfg.Control, err, quoteOutput(said))
	}
	control := filepath.Join(d.pipe, "control")
	deadline := time.Now().Add(cfg.Timeout)
	for {
		if _, err := os.Lstat(control); err == nil {
			return d, nil
		}
		if time.Now().After(deadline) {
			d.stop()
			return nil, fmt.Errorf("mps: the control daemon did not make %s within %v%s", control, cfg.Timeout, quoteOutput(said))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// stop tells the daemon to quit (`echo quit | nvidia-cuda-mps-control`
// with the daemon's environment), waits for it and its server to end,
// kills what is left after the timeout, and removes the job directory. It
// returns what went wrong, as notes for the user.
func (d *mpsDaemon) stop() (notes []string) {
	cmd := exec.Command(d.cfg.Control)
	cmd.Env = d.env
	cmd.Stdin = strings.NewReader("quit\n")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := runWithin(cmd, d.cfg.Timeout); err != nil {
		notes = append(notes, fmt.Sprintf("luacoll: telling the MPS control daemon to quit: %v%s", err, quoteOutput(out.Bytes())))
	}
	// The daemon carries the pipe directory in its environment, and so
	// does the server it started, unless the daemon gave it another: count
	// the daemon's children too. The ranks, which had it as well, have
	// exited.
	mark := EnvMPSPipe + "=" + d.pipe
	deadline := time.Now().Add(d.cfg.Timeout)
	for {
		left := withChildren("/proc", processesWithEnv("/proc", mark))
		if len(left) == 0 {
			break
		}
		if time.Now().After(deadline) {
			for _, pid := range left {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
			// SIGKILL takes effect a moment later: see them gone (a
			// zombie's environment reads empty) before returning.
			for gone := time.Now().Add(2 * time.Second); time.Now().Before(gone); time.Sleep(5 * time.Millisecond) {
				if len(processesWithEnv("/proc", mark)) == 0 {
					break
				}
			}
			notes = append(notes, fmt.Sprintf("luacoll: the MPS daemon of the job did not quit within %v; killed pids %v",
				d.cfg.Timeout, left))
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := os.RemoveAll(d.dir); err != nil {
		notes = append(notes, fmt.Sprintf("luacoll: removing the MPS directory: %v", err))
	}
	return notes
}

// runWithin runs cmd, killing it after limit.
func runWithin(cmd *exec.Cmd, limit time.Duration) error {
	if err := cmd.Start(); err != nil {
		return err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t := time.NewTimer(limit)
	defer t.Stop()
	select {
	case err := <-done:
		return err
	case <-t.C:
		_ = cmd.Process.Kill()
		<-done
		return fmt.Errorf("no answer within %v", limit)
	}
}

// quoteOutput is ": <output>" for a program's non-empty output.
func quoteOutput(b []byte) string {
	s := strings.TrimSpace(string(b))
	if s == "" {
		return ""
	}
	if len(s) > 2000 {
		s = s[:2000] + "..."
	}
	return ": " + s
}

// processesWithEnv lists the processes (other than this one) whose
// environment holds the entry kv ("NAME=value"). Processes whose
// environment cannot be read (another user's, a zombie's) are not listed.
func processesWithEnv(procDir, kv string) []int {
	entries, err := os.ReadDir(procDir)
	if err != nil {
		return nil
	}
	want := []byte(kv)
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		env, err := os.ReadFile(filepath.Join(procDir, e.Name(), "environ"))
		if err != nil {
			continue // gone, or not ours
		}
		for _, entry := range bytes.Split(env, []byte{0}) {
			if bytes.Equal(entry, want) {
				pids = append(pids, pid)
				break
			}
		}
	}
	return pids
}

// withChildren adds to pids the processes whose parent is one of them.
func withChildren(procDir string, pids []int) []int {
	if len(pids) == 0 {
		return nil
	}
	entries, err := os.ReadDir(procDir)
	if err != nil {
		return pids
	}
	out := append([]int(nil), pids...)
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || slices.Contains(pids, pid) {
			continue
		}
		stat, err := os.ReadFile(filepath.Join(procDir, e.Name(), "stat"))
		if err != nil {
			continue
		}
		// "pid (comm) state ppid ...": the name may hold spaces and parentheses.
		i := bytes.LastIndexByte(stat, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(stat[i+1:]))
		if len(f) < 2 || f[0] == "Z" {
			continue
		}
		if ppid, err := strconv.Atoi(f[1]); err == nil && slices.Contains(pids, ppid) {
			out = append(out, pid)
		}
	}
	return out
}
