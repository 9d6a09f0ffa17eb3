package gpu

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/luacoll/luacoll/cuda"
)

// Current makes the stream's CUDA context current on the calling thread
// (for library calls that use the runtime's current device, like NCCL).
func (s *CUDAStream) Current() error {
	s.b.quiesce()
	return s.b.current()
}

// Enqueue runs fn with the raw CUDA stream, in stream order; an error stops
// the stream and is reported by the next Sync.
func (s *CUDAStream) Enqueue(fn func(cs *cuda.Stream) error) {
	s.enqueue(func() error { return fn(s.s) })
}

// CUDAGraph is work captured from a CUDAStream and instantiated.
type CUDAGraph struct {
	s     *CUDAStream
	g     *cuda.Graph
	exec  *cuda.GraphExec
	nodes map[string]int
}

// Capture records what fn enqueues on the raw stream into a CUDA graph
// (thread-local capture mode) and instantiates it; nothing runs yet. The
// stream must be idle of errors; a failure inside fn ends the capture.
func (s *CUDAStream) Capture(fn func(cs *cuda.Stream) error) (*CUDAGraph, error) {
	defer onThread()()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return nil, fmt.Errorf("capture: the stream has failed: %w", s.err)
	}
	if err := s.b.current(); err != nil {
		return nil, fmt.Errorf("capture: %w", err)
	}
	// A held operation belongs before the capture, not in it; a waiting
	// prelaunched kernel goes away.
	s.flushLocked()
	s.cancelPreLocked()
	if s.err != nil {
		return nil, fmt.Errorf("capture: the stream has failed: %w", s.err)
	}
	if err := s.s.BeginCapture(cuda.CaptureModeThreadLocal); err != nil {
		return nil, fmt.Errorf("capture: %w", err)
	}
	ferr := fn(s.s)
	g, err := s.s.EndCapture()
	if ferr != nil || err != nil {
		if g != nil {
			_ = g.Destroy()
		}
		return nil, fmt.Errorf("capture: %w", errors.Join(ferr, err))
	}
	nodes, err := g.NodeCounts()
	if err != nil {
		_ = g.Destroy()
		return nil, fmt.Errorf("capture: %w", err)
	}
	exec, err := g.Instantiate(0)
	if err != nil {
		_ = g.Destroy()
		return nil, fmt.Errorf("capture: %w", err)
	}
	return &CUDAGraph{s: s, g: g, exec: exec, nodes: nodes}, nil
}

// Nodes returns the graph's node counts by type ("kernel", "memcpy", ...).
func (g *CUDAGraph) Nodes() map[string]int {
	out := make(map[string]int, len(g.nodes))
	for k, v := range g.nodes {
		out[k] = v
	}
	return out
}

// NodesString formats node counts as "kernel=2 memcpy=3", sorted by type.
func NodesString(nodes map[string]int) string {
	var parts []string
	for k, v := range nodes {
		parts = append(parts, fmt.Sprintf("%s=%d", k, v))
	}
	sort.Strings(parts)
	return strings.Join(parts, " ")
}

// Launch enqueues one replay of the graph on its stream.
func (g *CUDAGraph) Launch() {
	g.s.enqueue(func() error { return g.exec.Launch(g.s.s) })
}

// Destroy releases the graph; the stream must have finished its replays.
func (g *CUDAGraph) Destroy() error {
	defer onThread()()
	if g.exec == nil {
		return nil
	}
	if err := g.s.b.current(); err != nil {
		return err
	}
	err := errors.Join(g.exec.Destroy(), g.g.Destroy())
	g.exec, g.g = nil, nil
	return err
}
