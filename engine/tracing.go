package engine

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime/pprof"

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
		part = trace.PartPath(c.Opts.TraceDir, c.RankID())
	case c.Opts.TraceFile != "":
		part = trace.SidePart(c.Opts.TraceFile, c.RankID())
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
	rec, err := trace.Start(trace.Options{Rank: c.RankID(), Size: c.Size(), Clock: clock, Part: part})
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
	return trace.Gather(ctx, m, c.RankID(), c.Size(), c.Opts.TraceFile)
}

// Tracing reports whether the rank records a timeline (TraceOp records).
func (c *Comm) Tracing() bool { return c.trace != nil }

// TraceOp records an operation enqueued on the rank's stream by code of
// its own rather than through a window (a persistent all-gather's exec):
// op.Done is stamped here. It does nothing unless Tracing.
func (c *Comm) TraceOp(op window.Op) {
	if c.trace == nil {
		return
	}
	if s, ok := c.Rank.Stream.(transport.Stamper); ok {
		op.Done = s.Stamp()
	}
	c.trace.Op(op)
}

// startProfile starts the rank's CPU profile when Options ask for one.
func (c *Comm) startProfile() error {
	if c.Opts.CPUProfileDir == "" {
		return nil
	}
	path := filepath.Join(c.Opts.CPUProfileDir, fmt.Sprintf("rank-%d.pprof", c.RankID()))
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("cpu profile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return fmt.Errorf("cpu profile %s: %w", path, err)
	}
	c.profile = f
	return nil
}

// endProfile stops the rank's CPU profile, if any, and closes its file.
func (c *Comm) endProfile() error {
	if c.profile == nil {
		return nil
	}
	pprof.StopCPUProfile()
	f := c.profile
	c.profile = nil
	if err := f.Close(); err != nil {
		return fmt.Errorf("cpu profile: %w", err)
	}
	return nil
}
