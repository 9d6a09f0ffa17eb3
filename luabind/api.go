package luabind

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"time"

	lua "github.com/yuin/gopher-lua"

	"github.com/luacoll/luacoll/engine/allgather"
	"github.com/luacoll/luacoll/engine/launch"
	"github.com/luacoll/luacoll/engine/launch/cpuset"
	"github.com/luacoll/luacoll/transport"
	"github.com/luacoll/luacoll/window"
)

// fn builds an entry whose Go function gets a checked call.
func fn(name, args, returns, group, doc string, body func(c *call) int) *Entry {
	e := &Entry{Name: name, Args: args, Returns: returns, Group: group, Doc: doc}
	if isCollective(doc) {
		e.refusal = exchangeRefusal(name)
	}
	names := argNames(args)
	maxArgs := argLimit(args, names)
	base := 1
	recv := e.Receiver()
	want := receivers[recv]
	if recv != "" {
		base = 2
	}
	e.fn = func(s *State, L *lua.LState, mt lua.LValue) int {
		c := s.takeCall()
		*c = call{s: s, L: L, e: e, base: base, names: names}
		prev := s.cur
		s.cur = L
		defer s.endCall(c, prev)
		if r := e.refusal; r != nil {
			before := r.count(c)
			defer func() {
				if p := recover(); p != nil {
					c.refuseOnRaise(r, before, p)
					panic(p)
				}
			}()
		}
		if base == 2 {
			// mt is the receiver's metatable, as install made it.
			ud, ok := L.Get(1).(*lua.LUserData)
			if !ok || ud.Metatable != mt {
				c.fail("called on %s: use %s (with a colon) on a %s", L.Get(1).Type(), e.Name, want.what)
			}
		}
		if maxArgs >= 0 {
			c.checkArgCount(maxArgs)
		}
		if s.plans.rec != nil {
			if rec := planRecording[e.Name]; rec != nil {
				return rec(c)
			}
		}
		s.checkStream(c)
		return body(c)
	}
	return e
}

// argLimit is how many arguments a call with this argument list takes:
// -1 for any number ("(fmt, ...)"), 1 for an options table.
func argLimit(args string, names []string) int {
	switch {
	case strings.Contains(args, "..."):
		return -1
	case strings.HasPrefix(strings.TrimSpace(args), "{"):
		return 1
	}
	return len(names)
}

// checkArgCount refuses arguments beyond the max the entry takes (nils at
// the end do not count: f(a, nil) is f(a)).
func (c *call) checkArgCount(max int) {
	given := c.L.GetTop() - (c.base - 1)
	for given > max && c.get(given-1) == lua.LNil {
		given--
	}
	if given <= max {
		return
	}
	switch max {
	case 0:
		c.fail("takes no arguments, got %d", given)
	case 1:
		c.fail("takes 1 argument, %s, got %d", c.e.Signature(), given)
	}
	c.fail("takes %d arguments, %s, got %d", max, c.e.Signature(), given)
}

// argNames extracts "peer", "dst_off", ... from "(peer, dst_off, src?, ...)".
func argNames(args string) []string {
	args = strings.Trim(args, "(){} ")
	if args == "" {
		return nil
	}
	var out []string
	for _, a := range strings.Split(args, ",") {
		a = strings.TrimSpace(a)
		a = strings.TrimSuffix(a, "?")
		a, _, _ = strings.Cut(a, "=")
		out = append(out, strings.TrimSpace(a))
	}
	return out
}

func (c *call) ctx() context.Context { return c.s.Ctx }

// rankEntries are the lc.* entries: the rank's fields and functions,
// then the constructors of buffers, windows and timers.
func rankEntries() []*Entry {
	return concatEntries(rankPlaceEntries(), rankCollectiveEntries(), rankLogClockSyncEntries(),
		rankInfoEntries(), constructorEntries())
}

// concatEntries joins lists of entries, keeping their order.
func concatEntries(lists ...[]*Entry) []*Entry {
	var out []*Entry
	for _, l := range lists {
		out = append(out, l...)
	}
	return out
}

