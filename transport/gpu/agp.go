package gpu

import (
	"cmp"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/luacoll/luacoll/cuda"
	"github.com/luacoll/luacoll/kernels"
	"github.com/luacoll/luacoll/transport"
)

// AGPConfig places a persistent all-gather's synchronization slots. Each
// slice has one entry per rank (the entry of this rank is ignored): Local
// entries are this rank's slots that rank p writes, Remote entries the
// slots of rank p that this rank writes, as mapped here. Every slot must be
// zero when the CUDAAGP is made and belong to it alone.
type AGPConfig struct {
	Rank, Size              int
	ReadyLocal, ReadyRemote []transport.Addr
	DoneLocal, DoneRemote   []transport.Addr
	Timeout                 time.Duration
	// Path is the window's path. "ce" moves every exec's data by the copy
	// engines between one-thread sync kernels (SM-free, also in graphs);
	// "sm" runs each exec as one kernel launch that moves the data with
	// the SMs (flagged lines for small execs, copy engines beside a copy
	// kernel for the largest); "auto" ("" too) picks per exec by size and
	// rank count from the measured crossovers (agpAuto).
	Path string
	// MaxN is the most bytes per rank an exec can move (the window's
	// bytes over the ranks): the staged area is sized for it. 0: no bound.
	MaxN uint64
	// Force makes every exec take one protocol of AGPProtocols (for
	// measurements; "" or "auto": the crossovers); Trace keeps a trace of
	// the ready and done kernels, printed at Close.
	Force string
	Trace bool
	// SharedGPUs says that some ranks of the job share a GPU (the same on
	// every rank): staged execs then keep a smaller grid.
	SharedGPUs bool
	// Bases are every rank's window data as mapped here (rank order).
	Bases []transport.Addr
	// Stage, with SM, are every rank's staging area for low-latency execs
	// (kernels.AGPLLStageBytes(Size) zeroed bytes each, as mapped here);
	// execs of at most kernels.AGPLLMax bytes per rank then send flagged
	// lines instead of a handshake, a copy and a signal. Nil: none.
	Stage []transport.Addr
}

// AGPStageBytes is the staging area one rank of a job of size ranks needs
// (AGPConfig.Stage) for windows of at most maxN bytes per rank (0: no
// bound) and the protocol force (AGPConfig.Force): the flagged lines'
// area, then the staged execs' one (sized for the largest staged exec).
func AGPStageBytes(size int, maxN uint64, force string) (uint64, error) {
	t, err := agpTune(size, maxN, force, false)
	if err != nil {
		return 0, err
	}
	return kernels.AGPLLStageBytes(size) + kernels.AGPStagedBytes(size, t.stMax), nil
}

// agpCrossover is where the protocols of paths "auto" and "sm" take over
// from one another, for jobs of at least ranks ranks: flagged lines up to
// llMax bytes per rank, staged parts up to stMax, one kernel (handshakes
// and SM puts) up to ceMin, copy-engine puts beside a copy kernel from
// there. The figures come from scripts/bench/ag-crossover.sh on the GPU
// machine; docs/results/allgather-auto.md has the runs.
type agpCrossover struct {
	ranks               int
	llMax, stMax, ceMin uint64
}

// agpCrossovers, by rank count (ascending): measured on 2 and 4 x H200 by
// scripts/bench/ag-crossover.sh (the runs and the table they give are in
// docs/results/allgather-auto.md); jobs of more ranks use the 4-rank
// figures until they are measured.
var agpCrossovers = []agpCrossover{
	{ranks: 2, llMax: 64 << 10, stMax: 4 << 20, ceMin: 128 << 20},
	{ranks: 4, llMax: 64 << 10, stMax: 1 << 20, ceMin: 32 << 20},
}

// agpCrossoverFor returns the crossovers of a job of size ranks.
func agpCrossoverFor(size int) agpCrossover {
	c := agpCrossovers[0]
	for _, x := range agpCrossovers {
		if size >= x.ranks {
			c = x
		}
	}
	return c
}

// AGPPut is one copy of an exec.
type AGPPut struct {
	Dst, Src transport.Addr
}

// AGPExec is one exec of a persistent all-gather on CUDA: the own chunk's
// copy (Own.Src == 0: in place), the puts to the peers in order, all of
// N bytes, between the ready and done kernels.
type AGPExec struct {
	N    uint64
	Own  AGPPut
	Puts []AGPPut
	// Graph captures the exec the first time these arguments are seen and
	// replays the graph afterwards.
	Graph bool
	// Fail builds the error of a failed wait: phase is "ready" or "done",
	// k the exec number, observed the value last seen in the failing slot.
	Fail func(phase string, k, observed uint64, cause error) error
}

