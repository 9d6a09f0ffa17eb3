package bench

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/luacoll/luacoll/engine"
	"github.com/luacoll/luacoll/engine/bench/mpi"
	"github.com/luacoll/luacoll/engine/launch"
	"github.com/luacoll/luacoll/window"
)

// ErrNotUnderMPIRun is returned for an MPI baseline in a job that Open
// MPI's mpirun did not start (MPI_Init would make a job of one).
var ErrNotUnderMPIRun = errors.New("the MPI baseline needs ranks started by Open MPI's mpirun")

// mpiRun is the MPI baseline of one rank: libmpi initialised for calls
// that never overlap (the benchmark's goroutine makes them all).
type mpiRun struct {
	lib *mpi.Library
}

// openMPI (collective) loads libmpi and calls MPI_Init_thread on every
// rank; it checks that MPI numbers the ranks as luacoll does. Any rank's
// failure fails every rank.
func openMPI(ctx context.Context, c *engine.Comm) (*mpiRun, string, error) {
	if c.Env.Source != launch.SourceOpenMPI {
		return nil, "", ErrNotUnderMPIRun
	}
	if c.Opts.Device != "host" {
		return nil, "", fmt.Errorf("the MPI baseline needs --device host (MPI here moves host memory)")
	}
	lib, err := mpi.Load()
	if err == nil {
		err = lib.Init()
	}
	if err == nil {
		var r, s int
		if r, err = lib.Rank(); err == nil {
			s, err = lib.Size()
		}
		if err == nil && (r != c.RankID() || s != c.Size()) {
			err = fmt.Errorf("MPI numbers this process rank %d of %d, luacoll rank %d of %d", r, s, c.RankID(), c.Size())
		}
	}
	status := ""
	if err != nil {
		status = err.Error()
	}
	if cerr := c.CollectiveStatus(ctx, "bench.mpi_init", status); cerr != nil {
		// No MPI_Finalize: it would wait for ranks that never initialised.
		return nil, "", fmt.Errorf("MPI baseline: %w", cerr)
	}
	return &mpiRun{lib: lib}, lib.Version(), nil
}

// close finalizes MPI (every rank must call it).
func (m *mpiRun) close() error {
	if m == nil {
		return nil
	}
	return m.lib.Finalize()
}

// BarrierResult is the window barrier's figures, and MPI_Barrier's beside
// them when asked for.
type BarrierResult struct {
	Row BenchRow
	// MPI is the library's version, or why there is no MPI row.
	MPI     string
	HaveMPI bool
	MPIRow  BenchRow
}

// BenchBarrierVs measures the window barrier like BenchBarrier and, with
// vsMPI, MPI_Barrier in the same processes: batches of 100 of each in
// turn, each one's median per barrier. MPIRow.Ratio is MPI's time over the
// window barrier's (above 1: the window barrier is faster).
func BenchBarrierVs(ctx context.Context, c *engine.Comm, iters int, path string, vsMPI bool) (BarrierResult, error) {
	if !vsMPI {
		row, err := BenchBarrier(ctx, c, iters, path)
		return BarrierResult{Row: row, MPI: "not requested (--vs mpi)"}, err
	}
	m, version, err := openMPI(ctx, c)
	if err != nil {
		return BarrierResult{}, err
	}
	res := BarrierResult{MPI: version, HaveMPI: true}
	w, err := c.NewWindow(ctx, "bench.barrier(path "+path+")", window.Options{Bytes: 64, Signals: 1, Counters: 1, Barriers: 1, Path: path})
	if err != nil {
		_ = m.close()
		return res, err
	}
	const batch = 100
	var ours, theirs []float64
	for i := 0; i < iters && err == nil; i += batch {
		t0 := time.Now()
		for j := 0; j < batch && err == nil; j++ {
			err = w.Barrier(0)
		}
		if err == nil {
			err = w.Sync(ctx)
		}
		ours = append(ours, time.Since(t0).Seconds()/batch)
		t0 = time.Now()
		for j := 0; j < batch && err == nil; j++ {
			err = m.lib.Barrier()
		}
		theirs = append(theirs, time.Since(t0).Seconds()/batch)
	}
	ferr := c.FreeWindow(ctx, w)
	if err == nil {
		err = ferr
	}
	if cerr := m.close(); err == nil && cerr != nil {
		err = fmt.Errorf("MPI baseline: %w", cerr)
	}
	if err != nil {
		return res, err
	}
	sort.Float64s(ours)
	sort.Float64s(theirs)
	res.Row = BenchRow{Seconds: ours[len(ours)/2]}
	res.MPIRow = BenchRow{Name: "MPI_Barrier", Seconds: theirs[len(theirs)/2]}
	res.MPIRow.Ratio = res.MPIRow.Seconds / res.Row.Seconds
	return res, nil
}
