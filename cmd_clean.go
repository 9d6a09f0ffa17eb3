package main

import (
	"fmt"
	"io"
	"os"

	"github.com/luacoll/luacoll/engine/launch"
	"github.com/luacoll/luacoll/transport"
)

func cmdClean(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("clean", "luacoll clean [--dry-run]\n\n"+
		"Removes what luacoll jobs killed with SIGKILL left on this host: shared-memory segments\n"+
		"in /dev/shm named luacoll-JOB-* (made by older builds; windows now leave none) that no\n"+
		"process maps or holds open, and luacoll's temporary directories in $TMPDIR (the REPL's\n"+
		"control socket, a job's MPS pipe and log directories) whose process is gone, and the\n"+
		"directories of a --nodes job's logical nodes (in both places) whose launcher is gone; a job's\n"+
		"private MPS control daemon (--mps) is stopped before its directory goes. What a running\n"+
		"job uses is listed and kept.", stderr)
	dry := fs.Bool("dry-run", false, "list what would be removed, remove nothing")
	if code, ok := parse(fs, args, stdout); !ok {
		return code
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "luacoll clean: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	found, err := launch.FindLeftovers(transport.ShmDir, os.TempDir(), launch.MPSTempBase())
	if err != nil {
		fmt.Fprintf(stderr, "luacoll clean: %v\n", err)
	}
	code := 0
	if err != nil {
		code = 1
	}
	for _, l := range found {
		what := l.Kind
		if l.Job != "" {
			what += " of job " + l.Job
		}
		switch {
		case l.InUse != "":
			fmt.Fprintf(stdout, "kept %s (%s, in use: %s)\n", l.Path, what, l.InUse)
		case *dry:
			fmt.Fprintf(stdout, "would remove %s (%s, unused)\n", l.Path, what)
		default:
			if err := launch.RemoveLeftover(l); err != nil {
				fmt.Fprintf(stderr, "luacoll clean: %v\n", err)
				code = 1
				continue
			}
			fmt.Fprintf(stdout, "removed %s (%s, unused)\n", l.Path, what)
		}
	}
	if len(found) == 0 {
		fmt.Fprintln(stdout, "nothing to clean")
	}
	return code
}
