package bench

import (
	"context"
	"fmt"
	"os"

	"github.com/luacoll/luacoll/cuda"
	"github.com/luacoll/luacoll/engine"
	"github.com/luacoll/luacoll/transport/gpu"
)

// ncclRun is the NCCL baseline's state on one rank.
type ncclRun struct {
	lib  *cuda.NCCL
	comm *cuda.NCCLComm
	cs   gpu.GraphStream
	gs   map[uint64]*gpu.CUDAGraph
	// The symmetric baseline: sym holds bytes of ncclMemAlloc memory
	// registered as the window win (receive area first, then the send
	// area at symSend); symGraphs its captured graphs.
	sym, symSend cuda.DevicePtr
	win          cuda.NCCLWindow
	symGraphs    map[uint64]*gpu.CUDAGraph
}

// openNCCL opens the NCCL baseline when asked for and possible (collective).
func (b *agBench) openNCCL() error {
	res := b.res
	res.NCCLSym = "not requested (--vs nccl-sym)"
	switch {
	case !b.cfg.NCCL && !b.cfg.NCCLSym:
		res.NCCL = "not requested (--vs nccl)"
		return nil
	case !b.onCUDA:
		res.NCCL = "NCCL baseline needs --device cuda"
		return nil
	}
	nr, why, err := openNCCL(b.ctx, b.c, b.cs)
	if err != nil {
		return fmt.Errorf("NCCL baseline: %w", err)
	}
	b.nr = nr
	res.NCCL, res.HaveNCCL = why, nr != nil && b.cfg.NCCL
	if nr == nil {
		res.NCCL = "no NCCL baseline: " + why
		res.NCCLSym = res.NCCL
		return nil
	}
	if !b.cfg.NCCL {
		res.NCCL = "not requested (--vs nccl)"
	}
	if b.cfg.NCCLSym {
		why, err := nr.openSym(b.ctx, b.c, b.maxChunk)
		if err != nil {
			return fmt.Errorf("NCCL symmetric baseline: %w", err)
		}
		res.NCCLSym, res.HaveNCCLSym = why, nr.sym != 0
		if nr.sym == 0 {
			res.NCCLSym = "no symmetric NCCL baseline: " + why
		}
	}
	return nil
}

// measureNCCL measures ncclAllGather on the same buffers (captured once
// per size into a graph in graph mode).
func (b *agBench) measureNCCL(s agSize, row *AGBenchRow) error {
	nr, cs, n, base := b.nr, b.cs, s.n, b.base
	send := cuda.DevicePtr(b.srcAddr)
	if b.cfg.InPlace {
		send = cuda.DevicePtr(base).Add(uint64(b.me) * n)
	}
	op := func() error {
		cs.Enqueue(func(s *cuda.Stream) error {
			return nr.comm.AllGather(send, cuda.DevicePtr(base), n, cuda.NCCLUint8, s)
		})
		return nil
	}
	if b.cfg.Graph {
		g := nr.gs[n]
		if g == nil {
			if err := b.c.Sync(b.ctx); err != nil {
				return err
			}
			var err error
			g, err = cs.Capture(func(s *cuda.Stream) error {
				return nr.comm.AllGather(send, cuda.DevicePtr(base), n, cuda.NCCLUint8, s)
			})
			if err != nil {
				return fmt.Errorf("NCCL graph: %w", err)
			}
			nr.gs[n] = g
			b.res.NCCLNodes = gpu.NodesString(g.Nodes())
		}
		op = func() error { g.Launch(); return nil }
	}
	var err error
	if row.NCCLSec, row.NCCLWrong, err = b.measureBaseline(s, s.seed|2, "NCCL: ", op, nil, nil); err != nil {
		return err
	}
	row.NCCLBusBW = row.busbw(row.NCCLSec, b.N)
	row.Ratio = row.NCCLSec / row.Seconds
	return nil
}

// measureBaseline measures a baseline's op Rounds times (the median), as
// measure does once: before, when set, runs after each run's buffers are
// filled and before its clock; after, when set, after its clock and before
// its check.
func (b *agBench) measureBaseline(s agSize, runSeed uint64, what string, op, before, after func() error) (float64, int, error) {
	var secs []float64
	wrong := 0
	for r := 0; r < max(1, b.cfg.Rounds); r++ {
		sums, err := b.prepare(s, runSeed)
		if err != nil {
			return 0, 0, err
		}
		if before != nil {
			if err := before(); err != nil {
				return 0, 0, fmt.Errorf("size %d: %s%w", s.total, what, err)
			}
		}
		sec, err := b.timed(op, what)
		if err == nil && after != nil {
			err = after()
		}
		if err != nil {
			return 0, 0, fmt.Errorf("size %d: %s%w", s.total, what, err)
		}
		w, err := b.verify(s, sums)
		if err != nil {
			return 0, 0, err
		}
		secs, wrong = append(secs, sec), wrong+w
	}
	return medianOf(secs), wrong, nil
}

