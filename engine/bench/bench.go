package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"time"

	"github.com/luacoll/luacoll/engine"
	"github.com/luacoll/luacoll/transport"
	"github.com/luacoll/luacoll/window"
)

// BenchRow is one line of a benchmark table.
type BenchRow struct {
	Name    string  `json:"name,omitempty"`
	Bytes   uint64  `json:"bytes"`
	Seconds float64 `json:"seconds"` // per operation (median where stated)
	GBps    float64 `json:"gbps,omitempty"`
	Ref     float64 `json:"ref,omitempty"`   // the reference's figure, same unit
	Ratio   float64 `json:"ratio,omitempty"` // ours / reference (bandwidth) or reference / ours (time)
	Wrong   int     `json:"wrong"`
	// Symmetric is the window mode the row was measured with ("on" or
	// "off"), when a run compares them.
	Symmetric string `json:"symmetric,omitempty"`
	// Enqueue and Sync split a host-issued round trip on rank 0 (medians,
	// seconds): the calls that enqueue the operations, and the wait for
	// the stream to drain.
	Enqueue float64 `json:"enqueue,omitempty"`
	Sync    float64 `json:"sync,omitempty"`
}

// BenchPut measures put bandwidth from rank 0 into rank 1's window for
// each size, against an in-process copy of the same size (as the host
// stream copies; on CUDA a raw peer copy) measured in
// the same run. Data is checked after every size. Rank 0 returns the rows.
//
// With bidir, ranks 0 and 1 put to each other at the same time (every
// iteration starts with a bootstrap barrier) and so do the references:
// the figures are per direction.
//
// mode is "push" (puts, the default) or "pull" (gets: each rank's copy
// reads the peer's window).
//
// onRow, when set, is called with each size's row as soon as it is
// measured (with the progress line off), so a table can be printed row
// by row and keeps its finished rows when a later size fails.
func BenchPut(ctx context.Context, c *engine.Comm, sizes []uint64, iters int, path string, bidir bool, mode string, progress io.Writer, onRow func(BenchRow) error) (_ []BenchRow, rerr error) {
	if c.Size() < 2 {
		return nil, fmt.Errorf("bench put needs at least 2 ranks")
	}
	max := sizes[len(sizes)-1]
	w, err := c.NewWindow(ctx, fmt.Sprintf("bench.put(window %d, path %s)", max, path), window.Options{Bytes: max, Signals: 1, Counters: 1, Barriers: 2, Path: path})
	if err != nil {
		return nil, err
	}
	defer freeAfter(ctx, c, w, &rerr)
	src, err := c.NewBuffer(max)
	if err != nil {
		return nil, err
	}
	defer src.Free()
	var scratch *window.Buffer
	if mode == "pull" {
		if scratch, err = c.NewBuffer(max); err != nil {
			return nil, err
		}
		defer scratch.Free()
	}
	// The reference on the host: two private buffers and the copy a host
	// stream makes of a put's bytes (also on a GPU whose peers are reached
	// over the network: the host runs those puts).
	netJob := c.Rank.Topo != nil && c.Rank.Topo.AnyNet()
	var ra, rb []byte
	if _, ok := c.Backend.(refCopier); !ok || netJob {
		ra, rb = make([]byte, max), make([]byte, max)
		for i := range ra {
			ra[i] = byte(i * 7)
		}
	}
	b := &putBench{ctx: ctx, c: c, w: w, src: src, scratch: scratch, iters: iters, bidir: bidir, mode: mode,
		netJob: netJob, ra: ra, rb: rb, me: c.RankID()}
	var rows []BenchRow
	bar := newProgressBar(progress, len(sizes))
	defer bar.clear()
	for i, n := range sizes {
		bar.show(i, fmt.Sprintf("measuring %d bytes", n))
		row, err := b.size(i, n)
		if err != nil {
			return nil, err
		}
		rows = append(rows, row)
		if onRow != nil {
			if err := bar.between(func() error { return onRow(row) }); err != nil {
				return rows, err
			}
		}
	}
	return rows, nil
}

// freeAfter frees w when the measurement succeeded (a collective: every
// rank meets). After a failure it leaves w to the comm's Close, which
// releases it without meeting: a free would meet whatever collective the
// other ranks are in, and their mismatch would read as a second cause.
func freeAfter(ctx context.Context, c *engine.Comm, w *window.Window, err *error) {
	if *err == nil {
		*err = c.FreeWindow(ctx, w)
	}
}

