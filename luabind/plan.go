package luabind

import (
	"context"
	"errors"
	"fmt"
	"strings"

	lua "github.com/yuin/gopher-lua"

	"github.com/luacoll/luacoll/engine/plan"
	"github.com/luacoll/luacoll/engine/plan/verify"
	"github.com/luacoll/luacoll/transport/knobs"
	"github.com/luacoll/luacoll/window"
)

// planRecorder collects one rank's ops while a plan's body runs.
type planRecorder struct {
	w     *window.Window
	ops   []plan.Op
	opBuf []*window.Buffer // per op: its local buffer (nil: none)
	opSrc []*window.Buffer // per op: a local reduce's source (nil: none)
}

// planRef is the userdata value of a plan.
type planRef struct {
	p     *plan.Plan
	num   int
	site  string // where lc.plan was called
	mode  string
	freed bool
	// report is the verification made when the plan was (check mode).
	report *verify.Report
	// lines holds the plan's line areas (plan.UseLines), freed with it.
	lines *window.Window
	// resets is how many times this rank had reset the window's inbox
	// when the plan was made (checkResets).
	resets int
}

func (r *planRef) String() string {
	if r.freed {
		return fmt.Sprintf("plan %d (freed)", r.num)
	}
	return fmt.Sprintf("plan %d (%d ops, mode %s, %d replays)", r.num, len(r.p.Ops()), r.mode, r.p.Replays())
}

// Plan modes.
const (
	modeHost   = "host"   // a Go loop over the ops, host backend
	modeStream = "stream" // launches on a CUDA stream: the interpreter over runs of ops, large copies alone (else the loop, op by op)
	modeGraph  = "graph"  // one replay captured into a CUDA graph
	modeDevice = "device" // run by the plan interpreter, one kernel a p:run
	modeCheck  = "check"  // luacoll check: verified, never replayed
)

var planModes = []string{"auto", modeHost, modeStream, modeGraph, modeDevice}

// pickMode returns the mode a plan runs in on this rank's backend, or why
// the requested one cannot be had. On CUDA, "auto" is "stream" here;
// makePlan then moves a plan whose ops suit the interpreter to "device"
// (autoDevice).
func (s *State) pickMode(req string) (string, error) {
	if s.plans.check != nil {
		return modeCheck, nil
	}
	cudaBackend := s.Comm.Backend.Name() != "host"
	have := modeHost
	if cudaBackend {
		have = modeStream
	}
	switch req {
	case "", "auto", have:
		return have, nil
	case modeDevice, modeGraph:
		if cudaBackend {
			return req, nil
		}
		return "", fmt.Errorf("bad argument 'mode' (%q needs the CUDA backend; this rank has %s, where plans run as %q)", req, s.Comm.Backend.Name(), have)
	case modeHost, modeStream:
		return "", fmt.Errorf("bad argument 'mode' (%q needs the %s backend; this rank has %s, where plans run as %q)", req, map[string]string{modeHost: "host", modeStream: "CUDA"}[req], s.Comm.Backend.Name(), have)
	}
	return "", fmt.Errorf("bad argument 'mode' (unknown mode %q; want %s)", req, strings.Join(planModes, ", "))
}

// autoDeviceMax is the largest copy or fill of a plan that "auto" gives to
// the interpreter: it spreads wide steps over several blocks
// (kernels.PlanSpreadFor), but beyond this a put kernel over the whole GPU
// or a copy engine, stream mode's, moves the bytes sooner.
const autoDeviceMax = 256 << 10

// autoDeviceReduceMax is the largest reduction of a plan that "auto" gives
// to the interpreter, as for copies: on 2 x H200 a 256 KiB two_shot
// all-reduce (128 KiB reductions) took less than half its stream-mode time
// in device mode, where the reductions are steps of the spread interpreter
// instead of launches of the reduce kernel (docs/results/reductions.md,
// "Spread plans").
const autoDeviceReduceMax = 256 << 10

