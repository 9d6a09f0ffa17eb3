package bench

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/luacoll/luacoll/engine"
	"github.com/luacoll/luacoll/engine/allgather"
	"github.com/luacoll/luacoll/engine/bench/mpi"
	"github.com/luacoll/luacoll/transport"
	"github.com/luacoll/luacoll/transport/gpu"
	"github.com/luacoll/luacoll/window"
)

// agBench is one run of BenchAllGather on this rank: its configuration,
// the baselines it opened, and the window and buffers every size uses.
type agBench struct {
	ctx      context.Context
	c        *engine.Comm
	cfg      AGBenchConfig
	N        uint64 // ranks
	me       int
	maxChunk uint64
	res      *AGBenchResult
	cs       gpu.GraphStream
	onCUDA   bool
	nr       *ncclRun
	mr       *mpiRun
	w        *window.Window
	src      *window.Buffer
	out      *window.Buffer // w's buffer
	base     transport.Addr // out's address
	srcAddr  transport.Addr
	// align, on the host, is the window whose barriers line the ranks up
	// around a timed run (nil on CUDA).
	align *window.Window
	// exec runs one call of what is measured (the all-gather or the
	// schedule), builtin the built-in all-gather beside a schedule (nil:
	// none); perCall is how many all-gathers a call of exec made.
	exec, builtin func(n uint64) error
	perCall       int
	ag            *allgather.Persistent
	// first is the first warm-up of each thing measured, on CUDA (nil on
	// the host).
	first *firstWarm
}

// BenchAllGather measures the persistent all-gather (and, on CUDA with
// cfg.NCCL, ncclAllGather on the same buffers in the same run) for each
// size. After every timed run each rank checks every chunk of its window
// against the checksum of the rank that sent it; wrong chunks are summed
// over ranks. Rank 0's result holds the rows.
func BenchAllGather(ctx context.Context, c *engine.Comm, cfg AGBenchConfig) (_ *AGBenchResult, rerr error) {
	b, err := newAGBench(ctx, c, cfg)
	if err != nil {
		return nil, err
	}
	if err := b.openNCCL(); err != nil {
		return nil, err
	}
	defer b.nr.close()
	if cfg.MPI {
		if err := b.openMPI(); err != nil {
			return nil, err
		}
		// Every rank finalizes, after the window is freed (defers run
		// last in, first out).
		defer func() {
			if cerr := b.mr.close(); cerr != nil && rerr == nil {
				rerr = fmt.Errorf("MPI baseline: %w", cerr)
			}
		}()
	}
	if err := b.openWindow(); err != nil {
		return nil, err
	}
	defer freeAfter(ctx, c, b.w, &rerr)
	if b.src, err = c.NewBuffer(b.maxChunk); err != nil {
		return nil, err
	}
	defer b.src.Free()
	defer b.destroyAllGather()
	if err := b.setExec(); err != nil {
		return nil, err
	}
	if err := b.openAlign(); err != nil {
		return nil, err
	}
	if b.align != nil {
		defer freeAfter(ctx, c, b.align, &rerr)
	}
	var bar *progressBar
	if b.me == 0 {
		bar = newProgressBar(cfg.Progress, len(cfg.Sizes))
	}
	defer bar.clear()
	for si, size := range cfg.Sizes {
		bar.show(si, fmt.Sprintf("measuring %d bytes", AGChunk(size, b.N)*b.N))
		row, err := b.measureSize(si, size)
		if err != nil {
			return nil, err
		}
		b.res.Rows = append(b.res.Rows, row)
		if cfg.OnRow != nil && b.me == 0 {
			b.res.Info = b.info()
			if err := bar.between(func() error { return cfg.OnRow(b.res, row) }); err != nil {
				return nil, err
			}
		}
	}
	bar.clear()
	return b.finish()
}

