package main

import (
	"fmt"
	"io"
	"time"

	"github.com/luacoll/luacoll/luabind"
)

const checkUsage = `luacoll check [-n N] [--timeout D] script.lua [flags] [-- args...]

  Runs the script on N ranks of this process (host backend, whatever device
  it was written for) with every plan (lc.plan) verified as it is made:
  every rank's op list is simulated against the others for deadlocks,
  races and bounds, and p:verify{collective = ...} checks results as the
  script asks. No plan is replayed (p:run does nothing; p:info().mode is
  "check"), so an assert that fails after a skipped p:run is passed over
  and listed at the end. Prints each plan's report; exit status 0 when the
  script ran and every verification was clean, 1 otherwise, 2 for bad
  usage.`

func cmdCheck(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("check", checkUsage, stderr)
	n := fs.Int("n", 2, "number of ranks (1..1024)")
	timeout := fs.Duration("timeout", 10*time.Second, "timeout of every wait and collective")
	if code, ok := parse(fs, args, stdout); !ok {
		return code
	}
	if fs.NArg() == 0 {
		fmt.Fprintf(stderr, "luacoll check: no script named\n\nUsage: %s\n", checkUsage)
		return 2
	}
	// Flags may follow the script; its own arguments go after --.
	script := fs.Arg(0)
	if code, ok := parse(fs, fs.Args()[1:], stdout); !ok {
		return code
	}
	scriptArgs := fs.Args()
	if *n < 1 || *n > 1024 {
		fmt.Fprintf(stderr, "luacoll check: -n %d: want 1..1024\n", *n)
		return 2
	}
	if *timeout <= 0 {
		fmt.Fprintf(stderr, "luacoll check: --timeout %v: must be positive\n", *timeout)
		return 2
	}
	ctx, stop := signalContext()
	defer stop()
	return luabind.CheckScript(ctx, luabind.CheckOptions{Ranks: *n, Script: script, Args: scriptArgs,
		Timeout: *timeout, Stdout: stdout, Stderr: stderr})
}