// autoDevice reports whether "auto" runs ops in device mode: no copy or
// fill above autoDeviceMax and no reduction above autoDeviceReduceMax (the
// interpreter itself says whether it can).
func autoDevice(p *plan.Plan) bool {
	for _, o := range p.Ops() {
		if o.Kind == plan.Reduce || o.Kind == plan.ReduceFrom {
			if o.N > autoDeviceReduceMax {
				return false
			}
			continue
		}
		n := o.N
		if o.Kind == plan.Fill {
			n = p.Buffers()[o.Buf].Size()
		}
		if n > autoDeviceMax {
			return false
		}
	}
	return true
}

func (c *call) site() plan.Site {
	dbg, ok := c.L.GetStack(1)
	if !ok {
		return plan.Site{}
	}
	if _, err := c.L.GetInfo("Sl", dbg, lua.LNil); err != nil {
		return plan.Site{}
	}
	return plan.Site{File: dbg.Source, Line: dbg.CurrentLine}
}

// record appends op, issued on window w (nil for a buffer op) with local
// buffer b (nil for none), after the checks the window would make.
func (r *planRecorder) record(c *call, w *window.Window, b *window.Buffer, o plan.Op) int {
	return r.recordWith(c, w, b, nil, o)
}

// recordWith is record for an op with a second local buffer src (a local
// reduce's source; nil for none).
func (r *planRecorder) recordWith(c *call, w *window.Window, b, src *window.Buffer, o plan.Op) int {
	if w != nil {
		if r.w == nil {
			r.w = w
		} else if r.w != w {
			c.fail("a plan records the operations of one window: this body already used window %d, not window %d", r.w.ID(), w.ID())
		}
	}
	o.Site = c.site()
	if w != nil {
		me := c.s.rank()
		sh := plan.ShapeOf(w.Rank().N(), w.Options(), nil)
		if b != nil && b != w.Buffer() {
			sh.Buffers = append(sh.Buffers, b.Size())
			o.Buf = 1
		}
		switch {
		case src == nil || src == w.Buffer():
		case src == b:
			o.Src = o.Buf
		default:
			sh.Buffers = append(sh.Buffers, src.Size())
			o.Src = len(sh.Buffers) - 1
		}
		c.check(sh.Check(me, o))
		var peers []int
		switch o.Kind {
		case plan.Put, plan.Get, plan.PutSignal, plan.PutCounter, plan.PutSignalCounter, plan.Signal, plan.BarrierPeer, plan.ReduceFrom:
			peers = []int{o.Peer}
		case plan.SignalAll, plan.Barrier:
			for p := 0; p < sh.Ranks; p++ {
				peers = append(peers, p)
			}
		}
		for _, p := range peers {
			if !w.Reachable(p) {
				kind, _ := w.Transport(p)
				c.fail("bad argument 'peer' (rank %d is not reachable (transport %s))", p, kind)
			}
		}
	}
	if most, total := c.s.plans.limits(); len(r.ops) >= most {
		c.fail("a plan holds at most %d ops per rank (and %d over all ranks); this body recorded more: split the schedule into smaller plans", most, total)
	}
	r.ops = append(r.ops, o)
	r.opBuf = append(r.opBuf, b)
	r.opSrc = append(r.opSrc, src)
	return 0
}

// list turns what was recorded into this rank's List and its buffers.
func (r *planRecorder) list() (plan.List, []*window.Buffer, error) {
	if r.w == nil {
		return plan.List{}, nil, fmt.Errorf("the body enqueued no window operation")
	}
	bufs := []*window.Buffer{r.w.Buffer()}
	idx := map[*window.Buffer]int{r.w.Buffer(): plan.WindowBuf}
	var sizes []uint64
	index := func(b *window.Buffer) int {
		k, ok := idx[b]
		if !ok {
			k = len(bufs)
			idx[b] = k
			bufs = append(bufs, b)
			sizes = append(sizes, b.Size())
		}
		return k
	}
	for i, b := range r.opBuf {
		if b != nil {
			r.ops[i].Buf = index(b)
		}
		if src := r.opSrc[i]; src != nil {
			r.ops[i].Src = index(src)
		}
	}
	return plan.List{Window: r.w.ID(), Shape: plan.ShapeOf(r.w.Rank().N(), r.w.Options(), sizes), Ops: r.ops}, bufs, nil
}

