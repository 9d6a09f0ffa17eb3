package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/luacoll/luacoll/engine"
	"github.com/luacoll/luacoll/engine/bench/mpi"
	"github.com/luacoll/luacoll/transport"
	"github.com/luacoll/luacoll/window"
)

// The collectives BenchReduce measures.
const (
	CollReduceScatter = "reduce_scatter"
	CollAllReduce     = "allreduce"
)

// RedBenchConfig configures BenchReduce.
type RedBenchConfig struct {
	// Coll is CollReduceScatter or CollAllReduce.
	Coll string
	// Sizes are each rank's input bytes (nccl-tests' size): the whole
	// vector of an all-reduce, the size/N-byte chunks of every rank of a
	// reduce-scatter. Each is rounded down to whole elements (times N for
	// a reduce-scatter); sizes left empty are skipped.
	Sizes                 []uint64
	Iters, Warmup, Rounds int
	Type                  transport.DType
	Op                    transport.RedOp
	// Path is the window's path on CUDA ("auto", "ce" or "sm"; "" is
	// "auto").
	Path string
	// Schedule runs one call of the measured schedule on w, in place on
	// the input at offset 0: n is the chunk of a reduce-scatter, the
	// whole input of an all-reduce; scratch is the offset of the scratch
	// area the schedule may use (the same for every size).
	Schedule     func(w *window.Window, n, scratch uint64) error
	ScheduleName string
	// Pick, when set, names the schedule Schedule runs for a call of n
	// bytes on w (an auto schedule's pick): each row's Schedule.
	Pick func(w *window.Window, n, scratch uint64) (string, error)
	// ScratchBytes is how much scratch the schedule needs for inputs of up
	// to maxIn bytes a rank (nil: maxIn).
	ScratchBytes func(maxIn uint64) uint64
	// MPI measures MPI_Allreduce / MPI_Reduce_scatter_block, in place on
	// the same window, in the same processes (host, under Open MPI's mpirun).
	MPI bool
	// NCCL measures ncclAllReduce / ncclReduceScatter in place on the same
	// window (CUDA); Graph captures it in a CUDA graph.
	NCCL, Graph bool
	// Progress, when set, receives a progress line per size (rank 0).
	Progress io.Writer
}

// RedBenchRow is one size. Seconds is the median over the rounds of the
// average per call of Iters calls back to back; algbw = Bytes/Seconds;
// busbw = algbw * 2(N-1)/N for an all-reduce, algbw * (N-1)/N for a
// reduce-scatter (nccl-tests), in GB/s. Wrong counts the elements that
// differ from the host reference in the checked call after each round.
type RedBenchRow struct {
	Bytes     uint64  `json:"size"`
	Count     uint64  `json:"count"`
	Type      string  `json:"type"`
	RedOp     string  `json:"redop"`
	Seconds   float64 `json:"time_s"`
	AlgBW     float64 `json:"algbw_gbps"`
	BusBW     float64 `json:"busbw_gbps"`
	Wrong     int     `json:"wrong"`
	NCCLSec   float64 `json:"nccl_time_s,omitempty"`
	NCCLBusBW float64 `json:"nccl_busbw_gbps,omitempty"`
	NCCLWrong int     `json:"nccl_wrong,omitempty"`
	Ratio     float64 `json:"ratio_vs_nccl,omitempty"`
	MPISec    float64 `json:"mpi_time_s,omitempty"`
	MPIBusBW  float64 `json:"mpi_busbw_gbps,omitempty"`
	MPIWrong  int     `json:"mpi_wrong,omitempty"`
	MPIRatio  float64 `json:"ratio_vs_mpi,omitempty"`
	// Schedule is the schedule the size ran, where the measured one picks
	// by size (RedBenchConfig.Pick).
	Schedule string `json:"schedule,omitempty"`
	// PlanMode is the mode the size's plans replayed in (--plan).
	PlanMode string `json:"plan_mode,omitempty"`
}