// agpSideMin is the smallest own-chunk copy that runs on the side stream,
// overlapped with the puts; smaller ones run in line.
const agpSideMin = 1 << 20

// CUDAAGP is the device side of a persistent all-gather on one stream:
// an exec counter in device memory, the slot address arrays, a side
// stream for the own chunk and the captured graphs. On path "ce" copies
// use the copy engines and the only kernels are the two one-thread sync
// kernels; on path "sm" an exec is one kernel launch.
type CUDAAGP struct {
	s          *CUDAStream
	ak         *kernels.AGPKernels
	mem        cuda.DevicePtr
	ready      kernels.AGPSpec
	done       kernels.AGPSpec
	side       *cuda.Stream
	fork, join *cuda.Event
	graphs     map[agpGraphKey]*CUDAGraph
	last       *CUDAGraph
	// path is the window's path: "ce", or "sm" and "auto", whose execs
	// take the kernel family's protocols (see shape).
	path string
	// bases is a device array of the ranks' window data, stage one of
	// their staging areas (one-launch execs); out is this rank's window
	// data; ctl is the one-launch kernels' control block (16 bytes).
	bases, stage cuda.DevicePtr
	out, ctl     cuda.DevicePtr
	tune         agpTuning
	k            uint64 // execs enqueued (mirrors the device counter)
	rank         int
	// trace is the ready and done kernels' timing record (LUACOLL_AGP_TRACE).
	trace cuda.DevicePtr
}

// NewAGP prepares the device side of a persistent all-gather.
func (s *CUDAStream) NewAGP(cfg AGPConfig) (*CUDAAGP, error) {
	defer onThread()()
	n := cfg.Size
	for _, sl := range [][]transport.Addr{cfg.ReadyLocal, cfg.ReadyRemote, cfg.DoneLocal, cfg.DoneRemote} {
		if len(sl) != n {
			return nil, fmt.Errorf("persistent all-gather: %d slot addresses for %d ranks", len(sl), n)
		}
	}
	if err := s.b.current(); err != nil {
		return nil, err
	}
	ak, err := s.b.k.AGP()
	if err != nil {
		return nil, err
	}
	// One allocation: the counter (offset 0), the one-launch control block
	// (offset 64), then six arrays of n pointers (the ready and done slots,
	// the ranks' window data, their staging areas).
	arr := uint64(n) * 8
	tune, err := agpTune(n, cfg.MaxN, cfg.Force, cfg.Trace)
	if err != nil {
		return nil, err
	}
	tune.stBlocks = kernels.AGPStagedBlocks
	if !cfg.SharedGPUs {
		tune.stBlocks = agpStagedBlocksAlone
	}
	size := 256 + 6*arr
	if tune.trace {
		size += kernels.AGPTraceBytes
	}
	mem, err := s.b.alloc(size)
	if err != nil {
		return nil, fmt.Errorf("persistent all-gather: %w", err)
	}
	a := &CUDAAGP{s: s, ak: ak, mem: mem, graphs: map[agpGraphKey]*CUDAGraph{}, path: cmp.Or(cfg.Path, "auto"), tune: tune, rank: cfg.Rank}
	buf := make([]byte, 6*arr)
	bases, stage := cfg.Bases, cfg.Stage
	if len(bases) != n {
		bases = make([]transport.Addr, n)
	}
	if len(stage) != n {
		stage = make([]transport.Addr, n)
	}
	for i, sl := range [][]transport.Addr{cfg.ReadyRemote, cfg.ReadyLocal, cfg.DoneRemote, cfg.DoneLocal, bases, stage} {
		for p, v := range sl {
			if p == cfg.Rank && i < 4 {
				v = 0
			}
			off := uint64(i)*arr + uint64(p)*8
			for j := 0; j < 8; j++ {
				buf[off+uint64(j)] = byte(uint64(v) >> (8 * j))
			}
		}
	}
	fail := func(err error) (*CUDAAGP, error) {
		_ = a.Close()
		return nil, fmt.Errorf("persistent all-gather: %w", err)
	}
	if err := s.b.drv.MemcpyHtoD(mem.Add(256), buf); err != nil {
		return fail(err)
	}
	// The copy's DMA may still be in flight and the rank's stream does not
	// wait for the default stream: let it land before any exec.
	if err := s.b.ctx.Synchronize(); err != nil {
		return fail(err)
	}
	base := kernels.AGPSpec{Count: mem, Rank: uint32(cfg.Rank), Size: uint32(n), Timeout: cfg.Timeout,
		Abort: s.b.flag.Dev, Record: s.rec.Dev}
	if tune.trace {
		a.trace = mem.Add(256 + 6*arr)
		base.Trace = a.trace
	}
	a.ready, a.done = base, base
	a.ready.Remote, a.ready.Local = mem.Add(256), mem.Add(256+arr)
	a.done.Remote, a.done.Local = mem.Add(256+2*arr), mem.Add(256+3*arr)
	a.ctl = mem.Add(64)
	if len(cfg.Bases) == n {
		a.bases = mem.Add(256 + 4*arr)
		a.out = cuda.DevicePtr(cfg.Bases[cfg.Rank])
		if len(cfg.Stage) == n {
			a.stage = mem.Add(256 + 5*arr)
		}
	}
	if a.side, err = s.b.drv.StreamCreate(); err != nil {
		return fail(err)
	}
	if a.fork, err = s.b.drv.NewSyncEvent(); err != nil {
		return fail(err)
	}
	if a.join, err = s.b.drv.NewSyncEvent(); err != nil {
		return fail(err)
	}
	return a, nil
}

