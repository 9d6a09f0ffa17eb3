package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"syscall"
	"time"

	"github.com/luacoll/luacoll/engine"
	"github.com/luacoll/luacoll/engine/bench"
	"github.com/luacoll/luacoll/engine/launch"
)

// launchJob is what luacoll's own launcher needs to start a command's
// ranks (each rank runs this executable again with args), and how a rank
// of the command reports.
type launchJob struct {
	// prog names the command in messages ("run", "bench allgather").
	prog string
	// defaultN is the number of ranks when -n is not given.
	defaultN int
	// args are the ranks' arguments: the command's words, then its flags.
	args []string
	// prefix labels each line of the ranks' output with its rank.
	prefix bool
	// progress hands a terminal on stderr to rank 0 for a progress line.
	progress bool
	// noMPS leaves out the MPS decision (the job never starts a daemon)
	// and, on a rank, the refusal of --mps on under another launcher.
	noMPS bool
	// failProg, when set, names the command in a failed rank's report
	// instead of prog ("bench put" where prog is "bench").
	failProg string
	// sayInterrupt makes an interrupted job say so and exit with the
	// signal's status, whatever the ranks' own statuses say.
	sayInterrupt bool
	// files are handed to every rank; extraEnv adds to rank r's environment.
	files    []launch.InheritedFile
	extraEnv func(r int) []string
	// at, when set, is what a bench rank measures: the rank then runs its
	// body through measureRank, which answers SIGQUIT with where it is
	// (and reports a failure as reportRankFailure does).
	at *benchAt
}

// launchN is the number of ranks luacoll's launcher starts: -n, else def.
func (f *rankFlags) launchN(def int) int {
	if f.n == 0 {
		return def
	}
	return f.n
}

// prepareLaunch checks --nodes against the n ranks to start, decides on
// MPS (unless noMPS) and finds this executable. When ok is false it has
// said why on stderr and the command exits with code.
func (f *rankFlags) prepareLaunch(n int, prog string, noMPS bool, stderr io.Writer) (mps *launch.MPSConfig, exe string, code int, ok bool) {
	if err := f.checkNodes(n); err != nil {
		fmt.Fprintf(stderr, "luacoll %s: %v\n", prog, err)
		return nil, "", 2, false
	}
	if !noMPS {
		var err error
		if mps, err = f.mpsLaunch(n, prog, stderr); err != nil {
			fmt.Fprintf(stderr, "luacoll %s: %v\n", prog, err)
			return nil, "", 2, false
		}
	}
	exe, err := os.Executable()
	if err != nil {
		fmt.Fprintf(stderr, "luacoll %s: finding my own executable: %v\n", prog, err)
		return nil, "", 1, false
	}
	return mps, exe, 0, true
}

// launchRanks starts the job's ranks with luacoll's launcher, waits for
// them and returns the job's exit status: the first failed rank's, 1 when
// the launch itself failed, or the signal's with sayInterrupt.
func (f *rankFlags) launchRanks(ctx context.Context, j launchJob, stdout, stderr io.Writer) int {
	n := f.launchN(j.defaultN)
	mps, exe, code, ok := f.prepareLaunch(n, j.prog, j.noMPS, stderr)
	if !ok {
		return code
	}
	cfg := launch.LaunchConfig{N: n, Nodes: f.nodes, Path: exe, Args: j.args, Prefix: j.prefix,
		Stdout: stdout, Stderr: stderr, Grace: f.timeout + 5*time.Second, MPS: mps,
		Files: j.files, ExtraEnv: j.extraEnv}
	if j.progress {
		cfg.Progress = terminalOf(stderr)
	}
	// Nobody reads the output any more (`luacoll run ... | head -1`):
	// stop the job, as SIGPIPE stops a command, rather than run it to the
	// end with its output dropped.
	ctx, closed := context.WithCancelCause(ctx)
	defer closed(nil)
	cfg.StdoutClosed = func() { closed(caughtSignal{syscall.SIGPIPE}) }
	res, err := f.launch(ctx, cfg, j.prog, stderr)
	if j.sayInterrupt && ctx.Err() != nil {
		// Interrupted: the ranks' own statuses say only that they stopped.
		fmt.Fprintf(stderr, "luacoll %s: interrupted (%v)\n", j.prog, context.Cause(ctx))
		return signalExitCode(ctx)
	}
	if err != nil {
		fmt.Fprintf(stderr, "luacoll %s: %v\n", j.prog, err)
		if res.ExitCode == 0 {
			return 1
		}
	}
	return res.ExitCode
}

