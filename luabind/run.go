package luabind

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"time"

	"github.com/luacoll/luacoll/engine"
	"github.com/luacoll/luacoll/engine/bootstrap"
	"github.com/luacoll/luacoll/engine/launch"
)

// DefaultScript is what `luacoll run` runs when no script is named.
const DefaultScript = "examples/tour.lua"

// leftEarly begins the reason a rank that ends with os.exit(0) gives the
// others.
const leftEarly = "exited early with os.exit(0)"

// RunOptions configure one rank running a script.
type RunOptions struct {
	// Comm says how the rank opens its world (device, timeout, GPUs,
	// CPU binding).
	Comm   engine.Options
	Script string
	// Source, when set, is the script's text (read once by the launcher)
	// and Name what its messages call it; otherwise Script is read here.
	Source []byte
	Name   string
	// Exec are chunks run before the script (run -e CODE).
	Exec   []string
	Args   []string
	Stdout io.Writer
	Stderr io.Writer
	CUDA   engine.CUDABackend
}

// RunRank runs a script as the rank env describes and returns the process
// exit status: 0 on success, 1 when the script or the job failed. Errors
// are printed on Stderr; a failure is reported to every other rank.
func RunRank(ctx context.Context, env launch.RankEnv, o RunOptions) (code int) {
	defer func() {
		// An internal error must not reach the user as a Go panic.
		if p := recover(); p != nil {
			fmt.Fprintf(o.Stderr, "luacoll: rank %d: internal error: %v%s\n", env.Rank, p, internalWhere(env.Rank, env.ReportsDir()))
			code = 70
		}
	}()
	if o.Script == "" {
		o.Script = DefaultScript
	}
	// On a GPU the script's goroutine keeps its OS thread: a context made
	// current there stays current for every launch and query. (On the
	// host it must not: handing work to the stream's goroutine is cheaper
	// when either may run on any thread.)
	if o.Comm.Device == "cuda" {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
	}
	comm, err := engine.Open(ctx, env, o.Comm, o.CUDA)
	if err != nil {
		return engine.ReportOpenError(o.Stderr, "luacoll: ", env, err)
	}
	src, name, err := o.Source, o.Name, error(nil)
	if src == nil {
		src, name, err = ReadScriptContext(ctx, o.Script, os.Stdin)
	}
	if err != nil {
		err = fmt.Errorf("rank %d: %w", env.Rank, err)
		fmt.Fprintf(o.Stderr, "luacoll: %v\n", err)
		_ = comm.Close(err)
		return 1
	}
	s := New(comm, o.Stdout)
	defer s.Close()
	s.Exec = o.Exec
	// Not derived from ctx: the watcher below cancels it with a reason.
	runCtx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	// SIGQUIT (Ctrl-\ at the launcher, which passes it on): show where
	// the script is and what it waits for (dump.go).
	qw := WatchQuit(env.Rank, env.JobID, env.ReportsDir(), comm.Abort, cancel, o.Stderr)
	defer qw.Stop()
	go endOnAbort(ctx, runCtx, comm, env.Rank, cancel)
	s.Ctx = runCtx
	// os.exit ends the rank at once, telling the others why: a failure
	// for a non-zero status, a goodbye for 0 (the others may not need
	// this rank any more; a collective they start later fails naming it).
	s.Exit = func(code int, where string) {
		if where == "" {
			where = name
		}
		why := fmt.Sprintf("exited early with os.exit(%d) at %s", code, where)
		if code == 0 {
			why = fmt.Sprintf("%s at %s", leftEarly, where)
		}
		if code == 0 {
			_ = comm.Leave(why)
		} else {
			_ = comm.Close(errors.New(why))
		}
		os.Exit(code)
	}
	err = s.Run(src, name, o.Args)
	qw.ScriptDone()
	var se *ScriptError
	if errors.As(err, &se) && strings.HasSuffix(se.Msg, context.Canceled.Error()) {
		// The interpreter was stopped through its context: say why.
		if cause := context.Cause(runCtx); cause != nil && !errors.Is(cause, context.Canceled) {
			se.Msg = strings.TrimSuffix(se.Msg, context.Canceled.Error()) + "stopped: " + cause.Error()
		}
	}
	if err == nil {
		if serr := comm.Sync(ctx); serr != nil {
			err = fmt.Errorf("%s: at exit: %w", name, serr)
		}
	}
	trace := ""
	if errors.As(err, &se) {
		trace = se.Trace
	}
	if d := qw.Report(o.Stderr, err, trace); d != nil {
		_ = comm.Close(d)
		return 1
	}
	if err != nil {
		// A failure caused by another rank's failure names that rank; say
		// so without claiming this rank as the origin.
		fmt.Fprintf(o.Stderr, "%s\n", err)
		if errors.As(err, &se) && se.Trace != "" && env.Size == 1 {
			fmt.Fprintf(o.Stderr, "%s\n", se.Trace)
		}
		code = failureCode(err, comm, env.Rank, o.Comm.Timeout, o.Stderr)
		_ = comm.Close(err)
		return code
	}
	if err := comm.Close(nil); err != nil {
		if qw.Dump() != nil {
			return 1 // stopped at the exit barrier, and said so
		}
		fmt.Fprintf(o.Stderr, "luacoll: rank %d: closing: %v\n", env.Rank, err)
		return 1
	}
	return 0
}