// rankPlaceEntries say where this rank is: lc.rank, lc.size, the node
// fields, lc.version, lc.device and lc.nodes.
func rankPlaceEntries() []*Entry {
	const g = "Ranks"
	return []*Entry{
		{Name: "lc.rank", Field: true, Group: g, Returns: "integer", Doc: "This rank, 0..size-1."},
		{Name: "lc.size", Field: true, Group: g, Returns: "integer", Doc: "The number of ranks."},
		{Name: "lc.local_rank", Field: true, Group: g, Returns: "integer", Doc: "This rank's index on its node."},
		{Name: "lc.local_size", Field: true, Group: g, Returns: "integer", Doc: "The number of ranks on this node."},
		{Name: "lc.node", Field: true, Group: g, Returns: "integer", Doc: "This rank's node index."},
		{Name: "lc.version", Field: true, Group: g, Returns: "string", Doc: "luacoll's version."},
		fn("lc.device", "()", "string", g, `"host" or "cuda:N": where this rank's memory and stream live.`, func(c *call) int {
			c.L.Push(lua.LString(c.s.Comm.Backend.Name()))
			return 1
		}),
		fn("lc.nodes", "()", "table", g, "How the ranks group into nodes (two ranks share one when neither reaches the other over the network), from the topology every rank holds: no collective, so plans may call it. {groups = {{ranks of node 1}, ...} (nodes in the order of their lowest rank, ranks in order), node (this rank's, from 1), local_index (this rank's index in its node, from 1)}.", func(c *call) int {
			groups, node, local, _ := allgather.NodeGroups(c.s.Comm.Rank.Topo, c.s.Comm.Env.Size, c.s.Comm.Env.Rank)
			t, gs := c.L.NewTable(), c.L.NewTable()
			for _, g := range groups {
				rt := c.L.NewTable()
				for _, r := range g {
					rt.Append(lua.LNumber(r))
				}
				gs.Append(rt)
			}
			t.RawSetString("groups", gs)
			t.RawSetString("node", lua.LNumber(node+1))
			t.RawSetString("local_index", lua.LNumber(local+1))
			c.L.Push(t)
			return 1
		}),
	}
}

// rankCollectiveEntries are lc.barrier and lc.allgather.
func rankCollectiveEntries() []*Entry {
	const g = "Ranks"
	return []*Entry{
		fn("lc.barrier", "()", "", g, "**collective**: a host-side barrier over the bootstrap; it does not wait for streams. It waits for the other ranks up to the job's --timeout (no window's timeout_ms applies); a rank that does not arrive in time fails the job.", func(c *call) int {
			c.check(c.s.Comm.Barrier(c.ctx()))
			return 0
		}),
		fn("lc.allgather", "(v)", "table", g, "**collective**: gathers a small value (nil, boolean, number, string, or tables of those nested at most 16 deep) from every rank; returns a list indexed 1..size (entry r+1 is rank r's).", func(c *call) int {
			data, err := encodeValue(c.get(0), 0)
			if err != nil {
				c.badArg(0, "%v", err)
			}
			all, err := c.s.Comm.Collective(c.ctx(), "allgather(v)", data)
			c.check(err)
			out := c.L.NewTable()
			for r, d := range all {
				v, _, err := decodeValue(c.L, d, 0)
				if err != nil {
					c.fail("value from rank %d: %v", r, err)
				}
				out.RawSetInt(r+1, v)
			}
			c.L.Push(out)
			return 1
		}),
	}
}

// rankLogClockSyncEntries are lc.log, lc.now and lc.sync.
func rankLogClockSyncEntries() []*Entry {
	const g = "Ranks"
	return []*Entry{
		fn("lc.log", "(fmt, ...)", "", g, "print(string.format(fmt, ...)): each line gets the [rank] prefix print gives (none with --no-prefix).", func(c *call) int {
			L := c.L
			if _, ok := c.get(0).(lua.LString); !ok {
				if _, num := c.get(0).(lua.LNumber); !num {
					c.badArg(0, "string expected, got %s", c.get(0).Type())
				}
			}
			format := L.GetField(L.GetGlobal("string"), "format")
			n := L.GetTop()
			L.Push(format)
			for i := 1; i <= n; i++ {
				L.Push(L.Get(i))
			}
			if err := L.PCall(n, 1, nil); err != nil {
				// string.format's own error, its position left out (fail
				// gives the script's).
				msg := err.Error()
				if lerr, ok := err.(*lua.ApiError); ok {
					msg = lua.LVAsString(lerr.Object)
				}
				if k := strings.Index(msg, "bad argument"); k >= 0 {
					msg = strings.Replace(msg[k:], "to 'format' ", "", 1)
				}
				c.fail("%s", msg)
			}
			msg := L.ToString(-1)
			L.Pop(1)
			c.s.writeLines(msg)
			return 0
		}),
		fn("lc.now", "()", "number", g, "Monotonic seconds since the rank started.", func(c *call) int {
			c.L.Push(lua.LNumber(time.Since(c.s.start).Seconds()))
			return 1
		}),
		fn("lc.sync", "()", "", g, "Waits until everything enqueued on this rank's stream (every window, timers) has completed; raises the first error any of it hit.", func(c *call) int {
			c.check(c.s.Comm.Sync(c.ctx()))
			return 0
		}),
	}
}