// planRecording maps each function that behaves differently while a plan
// is being recorded to what it does then: window and buffer operations
// that enqueue are recorded; anything that reads or writes data now, waits,
// or makes or frees objects is refused.
var planRecording = map[string]func(c *call) int{
	"w:put": func(c *call) int {
		w, t := c.win(), c.transfer()
		return c.s.plans.rec.record(c, w, t.Local, plan.Op{Kind: plan.Put, Peer: t.Peer, Off: t.PeerOff, BufOff: t.LocalOff, N: t.N})
	},
	"w:get": func(c *call) int {
		w, t := c.win(), c.transfer()
		return c.s.plans.rec.record(c, w, t.Local, plan.Op{Kind: plan.Get, Peer: t.Peer, Off: t.PeerOff, BufOff: t.LocalOff, N: t.N})
	},
	"w:put_signal": func(c *call) int {
		w, t := c.win(), c.transfer()
		return c.s.plans.rec.record(c, w, t.Local, plan.Op{Kind: plan.PutSignal, Peer: t.Peer, Off: t.PeerOff, BufOff: t.LocalOff, N: t.N,
			Sig: c.sigSlot(w, 5), SigValue: c.optU64(6, 1), SigOp: c.sigOp(7, "add")})
	},
	"w:put_counter": func(c *call) int {
		w, t := c.win(), c.transfer()
		return c.s.plans.rec.record(c, w, t.Local, plan.Op{Kind: plan.PutCounter, Peer: t.Peer, Off: t.PeerOff, BufOff: t.LocalOff, N: t.N,
			Ctr: c.index(5), CtrValue: c.optU64(6, 1)})
	},
	"w:put_signal_counter": func(c *call) int {
		w, t := c.win(), c.transfer()
		return c.s.plans.rec.record(c, w, t.Local, plan.Op{Kind: plan.PutSignalCounter, Peer: t.Peer, Off: t.PeerOff, BufOff: t.LocalOff, N: t.N,
			Sig: c.sigSlot(w, 5), SigValue: c.u64(6), Ctr: c.index(7), CtrValue: c.u64(8)})
	},
	"w:signal": func(c *call) int {
		w := c.win()
		return c.s.plans.rec.record(c, w, nil, plan.Op{Kind: plan.Signal, Peer: c.index(0), Sig: c.sigSlot(w, 1), SigOp: c.sigOp(2, "add"), SigValue: c.optU64(3, 1)})
	},
	"w:signal_all": func(c *call) int {
		w := c.win()
		return c.s.plans.rec.record(c, w, nil, plan.Op{Kind: plan.SignalAll, Sig: c.sigSlot(w, 0), SigOp: c.sigOp(1, "add"), SigValue: c.optU64(2, 1)})
	},
	"w:wait_signal": func(c *call) int {
		w := c.win()
		return c.s.plans.rec.record(c, w, nil, plan.Op{Kind: plan.WaitSignal, Sig: c.sigSlot(w, 0), Cmp: c.cmp(1), Value: c.u64(2)})
	},
	"w:wait_signal_from": func(c *call) int {
		w := c.win()
		return c.s.plans.rec.record(c, w, nil, plan.Op{Kind: plan.WaitSignalFrom, Peer: c.index(0), Sig: c.sigSlot(w, 1), Cmp: c.cmp(2), Value: c.u64(3)})
	},
	"w:wait_counter": func(c *call) int {
		w := c.win()
		return c.s.plans.rec.record(c, w, nil, plan.Op{Kind: plan.WaitCounter, Peer: c.index(0), Ctr: c.index(1), Cmp: c.cmp(2), Value: c.u64(3)})
	},
	"w:reset_counter": func(c *call) int {
		w := c.win()
		return c.s.plans.rec.record(c, w, nil, plan.Op{Kind: plan.ResetCounter, Peer: c.index(0), Ctr: c.index(1)})
	},
	"w:barrier": func(c *call) int {
		w := c.win()
		return c.s.plans.rec.record(c, w, nil, plan.Op{Kind: plan.Barrier, Bar: c.barSlot(w, 0, 0)})
	},
	"w:barrier_peer": func(c *call) int {
		w := c.win()
		return c.s.plans.rec.record(c, w, nil, plan.Op{Kind: plan.BarrierPeer, Peer: c.index(0), Bar: c.barSlot(w, 1, 0)})
	},
	"w:fence": func(c *call) int { return c.s.plans.rec.record(c, c.win(), nil, plan.Op{Kind: plan.Fence}) },
	"w:flush": func(c *call) int { return c.s.plans.rec.record(c, c.win(), nil, plan.Op{Kind: plan.Flush}) },
	"b:fill": func(c *call) int {
		b := c.buf()
		kind := c.fillKind(0)
		return c.s.plans.rec.record(c, nil, b, plan.Op{Kind: plan.Fill, FillKind: kind, FillArg: c.fillArg(kind, 1)})
	},
}

