package window

import (
	"context"
	"strconv"
	"time"

	"github.com/luacoll/luacoll/transport"
)

// Rank is one rank's view of the job: what windows and buffers are made of.
type Rank struct {
	Ex      transport.Exchanger
	Topo    *transport.Topology
	Backend transport.Backend
	Stream  transport.Stream
	Abort   *transport.Abort
	// Net reaches the peers that Topo puts on the network (nil: none can
	// be reached; windows fail when the topology has such peers).
	Net transport.Network
	// Site, when set, returns the caller's position in the script, recorded
	// with each enqueued wait so that its error points at the script.
	Site func() Site
	// Context, when set, bounds the synchronous calls of buffers (which
	// wait for the stream first), so that an interrupt ends them.
	Context func() context.Context
	// Trace, when set, records every window operation and sync.
	Trace Recorder
	// MemInfo is where host buffers read MemAvailable before allocating
	// (/proc/meminfo when empty; tests point it elsewhere).
	MemInfo string

	nextWindow int
	// of is the rank a view stands for (Raw.OnStream); nil for a rank.
	of *Rank
}

// root is the rank r is, or stands for.
func (r *Rank) root() *Rank {
	if r.of != nil {
		return r.of
	}
	return r
}

// ID returns this rank's index.
func (r *Rank) ID() int { return r.Ex.Rank() }

// N returns the number of ranks.
func (r *Rank) N() int { return r.Ex.Size() }

func (r *Rank) site() Site {
	if r.Site == nil {
		return Site{}
	}
	return r.Site()
}

// Site is a position in a script. It is kept unformatted: a wait records
// one each time, and its text is needed only for an error.
type Site struct {
	File string
	Line int // < 0: unknown
}

// String is "file:line", "file" without a line, or "" for no site.
func (s Site) String() string {
	switch {
	case s.File == "":
		return ""
	case s.Line < 0:
		return s.File
	}
	return s.File + ":" + strconv.Itoa(s.Line)
}

func (r *Rank) ctx() context.Context {
	if r.Context == nil {
		return context.Background()
	}
	return r.Context()
}

// Stopped reports why a long run of enqueues should end now (nil while
// it may go on): the job's abort, the end of the running call's context
// (an interrupt), or an operation of the stream that failed. The stream
// is synced first, so the error is the one its Sync reports (a failed
// wait's, naming the wait) when there is one, else the reason. It costs
// a few atomic loads when nothing stopped.
func (r *Rank) Stopped() error {
	root := r.root()
	var why error
	if root.Abort != nil {
		why = root.Abort.Err()
	}
	ctx := r.ctx()
	if why == nil && ctx.Err() != nil {
		why = context.Cause(ctx)
	}
	if f, ok := r.Stream.(transport.Failer); ok && why == nil {
		why = f.Failed()
	}
	if why == nil {
		return nil
	}
	// What was enqueued before ends at once now (it is skipped after an
	// error, its waits end on the abort or interrupt).
	sctx, cancel := context.WithTimeout(context.Background(), stopSyncLimit)
	defer cancel()
	if err := r.Sync(sctx); err != nil {
		return err
	}
	return why
}

// stopSyncLimit bounds Stopped's sync: a stream that does not drain by
// then is reported with the reason alone.
const stopSyncLimit = time.Second

// Sync waits for everything enqueued on the rank's stream.
func (r *Rank) Sync(ctx context.Context) error {
	if r.Trace == nil {
		return r.Stream.Sync(ctx)
	}
	start := time.Now()
	err := r.Stream.Sync(ctx)
	r.Trace.Sync(start, err)
	return err
}

// Options configure a window.
type Options struct {
	Bytes    uint64
	Signals  int
	Counters int
	Barriers int
	Timeout  time.Duration
	Path     string // "auto", "ce" or "sm" (CUDA); "" means "auto"
	// IPC is how a CUDA window's memory is shared with the peers:
	// "legacy" (CUDA IPC handles) or "vmm" (cuMemCreate memory passed as
	// file descriptors); "" and "auto" mean "legacy" here (the engine
	// resolves "auto" to the job's --ipc first). Host windows ignore it.
	IPC string
	// Symmetric asks for a symmetric CUDA window, every rank's part mapped
	// in one reserved range at base + rank*stride: "on", "off", or "auto"
	// and "" (symmetric wherever every rank can map one).
	Symmetric string
	// SymmetricWhy is set by the engine: why the window is, or is not,
	// symmetric.
	SymmetricWhy string
}

// DefaultOptions are the contract's defaults.
func DefaultOptions() Options {
	return Options{Signals: 8, Counters: 8, Barriers: 4, Timeout: 10 * time.Second, Path: "auto", IPC: "auto", Symmetric: "auto"}
}

// Limits on window options.
const (
	MaxSlots = 1 << 16
	MaxBytes = 1 << 40
)

// Validate checks the options and names the first bad one.
func (o Options) Validate() error {
	if o.Bytes > MaxBytes {
		return argErr("bytes", "%d is larger than the limit %d", o.Bytes, uint64(MaxBytes))
	}
	for _, c := range []struct {
		name string
		v    int
		min  int
	}{{"signals", o.Signals, 1}, {"counters", o.Counters, 1}, {"barriers", o.Barriers, 1}} {
		if c.v < c.min || c.v > MaxSlots {
			return argErr(c.name, "%d is outside %d..%d", c.v, c.min, MaxSlots)
		}
	}
	if o.Timeout <= 0 {
		return argErr("timeout_ms", "must be positive")
	}
	switch o.Path {
	case "", "auto", "ce", "sm":
	default:
		return argErr("path", "unknown path %q (want auto, ce or sm)", o.Path)
	}
	switch o.IPC {
	case "", "auto", transport.IPCLegacy, transport.IPCVMM, transport.IPCSymmetric:
	default:
		return argErr("ipc", "unknown value %q (want auto, legacy or vmm)", o.IPC)
	}
	switch o.Symmetric {
	case "", "auto", "on", "off":
	default:
		return argErr("symmetric", "unknown value %q (want true, false or \"auto\")", o.Symmetric)
	}
	return nil
}
