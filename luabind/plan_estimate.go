package luabind

import (
	"fmt"
	"runtime"

	lua "github.com/yuin/gopher-lua"

	"github.com/luacoll/luacoll/engine/plan/cost"
	"github.com/luacoll/luacoll/transport"
)

func planEstimateEntries() []*Entry {
	return []*Entry{
		fn("p:estimate", "{model?, mode?, layout?, cpus?}", "table", "Plans",
			"Predicts one replay of the plan from every rank's op list and a cost model (no collective, nothing runs): each rank runs its ops in order, a put costs its class's start cost plus its bytes times the per-byte cost, a wait ends when the signal it needs lands, a barrier when the last rank arrives; every op first pays its class's op cost (the replay's software time per op), a flush with nothing in flight the model's flush cost instead, a flush after puts or signals to a network peer ends one hop (the model's 8-byte put_signal and wait) after the last of them landed, and each rank's first op the replay's fixed cost; a put that reads bytes another rank wrote into this rank's window pays the model's moved cost for them (once: its processor holds them then); on the host backend, without layout, where the bytes the ranks of this machine touch outgrow half its processors' cache, the part that does not fit costs the model's memory figure a byte, shared by the ranks that copy at once; on the host backend, without layout, ranks of this machine that outnumber its CPUs take turns on them, each running until it blocks, and a CPU's passing from one rank to another costs the model's switch cost (cpus = N: as if a host had N CPUs, 0: a CPU for each rank). model is a JSON file `luacoll calibrate` wrote (default: the model shipped for this rank's backend); mode picks the model's replay mode (default: the plan's, \"host\" under luacoll check). Classes come from the topology: self, the class of this rank's local peers within a node, net between nodes; layout = \"NxM\" (N nodes of M consecutive ranks, N x M the plan's ranks) places the ranks so instead, to ask what the same op lists would take across nodes. Returns {time (seconds, the slowest rank), steady (seconds a replay takes in a loop of replays back to back, as p:run{times = N} and the benches run them: from when the last rank ends the first of 4 to when it ends the last, over 3), call (seconds one p:run of one replay takes when such calls come back to back: steady and the model's call cost, on CUDA a launch a call), per_rank = {seconds of rank 0, ...}, path = {{rank, op, op_name, peer, class, start, finish, start_cost, link, file, line}, ...} (the critical path, first op first, times in seconds), link and start_cost (the path's time moving bytes and starting ops: they add up to time), mode, machine (where the model was measured), borrowed (classes the plan uses that the model lacks, estimated with the nearest it has)}. Under `luacoll check` only rank 0 holds every rank's list and may call it. It leaves out contention on shared links, the copy engines' count and network congestion (docs/design.md).",
			estimatePlan),
	}
}

func estimatePlan(c *call) int {
	r := c.planRef()
	t := c.tableArg(0, []string{"model", "mode", "layout", "cpus"}, "p:estimate{model = \"host.json\"}", true)
	path, mode := c.strField(t, "model", ""), c.strField(t, "mode", "")
	classes := classesOf(c.s.Comm.Rank.Topo)
	cpus := hostCPUs(c.s)
	if lay := c.strField(t, "layout", ""); lay != "" {
		cpus = 0
		per, err := parseLayout(lay, len(r.p.Lists()))
		if err != nil {
			c.fail("bad argument 'layout' (%v)", err)
		}
		classes = layoutClasses(per, localKind(c.s.Comm.Rank.Topo) == transport.KindNVL)
	}
	var m *cost.Model
	var err error
	if path == "" {
		m, err = cost.Default(c.s.Comm.Backend.Name())
		if err != nil {
			c.fail("bad argument 'model' (%v)", err)
		}
	} else if m, err = cost.Load(path); err != nil {
		c.fail("bad argument 'model' (%v)", err)
	}
	if r.mode == modeCheck && c.s.rank() != 0 {
		c.fail("under luacoll check only rank 0 holds every rank's op list: estimate there (if lc.rank == 0 then ... end)")
	}
	if mode == "" {
		mode = r.mode
		if mode == modeCheck {
			mode = modeHost
		}
	}
	if _, ok := m.Modes[mode]; !ok {
		c.fail("bad argument 'mode' (the model has no mode %q; it has %v)", mode, m.ModeNames())
	}
	if mode != modeHost {
		cpus = 0
	}
	if t != nil && t.RawGetString("cpus") != lua.LNil {
		n := c.field(t, "cpus", 0)
		if n > 1<<20 {
			c.fail("bad argument 'cpus' (%d: want at most 2^20)", n)
		}
		cpus = int(n)
	}
	res, err := cost.Estimate(m, cost.Input{Lists: r.p.Lists(), Mode: mode, Class: classes, CPUs: cpus, Replays: SteadyReplays})
	c.check(err)
	c.L.Push(EstimateTable(c.L, res, m))
	return 1
}

// hostCPUs is how many processors this machine's ranks share on the host
// backend (whose streams are threads): the CPUs the process could use as
// it started, as the engine counts them to tell whether ranks outnumber
// them; 0 on other backends, whose ops run on devices.
func hostCPUs(s *State) int {
	if s.Comm == nil || s.Comm.Backend == nil || s.Comm.Backend.Name() != "host" {
		return 0
	}
	return runtime.NumCPU()
}