// putBench is one run of BenchPut on this rank.
type putBench struct {
	ctx          context.Context
	c            *engine.Comm
	w            *window.Window
	src, scratch *window.Buffer // scratch: where gets land (pull)
	iters        int
	bidir        bool
	mode         string
	netJob       bool   // some peer is reached over the network
	ra, rb       []byte // the host reference's buffers
	me           int
}

// size measures and checks size n (the i-th).
func (b *putBench) size(i int, n uint64) (BenchRow, error) {
	ctx, w, src, me := b.ctx, b.w, b.src, b.me
	row := BenchRow{Bytes: n}
	if err := src.Fill(transport.FillRandU32, uint64(i+1)); err != nil {
		return row, err
	}
	if b.mode != "push" {
		// Gets read the peer's window: give it this size's data first.
		if err := w.Put(window.Transfer{Peer: me, Local: src, N: n}); err != nil {
			return row, err
		}
	}
	if err := barrierSync(ctx, w); err != nil {
		return row, err
	}
	if me == 0 || (b.bidir && me == 1) {
		if err := b.time(n, &row); err != nil {
			return row, err
		}
	}
	if err := barrierSync(ctx, w); err != nil {
		return row, err
	}
	return row, b.check(n, &row)
}

// start lines ranks 0 and 1 up before each timed op in bidir mode, with a
// barrier of the pair alone: the other ranks do not time, and a barrier of
// every rank here left them waiting in the window's barrier after the
// sizes while 0 and 1 waited for them in this one.
func (b *putBench) start() error {
	if !b.bidir {
		return nil
	}
	if err := b.w.BarrierPeer(1-b.me, 0); err != nil {
		return err
	}
	return b.w.Sync(b.ctx)
}

// time alternates the put and the reference copy so that both see the
// same machine load, and puts each one's median into row.
func (b *putBench) time(n uint64, row *BenchRow) error {
	peer := 1 - b.me
	rc, onDevice := b.c.Backend.(refCopier)
	onDevice = onDevice && !b.netJob
	put := func() (float64, error) { return b.put(peer, n, onDevice) }
	hostCopy := transport.HostCopier()
	ref := func() (float64, error) {
		if err := b.start(); err != nil {
			return 0, err
		}
		t0 := time.Now()
		hostCopy(b.rb[:n], b.ra[:n])
		return time.Since(t0).Seconds(), nil
	}
	if onDevice {
		// On a GPU the ceiling is a raw peer copy of the same bytes.
		dst := b.w.Raw().Data(peer, 0)
		srcAddr, _ := b.src.Addr()
		ref = func() (float64, error) {
			if err := b.start(); err != nil {
				return 0, err
			}
			d, err := rc.RefCopy(dst, srcAddr, n)
			return d.Seconds(), err
		}
	}
	pt, rt, err := alternate(b.iters, put, ref)
	if err != nil {
		return err
	}
	row.Seconds = pt
	row.GBps = float64(n) / pt / 1e9
	row.Ref = float64(n) / rt / 1e9
	row.Ratio = row.GBps / row.Ref
	return nil
}

// put returns the seconds of one put (or get) of n bytes: wall clock on
// the host; on a GPU the device clock (events on the stream around it),
// like the reference, so neither counts launch or sync.
func (b *putBench) put(peer int, n uint64, onDevice bool) (float64, error) {
	ctx, c, w := b.ctx, b.c, b.w
	if ctx.Err() != nil {
		// (A put to a peer's memory may complete without waiting on
		// anything that would see the context end.)
		return 0, fmt.Errorf("timing the put: stopped: %w", context.Cause(ctx))
	}
	if err := b.start(); err != nil {
		return 0, err
	}
	var m0 transport.Mark
	if onDevice {
		m0 = c.Rank.Stream.Mark()
	}
	t0 := time.Now()
	var err error
	switch {
	case b.mode == "pull":
		// Read the peer's window into our own (a different range).
		err = w.Get(window.Transfer{Peer: peer, PeerOff: 0, Local: b.scratch, N: n})
	default:
		err = w.Put(window.Transfer{Peer: peer, Local: b.src, N: n})
	}
	if err != nil {
		return 0, err
	}
	if !onDevice {
		err := w.Sync(ctx)
		return time.Since(t0).Seconds(), err
	}
	m1 := c.Rank.Stream.Mark()
	if err := w.Sync(ctx); err != nil {
		return 0, err
	}
	d, err := m1.Since(m0)
	return d.Seconds(), err
}