// rankInfoEntries is lc.info.
func rankInfoEntries() []*Entry {
	const g = "Ranks"
	return []*Entry{
		fn("lc.info", "()", "table", g, "A table: backend, rank, size, job (the job id), launcher (luacoll, torchrun, slurm or openmpi), rendezvous (where the ranks met: host:port, or unix:PATH for a one-host mpirun or srun job started without an address), device (this rank's, as lc.device() says it), devices (every device this rank sees, 1-based: name, model, uuid, pci_bus_id, memory_bytes, compute_capability, multicast, mine = true for its own), multicast (this rank's device: \"supported, not used\" or \"not supported\"; luacoll never creates multicast objects), mps (true when this rank's GPU contexts go through an MPS server), mps_daemon (\"job\" when the launcher started a private MPS daemon for the job, see --mps), transports (per peer, 1-based), cpus (the CPUs this rank may run on, as \"0-15\"; see --cpu-bind), versions (luacoll, lua; on CUDA also cuda_driver, nvrtc and nccl, \"not found\" for a missing library).", func(c *call) int {
			L := c.L
			t := L.NewTable()
			comm := c.s.Comm
			L.SetField(t, "backend", lua.LString(comm.Opts.Device))
			L.SetField(t, "device", lua.LString(comm.Backend.Name()))
			L.SetField(t, "rank", lua.LNumber(comm.Env.Rank))
			L.SetField(t, "size", lua.LNumber(comm.Env.Size))
			L.SetField(t, "job", lua.LString(comm.Env.JobID))
			L.SetField(t, "launcher", lua.LString(comm.Env.Source))
			L.SetField(t, "rendezvous", lua.LString(comm.Env.Addr))
			tr := L.NewTable()
			for _, k := range comm.Rank.Topo.Kinds {
				tr.Append(lua.LString(k.String()))
			}
			L.SetField(t, "transports", tr)
			L.SetField(t, "cpus", lua.LString(cpuset.Format(comm.CPUs)))
			desc := comm.Backend.Describe()
			devs := L.NewTable()
			for _, d := range desc.Devices {
				dt := L.NewTable()
				L.SetField(dt, "name", lua.LString(d.Name))
				for k, v := range map[string]string{"model": d.Model, "uuid": d.UUID, "pci_bus_id": d.PCIBusID, "compute_capability": d.ComputeCapability} {
					if v != "" {
						L.SetField(dt, k, lua.LString(v))
					}
				}
				if d.MemoryBytes > 0 {
					L.SetField(dt, "memory_bytes", lua.LNumber(d.MemoryBytes))
				}
				if d.Multicast != "" {
					L.SetField(dt, "multicast", lua.LString(d.Multicast))
				}
				L.SetField(dt, "mine", lua.LBool(d.Mine))
				devs.Append(dt)
				if d.Mine {
					L.SetField(t, "multicast", lua.LString(d.Multicast))
				}
			}
			L.SetField(t, "devices", devs)
			L.SetField(t, "mps", lua.LBool(mpsOn(desc.MPS, comm.Env.MPSDaemon)))
			if comm.Env.MPSDaemon {
				L.SetField(t, "mps_daemon", lua.LString(launch.MPSDaemonJob))
			}
			v := L.NewTable()
			L.SetField(v, "luacoll", lua.LString(Version))
			L.SetField(v, "lua", lua.LString(LuaVersion()))
			for k, ver := range desc.Versions {
				L.SetField(v, k, lua.LString(ver))
			}
			L.SetField(t, "versions", v)
			L.Push(t)
			return 1
		}),
	}
}

