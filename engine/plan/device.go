package plan

import (
	"errors"
	"fmt"
	"math"

	"github.com/luacoll/luacoll/kernels"
	"github.com/luacoll/luacoll/transport"
	"github.com/luacoll/luacoll/transport/gpu"
	"github.com/luacoll/luacoll/transport/knobs"
)

// device is a plan in "device" mode: its ops compiled into the steps of
// the plan interpreter (kernels.Plan), which runs every replay of a p:run
// in one kernel on the rank's stream.
type device struct {
	s     gpu.PlanStream
	dp    *gpu.DevicePlan
	steps []kernels.PlanStep
	// moving are the steps whose value depends on what ran before (wait
	// targets, barrier epochs); the table holds their values for replay
	// k = 0 of the table, and k is how many replays ran on it since.
	moving []moving
	k      uint64
	// launchMoves: device mode passes the moving values with each launch
	// (kernels.PlanSpec.Moves: a table of at most kernels.PlanCache steps
	// with at most kernels.PlanMoves of them), so the table is never
	// rewritten; moves is the slice each launch fills.
	launchMoves bool
	moves       []kernels.PlanMove
	// stale: the table in device memory is not what steps say (a launch
	// carried the moving values); a launch without them rewrites it.
	stale bool
	gpu   bool
	// graph, in graph mode, is one replay captured (CapturePlan).
	graph *gpu.CUDAGraph
	// segs, in stream mode, are a replay's launches (SplitPlan).
	segs []gpu.PlanSegment
	kmax uint64 // wide copies up to kmax bytes are put kernels, larger ones copy-engine copies
	// blocks and threads: a device-mode plan spread over blocks blocks
	// (spreadSteps); blocks <= 1: one.
	blocks, threads uint32
	// uses counts a replay's uses of each window barrier id and of each
	// pairwise barrier (peer, id).
	uses  map[int]uint64
	puses map[[2]int]uint64
	// launches are the last launchHistory launches (a ring; nextLaunch the
	// next to fill), for naming the replay of a failure reported after
	// later ones (deviceFailure).
	launches   [launchHistory]launch
	nextLaunch int
}

// moving is a step whose value is computed when a run is enqueued.
type moving struct {
	step int
	op   int    // the plan op (waits: its value; barriers: the op that used it)
	bar  int    // barrier id, or -1 for a wait op
	peer int    // pairwise barrier's peer, or -1
	ord  uint64 // which use of the barrier in a replay (from 1)
	per  uint64 // added per replay
	line bool   // a line's flag: the replay's number, from 1
}

// ErrNoDevice says that a plan cannot run in device mode here.
var ErrNoDevice = errors.New("device mode is not available")

// UseDevice compiles the plan for the plan interpreter on the rank's CUDA
// stream; later Runs launch it instead of enqueuing op by op. The error
// (wrapping ErrNoDevice when the backend or the ops rule it out) says why
// it cannot.
func (p *Plan) UseDevice() error { return p.useDevice(modeDevice) }

// UseGraph is UseDevice for graph mode: one replay is captured into a
// CUDA graph whose nodes are the interpreter over runs of signals, waits
// and small copies, put kernels or copy-engine copies (KernelCopyMax) for
// the large ones, and an update of the replay count; each replay of a Run is
// one graph launch.
func (p *Plan) UseGraph() error { return p.useDevice(modeGraph) }

// StreamInline is the largest copy that stream mode leaves to the plan
// interpreter; a larger one is a launch of its own (a put kernel's or a
// copy engine's: KernelCopyMax).
const StreamInline = 64 << 10

// AutoKernelCopy is the largest wide copy (above StreamInline bytes in
// stream mode, above kernels.PlanSmall in graph mode) that a plan on path
// "auto" runs as a put kernel over the whole GPU; a larger one is a copy
// engine's. Measured with scripts/bench/plan-paths.sh on 2 and 4 x H200
// (docs/results/plans.md, "Wide copies"): the
// kernels took less time up to 16 MiB copies (all-gather plans of 64 MiB
// on 4 GPUs), the copy engines from 32 MiB (64 MiB on 2 GPUs).
const AutoKernelCopy = 16 << 20