// check compares what arrived with the source and sums the wrong sizes
// over the ranks into row (collective). Pushes land in the receiver's
// window, gets in the getter's scratch buffer.
func (b *putBench) check(n uint64, row *BenchRow) error {
	me, bidir := b.me, b.bidir
	check, checks := b.w.Buffer(), false
	switch b.mode {
	case "push":
		checks = me == 1 || (bidir && me == 0)
	case "pull":
		check, checks = b.scratch, me == 0 || (bidir && me == 1)
	}
	if checks {
		eq, err := check.Equal(b.src, 0, 0, n)
		if err != nil {
			return err
		}
		if !eq {
			row.Wrong = 1
		}
	}
	wrong, err := b.c.SumInt(b.ctx, "bench.put.check", row.Wrong)
	if err != nil {
		return err
	}
	row.Wrong = wrong
	return nil
}

// refCopier is a backend with its own reference copy (CUDA: cuMemcpyAsync
// to the peer's memory).
type refCopier interface {
	RefCopy(dst, src transport.Addr, n uint64) (time.Duration, error)
}

// deviceLooper is a backend that can time protocols in device loops.
type deviceLooper interface {
	DevicePingPong(raw bool, peerData, src transport.Addr, n uint64, peerSlot, mySlot transport.Addr, iters uint64, initiator bool, timeout time.Duration, local bool) (time.Duration, error)
	DeviceLinePingPong(peerLine, myLine, myData, src, mySlot transport.Addr, iters uint64, initiator bool, timeout time.Duration) (time.Duration, error)
	DeviceBarrierLoop(rows []transport.Addr, rank int, iters uint64, timeout time.Duration, local bool, flat *transport.FlatRange) (time.Duration, error)
}

// onMyDevice reports whether every one of peers runs on this rank's device
// (same host, same device): device loops then order their signals at GPU
// scope.
func onMyDevice(c *engine.Comm, peers ...int) bool {
	ids := c.Rank.Topo.Idents
	me := ids[c.RankID()]
	for _, p := range peers {
		if ids[p].Host != me.Host || ids[p].Device != me.Device {
			return false
		}
	}
	return true
}

// noDeviceLoops reports that the device loops cannot run: peers are
// reached over the network, whose operations the host runs.
func noDeviceLoops(c *engine.Comm) bool {
	return c.Rank.Topo != nil && c.Rank.Topo.AnyNet()
}

// BenchDevicePingPong times device-initiated 8-byte put_signal -> wait
// ping-pong between ranks 0 and 1 in one kernel per rank, and the raw flag
// ping-pong (bare stores and spins) in the same run. Rank 0 returns the
// rows (one-way latency = round trip / 2).
func BenchDevicePingPong(ctx context.Context, c *engine.Comm, iters int) ([]BenchRow, error) {
	dl, ok := c.Backend.(deviceLooper)
	if !ok || c.Size() < 2 || noDeviceLoops(c) {
		return nil, nil
	}
	var rows []BenchRow
	const (
		ordered = iota // data, then the signal with a release
		raw            // the bare flag: the ceiling
		line           // data and signal in one 16-byte line
	)
	for _, how := range []int{ordered, raw, line} {
		name := [...]string{"device put_signal ping-pong", "raw flag ping-pong", "device put_signal (16-byte line)"}[how]
		w, err := c.NewWindow(ctx, "bench.devpingpong("+name+")", window.Options{Bytes: 64, Signals: 1, Counters: 1, Barriers: 1, Path: "auto"})
		if err != nil {
			return nil, err
		}
		src, err := c.NewBuffer(8)
		if err == nil {
			err = src.Fill(transport.FillRandU32, payloadSeed(c.RankID()))
		}
		if err != nil {
			return nil, err
		}
		if err := barrierSync(ctx, w); err != nil {
			return nil, err
		}
		me := c.RankID()
		var d time.Duration
		if me <= 1 {
			peer := 1 - me
			srcAddr, _ := src.Addr()
			wr := w.Raw()
			if how == line {
				// The payload lands at offset 0; the line is at 16.
				d, err = dl.DeviceLinePingPong(wr.Data(peer, 16), wr.Data(me, 16), wr.Data(me, 0), srcAddr,
					wr.Signal(me, peer, 0), uint64(iters), me == 0, w.Options().Timeout)
			} else {
				d, err = dl.DevicePingPong(how == raw, wr.Data(peer, 0), srcAddr, 8, wr.Signal(peer, me, 0), wr.Signal(me, peer, 0),
					uint64(iters), me == 0, w.Options().Timeout, onMyDevice(c, peer))
			}
		}
		wrong := 0
		if how != raw {
			// Each side's last wait saw the peer's last put_signal: its
			// payload is in this rank's window.
			var cerr error
			wrong, cerr = checkPayload(ctx, c, w, "bench.devpingpong.check", err == nil)
			if err == nil {
				err = cerr
			}
		}
		ferr := c.FreeWindow(ctx, w)
		_ = src.Free()
		if err != nil {
			return nil, err
		}
		if ferr != nil {
			return nil, ferr
		}
		rows = append(rows, BenchRow{Name: name, Bytes: 8, Seconds: d.Seconds() / float64(iters) / 2, Wrong: wrong})
	}
	for _, lines := range []bool{true, false} {
		if pr, ok, err := benchPlanPingPong(ctx, c, iters, lines); err != nil {
			return nil, err
		} else if ok {
			rows = append(rows, pr)
		}
	}
	if len(rows) >= 2 && rows[1].Seconds > 0 {
		for i := range rows {
			if i != 1 {
				rows[i].Ref = rows[1].Seconds
				rows[i].Ratio = rows[i].Seconds / rows[1].Seconds
			}
		}
	}
	return rows, nil
}