// agpTuning is what an all-gather's execs run by: the crossovers of its
// rank count, as a forced protocol (AGPConfig.Force) changes them, and
// whether its ready and done kernels keep a trace (AGPConfig.Trace).
type agpTuning struct {
	// llMax: largest n sent as flagged lines; stMax: largest n sent as
	// staged parts (0: none); ceMin: from this n up, the puts use the
	// copy engines and the own chunk a copy kernel on the side stream (0:
	// never).
	llMax, stMax, ceMin uint64
	// trace: the ready and done kernels record when they start and end,
	// and Close prints the phases' medians on stderr (execs with separate
	// ready and done kernels only).
	trace bool
	// stBlocks: the staged execs' largest grid (agpStagedBlocks).
	stBlocks uint64
}

// Fixed choices of the kernels' shapes (measured on 2 x H200; the runs are
// in docs/results/allgather-h200x2.md and allgather-auto.md).
const (
	// agpPerSM caps the one-kernel exec's grid, in blocks per SM (one
	// was faster than two at 4 MiB total on 2 and 4 ranks and tied from
	// 16 MiB: docs/results/allgather-auto.md), agpCopyPerSM that of the
	// copy kernel beside the copy engines.
	agpPerSM     = 1
	agpCopyPerSM = 2
	// agpStagedPart is the smallest part of a staged exec.
	agpStagedPart = 4096
	// agpStagedBlocksAlone is the staged execs' largest grid in a job
	// whose every rank is alone on its GPU; where ranks share one, every
	// rank keeps kernels.AGPStagedBlocks, so that every block of every
	// rank's launch can be resident at once (the grid must be the same on
	// every rank: it cuts the chunk into its parts).
	agpStagedBlocksAlone = 128
)

// AGPProtocols are the protocols AGPConfig.Force can name.
var AGPProtocols = []string{"lines", "staged", "kernel", "ce+kernel"}

// agpTune returns the tuning of a job of size ranks whose windows hold at
// most maxN bytes per rank (0: no bound): its crossovers, or with force
// one protocol for every exec it can run (flagged lines up to
// kernels.AGPLLMax, the rest by one kernel).
func agpTune(size int, maxN uint64, force string, trace bool) (agpTuning, error) {
	x := agpCrossoverFor(size)
	t := agpTuning{llMax: x.llMax, stMax: x.stMax, ceMin: x.ceMin, trace: trace}
	switch force {
	case "", "auto":
	case "lines":
		t = agpTuning{llMax: kernels.AGPLLMax, trace: trace}
	case "staged":
		t = agpTuning{stMax: 1 << 30, trace: trace}
	case "kernel":
		t = agpTuning{trace: trace}
	case "ce+kernel":
		t = agpTuning{ceMin: 1, trace: trace}
	default:
		return t, fmt.Errorf("persistent all-gather: protocol %q: want auto or one of %s", force, strings.Join(AGPProtocols, ", "))
	}
	t.llMax = min(t.llMax, kernels.AGPLLMax)
	if maxN > 0 {
		t.stMax = min(t.stMax, maxN)
	}
	return t, nil
}