// KernelCopyMax is the largest wide copy that a plan on window path path
// runs as a put kernel: every one on "sm", none on "ce", up to
// AutoKernelCopy bytes on "auto" (or "").
func KernelCopyMax(path string) uint64 {
	switch path {
	case "sm":
		return math.MaxUint64
	case "ce":
		return 0
	}
	return AutoKernelCopy
}

// FanOutInline is, for a replay mode ("stream", "graph"), the largest copy
// that mode leaves to the plan interpreter: larger copies of one source
// and size in a row (up to FanOutMax, on path auto up to AutoKernelCopy
// bytes each) are one launch of a put kernel that runs them side by side
// (gpu.SplitPlan). 0 for the other modes, which launch no copy of its
// own (device mode's wide steps are the interpreter's).
// The cost model's simulation groups a plan's puts the same way.
func FanOutInline(mode string) uint64 {
	switch mode {
	case "stream":
		return StreamInline
	case "graph":
		return kernels.PlanSmall
	}
	return 0
}

// FanOutMax is the most copies one put kernel launch runs side by side.
const FanOutMax = kernels.PutMultiMax

// UseStream is UseDevice for stream mode: a replay is a few launches on
// the rank's stream, each copy above StreamInline bytes one of its own and
// each run of other ops one launch of the interpreter. It fails (wrapping
// ErrNoDevice) where device mode would; the plan then enqueues op by op.
func (p *Plan) UseStream() error { return p.useDevice(modeStream) }

// StreamLaunches says what a replay launches in stream mode
// ("interpreter=1 copy=2"; "" in other modes).
func (p *Plan) StreamLaunches() string {
	if p.dev == nil || p.dev.segs == nil {
		return ""
	}
	return gpu.SegmentsString(p.dev.segs, p.dev.steps, p.dev.kmax)
}

// How device steps run: one kernel a Run, a graph a replay, or launches on
// the stream.
const (
	modeDevice = iota
	modeGraph
	modeStream
)

func (p *Plan) useDevice(mode int) error {
	r := p.w.Rank()
	s, ok := r.Stream.(gpu.PlanStream)
	be, ok2 := r.Backend.(gpu.PlanBackend)
	if !ok || !ok2 {
		return fmt.Errorf("%w: it needs the CUDA backend", ErrNoDevice)
	}
	return p.useDeviceOn(s, be.NewDevicePlan, allOnMyDevice(r.Topo, r.ID()), mode)
}

// newDevicePlan makes the device's copy of a plan's steps
// (gpu.PlanBackend.NewDevicePlan).
type newDevicePlan func(steps []kernels.PlanStep, fail func(step int, observed, target uint64, cause error) error) (*gpu.DevicePlan, error)