// newAGBench checks cfg and works out the largest chunk.
func newAGBench(ctx context.Context, c *engine.Comm, cfg AGBenchConfig) (*agBench, error) {
	N := uint64(c.Size())
	if len(cfg.Sizes) == 0 || cfg.Iters < 1 || cfg.Warmup < 0 {
		return nil, errors.New("bench allgather: need sizes, iters >= 1 and warmup >= 0")
	}
	if cfg.InPlace && cfg.Schedule != nil {
		return nil, errors.New("bench allgather: in place works with the built-in algorithms only")
	}
	for _, size := range cfg.Sizes {
		if AGChunk(size, N) == 0 {
			return nil, fmt.Errorf("bench allgather: size %d is below %d bytes (%d bytes a rank at least)", size, N*AGChunkAlign, AGChunkAlign)
		}
	}
	b := &agBench{ctx: ctx, c: c, cfg: cfg, N: N, me: c.RankID(), maxChunk: AGChunkAlign, res: &AGBenchResult{MPI: "not requested (--vs mpi)"}, perCall: 1}
	for _, s := range cfg.Sizes {
		b.maxChunk = max(b.maxChunk, AGChunk(s, N))
	}
	b.cs, b.onCUDA = c.Rank.Stream.(gpu.GraphStream)
	if b.onCUDA {
		b.first = &firstWarm{ctx: ctx, c: c, name: "bench allgather", heat: b.heat}
	}
	return b, nil
}

// openMPI opens the MPI baseline (cfg.MPI).
func (b *agBench) openMPI() error {
	m, version, err := openMPI(b.ctx, b.c)
	if err != nil {
		return err
	}
	b.res.MPI, b.res.HaveMPI, b.mr = version, true, m
	return nil
}

// openWindow makes the window the all-gathers write (collective), with
// room for a schedule to stage small chunks in.
func (b *agBench) openWindow() error {
	wbytes := b.maxChunk * b.N
	if b.cfg.Schedule != nil {
		wbytes += 2 * b.N * min(b.maxChunk, ScheduleStageMax) // room to stage small chunks in
	}
	w, err := b.c.NewWindow(b.ctx, fmt.Sprintf("bench.allgather(window %d)", wbytes),
		window.Options{Bytes: wbytes, Signals: 2, Counters: 1, Barriers: 2, Path: b.cfg.Path})
	if err != nil {
		return err
	}
	b.w, b.out = w, w.Buffer()
	return nil
}

// setExec prepares what is measured: the schedule (and the built-in
// all-gather beside it), or the built-in all-gather of cfg.Algo.
func (b *agBench) setExec() error {
	ctx, c, cfg, w, src := b.ctx, b.c, b.cfg, b.w, b.src
	var err error
	if cfg.Builtin && cfg.Schedule == nil {
		return errors.New("bench allgather: the built-in baseline goes beside a schedule only")
	}
	if cfg.Schedule != nil {
		if cfg.Graph {
			return errors.New("bench allgather: graph mode works with the built-in algorithms only")
		}
		b.exec = func(n uint64) error {
			staging := uint64(0)
			if n <= ScheduleStageMax {
				staging = b.maxChunk * b.N
			}
			k, err := cfg.Schedule(w, src, n, staging)
			b.perCall = k
			return err
		}
		if cfg.Builtin {
			// The schedules use the window's first signal and barrier
			// slots, the built-in all-gather its last ones.
			if b.ag, err = allgather.New(ctx, c, w, "direct", cfg.BuiltinGraph); err != nil {
				return err
			}
			ag := b.ag
			b.builtin = func(n uint64) error { return ag.Exec(ctx, src, 0, n) }
			b.res.HaveBuiltin = true
		}
		return nil
	}
	if b.ag, err = allgather.New(ctx, c, w, cfg.Algo, cfg.Graph); err != nil {
		return err
	}
	ag, me := b.ag, b.me
	b.exec = func(n uint64) error { return ag.Exec(ctx, src, 0, n) }
	if cfg.InPlace {
		b.exec = func(n uint64) error { return ag.Exec(ctx, w.Buffer(), uint64(me)*n, n) }
	}
	return nil
}

