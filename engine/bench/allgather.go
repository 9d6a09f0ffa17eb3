package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"sort"
	"strconv"
	"time"

	"github.com/luacoll/luacoll/cuda"
	"github.com/luacoll/luacoll/engine"
	"github.com/luacoll/luacoll/engine/bench/mpi"
	"github.com/luacoll/luacoll/transport"
	tcuda "github.com/luacoll/luacoll/transport/cuda"
	"github.com/luacoll/luacoll/window"
)

// ScheduleStageMax is the largest chunk (bytes per rank) a schedule is
// given room to stage, as the built-in all-gather stages small ones: the
// extra copy costs little there, and saves the barrier.
const ScheduleStageMax = 16 << 10

// AGBenchConfig configures BenchAllGather.
type AGBenchConfig struct {
	// Sizes are total output bytes (nccl-tests convention); each rank
	// sends Size/N bytes, rounded down to a multiple of 16.
	Sizes  []uint64
	Iters  int
	Warmup int
	Algo   string // "auto", "direct", "ring" or "hier"
	Graph  bool   // luacoll in graph mode; NCCL is then also captured
	NCCL   bool   // measure ncclAllGather on the same buffers (CUDA only)
	Path   string // window path: "auto" (default: per exec by size), "ce" or "sm"
	// MPI measures MPI_Allgather (Open MPI's libmpi, loaded at run time)
	// on the same buffers in the same processes; the ranks must have been
	// started by Open MPI's mpirun (host backend only).
	MPI bool
	// Stress adds, after the timed execs of each size, Iters execs with
	// new data every time, each checked, with random host delays of up
	// to 200 us on rank 1 before half of them.
	Stress bool
	// Schedule, when set, replaces the built-in all-gather: it is called
	// for every exec (a schedule written in Lua, say); ScheduleName names it.
	// staging, when not 0, is the offset in w of 2 * ranks * n bytes the
	// schedule may stage chunks in instead of starting with a barrier (up
	// to ScheduleStageMax bytes per rank); a call reports how many
	// all-gathers it made (a plan of a staged schedule holds two).
	Schedule     func(w *window.Window, src *window.Buffer, n, staging uint64) (int, error)
	ScheduleName string
	// Builtin, with a Schedule, also measures the built-in direct
	// all-gather (eager) on the same window and buffers in the same run.
	Builtin bool
	// BuiltinGraph runs that built-in baseline in graph mode (beside a
	// plan replayed as a graph).
	BuiltinGraph bool
	// InPlace runs every exec in place (nccl-tests' in-place column): each
	// rank's chunk already sits in the window at rank*n, so the own copy
	// is skipped; NCCL, when measured, gets the same in-place buffers.
	InPlace bool
	// Rounds, above 1, measures each size (and MPI_Allgather, when asked
	// for) that many times, in turn, and reports the medians; #wrong sums
	// the rounds.
	Rounds int
	// Progress, when set, receives a progress line per size (rank 0).
	Progress io.Writer
	// OnRow, when set, is called on rank 0 with each size's row as soon
	// as it is measured (the progress line off meanwhile); res holds the
	// rows so far and Info as it stands. An error from it ends the run.
	OnRow func(res *AGBenchResult, row AGBenchRow) error
}

