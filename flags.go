package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/luacoll/luacoll/cuda"
	"github.com/luacoll/luacoll/engine"
	"github.com/luacoll/luacoll/engine/launch"
	"github.com/luacoll/luacoll/engine/trace"
	"github.com/luacoll/luacoll/transport"
	"github.com/luacoll/luacoll/transport/gpu"
	"github.com/luacoll/luacoll/transport/launchenv"
)

// The command-line plumbing every command shares: the rank flags of run,
// repl and bench, flag sets with a synopsis, and the signal context.

// rankFlags are the flags run and repl share.
type rankFlags struct {
	n         int
	nSet      bool // -n was given
	device    string
	timeout   time.Duration
	noPrefix  bool
	gpus      string
	cpuBind   string
	ipc       string
	symmetric string
	mps       string
	trace     string
	profile   string // --cpuprofile: a directory
	nodes     int
	fs        *flag.FlagSet
}

// register adds the flags to fs; defaultN is the command's number of
// ranks when -n is not given.
func (f *rankFlags) register(fs *flag.FlagSet, defaultN int) {
	f.fs = fs
	fs.IntVar(&f.n, "n", 0, fmt.Sprintf("number of ranks to start (default %d; under an external launcher, its world size)", defaultN))
	fs.IntVar(&f.n, "np", 0, "the same as -n (as mpirun writes it)")
	fs.StringVar(&f.device, "device", "host", "where memory and streams live: host or cuda")
	fs.DurationVar(&f.timeout, "timeout", 10*time.Second, "default timeout of every wait and bootstrap call (e.g. 500ms, 30s)")
	fs.BoolVar(&f.noPrefix, "no-prefix", false, "do not prefix output lines with [rank]")
	fs.StringVar(&f.gpus, "gpus", "", "CUDA devices by local rank (by rank under --nodes, whose logical nodes share this machine's devices), e.g. 0,1 (default: that index modulo the device count)")
	fs.StringVar(&f.cpuBind, "cpu-bind", launch.CPUBindAuto, "CPU affinity of each rank: auto (the ranks on a host share out the CPUs they may use, those near\n"+
		"their GPU first, when each gets at least 2, 1 on the host backend, where ranks that outnumber the CPUs get\n"+
		"one each in turn), spread (the same down to 1 CPU each, an error when too few) or none")
	fs.StringVar(&f.ipc, "ipc", "auto", "how CUDA windows share their memory, unless a window names its own ipc: legacy (CUDA IPC handles),\n"+
		"vmm (cuMemCreate memory passed to the peers as file descriptors over Unix sockets), or auto (vmm in a\n"+
		"symmetric window where every rank can map one, else legacy)")
	fs.StringVar(&f.symmetric, "symmetric", "auto", "whether CUDA windows are symmetric (every rank's part mapped in one range at base + rank*stride),\n"+
		"unless a window says: on, off, or auto (wherever every rank can)")
	fs.StringVar(&f.mps, "mps", launch.MPSAuto, "several ranks on one GPU (--device cuda): auto (when ranks share a GPU, nvidia-cuda-mps-control exists and no\n"+
		"MPS runs, the job gets a private MPS control daemon, stopped at its end), on (always such a daemon) or off")
	fs.StringVar(&f.trace, "trace", "", "write a timeline of every rank to FILE: a slice per window operation from enqueue to completion,\n"+
		"syncs, collectives and errors (Trace Event Format JSON: open it in ui.perfetto.dev or chrome://tracing)")
	fs.StringVar(&f.profile, "cpuprofile", "", "write a CPU profile of every rank to DIR/rank-N.pprof (go tool pprof): where the host's time goes")
	fs.IntVar(&f.nodes, "nodes", 1, "split the ranks into this many logical nodes of this machine: each has its own host identity,\n"+
		"shared memory and temporary directory, and reaches the others over the network (UCX; UCX_TLS=tcp unless set)")
}

// options are the engine options the flags describe (after check).
func (f *rankFlags) options() engine.Options {
	gpus, _ := f.gpuList()
	o := engine.Options{Device: f.device, Timeout: f.timeout, GPUs: gpus, CPUBind: f.cpuBind, IPC: f.ipc, Symmetric: f.symmetric}
	if f.trace != "" {
		// Under luacoll's launcher the parts go where it merges them;
		// under another, rank 0 merges them into the file itself.
		o.TraceDir, o.TraceFile = launchenv.Get(trace.EnvDir), f.trace
	}
	o.CPUProfileDir = f.profile
	return o
}