// agpBracket says how record starts and ends an exec that has separate
// ready and done kernels: fuse replaces the ready kernel by one launch that
// first ends the previous exec (prevN bytes per rank; its done kernel was
// held back), hold leaves this exec's done kernel out (the caller holds
// it). The zero value is a ready and a done kernel.
type agpBracket struct {
	fuse  bool
	prevN uint64
	hold  bool
}

// agpShape is how an exec runs (see record).
type agpShape int

const (
	agpSplit  agpShape = iota // ready kernel, copies, done kernel
	agpLL                     // one flagged-line launch
	agpOne                    // one kernel
	agpStaged                 // one launch of staged parts
)

// shape returns how exec e runs, the address its puts read, whether its
// own chunk moves on the side stream and whether by a copy kernel, and
// whether anything of it is enqueued before its ready kernel.
func (a *CUDAAGP) shape(e AGPExec) (sh agpShape, src transport.Addr, side, ownSM, early bool) {
	src = e.Own.Src
	if src == 0 && len(e.Puts) > 0 {
		src = e.Puts[0].Src // in place: the puts read the own chunk in the window
	}
	// On path "sm", from tune.ceMin up the puts go to the copy engines and
	// the own chunk to a copy kernel on the side stream.
	sm := a.path != "ce"
	ownSM = sm && a.tune.ceMin != 0 && e.N >= a.tune.ceMin
	if sm && !ownSM && a.bases != 0 && src != 0 && e.N > 0 {
		if a.stage != 0 && e.N <= a.tune.llMax {
			return agpLL, src, false, false, false
		}
		if a.stage != 0 && e.N <= a.tune.stMax {
			return agpStaged, src, false, false, false
		}
		return agpOne, src, false, false, false
	}
	side = e.Own.Src != 0 && (e.N >= agpSideMin || ownSM)
	early = !side && e.Own.Src != 0 && e.N > 0
	return agpSplit, src, side, ownSM, early
}

// fusable reports whether exec e may end its predecessor in its first
// launch and leave its own done kernel to its successor: it has separate
// ready and done kernels and enqueues nothing before its ready kernel.
func (a *CUDAAGP) fusable(e AGPExec) bool {
	sh, _, _, _, early := a.shape(e)
	return sh == agpSplit && !early
}

// readyKernel enqueues the start of an exec (see agpBracket).
func (a *CUDAAGP) readyKernel(cs *cuda.Stream, br agpBracket) error {
	if br.fuse {
		return a.ak.DoneReady(cs, a.done, a.ready, br.prevN)
	}
	return a.ak.Ready(cs, a.ready)
}

// doneKernel enqueues the end of an exec of n bytes per rank (see
// agpBracket).
func (a *CUDAAGP) doneKernel(cs *cuda.Stream, n uint64, br agpBracket) error {
	if br.hold {
		return nil
	}
	return a.ak.Done(cs, a.done, n)
}

// record enqueues one exec on cs (the stream, or the stream under capture),
// started and ended as br says (execs of one launch take the zero value).
func (a *CUDAAGP) record(cs *cuda.Stream, e AGPExec, br agpBracket) error {
	sh, src, side, ownSM, _ := a.shape(e)
	switch sh {
	case agpLL:
		return a.ak.LL(cs, a.ready, a.ctl, a.stage, a.out, cuda.DevicePtr(src), e.N, 0)
	case agpOne:
		return a.ak.One(cs, a.ready, a.done, a.ctl, a.bases, cuda.DevicePtr(src), e.N, agpPerSM)
	case agpStaged:
		return a.ak.Staged(cs, a.ready, a.ctl, a.stage, kernels.AGPLLStageBytes(int(a.ready.Size)), kernels.AGPStagedSlot(a.tune.stMax),
			a.out, cuda.DevicePtr(src), e.N, agpStagedPart, a.tune.stBlocks)
	}
	// The own chunk's copy on the side stream starts after the ready
	// kernel: started before it, the copy held the ready kernel back by
	// about its own length (docs/results/allgather-h200x2.md).
	forkSide := func() error {
		if err := a.fork.Record(cs); err != nil {
			return err
		}
		if err := a.side.WaitEvent(a.fork); err != nil {
			return err
		}
		var err error
		if ownSM && a.bases != 0 {
			// One block in 8 of a bulk grid: the put kernel on every SM
			// measured slower, its local copy competing with the puts.
			err = a.ak.Copy(a.side, a.ready.Rank, a.ready.Size, a.bases, cuda.DevicePtr(e.Own.Src), e.N, 0, agpCopyPerSM)
		} else if ownSM {
			err = a.s.b.k.Put(a.side, cuda.DevicePtr(e.Own.Dst), cuda.DevicePtr(e.Own.Src), e.N)
		} else {
			err = a.copy(cuda.DevicePtr(e.Own.Dst), cuda.DevicePtr(e.Own.Src), e.N, a.side)
		}
		if err != nil {
			return err
		}
		return a.join.Record(a.side)
	}
	if !side && e.Own.Src != 0 && e.N > 0 {
		if err := a.copy(cuda.DevicePtr(e.Own.Dst), cuda.DevicePtr(e.Own.Src), e.N, cs); err != nil {
			return err
		}
	}
	if err := a.readyKernel(cs, br); err != nil {
		return err
	}
	if side {
		if err := forkSide(); err != nil {
			return err
		}
	}
	if e.N > 0 {
		for _, p := range e.Puts {
			if err := a.copy(cuda.DevicePtr(p.Dst), cuda.DevicePtr(p.Src), e.N, cs); err != nil {
				return err
			}
		}
	}
	if side {
		if err := cs.WaitEvent(a.join); err != nil {
			return err
		}
	}
	return a.doneKernel(cs, e.N, br)
}

