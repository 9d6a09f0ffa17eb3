package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/luacoll/luacoll/engine"
	"github.com/luacoll/luacoll/repl"
)

// historyName is the line history kept in the home directory.
const historyName = ".luacoll_history"

func cmdRepl(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("repl", "luacoll repl [-n N] [--device host|cuda] [--timeout D] [--gpus LIST] [--cpu-bind auto|spread|none] [--ipc legacy|vmm]\n\n"+
		"Starts N ranks and one prompt. Every Lua chunk runs on every rank (:on 0,2 picks some)\n"+
		"and the answers come back grouped by rank, identical ones once. :help at the prompt\n"+
		"lists the commands; Ctrl-C interrupts a chunk, Ctrl-D quits. With stdin not a terminal\n"+
		"it reads chunks without prompts or colours, and exits 1 when a chunk failed or a rank died.", stderr)
	var f rankFlags
	f.register(fs)
	if code, ok := parse(fs, args, stdout); !ok {
		return code
	}
	if err := f.check(); err != nil {
		fmt.Fprintf(stderr, "luacoll repl: %v\n", err)
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "luacoll repl: unexpected argument %q (run a file with :load FILE at the prompt)\n", fs.Arg(0))
		return 2
	}
	if f.noPrefix {
		fmt.Fprintln(stderr, "luacoll repl: --no-prefix: the REPL always labels answers with their ranks ([0-3] 42)")
		return 2
	}
	env, isRank, err := engine.RankEnvFromEnv(os.Getenv)
	if err != nil {
		fmt.Fprintf(stderr, "luacoll repl: %v\n", err)
		return 2
	}
	if isRank {
		addr := os.Getenv(repl.EnvControl)
		if addr == "" {
			fmt.Fprintf(stderr, "luacoll repl: the repl starts its own ranks (-n N); it does not run under %s\n", env.Source)
			return 2
		}
		if f.n != 0 && f.n != env.Size {
			fmt.Fprintf(stderr, "luacoll repl: -n %d, but the launcher says the world size is %d\n", f.n, env.Size)
			return 2
		}
		ctx, stop := signalContext()
		defer stop()
		return repl.Serve(ctx, env, repl.WorkerOptions{Comm: f.options(),
			CUDA: cudaBackend, Control: addr, Stderr: stderr})
	}
	n := f.n
	if n == 0 {
		n = 1
	}
	if err := f.checkNodes(n); err != nil {
		fmt.Fprintf(stderr, "luacoll repl: %v\n", err)
		return 2
	}
	exe, err := os.Executable()
	if err != nil {
		fmt.Fprintf(stderr, "luacoll repl: finding my own executable: %v\n", err)
		return 1
	}
	terminal := repl.IsTerminal(os.Stdin)
	history := ""
	if home, herr := os.UserHomeDir(); herr == nil && terminal {
		history = filepath.Join(home, historyName)
	}
	color := terminal && repl.IsTerminal(os.Stdout) && os.Getenv("NO_COLOR") == "" && os.Getenv("TERM") != "dumb"
	return repl.Run(context.Background(), repl.Config{N: n, Nodes: f.nodes, Timeout: f.timeout,
		Exe: exe, Args: append([]string{"repl"}, args...), Stdin: os.Stdin, Stdout: stdout, Stderr: stderr,
		Terminal: terminal, Color: color, HistoryFile: history})
}
