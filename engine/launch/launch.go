package launch

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
	"golang.org/x/term"

	"github.com/luacoll/luacoll/engine/bootstrap"
)

const (
	defaultGrace  = 15 * time.Second
	shmDir        = "/dev/shm"
	listenFDChild = 3                      // ExtraFiles[0] in the child
	maxOutputLine = 64 << 20               // longer lines are split, the pieces after the first marked
	outputDrain   = 2 * time.Second        // how long output may trail a rank's exit
	stoppedPoll   = 100 * time.Millisecond // how often a failing job looks for stopped ranks
	stdinDelay    = time.Second            // how long a rank's stdin copy may trail its exit
	lineReadBuf   = 64 << 10               // read buffer of each output stream
	signalExitMin = 128                    // exit code of a rank killed by signal s is 128+s
	interruptCode = 128 + 2                // exit code reported when interrupted (SIGINT)
	segmentPrefix = "luacoll-"             // shared-memory segment names start with this
	launchName    = "luacoll launch"       // error prefix
)

// ExitPeerFailed is the exit status of a rank that stopped only because
// another rank failed or died; the launcher reports the other rank's status.
const ExitPeerFailed = 77

// LaunchConfig configures Launch.
type LaunchConfig struct {
	N    int      // number of ranks
	Path string   // executable (usually os.Executable())
	Args []string // arguments after the executable, the same for every rank
	Env  []string // base environment (nil: os.Environ())
	// Prefix prefixes every output line with "[rank] ".
	Prefix         bool
	Stdout, Stderr io.Writer // nil: discarded
	// KilledByCaller, when set, reports whether the caller itself ended
	// rank with a signal (the REPL kills ranks that do not stop): its
	// death is then not reported as one nobody in the job caused.
	KilledByCaller func(rank int) bool
	// Grace is how long the other ranks get to exit on their own after the
	// first rank fails, or after an interrupt, before SIGKILL (default 15s).
	Grace time.Duration
	// Stdin, when set, gives each rank's standard input (nil reader: none).
	Stdin func(rank int) io.Reader
	// ExtraEnv, when set, adds variables to a rank's environment.
	ExtraEnv func(rank int) []string
	// Nodes splits the ranks into this many logical nodes (0 or 1: one):
	// each node has its own host identity, shared-memory directory,
	// temporary directory and share of the CPUs, so the ranks of different
	// nodes reach each other over the network only.
	Nodes int
	// Files are handed to every rank: each is open in the rank as the
	// descriptor number its Env variable names (the script the launcher
	// read once, say).
	Files []InheritedFile
	// Progress, when set (the launcher's terminal, say), is handed to rank
	// 0 as a descriptor named in EnvProgressFD: progress lines that redraw
	// themselves ("\r...") go there directly, since rank output is passed
	// on a whole line at a time (see ProgressFile).
	Progress *os.File
	// MPS, when set, starts a private MPS control daemon for the job
	// before the ranks, makes them its clients, and stops it when the job
	// ends, however it ends (see PlanMPS).
	MPS *MPSConfig
}

// InheritedFile is a file every rank inherits (LaunchConfig.Files).
type InheritedFile struct {
	Env  string // the variable that tells the rank the descriptor number
	File *os.File
}

// RankExit is how one rank ended.
type RankExit struct {
	Rank     int
	Code     int            // exit status, 128+signal when killed by a signal
	Signal   syscall.Signal // the signal that ended it, 0 when it exited
	Duration time.Duration  // from start to exit
}

// LaunchResult is the outcome of Launch.
type LaunchResult struct {
	// ExitCode is 0 when every rank exited 0, else the code of the first
	// rank (in time) that failed.
	ExitCode int
	// FirstFailed is that rank, or -1.
	FirstFailed int
	Ranks       []RankExit // indexed by rank
	JobID       string     // the job id given to every rank
}

// SegmentPrefix is how the names of a job's shared-memory segments in
// /dev/shm start.
func SegmentPrefix(job string) string { return segmentPrefix + job + "-" }

// RemoveJobSegments removes the job's leftover shared-memory segments from
// /dev/shm and returns their paths.
func RemoveJobSegments(job string) (removed []string, err error) {
	return removeSegmentsIn(shmDir, job)
}