// constructorEntries are lc.buffer, lc.window and lc.timer.
func constructorEntries() []*Entry {
	return []*Entry{
		fn("lc.buffer", "(nbytes)", "buffer", "Local buffers", "Allocates nbytes of zeroed memory on this rank's device (host memory on the host backend, GPU memory on CUDA). A source or destination of window operations; not remotely accessible. On the host a buffer that would not fit the available memory were every rank of the host to make one is refused, as windows are.", func(c *call) int {
			b, err := c.s.Comm.NewBuffer(c.u64(0))
			c.check(err)
			c.s.push(&bufferRef{b: b}, "b")
			return 1
		}),
		fn("lc.window", "{bytes, signals=8, counters=8, barriers=4, timeout_ms=--timeout, path=\"auto\", ipc=\"auto\", symmetric=\"auto\"}", "window", "Windows",
			"**collective**: every rank gets a data buffer of `bytes` bytes that every peer can write and read, `signals` signal slots per peer, `counters` local-completion counters per peer and `barriers` barrier slots; waits time out after `timeout_ms` (default: the job's --timeout, 10 s unless given); a host wait that only ranks which have ended (os.exit(0), or their script ran to its end) could still satisfy fails at once instead, naming them. `path` (CUDA) is \"ce\" (copy engines and stream memory operations), \"sm\" (kernels) or \"auto\". `ipc` (CUDA) is how the memory is shared with the peers: \"legacy\" (CUDA IPC handles), \"vmm\" (cuMemCreate memory passed as file descriptors over Unix sockets) or \"auto\" (the job's `--ipc`; by default vmm in a symmetric window where every rank can map one, else legacy); host windows are shared memory whatever it says. `symmetric` (CUDA) true maps every rank's part in one reserved virtual range at base + rank*stride (VMM memory of the same size on every rank), false keeps a table of separate mappings, \"auto\" (the job's `--symmetric`, auto by default) is true wherever every rank can; `w:info()` says which and why.",
			newWindow),
		fn("lc.timer", "()", "timer", "Timing", "A timer whose start and stop are enqueued on the rank's stream (CUDA events on a GPU).", func(c *call) int {
			t := &timerRef{}
			c.s.timers = append(c.s.timers, t)
			c.s.push(t, "t")
			return 1
		}),
	}
}

// mpsOn says whether a rank's GPU contexts go through MPS: the driver's
// word ("on", "off") when it gives one, else whether the launcher started
// a daemon for the job (whose clients the ranks are).
func mpsOn(driver string, jobDaemon bool) bool {
	switch driver {
	case "on":
		return true
	case "off":
		return false
	}
	return jobDaemon
}

func (c *call) buf() *window.Buffer {
	r := c.L.Get(1).(*lua.LUserData).Value.(*bufferRef)
	if r.b.Freed() {
		c.fail("%s has been freed", r.b.Name())
	}
	return r.b
}