// useDeviceOn is useDevice on stream s, with newPlan making the device's
// table; gpuScope: every peer runs on this GPU.
func (p *Plan) useDeviceOn(s gpu.PlanStream, newPlan newDevicePlan, gpuScope bool, mode int) error {
	d := &device{s: s, gpu: gpuScope, kmax: KernelCopyMax(p.w.Options().Path)}
	if err := p.deviceSteps(d); err != nil {
		return err
	}
	moving := map[int]bool{}
	for _, m := range d.moving {
		moving[m.step] = true
	}
	if mode != modeDevice {
		fanOutReleases(d.steps, moving, func(s kernels.PlanStep) int { return p.ops[s.Op].Peer })
	} else {
		// Line groups first: a group's lines count together toward the
		// blocks a plan spreads over (line steps are no copies, stores or
		// adds: coalesceReleases leaves them, and their runs, in place).
		groupLines(d.steps)
		d.blocks = kernels.PlanSpreadFor(d.steps, uint32(knobs.PlanBlocks.Or(kernels.PlanSpreadBlocks)), kernels.PlanSpreadBytes,
			kernels.PlanSpreadMinFor(len(p.lists)))
		copyMax := uint64(coalesceCopyMax)
		if d.blocks > 1 {
			copyMax = ^uint64(0)
		}
		coalesceReleases(d.steps, moving, copyMax)
		chainReduces(d.steps)
		groupCopies(d.steps)
		groupWaits(d.steps)
		d.spreadSteps()
	}
	if len(d.steps) > 0 {
		p.fillMoving(d)
		dp, err := newPlan(d.steps, p.deviceFailure(d))
		if err != nil {
			return err
		}
		d.dp = dp
		if d.blocks > 1 {
			dp.Spread(d.blocks, d.threads)
		}
		if mode == modeStream {
			d.segs = gpu.SplitPlan(d.steps, StreamInline)
		}
		d.launchMoves = mode == modeDevice && len(d.steps) <= kernels.PlanCache && len(d.moving) <= kernels.PlanMoves
		if mode == modeGraph {
			g, err := s.CapturePlan(dp, d.steps, p.w.Options().Timeout, d.gpu, d.kmax)
			if err != nil {
				_ = dp.Free()
				return fmt.Errorf("graph mode: %w", err)
			}
			d.graph = g
		}
	}
	p.dev = d
	return nil
}

// spreadSteps spreads a device-mode plan over d.blocks blocks
// (kernels.PlanSpreadFor, knobs.PlanBlocks), putting
// in the grid steps it needs and moving the moving steps' indices with
// their steps; where they would make too many steps, it runs on one.
func (d *device) spreadSteps() {
	if d.blocks <= 1 {
		return
	}
	threads := kernels.PlanSpreadThreads(d.steps, d.blocks)
	out, at, ok := kernels.SpreadSteps(d.steps, d.blocks, threads)
	if !ok {
		d.blocks = 1
		return
	}
	for j := range d.moving {
		d.moving[j].step = at[d.moving[j].step]
	}
	d.steps, d.threads = out, threads
}

// deviceSteps compiles the plan's ops into d's steps for the interpreter:
// an error wrapping ErrNoDevice names the op it cannot run (one that
// reaches a peer over the network), or says the plan has too many steps.
func (p *Plan) deviceSteps(d *device) error {
	d.uses, d.puses = map[int]uint64{}, map[[2]int]uint64{}
	if err := p.compile(d); err != nil {
		return err
	}
	if len(d.steps) >= kernels.PlanMaxSteps {
		return fmt.Errorf("%w: %d steps, more than the %d the interpreter takes", ErrNoDevice, len(d.steps), kernels.PlanMaxSteps-1)
	}
	return nil
}

// GraphNodes says what the plan's graph holds ("kernel=3 memcpy=2"; ""
// unless in graph mode).
func (p *Plan) GraphNodes() string {
	if p.dev == nil || p.dev.graph == nil {
		return ""
	}
	return gpu.NodesString(p.dev.graph.Nodes())
}

// DeviceThreads is the interpreter's block size on CUDA (0 elsewhere).
func (p *Plan) DeviceThreads() int {
	if p.dev == nil || p.dev.dp == nil {
		return 0
	}
	return int(p.dev.dp.Threads())
}

// DeviceSpread is how many blocks a device-mode plan runs on, each running
// every step, and how many times a replay they meet (grid steps); 0, 0
// elsewhere or on one block.
func (p *Plan) DeviceSpread() (blocks, grids int) {
	if p.dev == nil || p.dev.dp == nil || p.dev.blocks <= 1 {
		return 0, 0
	}
	for _, s := range p.dev.steps {
		if s.Kind == kernels.StepGrid {
			grids++
		}
	}
	return int(p.dev.blocks), grids
}

// Free releases what device and graph mode hold on the device.
func (p *Plan) Free() error {
	if p.dev == nil || p.dev.dp == nil {
		return nil
	}
	var err error
	if g := p.dev.graph; g != nil {
		p.dev.graph = nil
		err = p.dev.s.DestroyPlanGraph(g)
	}
	return errors.Join(err, p.dev.s.FreePlan(p.dev.dp))
}