func removeSegmentsIn(dir, job string) ([]string, error) {
	if job == "" {
		return nil, errors.New("remove job segments: empty job id")
	}
	if err := checkJobID(job); err != nil {
		return nil, fmt.Errorf("remove job segments: job id %q: %w", job, err)
	}
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("remove job segments: %w", err)
	}
	prefix := SegmentPrefix(job)
	var removed []string
	var errs []error
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), prefix) {
			continue
		}
		p := filepath.Join(dir, e.Name())
		if err := os.Remove(p); err != nil {
			if !errors.Is(err, fs.ErrNotExist) {
				errs = append(errs, fmt.Errorf("remove job segments: %w", err))
			}
			continue
		}
		removed = append(removed, p)
	}
	return removed, errors.Join(errs...)
}

// launchedRank is one running child.
type launchedRank struct {
	rank    int
	cmd     *exec.Cmd
	start   time.Time
	outputs []*os.File    // read ends of the rank's stdout and stderr
	pumped  chan struct{} // closed when both outputs are drained
	exited  bool
	killed  bool // the launcher sent it a signal
}

type rankExitEvent struct {
	rank  int
	state *os.ProcessState
	err   error
	at    time.Time
}

// Launch starts cfg.N ranks of cfg.Path and waits for all of them. Rank 0
// inherits a listening socket on 127.0.0.1 for the bootstrap; every rank
// learns its place from LUACOLL_* variables. When a rank fails the others
// get cfg.Grace to exit (the bootstrap aborts them), then are killed; when
// ctx ends every rank gets SIGINT, then SIGKILL after cfg.Grace. Launch
// returns an error only when the ranks could not be started, or (with the
// result filled in) when ctx ended.
func Launch(ctx context.Context, cfg LaunchConfig) (LaunchResult, error) {
	res := LaunchResult{FirstFailed: -1}
	if cfg.N < 1 || cfg.N > maxRanks {
		return res, fmt.Errorf("%s: %d ranks, want 1..%d", launchName, cfg.N, maxRanks)
	}
	if cfg.Path == "" {
		return res, fmt.Errorf("%s: no executable", launchName)
	}
	if cfg.Grace <= 0 {
		cfg.Grace = defaultGrace
	}
	if cfg.Env == nil {
		cfg.Env = os.Environ()
	}
	sink := &lineSink{stdout: cfg.Stdout, stderr: cfg.Stderr, prefix: cfg.Prefix, terminate: cfg.Prefix || cfg.N > 1}
	if cfg.Progress != nil {
		// Rank 0 draws a progress line on this terminal: a line of output
		// erases it first rather than run on after it.
		sink.eraseErr = true
		f, ok := cfg.Stdout.(*os.File)
		sink.eraseOut = ok && IsTerminal(f)
	}
	if sink.stdout == nil {
		sink.stdout = io.Discard
	}
	if sink.stderr == nil {
		sink.stderr = io.Discard
	}
	job, err := bootstrap.NewJobID()
	if err != nil {
		return res, fmt.Errorf("%s: %w", launchName, err)
	}
	res.JobID = job
	var nodes *logicalNodes
	if cfg.Nodes > 1 {
		if err := CheckNodes(cfg.Nodes, cfg.N); err != nil {
			return res, fmt.Errorf("%s: %w", launchName, err)
		}
		if nodes, err = newLogicalNodes(job, cfg.Nodes, shmDir, cfg.Env); err != nil {
			return res, fmt.Errorf("%s: %w", launchName, err)
		}
		defer nodes.remove()
	}

	var mpsEnv []string
	if cfg.MPS != nil {
		d, err := startMPS(*cfg.MPS, job, cfg.Env)
		if err != nil {
			return res, fmt.Errorf("%s: %w", launchName, err)
		}
		defer func() {
			for _, n := range d.stop() {
				sink.note(n)
			}
		}()
		mpsEnv = d.clientEnv()
	}

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return res, fmt.Errorf("%s: rendezvous listener: %w", launchName, err)
	}
	addr := ln.Addr().String()
	lnFile, err := ln.(*net.TCPListener).File()
	_ = ln.Close() // the duplicate in lnFile keeps listening
	if err != nil {
		return res, fmt.Errorf("%s: rendezvous listener: %w", launchName, err)
	}
	defer lnFile.Close()

	base, err := withJobSecret(childBaseEnv(cfg.Env))
	if err != nil {
		return res, fmt.Errorf("%s: %w", launchName, err)
	}
	if len(cfg.Files) > 0 {
		// The launcher's own variables for them replace any inherited ones.
		kept := base[:0]
		for _, kv := range base {
			key, _, _ := strings.Cut(kv, "=")
			if !slices.ContainsFunc(cfg.Files, func(f InheritedFile) bool { return f.Env == key }) {
				kept = append(kept, kv)
			}
		}
		base = kept
	}
	exits := make(chan rankExitEvent, cfg.N)
	ranks := make([]*launchedRank, 0, cfg.N)
	for r := range cfg.N {
		node, local, localSize := NodeOf(r, cfg.N, cfg.Nodes)
		env := append([]string(nil), base...)
		env = append(env,
			EnvRank+"="+strconv.Itoa(r),
			EnvSize+"="+strconv.Itoa(cfg.N),
			EnvLocalRank+"="+strconv.Itoa(local),
			EnvLocalSize+"="+strconv.Itoa(localSize),
			EnvNode+"="+strconv.Itoa(node),
			EnvAddr+"="+addr,
			EnvJob+"="+job,
		)
		if nodes != nil {
			env = append(env, nodes.env(node)...)
			env = append(env, EnvDeviceIndex+"="+strconv.Itoa(r))
		}
		if cfg.Prefix {
			env = append(env, EnvPrefixed+"=1")
		}
		var extra []*os.File
		if r == 0 {
			extra = []*os.File{lnFile}
			env = append(env, EnvListenFD+"="+strconv.Itoa(listenFDChild))
			if cfg.Progress != nil {
				extra = append(extra, cfg.Progress)
				env = append(env, EnvProgressFD+"="+strconv.Itoa(listenFDChild+1))
			}
		}
		env = append(env, mpsEnv...)
		for _, f := range cfg.Files {
			extra = append(extra, f.File)
			env = append(env, f.Env+"="+strconv.Itoa(listenFDChild+len(extra)-1))
		}
		if cfg.ExtraEnv != nil {
			env = append(env, cfg.ExtraEnv(r)...)
		}
		var stdin io.Reader
		if cfg.Stdin != nil {
			stdin = cfg.Stdin(r)
		}
		var lr *launchedRank
		err := nodes.start(node, func() (err error) {
			lr, err = startRank(r, cfg, env, extra, stdin, sink, exits)
			return err
		})
		if err != nil {
			killRanks(ranks, syscall.SIGKILL)
			for range ranks {
				<-exits
			}
			for _, lr := range ranks {
				lr.closeOutputs()
			}
			return res, fmt.Errorf("%s: starting rank %d of %d: %w", launchName, r, cfg.N, err)
		}
		ranks = append(ranks, lr)
	}
	_ = lnFile.Close()

	res.Ranks = make([]RankExit, cfg.N)
	interrupted := false
	running := cfg.N
	done := ctx.Done()
	var grace *time.Timer
	var poll *time.Ticker
	var graceC, pollC <-chan time.Time
	startGrace := func() {
		if grace == nil {
			grace = time.NewTimer(cfg.Grace)
			graceC = grace.C
			// A stopped rank (SIGSTOP, a debugger) cannot exit on its
			// own: look for one while the others get their grace.
			poll = time.NewTicker(stoppedPoll)
			pollC = poll.C
		}
	}
	// SIGQUIT (Ctrl-\ at a terminal, kill -QUIT) goes on to every rank:
	// each prints where it is and exits (a script's rank: its Lua
	// traceback and the wait it was in, with the Go runtime's stacks in a
	// file; others: the Go runtime's dump), which is how to see where a
	// hung job waits. The ranks have process groups of their own, so a
	// terminal's Ctrl-\ reaches only the launcher.
	quit := make(chan os.Signal, 1)
	signal.Notify(quit, syscall.SIGQUIT)
	defer signal.Stop(quit)
	for running > 0 {
		select {
		case <-quit:
			sink.note("luacoll: SIGQUIT: every rank shows where it is and exits")
			for _, lr := range ranks {
				if !lr.exited && lr.cmd.Process != nil {
					_ = lr.cmd.Process.Signal(syscall.SIGQUIT)
				}
			}
		case ev := <-exits:
			running--
			lr := ranks[ev.rank]
			lr.exited = true
			x := RankExit{Rank: ev.rank, Duration: ev.at.Sub(lr.start)}
			x.Code, x.Signal = exitStatus(ev.state, ev.err)
			res.Ranks[ev.rank] = x
			if x.Signal != 0 && !lr.killed && (cfg.KilledByCaller == nil || !cfg.KilledByCaller(ev.rank)) {
				// The others only see a lost connection: say what happened.
				sink.note(fmt.Sprintf("luacoll: %s", KilledBy(ev.rank, x.Signal)))
			}
			// The first failure in time decides the status, except that a
			// rank which only stopped because another failed gives way to
			// the rank that failed first of its own (their exits can be
			// reaped in either order).
			if x.Code != 0 && (res.FirstFailed < 0 || (res.ExitCode == ExitPeerFailed && x.Code != ExitPeerFailed)) {
				res.FirstFailed, res.ExitCode = ev.rank, x.Code
				startGrace()
			}
		case <-done:
			done = nil
			interrupted = true
			killRanks(ranks, syscall.SIGINT)
			startGrace()
		case <-graceC:
			graceC = nil
			killRanks(ranks, syscall.SIGKILL)
		case <-pollC:
			for _, lr := range ranks {
				if lr.exited || lr.killed || lr.cmd.Process == nil || !processStopped(lr.cmd.Process.Pid) {
					continue
				}
				sink.note(fmt.Sprintf("luacoll: rank %d is stopped (SIGSTOP or a debugger?) and cannot exit on its own: killing it now rather than after the grace of %v", lr.rank, cfg.Grace))
				killRanks([]*launchedRank{lr}, syscall.SIGKILL)
			}
		}
	}
	if grace != nil {
		grace.Stop()
		poll.Stop()
	}

	drain := time.NewTimer(outputDrain)
	for _, lr := range ranks {
		select {
		case <-lr.pumped:
		case <-drain.C:
			// A descendant still holds the output open; stop reading.
			for _, lr := range ranks {
				lr.closeOutputs()
			}
		}
	}
	drain.Stop()
	for _, lr := range ranks {
		<-lr.pumped
		lr.closeOutputs()
	}

	if err := nodes.remove(); err != nil {
		sink.note(fmt.Sprintf("luacoll: removing the logical nodes' directories of job %s: %v", job, err))
	}
	if _, err := RemoveJobSegments(job); err != nil {
		sink.note(fmt.Sprintf("luacoll: removing leftover shared memory of job %s: %v", job, err))
	}
	if interrupted {
		if res.ExitCode == 0 {
			res.ExitCode = interruptCode
		}
		return res, fmt.Errorf("%s: interrupted: %w", launchName, context.Cause(ctx))
	}
	return res, nil
}

