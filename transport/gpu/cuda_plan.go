package gpu

import (
	"errors"
	"fmt"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/luacoll/luacoll/cuda"
	"github.com/luacoll/luacoll/kernels"
)

// DevicePlan is a plan's steps in device memory, run by the plan
// interpreter (kernels.Plan) on a rank's stream: every replay of the
// plan's op list in one kernel, with no launch between ops.
type DevicePlan struct {
	b     *CUDABackend
	table cuda.DevicePtr
	steps int
	tag   uint32
	// threads is the interpreter's block size (kernels.PlanThreadsFor),
	// blocks its grid (Spread) and job the job area of a spread plan,
	// after the steps and the epoch.
	threads, blocks uint32
	job             cuda.DevicePtr
	// spread: every block runs the steps (Spread).
	spread bool
	// fail builds the error of step i's wait that saw observed where it
	// waited for target.
	fail func(step int, observed, target uint64, cause error) error
	// stage holds the host copies of rewrites in flight (Rewrite).
	stage *planStage
}

// planStageSlots is how many rewrites of one plan may be in flight on its
// stream at once; one more waits for the oldest copy to have run.
const planStageSlots = 4

// planStage is a ring of pinned host copies of a plan's table, each with
// the event that its copy to the device has run.
type planStage struct {
	mem  *cuda.MappedMem
	slot uint64
	done [planStageSlots]*cuda.Event
	next int
}

func (st *planStage) free() error {
	var errs []error
	for _, e := range st.done {
		if e != nil {
			errs = append(errs, e.Destroy())
		}
	}
	return errors.Join(append(errs, st.mem.Free())...)
}

// planTags numbers device plans, so that a failure record names its plan.
var planTags atomic.Uint32

// NewDevicePlan copies steps to device memory. fail builds the error of a
// step's wait that did not succeed (cause: ErrTimeout or why it was
// aborted).
func (b *CUDABackend) NewDevicePlan(steps []kernels.PlanStep, fail func(step int, observed, target uint64, cause error) error) (*DevicePlan, error) {
	if len(steps) == 0 || len(steps) > kernels.PlanMaxSteps {
		return nil, fmt.Errorf("device plan: %d steps (want 1..%d)", len(steps), kernels.PlanMaxSteps)
	}
	for i, st := range steps {
		if err := st.Check(); err != nil {
			return nil, fmt.Errorf("device plan: step %d (of plan op %d): %w", i, st.Op+1, err)
		}
	}
	// One more slot: the replay count of the plan's graph (Epoch); then
	// the job area (zeroed by write).
	table, err := b.alloc(planJobAt(len(steps)) + kernels.PlanJobSize)
	if err != nil {
		return nil, fmt.Errorf("device plan: %w", err)
	}
	p := &DevicePlan{b: b, table: table, steps: len(steps), tag: planTags.Add(1) % kernels.PlanMaxTag, fail: fail,
		threads: kernels.PlanThreadsFor(steps), blocks: 1}
	p.job = table.Add(planJobAt(len(steps)))
	if err := p.write(steps); err != nil {
		_ = b.free(table)
		return nil, err
	}
	return p, nil
}

// planJobAt is where the job area of a plan of steps steps starts in its
// table: after the steps and the epoch, 128-byte aligned.
func planJobAt(steps int) uint64 {
	return (uint64(steps+1)*kernels.PlanStepSize + 127) &^ 127
}

// Threads is the interpreter's block size for the plan.
func (p *DevicePlan) Threads() uint32 { return p.threads }

// Blocks is the interpreter's grid for the plan.
func (p *DevicePlan) Blocks() uint32 { return max(p.blocks, 1) }

// Spread makes the plan's launches run on blocks blocks of threads
// threads, each running every step (kernels.PlanSpec.Spread): for steps
// made by kernels.SpreadSteps for that grid, launched whole (RunPlan), never
// in segments or a graph.
func (p *DevicePlan) Spread(blocks, threads uint32) {
	p.blocks, p.threads, p.spread = blocks, threads, blocks > 1
}

// Epoch is the device word a graph of the plan (CapturePlan) counts its
// replays in, from 0.
func (p *DevicePlan) Epoch() cuda.DevicePtr {
	return p.table.Add(uint64(p.steps) * kernels.PlanStepSize)
}