// endOnAbort cancels the script's context (runCtx, through cancel) with
// the reason once a peer fails, or aborts the rank's Comm once ctx ends
// (SIGINT, SIGTERM): a peer's failure ends blocking calls at once. It
// returns when runCtx ends.
func endOnAbort(ctx, runCtx context.Context, comm *engine.Comm, rank int, cancel context.CancelCauseFunc) {
	select {
	case <-comm.Abort.Done():
		if _, quit := comm.Abort.Err().(*StackDump); !quit {
			cancel(comm.Abort.Err()) // (SIGQUIT's watch cancels in its time)
		}
	case <-ctx.Done():
		// Interrupted (SIGINT/SIGTERM): end the waits too.
		why := fmt.Errorf("rank %d interrupted", rank)
		comm.Abort.Set(why)
		cancel(why)
	case <-runCtx.Done():
	}
}

// internalWhere, called while recovering from a panic, says where it
// happened: the innermost frame of luacoll's own code, and a file in the
// temporary directory that holds the whole stack (for a bug report).
func internalWhere(rank int, dir string) string {
	stack := debug.Stack()
	where := ""
	lines := strings.Split(string(stack), "\n")
	for i := 0; i+1 < len(lines); i++ {
		fn := lines[i]
		if strings.Contains(fn, "github.com/luacoll/luacoll/") && !strings.Contains(fn, "luabind.RunRank") &&
			!strings.Contains(fn, "luabind.internalWhere") {
			where = strings.TrimSpace(lines[i+1])
			if k := strings.LastIndex(where, " +0x"); k > 0 {
				where = where[:k]
			}
			break
		}
	}
	path := filepath.Join(dir, fmt.Sprintf("luacoll-internal-rank%d-%d.txt", rank, os.Getpid()))
	if os.WriteFile(path, stack, 0o600) != nil {
		path = ""
	}
	switch {
	case where != "" && path != "":
		return fmt.Sprintf(" (at %s; the stack is in %s)", where, path)
	case where != "":
		return fmt.Sprintf(" (at %s)", where)
	case path != "":
		return fmt.Sprintf(" (the stack is in %s)", path)
	}
	return ""
}

// failureCode is the exit status of a rank whose script failed with err
// (said already): launch.ExitPeerFailed when another rank's failure
// caused it, else 1, after a note on the ranks that had ended and the
// --timeout hint when err is a timeout.
func failureCode(err error, comm *engine.Comm, me int, timeout time.Duration, stderr io.Writer) int {
	var re *bootstrap.RankError
	if errors.As(comm.Abort.Err(), &re) && re.Rank != me && !strings.HasPrefix(re.Reason, leftEarly) &&
		!strings.HasPrefix(re.Reason, bootstrap.EndedCleanly) {
		// The origin is another rank. (One that ended without error,
		// or left with os.exit(0), failed nothing: a collective
		// started without it is this rank's own failure.)
		return launch.ExitPeerFailed
	}
	if !engine.IsTimeout(err) {
		return 1
	}
	if ended := comm.EndedPeers(); ended != "" {
		// Whatever the wait needed from them, it will not come.
		fmt.Fprintf(stderr, "note: when it gave up, these ranks had ended and send nothing more: %s\n", ended)
	}
	if hint := engine.TimeoutHint(err, timeout); hint != "" {
		fmt.Fprintf(stderr, "%s\n", hint)
	}
	return 1
}