// ProgressFile returns where this process should draw progress lines: the
// descriptor luacoll's launcher handed over (LaunchConfig.Progress; only a
// process that launcher started, with EnvRank set, takes it), else
// fallback when that is a terminal, else nil (no progress).
func ProgressFile(getenv func(string) string, fallback *os.File) *os.File {
	if fd, err := strconv.Atoi(getenv(EnvProgressFD)); err == nil && fd > 2 && getenv(EnvRank) != "" {
		syscall.CloseOnExec(fd) // not for whatever the rank starts
		if f := os.NewFile(uintptr(fd), "progress"); f != nil {
			return f
		}
	}
	if IsTerminal(fallback) {
		return fallback
	}
	return nil
}

// IsTerminal reports whether f is a terminal (not merely a character
// device: /dev/null is one too).
func IsTerminal(f *os.File) bool {
	return f != nil && term.IsTerminal(int(f.Fd()))
}

// startRank starts one child with its output pumped into sink.
func startRank(rank int, cfg LaunchConfig, env []string, extra []*os.File, stdin io.Reader,
	sink *lineSink, exits chan<- rankExitEvent) (*launchedRank, error) {
	outR, outW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("stdout pipe: %w", err)
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		outR.Close()
		outW.Close()
		return nil, fmt.Errorf("stderr pipe: %w", err)
	}
	cmd := &exec.Cmd{
		Path:       cfg.Path,
		Args:       append([]string{cfg.Path}, cfg.Args...),
		Env:        env,
		Stdin:      stdin,
		Stdout:     outW,
		Stderr:     errW,
		ExtraFiles: extra,
		WaitDelay:  stdinDelay,
		SysProcAttr: &syscall.SysProcAttr{
			Setpgid:   true,            // a terminal's Ctrl-C reaches only the launcher
			Pdeathsig: syscall.SIGKILL, // die with the launcher
		},
	}
	lr := &launchedRank{rank: rank, cmd: cmd, outputs: []*os.File{outR, errR}, pumped: make(chan struct{})}
	err = cmd.Start()
	outW.Close()
	errW.Close()
	if err != nil {
		outR.Close()
		errR.Close()
		return nil, err
	}
	lr.start = time.Now()
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); sink.pump(outR, rank, false) }()
	go func() { defer wg.Done(); sink.pump(errR, rank, true) }()
	go func() { wg.Wait(); close(lr.pumped) }()
	go func() {
		err := cmd.Wait()
		exits <- rankExitEvent{rank: rank, state: cmd.ProcessState, err: err, at: time.Now()}
	}()
	return lr, nil
}