// copy enqueues a copy-engine copy of n bytes on st (one memcpy node
// under capture).
func (a *CUDAAGP) copy(dst, src cuda.DevicePtr, n uint64, st *cuda.Stream) error {
	return a.s.b.drv.MemcpyAsync(dst, src, n, st)
}

// enqueueAGP enqueues an eager exec of a on s. When the operation held on
// s is a's previous exec's done kernel and e can take it (fusable), one
// launch ends that exec and starts e; e's own done kernel is then held in
// turn. Anything else launches a held operation first, as enqueue does.
func (s *CUDAStream) enqueueAGP(a *CUDAAGP, e AGPExec) {
	defer onThread()()
	s.mu.Lock()
	defer s.mu.Unlock()
	fusable := a.fusable(e)
	br := agpBracket{hold: fusable}
	if h := s.held.agp; h != nil && h.a == a && fusable {
		br.fuse, br.prevN = true, h.n
		s.held = heldOp{gen: s.held.gen + 1}
	} else {
		s.flushLocked()
	}
	if s.runLocked(func() error { return a.record(s.s, e, br) }) && br.hold {
		s.holdLocked(heldOp{agp: &heldAGP{a: a, n: e.N}})
	}
}

// agpGraphKey names the graph of an exec: its size and addresses. The
// puts' addresses follow from the own chunk's place and source (the peers'
// windows are mapped once), so the first put stands for all of them.
type agpGraphKey struct {
	n              uint64
	ownDst, ownSrc transport.Addr
	putDst, putSrc transport.Addr
	puts           int
}

func agpKey(e AGPExec) agpGraphKey {
	k := agpGraphKey{n: e.N, ownDst: e.Own.Dst, ownSrc: e.Own.Src, puts: len(e.Puts)}
	if len(e.Puts) > 0 {
		k.putDst, k.putSrc = e.Puts[0].Dst, e.Puts[0].Src
	}
	return k
}

// Exec enqueues one exec, eagerly or (Graph) as a replay of the graph
// captured for these arguments, capturing it first if needed.
func (a *CUDAAGP) Exec(e AGPExec) error {
	if e.Graph {
		key := agpKey(e)
		g := a.graphs[key]
		if g == nil {
			var err error
			if g, err = a.s.Capture(func(cs *cuda.Stream) error { return a.record(cs, e, agpBracket{}) }); err != nil {
				return err
			}
			a.graphs[key] = g
		}
		a.last = g
		g.Launch()
	} else {
		a.s.enqueueAGP(a, e)
	}
	a.k++
	k, fail := a.k, e.Fail
	ready := transport.WaitSpec{Value: k, Cmp: transport.CmpGe, Fail: func(obs uint64, cause error) error {
		if fail == nil {
			return fmt.Errorf("persistent all-gather exec #%d: ready: %v (observed %d)", k, cause, obs)
		}
		return fail("ready", k, obs, cause)
	}}
	done := transport.WaitSpec{Value: kernels.AGPTag(k, e.N), Cmp: transport.CmpEq, Fail: func(obs uint64, cause error) error {
		if fail == nil {
			return fmt.Errorf("persistent all-gather exec #%d: done: %v (observed %#x)", k, cause, obs)
		}
		return fail("done", k, obs, cause)
	}}
	a.s.mu.Lock()
	a.s.pending = append(a.s.pending, &ready, &done)
	a.s.mu.Unlock()
	return nil
}