func init() {
	for _, name := range []string{
		"w:read_signal", "w:read_signal_from", "w:read_counter", "w:sync", "w:free", "w:reset_signals",
		"b:get_u32", "b:get_u64", "b:read", "b:checksum", "b:equal", "b:set_u32", "b:set_u64", "b:write", "b:free",
		"lc.sync", "lc.allgather", "lc.barrier", "lc.window", "lc.allgather_persistent", "lc.plan",
		"ag:exec", "ag:destroy", "t:start", "t:stop", "t:seconds", "p:run", "p:verify", "p:free",
	} {
		planRecording[name] = func(c *call) int {
			c.fail("cannot %s while recording a plan", c.e.Name)
			return 0
		}
	}
}

func (c *call) planRef() *planRef {
	r := c.L.Get(1).(*lua.LUserData).Value.(*planRef)
	if r.freed {
		c.fail("plan %d has been freed", r.num)
	}
	return r
}

func planEntries() []*Entry {
	const g = "Plans"
	return []*Entry{
		fn("lc.plan", "(body, ..., {mode=\"auto\"}?)", "plan", g,
			"**collective**: records a schedule once: calls body(...) with the window and buffer operations that enqueue (put, get, put_signal, put_counter, put_signal_counter, signal, signal_all, wait_signal, wait_signal_from, wait_counter, reset_counter, barrier, barrier_peer, fence, flush, reduce, reduce_from, b:fill) appended to this rank's op list, each with the script line that issued it, instead of run; Lua control flow runs once, now. Arguments are checked as the window would (bounds, slots, peers) and anything that reads or writes data now, syncs, or makes or frees windows, plans and all-gathers (read_signal, b:read, b:get_u32, checksum, sync, lc.allgather, lc.barrier, lc.window, b:free, ...) raises \"cannot <op> while recording a plan\" (a buffer the body makes with lc.buffer is the plan's own). The body must use one window, the plan's; every rank's list is then gathered. A plan holds at most 1,048,576 ops per rank and 2,097,152 over all ranks. A trailing table {mode=...} picks how replays run: \"host\" (a Go loop over the ops on the host backend), \"stream\" (CUDA: a few launches on the stream per replay: the interpreter over each run of ops, each copy above 64 KiB alone or with the copies of the same bytes right after it (a chunk to several peers: one launch, their signals after them all); op by op where a peer is over the network), \"device\" (CUDA: the plan interpreter runs every op of every replay of a p:run in one kernel, no launch between ops, on one block or, for copies and reductions of 64 KiB or more, several (see p:info); where a rank has its GPU to itself, one running interpreter takes call after call instead of a launch each) or \"graph\" (CUDA: one replay captured into a CUDA graph, launched once per replay: the interpreter over each run of signals, waits and small copies, each large copy alone); in stream and graph mode a copy launched alone is a put kernel over the whole GPU on window path \"sm\", a copy engine's on \"ce\", and on \"auto\" a put kernel up to 16 MiB, a copy engine's above (measured: docs/results/plans.md); device and graph need every peer mapped, none over the network; reductions (reduce, reduce_from) are a launch of the reduce kernel each in stream and graph mode (up to 8 into one place in a row, each of at most 4 MiB and 16-byte aligned: one launch of the chain kernel), a step of every thread of the interpreter in device mode; \"auto\" takes \"host\" on the host backend and on CUDA \"device\" where the ops allow it, no copy, fill or reduction exceeds 256 KiB, else \"stream\". Waits on signal slots and counters that only \"add\" advance by what one replay adds, and barriers by one use, so replays repeat without a reset; the plan's slots must not also be signalled outside plans once a plan was recorded.",
			newPlan),
		fn("p:run", "{times=1, window?}", "", g,
			"Enqueues the recorded ops on the rank's stream times times, back to back, with no Lua per op; a wait's error names the line that recorded it. window, when given, must be the plan's. Refused for a plan recorded before w:reset_signals() on its window, or whose slots a persistent all-gather made after it owns. Under `luacoll check` nothing runs.",
			func(c *call) int {
				r := c.planRef()
				t := c.tableArg(0, []string{"times", "window"}, "p:run{times = 100}", true)
				c.windowField(t, r.p)
				if t != nil {
					if v, ok := t.RawGetString("times").(lua.LNumber); ok && (v < 1 || v > 1<<31) {
						c.fail("bad argument 'times' (%v: want 1..2^31)", v)
					}
				}
				times := c.field(t, "times", 1)
				if times < 1 || times > 1<<31 {
					c.fail("bad argument 'times' (%d: want 1..2^31)", times)
				}
				if r.mode == modeCheck {
					c.s.plans.check.skipped++
					return 0
				}
				c.checkResets(r)
				c.checkReserved(r)
				c.check(r.p.Run(int(times)))
				return 0
			}),
		fn("p:verify", "{collective?, window?, n?, root=0, src?, src_off=0, replays=2, calls=1}", "table", g,
			"**collective**: checks every rank's op list against the others before anything runs, in every order the window allows with ranks up to `replays` replays apart (replays back to back, no sync between them): bounds and slots, deadlocks (each blocked wait: rank, op, line, slot, condition, the value it would see), races (two writes into overlapping bytes that no signal, wait or barrier orders; a put source overwritten before a flush, barrier or counter wait; a source read, or a reduction's (reduce, reduce_from) source or destination, while a put into it may still be arriving), stand-ins (a wait that another replay's signal can satisfy, with the peers whose signals stand in) and, for collective \"allgather\" (every window holds rank r's n bytes at r*n), \"alltoall\" (rank r's chunk q at r*n of rank q) or \"broadcast\" (root's n bytes at 0), \"reduce_scatter\" (in place: rank r's window bytes r*n..(r+1)*n become every rank's bytes there reduced, each rank's exactly once, at least once for min and max) or \"allreduce\" (every rank's n bytes at 0 become the reduction of all ranks'; with src = the window, at src_off), the result at the end of every replay of every rank, tracked symbolically with the source taken to change every replay (kind \"result\": the replay, the chunk, and the wait that let a wrong one through) and after the last one (\"postcondition\"); src (a buffer or window the plan uses, at src_off) names each rank's source (a broadcast's: the root's, which the other ranks' plans need not use), else the ranks' results are compared with each other; n, root and src_off that do not fit the plan (no byte, part of an element the plan reduces, past the window or the source, a root outside the ranks) are argument errors. calls (1..16): the plan's body made that many calls of the collective one after another, each recording the same number of ops on a rank (a schedule that alternates staging areas between calls, recorded over both); the result is then checked, and the source taken to change, at the end of every call (the \"result\" problem's replay field numbers calls). A plan past the verifier's bound of work gives a \"stopped\" problem, never ok. Returns {ok, ops (per rank), steps (critical path in ops), problems = {{kind, rank, op, op_name, replay, file, line, message, other}, ...}, summary}.",
			verifyPlan),
		fn("p:ops", "()", "table", g,
			"This rank's recorded ops, in order: tables {op=, peer=, off=, src= or dst= (\"w\" the window, \"b1\", ... the other buffers in order of first use), src_off= or dst_off=, n=, sig=, value=, sigop=, ctr=, cvalue=, cmp=, id=, buf=, kind=, arg=, file=, line=} with the fields the op has.",
			func(c *call) int {
				r := c.planRef()
				out := c.L.NewTable()
				for _, o := range r.p.Ops() {
					t := c.L.NewTable()
					t.RawSetString("op", lua.LString(o.Kind.String()))
					for _, kv := range o.Fields() {
						var v lua.LValue
						switch x := kv[1].(type) {
						case int:
							v = lua.LNumber(x)
						case uint64:
							v = lua.LNumber(x)
						case string:
							v = lua.LString(x)
						}
						t.RawSetString(kv[0].(string), v)
					}
					t.RawSetString("file", lua.LString(o.Site.File))
					t.RawSetString("line", lua.LNumber(o.Site.Line))
					out.Append(t)
				}
				c.L.Push(out)
				return 1
			}),
		fn("p:info", "()", "table", g,
			"A table: ops (this rank's count), mode (\"host\", \"stream\", \"device\", \"graph\", or \"check\" under luacoll check), graph_nodes (graph mode: the graph's nodes by type), launches (stream mode, when runs of ops go to the plan interpreter: what one replay launches), replays (enqueued so far), window (its id), buffers (other than the window), ranks, site (where lc.plan was called), lines (CUDA: how many put_signals of every rank's list travel in 16-byte lines, 8 payload bytes and a flag in each store, drained by the receiver's wait that needs them; up to LUACOLL_PLAN_LINES bytes each: unless set, 4 KiB in a plan of 2 ranks, 1 KiB of more), threads (CUDA: the interpreter's block size, by the plan's widest copy or reduction), blocks and grids (CUDA, device mode, a plan whose widest copy or reduction has 64 KiB or more (128 KiB in a plan of 2 ranks), spread over several blocks of the interpreter, each running every step with its share of each copy and reduction: how many, one for every 8 KiB of that step up to LUACOLL_PLAN_BLOCKS (8 unless set), and how many times a replay they meet).",
			func(c *call) int {
				r := c.planRef()
				t := c.L.NewTable()
				t.RawSetString("ops", lua.LNumber(len(r.p.Ops())))
				t.RawSetString("mode", lua.LString(r.mode))
				if l := r.p.StreamLaunches(); l != "" {
					t.RawSetString("launches", lua.LString(l))
				}
				if nodes := r.p.GraphNodes(); nodes != "" {
					t.RawSetString("graph_nodes", lua.LString(nodes))
				}
				t.RawSetString("replays", lua.LNumber(r.p.Replays()))
				t.RawSetString("window", lua.LNumber(r.p.Window().ID()))
				t.RawSetString("buffers", lua.LNumber(len(r.p.Buffers())-1))
				t.RawSetString("ranks", lua.LNumber(len(r.p.Lists())))
				t.RawSetString("site", lua.LString(r.site))
				t.RawSetString("lines", lua.LNumber(r.p.LineCount()))
				if n := r.p.DeviceThreads(); n > 0 {
					t.RawSetString("threads", lua.LNumber(n))
				}
				if b, g := r.p.DeviceSpread(); b > 1 {
					t.RawSetString("blocks", lua.LNumber(b))
					t.RawSetString("grids", lua.LNumber(g))
				}
				c.L.Push(t)
				return 1
			}),
		fn("p:free", "()", "", g, "**collective**: meets every rank and releases the plan; any later use is an error.", func(c *call) int {
			r := c.planRef()
			_, err := c.s.Comm.Collective(c.ctx(), fmt.Sprintf("plan %d:free()", r.num), nil)
			c.check(err)
			r.freed = true
			delete(c.s.plans.onDevice, r)
			c.check(r.p.Free())
			if r.lines != nil {
				c.check(c.s.Comm.FreeWindow(c.ctx(), r.lines))
			}
			return 0
		}),
	}
}