// measureNCCLSym measures ncclAllGather on the symmetric window's buffers:
// each run's chunk is copied there first (into the rank's place of the
// receive area when in place), and the result into the window after, where
// it is checked as the others are.
func (b *agBench) measureNCCLSym(s agSize, row *AGBenchRow) error {
	nr, cs, n := b.nr, b.cs, s.n
	send := nr.symSend
	if b.cfg.InPlace {
		send = nr.sym.Add(uint64(b.me) * n)
	}
	copyIn := func() error {
		cs.Enqueue(func(st *cuda.Stream) error { return st.Copy(send, cuda.DevicePtr(b.srcAddr), n) })
		return b.c.Sync(b.ctx)
	}
	copyOut := func() error {
		cs.Enqueue(func(st *cuda.Stream) error { return st.Copy(cuda.DevicePtr(b.base), nr.sym, n*b.N) })
		return b.c.Sync(b.ctx)
	}
	gather := func(st *cuda.Stream) error { return nr.comm.AllGather(send, nr.sym, n, cuda.NCCLUint8, st) }
	op := func() error { cs.Enqueue(gather); return nil }
	if b.cfg.Graph {
		g := nr.symGraphs[n]
		if g == nil {
			if err := b.c.Sync(b.ctx); err != nil {
				return err
			}
			var err error
			if g, err = cs.Capture(gather); err != nil {
				return fmt.Errorf("NCCL graph (symmetric): %w", err)
			}
			nr.symGraphs[n] = g
		}
		op = func() error { g.Launch(); return nil }
	}
	var err error
	if row.NCCLSymSec, row.NCCLSymWrong, err = b.measureBaseline(s, s.seed|5, "NCCL (symmetric): ", op, copyIn, copyOut); err != nil {
		return err
	}
	row.NCCLSymBusBW = row.busbw(row.NCCLSymSec, b.N)
	row.RatioSym = row.NCCLSymSec / row.Seconds
	return nil
}

func (r *ncclRun) close() {
	if r == nil {
		return
	}
	for _, g := range r.gs {
		_ = g.Destroy()
	}
	for _, g := range r.symGraphs {
		_ = g.Destroy()
	}
	if r.comm != nil {
		_ = r.cs.Current()
		_ = r.comm.WindowDeregister(r.win)
		_ = r.lib.MemFree(r.sym)
		_ = r.comm.Destroy()
	}
	r.lib.Close()
}

// openSym (collective) allocates and registers the symmetric baseline's
// buffers: room for n bytes from each of size ranks, then n to send. It
// returns why there is none when some rank cannot.
func (r *ncclRun) openSym(ctx context.Context, c *engine.Comm, n uint64) (string, error) {
	status := ""
	if !r.lib.HasWindows() {
		status = "NCCL " + r.lib.Version() + " has no symmetric windows (ncclCommWindowRegister: NCCL 2.27 and later)"
	} else if err := r.cs.Current(); err != nil {
		return "", err
	} else if r.sym, err = r.lib.MemAlloc(uint64(c.Size()+1) * n); err != nil {
		status = err.Error()
	}
	// Registering is collective: every rank must have its memory first.
	if err := c.CollectiveStatus(ctx, "bench.allgather.nccl_sym_alloc", status); err != nil {
		_ = r.lib.MemFree(r.sym)
		r.sym = 0
		return err.Error(), nil
	}
	win, err := r.comm.WindowRegister(r.sym, uint64(c.Size()+1)*n, cuda.NCCLWinCollSymmetric)
	status = ""
	if err != nil {
		status = err.Error()
	}
	if err := c.CollectiveStatus(ctx, "bench.allgather.nccl_sym_register", status); err != nil {
		_ = r.comm.WindowDeregister(win)
		_ = r.lib.MemFree(r.sym)
		r.sym = 0
		return err.Error(), nil
	}
	r.win, r.symSend = win, r.sym.Add(uint64(c.Size())*n)
	r.symGraphs = map[uint64]*gpu.CUDAGraph{}
	return "NCCL " + r.lib.Version() + " symmetric kernels: ncclMemAlloc buffers registered by ncclCommWindowRegister(NCCL_WIN_COLL_SYMMETRIC)", nil
}

// openNCCL (collective) builds an NCCL communicator over all ranks from a
// unique id that rank 0 makes and the bootstrap carries. It returns nil and
// the reason when some rank cannot.
func openNCCL(ctx context.Context, c *engine.Comm, cs gpu.GraphStream) (*ncclRun, string, error) {
	// NVLink SHARP (multicast) must stay off on these machines.
	if err := os.Setenv("NCCL_NVLS_ENABLE", "0"); err != nil {
		return nil, "", err
	}
	lib, lerr := cuda.LoadNCCL()
	var id cuda.NCCLUniqueID
	status := ""
	if lerr != nil {
		status = lerr.Error()
	} else if c.RankID() == 0 {
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
	comm, ierr := lib.InitRank(id, c.Size(), c.RankID())
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
	return &ncclRun{lib: lib, comm: comm, cs: cs, gs: map[uint64]*gpu.CUDAGraph{}}, "NCCL " + lib.Version(), nil
}
