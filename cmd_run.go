package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/luacoll/luacoll/engine/launch"
	"github.com/luacoll/luacoll/luabind"
)

func cmdRun(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("run", "luacoll run [-n N] [--nodes K] [--device host|cuda] [--timeout D] [--no-prefix] [--gpus LIST] [--cpu-bind auto|spread|none] [--ipc auto|legacy|vmm] [--symmetric auto|on|off] [--mps auto|on|off] [--trace FILE] [script.lua [args...]]\n\n"+
		"Runs the script on N ranks (the embedded examples/tour.lua when none is named); its\n"+
		"arguments are in Lua's arg table. Exit status: 0 when every rank succeeds, else the\n"+
		"status of the first rank that failed (a rank stopped only by another's failure exits\n"+
		"77 and gives way to it); 130 when interrupted, 143 when terminated (SIGTERM). When a\n"+
		"rank fails or dies, the others stop at once with an error naming it. --trace FILE\n"+
		"writes every rank's timeline (each window operation from enqueue to completion, syncs,\n"+
		"collectives, errors) for ui.perfetto.dev or chrome://tracing. The script is read once\n"+
		"(a file, a FIFO, or - for standard input, as with lua -) and every rank runs the same\n"+
		"bytes. A job that hangs: Ctrl-\\ (SIGQUIT to the launcher) makes every rank print its\n"+
		"goroutines' stacks, prefixed with its rank, and exit.", stderr)
	var f rankFlags
	f.register(fs, 1)
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
	ctx, stop := signalContext()
	defer stop()
	env, isRank, err := launch.RankEnvFromEnv(os.Getenv)
	if err != nil {
		fmt.Fprintf(stderr, "luacoll run: %v\n", err)
		return 2
	}
	// The script is read once: by our launcher, which hands every rank the
	// same bytes, or here when another launcher started this rank.
	var src []byte
	var name string
	fromLauncher := false
	if fd, ferr := strconv.Atoi(os.Getenv(launch.EnvScriptFD)); ferr == nil && isRank && env.Source == launch.SourceLuacoll {
		src, err = launch.ReadInherited(fd)
		name, fromLauncher = os.Getenv(launch.EnvScriptName), true
	} else {
		src, name, err = luabind.ReadScriptContext(ctx, script, os.Stdin)
	}
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
		if err := luabind.ScriptSyntax(string(src), name); err != nil {
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
	opts := luabind.RunOptions{Comm: f.options(), Script: script, Source: src, Name: name, Args: scriptArgs,
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
	n := f.n
	if n == 0 {
		n = 1
	}
	if err := f.checkNodes(n); err != nil {
		fmt.Fprintf(stderr, "luacoll run: %v\n", err)
		return 2
	}
	mps, err := f.mpsLaunch(n, "run", stderr)
	if err != nil {
		fmt.Fprintf(stderr, "luacoll run: %v\n", err)
		return 2
	}
	exe, err := os.Executable()
	if err != nil {
		fmt.Fprintf(stderr, "luacoll run: finding my own executable: %v\n", err)
		return 1
	}
	shared, err := launch.SharedBytes("luacoll-script", src)
	if err != nil {
		fmt.Fprintf(stderr, "luacoll run: %v\n", err)
		return 1
	}
	defer shared.Close()
	cfg := launch.LaunchConfig{N: n, Nodes: f.nodes, Path: exe, Args: append([]string{"run"}, args...),
		Prefix: !f.noPrefix, Stdout: stdout, Stderr: stderr, Grace: f.timeout + 5*time.Second, MPS: mps,
		Files: []launch.InheritedFile{{Env: launch.EnvScriptFD, File: shared}}}
	extra := []string{launch.EnvScriptName + "=" + name}
	if f.noPrefix {
		// Tell the ranks that their output needs no prefix at all.
		extra = append(extra, "LUACOLL_PREFIXED=1")
	}
	cfg.ExtraEnv = func(int) []string { return extra }
	res, err := f.launch(ctx, cfg, "run", stderr)
	if ctx.Err() != nil {
		// Interrupted: the ranks' own statuses say only that they stopped.
		fmt.Fprintf(stderr, "luacoll run: interrupted (%v)\n", context.Cause(ctx))
		return signalExitCode(ctx)
	}
	if err != nil {
		fmt.Fprintf(stderr, "luacoll run: %v\n", err)
		if res.ExitCode == 0 {
			return 1
		}
	}
	return res.ExitCode
}
