package engine

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/luacoll/luacoll/engine/bootstrap"
	"github.com/luacoll/luacoll/engine/launch"
	"github.com/luacoll/luacoll/engine/trace"
	"github.com/luacoll/luacoll/transport"
	"github.com/luacoll/luacoll/transport/knobs"
	"github.com/luacoll/luacoll/transport/launchenv"
	tnet "github.com/luacoll/luacoll/transport/net"
	"github.com/luacoll/luacoll/transport/shm"
	"github.com/luacoll/luacoll/window"
	"golang.org/x/sys/unix"
)

// Options configure a rank's Comm.
type Options struct {
	Device  string        // "host" (default) or "cuda"
	Timeout time.Duration // deadline of bootstrap calls and the default window timeout
	GPUs    []int         // CUDA devices to use, indexed by local rank (empty: local rank modulo count)
	// CPUBind is CPUBindAuto, launch.CPUBindSpread or CPUBindNone ("": none).
	// Binding is per process: ranks that share one never bind.
	CPUBind string
	// IPC is how CUDA windows that ask for "auto" share their memory:
	// transport.IPCLegacy, transport.IPCVMM, or "auto" ("" too): symmetric
	// VMM windows where every rank can map them, else legacy.
	IPC string
	// Symmetric is what windows that ask for "auto" get: "on", "off" or
	// "auto" ("" too).
	Symmetric string
	// Backend, when set, is used instead of opening one for Device (tests).
	Backend func(env launch.RankEnv, job string) (transport.Backend, error)
	// TraceDir, when set, makes the rank record its timeline into
	// trace.PartPath(TraceDir, rank), for its launcher to merge.
	TraceDir string
	// TraceFile, when set and TraceDir is not (an external launcher),
	// makes each rank record into trace.SidePart(TraceFile, rank), and
	// rank 0 merge the parts into TraceFile at a clean end.
	TraceFile string
	// CPUProfileDir, when set, makes the rank write a CPU profile of its
	// life to CPUProfileDir/rank-N.pprof.
	CPUProfileDir string
}

// Comm is one rank's world: its place in the job, the bootstrap, the
// backend, the stream, and every window and buffer it made.
type Comm struct {
	Env     launch.RankEnv
	Opts    Options
	Boot    Conn
	Backend transport.Backend
	Abort   *transport.Abort
	Rank    *window.Rank
	// CPUs are the CPUs this process may run on once the job is open.
	CPUs []int
	// Net reaches the peers the topology puts on the network (nil when
	// there are none anywhere in the job).
	Net *tnet.Transport

	// Refuse, when set, is asked before every collective call (with the
	// call's description); an error refuses the call on this rank before
	// any rank is contacted or the call counted. The REPL sets it while a
	// chunk runs on some ranks only, whose collectives could never meet.
	Refuse func(call string) error

	collSeq int
	// collBase is collSeq when Open returned: the collectives of the
	// start-up are not the script's, and the mismatch error counts the
	// script's.
	collBase int
	// reserved holds each window's reserved slots (ReserveSlots).
	resMu    sync.Mutex
	reserved map[*window.Window]*Reservation
	windows  []*window.Window
	buffers  []*window.Buffer
	closed   bool
	trace    *trace.Recorder // nil unless tracing
	profile  *os.File        // nil unless profiling (Options.CPUProfileDir)
	leaving  string          // why the rank leaves early (Leave)
}

// RankID is this rank's number in the job, 0 to Size()-1 (the same as
// Env.Rank and Rank.ID()).
func (c *Comm) RankID() int { return c.Env.Rank }

// Size is the number of ranks in the job.
func (c *Comm) Size() int { return c.Env.Size }

// Conn is what a Comm needs of the bootstrap: the exchange, and the way to
// report a failure and say goodbye. *Bootstrap implements it; tests use an
// in-process one.
type Conn interface {
	transport.Exchanger
	Fail(reason string)
	Close() error
}

// CUDABackend opens the CUDA backend; the cuda-enabled build sets it.
type CUDABackend func(env launch.RankEnv, job string, gpus []int) (transport.Backend, error)

