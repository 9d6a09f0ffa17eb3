package luabind

import (
	"fmt"
	"github.com/luacoll/luacoll/engine/plan"
	"math"
	"strings"
	"time"

	lua "github.com/yuin/gopher-lua"

	"github.com/luacoll/luacoll/transport"
	"github.com/luacoll/luacoll/window"
)

var windowKeys = []string{"bytes", "signals", "counters", "barriers", "timeout_ms", "path", "ipc", "symmetric"}

func newWindow(c *call) int {
	L := c.L
	t := c.tableArg(0, windowKeys, "lc.window{bytes = 1024}", false)
	o := window.DefaultOptions()
	o.Timeout = c.s.Comm.Opts.Timeout
	if o.Timeout <= 0 {
		o.Timeout = 10 * time.Second
	}
	field := func(name string) (int64, bool) {
		v := L.GetField(t, name)
		if v == lua.LNil {
			return 0, false
		}
		n, ok := v.(lua.LNumber)
		if !ok {
			c.fail("bad argument '%s' (integer expected, got %s)", name, v.Type())
		}
		f := float64(n)
		if f != float64(int64(f)) || f > MaxExact || f < 0 {
			c.fail("bad argument '%s' (a non-negative integer up to 2^53 expected, got %v)", name, f)
		}
		return int64(f), true
	}
	b, ok := field("bytes")
	if !ok {
		c.fail("bad argument 'bytes' (required: the size of each rank's data buffer)")
	}
	o.Bytes = uint64(b)
	if v, ok := field("signals"); ok {
		o.Signals = int(v)
	}
	if v, ok := field("counters"); ok {
		o.Counters = int(v)
	}
	if v, ok := field("barriers"); ok {
		o.Barriers = int(v)
	}
	if v, ok := field("timeout_ms"); ok {
		const maxMs = int64(math.MaxInt64 / int64(time.Millisecond))
		if v == 0 || v > maxMs {
			c.fail("bad argument 'timeout_ms' (%d: want 1..%d)", v, maxMs)
		}
		o.Timeout = time.Duration(v) * time.Millisecond
	}
	for _, f := range []struct {
		name string
		dst  *string
	}{{"path", &o.Path}, {"ipc", &o.IPC}} {
		if v := L.GetField(t, f.name); v != lua.LNil {
			s, ok := v.(lua.LString)
			if !ok {
				c.fail("bad argument '%s' (string expected, got %s)", f.name, v.Type())
			}
			*f.dst = string(s)
		}
	}
	switch v := L.GetField(t, "symmetric").(type) {
	case *lua.LNilType:
	case lua.LBool:
		o.Symmetric = map[bool]string{true: "on", false: "off"}[bool(v)]
	case lua.LString:
		if v != "auto" {
			c.fail("bad argument 'symmetric' (true, false or \"auto\" expected, got %q)", string(v))
		}
		o.Symmetric = "auto"
	default:
		c.fail("bad argument 'symmetric' (true, false or \"auto\" expected, got %s)", v.Type())
	}
	if o.IPC == "symmetric" {
		c.fail("bad argument 'ipc' (unknown value \"symmetric\" (want auto, legacy or vmm; symmetric = true asks for a symmetric window))")
	}
	c.check(o.Validate())
	desc := fmt.Sprintf("lc.window{bytes=%d, signals=%d, counters=%d, barriers=%d, timeout_ms=%d, path=%q, ipc=%q, symmetric=%q}",
		o.Bytes, o.Signals, o.Counters, o.Barriers, o.Timeout.Milliseconds(), o.Path, o.IPC, o.Symmetric)
	w, err := c.s.Comm.NewWindow(c.ctx(), desc, o)
	c.check(err)
	c.s.push(&windowRef{w: w, call: desc}, "w")
	return 1
}

func (c *call) win() *window.Window {
	r := c.L.Get(1).(*lua.LUserData).Value.(*windowRef)
	if r.w.Freed() {
		c.fail("window %d has been freed", r.w.ID())
	}
	return r.w
}

// sigSlot is argument i, a signal slot of w; a slot that a live
// persistent all-gather owns is refused (the script's signals and waits
// there would corrupt its tags).
func (c *call) sigSlot(w *window.Window, i int) int {
	id := c.index(i)
	if sig, _, ok := c.s.Comm.ReservedSlots(w); ok && id == sig {
		c.reserved(w, i, "signal", id)
	}
	return id
}

// barSlot is argument i (default def), a barrier slot of w; see sigSlot.
func (c *call) barSlot(w *window.Window, i, def int) int {
	id := c.optIndex(i, def)
	if _, bar, ok := c.s.Comm.ReservedSlots(w); ok && id == bar {
		c.reserved(w, i, "barrier", id)
	}
	return id
}