func newPlan(c *call) int {
	L := c.L
	body, ok := c.get(0).(*lua.LFunction)
	if !ok {
		c.badArg(0, "function expected, got %s", c.get(0).Type())
	}
	var args []lua.LValue
	for i := c.base + 1; i <= L.GetTop(); i++ {
		args = append(args, L.Get(i))
	}
	req := ""
	if n := len(args); n > 0 && IsPlanOpts(args[n-1]) {
		m, isStr := args[n-1].(*lua.LTable).RawGetString("mode").(lua.LString)
		if !isStr {
			c.fail("bad argument 'mode' (string expected, got %s)", args[n-1].(*lua.LTable).RawGetString("mode").Type())
		}
		req, args = string(m), args[:n-1]
	}
	where := L.Where(1)
	r, err := c.s.makePlan(c.ctx(), L, body, args, req, strings.TrimSuffix(where, ":"))
	c.check(err)
	c.s.push(r, "p")
	return 1
}

// makePlan records body(args...) on this rank (on a thread of L), gathers
// every rank's list, and binds this rank's to its window (collective).
func (s *State) makePlan(ctx context.Context, L *lua.LState, body *lua.LFunction, args []lua.LValue, req, where string) (*planRef, error) {
	me := s.rank()
	mode, status := "", ""
	if m, err := s.pickMode(req); err != nil {
		status = err.Error()
	} else {
		mode = m
	}
	rec := &planRecorder{}
	list, bufs, status := s.recordList(ctx, L, body, args, rec, status)
	s.plans.made++
	num := s.plans.made
	lists, err := s.gatherLists(ctx, list, status)
	if err != nil {
		return nil, err
	}
	led := s.plans.ledger(rec.w)
	led.Record(lists, me)
	p, err := plan.New(rec.w, bufs, lists, me, led)
	if err != nil {
		return nil, err
	}
	lines, err := s.planLines(ctx, p, lists, mode, num, rec.w)
	if err != nil {
		return nil, err
	}
	if mode, err = bindMode(p, mode, req); err != nil {
		return nil, err
	}
	r := &planRef{p: p, num: num, site: where, mode: mode, lines: lines, resets: s.plans.reset[rec.w]}
	if mode == modeDevice || mode == modeGraph || mode == modeStream {
		if s.plans.onDevice == nil {
			s.plans.onDevice = map[*planRef]bool{}
		}
		s.plans.onDevice[r] = true
	}
	if s.plans.check != nil {
		rep, err := s.verifyLists(ctx, fmt.Sprintf("plan %d", num), lists, verify.Options{})
		if err != nil {
			return nil, err
		}
		r.report = rep
		s.plans.check.note(s, r, "", rep)
		if !rep.OK {
			return nil, fmt.Errorf("plan %d (made at %s) failed verification: %s%s", num, where, rep.Summary(), rep.Hint())
		}
	}
	return r, nil
}

