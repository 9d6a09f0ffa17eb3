package launch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

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
	// StdoutClosed, when set, is called once a rank's output finds
	// Stdout's reader gone (a closed pipe); the caller may end the job.
	StdoutClosed func()
	N            int      // number of ranks
	Path         string   // executable (usually os.Executable())
	Args         []string // arguments after the executable, the same for every rank
	Env          []string // base environment (nil: os.Environ())
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

// Launch starts cfg.N ranks of cfg.Path and waits for all of them. Rank 0
// inherits a listening socket on 127.0.0.1 for the bootstrap; every rank
// learns its place from LUACOLL_* variables. When a rank fails the others
// get cfg.Grace to exit (the bootstrap aborts them), then are killed; when
// ctx ends every rank gets SIGINT, then SIGKILL after cfg.Grace. Launch
// returns an error only when the ranks could not be started, or (with the
// result filled in) when ctx ended.
func Launch(ctx context.Context, cfg LaunchConfig) (LaunchResult, error) {
	res := LaunchResult{FirstFailed: -1}
	cfg, err := withLaunchDefaults(cfg)
	if err != nil {
		return res, err
	}
	sink := newLineSink(cfg)
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

	lnFile, addr, err := rendezvousListener()
	if err != nil {
		return res, err
	}
	defer lnFile.Close()

	base, err := withJobSecret(childBaseEnv(cfg.Env))
	if err != nil {
		return res, fmt.Errorf("%s: %w", launchName, err)
	}
	// The join pipe: its write end closes on the first failure, which the
	// ranks still joining the job see at once (EnvJoinFD).
	joinR, joinW, err := os.Pipe()
	if err != nil {
		return res, fmt.Errorf("%s: %w", launchName, err)
	}
	defer joinW.Close()
	je := jobEnv{cfg: cfg, base: withoutFileVars(base, cfg.Files), addr: addr, job: job, nodes: nodes, mps: mpsEnv, listener: lnFile, join: joinR}
	exits := make(chan rankExitEvent, cfg.N)
	ranks, err := startRanks(cfg, je, sink, exits)
	_ = joinR.Close()
	if err != nil {
		return res, err
	}
	_ = lnFile.Close()

	interrupted := waitRanks(ctx, cfg, ranks, exits, sink, &res, func() { _ = joinW.Close() })
	killLeftGroups(ranks)
	drainOutputs(ranks)

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

// withLaunchDefaults checks cfg's rank count and executable and fills in
// the default grace and environment.
func withLaunchDefaults(cfg LaunchConfig) (LaunchConfig, error) {
	if cfg.N < 1 || cfg.N > maxRanks {
		return cfg, fmt.Errorf("%s: %d ranks, want 1..%d", launchName, cfg.N, maxRanks)
	}
	if cfg.Path == "" {
		return cfg, fmt.Errorf("%s: no executable", launchName)
	}
	if cfg.Grace <= 0 {
		cfg.Grace = defaultGrace
	}
	if cfg.Env == nil {
		cfg.Env = os.Environ()
	}
	return cfg, nil
}

// newLineSink makes the sink of the ranks' output that cfg asks for.
func newLineSink(cfg LaunchConfig) *lineSink {
	sink := &lineSink{stdout: cfg.Stdout, stderr: cfg.Stderr, prefix: cfg.Prefix, terminate: cfg.Prefix || cfg.N > 1, outClosed: cfg.StdoutClosed}
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
	return sink
}

// rendezvousListener listens on 127.0.0.1 for the bootstrap and returns
// the listener as a file (for rank 0 to inherit) and its address.
func rendezvousListener() (*os.File, string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, "", fmt.Errorf("%s: rendezvous listener: %w", launchName, err)
	}
	addr := ln.Addr().String()
	lnFile, err := ln.(*net.TCPListener).File()
	_ = ln.Close() // the duplicate in lnFile keeps listening
	if err != nil {
		return nil, "", fmt.Errorf("%s: rendezvous listener: %w", launchName, err)
	}
	return lnFile, addr, nil
}