// classesOf returns how every rank reaches every other as this rank's
// topology tells: over the network where it says so, else as this rank
// reaches its own local peers.
func classesOf(topo *transport.Topology) func(a, b int) transport.PeerKind {
	local := localKind(topo)
	return func(a, b int) transport.PeerKind {
		switch {
		case a == b:
			return transport.KindSelf
		case topo != nil && a < len(topo.Net) && b < len(topo.Net[a]) && topo.Net[a][b]:
			return transport.KindNet
		}
		return local
	}
}

// localKind is how this rank reaches the peers of its node: nvl where it
// maps a GPU peer, else shm.
func localKind(topo *transport.Topology) transport.PeerKind {
	if topo != nil {
		for _, k := range topo.Kinds {
			if k == transport.KindNVL {
				return k
			}
		}
	}
	return transport.KindSHM
}

// parseLayout reads "NxM" (N nodes of M ranks) for a plan of ranks ranks
// and returns M.
func parseLayout(s string, ranks int) (int, error) {
	var nodes, per int
	if _, err := fmt.Sscanf(s, "%dx%d", &nodes, &per); err != nil || nodes < 1 || per < 1 || fmt.Sprintf("%dx%d", nodes, per) != s {
		return 0, fmt.Errorf("%q: want NODESxRANKS, e.g. \"2x4\"", s)
	}
	if nodes*per != ranks {
		return 0, fmt.Errorf("%q places %d ranks; the plan has %d", s, nodes*per, ranks)
	}
	return per, nil
}

// layoutClasses places ranks in nodes of per consecutive ranks: self,
// nvl (gpu) or shm within a node, net between nodes.
func layoutClasses(per int, gpu bool) func(a, b int) transport.PeerKind {
	if gpu {
		return LayoutClasses(per, transport.KindNVL)
	}
	return LayoutClasses(per, transport.KindSHM)
}

// LayoutClasses returns the link class between two ranks of a layout of
// nodes of per ranks: self, local within a node, net between nodes.
func LayoutClasses(per int, local transport.PeerKind) func(a, b int) transport.PeerKind {
	return func(a, b int) transport.PeerKind {
		switch {
		case a == b:
			return transport.KindSelf
		case a/per == b/per:
			return local
		}
		return transport.KindNet
	}
}

// EstimateTable is an estimate as p:estimate returns it (times in seconds).
func EstimateTable(L *lua.LState, res *cost.Result, m *cost.Model) *lua.LTable {
	const s = 1e-9
	t := L.NewTable()
	t.RawSetString("time", lua.LNumber(res.Time*s))
	t.RawSetString("steady", lua.LNumber(res.Steady*s))
	t.RawSetString("call", lua.LNumber(res.PerCall*s))
	t.RawSetString("link", lua.LNumber(res.Link*s))
	t.RawSetString("start_cost", lua.LNumber(res.StartCost*s))
	t.RawSetString("mode", lua.LString(res.Mode))
	t.RawSetString("machine", lua.LString(m.Machine))
	per := L.NewTable()
	for _, v := range res.PerRank {
		per.Append(lua.LNumber(v * s))
	}
	t.RawSetString("per_rank", per)
	bor := L.NewTable()
	for _, b := range res.Borrowed {
		bor.Append(lua.LString(b))
	}
	t.RawSetString("borrowed", bor)
	path := L.NewTable()
	for _, st := range res.Path {
		e := L.NewTable()
		e.RawSetString("rank", lua.LNumber(st.Rank))
		e.RawSetString("op", lua.LNumber(st.Op))
		e.RawSetString("op_name", lua.LString(st.Kind.String()))
		if st.Peer >= 0 {
			e.RawSetString("peer", lua.LNumber(st.Peer))
			e.RawSetString("class", lua.LString(st.Class.String()))
		}
		e.RawSetString("start", lua.LNumber(st.Start*s))
		e.RawSetString("finish", lua.LNumber(st.End*s))
		e.RawSetString("start_cost", lua.LNumber(st.StartCost*s))
		e.RawSetString("link", lua.LNumber(st.Link*s))
		e.RawSetString("file", lua.LString(st.Site.File))
		e.RawSetString("line", lua.LNumber(st.Site.Line))
		path.Append(e)
	}
	t.RawSetString("path", path)
	return t
}

// SteadyReplays is how many replays back to back the bench's prediction,
// p:estimate's steady and luacoll calibrate's fits simulate: the first,
// and what the next ones take in a loop.
const SteadyReplays = 4

// predict notes in PlanPredicted the time per exec the cost model gives
// plan r of chunk n holding execs execs, run as the bench runs it (one
// p:run of one replay a call: Result.PerCall); without a model for the backend,
// or when the estimate fails, it notes nothing (the bench prints "-").
func (s *State) predict(r *planRef, n uint64, execs int) {
	m := s.CostModel
	if m == nil {
		var err error
		if m, err = cost.Default(s.Comm.Backend.Name()); err != nil {
			return
		}
	}
	mode := r.mode
	if _, ok := m.Modes[mode]; !ok {
		return
	}
	cpus := 0
	if mode == modeHost {
		cpus = hostCPUs(s)
	}
	res, err := cost.Estimate(m, cost.Input{Lists: r.p.Lists(), Mode: mode, Class: classesOf(s.Comm.Rank.Topo), CPUs: cpus, Replays: SteadyReplays})
	if err != nil {
		return
	}
	if s.PlanPredicted == nil {
		s.PlanPredicted = map[uint64]float64{}
	}
	// The bench calls p:run once a call of the plan (each holds execs).
	s.PlanPredicted[n] = res.PerCall * 1e-9 / float64(execs)
}