// checkReserved refuses to replay plan r where a persistent all-gather
// made after it owns a slot its ops use (one made before refused them as
// they were recorded).
func (c *call) checkReserved(r *planRef) {
	w := r.p.Window()
	sig, bar, ok := c.s.Comm.ReservedSlots(w)
	if !ok {
		return
	}
	for _, o := range r.p.Ops() {
		usesSig := o.Kind.HasSignal() || o.Kind == plan.WaitSignal || o.Kind == plan.WaitSignalFrom
		usesBar := o.Kind == plan.Barrier || o.Kind == plan.BarrierPeer
		if (usesSig && o.Sig == sig) || (usesBar && o.Bar == bar) {
			what, id := "signal", sig
			if usesBar {
				what, id = "barrier", bar
			}
			c.fail("plan %d (made at %s) uses %s slot %d (op %s at %s), which the persistent all-gather on window %d made after it owns until ag:destroy()",
				r.num, r.site, what, id, o.Kind, o.Site, w.ID())
		}
	}
}

func (c *call) reserved(w *window.Window, i int, what string, id int) {
	free := "none"
	if id > 0 {
		free = fmt.Sprintf("0..%d", id-1)
	}
	c.fail("bad argument '%s' (%s slot %d is reserved by the persistent all-gather on window %d until ag:destroy(); free slots: %s)",
		c.argName(i), what, id, w.ID(), free)
}

func (c *call) transfer() window.Transfer {
	return window.Transfer{Peer: c.index(0), PeerOff: c.u64(1), Local: c.buffer(2), LocalOff: c.u64(3), N: c.u64(4)}
}

// windowEntries are the w:* methods of a window.
func windowEntries() []*Entry {
	return concatEntries(windowDataEntries(), windowSignalCounterEntries(), windowSyncEntries(),
		windowInfoEntries(), windowFreeEntries())
}

// windowDataEntries are the window's data buffer and the puts and gets
// that move it.
func windowDataEntries() []*Entry {
	const g = "Windows"
	return []*Entry{
		fn("w:buffer", "()", "buffer", g, "The local data buffer as a buffer view (same methods as a buffer; free the window, not the view).", func(c *call) int {
			c.s.push(&bufferRef{b: c.win().Buffer()}, "b")
			return 1
		}),
		fn("w:size", "()", "integer", g, "The data buffer's size in bytes.", func(c *call) int {
			c.L.Push(lua.LNumber(c.win().Options().Bytes))
			return 1
		}),
		fn("w:put", "(peer, dst_off, src, src_off, n)", "", g, "Enqueues a copy of n bytes from local src (a buffer or this window) into peer's data buffer at dst_off (from this window to itself, the two ranges must not overlap).", func(c *call) int {
			w := c.win()
			c.check(w.Put(c.transfer()))
			return 0
		}),
		fn("w:get", "(peer, src_off, dst, dst_off, n)", "", g, "Enqueues a copy of n bytes from peer's data buffer at src_off into local dst (from this window to itself, the two ranges must not overlap).", func(c *call) int {
			w := c.win()
			c.check(w.Get(c.transfer()))
			return 0
		}),
		fn("w:put_signal", "(peer, dst_off, src, src_off, n, sig, value=1, op=\"add\")", "", g, "A put, then signal slot sig on peer (op \"add\" or \"set\"); the peer never sees the signal before the data.", func(c *call) int {
			w := c.win()
			t := c.transfer()
			sig := &window.Sig{ID: c.sigSlot(w, 5), Value: c.optU64(6, 1), Op: c.sigOp(7, "add")}
			c.check(w.PutSignal(t, sig, nil))
			c.s.plans.noteSignal(w, t.Peer, sig.ID, sig.Op, sig.Value)
			return 0
		}),
		fn("w:put_counter", "(peer, dst_off, src, src_off, n, ctr, value=1)", "", g, "A put, then adds value to the local counter ctr for peer once the source may be reused (local completion).", func(c *call) int {
			w := c.win()
			t := c.transfer()
			ctr := &window.Ctr{ID: c.index(5), Value: c.optU64(6, 1)}
			c.check(w.PutSignal(t, nil, ctr))
			c.s.plans.noteCounter(w, t.Peer, ctr.ID, ctr.Value, false)
			return 0
		}),
		fn("w:put_signal_counter", "(peer, dst_off, src, src_off, n, sig, sval, ctr, cval)", "", g, "A put with both a signal (add sval to slot sig on peer) and a local-completion counter (add cval to counter ctr).", func(c *call) int {
			w := c.win()
			t := c.transfer()
			sig := &window.Sig{ID: c.sigSlot(w, 5), Value: c.u64(6)}
			ctr := &window.Ctr{ID: c.index(7), Value: c.u64(8)}
			c.check(w.PutSignal(t, sig, ctr))
			c.s.plans.noteSignal(w, t.Peer, sig.ID, sig.Op, sig.Value)
			c.s.plans.noteCounter(w, t.Peer, ctr.ID, ctr.Value, false)
			return 0
		}),
	}
}