// Rewrite replaces the steps (as many as before) in stream order: a copy
// from pinned host memory enqueued on s runs after the work enqueued so
// far (which may read the steps) and before what comes after, so the host
// never waits for the GPU. Plans that take turns on a window (each moves
// the other's slots) rewrite at every call; waiting for the stream there
// made a call cost a round trip between host and GPU (18-20 us on H200).
func (p *DevicePlan) Rewrite(s *CUDAStream, steps []kernels.PlanStep) error {
	if len(steps) != p.steps {
		return fmt.Errorf("device plan: %d steps to rewrite %d", len(steps), p.steps)
	}
	b := append(kernels.EncodePlan(steps), make([]byte, kernels.PlanStepSize)...)
	var err error
	s.enqueue(func() error {
		err = p.rewriteOn(s.s, b)
		return err
	})
	return err
}

// rewriteOn enqueues the copy of b (the encoded steps and a zero epoch)
// to the table on cs, through the next slot of the plan's stage.
func (p *DevicePlan) rewriteOn(cs *cuda.Stream, b []byte) error {
	if p.table == 0 {
		return errors.New("device plan: rewrite after free")
	}
	st := p.stage
	if st == nil {
		slot := (uint64(len(b)) + 255) &^ 255
		mem, err := p.b.drv.AllocMapped(slot * planStageSlots)
		if err != nil {
			return fmt.Errorf("device plan: staging a rewrite: %w", err)
		}
		st = &planStage{mem: mem, slot: slot}
		p.stage = st
	}
	i := st.next
	st.next = (i + 1) % planStageSlots
	if e := st.done[i]; e != nil {
		// Normally long done: planStageSlots rewrites ago.
		if err := e.Synchronize(); err != nil {
			return fmt.Errorf("device plan: rewrite: %w", err)
		}
	} else {
		e, err := p.b.drv.EventCreate(cuda.EventDisableTiming)
		if err != nil {
			return fmt.Errorf("device plan: rewrite: %w", err)
		}
		st.done[i] = e
	}
	host := st.mem.Bytes()[uint64(i)*st.slot:]
	copy(host, b)
	if err := p.b.drv.MemcpyHtoDAsync(p.table, unsafe.Pointer(&host[0]), uint64(len(b)), cs); err != nil {
		return fmt.Errorf("device plan: rewrite: %w", err)
	}
	if err := st.done[i].Record(cs); err != nil {
		return fmt.Errorf("device plan: rewrite: %w", err)
	}
	return nil
}

// write copies steps to the device and zeroes the epoch and the job area
// (no work that reads them may be in flight).
func (p *DevicePlan) write(steps []kernels.PlanStep) error {
	defer onThread()()
	if err := p.b.current(); err != nil {
		return err
	}
	b := kernels.EncodePlan(steps)
	b = append(b, make([]byte, planJobAt(len(steps))+kernels.PlanJobSize-uint64(len(b)))...)
	if err := p.b.drv.MemcpyHtoD(p.table, b); err != nil {
		return fmt.Errorf("device plan: %w", err)
	}
	return nil
}

// Free releases the device memory of the steps (the driver waits for
// kernels that may still read it) and the stage of its rewrites (the
// caller drained the stream first: FreePlan).
func (p *DevicePlan) Free() error {
	if p.table == 0 {
		return nil
	}
	t := p.table
	p.table = 0
	err := p.b.free(t)
	if st := p.stage; st != nil && p.b.ctx != nil {
		p.stage = nil
		defer onThread()()
		if cerr := p.b.current(); cerr != nil {
			return errors.Join(err, cerr)
		}
		err = errors.Join(err, st.free())
	}
	return err
}

// drain waits until the work enqueued on s so far has run, leaving any
// error it hit for the next Sync.
func (s *CUDAStream) drain() error {
	defer onThread()()
	s.lock()
	s.flushLocked()
	s.mu.Unlock()
	if err := s.b.current(); err != nil {
		return err
	}
	return s.s.Synchronize()
}