func bufferEntries() []*Entry {
	const g = "Local buffers"
	return []*Entry{
		fn("b:size", "()", "integer", g, "The buffer's size in bytes.", func(c *call) int {
			c.L.Push(lua.LNumber(c.buf().Size()))
			return 1
		}),
		fn("b:fill", "(kind, arg=0)", "", g, "Fills the whole buffer, in stream order, on the device: kind \"const\" (every byte = arg), \"iota\" (32-bit little-endian words counting from arg) or \"rand\" (pseudo-random 32-bit words seeded by arg).", func(c *call) int {
			b := c.buf()
			kind := c.fillKind(0)
			c.check(b.Fill(kind, c.fillArg(kind, 1)))
			return 0
		}),
		fn("b:get_u32", "(off)", "integer", g, "Reads a little-endian 32-bit value (synchronous: waits for the rank's stream first).", func(c *call) int {
			v, err := c.buf().GetU32(c.u64(0))
			c.check(err)
			c.L.Push(lua.LNumber(v))
			return 1
		}),
		fn("b:set_u32", "(off, v)", "", g, "Writes a little-endian 32-bit value (synchronous).", func(c *call) int {
			b := c.buf()
			off, v := c.u64(0), c.u64(1)
			if v > 0xffffffff {
				c.badArg(1, "%d does not fit in 32 bits", v)
			}
			c.check(b.SetU32(off, uint32(v)))
			return 0
		}),
		fn("b:get_u64", "(off)", "integer", g, "Reads a little-endian 64-bit value; values above 2^53 raise an error rather than being rounded.", func(c *call) int {
			v, err := c.buf().GetU64(c.u64(0))
			c.check(err)
			if v > MaxExact {
				c.fail("the value at offset %d is %d, beyond 2^53: read it with b:read(off, 8)", c.u64(0), v)
			}
			c.L.Push(lua.LNumber(v))
			return 1
		}),
		fn("b:set_u64", "(off, v)", "", g, "Writes a little-endian 64-bit value (synchronous).", func(c *call) int {
			b := c.buf()
			c.check(b.SetU64(c.u64(0), c.u64(1)))
			return 0
		}),
		fn("b:read", "(off, n)", "string", g, "Returns n bytes at off as a Lua string (synchronous).", func(c *call) int {
			p, err := c.buf().Read(c.u64(0), c.u64(1))
			c.check(err)
			c.L.Push(lua.LString(p))
			return 1
		}),
		fn("b:write", "(off, s)", "", g, "Writes the bytes of string s at off (synchronous).", func(c *call) int {
			b := c.buf()
			c.check(b.Write(c.u64(0), []byte(c.str(1))))
			return 0
		}),
		fn("b:checksum", "(off=0, n=size-off)", "string", g, "A 64-bit checksum of a range as 16 hex digits, computed on the device (the same function on every backend).", func(c *call) int {
			b := c.buf()
			off := c.optU64(0, 0)
			var n uint64
			if off <= b.Size() {
				n = b.Size() - off
			}
			n = c.optU64(1, n)
			v, err := b.Checksum(off, n)
			c.check(err)
			c.L.Push(lua.LString(fmt.Sprintf("%016x", v)))
			return 1
		}),
		fn("b:equal", "(other, off=0, other_off=0, n)", "boolean", g, "True when n bytes at off equal n bytes of other (a buffer or window) at other_off; n defaults to what is left of this buffer after off.", func(c *call) int {
			b := c.buf()
			other := c.buffer(0)
			off, ooff := c.optU64(1, 0), c.optU64(2, 0)
			var n uint64
			if off <= b.Size() {
				n = b.Size() - off
			}
			n = c.optU64(3, n)
			eq, err := b.Equal(other, off, ooff, n)
			c.check(err)
			c.L.Push(lua.LBool(eq))
			return 1
		}),
		fn("b:free", "()", "", g, "Releases the buffer after the operations already enqueued on it; any later use is an error.", func(c *call) int {
			r := c.L.Get(1).(*lua.LUserData).Value.(*bufferRef)
			c.check(r.b.Free())
			return 0
		}),
	}
}

func (c *call) pushU64(v uint64) {
	if v > MaxExact {
		c.fail("value %d is beyond 2^53 and cannot be returned exactly", v)
	}
	c.L.Push(lua.LNumber(v))
}

// timerRef is a stream-ordered stopwatch.
type timerRef struct {
	start, stop transport.Mark
}

func (t *timerRef) String() string { return "timer" }

func (c *call) timer() *timerRef { return c.L.Get(1).(*lua.LUserData).Value.(*timerRef) }

func timerEntries() []*Entry {
	const g = "Timing"
	return []*Entry{
		fn("t:start", "()", "", g, "Enqueues the start mark on the rank's stream.", func(c *call) int {
			t := c.timer()
			t.start, t.stop = c.s.Comm.Rank.Stream.Mark(), nil
			return 0
		}),
		fn("t:stop", "()", "", g, "Enqueues the stop mark on the rank's stream.", func(c *call) int {
			t := c.timer()
			if t.start == nil {
				c.fail("t:stop before t:start")
			}
			t.stop = c.s.Comm.Rank.Stream.Mark()
			return 0
		}),
		fn("t:seconds", "()", "number", g, "Syncs the stream and returns the seconds between start and stop.", func(c *call) int {
			t := c.timer()
			if t.start == nil || t.stop == nil {
				c.fail("t:seconds before t:start and t:stop")
			}
			c.check(c.s.Comm.Sync(c.ctx()))
			d, err := t.stop.Since(t.start)
			c.check(err)
			c.L.Push(lua.LNumber(d.Seconds()))
			return 1
		}),
	}
}