// destroyAllGather destroys the built-in all-gather unless finish did.
func (b *agBench) destroyAllGather() {
	if b.ag != nil && !b.ag.Destroyed() {
		_ = b.ag.Destroy(b.ctx)
	}
}

// openAlign takes the buffers' addresses and, on the host, makes the
// window whose barriers line the ranks up (collective).
func (b *agBench) openAlign() error {
	var err error
	if b.base, err = b.out.Addr(); err != nil {
		return err
	}
	if b.srcAddr, err = b.src.Addr(); err != nil {
		return err
	}
	if !b.onCUDA {
		b.align, err = b.c.NewWindow(b.ctx, "bench.allgather(align)", window.Options{Bytes: 64, Signals: 1, Counters: 1, Barriers: 1})
	}
	return err
}

// finish destroys the all-gather and completes rank 0's result.
func (b *agBench) finish() (*AGBenchResult, error) {
	res, ag := b.res, b.ag
	res.Info = b.info()
	if ag != nil {
		if err := ag.Destroy(b.ctx); err != nil {
			return nil, err
		}
	}
	return res, nil
}

// info is what the result's Info says of the all-gather measured: the
// built-in's ag:info(), or the schedule's name and the built-in baseline's
// path beside it.
func (b *agBench) info() map[string]any {
	if b.cfg.Schedule == nil {
		return b.ag.Info()
	}
	info := map[string]any{"algo": b.cfg.ScheduleName, "algo_requested": b.cfg.ScheduleName,
		"path": "window operations from Lua (" + b.c.Backend.Name() + ")", "graph": false}
	if b.ag != nil {
		info["builtin_path"] = b.ag.Info()["path"]
	}
	return info
}

// warm runs the warm-up ops of what: cfg.Warmup, and on CUDA the first
// warm-up's more (firstWarm).
func (b *agBench) warm(op func() error, what string) error {
	return warmUp(b.first, op, what, b.cfg.Warmup)
}

// heat keeps this rank's GPU busy for firstWarmup with copies into its own
// part of the window.
func (b *agBench) heat() error {
	return heatGPU(b.ctx, b.c, b.w, window.Transfer{Peer: b.me, PeerOff: uint64(b.me) * b.maxChunk, Local: b.src, N: b.maxChunk})
}

// alignRanks is a barrier of the align window, synced.
func (b *agBench) alignRanks() error {
	if err := b.align.Barrier(0); err != nil {
		return err
	}
	return b.c.Sync(b.ctx)
}

// timed runs iters back-to-back ops after warmup ones, on every rank
// together, and returns the average seconds per op.
func (b *agBench) timed(op func() error, what string) (float64, error) {
	ctx, c := b.ctx, b.c
	if b.align == nil {
		if err := b.warm(op, what); err != nil {
			return 0, err
		}
	}
	if err := c.Sync(ctx); err != nil {
		return 0, err
	}
	if err := c.Barrier(ctx); err != nil {
		return 0, err
	}
	if b.align != nil {
		// On the host the warm-up comes after the bootstrap's barrier,
		// and after hostSettle: see there.
		settleHost()
		if err := b.warm(op, what); err != nil {
			return 0, err
		}
		// The warm-up leaves the ranks up to an exec apart; two
		// barriers in shared memory line them up, so the first timed
		// exec does not carry that skew. One was not enough: 2 ranks at
		// 1 KiB, the first timed exec took 0.7-20 us after one (the
		// others 0.3 us each), 0.5-1.1 us after two.
		for range 2 {
			if err := b.alignRanks(); err != nil {
				return 0, err
			}
		}
	}
	t0 := time.Now()
	for i := 0; i < b.cfg.Iters; i++ {
		if err := op(); err != nil {
			return 0, err
		}
	}
	if err := c.Sync(ctx); err != nil {
		return 0, err
	}
	sec := time.Since(t0).Seconds() / float64(b.cfg.Iters)
	if b.align != nil {
		// No rank goes on to what follows (sockets, output: other
		// threads and processes woken on the CPUs) while another still
		// runs its timed execs. Ranks that outnumber the CPUs took
		// 100-550 us over their last exec when the ones done first
		// did: the threads they woke ran ahead of a rank that yields.
		if err := b.alignRanks(); err != nil {
			return 0, err
		}
	}
	return sec, nil
}