// closeOutputs closes the read ends of the rank's output pipes.
func (lr *launchedRank) closeOutputs() {
	for _, f := range lr.outputs {
		_ = f.Close()
	}
}

// killRanks sends sig to the process group of every rank still running.
func killRanks(ranks []*launchedRank, sig syscall.Signal) {
	for _, lr := range ranks {
		if lr.exited || lr.cmd.Process == nil {
			continue
		}
		lr.killed = true
		pid := lr.cmd.Process.Pid
		if err := syscall.Kill(-pid, sig); err != nil {
			_ = lr.cmd.Process.Signal(sig)
		}
	}
}

// processStopped reports whether pid is stopped (state T: SIGSTOP, or t:
// stopped by a tracer), from /proc/pid/stat.
func processStopped(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	return statStopped(string(b))
}

// statStopped reads the state field of a /proc/pid/stat line ("pid (comm)
// state ..."; comm may hold spaces and parentheses).
func statStopped(stat string) bool {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return false
	}
	f := strings.Fields(stat[i+1:])
	return len(f) > 0 && (f[0] == "T" || f[0] == "t")
}

// KilledBy says that rank was ended by sig, which nobody in the job sent:
// "rank 1 was killed by signal 9 (SIGKILL: out of memory? ...)".
func KilledBy(rank int, sig syscall.Signal) string {
	name := unix.SignalName(sig)
	if name == "" {
		name = sig.String()
	}
	msg := fmt.Sprintf("rank %d was killed by signal %d (%s", rank, int(sig), name)
	if sig == syscall.SIGKILL {
		msg += ": out of memory? the kernel's out-of-memory killer sends SIGKILL; see dmesg or journalctl -k"
	}
	return msg + ")"
}