// RedBenchResult is what rank 0 reports.
type RedBenchResult struct {
	Rows []RedBenchRow
	// Skipped are the sizes too small for one element a rank.
	Skipped []uint64
	// MPI and NCCL are the libraries' versions, or why there is no such
	// baseline.
	MPI, NCCL         string
	HaveMPI, HaveNCCL bool
	NCCLNodes         string
}

// redOp is one measured implementation: run enqueues a call; out is
// where its result lands (offset in the window).
type redOp struct {
	what string
	run  func() error
	out  uint64
}

// BenchReduce measures a reduction schedule (and the baselines asked for)
// for every size, Rounds times in turn, each round's timed calls followed
// by one call on fresh input checked against the host reference.
func BenchReduce(ctx context.Context, c *engine.Comm, cfg RedBenchConfig) (_ *RedBenchResult, rerr error) {
	N, me := uint64(c.Env.Size), c.Env.Rank
	if len(cfg.Sizes) == 0 || cfg.Iters < 1 || cfg.Warmup < 0 || cfg.Schedule == nil {
		return nil, errors.New("bench reduce: need sizes, a schedule, iters >= 1 and warmup >= 0")
	}
	if cfg.Coll != CollReduceScatter && cfg.Coll != CollAllReduce {
		return nil, fmt.Errorf("bench reduce: unknown collective %q", cfg.Coll)
	}
	esz := cfg.Type.Size()
	unit := esz
	if cfg.Coll == CollReduceScatter {
		unit *= N
	}
	res := &RedBenchResult{MPI: "not requested (--vs mpi)", NCCL: "not requested (--vs nccl)"}
	var sizes []uint64
	maxIn := uint64(0)
	for _, size := range cfg.Sizes {
		s := size - size%unit
		if s == 0 {
			res.Skipped = append(res.Skipped, size)
			continue
		}
		sizes = append(sizes, s)
		maxIn = max(maxIn, s)
	}
	if len(sizes) == 0 {
		return nil, fmt.Errorf("bench reduce: every size is below %d bytes (one %s a rank)", unit, cfg.Type)
	}
	scratch := (maxIn + 4095) &^ 4095
	need := maxIn
	if cfg.ScratchBytes != nil {
		need = cfg.ScratchBytes(maxIn)
	}
	wbytes := scratch + need + 4096
	w, err := c.NewWindow(ctx, fmt.Sprintf("bench.reduce(window %d)", wbytes),
		window.Options{Bytes: wbytes, Signals: 8, Counters: 1, Barriers: 2, Path: cfg.Path})
	if err != nil {
		return nil, err
	}
	defer c.FreeWindow(ctx, w)
	src, err := c.NewBuffer(maxIn)
	if err != nil {
		return nil, err
	}
	defer src.Free()
	var red *mpi.Reductions
	if cfg.MPI {
		m, version, err := openMPI(ctx, c)
		if err != nil {
			return nil, err
		}
		defer func() {
			if cerr := m.close(); cerr != nil && rerr == nil {
				rerr = fmt.Errorf("MPI baseline: %w", cerr)
			}
		}()
		if red, err = m.lib.Reductions(cfg.Type, cfg.Op); err != nil {
			res.MPI = "no MPI baseline: " + err.Error()
		} else {
			res.MPI, res.HaveMPI = version, true
		}
	}
	nccl, err := openRedNCCL(ctx, c, cfg, res)
	if err != nil {
		return nil, err
	}
	defer nccl.close()
	var align *window.Window
	if !nccl.onCUDA {
		if align, err = c.NewWindow(ctx, "bench.reduce(align)", window.Options{Bytes: 64, Signals: 1, Counters: 1, Barriers: 1}); err != nil {
			return nil, err
		}
		defer c.FreeWindow(ctx, align)
	}
	t := redTimer{ctx: ctx, c: c, align: align, iters: cfg.Iters, warmup: cfg.Warmup}
	if nccl.onCUDA {
		heat := window.Transfer{Peer: me, Local: src, N: maxIn} // into the input, which each timed run restores
		t.first = &firstWarm{ctx: ctx, c: c, name: "bench reduce", heat: func() error { return heatGPU(ctx, c, w, heat) }}
	}
	var bar *progressBar
	if me == 0 {
		bar = newProgressBar(cfg.Progress, len(sizes))
	}
	for si, size := range sizes {
		bar.show(si, fmt.Sprintf("measuring %d bytes", size))
		row, err := benchReduceSize(ctx, c, cfg, w, src, size, scratch, uint64(si+1)<<40, t, red, nccl)
		if err != nil {
			return nil, fmt.Errorf("size %d: %w", size, err)
		}
		res.Rows = append(res.Rows, row)
	}
	bar.clear()
	res.NCCLNodes = nccl.nodes
	return res, nil
}