// recordList records body(args...) into rec and returns this rank's list,
// its buffers, and status: "" or why this rank could not (status as
// given, when it already says so).
func (s *State) recordList(ctx context.Context, L *lua.LState, body *lua.LFunction, args []lua.LValue, rec *planRecorder,
	status string) (plan.List, []*window.Buffer, string) {
	var list plan.List
	var bufs []*window.Buffer
	if status != "" {
		return list, bufs, status
	}
	if status = s.recordBody(L, body, args, rec); status != "" {
		return list, bufs, status
	}
	var err error
	if list, bufs, err = rec.list(); err != nil {
		status = err.Error()
	}
	list.Sent = s.plans.sentRows(rec.w)
	if status == "" {
		status = s.addInbox(ctx, &list, rec.w)
	}
	return list, bufs, status
}

// gatherLists gives every rank every rank's list (collective): an error
// when this rank (status) or another failed, when the lists exceed the
// plans' total, or when the ranks recorded on different windows.
func (s *State) gatherLists(ctx context.Context, list plan.List, status string) ([]plan.List, error) {
	all, err := s.Comm.Collective(ctx, "lc.plan", list.Encode(status))
	if err != nil {
		return nil, err
	}
	lists := make([]plan.List, len(all))
	var failed []string
	for q, d := range all {
		l, st, err := s.decodeList(q, d)
		switch {
		case err != nil:
			failed = append(failed, fmt.Sprintf("rank %d: %v", q, err))
		case st != "":
			failed = append(failed, fmt.Sprintf("rank %d: %s", q, st))
		}
		lists[q] = l
	}
	if status != "" {
		return nil, fmt.Errorf("%s", status)
	}
	if len(failed) > 0 {
		return nil, fmt.Errorf("failed on other ranks: %s", strings.Join(failed, "; "))
	}
	_, total := s.plans.limits()
	if err := plan.CheckTotal(lists, total); err != nil {
		return nil, err
	}
	for q := range lists {
		if lists[q].Window != list.Window {
			return nil, fmt.Errorf("rank %d recorded on window %d, this rank on window %d: every rank's body must use the same window", q, lists[q].Window, list.Window)
		}
	}
	return lists, nil
}