// exitStatus turns a wait result into an exit code (128+signal when killed)
// and the signal.
func exitStatus(state *os.ProcessState, err error) (int, syscall.Signal) {
	if state == nil {
		if err != nil {
			return 1, 0
		}
		return 0, 0
	}
	if ws, ok := state.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return signalExitMin + int(ws.Signal()), ws.Signal()
	}
	return state.ExitCode(), 0
}

// childBaseEnv drops the variables by which RankEnvFromEnv would recognise
// another launcher, and the launcher's own per-rank variables.
func childBaseEnv(env []string) []string {
	strip := map[string]bool{
		"RANK": true, "WORLD_SIZE": true, "LOCAL_RANK": true, "LOCAL_WORLD_SIZE": true, "GROUP_RANK": true,
		"MASTER_ADDR": true, "MASTER_PORT": true,
		"SLURM_PROCID": true, "SLURM_NTASKS": true, "SLURM_LOCALID": true, "SLURM_NODEID": true,
		"SLURM_NTASKS_PER_NODE": true, "SLURM_TASKS_PER_NODE": true,
		EnvRank: true, EnvSize: true, EnvLocalRank: true, EnvLocalSize: true, EnvNode: true,
		EnvAddr: true, EnvJob: true, EnvListenFD: true, EnvPrefixed: true, EnvProgressFD: true, EnvMPS: true,
		EnvLogicalNode: true, EnvShmDir: true,
	}
	out := make([]string, 0, len(env))
	for _, kv := range env {
		key, _, _ := strings.Cut(kv, "=")
		if strip[key] || strings.HasPrefix(key, "OMPI_COMM_WORLD_") {
			continue
		}
		out = append(out, kv)
	}
	return out
}