// allOnMyDevice reports whether every rank runs on the GPU of rank me.
func allOnMyDevice(t *transport.Topology, me int) bool {
	if t == nil || me >= len(t.Idents) {
		return false
	}
	mine := t.Idents[me]
	for _, id := range t.Idents {
		if id.Host != mine.Host || id.Device != mine.Device {
			return false
		}
	}
	return true
}

// want is the value moving step m must have in the next replay.
func (p *Plan) want(m moving) uint64 {
	switch {
	case m.line:
		return uint64(p.replays) + 1
	case m.bar < 0:
		return p.value(m.op)
	case m.peer < 0:
		return p.w.Raw().BarrierEpoch(m.bar).Use(m.ord)
	}
	return p.w.Raw().PairBarrierEpoch(m.peer, m.bar).Use(m.ord)
}

// fillMoving sets the moving steps' values for the next replay and
// restarts the table's replay count; it reports whether anything changed.
func (p *Plan) fillMoving(d *device) bool {
	changed := false
	for _, m := range d.moving {
		v := p.want(m)
		if d.steps[m.step].Value != v {
			d.steps[m.step].Value = v
			changed = true
		}
	}
	d.k = 0
	return changed
}

// runDevice enqueues times replays in one launch of the interpreter.
// When something else moved the plan's slots or barriers since the last
// run (eager calls, another plan), the table is rewritten first, after
// the stream's earlier work finished.
func (p *Plan) runDevice(times int) error {
	d := p.dev
	if d.dp != nil && d.launchMoves && p.movesNow(d) {
		p.noteLaunch(d, times, 0)
		d.s.RunPlan(d.dp, 0, uint64(times), p.w.Options().Timeout, d.gpu, d.moves)
		d.k = uint64(times)
		p.ranDevice(d, times)
		return nil
	}
	if d.dp != nil {
		for _, m := range d.moving {
			if d.stale || d.steps[m.step].Value+d.k*m.per != p.want(m) {
				d.stale = false
				p.fillMoving(d)
				if err := d.s.RewritePlan(d.dp, d.steps); err != nil {
					return fmt.Errorf("replay %d: %w", p.replays+1, err)
				}
				break
			}
		}
		p.noteLaunch(d, times, d.k)
		switch {
		case d.graph != nil:
			d.s.LaunchPlan(d.dp, d.graph, times)
		case d.segs != nil:
			d.s.RunPlanSegments(d.dp, d.steps, d.segs, d.k, uint64(times), p.w.Options().Timeout, d.gpu, d.kmax)
		default:
			d.s.RunPlan(d.dp, d.k, uint64(times), p.w.Options().Timeout, d.gpu, nil)
		}
		d.k += uint64(times)
	}
	p.ranDevice(d, times)
	return nil
}

// movesNow fills d.moves with every moving step's value for the next
// replay; false when one is too large to go with a launch.
func (p *Plan) movesNow(d *device) bool {
	d.moves = d.moves[:0]
	for _, m := range d.moving {
		v := p.want(m)
		if v >= kernels.PlanMoveMax {
			return false
		}
		d.moves = append(d.moves, kernels.PlanMove{Step: m.step, Value: v})
	}
	// steps keep the launch's values (a failed wait's replay is
	// computed from them); the table in device memory keeps its own.
	for _, m := range d.moves {
		d.steps[m.Step].Value = m.Value
	}
	d.stale = true
	return true
}

// ranDevice advances what times replays of the plan moved: the ledger's
// rows, the window's barriers and the plan's replay count.
func (p *Plan) ranDevice(d *device, times int) {
	for row, dl := range p.delta {
		p.led.Replayed[row] += dl * uint64(times)
	}
	for id, u := range d.uses {
		p.w.Raw().AdvanceBarrier(id, u*uint64(times))
	}
	for key, u := range d.puses {
		p.w.Raw().AdvancePairBarrier(key[0], key[1], u*uint64(times))
	}
	p.replays += times
}
