package plan

import (
	"errors"
	"fmt"

	"github.com/luacoll/luacoll/window"
)

// Plan is one rank's recorded plan bound to its window and buffers, ready
// to replay: a Go loop that enqueues every op through the window API, with
// no interpreter in it.
type Plan struct {
	w     *window.Window
	bufs  []*window.Buffer
	lists []List
	me    int
	led   *Ledger
	ops   []Op
	// per op: the rows a wait sums (nil for other ops and for waits on a
	// counter the plan resets), and what the recording code had counted
	// on them before it began (the sum of their Base).
	rows  [][]int
	base  []uint64
	sigs  []window.Sig
	ctrs  []window.Ctr
	delta []uint64
	// site is the op being enqueued, for the errors of its waits.
	site    window.Site
	siteFn  func() window.Site
	replays int
	// dev, in device mode, runs the replays in the plan interpreter.
	dev *device
	// lines are the put_signals of every rank that travel in lines
	// (lines.go), in the line areas of lineWin; nil unless UseLines.
	lines   map[LineRef]LineInfo
	lineWin *window.Window
	// covered are the waits (of this rank: LineRef{me, op}) that the
	// drains before them satisfy: they need no step.
	covered map[LineRef]bool
}

// UseLines makes the interpreter (device, graph and stream modes) send the
// put_signals that Lines picks in lines, whose areas are lw's data (at
// least LineSize bytes per line of the rank with the most, zero, on every
// rank). Every rank must call it, before compiling for the interpreter,
// with the same lists, and every rank's plan must then run through the
// interpreter: the caller checks (a CUDA backend and no network peer).
// limit is Lines' (the same on every rank).
func (p *Plan) UseLines(lw *window.Window, limit uint64) error {
	ls := planLines(p.lists, limit)
	if ls.most == 0 {
		return nil
	}
	if lw == nil || lw.Options().Bytes < uint64(ls.most)*LineSize {
		return fmt.Errorf("plan: %d lines need %d bytes of line area", ls.most, ls.most*LineSize)
	}
	p.lines, p.lineWin, p.covered = ls.lines, lw, ls.covered
	return nil
}

// LineCount is the number of this plan's put_signals, over every rank,
// that travel in lines (0 unless UseLines found any).
func (p *Plan) LineCount() int { return len(p.lines) }

// New binds rank me's list of lists (every rank's, with their Base set by
// led.Record) to its window w and buffers (bufs[0] is w's data buffer,
// bufs[k] the plan's buffer k). led is the window's ledger.
func New(w *window.Window, bufs []*window.Buffer, lists []List, me int, led *Ledger) (*Plan, error) {
	if w == nil || len(bufs) == 0 || bufs[0] != w.Buffer() {
		return nil, errors.New("plan: buffer 0 must be the window's data buffer")
	}
	if me < 0 || me >= len(lists) {
		return nil, fmt.Errorf("plan: rank %d outside 0..%d", me, len(lists)-1)
	}
	l := lists[me]
	if len(l.Shape.Buffers) != len(bufs) {
		return nil, fmt.Errorf("plan: %d buffers recorded, %d given", len(l.Shape.Buffers), len(bufs))
	}
	if len(led.Replayed) != l.Shape.Rows() || len(l.Base) != l.Shape.Rows() {
		return nil, errors.New("plan: the ledger has not recorded these lists")
	}
	info := Deltas(lists)[me]
	p := &Plan{w: w, bufs: bufs, lists: lists, me: me, led: led, ops: l.Ops, delta: info.Delta,
		rows: make([][]int, len(l.Ops)), base: make([]uint64, len(l.Ops)),
		sigs: make([]window.Sig, len(l.Ops)), ctrs: make([]window.Ctr, len(l.Ops))}
	for i, o := range l.Ops {
		if err := l.Shape.Check(me, o); err != nil {
			return nil, fmt.Errorf("plan: op %d (%s at %s): %w", i+1, o.Kind, o.Site, err)
		}
		p.sigs[i] = window.Sig{ID: o.Sig, Value: o.SigValue, Op: o.SigOp}
		p.ctrs[i] = window.Ctr{ID: o.Ctr, Value: o.CtrValue}
		rows := l.Shape.WaitRows(o)
		if o.Kind == WaitCounter && info.Reset[rows[0]] {
			rows = nil
		}
		p.rows[i] = rows
		for _, r := range rows {
			p.base[i] += l.Base[r]
		}
	}
	p.siteFn = func() window.Site { return p.site }
	return p, nil
}

// Window returns the window the plan was recorded on.
func (p *Plan) Window() *window.Window { return p.w }

// Ops returns this rank's ops.
func (p *Plan) Ops() []Op { return p.ops }

// Lists returns every rank's list.
func (p *Plan) Lists() []List { return p.lists }

// Buffers returns the plan's buffers (0: the window's).
func (p *Plan) Buffers() []*window.Buffer { return p.bufs }

// Replays is how many replays were enqueued.
func (p *Plan) Replays() int { return p.replays }