func helpEntries() []*Entry {
	return []*Entry{
		fn("help", "(name?)", "", "Help", "Prints the API list, or one entry's documentation: help(\"w:put\").", func(c *call) int {
			name := c.optStr(0, "")
			text, _ := c.s.Reg.Help(name)
			fmt.Fprint(c.s.Out, text)
			if !strings.HasSuffix(text, "\n") {
				fmt.Fprintln(c.s.Out)
			}
			return 0
		}),
	}
}

// encodeValue serialises an allgather value: nil, boolean, number, string
// or nested tables of those.
func encodeValue(v lua.LValue, depth int) ([]byte, error) {
	var b bytes.Buffer
	if err := encodeInto(&b, v, depth); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

func encodeInto(b *bytes.Buffer, v lua.LValue, depth int) error {
	if depth > 16 {
		return fmt.Errorf("tables nested deeper than 16 (or a table that contains itself)")
	}
	switch x := v.(type) {
	case *lua.LNilType:
		b.WriteByte('n')
	case lua.LBool:
		if x {
			b.WriteByte('t')
		} else {
			b.WriteByte('f')
		}
	case lua.LNumber:
		b.WriteByte('d')
		fmt.Fprintf(b, "%v;", float64(x))
	case lua.LString:
		b.WriteByte('s')
		fmt.Fprintf(b, "%d;", len(x))
		b.WriteString(string(x))
	case *lua.LTable:
		b.WriteByte('T')
		var err error
		x.ForEach(func(k, val lua.LValue) {
			if err != nil {
				return
			}
			if _, ok := k.(*lua.LTable); ok {
				err = fmt.Errorf("table keys must be strings, numbers or booleans")
				return
			}
			if err = encodeInto(b, k, depth+1); err == nil {
				err = encodeInto(b, val, depth+1)
			}
		})
		if err != nil {
			return err
		}
		b.WriteByte('e')
	default:
		return fmt.Errorf("cannot gather a %s (nil, boolean, number, string or table expected)", v.Type())
	}
	return nil
}

func decodeValue(L *lua.LState, d []byte, depth int) (lua.LValue, []byte, error) {
	if len(d) == 0 {
		return nil, nil, fmt.Errorf("truncated value")
	}
	tag, rest := d[0], d[1:]
	readUntil := func() (string, []byte, error) {
		i := bytes.IndexByte(rest, ';')
		if i < 0 {
			return "", nil, fmt.Errorf("truncated value")
		}
		return string(rest[:i]), rest[i+1:], nil
	}
	switch tag {
	case 'n':
		return lua.LNil, rest, nil
	case 't':
		return lua.LTrue, rest, nil
	case 'f':
		return lua.LFalse, rest, nil
	case 'd':
		s, r, err := readUntil()
		if err != nil {
			return nil, nil, err
		}
		var f float64
		if _, err := fmt.Sscan(s, &f); err != nil {
			return nil, nil, fmt.Errorf("bad number %q", s)
		}
		return lua.LNumber(f), r, nil
	case 's':
		s, r, err := readUntil()
		if err != nil {
			return nil, nil, err
		}
		var n int
		if _, err := fmt.Sscan(s, &n); err != nil || n < 0 || n > len(r) {
			return nil, nil, fmt.Errorf("bad string length %q", s)
		}
		return lua.LString(r[:n]), r[n:], nil
	case 'T':
		if depth > 16 {
			return nil, nil, fmt.Errorf("tables nested deeper than 16 (or a table that contains itself)")
		}
		t := L.NewTable()
		for {
			if len(rest) == 0 {
				return nil, nil, fmt.Errorf("truncated table")
			}
			if rest[0] == 'e' {
				return t, rest[1:], nil
			}
			k, r, err := decodeValue(L, rest, depth+1)
			if err != nil {
				return nil, nil, err
			}
			v, r2, err := decodeValue(L, r, depth+1)
			if err != nil {
				return nil, nil, err
			}
			if k == lua.LNil {
				return nil, nil, fmt.Errorf("nil table key")
			}
			t.RawSet(k, v)
			rest = r2
		}
	}
	return nil, nil, fmt.Errorf("unknown tag %q", tag)
}