// agSize is one size of the benchmark: the total, each rank's chunk n and
// the seed its patterns derive from.
type agSize struct {
	total, n, seed uint64
}

// prepare fills src with the pattern of runSeed, clears the window and
// returns every rank's checksum of its chunk (collective).
func (b *agBench) prepare(s agSize, runSeed uint64) ([]uint64, error) {
	src, out, n := b.src, b.out, s.n
	if err := src.Fill(transport.FillRandU32, runSeed); err != nil {
		return nil, err
	}
	if err := out.Fill(transport.FillConst, 0xA5); err != nil {
		return nil, err
	}
	if b.cfg.InPlace {
		data, err := src.Read(0, n)
		if err != nil {
			return nil, err
		}
		if err := out.Write(uint64(b.me)*n, data); err != nil {
			return nil, err
		}
	}
	sum, err := src.Checksum(0, n)
	if err != nil {
		return nil, err
	}
	all, err := b.c.Collective(b.ctx, fmt.Sprintf("bench.allgather.sums(%d)", s.total), []byte(strconv.FormatUint(sum, 16)))
	if err != nil {
		return nil, err
	}
	sums := make([]uint64, len(all))
	for r, d := range all {
		if sums[r], err = strconv.ParseUint(string(d), 16, 64); err != nil {
			return nil, fmt.Errorf("checksum from rank %d: %w", r, err)
		}
	}
	return sums, nil
}

// verify counts the chunks of the window that differ from their sender's
// checksum, summed over the ranks (collective).
func (b *agBench) verify(s agSize, sums []uint64) (int, error) {
	wrong := 0
	for r := uint64(0); r < b.N; r++ {
		got, err := b.out.Checksum(r*s.n, s.n)
		if err != nil {
			return 0, err
		}
		if got != sums[r] {
			wrong++
		}
	}
	return b.c.SumInt(b.ctx, fmt.Sprintf("bench.allgather.check(%d)", s.total), wrong)
}

// measure fills the buffers with the pattern of runSeed, times op (what
// names it in errors) and checks the window after.
func (b *agBench) measure(s agSize, runSeed uint64, what string, op func() error) (float64, int, error) {
	sums, err := b.prepare(s, runSeed)
	if err != nil {
		return 0, 0, err
	}
	sec, err := b.timed(op, what)
	if err != nil {
		return 0, 0, fmt.Errorf("size %d: %s%w", s.total, what, err)
	}
	wrong, err := b.verify(s, sums)
	return sec, wrong, err
}

// measureSize measures one size: luacoll (with the built-in beside a
// schedule and MPI), the stress execs, and NCCL.
func (b *agBench) measureSize(si int, size uint64) (AGBenchRow, error) {
	n := AGChunk(size, b.N)
	s := agSize{total: size, n: n, seed: uint64(si+1)<<32 | uint64(b.me)<<16}
	// count is the elements each rank sends, as nccl-tests' all_gather
	// prints it (size is the whole output).
	row := AGBenchRow{Bytes: n * b.N, Count: n, Type: "uint8"}
	ours, builtins, theirs, err := b.measureRounds(s, &row)
	if err != nil {
		return row, err
	}
	row.Seconds = medianOf(ours)
	if b.cfg.Stress {
		if err := b.stress(s, &row); err != nil {
			return row, err
		}
	}
	row.AlgBW = float64(row.Bytes) / row.Seconds / 1e9
	row.BusBW = row.busbw(row.Seconds, b.N)
	if b.builtin != nil {
		row.BuiltinSec = medianOf(builtins)
		row.BuiltinBusBW = row.busbw(row.BuiltinSec, b.N)
		row.BuiltinRatio = row.BuiltinSec / row.Seconds
	}
	if b.mr != nil {
		row.MPISec = medianOf(theirs)
		row.MPIBusBW = row.busbw(row.MPISec, b.N)
		row.MPIRatio = row.MPISec / row.Seconds
	}
	if b.res.HaveNCCL {
		if err := b.measureNCCL(s, &row); err != nil {
			return row, err
		}
	}
	if b.res.HaveNCCLSym {
		if err := b.measureNCCLSym(s, &row); err != nil {
			return row, err
		}
	}
	if b.ag != nil && b.cfg.Schedule == nil {
		row.Protocol = b.ag.Protocol(n)
	}
	return row, nil
}