// benchReduceSize measures one size.
func benchReduceSize(ctx context.Context, c *engine.Comm, cfg RedBenchConfig, w *window.Window, src *window.Buffer,
	size, scratch, seed uint64, t redTimer, red *mpi.Reductions, nccl *redNCCL) (RedBenchRow, error) {
	N, me := uint64(c.Env.Size), c.Env.Rank
	esz := cfg.Type.Size()
	row := RedBenchRow{Bytes: size, Count: size / esz, Type: cfg.Type.String(), RedOp: cfg.Op.String()}
	n, outOff, outLen, first := size, uint64(0), size, uint64(0)
	if cfg.Coll == CollReduceScatter {
		// count is each rank's share, as nccl-tests' reduce_scatter
		// prints it.
		row.Count = size / N / esz
		n = size / N
		outOff, outLen, first = uint64(me)*n, n, uint64(me)*n/esz
	}
	in := make([]byte, size)
	redInput(in, cfg.Type, cfg.Op, seed, me, 0)
	if err := src.Write(0, in); err != nil {
		return row, err
	}
	restore := func() error {
		return w.Put(window.Transfer{Peer: me, PeerOff: 0, Local: src, LocalOff: 0, N: size})
	}
	// measure times op's calls, then checks one on fresh input.
	measure := func(op redOp) (float64, int, error) {
		if err := restore(); err != nil {
			return 0, 0, err
		}
		sec, err := t.run(op.run, op.what)
		if err != nil {
			return 0, 0, fmt.Errorf("%s%w", op.what, err)
		}
		if err := restore(); err != nil {
			return 0, 0, err
		}
		if err := c.Sync(ctx); err != nil {
			return 0, 0, err
		}
		if err := c.Barrier(ctx); err != nil {
			return 0, 0, err
		}
		if err := op.run(); err != nil {
			return 0, 0, fmt.Errorf("%schecked call: %w", op.what, err)
		}
		if err := c.Sync(ctx); err != nil {
			return 0, 0, fmt.Errorf("%schecked call: %w", op.what, err)
		}
		got, err := w.Buffer().Read(op.out, outLen)
		if err != nil {
			return 0, 0, err
		}
		wrong, err := c.SumInt(ctx, fmt.Sprintf("bench.reduce.check(%d)", size),
			redWrong(got, cfg.Type, cfg.Op, seed, int(N), first))
		return sec, wrong, err
	}
	ours := redOp{run: func() error { return cfg.Schedule(w, n, scratch) }, out: outOff}
	if cfg.Pick != nil {
		name, err := cfg.Pick(w, n, scratch)
		if err != nil {
			return row, err
		}
		row.Schedule = name
	}
	var mpiOp, ncclOp *redOp
	if red != nil {
		base, err := w.Buffer().Addr()
		if err != nil {
			return row, err
		}
		call := func() error { return red.Allreduce(mpi.InPlace, uintptr(base), size) }
		mpiOp = &redOp{what: "MPI: ", run: call}
		if cfg.Coll == CollReduceScatter {
			mpiOp.run = func() error { return red.ReduceScatterBlock(mpi.InPlace, uintptr(base), n) }
		}
	}
	if nccl.comm != nil {
		op, err := nccl.op(ctx, c, cfg, w, size, n)
		if err != nil {
			return row, err
		}
		ncclOp = &redOp{what: "NCCL: ", run: op, out: outOff}
	}
	var oursSec, mpiSec, ncclSec []float64
	for r := 0; r < max(1, cfg.Rounds); r++ {
		sec, wrong, err := measure(ours)
		if err != nil {
			return row, err
		}
		oursSec, row.Wrong = append(oursSec, sec), row.Wrong+wrong
		if mpiOp != nil {
			if sec, wrong, err = measure(*mpiOp); err != nil {
				return row, err
			}
			mpiSec, row.MPIWrong = append(mpiSec, sec), row.MPIWrong+wrong
		}
		if ncclOp != nil {
			if sec, wrong, err = measure(*ncclOp); err != nil {
				return row, err
			}
			ncclSec, row.NCCLWrong = append(ncclSec, sec), row.NCCLWrong+wrong
		}
	}
	factor := float64(N-1) / float64(N)
	if cfg.Coll == CollAllReduce {
		factor *= 2
	}
	busbw := func(sec float64) float64 { return float64(size) / sec / 1e9 * factor }
	row.Seconds = medianOf(oursSec)
	row.AlgBW, row.BusBW = float64(size)/row.Seconds/1e9, busbw(row.Seconds)
	if mpiOp != nil {
		row.MPISec = medianOf(mpiSec)
		row.MPIBusBW, row.MPIRatio = busbw(row.MPISec), row.MPISec/row.Seconds
	}
	if ncclOp != nil {
		row.NCCLSec = medianOf(ncclSec)
		row.NCCLBusBW, row.Ratio = busbw(row.NCCLSec), row.NCCLSec/row.Seconds
	}
	return row, nil
}