// Open connects this rank to the job and prepares its backend.
func Open(ctx context.Context, env launch.RankEnv, opts Options, cudaOpen CUDABackend) (*Comm, error) {
	if opts.Timeout <= 0 {
		opts.Timeout = 10 * time.Second
	}
	if opts.Device == "" {
		opts.Device = "host"
	}
	abort := transport.NewAbort()
	cfg := bootstrap.Config{Rank: env.Rank, Size: env.Size, Addr: env.Addr, JobID: env.JobID,
		Timeout: opts.Timeout, Abort: abort, Host: transport.LocalIdentity("").Host, Secret: launch.JobSecret(os.Getenv)}
	if env.ListenFD > 0 && env.Rank == 0 {
		l, err := listenerFromInheritedFD(env.ListenFD)
		if err != nil {
			return nil, fmt.Errorf("rank %d: %w", env.Rank, err)
		}
		cfg.Listener = l
	}
	jctx, stopWatch := watchJoin(ctx, env.JoinFD)
	boot, err := bootstrap.Connect(jctx, cfg)
	stopWatch()
	if err != nil {
		if errors.Is(context.Cause(jctx), errJobGivenUp) && ctx.Err() == nil {
			return nil, fmt.Errorf("rank %d: %w", env.Rank, errJobGivenUp)
		}
		if strings.HasPrefix(env.Addr, bootstrap.UnixPrefix) && env.Rank != 0 && ctx.Err() == nil {
			return nil, fmt.Errorf("rank %d: %w (%s said every rank is on this host, so the job "+
				"meets at that socket; if rank 0 runs elsewhere, set %s=host:port for every rank)",
				env.Rank, err, env.Source, launch.EnvAddr)
		}
		return nil, fmt.Errorf("rank %d: %w", env.Rank, err) // bootstrap errors say "bootstrap"
	}
	if env.JobID == "" {
		env.JobID = boot.JobID()
	}
	return OpenWith(ctx, env, opts, boot, abort, cudaOpen)
}

// OpenWith builds a Comm over an existing connection (abort is the flag
// the connection sets when a peer fails).
func OpenWith(ctx context.Context, env launch.RankEnv, opts Options, boot Conn, abort *transport.Abort, cudaOpen CUDABackend) (*Comm, error) {
	if opts.Timeout <= 0 {
		opts.Timeout = 10 * time.Second
	}
	if opts.Device == "" {
		opts.Device = "host"
	}
	c := &Comm{Env: env, Opts: opts, Boot: boot, Abort: abort}
	var be transport.Backend
	err := launch.CheckCPUBind(opts.CPUBind)
	if err == nil {
		err = knobs.Current().Err() // a knob's bad value, named
	}
	if err == nil {
		err = c.startTrace(ctx)
	}
	if err == nil {
		err = c.startProfile()
	}
	if err == nil {
		be, err = c.openBackend(cudaOpen)
	}
	// Agree on whether every rank has a backend before anyone goes on.
	status := ""
	if err != nil {
		status = err.Error()
	}
	if _, cerr := c.checked(ctx, "open(device="+opts.Device+")", []byte(status), true); cerr != nil {
		if be != nil {
			_ = be.Close()
		}
		if opts.Device == "cuda" {
			cerr = fmt.Errorf("%w ('luacoll info' says which GPUs and libraries this machine has)", cerr)
		}
		if c.trace != nil {
			_ = c.trace.Close(cerr)
		}
		boot.Fail(cerr.Error())
		_ = boot.Close()
		return nil, cerr
	}
	c.Backend = be
	if err := c.bindCPUs(ctx); err != nil {
		c.Close(err)
		return nil, fmt.Errorf("rank %d: %w", env.Rank, err)
	}
	topo, err := transport.Discover(ctx, boot, be.Identity(), be.GPUPeer, knobs.Transport.Get())
	if err != nil {
		c.Close(err)
		return nil, fmt.Errorf("rank %d: %w", env.Rank, err)
	}
	if g, ok := be.(transport.GPUSharer); ok {
		g.SetGPUShared(gpuShared(topo))
	}
	if h, ok := be.(transport.TimeoutHinter); ok && gpuShared(topo) && be.Describe().MPS == "off" && launchenv.Get(launch.EnvMPS) == "" {
		h.SetTimeoutHint(fmt.Sprintf("rank %d shares its GPU with another rank and MPS is off: their contexts take turns on the GPU, "+
			"so waits between them take milliseconds or time out; run with --mps on (luacoll's launcher) or start MPS", env.Rank))
	}
	st, err := be.NewStream(abort)
	if err != nil {
		c.Close(err)
		return nil, fmt.Errorf("rank %d: stream: %w", env.Rank, err)
	}
	c.Rank = &window.Rank{Ex: boot, Topo: topo, Backend: be, Stream: st, Abort: abort}
	if c.trace != nil {
		c.Rank.Trace = c.trace
		if s, ok := st.(transport.Stamper); ok {
			s.Stamp() // a CUDA stream ties its clock to the host's at its first
		}
	}
	c.collBase = c.collSeq
	if topo.AnyNet() {
		// Opened (UCX loaded) by the first window that needs it.
		c.Net = tnet.New(env.Rank, env.Size)
		c.Rank.Net = c.Net
		// A GPU's buffers then live where the network reads them in
		// place (the proxy path: transport/gpu).
		if hb, ok := be.(transport.HostBufferUser); ok {
			hb.UseHostBuffers()
		}
	}
	return c, nil
}