// windowSignalCounterEntries signal, wait on, read and reset a window's
// signal slots and counters.
func windowSignalCounterEntries() []*Entry {
	const g = "Windows"
	return []*Entry{
		fn("w:signal", "(peer, sig, op=\"add\", value=1)", "", g, "Writes this rank's row of peer's inbox, slot sig: op \"add\" adds value, \"set\" stores it.", func(c *call) int {
			w := c.win()
			peer, sig := c.index(0), c.sigSlot(w, 1)
			op := c.sigOp(2, "add")
			v := c.optU64(3, 1)
			c.check(w.Signal(peer, window.Sig{ID: sig, Op: op, Value: v}))
			c.s.plans.noteSignal(w, peer, sig, op, v)
			return 0
		}),
		fn("w:signal_all", "(sig, op=\"add\", value=1)", "", g, "Signals every other rank once.", func(c *call) int {
			w := c.win()
			sig := c.sigSlot(w, 0)
			op := c.sigOp(1, "add")
			v := c.optU64(2, 1)
			c.check(w.SignalAll(window.Sig{ID: sig, Op: op, Value: v}))
			for p := 0; p < w.Rank().N(); p++ {
				if p != w.Rank().ID() {
					c.s.plans.noteSignal(w, p, sig, op, v)
				}
			}
			return 0
		}),
		fn("w:wait_signal", "(sig, cmp, value)", "", g, "Enqueues a wait until the sum over all peers' rows of slot sig satisfies `sum cmp value` (cmp: ==, ~=, <, <=, >, >= or eq, ne, lt, le, gt, ge).", func(c *call) int {
			w := c.win()
			c.check(w.WaitSignal(c.sigSlot(w, 0), c.cmp(1), c.u64(2)))
			return 0
		}),
		fn("w:wait_signal_from", "(peer, sig, cmp, value)", "", g, "Enqueues a wait on one peer's row of slot sig only.", func(c *call) int {
			w := c.win()
			c.check(w.WaitSignalFrom(c.index(0), c.sigSlot(w, 1), c.cmp(2), c.u64(3)))
			return 0
		}),
		fn("w:read_signal", "(sig)", "integer", g, "The current sum over all peers of slot sig, now.", func(c *call) int {
			v, err := c.win().ReadSignal(c.index(0))
			c.check(err)
			c.pushU64(v)
			return 1
		}),
		fn("w:read_signal_from", "(peer, sig)", "integer", g, "The current value of peer's row of slot sig, now.", func(c *call) int {
			v, err := c.win().ReadSignalFrom(c.index(0), c.index(1))
			c.check(err)
			c.pushU64(v)
			return 1
		}),
		fn("w:wait_counter", "(peer, ctr, cmp, value)", "", g, "Enqueues a wait until local counter ctr for peer satisfies `counter cmp value`.", func(c *call) int {
			w := c.win()
			c.check(w.WaitCounter(c.index(0), c.index(1), c.cmp(2), c.u64(3)))
			return 0
		}),
		fn("w:read_counter", "(peer, ctr)", "integer", g, "The current value of local counter ctr for peer, now.", func(c *call) int {
			v, err := c.win().ReadCounter(c.index(0), c.index(1))
			c.check(err)
			c.pushU64(v)
			return 1
		}),
		fn("w:reset_counter", "(peer, ctr)", "", g, "Enqueues a reset of local counter ctr for peer to zero.", func(c *call) int {
			w := c.win()
			peer, ctr := c.index(0), c.index(1)
			c.check(w.ResetCounter(peer, ctr))
			c.s.plans.noteCounter(w, peer, ctr, 0, true)
			return 0
		}),
		fn("w:reset_signals", "()", "", g, "Enqueues zeroing of this rank's whole inbox (the caller guarantees that no peer is signalling it). Refused while a persistent all-gather owns a slot of the window. Plans recorded on the window before it no longer run or verify (their waits count from the values it wipes): record them again.", func(c *call) int {
			w := c.win()
			if sig, _, ok := c.s.Comm.ReservedSlots(w); ok {
				c.fail("the persistent all-gather on window %d owns signal slot %d until ag:destroy(): resetting the inbox would corrupt it", w.ID(), sig)
			}
			c.check(w.ResetSignals())
			c.s.plans.noteReset(w, strings.TrimSuffix(c.L.Where(1), ":"))
			return 0
		}),
	}
}