// lineSink writes the ranks' output whole line by whole line.
type lineSink struct {
	mu             sync.Mutex
	stdout, stderr io.Writer
	prefix         bool // write "[rank] " before each line
	terminate      bool // end a partial last line with a newline
	maxLine        int  // longest line kept whole (0: maxOutputLine)
	// eraseOut, eraseErr: that stream is the terminal a progress line is
	// drawn on; each line starts by erasing it.
	eraseOut, eraseErr bool
}

// eraseLine is the terminal's "to the line's start, erase it".
const eraseLine = "\r\033[K"

// pump copies r to the sink line by line until r ends.
func (s *lineSink) pump(r io.Reader, rank int, toErr bool) {
	br := bufio.NewReaderSize(r, lineReadBuf)
	var pending []byte
	cont := false // pending continues a line split before
	for {
		chunk, err := br.ReadSlice('\n')
		switch {
		case err == nil:
			if len(pending) > 0 || cont {
				pending = append(pending, chunk...)
				s.piece(rank, toErr, pending, cont)
				pending, cont = pending[:0], false
			} else {
				s.line(rank, toErr, chunk)
			}
		case errors.Is(err, bufio.ErrBufferFull):
			// A line is written whole, with one Write, so no other rank's
			// line lands inside it; only one beyond maxOutputLine is split,
			// and its later pieces are marked "[rank]+ ".
			pending = append(pending, chunk...)
			if len(pending) >= s.maxLineOr() {
				s.piece(rank, toErr, append(pending, '\n'), cont)
				pending, cont = pending[:0], true
			}
		default:
			pending = append(pending, chunk...)
			if len(pending) > 0 {
				if s.terminate {
					pending = append(pending, '\n')
				}
				s.piece(rank, toErr, pending, cont)
			}
			return
		}
	}
}

func (s *lineSink) maxLineOr() int {
	if s.maxLine > 0 {
		return s.maxLine
	}
	return maxOutputLine
}

// line writes one line (newline included) with a single Write.
func (s *lineSink) line(rank int, toErr bool, line []byte) { s.piece(rank, toErr, line, false) }

// piece is line for a piece of a split line: cont marks one that continues
// the previous piece ("[rank]+ ").
func (s *lineSink) piece(rank int, toErr bool, line []byte, cont bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	w, erase := s.stdout, s.eraseOut
	if toErr {
		w, erase = s.stderr, s.eraseErr
	}
	if !s.prefix && !erase {
		_, _ = w.Write(line)
		return
	}
	buf := make([]byte, 0, len(line)+16)
	if erase {
		buf = append(buf, eraseLine...)
	}
	if !s.prefix {
		_, _ = w.Write(append(buf, line...))
		return
	}
	buf = append(buf, '[')
	buf = strconv.AppendInt(buf, int64(rank), 10)
	if cont {
		buf = append(buf, ']', '+', ' ')
	} else {
		buf = append(buf, "] "...)
	}
	buf = append(buf, line...)
	_, _ = w.Write(buf)
}

// note writes a launcher message to the error stream.
func (s *lineSink) note(msg string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, _ = io.WriteString(s.stderr, msg+"\n")
}