func (c *Comm) openBackend(cudaOpen CUDABackend) (transport.Backend, error) {
	if c.Opts.Backend != nil {
		return c.Opts.Backend(c.Env, c.Env.JobID)
	}
	switch c.Opts.Device {
	case "host":
		be := shm.NewHostBackend(c.Env.JobID)
		be.Oversubscribed = c.Env.LocalSize > runtime.NumCPU()
		return be, nil
	case "cuda":
		// The driver's current context is per OS thread: keep the rank's
		// goroutine on one.
		runtime.LockOSThread()
		if cudaOpen == nil {
			return nil, errors.New("this build has no CUDA backend")
		}
		return cudaOpen(c.Env, c.Env.JobID, c.Opts.GPUs)
	}
	return nil, fmt.Errorf("unknown device %q (want host or cuda)", c.Opts.Device)
}

// Collective is the entry of every collective call: it exchanges a hash of
// call (its name and arguments) with every rank together with data, and
// returns everyone's data, or a MismatchError on every rank when the calls
// differ.
func (c *Comm) Collective(ctx context.Context, call string, data []byte) ([][]byte, error) {
	return c.checked(ctx, call, data, false)
}

// CollectiveStatus is a collective in which each rank brings a status:
// "" for success, else an error message. When any rank brings a message,
// every rank returns an error naming each failed rank and its message.
func (c *Comm) CollectiveStatus(ctx context.Context, call, status string) error {
	_, err := c.checked(ctx, call, []byte(status), true)
	return err
}

// SumInt adds v over all ranks (collective).
func (c *Comm) SumInt(ctx context.Context, call string, v int) (int, error) {
	all, err := c.Collective(ctx, call, []byte(fmt.Sprint(v)))
	if err != nil {
		return 0, err
	}
	total := 0
	for _, b := range all {
		var x int
		fmt.Sscan(string(b), &x)
		total += x
	}
	return total, nil
}

// Collectives is the number of collective calls this rank has taken part
// in (refused ones included); a call that did not advance it never reached
// the exchange.
func (c *Comm) Collectives() int { return c.collSeq }

// JoinRefused takes part in a collective this rank refused before it
// reached the exchange (a bad argument): it exchanges reason, marked
// failed, with whatever the other ranks call at this point, so that every
// rank's call fails with reason and the ranks stay in step. It returns an
// error when other ranks refused too, or could not be reached; nil when
// this rank was the only one refusing. A rank that Refuse keeps out of
// collectives (the REPL's subset chunks: the other ranks are in none)
// takes no part.
func (c *Comm) JoinRefused(ctx context.Context, call, reason string) error {
	if c.Refuse != nil && c.Refuse(call) != nil {
		return nil
	}
	_, err := c.traced(ctx, call, []byte(reason), false, true)
	var re *RefusedError
	if errors.As(err, &re) && len(re.Reasons) == 1 {
		if _, mine := re.Reasons[c.RankID()]; mine {
			return nil
		}
	}
	return err
}