// RunPlan enqueues replays rep0 .. rep0+times-1 of p on s, in one launch
// of the plan interpreter. gpuScope orders signals at GPU scope (every
// peer the plan touches runs on this GPU). moves, when not empty, set
// moving values for replay rep0 in the kernel's copy of the table
// (kernels.PlanSpec.Moves) instead of a rewrite. A failed wait ends the
// launch and is reported by the next Sync, through p's fail.
func (s *CUDAStream) RunPlan(p *DevicePlan, rep0, times uint64, timeout time.Duration, gpuScope bool, moves []kernels.PlanMove) {
	if p.table == 0 {
		s.Fail(errors.New("device plan: run after free"))
		return
	}
	// Every step of every replay: one run of the whole plan, times over.
	spec := s.planSpec(p, PlanSegment{From: 0, To: p.steps}, timeout, gpuScope)
	spec.Count *= times
	spec.Rep0 = rep0
	if s.serve != nil {
		spec.Moves = moves
		if s.runServed(p, spec) {
			return
		}
	}
	// The launch may be held past the return: the caller may reuse moves.
	spec.Moves = append([]kernels.PlanMove(nil), moves...)
	s.enqueue(func() error {
		if err := s.b.k.Plan(s.s, spec); err != nil {
			return err
		}
		s.plans = append(s.plans, p)
		return nil
	})
}

// blamePlan is blame for a record the plan interpreter wrote.
func (s *CUDAStream) blamePlan(rec kernels.Record, cause error) (waitFailure, bool) {
	tag, step, ok := kernels.DecodePlanFailure(rec.Slot)
	if !ok {
		return waitFailure{}, false
	}
	for _, p := range s.plans {
		if p.tag == tag && p.fail != nil {
			observed, target := rec.Observed, rec.Target
			return waitFailure{build: func() error { return p.fail(step, observed, target, cause) }}, true
		}
	}
	return waitFailure{plain: fmt.Errorf("device plan: step %d: %v (observed %d, target %d)", step, cause, rec.Observed, rec.Target)}, true
}

// planSpec is the interpreter launch of steps [g.From, g.To) of p.
func (s *CUDAStream) planSpec(p *DevicePlan, g PlanSegment, timeout time.Duration, gpuScope bool) kernels.PlanSpec {
	return kernels.PlanSpec{Steps: p.table, Period: uint32(p.steps), First: uint32(g.From), Count: uint64(g.To - g.From),
		Timeout: timeout, Abort: s.b.flag.Dev, Record: s.rec.Dev, Tag: p.tag,
		GPUScope: gpuScope, Threads: p.threads, Blocks: p.blocks, Job: p.job, Spread: p.spread}
}

// planLauncher enqueues a replay's segments on cs, an own-memory copy on
// the plan's side stream, joined back before what may depend on it.
type planLauncher struct {
	s     *CUDAStream
	cs    *cuda.Stream
	kmax  uint64            // copies up to this many bytes are put kernels
	aside *kernels.PlanStep // the copy running on the side, if any
}

// seg enqueues segment g of steps; interp launches an interpreter
// segment.
func (pl *planLauncher) seg(steps []kernels.PlanStep, g PlanSegment, interp func(g PlanSegment) error) error {
	if !g.Copy {
		if err := pl.join(); err != nil {
			return err
		}
		return interp(g)
	}
	group := steps[g.From:g.To]
	st := group[0]
	if pl.aside != nil && pl.touchesAside(group) {
		if err := pl.join(); err != nil {
			return err
		}
	}
	if !g.Aside || pl.aside != nil {
		return pl.s.launchCopy(pl.cs, group, pl.kmax)
	}
	sd, err := pl.s.planSideStream()
	if err != nil {
		return err
	}
	if err := sd.fork.Record(pl.cs); err != nil {
		return err
	}
	if err := sd.s.WaitEvent(sd.fork); err != nil {
		return err
	}
	// A copy kernel: the copy engines are busy with the puts beside it
	// (a copy-engine copy or none aside measured the same: plans.md).
	if err := pl.s.b.k.Put(sd.s, st.Dst, st.Src, st.N); err != nil {
		return err
	}
	if err := sd.join.Record(sd.s); err != nil {
		return err
	}
	pl.aside = &st
	return nil
}

// touchesAside reports whether a step of group writes what the copy on
// the side reads or writes, or reads what it writes.
func (pl *planLauncher) touchesAside(group []kernels.PlanStep) bool {
	a := pl.aside
	for _, st := range group {
		if overlaps(st.Dst, st.N, a.Dst, a.N) || overlaps(st.Src, st.N, a.Dst, a.N) || overlaps(st.Dst, st.N, a.Src, a.N) {
			return true
		}
	}
	return false
}