func (f *rankFlags) check() error {
	if f.fs != nil {
		f.fs.Visit(func(fl *flag.Flag) {
			if fl.Name == "n" || fl.Name == "np" {
				f.nSet = true
			}
		})
	}
	if f.device != "host" && f.device != "cuda" {
		return fmt.Errorf("--device %q: want host or cuda", f.device)
	}
	if f.timeout < time.Millisecond {
		return fmt.Errorf("--timeout %v: must be at least 1ms", f.timeout)
	}
	if f.n < 0 || f.n > 1024 || (f.n == 0 && f.nSet) {
		return fmt.Errorf("-n %d: want 1..1024", f.n)
	}
	if err := launch.CheckCPUBind(f.cpuBind); err != nil || f.cpuBind == "" {
		return fmt.Errorf("--cpu-bind %q: want auto, spread or none", f.cpuBind)
	}
	if f.ipc != "auto" && f.ipc != transport.IPCLegacy && f.ipc != transport.IPCVMM {
		return fmt.Errorf("--ipc %q: want auto, legacy or vmm", f.ipc)
	}
	if f.symmetric != "auto" && f.symmetric != "on" && f.symmetric != "off" {
		return fmt.Errorf("--symmetric %q: want auto, on or off", f.symmetric)
	}
	if err := launch.CheckMPSMode(f.mps); err != nil {
		return fmt.Errorf("--mps %q: %w", f.mps, err)
	}
	if f.mps == launch.MPSOn && f.device != "cuda" {
		return fmt.Errorf("--mps on: MPS shares a GPU between processes; it needs --device cuda")
	}
	if f.trace != "" {
		if err := checkWritable(f.trace); err != nil {
			return fmt.Errorf("--trace %w", err)
		}
	}
	if f.profile != "" {
		if err := os.MkdirAll(f.profile, 0o755); err != nil {
			return fmt.Errorf("--cpuprofile %q: %w", f.profile, err)
		}
		if err := checkWritable(filepath.Join(f.profile, "rank-0.pprof")); err != nil {
			return fmt.Errorf("--cpuprofile %w", err)
		}
	}
	if f.nodes < 1 {
		return fmt.Errorf("--nodes %d: want 1 or more", f.nodes)
	}
	_, err := f.gpuList()
	return err
}

// checkNodes validates --nodes against the ranks to launch.
func (f *rankFlags) checkNodes(n int) error {
	return launch.CheckNodes(f.nodes, n)
}

// mpsLaunch decides, before luacoll's launcher starts n ranks, whether the
// job gets a private MPS control daemon (nil: none), and first tells
// stderr what the user should know: which ranks share which GPU without
// MPS, and what that slows down.
func (f *rankFlags) mpsLaunch(n int, cmd string, stderr io.Writer) (*launch.MPSConfig, error) {
	if f.device != "cuda" {
		return nil, nil
	}
	gpus, _ := f.gpuList()
	devices := 0
	if len(gpus) == 0 {
		devices = cudaDeviceCount()
	}
	shares := launch.SharedGPUs(n, gpus, devices)
	control, _ := exec.LookPath(launch.MPSControlProgram)
	running := ""
	if len(shares) > 0 || f.mps == launch.MPSOn {
		running = launch.RunningMPS("/proc")
	}
	plan, err := launch.PlanMPS(f.mps, shares, control, running)
	if err != nil {
		return nil, err
	}
	if pct := launch.MPSThreadPercentage(shares); pct > 0 && os.Getenv(launch.EnvMPSThreads) == "" {
		// Each rank may use its share of the SMs: a rank's kernel that
		// spins waiting for a peer on the same GPU must not hold every SM
		// while the peer's kernel waits to start. The ranks inherit this
		// process's environment.
		if err := os.Setenv(launch.EnvMPSThreads, strconv.Itoa(pct)); err != nil {
			return nil, err
		}
	}
	if plan.Note != "" {
		fmt.Fprintf(stderr, "luacoll %s: %s\n", cmd, plan.Note)
	}
	if !plan.Start {
		return nil, nil
	}
	return &launch.MPSConfig{Control: control}, nil
}

// checkMPSUnder refuses --mps on under another launcher: the daemon is
// started by luacoll's own.
func (f *rankFlags) checkMPSUnder(env launch.RankEnv, cmd string) error {
	if f.mps != launch.MPSOn || env.Source == launch.SourceLuacoll {
		return nil
	}
	return fmt.Errorf("--mps on: luacoll starts an MPS daemon only for the ranks it launches itself (luacoll %s -n N); "+
		"under %s, start one on each host before the job (nvidia-cuda-mps-control -d) and the ranks use it", cmd, env.Source)
}

// cudaDeviceCount is the number of CUDA devices this process sees (0 when
// there is no driver).
func cudaDeviceCount() int {
	d, err := cuda.Load()
	if err != nil {
		return 0
	}
	n, err := d.DeviceCount()
	if err != nil {
		return 0
	}
	return n
}

