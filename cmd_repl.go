package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/luacoll/luacoll/engine/launch"
	"github.com/luacoll/luacoll/luabind"
	"github.com/luacoll/luacoll/repl"
	"github.com/luacoll/luacoll/transport/launchenv"
)

// historyName is the line history kept in the home directory.
const historyName = ".luacoll_history"

func cmdRepl(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("repl", "luacoll repl [-n N] [--nodes K] [--device host|cuda] [--timeout D] [--gpus LIST] [--cpu-bind auto|spread|none] [--ipc auto|legacy|vmm] [--symmetric auto|on|off] [--mps auto|on|off] [--trace FILE] [-e CODE]... [-i FILE [args...]]\n\n"+
		"Starts N ranks and one prompt. Every Lua chunk runs on every rank (:on 0,2 picks some)\n"+
		"and the answers come back grouped by rank, identical ones once; tables show their\n"+
		"contents. -e CODE and -i FILE ARGS run first, as with lua. :help at the prompt\n"+
		"lists the commands; Ctrl-C interrupts a chunk, Ctrl-D quits; Ctrl-\\ (SIGQUIT) makes each\n"+
		"rank print its Lua traceback and the wait it was in (Go stacks in a file it names), and\n"+
		"ends the session with status 1. At a terminal, lines are kept\n"+
		"in ~/.luacoll_history (the last 1000). With stdin not a terminal it reads chunks without\n"+
		"prompts, colours or history, and exits 1 when a chunk failed or a rank died.", stderr)
	var f rankFlags
	f.register(fs, 1)
	var exec chunkList
	fs.Var(&exec, "e", "run CODE on every rank before the prompt (may be given more than once; as lua -e)")
	script := fs.String("i", "", "run FILE on every rank before the prompt, with the arguments after the flags in arg and ... (as lua -i FILE ARGS)")
	if code, ok := parse(fs, args, stdout); !ok {
		return code
	}
	if err := f.check(); err != nil {
		fmt.Fprintf(stderr, "luacoll repl: %v\n", err)
		return 2
	}
	if fs.NArg() > 0 && *script == "" {
		fmt.Fprintf(stderr, "luacoll repl: unexpected argument %q (-i FILE ARGS runs a file first; :load FILE ARGS at the prompt)\n", fs.Arg(0))
		return 2
	}
	before := []repl.Chunk(exec)
	if *script != "" {
		src, name, err := luabind.LoadScript(*script)
		if err != nil {
			fmt.Fprintf(stderr, "luacoll repl: -i: %v\n", err)
			return 2
		}
		before = append(before, repl.Chunk{Code: string(src), Name: name, Script: true, Args: fs.Args()})
	}
	if f.noPrefix {
		fmt.Fprintln(stderr, "luacoll repl: --no-prefix: the REPL always labels answers with their ranks ([0-3] 42)")
		return 2
	}
	env, isRank, err := launch.RankEnvFromEnv(os.Getenv)
	if err != nil {
		fmt.Fprintf(stderr, "luacoll repl: %v\n", err)
		return 2
	}
	if isRank {
		addr := launchenv.Get(repl.EnvControl)
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
	n := f.launchN(1)
	mps, exe, code, ok := f.prepareLaunch(n, "repl", false, stderr)
	if !ok {
		return code
	}
	terminal := launch.IsTerminal(os.Stdin)
	history := ""
	if home, herr := os.UserHomeDir(); herr == nil && terminal {
		history = filepath.Join(home, historyName)
	}
	color := terminal && launch.IsTerminal(os.Stdout) && os.Getenv("NO_COLOR") == "" && os.Getenv("TERM") != "dumb"
	return repl.Run(context.Background(), repl.Config{N: n, Nodes: f.nodes, Timeout: f.timeout,
		Exe: exe, Args: append([]string{"repl"}, args...), Stdin: os.Stdin, Stdout: stdout, Stderr: stderr,
		Terminal: terminal, Color: color, HistoryFile: history, MPS: mps, Before: before,
		Launch: func(ctx context.Context, lc launch.LaunchConfig) (launch.LaunchResult, error) {
			return f.launch(ctx, lc, "repl", stderr)
		}})
}

// chunkList collects -e chunks in order.
type chunkList []repl.Chunk

func (c *chunkList) String() string { return "" }

func (c *chunkList) Set(code string) error {
	*c = append(*c, repl.Chunk{Code: code, Name: "(command line)"})
	return nil
}
