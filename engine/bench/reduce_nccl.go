package bench

import (
	"context"
	"fmt"

	"github.com/luacoll/luacoll/cuda"
	"github.com/luacoll/luacoll/engine"
	"github.com/luacoll/luacoll/kernels"
	"github.com/luacoll/luacoll/transport/gpu"
	"github.com/luacoll/luacoll/window"
)

// redNCCL is the NCCL baseline of BenchReduce on one rank: nil comm when
// there is none (not asked for, the host backend, or a rank without NCCL).
type redNCCL struct {
	onCUDA bool
	run    *ncclRun
	comm   *cuda.NCCLReduction
	nodes  string
}

var ncclRedTypes = map[kernels.DType]int{
	kernels.I32: cuda.NCCLInt32, kernels.U32: cuda.NCCLUint32, kernels.I64: cuda.NCCLInt64, kernels.U64: cuda.NCCLUint64,
	kernels.F16: cuda.NCCLFloat16, kernels.F32: cuda.NCCLFloat32, kernels.F64: cuda.NCCLFloat64, kernels.BF16: cuda.NCCLBfloat16,
}

var ncclRedOps = map[kernels.RedOp]int{kernels.Sum: cuda.NCCLSum, kernels.Prod: cuda.NCCLProd, kernels.Max: cuda.NCCLMax, kernels.Min: cuda.NCCLMin}

// openRedNCCL (collective when asked for on CUDA) sets up the baseline
// and says in res what there is.
func openRedNCCL(ctx context.Context, c *engine.Comm, cfg RedBenchConfig, res *RedBenchResult) (*redNCCL, error) {
	cs, onCUDA := c.Rank.Stream.(gpu.GraphStream)
	out := &redNCCL{onCUDA: onCUDA}
	switch {
	case !cfg.NCCL:
		return out, nil
	case !onCUDA:
		res.NCCL = "NCCL baseline needs --device cuda"
		return out, nil
	}
	run, why, err := openNCCL(ctx, c, cs)
	if err != nil {
		return nil, fmt.Errorf("NCCL baseline: %w", err)
	}
	if run == nil {
		res.NCCL = "no NCCL baseline: " + why
		return out, nil
	}
	out.run = run
	if out.comm, err = run.comm.Reduction(ncclRedTypes[cfg.Type], ncclRedOps[cfg.Op]); err != nil {
		run.close()
		return nil, fmt.Errorf("NCCL baseline: %w", err)
	}
	res.NCCL, res.HaveNCCL = why, true
	return out, nil
}

func (r *redNCCL) close() {
	if r != nil && r.run != nil {
		r.run.close()
	}
}

// op returns the NCCL call of one size, in place on w: eager, or the
// replay of a graph captured once per size (cfg.Graph).
func (r *redNCCL) op(ctx context.Context, c *engine.Comm, cfg RedBenchConfig, w *window.Window, size, n uint64) (func() error, error) {
	base, err := w.Buffer().Addr()
	if err != nil {
		return nil, err
	}
	p := cuda.DevicePtr(base)
	esz := cfg.Type.Size()
	call := func(s *cuda.Stream) error { return r.comm.AllReduce(p, p, size/esz, s) }
	if cfg.Coll == CollReduceScatter {
		call = func(s *cuda.Stream) error {
			return r.comm.ReduceScatter(p, p.Add(uint64(c.Env.Rank)*n), n/esz, s)
		}
	}
	cs := r.run.cs
	if !cfg.Graph {
		return func() error { cs.Enqueue(call); return nil }, nil
	}
	g := r.run.gs[size]
	if g == nil {
		if err := c.Sync(ctx); err != nil {
			return nil, err
		}
		if g, err = cs.Capture(call); err != nil {
			return nil, fmt.Errorf("NCCL graph: %w", err)
		}
		r.run.gs[size] = g
		r.nodes = gpu.NodesString(g.Nodes())
	}
	return func() error { g.Launch(); return nil }, nil
}
