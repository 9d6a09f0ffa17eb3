package engine

import (
	"context"
	"fmt"

	"github.com/luacoll/luacoll/engine/bootstrap"
	"github.com/luacoll/luacoll/engine/trace"
	"github.com/luacoll/luacoll/transport"
	"github.com/luacoll/luacoll/window"
)

// startTrace starts the rank's recorder when Options ask for a trace,
// with its clock aligned to rank 0's over the bootstrap.
func (c *Comm) startTrace(ctx context.Context) error {
	part := ""
	switch {
	case c.Opts.TraceDir != "":
		part = trace.PartPath(c.Opts.TraceDir, c.Env.Rank)
	case c.Opts.TraceFile != "":
		part = trace.SidePart(c.Opts.TraceFile, c.Env.Rank)
	default:
		return nil
	}
	clock := trace.LocalClock()
	if jc, ok := c.Boot.(trace.JobClock); ok {
		var err error
		if clock, err = trace.Align(ctx, jc, trace.DefaultRounds); err != nil {
			return fmt.Errorf("trace: %w", err)
		}
	}
	rec, err := trace.Start(trace.Options{Rank: c.Env.Rank, Size: c.Env.Size, Clock: clock, Part: part})
	if err != nil {
		return err
	}
	c.trace = rec
	return nil
}

// endTrace closes the recorder with the rank's cause of failure, if any.
// Under an external launcher a clean end also gathers the parts at rank 0
// (trace.Gather); after a failure each rank's part stays next to the file.
func (c *Comm) endTrace(cause error) error {
	if c.Rank != nil {
		c.Rank.Trace = nil
	}
	err := c.trace.Close(cause)
	if err != nil || cause != nil || c.Opts.TraceDir != "" || c.Opts.TraceFile == "" {
		return err
	}
	m, ok := c.Boot.(trace.Mailer)
	if !ok {
		return nil
	}
	// The ranks end their scripts at different times.
	ctx := bootstrap.WithoutCallTimeout(context.Background())
	return trace.Gather(ctx, m, c.Env.Rank, c.Env.Size, c.Opts.TraceFile)
}

// traceOp records an operation the engine enqueued on the rank's stream
// itself (tracing is on).
func (c *Comm) traceOp(op window.Op) {
	if s, ok := c.Rank.Stream.(transport.Stamper); ok {
		op.Done = s.Stamp()
	}
	c.trace.Op(op)
}