// launch starts the ranks with launch.Launch and, with --trace, has them
// write their parts of the timeline into a directory named in their
// environment, then merges the parts into the file (prog names the
// command in what it prints).
func (f *rankFlags) launch(ctx context.Context, cfg launch.LaunchConfig, prog string, stderr io.Writer) (launch.LaunchResult, error) {
	keepOnBrokenPipe()
	if f.trace == "" {
		return launch.Launch(ctx, cfg)
	}
	job, err := trace.NewJob(f.trace, cfg.N)
	if err != nil {
		return launch.LaunchResult{FirstFailed: -1}, err
	}
	extra := cfg.ExtraEnv
	cfg.ExtraEnv = func(r int) []string {
		var env []string
		if extra != nil {
			env = extra(r)
		}
		return append(env, job.Env()...)
	}
	res, err := launch.Launch(ctx, cfg)
	exits := make([]trace.Exit, 0, len(res.Ranks))
	for _, x := range res.Ranks {
		e := trace.Exit{Rank: x.Rank}
		switch {
		case x.Signal != 0:
			e.Status = fmt.Sprintf("killed by signal %d (%v)", int(x.Signal), x.Signal)
		case x.Code == launch.ExitPeerFailed:
			e.Status = fmt.Sprintf("exit status %d (stopped by another rank's failure)", x.Code)
		case x.Code != 0:
			e.Status = fmt.Sprintf("exit status %d", x.Code)
		}
		exits = append(exits, e)
	}
	sum, terr := job.Finish(exits)
	if terr != nil {
		fmt.Fprintf(stderr, "luacoll %s: --trace: %v\n", prog, terr)
		if res.ExitCode == 0 {
			res.ExitCode = 1
		}
		return res, err
	}
	note := ""
	if len(sum.Missing) > 0 {
		note = fmt.Sprintf(" (nothing from rank %s)", joinInts(sum.Missing))
	}
	fmt.Fprintf(stderr, "luacoll %s: trace of %d ranks, %d events written to %s%s\n", prog, sum.Ranks, sum.Events, f.trace, note)
	return res, err
}

func joinInts(v []int) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = strconv.Itoa(x)
	}
	return strings.Join(s, ",")
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
		printDefaults(fs)
	}
	return fs
}

// printDefaults is flag.PrintDefaults with the flags that set the same
// variable (-w and -warmup) on one line: "-w, -warmup int".
func printDefaults(fs *flag.FlagSet) {
	var groups [][]*flag.Flag
	seen := map[flag.Value]int{}
	fs.VisitAll(func(fl *flag.Flag) {
		if i, ok := seen[fl.Value]; ok {
			groups[i] = append(groups[i], fl)
			return
		}
		seen[fl.Value] = len(groups)
		groups = append(groups, []*flag.Flag{fl})
	})
	for _, g := range groups {
		var b strings.Builder
		names := make([]string, len(g))
		for i, fl := range g {
			names[i] = "-" + fl.Name
		}
		sort.Slice(names, func(i, j int) bool { return len(names[i]) < len(names[j]) })
		fmt.Fprintf(&b, "  %s", strings.Join(names, ", "))
		kind, usage := flag.UnquoteUsage(g[0])
		if kind != "" {
			b.WriteString(" " + kind)
		}
		b.WriteString("\n    \t")
		b.WriteString(strings.ReplaceAll(usage, "\n", "\n    \t"))
		if d := g[0].DefValue; d != "" && d != "0" && d != "false" && !strings.Contains(usage, "(default") {
			if kind == "string" {
				d = strconv.Quote(d)
			}
			fmt.Fprintf(&b, " (default %s)", d)
		}
		fmt.Fprintln(fs.Output(), b.String())
	}
}

// parse handles --help (the usage on stdout, exit 0) and bad flags (the
// error and the usage on fs's output, stderr, exit 2). The attached form
// of one-letter flags ("-n2") is accepted too (see expandAttached).
func parse(fs *flag.FlagSet, args []string, stdout io.Writer) (code int, ok bool) {
	out := fs.Output()
	var said bytes.Buffer
	fs.SetOutput(&said)
	err := fs.Parse(expandAttached(fs, args))
	fs.SetOutput(out)
	if errors.Is(err, flag.ErrHelp) {
		_, _ = stdout.Write(said.Bytes())
		return 0, false
	}
	_, _ = out.Write(said.Bytes())
	if err != nil {
		return 2, false
	}
	return 0, true
}

