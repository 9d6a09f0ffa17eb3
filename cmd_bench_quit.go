package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/luacoll/luacoll/engine"
	"github.com/luacoll/luacoll/engine/launch"
	"github.com/luacoll/luacoll/luabind"
)

// benchAt is what a bench rank is measuring, for its SIGQUIT report.
type benchAt struct {
	what  string   // the benchmark ("bench put")
	sizes []uint64 // the sweep's sizes in order (none: not measured by size)
	done  int      // rows finished in the current pass
	pass  string   // the pass under way ("symmetric on"), or ""
}

// String says the benchmark, and the size and pass where known.
func (a *benchAt) String() string {
	s := a.what
	if a.done < len(a.sizes) {
		s += fmt.Sprintf(", measuring %d bytes", a.sizes[a.done])
	}
	if a.pass != "" {
		s += " (" + a.pass + ")"
	}
	return s
}

// newPass starts a pass of the sweep (label "" when there is one only).
func (a *benchAt) newPass(label string) {
	a.done, a.pass = 0, label
}

// measureRank runs measure as one rank of a bench whose comm is open,
// closes the comm, and returns the rank's exit status. SIGQUIT (Ctrl-\ at
// the launcher, which passes it on) makes the rank say what it was
// measuring (at) and the wait it was in, write its Go stacks to a file it
// names, and exit, as run's ranks do.
func measureRank(ctx context.Context, prog string, env launch.RankEnv, comm *engine.Comm, timeout time.Duration,
	at *benchAt, stderr io.Writer, measure func(context.Context) error) int {
	mctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	qw := luabind.WatchQuit(env.Rank, env.JobID, env.ReportsDir(), comm.Abort, cancel, stderr)
	defer qw.Stop()
	err := measure(mctx)
	qw.ScriptDone()
	if d := qw.Report(stderr, quitWhere(env.Rank, at, err), ""); d != nil {
		_ = comm.Close(d)
		return 1
	}
	if err != nil {
		code := reportRankFailure(stderr, prog, env, comm, err, timeout)
		_ = comm.Close(err)
		return code
	}
	if err := comm.Close(nil); err != nil {
		if qw.Dump() != nil {
			return 1 // stopped at the exit barrier, and said so
		}
		fmt.Fprintf(stderr, "%s: %v\n", prog, err)
		return 1
	}
	return 0
}

// quitWhere is the line a bench rank stopped by SIGQUIT prints: the rank,
// what it measured, and the error that ended the measurement (the wait it
// was in).
func quitWhere(rank int, at *benchAt, err error) error {
	if err == nil {
		return fmt.Errorf("rank %d: %s: stopped outside any wait", rank, at)
	}
	msg := strings.TrimPrefix(err.Error(), fmt.Sprintf("rank %d: ", rank))
	if errors.Is(err, context.Canceled) {
		msg = "stopped outside any wait (" + msg + ")"
	}
	return fmt.Errorf("rank %d: %s: %s", rank, at, msg)
}
