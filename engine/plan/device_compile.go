package plan

// The compiler of device mode: a plan's ops into the interpreter's steps.

import (
	"fmt"
	"sort"

	"github.com/luacoll/luacoll/cuda"
	"github.com/luacoll/luacoll/kernels"
	"github.com/luacoll/luacoll/transport"
	"github.com/luacoll/luacoll/window"
)

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