// AGBenchRow is one size of the all-gather benchmark. Seconds are the
// average per exec over Iters execs enqueued back to back (nccl-tests
// "time"); algbw = Bytes/Seconds, busbw = algbw*(n-1)/n, in GB/s.
type AGBenchRow struct {
	Bytes     uint64  `json:"size"`
	Count     uint64  `json:"count"`
	Type      string  `json:"type"`
	Seconds   float64 `json:"time_s"`
	AlgBW     float64 `json:"algbw_gbps"`
	BusBW     float64 `json:"busbw_gbps"`
	Wrong     int     `json:"wrong"`
	NCCLSec   float64 `json:"nccl_time_s,omitempty"`
	NCCLBusBW float64 `json:"nccl_busbw_gbps,omitempty"`
	NCCLWrong int     `json:"nccl_wrong,omitempty"`
	// Ratio is time_nccl / time_ours (above 1: luacoll is faster).
	Ratio float64 `json:"ratio_vs_nccl,omitempty"`
	// The built-in direct all-gather beside a schedule (AGBenchConfig.
	// Builtin); BuiltinRatio is time_builtin / time_schedule.
	BuiltinSec   float64 `json:"builtin_time_s,omitempty"`
	BuiltinBusBW float64 `json:"builtin_busbw_gbps,omitempty"`
	BuiltinWrong int     `json:"builtin_wrong,omitempty"`
	BuiltinRatio float64 `json:"ratio_vs_builtin,omitempty"`
	// MPI_Allgather on the same buffers (AGBenchConfig.MPI); MPIRatio is
	// time_mpi / time_ours (above 1: luacoll is faster).
	MPISec   float64 `json:"mpi_time_s,omitempty"`
	MPIBusBW float64 `json:"mpi_busbw_gbps,omitempty"`
	MPIWrong int     `json:"mpi_wrong,omitempty"`
	MPIRatio float64 `json:"ratio_vs_mpi,omitempty"`
}

// AGBenchResult is what rank 0 reports.
type AGBenchResult struct {
	Rows []AGBenchRow
	// Info is the all-gather's ag:info() after the run.
	Info map[string]any
	// NCCL is the library version, or why there is no baseline.
	NCCL     string
	HaveNCCL bool
	// NCCLNodes are the node counts of NCCL's captured graph (graph mode).
	NCCLNodes string
	// HaveBuiltin: the rows hold the built-in all-gather's figures too.
	HaveBuiltin bool
	// MPI is the library's version, or why there is no MPI baseline.
	MPI     string
	HaveMPI bool
}

// ncclRun is the NCCL baseline's state on one rank.
type ncclRun struct {
	lib  *cuda.NCCL
	comm *cuda.NCCLComm
	cs   *tcuda.CUDAStream
	gs   map[uint64]*tcuda.CUDAGraph
}

func (r *ncclRun) close() {
	if r == nil {
		return
	}
	for _, g := range r.gs {
		_ = g.Destroy()
	}
	if r.comm != nil {
		_ = r.cs.Current()
		_ = r.comm.Destroy()
	}
	r.lib.Close()
}

// openNCCL (collective) builds an NCCL communicator over all ranks from a
// unique id that rank 0 makes and the bootstrap carries. It returns nil and
// the reason when some rank cannot.
func openNCCL(ctx context.Context, c *engine.Comm, cs *tcuda.CUDAStream) (*ncclRun, string, error) {
	// NVLink SHARP (multicast) must stay off on these machines.
	if err := os.Setenv("NCCL_NVLS_ENABLE", "0"); err != nil {
		return nil, "", err
	}
	lib, lerr := cuda.LoadNCCL()
	var id cuda.NCCLUniqueID
	status := ""
	if lerr != nil {
		status = lerr.Error()
	} else if c.Env.Rank == 0 {
		var err error
		if id, err = lib.UniqueID(); err != nil {
			status = err.Error()
		}
	}
	payload := []byte(status)
	if status == "" {
		payload = append([]byte{0}, id[:]...)
	}
	all, err := c.Collective(ctx, "bench.allgather.nccl_id", payload)
	if err != nil {
		if lib != nil {
			lib.Close()
		}
		return nil, "", err
	}
	for r, d := range all {
		if len(d) == 0 || d[0] != 0 {
			if lib != nil {
				lib.Close()
			}
			return nil, fmt.Sprintf("rank %d: %s", r, d), nil
		}
	}
	copy(id[:], all[0][1:])
	if err := cs.Current(); err != nil {
		lib.Close()
		return nil, "", err
	}
	comm, ierr := lib.InitRank(id, c.Env.Size, c.Env.Rank)
	status = ""
	if ierr != nil {
		status = ierr.Error()
	}
	if err := c.CollectiveStatus(ctx, "bench.allgather.nccl_init", status); err != nil {
		if comm != nil {
			_ = comm.Destroy()
		}
		lib.Close()
		return nil, err.Error(), nil
	}
	return &ncclRun{lib: lib, comm: comm, cs: cs, gs: map[uint64]*tcuda.CUDAGraph{}}, "NCCL " + lib.Version(), nil
}