// BenchDeviceBarrier times window barriers run back to back in one kernel
// per rank. Every rank returns its row.
func BenchDeviceBarrier(ctx context.Context, c *engine.Comm, iters int) (BenchRow, bool, error) {
	dl, ok := c.Backend.(deviceLooper)
	if !ok || noDeviceLoops(c) {
		return BenchRow{}, false, nil
	}
	n := c.Size()
	w, err := c.NewWindow(ctx, "bench.devbarrier", window.Options{Bytes: uint64(8 * n), Signals: 1, Counters: 1, Barriers: 1, Path: "auto"})
	if err != nil {
		return BenchRow{}, true, err
	}
	if err := barrierSync(ctx, w); err != nil {
		return BenchRow{}, true, err
	}
	rows := make([]transport.Addr, n)
	for p := range rows {
		rows[p] = w.Raw().Data(p, 0)
	}
	all := make([]int, n)
	for p := range all {
		all[p] = p
	}
	d, err := dl.DeviceBarrierLoop(rows, c.RankID(), uint64(iters), w.Options().Timeout, onMyDevice(c, all...), w.Raw().Flat())
	ferr := c.FreeWindow(ctx, w)
	if err != nil {
		return BenchRow{}, true, err
	}
	return BenchRow{Name: "device barrier loop", Seconds: d.Seconds() / float64(iters)}, true, ferr
}

// BenchPingPong measures put_signal -> wait round trips between ranks 0 and
// 1 with 8-byte puts; the row holds the median one-way latency.
func BenchPingPong(ctx context.Context, c *engine.Comm, iters int, path string) (_ BenchRow, rerr error) {
	if c.Size() < 2 {
		return BenchRow{}, fmt.Errorf("bench pingpong needs at least 2 ranks")
	}
	w, err := c.NewWindow(ctx, "bench.pingpong(path "+path+")", window.Options{Bytes: 64, Signals: 1, Counters: 1, Barriers: 1, Path: path})
	if err != nil {
		return BenchRow{}, err
	}
	defer freeAfter(ctx, c, w, &rerr)
	src, err := c.NewBuffer(8)
	if err != nil {
		return BenchRow{}, err
	}
	defer src.Free()
	if err := src.Fill(transport.FillRandU32, payloadSeed(c.RankID())); err != nil {
		return BenchRow{}, err
	}
	if err := barrierSync(ctx, w); err != nil {
		return BenchRow{}, err
	}
	me := c.RankID()
	var rtts, enq, syn samples
	if me <= 1 {
		peer := 1 - me
		put := window.Transfer{Peer: peer, Local: src, N: 8}
		sig := &window.Sig{ID: 0, Value: 1}
		for i := 1; i <= iters; i++ {
			t0 := time.Now()
			if me == 0 {
				_ = w.PutSignal(put, sig, nil)
				_ = w.WaitSignalFrom(peer, 0, transport.CmpGe, uint64(i))
			} else {
				_ = w.WaitSignalFrom(peer, 0, transport.CmpGe, uint64(i))
				_ = w.PutSignal(put, sig, nil)
			}
			t1 := time.Now()
			if err := w.Sync(ctx); err != nil {
				return BenchRow{}, err
			}
			t2 := time.Now()
			rtts.add(t2.Sub(t0).Seconds())
			enq.add(t1.Sub(t0).Seconds())
			syn.add(t2.Sub(t1).Seconds())
		}
	}
	if err := barrierSync(ctx, w); err != nil {
		return BenchRow{}, err
	}
	wrong, err := checkPayload(ctx, c, w, "bench.pingpong.check", true)
	if err != nil {
		return BenchRow{}, err
	}
	if me != 0 {
		return BenchRow{}, nil
	}
	// The floor of one host-issued step on rank 0's own stream: a store to
	// its own slot (path auto: a stream memory write; sm: a kernel) and
	// the sync that sees it done.
	st := c.Rank.Stream
	floor := median(max(iters/10, 10), func() error {
		st.Store64(w.Raw().Signal(me, me, 0), 0)
		return st.Sync(ctx)
	})
	if floor.err != nil {
		return BenchRow{}, floor.err
	}
	return BenchRow{Bytes: 8, Seconds: rtts.median() / 2, Enqueue: enq.median(), Sync: syn.median(), Ref: floor.sec, Wrong: wrong}, nil
}

