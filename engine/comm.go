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

	"github.com/luacoll/luacoll/transport"
	tcuda "github.com/luacoll/luacoll/transport/cuda"
	tnet "github.com/luacoll/luacoll/transport/net"
	"github.com/luacoll/luacoll/transport/shm"
	"github.com/luacoll/luacoll/window"
)

// Options configure a rank's Comm.
type Options struct {
	Device  string        // "host" (default) or "cuda"
	Timeout time.Duration // deadline of bootstrap calls and the default window timeout
	GPUs    []int         // CUDA devices to use, indexed by local rank (empty: local rank modulo count)
	// CPUBind is CPUBindAuto, CPUBindSpread or CPUBindNone ("": none).
	// Binding is per process: ranks that share one never bind.
	CPUBind string
	// IPC is how CUDA windows that ask for "auto" share their memory:
	// transport.IPCLegacy ("" too) or transport.IPCVMM.
	IPC string
	// Backend, when set, is used instead of opening one for Device (tests).
	Backend func(env RankEnv, job string) (transport.Backend, error)
}

// Comm is one rank's world: its place in the job, the bootstrap, the
// backend, the stream, and every window and buffer it made.
type Comm struct {
	Env     RankEnv
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

	collSeq int
	// agActive is each window's live persistent all-gather (one at most).
	agMu     sync.Mutex
	agActive map[*window.Window]*AllGather
	windows  []*window.Window
	buffers  []*window.Buffer
	closed   bool
}

// Conn is what a Comm needs of the bootstrap: the exchange, and the way to
// report a failure and say goodbye. *Bootstrap implements it; tests use an
// in-process one.
type Conn interface {
	transport.Exchanger
	Fail(reason string)
	Close() error
}

// CUDABackend opens the CUDA backend; the cuda-enabled build sets it.
type CUDABackend func(env RankEnv, job string, gpus []int) (transport.Backend, error)

// Open connects this rank to the job and prepares its backend.
func Open(ctx context.Context, env RankEnv, opts Options, cudaOpen CUDABackend) (*Comm, error) {
	if opts.Timeout <= 0 {
		opts.Timeout = 10 * time.Second
	}
	if opts.Device == "" {
		opts.Device = "host"
	}
	abort := transport.NewAbort()
	cfg := BootstrapConfig{Rank: env.Rank, Size: env.Size, Addr: env.Addr, JobID: env.JobID,
		Timeout: opts.Timeout, Abort: abort, Host: transport.LocalIdentity("").Host, Secret: JobSecret(os.Getenv)}
	if env.ListenFD > 0 && env.Rank == 0 {
		l, err := listenerFromInheritedFD(env.ListenFD)
		if err != nil {
			return nil, fmt.Errorf("rank %d: %w", env.Rank, err)
		}
		cfg.Listener = l
	}
	boot, err := Connect(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("rank %d: bootstrap: %w", env.Rank, err)
	}
	if env.JobID == "" {
		env.JobID = boot.JobID()
	}
	return OpenWith(ctx, env, opts, boot, abort, cudaOpen)
}

// OpenWith builds a Comm over an existing connection (abort is the flag
// the connection sets when a peer fails).
func OpenWith(ctx context.Context, env RankEnv, opts Options, boot Conn, abort *transport.Abort, cudaOpen CUDABackend) (*Comm, error) {
	if opts.Timeout <= 0 {
		opts.Timeout = 10 * time.Second
	}
	if opts.Device == "" {
		opts.Device = "host"
	}
	c := &Comm{Env: env, Opts: opts, Boot: boot, Abort: abort}
	var be transport.Backend
	err := CheckCPUBind(opts.CPUBind)
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
		boot.Fail(cerr.Error())
		_ = boot.Close()
		return nil, cerr
	}
	c.Backend = be
	if err := c.bindCPUs(ctx); err != nil {
		c.Close(err)
		return nil, fmt.Errorf("rank %d: %w", env.Rank, err)
	}
	topo, err := transport.Discover(ctx, boot, be.Identity(), be.GPUPeer, os.Getenv(transport.OverrideEnv))
	if err != nil {
		c.Close(err)
		return nil, fmt.Errorf("rank %d: %w", env.Rank, err)
	}
	if p, ok := be.(tcuda.Prelauncher); ok {
		p.SetPrelaunch(tcuda.PrelaunchDefault(gpuShared(topo)))
	}
	st, err := be.NewStream(abort)
	if err != nil {
		c.Close(err)
		return nil, fmt.Errorf("rank %d: stream: %w", env.Rank, err)
	}
	c.Rank = &window.Rank{Ex: boot, Topo: topo, Backend: be, Stream: st, Abort: abort}
	if topo.AnyNet() {
		// Opened (UCX loaded) by the first window that needs it.
		c.Net = tnet.New(env.Rank, env.Size)
		c.Rank.Net = c.Net
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

// MismatchError is a collective called differently on different ranks.
type MismatchError struct {
	Seq   int
	Calls []string // per rank
}

func (e *MismatchError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "collective call #%d differs across ranks:", e.Seq)
	groups := map[string][]int{}
	var order []string
	for r, c := range e.Calls {
		if _, ok := groups[c]; !ok {
			order = append(order, c)
		}
		groups[c] = append(groups[c], r)
	}
	for _, c := range order {
		fmt.Fprintf(&b, " ranks %s called %s;", rankList(groups[c]), c)
	}
	return strings.TrimSuffix(b.String(), ";")
}