// AGChunkAlign is the granularity of an all-gather bench's chunk: each
// rank sends a multiple of it (its share of the total, rounded down).
const AGChunkAlign = 16

// AGChunk is the chunk each of n ranks sends for a total size: total/n
// rounded down to AGChunkAlign (0 when total is below n*AGChunkAlign).
func AGChunk(total, n uint64) uint64 { return total / n &^ (AGChunkAlign - 1) }

// BenchAllGather measures the persistent all-gather (and, on CUDA with
// cfg.NCCL, ncclAllGather on the same buffers in the same run) for each
// size. After every timed run each rank checks every chunk of its window
// against the checksum of the rank that sent it; wrong chunks are summed
// over ranks. Rank 0's result holds the rows.
func BenchAllGather(ctx context.Context, c *engine.Comm, cfg AGBenchConfig) (_ *AGBenchResult, rerr error) {
	N := uint64(c.Env.Size)
	me := c.Env.Rank
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
	chunk := func(total uint64) uint64 { return AGChunk(total, N) }
	maxChunk := uint64(AGChunkAlign)
	for _, s := range cfg.Sizes {
		maxChunk = max(maxChunk, chunk(s))
	}
	res := &AGBenchResult{}
	cs, onCUDA := c.Rank.Stream.(*tcuda.CUDAStream)
	var nr *ncclRun
	var mr *mpiRun
	switch {
	case !cfg.NCCL:
		res.NCCL = "not requested (--vs nccl)"
	case !onCUDA:
		res.NCCL = "NCCL baseline needs --device cuda"
	default:
		var why string
		var err error
		if nr, why, err = openNCCL(ctx, c, cs); err != nil {
			return nil, fmt.Errorf("NCCL baseline: %w", err)
		}
		defer nr.close()
		res.NCCL, res.HaveNCCL = why, nr != nil
		if nr == nil {
			res.NCCL = "no NCCL baseline: " + why
		}
	}
	res.MPI = "not requested (--vs mpi)"
	if cfg.MPI {
		m, version, err := openMPI(ctx, c)
		if err != nil {
			return nil, err
		}
		// Every rank finalizes, after the window is freed (defers run
		// last in, first out).
		defer func() {
			if cerr := m.close(); cerr != nil && rerr == nil {
				rerr = fmt.Errorf("MPI baseline: %w", cerr)
			}
		}()
		res.MPI, res.HaveMPI, mr = version, true, m
	}
	wbytes := maxChunk * N
	if cfg.Schedule != nil {
		wbytes += 2 * N * min(maxChunk, ScheduleStageMax) // room to stage small chunks in
	}
	w, err := c.NewWindow(ctx, fmt.Sprintf("bench.allgather(window %d)", wbytes),
		window.Options{Bytes: wbytes, Signals: 2, Counters: 1, Barriers: 2, Path: cfg.Path})
	if err != nil {
		return nil, err
	}
	defer freeAfter(ctx, c, w, &rerr)
	src, err := c.NewBuffer(maxChunk)
	if err != nil {
		return nil, err
	}
	defer src.Free()
	var exec, builtin func(n uint64) error
	perCall := 1 // all-gathers per call of exec
	var ag *engine.AllGather
	if cfg.Builtin && cfg.Schedule == nil {
		return nil, errors.New("bench allgather: the built-in baseline goes beside a schedule only")
	}
	if cfg.Schedule != nil {
		if cfg.Graph {
			return nil, errors.New("bench allgather: graph mode works with the built-in algorithms only")
		}
		exec = func(n uint64) error {
			staging := uint64(0)
			if n <= ScheduleStageMax {
				staging = maxChunk * N
			}
			k, err := cfg.Schedule(w, src, n, staging)
			perCall = k
			return err
		}
		if cfg.Builtin {
			// The schedules use the window's first signal and barrier
			// slots, the built-in all-gather its last ones.
			if ag, err = engine.NewAllGather(ctx, c, w, "direct", cfg.BuiltinGraph); err != nil {
				return nil, err
			}
			defer func() {
				if !ag.Destroyed() {
					_ = ag.Destroy(ctx)
				}
			}()
			builtin = func(n uint64) error { return ag.Exec(ctx, src, 0, n) }
			res.HaveBuiltin = true
		}
	} else {
		if ag, err = engine.NewAllGather(ctx, c, w, cfg.Algo, cfg.Graph); err != nil {
			return nil, err
		}
		defer func() {
			if !ag.Destroyed() {
				_ = ag.Destroy(ctx)
			}
		}()
		exec = func(n uint64) error { return ag.Exec(ctx, src, 0, n) }
		if cfg.InPlace {
			exec = func(n uint64) error { return ag.Exec(ctx, w.Buffer(), uint64(me)*n, n) }
		}
	}
	out := w.Buffer()
	base, err := out.Addr()
	if err != nil {
		return nil, err
	}
	srcAddr, err := src.Addr()
	if err != nil {
		return nil, err
	}
	var align *window.Window
	if !onCUDA {
		if align, err = c.NewWindow(ctx, "bench.allgather(align)", window.Options{Bytes: 64, Signals: 1, Counters: 1, Barriers: 1}); err != nil {
			return nil, err
		}
		defer freeAfter(ctx, c, align, &rerr)
	}
	// run times iters back-to-back ops after warmup ones, on every rank
	// together, and returns the average seconds per op.
	run := func(op func() error) (float64, error) {
		warm := func() error {
			for i := 0; i < cfg.Warmup; i++ {
				if err := op(); err != nil {
					return err
				}
			}
			return nil
		}
		if align == nil {
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
		if align != nil {
			// On the host the warm-up comes after the bootstrap's barrier,
			// and after hostSettle: see there.
			settleHost()
			if err := warm(); err != nil {
				return 0, err
			}
			// The warm-up leaves the ranks up to an exec apart; two
			// barriers in shared memory line them up, so the first timed
			// exec does not carry that skew. One was not enough: 2 ranks at
			// 1 KiB, the first timed exec took 0.7-20 us after one (the
			// others 0.3 us each), 0.5-1.1 us after two.
			for range 2 {
				if err := align.Barrier(0); err != nil {
					return 0, err
				}
				if err := c.Sync(ctx); err != nil {
					return 0, err
				}
			}
		}
		t0 := time.Now()
		for i := 0; i < cfg.Iters; i++ {
			if err := op(); err != nil {
				return 0, err
			}
		}
		if err := c.Sync(ctx); err != nil {
			return 0, err
		}
		sec := time.Since(t0).Seconds() / float64(cfg.Iters)
		if align != nil {
			// No rank goes on to what follows (sockets, output: other
			// threads and processes woken on the CPUs) while another still
			// runs its timed execs. Ranks that outnumber the CPUs took
			// 100-550 us over their last exec when the ones done first
			// did: the threads they woke ran ahead of a rank that yields.
			if err := align.Barrier(0); err != nil {
				return 0, err
			}
			if err := c.Sync(ctx); err != nil {
				return 0, err
			}
		}
		return sec, nil
	}
	var bar *progressBar
	if me == 0 {
		bar = newProgressBar(cfg.Progress, len(cfg.Sizes))
	}
	defer bar.clear()
	for si, size := range cfg.Sizes {
		n := chunk(size)
		row := AGBenchRow{Bytes: n * N, Count: n * N, Type: "uint8"}
		bar.show(si, fmt.Sprintf("measuring %d bytes", n*N))
		seed := uint64(si+1)<<32 | uint64(me)<<16
		// prepare fills src with this run's pattern, clears the window and
		// returns every rank's checksum of its chunk.
		prepare := func(runSeed uint64) ([]uint64, error) {
			if err := src.Fill(transport.FillRandU32, runSeed); err != nil {
				return nil, err
			}
			if err := out.Fill(transport.FillConst, 0xA5); err != nil {
				return nil, err
			}
			if cfg.InPlace {
				data, err := src.Read(0, n)
				if err != nil {
					return nil, err
				}
				if err := out.Write(uint64(me)*n, data); err != nil {
					return nil, err
				}
			}
			sum, err := src.Checksum(0, n)
			if err != nil {
				return nil, err
			}
			all, err := c.Collective(ctx, fmt.Sprintf("bench.allgather.sums(%d)", size), []byte(strconv.FormatUint(sum, 16)))
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
		verify := func(sums []uint64) (int, error) {
			wrong := 0
			for r := uint64(0); r < N; r++ {
				got, err := out.Checksum(r*n, n)
				if err != nil {
					return 0, err
				}
				if got != sums[r] {
					wrong++
				}
			}
			return c.SumInt(ctx, fmt.Sprintf("bench.allgather.check(%d)", size), wrong)
		}
		// measure fills the buffers with the pattern of runSeed, times op
		// (what names it in errors) and checks the window after.
		measure := func(runSeed uint64, what string, op func() error) (float64, int, error) {
			sums, err := prepare(runSeed)
			if err != nil {
				return 0, 0, err
			}
			sec, err := run(op)
			if err != nil {
				return 0, 0, fmt.Errorf("size %d: %s%w", size, what, err)
			}
			wrong, err := verify(sums)
			return sec, wrong, err
		}
		var err error
		var mpiOp func() error
		if mr != nil {
			send, recv := uintptr(srcAddr), uintptr(base)
			if cfg.InPlace {
				send = mpi.InPlace
			}
			mpiOp = func() error { return mr.lib.Allgather(send, recv, n) }
		}
		// luacoll, the built-in beside a schedule, and MPI when asked
		// for, in turn, Rounds times: the medians, so that all see the
		// same machine. The schedule and the built-in swap places every
		// round, so that neither always runs on the other's warm caches.
		var ours, theirs, builtins []float64
		for r := 0; r < max(1, cfg.Rounds); r++ {
			measureBuiltin := func() error {
				if builtin == nil {
					return nil
				}
				sec, wrong, err := measure(seed|3, "built-in all-gather: ", func() error { return builtin(n) })
				builtins, row.BuiltinWrong = append(builtins, sec), row.BuiltinWrong+wrong
				return err
			}
			if r%2 == 1 {
				if err := measureBuiltin(); err != nil {
					return nil, err
				}
			}
			sec, wrong, err := measure(seed|1, "", func() error { return exec(n) })
			if err != nil {
				return nil, err
			}
			sec /= float64(max(perCall, 1))
			ours, row.Wrong = append(ours, sec), row.Wrong+wrong
			if r%2 == 0 {
				if err := measureBuiltin(); err != nil {
					return nil, err
				}
			}
			if mpiOp != nil {
				if sec, wrong, err = measure(seed|4, "MPI: ", mpiOp); err != nil {
					return nil, err
				}
				theirs, row.MPIWrong = append(theirs, sec), row.MPIWrong+wrong
			}
		}
		row.Seconds = medianOf(ours)
		if cfg.Stress {
			rng := rand.New(rand.NewPCG(uint64(me), uint64(size)))
			for i := 0; i < cfg.Iters; i++ {
				sums, err := prepare(seed | uint64(i+16)<<8)
				if err != nil {
					return nil, err
				}
				if me == 1 && rng.IntN(2) == 0 {
					time.Sleep(time.Duration(rng.IntN(200)) * time.Microsecond)
				}
				if err := exec(n); err != nil {
					return nil, fmt.Errorf("size %d: stress exec %d: %w", size, i, err)
				}
				if err := c.Sync(ctx); err != nil {
					return nil, fmt.Errorf("size %d: stress exec %d: %w", size, i, err)
				}
				w, err := verify(sums)
				if err != nil {
					return nil, err
				}
				row.Wrong += w
			}
		}
		// busbw is nccl-tests' bus bandwidth of an op taking sec, in GB/s.
		busbw := func(sec float64) float64 { return float64(row.Bytes) / sec / 1e9 * float64(N-1) / float64(N) }
		row.AlgBW = float64(row.Bytes) / row.Seconds / 1e9
		row.BusBW = busbw(row.Seconds)
		if builtin != nil {
			row.BuiltinSec = medianOf(builtins)
			row.BuiltinBusBW = busbw(row.BuiltinSec)
			row.BuiltinRatio = row.BuiltinSec / row.Seconds
		}
		if mpiOp != nil {
			row.MPISec = medianOf(theirs)
			row.MPIBusBW = busbw(row.MPISec)
			row.MPIRatio = row.MPISec / row.Seconds
		}
		if nr != nil {
			send := cuda.DevicePtr(srcAddr)
			if cfg.InPlace {
				send = cuda.DevicePtr(base).Add(uint64(me) * n)
			}
			op := func() error {
				cs.Enqueue(func(s *cuda.Stream) error {
					return nr.comm.AllGather(send, cuda.DevicePtr(base), n, cuda.NCCLUint8, s)
				})
				return nil
			}
			if cfg.Graph {
				g := nr.gs[n]
				if g == nil {
					if err := c.Sync(ctx); err != nil {
						return nil, err
					}
					g, err = cs.Capture(func(s *cuda.Stream) error {
						return nr.comm.AllGather(send, cuda.DevicePtr(base), n, cuda.NCCLUint8, s)
					})
					if err != nil {
						return nil, fmt.Errorf("NCCL graph: %w", err)
					}
					nr.gs[n] = g
					res.NCCLNodes = tcuda.NodesString(g.Nodes())
				}
				op = func() error { g.Launch(); return nil }
			}
			if row.NCCLSec, row.NCCLWrong, err = measure(seed|2, "NCCL: ", op); err != nil {
				return nil, err
			}
			row.NCCLBusBW = busbw(row.NCCLSec)
			row.Ratio = row.NCCLSec / row.Seconds
		}
		res.Rows = append(res.Rows, row)
		if cfg.OnRow != nil && me == 0 {
			res.Info = agInfo(cfg, c, ag)
			if err := bar.between(func() error { return cfg.OnRow(res, row) }); err != nil {
				return nil, err
			}
		}
	}
	bar.clear()
	res.Info = agInfo(cfg, c, ag)
	if cfg.Schedule != nil {
		if ag != nil {
			if err := ag.Destroy(ctx); err != nil {
				return nil, err
			}
		}
		return res, nil
	}
	if err := ag.Destroy(ctx); err != nil {
		return nil, err
	}
	return res, nil
}

// agInfo is what the result's Info says of the all-gather measured: the
// built-in's ag:info(), or the schedule's name and the built-in baseline's
// path beside it.
func agInfo(cfg AGBenchConfig, c *engine.Comm, ag *engine.AllGather) map[string]any {
	if cfg.Schedule == nil {
		return ag.Info()
	}
	info := map[string]any{"algo": cfg.ScheduleName, "algo_requested": cfg.ScheduleName,
		"path": "window operations from Lua (" + c.Backend.Name() + ")", "graph": false}
	if ag != nil {
		info["builtin_path"] = ag.Info()["path"]
	}
	return info
}

// hostSettle is how long a host rank keeps its processor busy before its
// warm-up execs.
//
// While a Go process is idle (as in the bootstrap's barrier, a socket
// read) the runtime's monitor thread sleeps; the first system call after
// wakes it, and it then looks at the process every 20 us (60-100 us on a
// 2-core VM) for 50 rounds before it backs off, doubling its sleep up to
// 10 ms. Each look takes a processor for a moment, and when every rank
// has one processor to itself that is a rank's: 2 ranks at 1 KiB, a
// 20-exec run right after the barrier lost 15-40 us to one such look in
// about one run of four, 1-2 us an exec on average. After 20 ms of work
// the looks are milliseconds apart. The warm-up execs come after the
// spin because the first exec after it took 4-12 us.
const hostSettle = 20 * time.Millisecond

// settleHost spins for hostSettle (see there).
func settleHost() {
	for end := time.Now().Add(hostSettle); time.Now().Before(end); {
	}
}

// medianOf returns the median of xs (the upper one of an even count).
func medianOf(xs []float64) float64 {
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	return s[len(s)/2]
}