// join makes cs wait for the copy on the side, if any.
func (pl *planLauncher) join() error {
	if pl.aside == nil {
		return nil
	}
	pl.aside = nil
	return pl.cs.WaitEvent(pl.s.planSide.join)
}

func overlaps(a cuda.DevicePtr, n uint64, b cuda.DevicePtr, m uint64) bool {
	return uint64(a) < uint64(b)+m && uint64(b) < uint64(a)+n
}

// planSideStream returns the side stream of plans' own-memory copies,
// made on first use.
func (s *CUDAStream) planSideStream() (*sideStream, error) {
	if s.planSide != nil {
		return s.planSide, nil
	}
	drv := s.b.drv
	st, err := drv.StreamCreate()
	if err != nil {
		return nil, err
	}
	fork, err := drv.NewSyncEvent()
	if err != nil {
		_ = st.Destroy()
		return nil, err
	}
	join, err := drv.NewSyncEvent()
	if err != nil {
		_ = st.Destroy()
		_ = fork.Destroy()
		return nil, err
	}
	s.planSide = &sideStream{st, fork, join}
	return s.planSide, nil
}

// launchCopy enqueues a copy segment's steps on cs (SplitPlan), as
// launchGroups cuts them: a put kernel's up to kmax bytes a copy (one
// launch for a group of one source), a copy engine's above (one a copy);
// reductions as one chain where 16-byte aligned, else one launch each.
func (s *CUDAStream) launchCopy(cs *cuda.Stream, group []kernels.PlanStep, kmax uint64) error {
	for _, g := range launchGroups(group, kmax) {
		if err := s.launchOne(cs, g, kmax); err != nil {
			return err
		}
	}
	return nil
}

// launchOne enqueues one launch of launchGroups.
func (s *CUDAStream) launchOne(cs *cuda.Stream, g []kernels.PlanStep, kmax uint64) error {
	st := g[0]
	if st.Kind == kernels.StepReduce {
		t, op := kernels.ReduceStepOf(st.Value)
		if len(g) > 1 {
			return s.b.k.ReduceChain(cs, st.Dst, sources(g), st.N/t.Size(), t, op)
		}
		return s.b.k.Reduce(cs, st.Dst, st.Src, st.N/t.Size(), t, op)
	}
	if st.N > kmax {
		return s.b.drv.MemcpyAsync(st.Dst, st.Src, st.N, cs)
	}
	if len(g) > 1 {
		dsts := make([]cuda.DevicePtr, len(g))
		for i, m := range g {
			dsts[i] = m.Dst
		}
		return s.b.k.PutMulti(cs, dsts, st.Src, st.N)
	}
	return s.b.k.Put(cs, st.Dst, st.Src, st.N)
}

// CapturePlan captures one replay of p into a CUDA graph on s: each run of
// thread-0 steps (signals, waits, small copies) and each fill is a node
// of the plan interpreter reading its replay from p's epoch; each wide
// copy is a put kernel over the whole GPU up to kmax bytes, a copy-engine
// copy above; the last node advances the epoch. steps are p's, as written.
func (s *CUDAStream) CapturePlan(p *DevicePlan, steps []kernels.PlanStep, timeout time.Duration, gpuScope bool, kmax uint64) (*CUDAGraph, error) {
	if len(steps) != p.steps {
		return nil, fmt.Errorf("device plan: capture of %d steps, %d written", len(steps), p.steps)
	}
	segs := SplitPlan(steps, kernels.PlanSmall)
	return s.Capture(func(cs *cuda.Stream) error {
		pl := &planLauncher{s: s, cs: cs, kmax: kmax}
		interp := func(g PlanSegment) error {
			sp := s.planSpec(p, g, timeout, gpuScope)
			sp.Epoch = p.Epoch()
			return s.b.k.Plan(cs, sp)
		}
		for _, g := range segs {
			if err := pl.seg(steps, g, interp); err != nil {
				return err
			}
		}
		if err := pl.join(); err != nil {
			return err
		}
		return s.b.k.CounterAdd(cs, p.Epoch(), 1)
	})
}