// checked exchanges call+data; with statusOnly, non-empty data is an error
// message of that rank and any such message fails every rank.
func (c *Comm) checked(ctx context.Context, call string, data []byte, statusOnly bool) ([][]byte, error) {
	if c.Refuse != nil {
		if err := c.Refuse(call); err != nil {
			return nil, fmt.Errorf("rank %d: %w", c.RankID(), err)
		}
	}
	return c.traced(ctx, call, data, statusOnly, false)
}

// traced is exchange, recorded in the trace when there is one.
func (c *Comm) traced(ctx context.Context, call string, data []byte, statusOnly, refused bool) ([][]byte, error) {
	if c.trace == nil {
		return c.exchange(ctx, call, data, statusOnly, refused)
	}
	start := time.Now()
	out, err := c.exchange(ctx, call, data, statusOnly, refused)
	c.trace.Collective(call, c.collSeq, start, err)
	return out, err
}

// Message flags of a collective.
const collRefused = 1 // the rank refused the call; its data is the reason

// exchange is checked without the trace, with the refused mark: a message
// is the call's hash, flags, the call and the data.
func (c *Comm) exchange(ctx context.Context, call string, data []byte, statusOnly, refused bool) ([][]byte, error) {
	c.collSeq++
	sum := sha256.Sum256([]byte(call))
	var msg bytes.Buffer
	msg.Write(sum[:8])
	var flags byte
	if refused {
		flags |= collRefused
	}
	msg.WriteByte(flags)
	_ = binary.Write(&msg, binary.LittleEndian, uint32(len(call)))
	msg.WriteString(call)
	msg.Write(data)
	all, err := c.Boot.AllGather(ctx, msg.Bytes())
	if err != nil {
		return nil, fmt.Errorf("rank %d: %s: %w", c.RankID(), call, err)
	}
	const head = 13
	out := make([][]byte, len(all))
	calls := make([]string, len(all))
	mismatch := false
	var reasons map[int]string
	for r, m := range all {
		if len(m) < head {
			return nil, fmt.Errorf("rank %d: %s: short message from rank %d", c.RankID(), call, r)
		}
		n := binary.LittleEndian.Uint32(m[9:head])
		if uint64(len(m)) < head+uint64(n) {
			return nil, fmt.Errorf("rank %d: %s: short message from rank %d", c.RankID(), call, r)
		}
		calls[r] = string(m[head : head+n])
		out[r] = m[head+n:]
		if m[8]&collRefused != 0 {
			if reasons == nil {
				reasons = map[int]string{}
			}
			reasons[r] = string(out[r])
		}
		if !bytes.Equal(m[:8], sum[:8]) {
			mismatch = true
		}
	}
	if reasons != nil {
		// A refused call pairs with whatever the others called: the
		// refusal explains the failure better than the mismatch would.
		seq := 0
		if c.Rank != nil {
			seq = c.collSeq - c.collBase
		}
		return nil, &RefusedError{Seq: seq, Call: call, Reasons: reasons}
	}
	if mismatch {
		seq := 0
		if c.Rank != nil {
			seq = c.collSeq - c.collBase
		}
		return nil, &MismatchError{Seq: seq, Calls: calls}
	}
	if statusOnly {
		msgs := make([]string, len(out))
		failed := false
		for r, d := range out {
			msgs[r] = string(d)
			failed = failed || len(d) > 0
		}
		if failed {
			return nil, &StatusError{Call: call, Msgs: msgs}
		}
	}
	return out, nil
}

// Barrier is the host-side barrier over the bootstrap (collective).
func (c *Comm) Barrier(ctx context.Context) error {
	_, err := c.Collective(ctx, "barrier()", nil)
	return err
}