// withoutFileVars drops from base the variables that name the files in
// files: the launcher's own variables for them replace any inherited ones.
func withoutFileVars(base []string, files []InheritedFile) []string {
	if len(files) == 0 {
		return base
	}
	kept := base[:0]
	for _, kv := range base {
		key, _, _ := strings.Cut(kv, "=")
		if !slices.ContainsFunc(files, func(f InheritedFile) bool { return f.Env == key }) {
			kept = append(kept, kv)
		}
	}
	return kept
}

// jobEnv is what every rank's environment is made from.
type jobEnv struct {
	cfg      LaunchConfig
	base     []string // the launcher's environment, less what the launcher sets
	addr     string   // the rendezvous address
	job      string
	nodes    *logicalNodes // nil: one node
	mps      []string      // the MPS clients' variables
	listener *os.File      // the rendezvous listener, inherited by rank 0
	join     *os.File      // the read end of the join pipe, inherited by every rank (EnvJoinFD)
}

// rank returns rank r's environment and the files it inherits (as
// descriptors listenFDChild and up).
func (je jobEnv) rank(r int) (env []string, extra []*os.File) {
	cfg := je.cfg
	node, local, localSize := NodeOf(r, cfg.N, cfg.Nodes)
	env = append([]string(nil), je.base...)
	env = append(env,
		EnvRank+"="+strconv.Itoa(r),
		EnvSize+"="+strconv.Itoa(cfg.N),
		EnvLocalRank+"="+strconv.Itoa(local),
		EnvLocalSize+"="+strconv.Itoa(localSize),
		EnvNode+"="+strconv.Itoa(node),
		EnvAddr+"="+je.addr,
		EnvJob+"="+je.job,
	)
	if je.nodes != nil {
		env = append(env, je.nodes.env(node)...)
		env = append(env, EnvDeviceIndex+"="+strconv.Itoa(r))
	}
	if cfg.Prefix {
		env = append(env, EnvPrefixed+"=1")
	}
	if r == 0 {
		extra = []*os.File{je.listener}
		env = append(env, EnvListenFD+"="+strconv.Itoa(listenFDChild))
		if cfg.Progress != nil {
			extra = append(extra, cfg.Progress)
			env = append(env, EnvProgressFD+"="+strconv.Itoa(listenFDChild+1))
		}
	}
	env = append(env, je.mps...)
	extra = append(extra, je.join)
	env = append(env, EnvJoinFD+"="+strconv.Itoa(listenFDChild+len(extra)-1))
	for _, f := range cfg.Files {
		extra = append(extra, f.File)
		env = append(env, f.Env+"="+strconv.Itoa(listenFDChild+len(extra)-1))
	}
	if cfg.ExtraEnv != nil {
		env = append(env, cfg.ExtraEnv(r)...)
	}
	return env, extra
}