// RunPlanSegments enqueues replays rep0 .. rep0+times-1 of p on s launch by
// launch, as segs (SplitPlan of steps, p's as written) cut them; a plan of
// one interpreter segment runs every replay in one launch (RunPlan). A
// failed wait ends its launch and poisons the ones after it (they return
// at once); the next Sync reports it through p's fail.
func (s *CUDAStream) RunPlanSegments(p *DevicePlan, steps []kernels.PlanStep, segs []PlanSegment, rep0, times uint64, timeout time.Duration, gpuScope bool, kmax uint64) {
	if len(segs) == 1 && !segs[0].Copy {
		s.RunPlan(p, rep0, times, timeout, gpuScope, nil)
		return
	}
	if p.table == 0 {
		s.Fail(errors.New("device plan: run after free"))
		return
	}
	// fuse: the last run of steps of a replay and the first of the next
	// are one launch; the call's last one is held for the next call.
	last := len(segs) - 1
	fuse := s.b.planFuse && len(segs) >= 2 && !segs[0].Copy && !segs[last].Copy && segs[0].From == 0 && segs[last].To == p.steps
	head := uint64(0)
	if fuse {
		head = uint64(segs[0].To)
	}
	defer onThread()()
	s.lock()
	defer s.mu.Unlock()
	var tail *heldPlan
	if h := s.held.plan; fuse && h != nil && h.p == p && h.spec.Rep0+1 == rep0 {
		tail = h
		s.held = heldOp{gen: s.held.gen + 1}
	} else {
		s.flushLocked()
	}
	var hold *heldPlan
	ok := s.runLocked(func() error {
		pl := &planLauncher{s: s, cs: s.s, kmax: kmax}
		for r := rep0; r < rep0+times; r++ {
			interp := func(g PlanSegment) error {
				sp := s.planSpec(p, g, timeout, gpuScope)
				sp.Rep0 = r
				return s.b.k.Plan(s.s, sp)
			}
			for j, g := range segs {
				switch {
				case fuse && j == 0 && r > rep0:
					// Launched with the previous replay's last run.
				case fuse && j == 0 && tail != nil:
					sp := tail.spec
					sp.Count += head
					if err := s.b.k.Plan(s.s, sp); err != nil {
						return err
					}
				case fuse && j == last:
					if err := pl.join(); err != nil {
						return err
					}
					sp := s.planSpec(p, g, timeout, gpuScope)
					sp.Rep0 = r
					if r+1 == rep0+times {
						hold = &heldPlan{p: p, spec: sp}
						break
					}
					sp.Count += head
					if err := s.b.k.Plan(s.s, sp); err != nil {
						return err
					}
				default:
					if err := pl.seg(steps, g, interp); err != nil {
						return err
					}
				}
			}
			if err := pl.join(); err != nil {
				return err
			}
		}
		s.plans = append(s.plans, p)
		return nil
	})
	if ok && hold != nil {
		s.holdLocked(heldOp{plan: hold})
	}
}

// FreePlan frees p once the work enqueued on s so far has run (a launch
// of p held back included).
func (s *CUDAStream) FreePlan(p *DevicePlan) error {
	return errors.Join(s.drain(), p.Free())
}

// LaunchPlan enqueues times replays of g, a graph CapturePlan made of p.
func (s *CUDAStream) LaunchPlan(p *DevicePlan, g *CUDAGraph, times int) {
	s.enqueue(func() error {
		for range times {
			if err := g.exec.Launch(s.s); err != nil {
				return err
			}
		}
		s.plans = append(s.plans, p)
		return nil
	})
}

// DestroyPlanGraph destroys g once the work enqueued on s so far has run.
func (s *CUDAStream) DestroyPlanGraph(g *CUDAGraph) error {
	return errors.Join(s.drain(), g.Destroy())
}

// Failed implements transport.Failer: an error the stream recorded since
// the last Sync (its own, a released wait's, an interrupt) or a failure a
// device wait wrote in the record, without asking the driver. Sync then
// reports it in full.
func (s *CUDAStream) Failed() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return errStreamClosed
	}
	err := s.err
	if err == nil {
		err = s.memErr
	}
	if err == nil {
		err = s.interrupt
	}
	// Under mu: Close frees the record only after it marked the stream
	// closed under mu.
	if err == nil && atomic.LoadUint32((*uint32)(s.rec.Host)) != uint32(kernels.StatusOK) {
		err = errors.New("a device wait failed")
	}
	s.mu.Unlock()
	return err
}
