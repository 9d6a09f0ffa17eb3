// Command luacoll runs Lua scripts of one-sided communication (windows,
// puts, signals, barriers, all-gathers) on N ranks, on the host or on GPUs.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/luacoll/luacoll/engine"
	"github.com/luacoll/luacoll/luabind"
	"github.com/luacoll/luacoll/transport"
)

// version and revision are set with -ldflags by the Makefile.
var (
	version  = "0.1.0-dev"
	revision = ""
)

const usage = `luacoll: one-sided communication scripted in Lua, on N ranks, host or GPU.

Usage:
  luacoll run [-n N] [flags] [script.lua [args...]]     run a script on N ranks (default: the tour)
  luacoll repl [-n N] [flags]                           interactive Lua on N ranks
  luacoll bench put|pingpong|barrier|allgather [flags]  measure the window stack and the all-gather
  luacoll info                                          GPUs, links, capabilities, libraries
  luacoll docs [-o FILE]                                write the Lua API reference (Markdown)
  luacoll version                                       version and build
  luacoll help [command]                                this text, or a command's flags

Scripts are files, or embedded ones by name: examples/tour.lua, examples/info.lua,
bench/pingpong.lua, bench/put_bw.lua; require() finds files next to the script and the embedded
lib/ modules (allgather, alltoall, barrier). In Lua, help() lists the API.

Under torchrun, Slurm or Open MPI (RANK/WORLD_SIZE, SLURM_PROCID/SLURM_NTASKS,
OMPI_COMM_WORLD_RANK/SIZE), 'luacoll run script.lua' runs as that one rank and
meets the others at MASTER_ADDR:MASTER_PORT or LUACOLL_ADDR.
`

func main() {
	luabind.Version = version
	os.Exit(realMain(os.Args[1:], os.Stdout, os.Stderr))
}

func realMain(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	cmd, rest := args[0], args[1:]
	switch cmd {
	case "run":
		return cmdRun(rest, stdout, stderr)
	case "repl":
		return cmdRepl(rest, stdout, stderr)
	case "bench":
		return cmdBench(rest, stdout, stderr)
	case "info":
		return cmdInfo(rest, stdout, stderr)
	case "docs":
		return cmdDocs(rest, stdout, stderr)
	case "version", "--version", "-version":
		fmt.Fprintf(stdout, "luacoll %s\n", versionString())
		return 0
	case "help", "-h", "--help", "-help":
		if len(rest) > 0 && rest[0] != "help" {
			return realMain([]string{rest[0], "--help"}, stdout, stderr)
		}
		fmt.Fprint(stdout, usage)
		return 0
	}
	fmt.Fprintf(stderr, "luacoll: unknown command %q\n\n%s", cmd, usage)
	return 2
}

// buildRevision is the revision set by the Makefile, else the one the Go
// toolchain recorded (vcs.revision, shortened; "+dirty" when the tree had
// changes), else "unknown".
func buildRevision() string {
	if revision != "" {
		return revision
	}
	if bi, ok := debug.ReadBuildInfo(); ok {
		var rev, dirty string
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.modified":
				if s.Value == "true" {
					dirty = "+dirty"
				}
			}
		}
		if rev != "" {
			return rev[:min(len(rev), 7)] + dirty
		}
	}
	return "unknown"
}

func versionString() string {
	return fmt.Sprintf("%s (revision %s, %s, %s/%s, %s)", version, buildRevision(), runtime.Version(),
		runtime.GOOS, runtime.GOARCH, luabind.LuaVersion())
}

// rankFlags are the flags run and repl share.
type rankFlags struct {
	n        int
	nSet     bool // -n was given
	device   string
	timeout  time.Duration
	noPrefix bool
	gpus     string
	cpuBind  string
	ipc      string
	fs       *flag.FlagSet
}

func (f *rankFlags) register(fs *flag.FlagSet) {
	f.fs = fs
	fs.IntVar(&f.n, "n", 0, "number of ranks to start (default 1; under an external launcher, its world size)")
	fs.StringVar(&f.device, "device", "host", "where memory and streams live: host or cuda")
	fs.DurationVar(&f.timeout, "timeout", 10*time.Second, "default timeout of every wait and bootstrap call (e.g. 500ms, 30s)")
	fs.BoolVar(&f.noPrefix, "no-prefix", false, "do not prefix output lines with [rank]")
	fs.StringVar(&f.gpus, "gpus", "", "CUDA devices by local rank, e.g. 0,1 (default: local rank modulo the device count)")
	fs.StringVar(&f.cpuBind, "cpu-bind", engine.CPUBindAuto, "CPU affinity of each rank: auto (the ranks on a host share out the CPUs they may use, those near\n"+
		"their GPU first, when each gets at least 2, 1 on the host backend), spread (the same down to 1 CPU each) or none")
	fs.StringVar(&f.ipc, "ipc", transport.IPCLegacy, "how CUDA windows share their memory, unless a window names its own ipc: legacy (CUDA IPC handles)\n"+
		"or vmm (cuMemCreate memory passed to the peers as file descriptors over Unix sockets)")
}

// options are the engine options the flags describe (after check).
func (f *rankFlags) options() engine.Options {
	gpus, _ := f.gpuList()
	return engine.Options{Device: f.device, Timeout: f.timeout, GPUs: gpus, CPUBind: f.cpuBind, IPC: f.ipc}
}