// startRanks starts every rank (on its logical node); when one cannot be
// started it kills and reaps those started before it.
func startRanks(cfg LaunchConfig, je jobEnv, sink *lineSink, exits chan rankExitEvent) ([]*launchedRank, error) {
	ranks := make([]*launchedRank, 0, cfg.N)
	for r := range cfg.N {
		node, _, _ := NodeOf(r, cfg.N, cfg.Nodes)
		env, extra := je.rank(r)
		var stdin io.Reader
		if cfg.Stdin != nil {
			stdin = cfg.Stdin(r)
		}
		var lr *launchedRank
		err := je.nodes.start(node, func() (err error) {
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
			return nil, fmt.Errorf("%s: starting rank %d of %d: %w", launchName, r, cfg.N, err)
		}
		ranks = append(ranks, lr)
	}
	return ranks, nil
}

// waitRanks waits until every rank exited, filling in res.Ranks and the
// first failure (which it tells failed); it passes SIGQUIT on to the ranks,
// interrupts them when ctx ends, kills them after cfg.Grace once one
// failed, and kills a stopped rank at once then. It reports whether ctx ended.
func waitRanks(ctx context.Context, cfg LaunchConfig, ranks []*launchedRank, exits <-chan rankExitEvent,
	sink *lineSink, res *LaunchResult, failed func()) (interrupted bool) {
	res.Ranks = make([]RankExit, cfg.N)
	running := cfg.N
	done := ctx.Done()
	var grace *time.Timer
	var poll *time.Ticker
	var graceC, pollC, nudgeC <-chan time.Time
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
	quit, again := make(chan os.Signal, 1), make(chan os.Signal, 1)
	signal.Notify(quit, syscall.SIGQUIT)
	defer signal.Stop(quit)
	defer signal.Stop(again)
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
			if recordExit(cfg, ranks[ev.rank], ev, sink, res) {
				failed()
				if grace == nil && !interrupted {
					// The others stop at once on their own, but not
					// one blocked outside luacoll (os.execute, a long
					// string match): interrupt those soon.
					nudge := time.NewTimer(failNudge)
					defer nudge.Stop()
					nudgeC = nudge.C
				}
				startGrace()
			}
		case <-done:
			done = nil
			interrupted = true
			killRanks(ranks, syscall.SIGINT)
			startGrace()
			// A second Ctrl-C (or SIGTERM) does not wait out the grace.
			signal.Notify(again, os.Interrupt, syscall.SIGTERM)
		case <-again:
			sink.note("luacoll: interrupted again: killing every rank now")
			killRanks(ranks, syscall.SIGKILL)
		case <-nudgeC:
			nudgeC = nil
			if left := runningRanks(ranks); left != "" {
				sink.note(fmt.Sprintf("luacoll: %s still running %v after the failure (blocked outside luacoll?): interrupting", left, failNudge))
				killRanks(ranks, syscall.SIGINT)
			}
		case <-graceC:
			graceC = nil
			if left := runningRanks(ranks); left != "" {
				sink.note(fmt.Sprintf("luacoll: %s did not stop within %v: killing", left, cfg.Grace))
			}
			killRanks(ranks, syscall.SIGKILL)
		case <-pollC:
			killStoppedRanks(ranks, cfg.Grace, sink)
		}
	}
	if grace != nil {
		grace.Stop()
		poll.Stop()
	}
	return interrupted
}

// failNudge is how long after a rank's failure the ranks still running
// are interrupted: a peer's failure ends luacoll's own waits at once, so
// only a rank blocked elsewhere (a child process, a long pattern match)
// is still there.
const failNudge = 3 * time.Second

// runningRanks names the ranks that have not exited ("rank 1", "ranks 1,
// 3"), or "".
func runningRanks(ranks []*launchedRank) string {
	var left []int
	for _, lr := range ranks {
		if !lr.exited {
			left = append(left, lr.rank)
		}
	}
	if len(left) == 0 {
		return ""
	}
	return bootstrap.DescribeRanks(left)
}

// recordExit notes how rank lr ended in res, says so when a signal nobody
// in the job sent ended it, and reports whether its failure is now the
// job's.
func recordExit(cfg LaunchConfig, lr *launchedRank, ev rankExitEvent, sink *lineSink, res *LaunchResult) (failed bool) {
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
		return true
	}
	return false
}

// killStoppedRanks kills every rank that is stopped (it cannot exit on
// its own) and says so.
func killStoppedRanks(ranks []*launchedRank, grace time.Duration, sink *lineSink) {
	for _, lr := range ranks {
		if lr.exited || lr.sigkilled || lr.cmd.Process == nil || !processStopped(lr.cmd.Process.Pid) {
			continue
		}
		sink.note(fmt.Sprintf("luacoll: rank %d is stopped (SIGSTOP or a debugger?) and cannot exit on its own: killing it now rather than after the grace of %v", lr.rank, grace))
		killRanks([]*launchedRank{lr}, syscall.SIGKILL)
	}
}

// drainOutputs waits for the ranks' output to be read to its end, for up
// to outputDrain (a descendant may hold it open), and closes it.
func drainOutputs(ranks []*launchedRank) {
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
		EnvAddr: true, EnvJob: true, EnvListenFD: true, EnvPrefixed: true, EnvProgressFD: true, EnvMPS: true, EnvJoinFD: true,
		EnvLogicalNode: true, EnvShmDir: true, EnvReportDir: true,
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
