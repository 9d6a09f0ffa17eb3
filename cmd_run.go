package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/luacoll/luacoll/engine/launch"
	"github.com/luacoll/luacoll/luabind"
	"github.com/luacoll/luacoll/transport/launchenv"
)

func cmdRun(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("run", "luacoll run [-n N] [--nodes K] [--device host|cuda] [--timeout D] [--no-prefix] [--gpus LIST] [--cpu-bind auto|spread|none] [--ipc auto|legacy|vmm] [--symmetric auto|on|off] [--mps auto|on|off] [--trace FILE] [-e CODE]... [script.lua [args...]]\n\n"+
		"Runs the script on N ranks (the embedded examples/tour.lua when none is named); its\n"+
		"arguments are in Lua's arg table. Exit status: 0 when every rank succeeds, else the\n"+
		"status of the first rank that failed (a rank stopped only by another's failure exits\n"+
		"77 and gives way to it); 130 when interrupted, 143 when terminated (SIGTERM). When a\n"+
		"rank fails or dies, the others stop at once with an error naming it. --trace FILE\n"+
		"writes every rank's timeline (each window operation from enqueue to completion, syncs,\n"+
		"collectives, errors) for ui.perfetto.dev or chrome://tracing. The script is read once\n"+
		"(a file, a FIFO, or - for standard input, as with lua -) and every rank runs the same\n"+
		"bytes. A job that hangs: Ctrl-\\ (SIGQUIT to the launcher) makes every rank print its\n"+
		"Lua traceback and the wait it was in (what for, the value seen), write its Go stacks to a\n"+
		"file it names, and exit. -e CODE runs CODE on every rank before the script (as lua -e);\n"+
		"with -e and no script, only CODE runs. -np N is -n N.", stderr)
	var f rankFlags
	f.register(fs, 1)
	var execs codeList
	fs.Var(&execs, "e", "run `CODE` on every rank before the script (may be given more than once; as lua -e)")
	if code, ok := parse(fs, args, stdout); !ok {
		return code
	}
	if err := f.check(); err != nil {
		fmt.Fprintf(stderr, "luacoll run: %v\n", err)
		return 2
	}
	script, scriptArgs := luabind.DefaultScript, []string(nil)
	if fs.NArg() > 0 {
		script, scriptArgs = fs.Arg(0), fs.Args()[1:]
	}
	onlyExec := len(execs) > 0 && fs.NArg() == 0 // -e CODE alone: no script
	ctx, stop := signalContext()
	defer stop()
	env, isRank, err := launch.RankEnvFromEnv(os.Getenv)
	if err != nil {
		fmt.Fprintf(stderr, "luacoll run: %v\n", err)
		return 2
	}
	src, name, fromLauncher, err := runSource(ctx, script, onlyExec, isRank, env)
	if err != nil {
		fmt.Fprintf(stderr, "luacoll run: %v\n", err)
		if ctx.Err() != nil {
			return signalExitCode(ctx)
		}
		return 2
	}
	// A script that does not compile is said once, before any rank starts
	// (each rank would say it again).
	if !fromLauncher {
		if err := runSyntax(execs, src, name); err != nil {
			fmt.Fprintf(stderr, "luacoll run: %v\n", err)
			return 1
		}
	}
	// Once per job: by the launcher, or by rank 0 of another launcher.
	if odd := flagLookalikes(fs, scriptArgs); len(odd) > 0 && (!isRank || (env.Source != launch.SourceLuacoll && env.Rank == 0)) {
		what := "is one of the script's arguments"
		if len(odd) > 1 {
			what = "are the script's arguments"
		}
		fmt.Fprintf(stderr, "luacoll run: warning: %s after the script name %s (arg[1], ...); luacoll's flags go before the script name\n",
			strings.Join(odd, ", "), what)
	}
	opts := luabind.RunOptions{Comm: f.options(), Script: script, Source: src, Name: name, Args: scriptArgs, Exec: execs,
		Stdout: stdout, Stderr: stderr, CUDA: cudaBackend}
	if isRank {
		if f.noPrefix {
			env.Prefixed = true // the rank adds no [rank] prefix of its own
		}
		if f.n != 0 && f.n != env.Size {
			fmt.Fprintf(stderr, "luacoll run: -n %d, but the launcher (%s) says the world size is %d\n", f.n, env.Source, env.Size)
			return 2
		}
		if err := f.checkMPSUnder(env, "run"); err != nil {
			fmt.Fprintf(stderr, "luacoll run: %v\n", err)
			return 2
		}
		return luabind.RunRank(ctx, env, opts)
	}
	return launchRun(ctx, &f, args, src, name, stdout, stderr)
}

// runSource reads the script a job of run executes, once: by our
// launcher, which hands every rank the same bytes (fromLauncher), or here
// when another launcher started this rank or none did.
func runSource(ctx context.Context, script string, onlyExec, isRank bool, env launch.RankEnv) (src []byte, name string, fromLauncher bool, err error) {
	switch fd, ferr := strconv.Atoi(launchenv.Get(launch.EnvScriptFD)); {
	case ferr == nil && isRank && env.Source == launch.SourceLuacoll:
		src, err = launch.ReadInherited(fd)
		name, fromLauncher = launchenv.Get(launch.EnvScriptName), true
	case onlyExec:
		name = luabind.ExecName
	default:
		src, name, err = luabind.ReadScriptContext(ctx, script, os.Stdin)
	}
	if onlyExec && src == nil {
		src = []byte{} // (nil would have the rank read the default script)
	}
	return src, name, fromLauncher, err
}

// runSyntax compiles the -e chunks and the script, and says what does not.
func runSyntax(execs []string, src []byte, name string) error {
	for _, code := range execs {
		if err := luabind.ScriptSyntax(code, luabind.ExecName); err != nil {
			return fmt.Errorf("-e: %w", err)
		}
	}
	return luabind.ScriptSyntax(string(src), name)
}

// launchRun starts the job's ranks (run's own arguments again, the script
// in a shared memfd) and returns the job's exit status.
func launchRun(ctx context.Context, f *rankFlags, args []string, src []byte, name string, stdout, stderr io.Writer) int {
	shared, err := launch.SharedBytes("luacoll-script", src)
	if err != nil {
		fmt.Fprintf(stderr, "luacoll run: %v\n", err)
		return 1
	}
	defer shared.Close()
	extra := []string{launch.EnvScriptName + "=" + name}
	if f.noPrefix {
		// Tell the ranks that their output needs no prefix at all.
		extra = append(extra, "LUACOLL_PREFIXED=1")
	}
	return f.launchRanks(ctx, launchJob{prog: "run", defaultN: 1, args: append([]string{"run"}, args...),
		prefix: !f.noPrefix, sayInterrupt: true,
		files:    []launch.InheritedFile{{Env: launch.EnvScriptFD, File: shared}},
		extraEnv: func(int) []string { return extra }}, stdout, stderr)
}

// codeList collects run's -e chunks in order.
type codeList []string

func (c *codeList) String() string { return "" }

func (c *codeList) Set(code string) error {
	*c = append(*c, code)
	return nil
}