// NewWindow is collective: it checks that every rank passes the same
// options, then creates the window.
func (c *Comm) NewWindow(ctx context.Context, call string, o window.Options) (*window.Window, error) {
	if o.Timeout <= 0 {
		o.Timeout = c.Opts.Timeout
	}
	if o.IPC == "" || o.IPC == "auto" {
		o.IPC = c.Opts.IPC
	}
	if o.IPC == "" {
		o.IPC = "auto"
	}
	if o.Symmetric == "" || o.Symmetric == "auto" {
		o.Symmetric = c.Opts.Symmetric
	}
	if o.Symmetric == "" {
		o.Symmetric = "auto"
	}
	// The way the memory is shared, as resolved from each rank's --ipc,
	// must agree too: the ways exchange different things. Each rank
	// brings whether it could map a symmetric window. (The host backend
	// shares its memory one way, whatever ipc and symmetric say: its check
	// names the call alone.)
	sym, why, applies := c.symmetricSupport()
	status := []byte{0}
	if sym {
		status[0] = 1
	}
	if !applies {
		status[0] = 2
	}
	check := call
	if c.Opts.Device == "cuda" {
		check = fmt.Sprintf("%s (ipc %s, symmetric %s)", call, o.IPC, o.Symmetric)
	}
	all, err := c.Collective(ctx, check, append(status, why...))
	if err != nil {
		return nil, err
	}
	if err := resolveSharing(&o, all); err != nil {
		return nil, fmt.Errorf("rank %d: %s: %w", c.RankID(), call, err)
	}
	w, err := c.Rank.NewWindow(ctx, o)
	if err != nil {
		return nil, err
	}
	c.windows = append(c.windows, w)
	return w, nil
}

// FreeWindow is collective.
func (c *Comm) FreeWindow(ctx context.Context, w *window.Window) error {
	if w.Freed() {
		return &window.ErrFreed{What: fmt.Sprintf("window %d", w.ID())}
	}
	// The meeting waits for the other ranks as long as the window's waits
	// may (its timeout), or the job's --timeout when that is longer.
	ctx = bootstrap.WithCallTimeoutAtLeast(ctx, w.Options().Timeout)
	if _, err := c.Collective(ctx, fmt.Sprintf("window %d:free()", w.ID()), nil); err != nil {
		return err
	}
	return w.Free(ctx)
}

// NewBuffer allocates a local buffer.
func (c *Comm) NewBuffer(n uint64) (*window.Buffer, error) {
	b, err := c.Rank.NewBuffer(n)
	if err != nil {
		return nil, err
	}
	c.buffers = append(c.buffers, b)
	return b, nil
}

// Sync waits for the rank's stream.
func (c *Comm) Sync(ctx context.Context) error { return c.Rank.Sync(ctx) }

// leaver is a Conn that can say why a rank leaves early.
type leaver interface{ Leave(why string) error }

// Leave ends this rank early on purpose, without failing the job (the
// script called os.exit(0)): nothing is waited for, windows are released
// without meeting the others, and a collective the others start later
// fails naming why.
func (c *Comm) Leave(why string) error {
	c.leaving = why
	return c.Close(nil)
}