// busbw is nccl-tests' bus bandwidth over N ranks of an op of the row's
// size taking sec, in GB/s.
func (row *AGBenchRow) busbw(sec float64, N uint64) float64 {
	return float64(row.Bytes) / sec / 1e9 * float64(N-1) / float64(N)
}

// measureRounds measures luacoll, the built-in beside a schedule, and MPI
// when asked for, in turn, Rounds times, so that all see the same
// machine: it returns each one's seconds per round (and sums the wrong
// chunks into row). The schedule and the built-in swap places every
// round, so that neither always runs on the other's warm caches.
func (b *agBench) measureRounds(s agSize, row *AGBenchRow) (ours, builtins, theirs []float64, err error) {
	n := s.n
	var mpiOp func() error
	if b.mr != nil {
		send, recv := uintptr(b.srcAddr), uintptr(b.base)
		if b.cfg.InPlace {
			send = mpi.InPlace
		}
		mpiOp = func() error { return b.mr.lib.Allgather(send, recv, n) }
	}
	measureBuiltin := func() error {
		if b.builtin == nil {
			return nil
		}
		sec, wrong, err := b.measure(s, s.seed|3, "built-in all-gather: ", func() error { return b.builtin(n) })
		builtins, row.BuiltinWrong = append(builtins, sec), row.BuiltinWrong+wrong
		return err
	}
	for r := 0; r < max(1, b.cfg.Rounds); r++ {
		if r%2 == 1 {
			if err := measureBuiltin(); err != nil {
				return nil, nil, nil, err
			}
		}
		sec, wrong, err := b.measure(s, s.seed|1, "", func() error { return b.exec(n) })
		if err != nil {
			return nil, nil, nil, err
		}
		sec /= float64(max(b.perCall, 1))
		ours, row.Wrong = append(ours, sec), row.Wrong+wrong
		if r%2 == 0 {
			if err := measureBuiltin(); err != nil {
				return nil, nil, nil, err
			}
		}
		if mpiOp != nil {
			if sec, wrong, err = b.measure(s, s.seed|4, "MPI: ", mpiOp); err != nil {
				return nil, nil, nil, err
			}
			theirs, row.MPIWrong = append(theirs, sec), row.MPIWrong+wrong
		}
	}
	return ours, builtins, theirs, nil
}

// stress runs Iters execs with new data every time, each checked, with
// random host delays of up to 200 us on rank 1 before half of them.
func (b *agBench) stress(s agSize, row *AGBenchRow) error {
	rng := rand.New(rand.NewPCG(uint64(b.me), s.total))
	for i := 0; i < b.cfg.Iters; i++ {
		sums, err := b.prepare(s, s.seed|uint64(i+16)<<8)
		if err != nil {
			return err
		}
		if b.me == 1 && rng.IntN(2) == 0 {
			time.Sleep(time.Duration(rng.IntN(200)) * time.Microsecond)
		}
		if err := b.exec(s.n); err != nil {
			return fmt.Errorf("size %d: stress exec %d: %w", s.total, i, err)
		}
		if err := b.c.Sync(b.ctx); err != nil {
			return fmt.Errorf("size %d: stress exec %d: %w", s.total, i, err)
		}
		w, err := b.verify(s, sums)
		if err != nil {
			return err
		}
		row.Wrong += w
	}
	return nil
}