func (f *rankFlags) check() error {
	if f.fs != nil {
		f.fs.Visit(func(fl *flag.Flag) {
			if fl.Name == "n" {
				f.nSet = true
			}
		})
	}
	if f.device != "host" && f.device != "cuda" {
		return fmt.Errorf("--device %q: want host or cuda", f.device)
	}
	if f.timeout <= 0 {
		return fmt.Errorf("--timeout %v: must be positive", f.timeout)
	}
	if f.n < 0 || f.n > 1024 || (f.n == 0 && f.nSet) {
		return fmt.Errorf("-n %d: want 1..1024", f.n)
	}
	if err := engine.CheckCPUBind(f.cpuBind); err != nil || f.cpuBind == "" {
		return fmt.Errorf("--cpu-bind %q: want auto, spread or none", f.cpuBind)
	}
	if f.ipc != transport.IPCLegacy && f.ipc != transport.IPCVMM {
		return fmt.Errorf("--ipc %q: want legacy or vmm", f.ipc)
	}
	_, err := f.gpuList()
	return err
}

func (f *rankFlags) gpuList() ([]int, error) {
	if f.gpus == "" {
		return nil, nil
	}
	var out []int
	for _, s := range strings.Split(f.gpus, ",") {
		v, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || v < 0 {
			return nil, fmt.Errorf("--gpus %q: %q is not a device number", f.gpus, s)
		}
		out = append(out, v)
	}
	return out, nil
}

func newFlagSet(name, synopsis string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: %s\n\nFlags:\n", synopsis)
		fs.PrintDefaults()
	}
	return fs
}

// parse handles --help (exit 0) and bad flags (exit 2).
func parse(fs *flag.FlagSet, args []string, stdout io.Writer) (code int, ok bool) {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0, false
		}
		return 2, false
	}
	return 0, true
}

// signalContext is cancelled by SIGINT or SIGTERM.
func signalContext() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
}

func cmdRun(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("run", "luacoll run [-n N] [--device host|cuda] [--timeout D] [--no-prefix] [--gpus LIST] [--cpu-bind auto|spread|none] [--ipc legacy|vmm] [script.lua [args...]]\n\n"+
		"Runs the script on N ranks (the embedded examples/tour.lua when none is named); its\n"+
		"arguments are in Lua's arg table. Exit status: 0 when every rank succeeds, else the\n"+
		"status of the first rank that failed (a rank stopped only by another's failure exits\n"+
		"77 and gives way to it); 130 when interrupted. When a rank fails or dies, the others\n"+
		"stop at once with an error naming it.", stderr)
	var f rankFlags
	f.register(fs)
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
	if _, _, err := luabind.LoadScript(script); err != nil {
		fmt.Fprintf(stderr, "luacoll run: %v\n", err)
		return 2
	}
	ctx, stop := signalContext()
	defer stop()
	env, isRank, err := engine.RankEnvFromEnv(os.Getenv)
	if err != nil {
		fmt.Fprintf(stderr, "luacoll run: %v\n", err)
		return 2
	}
	opts := luabind.RunOptions{Comm: f.options(), Script: script, Args: scriptArgs,
		Stdout: stdout, Stderr: stderr, CUDA: cudaBackend}
	if isRank {
		if f.n != 0 && f.n != env.Size {
			fmt.Fprintf(stderr, "luacoll run: -n %d, but the launcher (%s) says the world size is %d\n", f.n, env.Source, env.Size)
			return 2
		}
		return luabind.RunRank(ctx, env, opts)
	}
	n := f.n
	if n == 0 {
		n = 1
	}
	exe, err := os.Executable()
	if err != nil {
		fmt.Fprintf(stderr, "luacoll run: finding my own executable: %v\n", err)
		return 1
	}
	cfg := engine.LaunchConfig{N: n, Path: exe, Args: append([]string{"run"}, args...),
		Prefix: !f.noPrefix, Stdout: stdout, Stderr: stderr, Grace: f.timeout + 5*time.Second}
	if f.noPrefix {
		// Tell the ranks that their output needs no prefix at all.
		cfg.ExtraEnv = func(int) []string { return []string{"LUACOLL_PREFIXED=1"} }
	}
	res, err := engine.Launch(ctx, cfg)
	if ctx.Err() != nil {
		// Interrupted: the ranks' own statuses say only that they stopped.
		fmt.Fprintln(stderr, "luacoll run: interrupted")
		return 130
	}
	if err != nil {
		fmt.Fprintf(stderr, "luacoll run: %v\n", err)
		if res.ExitCode == 0 {
			return 1
		}
	}
	return res.ExitCode
}

func cmdDocs(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("docs", "luacoll docs [-o FILE]\n\nWrites the Lua API reference, generated from the function registry.", stderr)
	out := fs.String("o", "", "write to FILE instead of standard output")
	if code, ok := parse(fs, args, stdout); !ok {
		return code
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "luacoll docs: unexpected argument %q (use -o FILE)\n", fs.Arg(0))
		return 2
	}
	text := luabind.NewRegistry().Markdown()
	if *out == "" {
		fmt.Fprint(stdout, text)
		return 0
	}
	if err := os.WriteFile(*out, []byte(text), 0o644); err != nil {
		fmt.Fprintf(stderr, "luacoll docs: %v\n", err)
		return 1
	}
	return 0
}

// cudaBackend opens the CUDA backend for a rank.
func cudaBackend(env engine.RankEnv, job string, gpus []int) (transport.Backend, error) {
	b, err := transport.NewCUDABackend(job, env.LocalRank, gpus)
	if err != nil {
		return nil, err
	}
	return b, nil
}