// Plan says how execs move data, for ag:info() and bench headers.
func (a *CUDAAGP) Plan() string {
	if a.path == "ce" {
		return "ce (copy engines; sync kernels of one thread)"
	}
	var parts []string
	if a.stage != 0 && a.tune.llMax > 0 {
		parts = append(parts, fmt.Sprintf("flagged lines up to %d bytes per rank", a.tune.llMax))
	}
	if a.stage != 0 && a.tune.stMax > a.tune.llMax {
		parts = append(parts, fmt.Sprintf("staged parts up to %d", a.tune.stMax))
	}
	parts = append(parts, "one kernel per exec")
	if a.tune.ceMin > 0 {
		parts = append(parts, fmt.Sprintf("from %d bytes per rank puts by the copy engines, own chunk by a copy kernel", a.tune.ceMin))
	}
	return a.path + " (" + strings.Join(parts, "; ") + ")"
}

// Protocol names how an exec of n bytes per rank moves its data: "lines"
// (flagged lines), "staged" (staged parts), "kernel" (one kernel with
// handshakes), "ce+kernel" (copy-engine puts beside a copy kernel) or
// "ce" (copy engines between sync kernels).
func (a *CUDAAGP) Protocol(n uint64) string {
	sh, _, _, ownSM, _ := a.shape(AGPExec{N: n, Own: AGPPut{Dst: 1, Src: 1}, Puts: []AGPPut{{Dst: 1, Src: 1}}})
	switch sh {
	case agpLL:
		return "lines"
	case agpStaged:
		return "staged"
	case agpOne:
		return "kernel"
	}
	if ownSM {
		return "ce+kernel"
	}
	return "ce"
}

// Count is the number of execs enqueued so far.
func (a *CUDAAGP) Count() uint64 { return a.k }

// GraphNodes returns the node counts of the graph replayed last (nil
// before any graph exec).
func (a *CUDAAGP) GraphNodes() map[string]int {
	if a.last == nil {
		return nil
	}
	return a.last.Nodes()
}

// Close releases the graphs, the side stream, the events and the device
// memory; the stream must be idle.
func (a *CUDAAGP) Close() error {
	defer onThread()()
	if err := a.s.b.current(); err != nil {
		return err
	}
	// A held done kernel of ours launches now and ends before our memory
	// goes (Destroy syncs first, so normally nothing is held here).
	var errs []error
	a.s.mu.Lock()
	a.s.cancelPreLocked()
	if h := a.s.held.agp; h != nil && h.a == a {
		a.s.flushLocked()
		errs = append(errs, a.s.s.Synchronize())
	}
	a.s.mu.Unlock()
	for k, g := range a.graphs {
		errs = append(errs, g.Destroy())
		delete(a.graphs, k)
	}
	if a.side != nil {
		errs = append(errs, a.side.Synchronize(), a.side.Destroy())
		a.side = nil
	}
	for _, ev := range []*cuda.Event{a.fork, a.join} {
		if ev != nil {
			errs = append(errs, ev.Destroy())
		}
	}
	a.fork, a.join = nil, nil
	if a.trace != 0 {
		errs = append(errs, a.printTrace())
		a.trace = 0
	}
	if a.mem != 0 {
		errs = append(errs, a.s.b.free(a.mem))
		a.mem = 0
	}
	return errors.Join(errs...)
}

// printTrace writes the medians of the traced execs' phases to stderr.
func (a *CUDAAGP) printTrace() error {
	if err := a.s.s.Synchronize(); err != nil {
		return err
	}
	raw := make([]byte, kernels.AGPTraceBytes)
	if err := a.s.b.drv.MemcpyDtoH(raw, a.trace); err != nil {
		return err
	}
	p, err := kernels.AGPTraceSummary(raw, a.k)
	if err != nil {
		fmt.Fprintf(os.Stderr, "[%d] persistent all-gather trace: %v\n", a.rank, err)
		return nil
	}
	fmt.Fprintf(os.Stderr, "[%d] persistent all-gather trace: %v\n", a.rank, p)
	return nil
}