// planLines makes plan num's line areas where put_signals of up to
// knobs.PlanLines bytes go in lines: where every rank replays through the interpreter (CUDA with no
// network peer: the same answer on every rank, as the lists are). nil: no
// lines.
func (s *State) planLines(ctx context.Context, p *plan.Plan, lists []plan.List, mode string, num int, w *window.Window) (*window.Window, error) {
	topo := s.Comm.Rank.Topo
	limit := knobs.PlanLines.Or(plan.LineLimit(len(lists)))
	if mode == modeHost || mode == modeCheck || topo == nil || topo.AnyNet() || limit == 0 {
		return nil, nil
	}
	_, most := plan.Lines(lists, limit)
	if most == 0 {
		return nil, nil
	}
	lines, err := s.Comm.NewWindow(ctx, fmt.Sprintf("plan %d lines", num), window.Options{Bytes: uint64(most) * plan.LineSize,
		Signals: 1, Counters: 1, Barriers: 1, Path: "auto", Timeout: w.Options().Timeout})
	if err != nil {
		return nil, fmt.Errorf("the plan's line areas: %w", err)
	}
	if err := p.UseLines(lines, limit); err != nil {
		return nil, err
	}
	return lines, nil
}

// bindMode prepares p to replay in mode (req as the script asked): device
// and graph as asked, stream as device where auto allows, stream as runs
// of interpreter launches where the ops allow; it returns the mode p runs
// in.
func bindMode(p *plan.Plan, mode, req string) (string, error) {
	switch {
	case mode == modeDevice:
		if err := p.UseDevice(); err != nil {
			return mode, fmt.Errorf("mode \"device\": %w", err)
		}
	case mode == modeGraph:
		if err := p.UseGraph(); err != nil {
			return mode, fmt.Errorf("mode \"graph\": %w", err)
		}
	case mode == modeStream && (req == "" || req == "auto") && autoDevice(p):
		if err := p.UseDevice(); err == nil {
			mode = modeDevice
		} else if !errors.Is(err, plan.ErrNoDevice) {
			return mode, err
		}
	}
	if mode == modeStream {
		// Runs of ops as interpreter launches where the ops allow, else
		// op by op.
		if err := p.UseStream(); err != nil && (!errors.Is(err, plan.ErrNoDevice) || p.LineCount() > 0) {
			// With lines, op by op is no way out: the peers' plans count
			// on this rank's interpreter to send and drain them.
			return mode, fmt.Errorf("mode \"stream\": %w", err)
		}
	}
	return mode, nil
}

// recordBody calls body(args...) on a thread of L with rec recording, and
// returns "" or the error it raised.
func (s *State) recordBody(L *lua.LState, body *lua.LFunction, args []lua.LValue, rec *planRecorder) (status string) {
	s.plans.rec = rec
	defer func() { s.plans.rec = nil }()
	if msg := CallBody(L, body, args); msg != "" {
		return "the body failed: " + msg
	}
	return ""
}

// CallBody calls body(args...) on a new thread of L and returns "" or the
// error it raised (its message).
func CallBody(L *lua.LState, body *lua.LFunction, args []lua.LValue) string {
	th, cancel := L.NewThread()
	if cancel != nil {
		// Coroutines made in the body inherit the thread's context: give
		// it L's own, which outlives the body, rather than one cancelled
		// when the body returns (resuming them later would fail with
		// "context canceled").
		th.SetContext(L.Context())
		cancel()
	}
	defer th.Close()
	th.Push(body)
	for _, a := range args {
		th.Push(a)
	}
	if err := th.PCall(len(args), 0, nil); err != nil {
		if ae, ok := err.(*lua.ApiError); ok {
			return ae.Object.String()
		}
		return err.Error()
	}
	return ""
}
