package allgather

import (
	"context"
	"fmt"
	"strings"

	"github.com/luacoll/luacoll/transport"
	"github.com/luacoll/luacoll/transport/gpu"
	"github.com/luacoll/luacoll/transport/knobs"
	"github.com/luacoll/luacoll/window"
)

// The persistent all-gather on CUDA: the device protocol (an exec counter
// in device memory, one-thread ready/done kernels, copy-engine copies or
// the kernel family of path sm, graphs) is transport/gpu's AGP; this
// file gives it the addresses and the errors.

// Slots of the private synchronization window on CUDA.
const (
	agSigDone  = 0
	agSigReady = 1
)

// Debug knobs of the device protocol: knobs.AGPProtocol forces one
// protocol of paths auto and sm on every exec (gpu.AGPProtocols);
// knobs.AGPTrace=1 makes the ready and done kernels keep a trace whose
// phase medians each rank prints when the all-gather is destroyed.

// openDevice (collective) makes the private window of the CUDA protocol
// and its device state: fresh zeroed slots, so any number of all-gathers,
// eager or graph, may follow one another on the same user window.
func (ag *Persistent) openDevice(ctx context.Context, cs gpu.AGPStream, call string) error {
	c := ag.c
	me, n := ag.me, ag.size
	path := ag.w.Options().Path
	sm := path != "ce"
	// On paths "sm" and "auto" the sync window's data is the staging area
	// of the low-latency execs (zeroed at creation, used by nothing else).
	force, trace := knobs.AGPProtocol.Get(), knobs.AGPTrace.Get() == "1"
	maxN := ag.w.Options().Bytes / uint64(n)
	bytes := uint64(128)
	if sm {
		var err error
		if bytes, err = gpu.AGPStageBytes(n, maxN, force); err != nil {
			return fmt.Errorf("rank %d: %s: %s: %w", me, call, knobs.AGPProtocol.Name, err)
		}
	}
	sw, err := c.NewWindow(ctx, call+":sync", window.Options{Bytes: bytes, Signals: 2, Counters: 1, Barriers: 1,
		Timeout: ag.w.Options().Timeout, Path: "ce"})
	if err != nil {
		return fmt.Errorf("rank %d: %s: %w", me, call, err)
	}
	ag.syncw = sw
	cfg := gpu.AGPConfig{Rank: me, Size: n, Timeout: ag.w.Options().Timeout, Path: path, MaxN: maxN, Force: force, Trace: trace, SharedGPUs: sharedGPUs(c.Rank.Topo),
		ReadyLocal: make([]transport.Addr, n), ReadyRemote: make([]transport.Addr, n),
		DoneLocal: make([]transport.Addr, n), DoneRemote: make([]transport.Addr, n), Bases: make([]transport.Addr, n)}
	raw := sw.Raw()
	for p := 0; p < n; p++ {
		cfg.ReadyLocal[p] = raw.Signal(me, p, agSigReady)
		cfg.ReadyRemote[p] = raw.Signal(p, me, agSigReady)
		cfg.DoneLocal[p] = raw.Signal(me, p, agSigDone)
		cfg.DoneRemote[p] = raw.Signal(p, me, agSigDone)
		cfg.Bases[p] = ag.w.Raw().Data(p, 0)
		if sm {
			cfg.Stage = append(cfg.Stage, raw.Data(p, 0))
		}
	}
	dev, derr := cs.NewAGP(cfg)
	msg := ""
	if derr != nil {
		msg = derr.Error()
	}
	all, err := c.Collective(ctx, call+":device", []byte(msg))
	if err == nil && derr == nil {
		for r, d := range all {
			if len(d) > 0 {
				err = fmt.Errorf("rank %d: %s", r, d)
				break
			}
		}
	}
	if err == nil {
		err = derr
	}
	if err != nil {
		if dev != nil {
			_ = dev.Close()
		}
		return fmt.Errorf("rank %d: %s: device setup: %w", me, call, err)
	}
	ag.dev = dev
	ag.path = dev.Plan() + " over " + strings.TrimPrefix(ag.path, "host copy over ")
	return nil
}

// execDevice enqueues one exec of the CUDA protocol: ready kernel, own
// chunk (copy engine, on a side stream when large), puts to the peers in
// the order rank+1, rank+2, ... (copy engines), done kernel. With graph,
// the first exec of given arguments is captured and later ones replay it.
func (ag *Persistent) execDevice(src *window.Buffer, srcOff, n uint64, inPlace bool) error {
	w := ag.w
	me, size := ag.me, ag.size
	own := uint64(me) * n
	base, err := w.Buffer().Addr()
	if err != nil {
		return ag.errf("%w", err)
	}
	e := gpu.AGPExec{N: n, Graph: ag.graph}
	from := base.Add(own)
	if !inPlace {
		s, err := src.Addr()
		if err != nil {
			return ag.errf("src: %w", err)
		}
		from = s.Add(srcOff)
		e.Own = gpu.AGPPut{Dst: base.Add(own), Src: from}
	}
	for i := 1; i < size; i++ {
		p := (me + i) % size
		e.Puts = append(e.Puts, gpu.AGPPut{Dst: w.Raw().Data(p, own), Src: from})
	}
	e.Fail = func(phase string, k, obs uint64, cause error) error {
		what := ag.failWhat(cause)
		if phase == "done" && obs>>tagNBits == k&tagKMask && obs&tagNMask == agRefusedN {
			return ag.errf("exec #%d: a peer refused it (that rank's error says why)", k)
		}
		if phase == "done" && obs>>tagNBits == k&tagKMask && obs&tagNMask != n {
			return ag.errf("exec #%d: n differs across ranks: a peer passed n=%d, this rank n=%d (%s)", k, obs&tagNMask, n, what)
		}
		if phase == "ready" {
			return ag.errf("exec #%d: waiting for every rank to start the exec (observed exec %d; a rank that has not reached it, or one whose n=%d differs enough to run another protocol): %s", k, obs, n, what)
		}
		return ag.errf("exec #%d: waiting for the peers' chunks (n=%d, observed tag %#x): %s", k, n, obs, what)
	}
	if err := ag.dev.Exec(e); err != nil {
		return ag.errf("exec #%d: %w", ag.dev.Count()+1, err)
	}
	return nil
}

// GraphNodes returns the node counts of the CUDA graph replayed last (nil
// when none).
func (ag *Persistent) GraphNodes() map[string]int {
	if ag.dev == nil {
		return nil
	}
	return ag.dev.GraphNodes()
}

// sharedGPUs reports whether two ranks of the job use one GPU (the same
// answer on every rank: the topology is the job's).
func sharedGPUs(topo *transport.Topology) bool {
	if topo == nil {
		return false
	}
	type place struct{ host, device string }
	seen := map[place]bool{}
	for _, id := range topo.Idents {
		g := place{id.Host, id.Device}
		if seen[g] {
			return true
		}
		seen[g] = true
	}
	return false
}