// redTimer times back-to-back calls on every rank together.
type redTimer struct {
	ctx           context.Context
	c             *engine.Comm
	align         *window.Window // host: lines the ranks up in shared memory
	iters, warmup int
	// first is the first warm-up of ours and of each baseline, on CUDA
	// (nil on the host).
	first *firstWarm
}

// run times iters calls of op (what: ours "", a baseline its error
// prefix) after warmup ones (and on CUDA the first warm-up's more) and
// returns the average seconds per call.
func (t redTimer) run(op func() error, what string) (float64, error) {
	ctx, c := t.ctx, t.c
	warm := func() error { return warmUp(t.first, op, what, t.warmup) }
	if t.align == nil {
		if err := warm(); err != nil {
			return 0, err
		}
	}
	if err := c.Sync(ctx); err != nil {
		return 0, err
	}
	if err := c.Barrier(ctx); err != nil {
		return 0, err
	}
	if t.align != nil {
		// As the all-gather's benchmark: settle, warm up, then two barriers
		// in shared memory so that the first timed call carries no skew.
		settleHost()
		if err := warm(); err != nil {
			return 0, err
		}
		for range 2 {
			if err := t.align.Barrier(0); err != nil {
				return 0, err
			}
			if err := c.Sync(ctx); err != nil {
				return 0, err
			}
		}
	}
	t0 := time.Now()
	for i := 0; i < t.iters; i++ {
		if err := op(); err != nil {
			return 0, err
		}
	}
	if err := c.Sync(ctx); err != nil {
		return 0, err
	}
	sec := time.Since(t0).Seconds() / float64(t.iters)
	if t.align != nil {
		if err := t.align.Barrier(0); err != nil {
			return 0, err
		}
		if err := c.Sync(ctx); err != nil {
			return 0, err
		}
	}
	return sec, nil
}
