package plan

import (
	"errors"
	"fmt"
	"sort"

	"github.com/luacoll/luacoll/cuda"
	"github.com/luacoll/luacoll/kernels"
	"github.com/luacoll/luacoll/transport"
	"github.com/luacoll/luacoll/transport/gpu"
	"github.com/luacoll/luacoll/transport/knobs"
	"github.com/luacoll/luacoll/window"
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
	sm   bool // large copies by put kernel (path "sm"), not copy engine
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
// and small copies, copy-engine copies (put kernels on path "sm") for the
// large ones, and an update of the replay count; each replay of a Run is
// one graph launch.
func (p *Plan) UseGraph() error { return p.useDevice(modeGraph) }

// StreamInline is the largest copy that stream mode leaves to the plan
// interpreter; a larger one is a launch of its own (a copy engine's, or a
// put kernel's on path "sm").
const StreamInline = 64 << 10

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
	return gpu.SegmentsString(p.dev.segs)
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
	d := &device{s: s, gpu: gpuScope, sm: p.w.Options().Path == "sm"}
	if err := p.deviceSteps(d); err != nil {
		return err
	}
	if mode == modeDevice {
		moving := map[int]bool{}
		for _, m := range d.moving {
			moving[m.step] = true
		}
		// Line groups first: a group's lines count together toward the
		// blocks a plan spreads over (line steps are no copies, stores or
		// adds: coalesceReleases leaves them, and their runs, in place).
		groupLines(d.steps)
		d.blocks = kernels.PlanSpreadFor(d.steps, uint32(knobs.PlanBlocks.Or(kernels.PlanSpreadBlocks)), kernels.PlanSpreadBytes)
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
			g, err := s.CapturePlan(dp, d.steps, p.w.Options().Timeout, d.gpu, d.sm)
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

// compiler turns a plan's ops into the steps of a device plan.
type compiler struct {
	p          *Plan
	d          *device
	raw, lines window.Raw // the plan's window and its line window
	me, n      int
	// drains are this rank's line drains (lines.go), by the op they come
	// before; sendFirst is kernels.LineSendFirst when a drain may send
	// the next step's line before it writes its payload (no peer reads
	// this rank's window: no get or reduce_from from it), else 0.
	drains    map[int][]LineRef
	sendFirst uint32
}

// compile turns the ops into steps.
func (p *Plan) compile(d *device) error {
	w := p.w
	c := &compiler{p: p, d: d, raw: w.Raw(), lines: p.lineWin.Raw(), me: w.Rank().ID(), n: w.Rank().N()}
	c.planDrains()
	for i := range p.ops {
		c.drainSteps(i)
		sent, err := c.linePut(i)
		if err != nil {
			return err
		}
		if sent {
			continue
		}
		if err := c.op(i); err != nil {
			return err
		}
	}
	d.setPerReplay(p)
	return nil
}

// setPerReplay sets what a replay adds to each moving value.
func (d *device) setPerReplay(p *Plan) {
	for j := range d.moving {
		m := &d.moving[j]
		switch {
		case m.line:
			m.per = 1
		case m.bar < 0:
			for _, r := range p.rows[m.op] {
				m.per += p.delta[r]
			}
		case m.peer < 0:
			m.per = d.uses[m.bar]
		default:
			m.per = d.puses[[2]int{m.peer, m.bar}]
		}
		d.steps[m.step].Step = m.per
	}
}

// planDrains lists this rank's line drains by the op they come before,
// in the order of sender and op, and decides sendFirst.
func (c *compiler) planDrains() {
	p := c.p
	c.drains = map[int][]LineRef{}
	for ref, li := range p.lines {
		if li.Receiver == c.me {
			c.drains[li.Drain] = append(c.drains[li.Drain], ref)
		}
	}
	for _, refs := range c.drains {
		sort.Slice(refs, func(a, b int) bool {
			return refs[a].Sender < refs[b].Sender || refs[a].Sender == refs[b].Sender && refs[a].Op < refs[b].Op
		})
	}
	c.sendFirst = uint32(kernels.LineSendFirst)
	for q, l := range p.lists {
		for _, o := range l.Ops {
			if q != c.me && o.Kind.ReadsPeer() && o.Peer == c.me {
				c.sendFirst = 0
			}
		}
	}
}

// peerAt is a, an address in peer's part as mapped here (raw), for op i:
// an error when it is not mapped (a network peer).
func (c *compiler) peerAt(i, peer int, a transport.Addr) (cuda.DevicePtr, error) {
	if a == 0 {
		o := &c.p.ops[i]
		return 0, fmt.Errorf("%w: op %d (%s at %s) reaches rank %d over the network", ErrNoDevice, i+1, o.Kind, o.Site, peer)
	}
	return cuda.DevicePtr(a), nil
}

// devLocal is an address of this rank's part, for the device.
func devLocal(a transport.Addr) cuda.DevicePtr { return cuda.DevicePtr(a) }

// bufAt is byte off of the plan's buffer b.
func (c *compiler) bufAt(b int, off uint64) (cuda.DevicePtr, error) {
	a, err := c.p.bufs[b].Addr()
	if err != nil {
		return 0, err
	}
	return cuda.DevicePtr(a.Add(off)), nil
}

func (c *compiler) add(s kernels.PlanStep) { c.d.steps = append(c.d.steps, s) }

// addMoving adds a step whose value moves between replays (m.step is set
// here).
func (c *compiler) addMoving(m moving, s kernels.PlanStep) {
	m.step = len(c.d.steps)
	c.d.moving = append(c.d.moving, m)
	c.add(s)
}

// signal is op i's signal sig to peer.
func (c *compiler) signal(i, peer int, sig window.Sig) error {
	slot, err := c.peerAt(i, peer, c.raw.Signal(peer, c.me, sig.ID))
	if err != nil {
		return err
	}
	kind := kernels.StepAdd
	if sig.Op == window.SigSet {
		kind = kernels.StepStore
	}
	c.add(kernels.PlanStep{Kind: kind, Op: uint32(i), Dst: slot, Value: sig.Value})
	return nil
}

// wait is op i's wait on count slots from first, stride bytes apart.
func (c *compiler) wait(i int, first transport.Addr, count int, stride uint64, cmp transport.Cmp) {
	c.addMoving(moving{op: i, bar: -1, peer: -1},
		kernels.PlanStep{Kind: kernels.StepWait, Op: uint32(i), Dst: devLocal(first), Count: uint32(count), N: stride, Cmp: kernels.Cmp(cmp)})
}

// drainSteps adds the line drains that come before op i.
func (c *compiler) drainSteps(i int) {
	p := c.p
	for _, ref := range c.drains[i] {
		so := p.lists[ref.Sender].Ops[ref.Op]
		li := p.lines[ref]
		c.addMoving(moving{op: i, bar: -1, peer: -1, line: true},
			kernels.PlanStep{Kind: kernels.StepLineWait, Op: uint32(i), Dst: devLocal(c.lines.LocalData(uint64(li.Index) * LineSize)),
				Src: devLocal(c.raw.LocalData(so.Off)), N: so.N, Cmp: kernels.Cmp(so.SigValue), Aux: devLocal(c.raw.LocalSignal(ref.Sender, so.Sig)), Step: 1,
				Count: c.sendFirst})
	}
}

// linePut adds op i as a put of its line when it sends one (sent).
func (c *compiler) linePut(i int) (sent bool, err error) {
	p, o := c.p, &c.p.ops[i]
	li, ok := p.lines[LineRef{c.me, i}]
	if !ok {
		return false, nil
	}
	buf, err := c.bufAt(o.Buf, o.BufOff)
	if err != nil {
		return false, err
	}
	lw := c.lines.Data(li.Receiver, uint64(li.Index)*LineSize)
	if lw == 0 {
		return false, fmt.Errorf("%w: op %d (%s at %s): rank %d's lines are not mapped here", ErrNoDevice, i+1, o.Kind, o.Site, li.Receiver)
	}
	priv := kernels.Cmp(0)
	if p.bufs[o.Buf].Private() {
		priv = kernels.PutPrivate
	}
	c.addMoving(moving{op: i, bar: -1, peer: -1, line: true},
		kernels.PlanStep{Kind: kernels.StepLinePut, Op: uint32(i), Dst: cuda.DevicePtr(lw), Src: buf, N: o.N, Cmp: priv, Step: 1})
	return true, nil
}

// op adds the steps of op i.
func (c *compiler) op(i int) error {
	p, o, raw, me, n := c.p, &c.p.ops[i], c.raw, c.me, c.n
	switch o.Kind {
	case Put, PutSignal, PutCounter, PutSignalCounter, Get:
		return c.transfer(i)
	case Signal:
		return c.signal(i, o.Peer, p.sigs[i])
	case SignalAll:
		for k := 1; k < n; k++ {
			if err := c.signal(i, (me+k)%n, p.sigs[i]); err != nil {
				return err
			}
		}
	case WaitSignal, WaitSignalFrom:
		if p.covered[LineRef{me, i}] {
			// Its drains, just before, brought what it waits for.
			return nil
		}
		if o.Kind == WaitSignal {
			c.wait(i, raw.LocalSignal(0, o.Sig), n, uint64(raw.LocalSignal(1%n, o.Sig)-raw.LocalSignal(0, o.Sig)), o.Cmp)
		} else {
			c.wait(i, raw.LocalSignal(o.Peer, o.Sig), 1, 8, o.Cmp)
		}
	case WaitCounter:
		c.wait(i, raw.LocalCounter(o.Peer, o.Ctr), 1, 8, o.Cmp)
	case ResetCounter:
		c.add(kernels.PlanStep{Kind: kernels.StepStore, Op: uint32(i), Dst: devLocal(raw.LocalCounter(o.Peer, o.Ctr))})
	case Fence, Flush:
		// Every step is complete, and visible to the peers its
		// signals release to, before the next starts.
	case Barrier:
		return c.barrier(i)
	case BarrierPeer:
		return c.barrierPeer(i)
	case Fill:
		return c.fill(i)
	case Reduce, ReduceFrom:
		return c.reduce(i)
	default:
		return fmt.Errorf("%w: op %d (%s) has no device step", ErrNoDevice, i+1, o.Kind)
	}
	return nil
}

// transfer adds the steps of a put or get (op i) with its signal and
// counter.
func (c *compiler) transfer(i int) error {
	p, o, raw, me := c.p, &c.p.ops[i], c.raw, c.me
	remote, err := c.peerAt(i, o.Peer, raw.Data(o.Peer, o.Off))
	if err != nil {
		return err
	}
	buf, err := c.bufAt(o.Buf, o.BufOff)
	if err != nil {
		return err
	}
	if o.N > 0 && o.N <= kernels.PlanSmall && o.Kind.HasSignal() {
		// Copy and signal in one step: thread 0's alone.
		slot, err := c.peerAt(i, o.Peer, raw.Signal(o.Peer, me, o.Sig))
		if err != nil {
			return err
		}
		flags := kernels.Cmp(0)
		if p.sigs[i].Op == window.SigAdd {
			flags = 1
		}
		if p.bufs[o.Buf].Private() {
			flags |= kernels.PutPrivate
		}
		c.add(kernels.PlanStep{Kind: kernels.StepPutSignal, Op: uint32(i), Dst: remote, Src: buf,
			N: o.N, Value: o.SigValue, Cmp: flags, Aux: slot})
		if o.Kind.HasCounter() {
			c.add(kernels.PlanStep{Kind: kernels.StepAdd, Op: uint32(i), Dst: devLocal(raw.LocalCounter(o.Peer, o.Ctr)), Value: o.CtrValue})
		}
		return nil
	}
	if o.N > 0 {
		if o.Kind == Get {
			c.add(kernels.PlanStep{Kind: kernels.StepCopy, Op: uint32(i), Dst: buf, Src: remote, N: o.N})
		} else {
			st := kernels.PlanStep{Kind: kernels.StepCopy, Op: uint32(i), Dst: remote, Src: buf, N: o.N}
			if o.Peer == me && !c.d.gpu {
				// Beside puts to other GPUs (over NVLink, by the
				// copy engines) the own copy may run on the side;
				// on one GPU it would only share its memory with
				// the puts (64 MiB on one H100: stream mode 0.96-0.98
				// x the built-in in line, 0.90-0.91 on the side).
				st.Aux = kernels.CopyLocal
			}
			c.add(st)
		}
	}
	if o.Kind.HasSignal() {
		if err := c.signal(i, o.Peer, p.sigs[i]); err != nil {
			return err
		}
	}
	if o.Kind.HasCounter() {
		c.add(kernels.PlanStep{Kind: kernels.StepAdd, Op: uint32(i), Dst: devLocal(raw.LocalCounter(o.Peer, o.Ctr)), Value: o.CtrValue})
	}
	return nil
}

// barrier adds a window barrier (op i): a store to every peer's slot,
// then a wait on every peer's row of this rank's.
func (c *compiler) barrier(i int) error {
	o, d, me, n := &c.p.ops[i], c.d, c.me, c.n
	d.uses[o.Bar]++
	m := moving{op: i, bar: o.Bar, peer: -1, ord: d.uses[o.Bar]}
	for k := 1; k < n; k++ {
		q := (me + k) % n
		slot, err := c.peerAt(i, q, c.raw.Barrier(q, me, o.Bar))
		if err != nil {
			return err
		}
		c.addMoving(m, kernels.PlanStep{Kind: kernels.StepStore, Op: uint32(i), Dst: slot})
	}
	for k := 1; k < n; k++ {
		c.addMoving(m, kernels.PlanStep{Kind: kernels.StepWait, Op: uint32(i), Dst: devLocal(c.raw.LocalBarrier((me+k)%n, o.Bar)), Count: 1, N: 8, Cmp: kernels.CmpGE})
	}
	return nil
}

// barrierPeer adds a pairwise barrier (op i).
func (c *compiler) barrierPeer(i int) error {
	o, d := &c.p.ops[i], c.d
	key := [2]int{o.Peer, o.Bar}
	d.puses[key]++
	if o.Peer == c.me {
		return nil
	}
	m := moving{op: i, bar: o.Bar, peer: o.Peer, ord: d.puses[key]}
	slot, err := c.peerAt(i, o.Peer, c.raw.PairBarrier(o.Peer, c.me, o.Bar))
	if err != nil {
		return err
	}
	c.addMoving(m, kernels.PlanStep{Kind: kernels.StepStore, Op: uint32(i), Dst: slot})
	c.addMoving(m, kernels.PlanStep{Kind: kernels.StepWait, Op: uint32(i), Dst: devLocal(c.raw.LocalPairBarrier(o.Peer, o.Bar)), Count: 1, N: 8, Cmp: kernels.CmpGE})
	return nil
}

// fill adds a fill of a buffer (op i).
func (c *compiler) fill(i int) error {
	o := &c.p.ops[i]
	b := c.p.bufs[o.Buf]
	dst, err := c.bufAt(o.Buf, 0)
	if err != nil {
		return err
	}
	kind := map[transport.FillKind]kernels.StepKind{transport.FillConst: kernels.StepFillByte,
		transport.FillIotaU32: kernels.StepFillIota, transport.FillRandU32: kernels.StepFillRand}[o.FillKind]
	value := o.FillArg
	if o.FillKind == transport.FillConst {
		value &= 0xff
	}
	c.add(kernels.PlanStep{Kind: kind, Op: uint32(i), Dst: dst, N: b.Size(), Value: value})
	return nil
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
			d.s.RunPlanSegments(d.dp, d.steps, d.segs, d.k, uint64(times), p.w.Options().Timeout, d.gpu, d.sm)
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
