package luabind

import (
	"fmt"

	lua "github.com/yuin/gopher-lua"

	"github.com/luacoll/luacoll/engine/allgather"
)

// agRef is the userdata value of a persistent all-gather.
type agRef struct {
	ag   *allgather.Persistent
	call string
}

func (r *agRef) String() string {
	info := r.ag.Info()
	return fmt.Sprintf("persistent all-gather (%s, %s, %s)", info["algo"], info["path"], info["state"])
}

var agpKeys = []string{"window", "algo", "graph"}

func (c *call) agp() *agRef { return c.L.Get(1).(*lua.LUserData).Value.(*agRef) }

// execRefusal makes a refused ag:exec take part in the exec's handshake
// (see refusal): the peers' waits for this rank fail at once.
var execRefusal = &refusal{
	count: func(c *call) uint64 {
		if r := c.agpOrNil(); r != nil {
			return r.ag.Execs()
		}
		return 0
	},
	join: func(c *call, _ string) {
		if r := c.agpOrNil(); r != nil {
			_ = r.ag.RefuseExec()
		}
	},
}

// agpOrNil is the receiver of an ag method, or nil when the call has none.
func (c *call) agpOrNil() *agRef {
	if ud, ok := c.L.Get(1).(*lua.LUserData); ok {
		if r, ok := ud.Value.(*agRef); ok {
			return r
		}
	}
	return nil
}

func agpEntries() []*Entry {
	const g = "Persistent all-gather"
	exec := fn("ag:exec", "(src, src_off, n)", "", g,
		"Enqueues the gather of n bytes at src_off of src (a buffer or the window) from every rank into every rank's window at rank * n (rank-major); src may be the window itself at offset rank * n (in place). n * size must fit the window; every rank must pass the same n (a mismatch fails the waits as soon as a peer's exec arrives, naming both sizes; sizes far enough apart to run different protocols fail at the window timeout). An exec refused on one rank (a bad argument) still counts there, and the other ranks' waits for it fail at once. Back-to-back execs are safe.",
		func(c *call) int {
			r := c.agp()
			c.check(r.ag.Exec(c.ctx(), c.buffer(0), c.u64(1), c.u64(2)))
			return 0
		})
	exec.refusal = execRefusal
	return []*Entry{
		fn("lc.allgather_persistent", "{window, algo=\"auto\", graph=false}", "ag", g,
			"**collective**: prepares an all-gather into `window` once: algo \"direct\" (every rank puts its chunk straight into every peer, peers in the order rank+1, rank+2, ...), \"ring\" (size-1 steps, each rank forwarding to its right neighbour what came from its left), \"hier\" (two levels, alias \"pipeline\": the ranks with the same index on every node exchange their chunks over the network in pieces, and each forwards every piece to its node's ranks as it arrives) or \"auto\" (on a job of several nodes with several ranks each hier, with the small execs staged in two levels: each chunk crosses the network once, to the rank of its index on every other node, which forwards it to its node's ranks; on the host backend direct for execs of up to direct_up_to = 256 KiB per rank, on CUDA (network peers: the proxy path) ring from ring_from = 2 MiB per rank; else direct); ag:info() gives algo, nodes, ranks_per_node, direct_up_to, ring_from and staged. Ring and hier run on host windows (on CUDA the device protocol runs direct, with a note); graph = true needs --device cuda. On CUDA the window's path picks the protocols: \"auto\" (the default) and \"sm\" take the fastest for each size from a crossover table measured on the GPU machine (flagged lines for the smallest execs, staged parts for the mid sizes, one kernel, copy-engine puts for the largest: ag:protocol(n) names it), \"ce\" moves every exec's data with the copy engines (a replayed graph runs no SM data kernel). On the host, up to 16 KiB per rank goes through a staging area in the all-gather's own shared memory, with no handshake, and each rank copies its peers' chunks into place; across nodes (and on CUDA with network peers) direct execs of up to staged_up_to = 64 KiB per rank do the same through a staging window, with no handshake (larger execs take their guard on its slots, so sizes on both sides of that limit still fail at once). The all-gather owns the window's last signal slot and last barrier slot until destroyed (the script's own signals, waits and barriers there are refused; reading them is allowed); a window holds at most one.",
			newAllGather),
		exec,
		fn("ag:info", "()", "table", g,
			"A table saying what runs: algo_requested, algo, path, state (strings), graph (a boolean), signal_slot and barrier_slot (the slots it owns, numbers); nodes, ranks_per_node, direct_up_to (auto on several nodes), ring_from (auto on the CUDA proxy path: execs of at least this n per rank run ring), staged_up_to (window operations: execs staged with no guard barrier up to this n per rank) and staged (where staged execs run in two levels); on CUDA also sync and execs (a number) and, in graph mode, graph_nodes (the captured nodes per exec by type, as \"kernel=1 memcpy=2\"); and, when the request was changed, note.",
			func(c *call) int {
				t := c.L.NewTable()
				for k, v := range c.agp().ag.Info() {
					switch x := v.(type) {
					case bool:
						c.L.SetField(t, k, lua.LBool(x))
					case int:
						c.L.SetField(t, k, lua.LNumber(x))
					default:
						c.L.SetField(t, k, lua.LString(fmt.Sprint(x)))
					}
				}
				c.L.Push(t)
				return 1
			}),
		fn("ag:protocol", "(n)", "string", g,
			"How an exec of n bytes per rank moves its data, as each row of `bench allgather` names it: on CUDA \"lines\" (flagged 16-byte lines into the peers' staging, no handshake), \"staged\" (each block's part of the chunk into the peers' staging, then a flag; copied into place on arrival), \"kernel\" (one kernel: handshake, SM puts, handshake), \"ce+kernel\" (copy-engine puts beside a copy kernel) or \"ce\" (copy engines between one-thread sync kernels); \"proxy\" where the host drives the network in graph mode; on the host backend \"host\" (direct copies), else the algorithm of the window operations (\"direct\", \"ring\", \"hier\", \"staged\" for staged direct execs, \"staged-hier\" for those staged in two levels).",
			func(c *call) int {
				ag := c.agp().ag
				if ag.Destroyed() {
					c.fail("the all-gather was destroyed (ag:destroy())")
				}
				c.L.Push(lua.LString(ag.Protocol(c.u64(0))))
				return 1
			}),
		fn("ag:destroy", "()", "", g,
			"**collective**: waits for the stream, meets every rank (within the window's timeout_ms, or the job's --timeout when longer) and releases the window's slots; any later use is an error.",
			func(c *call) int {
				c.check(c.agp().ag.Destroy(c.ctx()))
				return 0
			}),
	}
}