// value is wait op i's value in the next replay: the recorded one, moved
// by what replays added to its rows beyond what recordings counted.
func (p *Plan) value(i int) uint64 {
	v := p.ops[i].Value - p.base[i]
	for _, r := range p.rows[i] {
		v += p.led.Replayed[r]
	}
	return v
}

// Run enqueues times replays of the plan, back to back, on the rank's
// stream. The window and every buffer are checked first; a wait's error
// names the script line that recorded it.
func (p *Plan) Run(times int) error {
	if times < 1 {
		return &window.ArgError{Arg: "times", Msg: fmt.Sprintf("%d: want 1 or more", times)}
	}
	if p.w.Freed() {
		return &window.ErrFreed{What: fmt.Sprintf("window %d", p.w.ID())}
	}
	for i, b := range p.bufs[1:] {
		if b.Freed() {
			return fmt.Errorf("the plan's buffer %s: %w", BufName(i+1), &window.ErrFreed{What: b.Name()})
		}
	}
	if p.dev != nil {
		return p.runDeviceBatches(times)
	}
	r := p.w.Rank()
	saved := r.Site
	r.Site = p.siteFn
	defer func() { r.Site = saved }()
	for t := 0; t < times; t++ {
		if err := p.stopped(t, times); err != nil {
			return err
		}
		for i := range p.ops {
			if i%stopCheckOps == stopCheckOps-1 {
				if err := p.stopped(t, times); err != nil {
					return err
				}
			}
			if err := p.enqueue(i); err != nil {
				o := &p.ops[i]
				return fmt.Errorf("replay %d, op %d (%s at %s): %w", p.replays+1, i+1, o.Kind, o.Site, err)
			}
		}
		for row, d := range p.delta {
			p.led.Replayed[row] += d
		}
		p.replays++
	}
	return nil
}

// stopCheckOps is how many ops a replay enqueues between two looks at
// whether the rank stopped (besides one before every replay).
const stopCheckOps = 1024

// deviceBatch is how many replays one call of the interpreter's modes
// enqueues between two such looks (device mode's kernel looks at the
// abort flag itself).
const deviceBatch = 256

// stopped is the error that ends a run before replay t of times: the
// stream's failure (a wait's error, naming its line), the job's abort or
// an interrupt (window.Rank.Stopped); nil to go on.
func (p *Plan) stopped(t, times int) error {
	err := p.w.Rank().Stopped()
	if err == nil {
		return nil
	}
	if t == 0 {
		return err
	}
	return fmt.Errorf("%w (the run stopped with %d of %d replays enqueued)", err, t, times)
}

// runDeviceBatches runs times replays in the plan interpreter, in batches
// (graph and stream mode enqueue launches per replay), looking between
// two at whether the rank stopped.
func (p *Plan) runDeviceBatches(times int) error {
	if p.dev.graph == nil && p.dev.segs == nil {
		// Device mode: one launch; its kernel ends on the abort flag.
		if err := p.stopped(0, times); err != nil {
			return err
		}
		return p.runDevice(times)
	}
	for t := 0; t < times; t += deviceBatch {
		if err := p.stopped(t, times); err != nil {
			return err
		}
		if err := p.runDevice(min(deviceBatch, times-t)); err != nil {
			return err
		}
	}
	return nil
}

func (p *Plan) enqueue(i int) error {
	o := &p.ops[i]
	w := p.w
	p.site = window.Site{File: o.Site.File, Line: o.Site.Line}
	t := window.Transfer{Peer: o.Peer, PeerOff: o.Off, Local: p.bufs[o.Buf], LocalOff: o.BufOff, N: o.N}
	switch o.Kind {
	case Put:
		return w.Put(t)
	case Get:
		return w.Get(t)
	case PutSignal:
		return w.PutSignal(t, &p.sigs[i], nil)
	case PutCounter:
		return w.PutSignal(t, nil, &p.ctrs[i])
	case PutSignalCounter:
		return w.PutSignal(t, &p.sigs[i], &p.ctrs[i])
	case Signal:
		return w.Signal(o.Peer, p.sigs[i])
	case SignalAll:
		return w.SignalAll(p.sigs[i])
	case WaitSignal:
		return w.WaitSignal(o.Sig, o.Cmp, p.value(i))
	case WaitSignalFrom:
		return w.WaitSignalFrom(o.Peer, o.Sig, o.Cmp, p.value(i))
	case WaitCounter:
		return w.WaitCounter(o.Peer, o.Ctr, o.Cmp, p.value(i))
	case ResetCounter:
		return w.ResetCounter(o.Peer, o.Ctr)
	case Fence:
		return w.Fence()
	case Flush:
		return w.Flush()
	case Barrier:
		return w.Barrier(o.Bar)
	case BarrierPeer:
		return w.BarrierPeer(o.Peer, o.Bar)
	case Fill:
		return p.bufs[o.Buf].Fill(o.FillKind, o.FillArg)
	case Reduce, ReduceFrom:
		return p.enqueueReduce(o)
	}
	return fmt.Errorf("unknown operation %d", o.Kind)
}