// signalContext is cancelled by SIGINT or SIGTERM, and by SIGHUP (the
// terminal or the ssh session closed: the launcher stops its ranks and
// removes what the job made, as for SIGTERM), with a caughtSignal cause
// naming it. SIGHUP keeps its disposition where it is ignored (nohup) and
// in a rank of luacoll's launcher: sent to a rank alone it ends it, and
// the launcher names the signal.
func signalContext() (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(context.Background())
	ch := make(chan os.Signal, 1)
	sigs := []os.Signal{os.Interrupt, syscall.SIGTERM}
	if env, isRank, _ := launch.RankEnvFromEnv(os.Getenv); !signal.Ignored(syscall.SIGHUP) && (!isRank || env.Source != launch.SourceLuacoll) {
		sigs = append(sigs, syscall.SIGHUP)
	}
	signal.Notify(ch, sigs...)
	go func() {
		select {
		case s := <-ch:
			cancel(caughtSignal{s})
		case <-ctx.Done():
		}
	}()
	return ctx, func() {
		signal.Stop(ch)
		cancel(nil)
	}
}

// keepOnBrokenPipe keeps the launcher alive when its output pipe closes
// (`luacoll run ... | head -1`): a SIGPIPE would kill it before it
// stopped its ranks and removed the job's directories. Its writes fail
// instead, and a launch then stops the job (LaunchConfig.StdoutClosed).
// (Caught, not ignored, so the ranks it starts get the default action
// back.)
func keepOnBrokenPipe() {
	signal.Notify(make(chan os.Signal, 1), syscall.SIGPIPE)
}

// caughtSignal is the cause of a signalContext ended by a signal.
type caughtSignal struct{ sig os.Signal }

func (c caughtSignal) Error() string { return c.sig.String() + " signal received" }

// Is makes errors.Is(cause, context.Canceled) hold, as for any cancel.
func (c caughtSignal) Is(target error) bool { return target == context.Canceled }

// signalExitCode is the exit status of a command that ctx's signal
// stopped: 128 + the signal's number, as a shell reports it (130 for
// SIGINT, 143 for SIGTERM, 129 for SIGHUP).
func signalExitCode(ctx context.Context) int {
	var cs caughtSignal
	if errors.As(context.Cause(ctx), &cs) {
		if s, ok := cs.sig.(syscall.Signal); ok {
			return 128 + int(s)
		}
	}
	return 128 + int(syscall.SIGINT)
}

// cudaBackend opens the CUDA backend for a rank.
func cudaBackend(env launch.RankEnv, job string, gpus []int) (transport.Backend, error) {
	b, err := gpu.NewCUDABackend(job, launch.DeviceIndex(env, os.Getenv), gpus)
	if err != nil {
		return nil, err
	}
	return b, nil
}

// isBool reports whether fl is a flag that takes no value.
func isBool(fl *flag.Flag) bool {
	b, ok := fl.Value.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}

// expandAttached splits the attached form of a one-letter flag that takes
// a value ("-n2", "--b1K") into the flag and its value, as getopt does;
// the flag package knows only "-n 2" and "-n=2". It looks at the flags
// before the first other argument (the script), skipping the values of
// flags given as "-timeout 1s", and leaves a word alone when it is a flag
// of its own or the letters after the first are not a number ("-np",
// "--no-such": the flag package names the flag it does not know).
func expandAttached(fs *flag.FlagSet, args []string) []string {
	out := make([]string, 0, len(args))
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" || len(a) < 2 || a[0] != '-' {
			return append(out, args[i:]...)
		}
		name := strings.TrimPrefix(strings.TrimPrefix(a, "-"), "-")
		if name == "" || strings.Contains(name, "=") {
			out = append(out, a)
			continue
		}
		if fl := fs.Lookup(name); fl != nil {
			out = append(out, a)
			if !isBool(fl) && i+1 < len(args) {
				i++
				out = append(out, args[i])
			}
			continue
		}
		if fl := fs.Lookup(name[:1]); fl != nil && !isBool(fl) && len(name) > 1 && name[1] >= '0' && name[1] <= '9' {
			dashes := a[:len(a)-len(name)]
			out = append(out, dashes+name[:1], name[1:])
			continue
		}
		out = append(out, a)
	}
	return out
}

// flagLookalikes lists the arguments (after the script) that name a flag
// of fs, attached values and all: they go to the script, which is seldom
// what was meant.
func flagLookalikes(fs *flag.FlagSet, args []string) []string {
	var out []string
	for _, a := range args {
		if len(a) < 2 || a[0] != '-' || a == "--" {
			continue
		}
		name := strings.TrimPrefix(strings.TrimPrefix(a, "-"), "-")
		name, _, _ = strings.Cut(name, "=")
		if name == "" {
			continue
		}
		if fs.Lookup(name) != nil {
			out = append(out, a)
		} else if fl := fs.Lookup(name[:1]); fl != nil && !isBool(fl) && len(name) > 1 {
			out = append(out, a)
		}
	}
	return out
}