// windowSyncEntries are a window's barriers, fence, flush and sync.
func windowSyncEntries() []*Entry {
	const g = "Windows"
	return []*Entry{
		fn("w:barrier", "(id=0)", "", g, "Enqueues a barrier of all ranks of the window on slot id; slots are monotonic, so a slot can be reused any number of times.", func(c *call) int {
			w := c.win()
			c.check(w.Barrier(c.barSlot(w, 0, 0)))
			return 0
		}),
		fn("w:barrier_peer", "(peer, id=0)", "", g, "Enqueues a pairwise barrier with peer on slot id.", func(c *call) int {
			w := c.win()
			c.check(w.BarrierPeer(c.index(0), c.barSlot(w, 1, 0)))
			return 0
		}),
		fn("w:fence", "()", "", g, "Later signals are ordered after every earlier put, on every transport (where a network reaches a peer, a fence waits for earlier puts to complete, as a flush: the network orders operations per peer only).", func(c *call) int {
			c.check(c.win().Fence())
			return 0
		}),
		fn("w:flush", "()", "", g, "Later operations start after every earlier put has completed locally (sources reusable); a put to a network peer, at the peer.", func(c *call) int {
			c.check(c.win().Flush())
			return 0
		}),
		fn("w:sync", "()", "", g, "Blocks until everything enqueued on this rank's stream has completed; raises the first error (a wait's timeout, say).", func(c *call) int {
			c.check(c.win().Sync(c.ctx()))
			return 0
		}),
	}
}

// windowInfoEntries are w:transport and w:info.
func windowInfoEntries() []*Entry {
	const g = "Windows"
	return []*Entry{
		fn("w:transport", "(peer)", "string[, string]", g, "How peer is reached: \"self\", \"shm\", \"nvl\" or \"net\"; for \"net\" a second value names what carries it (\"ucx: tcp/eth0\").", func(c *call) int {
			peer := c.index(0)
			s, err := c.win().Transport(peer)
			c.check(err)
			c.L.Push(lua.LString(s))
			via, err := c.win().TransportVia(peer)
			c.check(err)
			if via == "" {
				return 1
			}
			c.L.Push(lua.LString(via))
			return 2
		}),
		fn("w:info", "()", "table", g, "What the window is: {bytes, signals, counters, barriers, timeout_ms, path, ipc, mode = \"symmetric\" or \"asymmetric\", why, memory = \"host\", \"device\" or \"host, mapped by the device\" (CUDA with network peers: the host runs their operations), and when symmetric base, stride, granularity}.", func(c *call) int {
			w := c.win()
			o := w.Options()
			t := c.L.NewTable()
			set := func(k string, v lua.LValue) { c.L.SetField(t, k, v) }
			set("bytes", lua.LNumber(o.Bytes))
			set("signals", lua.LNumber(o.Signals))
			set("counters", lua.LNumber(o.Counters))
			set("barriers", lua.LNumber(o.Barriers))
			set("timeout_ms", lua.LNumber(o.Timeout.Milliseconds()))
			set("path", lua.LString(o.Path))
			set("ipc", lua.LString(o.IPC))
			set("why", lua.LString(o.SymmetricWhy))
			set("memory", lua.LString(w.Memory()))
			if f := w.Raw().Flat(); f != nil {
				set("mode", lua.LString("symmetric"))
				set("ipc", lua.LString(transport.IPCVMM))
				set("base", lua.LNumber(float64(f.Base)))
				set("stride", lua.LNumber(float64(f.Stride)))
				set("granularity", lua.LNumber(float64(f.Granularity)))
			} else {
				set("mode", lua.LString("asymmetric"))
			}
			c.L.Push(t)
			return 1
		}),
	}
}

// windowFreeEntries is w:free.
func windowFreeEntries() []*Entry {
	const g = "Windows"
	return []*Entry{
		fn("w:free", "()", "", g, "**collective**: waits for the stream, meets every rank and releases the window; any later use is an error. The meeting waits for the other ranks up to the window's timeout_ms, or the job's --timeout when that is longer; a rank that does not arrive in time fails the job.", func(c *call) int {
			r := c.L.Get(1).(*lua.LUserData).Value.(*windowRef)
			c.check(c.s.Comm.FreeWindow(c.ctx(), r.w))
			return 0
		}),
	}
}
