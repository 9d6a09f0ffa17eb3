package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/luacoll/luacoll/engine/launch"
)

// launchJob is what luacoll's own launcher needs to start a command's
// ranks: each rank runs this executable again with args.
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
	// noMPS leaves out the MPS decision (the job never starts a daemon).
	noMPS bool
	// sayInterrupt makes an interrupted job say so and exit with the
	// signal's status, whatever the ranks' own statuses say.
	sayInterrupt bool
	// files are handed to every rank; extraEnv adds to rank r's environment.
	files    []launch.InheritedFile
	extraEnv func(r int) []string
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