func newAllGather(c *call) int {
	L := c.L
	t := c.tableArg(0, agpKeys, "lc.allgather_persistent{window = w}", false)
	wv := L.GetField(t, "window")
	if wv == lua.LNil {
		c.fail("bad argument 'window' (required: the window to gather into)")
	}
	var wr *windowRef
	if ud, ok := wv.(*lua.LUserData); ok {
		wr, _ = ud.Value.(*windowRef)
	}
	if wr == nil {
		c.fail("bad argument 'window' (window expected, got %s)", wv.Type())
	}
	w := wr.w
	if w.Freed() {
		c.fail("bad argument 'window' (window %d has been freed)", w.ID())
	}
	algo := "auto"
	if v := L.GetField(t, "algo"); v != lua.LNil {
		s, ok := v.(lua.LString)
		if !ok {
			c.fail("bad argument 'algo' (string expected, got %s)", v.Type())
		}
		algo = string(s)
	}
	graph := false
	if v := L.GetField(t, "graph"); v != lua.LNil {
		b, ok := v.(lua.LBool)
		if !ok {
			c.fail("bad argument 'graph' (boolean expected, got %s)", v.Type())
		}
		graph = bool(b)
	}
	ag, err := allgather.New(c.ctx(), c.s.Comm, w, algo, graph)
	c.check(err)
	desc := fmt.Sprintf("lc.allgather_persistent{window=%d, algo=%q, graph=%v}", w.ID(), algo, graph)
	c.s.push(&agRef{ag: ag, call: desc}, "ag")
	return 1
}