// Close tears the rank down. With cause == nil it is a clean goodbye: it
// syncs the stream and says goodbye to the bootstrap. Otherwise it tells
// every other rank that this one failed with cause. Every window and buffer
// is released either way.
func (c *Comm) Close(cause error) error {
	if c.closed {
		return nil
	}
	c.closed = true
	var err error
	if c.Rank != nil {
		if cause == nil && c.leaving == "" {
			err = c.Rank.Stream.Sync(context.Background())
		}
		// End any wait still queued, and let the stream drain.
		c.Rank.Stream.Interrupt(errors.New("rank is shutting down"))
		dctx, cancel := context.WithTimeout(context.Background(), c.Opts.Timeout)
		_ = c.Rank.Stream.Sync(dctx)
		cancel()
	}
	if cause == nil && err != nil {
		cause = err
	}
	if perr := c.endProfile(); perr != nil && err == nil && cause == nil {
		err = perr
	}
	if c.trace != nil {
		// Before the stream closes: the trace reads its stamps.
		if terr := c.endTrace(cause); terr != nil && err == nil && cause == nil {
			err = terr
		}
	}
	live := 0
	for _, w := range c.windows {
		if !w.Freed() {
			live++
		}
	}
	if cause == nil && live > 0 && c.leaving == "" {
		// Windows the script did not free: meet, drop the peer mappings,
		// meet again, so that nobody frees memory a peer still maps.
		// No per-call timeout: the others may still be running their scripts.
		bctx, cancel := context.WithCancel(bootstrap.AtScriptEnd(bootstrap.WithoutCallTimeout(context.Background())))
		if berr := c.Boot.Barrier(bctx); berr == nil {
			for _, w := range c.windows {
				w.Raw().UnmapPeers()
			}
			_ = c.Boot.Barrier(bctx)
		}
		cancel()
	}
	for _, w := range c.windows {
		w.Release()
	}
	for _, b := range c.buffers {
		b.Release()
	}
	if c.Rank != nil {
		c.Rank.Stream.Close()
	}
	if c.Net != nil {
		if nerr := c.Net.Close(); nerr != nil && err == nil && cause == nil {
			err = nerr
		}
	}
	if c.Backend != nil {
		_ = c.Backend.Close()
	}
	if cause != nil {
		c.Boot.Fail(cause.Error())
	}
	var cerr error
	if l, ok := c.Boot.(leaver); ok && c.leaving != "" && cause == nil {
		cerr = l.Leave(c.leaving)
	} else {
		cerr = c.Boot.Close()
	}
	if cerr != nil && err == nil && cause == nil {
		err = cerr
	}
	return err
}

// errJobGivenUp ends a rank's joining when its launcher closed the join
// pipe (launch.EnvJoinFD): a rank failed before every rank joined.
var errJobGivenUp = errors.New("bootstrap: the launcher gave up on the job while this rank was joining it: " +
	"a rank failed before every rank joined (the launcher says which)")

// watchJoin returns ctx, cancelled with errJobGivenUp once the join pipe
// at fd (none where fd is 0) ends, and the function that stops watching
// it and closes it. It waits in poll(2), beside a pipe of its own that
// stop wakes: the join pipe's file description is every rank's, so its
// blocking mode is not this process's to set (a rank that made it
// non-blocking for Go's poller could find it made blocking again by the
// launcher's next start of a rank, and a Read that Close cannot end).
func watchJoin(ctx context.Context, fd int) (context.Context, func()) {
	var wake [2]int
	if fd <= 0 {
		return ctx, func() {}
	}
	if unix.Pipe2(wake[:], unix.O_CLOEXEC) != nil {
		return ctx, func() { _ = unix.Close(fd) } // unwatched, but not left open
	}
	jctx, cancel := context.WithCancelCause(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}, {Fd: int32(wake[0]), Events: unix.POLLIN}}
		for {
			if _, err := unix.Poll(fds, -1); err == unix.EINTR {
				continue
			} else if err != nil {
				return
			}
			if fds[1].Revents != 0 {
				return // stop
			}
			if fds[0].Revents != 0 {
				cancel(errJobGivenUp) // EOF: the launcher closed its end
				return
			}
		}
	}()
	return jctx, func() {
		_, _ = unix.Write(wake[1], []byte{0})
		<-done
		_ = unix.Close(fd)
		_ = unix.Close(wake[0])
		_ = unix.Close(wake[1])
		cancel(nil)
	}
}

// listenerFromInheritedFD turns the socket our launcher passed to rank 0
// into a listener.
func listenerFromInheritedFD(fd int) (net.Listener, error) {
	f := os.NewFile(uintptr(fd), "luacoll-rendezvous")
	if f == nil {
		return nil, fmt.Errorf("inherited listener fd %d is not open", fd)
	}
	defer f.Close()
	l, err := net.FileListener(f)
	if err != nil {
		return nil, fmt.Errorf("inherited listener fd %d: %w", fd, err)
	}
	return l, nil
}

// gpuShared reports whether another rank of the job uses this rank's GPU
// (same host, same device).
func gpuShared(topo *transport.Topology) bool {
	me := topo.Idents[topo.Rank]
	for r, id := range topo.Idents {
		if r != topo.Rank && id.Host == me.Host && id.Device == me.Device {
			return true
		}
	}
	return false
}