func rankList(rs []int) string {
	s := make([]string, len(rs))
	for i, r := range rs {
		s[i] = fmt.Sprint(r)
	}
	return strings.Join(s, ",")
}

// Collective is the entry of every collective call: it exchanges a hash of
// call (its name and arguments) with every rank together with data, and
// returns everyone's data, or a MismatchError on every rank when the calls
// differ.
func (c *Comm) Collective(ctx context.Context, call string, data []byte) ([][]byte, error) {
	return c.checked(ctx, call, data, false)
}

// checked exchanges call+data; with statusOnly, non-empty data is an error
// message of that rank and any such message fails every rank.
func (c *Comm) checked(ctx context.Context, call string, data []byte, statusOnly bool) ([][]byte, error) {
	c.collSeq++
	sum := sha256.Sum256([]byte(call))
	var msg bytes.Buffer
	msg.Write(sum[:8])
	_ = binary.Write(&msg, binary.LittleEndian, uint32(len(call)))
	msg.WriteString(call)
	msg.Write(data)
	all, err := c.Boot.AllGather(ctx, msg.Bytes())
	if err != nil {
		return nil, fmt.Errorf("rank %d: %s: %w", c.Env.Rank, call, err)
	}
	out := make([][]byte, len(all))
	calls := make([]string, len(all))
	mismatch := false
	for r, m := range all {
		if len(m) < 12 {
			return nil, fmt.Errorf("rank %d: %s: short message from rank %d", c.Env.Rank, call, r)
		}
		n := binary.LittleEndian.Uint32(m[8:12])
		if uint64(len(m)) < 12+uint64(n) {
			return nil, fmt.Errorf("rank %d: %s: short message from rank %d", c.Env.Rank, call, r)
		}
		calls[r] = string(m[12 : 12+n])
		out[r] = m[12+n:]
		if !bytes.Equal(m[:8], sum[:8]) {
			mismatch = true
		}
	}
	if mismatch {
		return nil, &MismatchError{Seq: c.collSeq, Calls: calls}
	}
	if statusOnly {
		var msgs []string
		for r, d := range out {
			if len(d) > 0 {
				msgs = append(msgs, fmt.Sprintf("rank %d: %s", r, d))
			}
		}
		if len(msgs) > 0 {
			return nil, fmt.Errorf("%s failed: %s", call, strings.Join(msgs, "; "))
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
		o.IPC = transport.IPCLegacy
	}
	// The way the memory is shared, as resolved from each rank's --ipc,
	// must agree too: the two ways exchange different things.
	if _, err := c.Collective(ctx, fmt.Sprintf("%s (ipc %s)", call, o.IPC), nil); err != nil {
		return nil, err
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
		if cause == nil {
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
	live := 0
	for _, w := range c.windows {
		if !w.Freed() {
			live++
		}
	}
	if cause == nil && live > 0 {
		// Windows the script did not free: meet, drop the peer mappings,
		// meet again, so that nobody frees memory a peer still maps.
		// No per-call timeout: the others may still be running their scripts.
		bctx, cancel := context.WithCancel(WithoutCallTimeout(context.Background()))
		if berr := c.Boot.Barrier(bctx); berr == nil {
			for _, w := range c.windows {
				w.UnmapPeers()
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
	if cerr := c.Boot.Close(); cerr != nil && err == nil && cause == nil {
		err = cerr
	}
	return err
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