// launchOrRun is a command whose ranks each open a comm: started by no
// launcher (isRank false), it launches the job's ranks; as a rank (of
// luacoll's launcher, torchrun, Slurm or mpirun: env), it runs body on
// the comm. Either way it returns the exit status.
func (f *rankFlags) launchOrRun(ctx context.Context, j launchJob, env launch.RankEnv, isRank bool, stdout, stderr io.Writer, body func(context.Context, *engine.Comm) error) int {
	if !isRank {
		return f.launchRanks(ctx, j, stdout, stderr)
	}
	return f.commRank(ctx, j, env, stderr, body)
}

// commRank is one rank of the job: it opens the comm, runs body and
// closes the comm, and returns the rank's exit status (2 for --mps on
// under another launcher; a failure is reported once, see
// reportRankFailure).
func (f *rankFlags) commRank(ctx context.Context, j launchJob, env launch.RankEnv, stderr io.Writer, body func(context.Context, *engine.Comm) error) int {
	if !j.noMPS {
		if err := f.checkMPSUnder(env, j.prog); err != nil {
			fmt.Fprintf(stderr, "luacoll %s: %v\n", j.prog, err)
			return 2
		}
	}
	comm, err := engine.Open(ctx, env, f.options(), cudaBackend)
	if err != nil {
		return engine.ReportOpenError(stderr, "luacoll "+j.prog+": ", env, err)
	}
	// Interrupted (SIGINT, SIGTERM): end the waits under way too, as a
	// peer's failure does, so the rank stops now rather than at its
	// timeout.
	defer context.AfterFunc(ctx, func() { comm.Abort.Set(fmt.Errorf("rank %d interrupted", env.Rank)) })()
	prog := j.failProg
	if prog == "" {
		prog = j.prog
	}
	if j.at != nil {
		return measureRank(ctx, "luacoll "+prog, env, comm, f.timeout, j.at, stderr,
			func(ctx context.Context) error { return body(ctx, comm) })
	}
	if err := body(ctx, comm); err != nil {
		code := reportRankFailure(stderr, "luacoll "+prog, env, comm, err, f.timeout)
		_ = comm.Close(err)
		return code
	}
	if err := comm.Close(nil); err != nil {
		fmt.Fprintf(stderr, "luacoll %s: %v\n", j.prog, err)
		return 1
	}
	return 0
}

// underMPIRun reports whether this process is a rank of Open MPI's
// mpirun, as bench what's --vs mpi baseline needs; when it is not, it
// says so on stderr with the mpirun command line that runs the benchmark
// (args, less -n, on n ranks).
func underMPIRun(env launch.RankEnv, isRank bool, n int, what string, args []string, stderr io.Writer) bool {
	if isRank && env.Source == launch.SourceOpenMPI {
		return true
	}
	fmt.Fprintf(stderr, "luacoll bench %s: --vs mpi: %v; run:\n  %s\n", what, bench.ErrNotUnderMPIRun, mpirunCommand(n, what, args))
	return false
}

// jobEnv reads this process's rank environment (isRank false: no
// launcher started it) and, where the job's output files are written
// (here, or on rank 0), runs checkFiles on them before any rank starts.
func jobEnv(checkFiles func() error) (env launch.RankEnv, isRank bool, err error) {
	env, isRank, err = launch.RankEnvFromEnv(os.Getenv)
	if err == nil && (!isRank || env.Rank == 0) {
		err = checkFiles()
	}
	return env, isRank, err
}