// payloadSeed seeds the 8 bytes rank r sends in the ping-pongs.
func payloadSeed(r int) uint64 { return uint64(r+1) * 0x9e3779b9 }

// checkPayload (collective: every rank calls it, whatever happened
// before, so no rank is left in another collective) returns how many of
// ranks 0 and 1 do not hold the other's ping-pong payload at the start of
// their window. check false (the rank's own run failed) skips its look;
// a rank whose look itself fails makes every rank return an error.
func checkPayload(ctx context.Context, c *engine.Comm, w *window.Window, call string, check bool) (int, error) {
	const failed = 1 << 20 // a rank's look failed
	wrong := 0
	var lerr error
	if me := c.RankID(); check && me <= 1 {
		var ref *window.Buffer
		if ref, lerr = c.NewBuffer(8); lerr == nil {
			lerr = ref.Fill(transport.FillRandU32, payloadSeed(1-me))
			var eq bool
			if lerr == nil {
				eq, lerr = w.Buffer().Equal(ref, 0, 0, 8)
			}
			_ = ref.Free()
			if !eq {
				wrong = 1
			}
		}
		if lerr != nil {
			wrong = failed
		}
	}
	sum, err := c.SumInt(ctx, call, wrong)
	switch {
	case lerr != nil:
		return 0, fmt.Errorf("checking the ping-pong payload: %w", lerr)
	case err != nil:
		return 0, err
	case sum >= failed:
		return 0, errors.New("checking the ping-pong payload failed on another rank")
	}
	return sum, nil
}

// BenchBarrier measures the window barrier; the row holds the median time
// per barrier over batches of 100.
func BenchBarrier(ctx context.Context, c *engine.Comm, iters int, path string) (_ BenchRow, rerr error) {
	w, err := c.NewWindow(ctx, "bench.barrier(path "+path+")", window.Options{Bytes: 64, Signals: 1, Counters: 1, Barriers: 1, Path: path})
	if err != nil {
		return BenchRow{}, err
	}
	defer freeAfter(ctx, c, w, &rerr)
	const batch = 100
	var samples []float64
	for i := 0; i < iters; i += batch {
		t0 := time.Now()
		for j := 0; j < batch; j++ {
			if err := w.Barrier(0); err != nil {
				return BenchRow{}, err
			}
		}
		if err := w.Sync(ctx); err != nil {
			return BenchRow{}, err
		}
		samples = append(samples, time.Since(t0).Seconds()/batch)
	}
	sort.Float64s(samples)
	return BenchRow{Seconds: samples[len(samples)/2]}, nil
}

func barrierSync(ctx context.Context, w *window.Window) error {
	if err := w.Barrier(0); err != nil {
		return err
	}
	return w.Sync(ctx)
}

// alternate runs a and b once each to warm up, then iters times in turn,
// and returns the median of the seconds each reported.
func alternate(iters int, a, b func() (float64, error)) (float64, float64, error) {
	var ta, tb samples
	for i := -1; i < iters; i++ {
		x, err := a()
		if err != nil {
			return 0, 0, err
		}
		y, err := b()
		if err != nil {
			return 0, 0, err
		}
		if i >= 0 {
			ta.add(x)
			tb.add(y)
		}
	}
	return ta.median(), tb.median(), nil
}

type timing struct {
	sec float64
	err error
}

// median runs f once to warm up, then iters times, and returns the median.
func median(iters int, f func() error) timing {
	if err := f(); err != nil {
		return timing{err: err}
	}
	var s samples
	for range iters {
		t0 := time.Now()
		if err := f(); err != nil {
			return timing{err: err}
		}
		s.add(time.Since(t0).Seconds())
	}
	return timing{sec: s.median()}
}
