package cuda

/*
#include "lc_cuda.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"unsafe"
)

// CaptureMode is a CUstreamCaptureMode.
type CaptureMode int

const (
	// CaptureModeGlobal forbids unsafe calls from any thread during capture.
	CaptureModeGlobal CaptureMode = 0
	// CaptureModeThreadLocal forbids unsafe calls from the capturing thread.
	CaptureModeThreadLocal CaptureMode = 1
	// CaptureModeRelaxed forbids nothing.
	CaptureModeRelaxed CaptureMode = 2
)

// GraphNodeType is a CUgraphNodeType.
type GraphNodeType int

// Graph node types (cuda.h, CUDA 12/13).
const (
	GraphNodeKernel        GraphNodeType = 0
	GraphNodeMemcpy        GraphNodeType = 1
	GraphNodeMemset        GraphNodeType = 2
	GraphNodeHost          GraphNodeType = 3
	GraphNodeGraph         GraphNodeType = 4
	GraphNodeEmpty         GraphNodeType = 5
	GraphNodeWaitEvent     GraphNodeType = 6
	GraphNodeEventRecord   GraphNodeType = 7
	GraphNodeExtSemSignal  GraphNodeType = 8
	GraphNodeExtSemWait    GraphNodeType = 9
	GraphNodeMemAlloc      GraphNodeType = 10
	GraphNodeMemFree       GraphNodeType = 11
	GraphNodeBatchMemOp    GraphNodeType = 12
	GraphNodeConditional   GraphNodeType = 13
	graphNodeTypeOther     GraphNodeType = 14
	numGraphNodeTypeCounts               = 15
)

var graphNodeNames = [numGraphNodeTypeCounts]string{
	"kernel", "memcpy", "memset", "host", "graph", "empty", "wait_event",
	"event_record", "ext_sem_signal", "ext_sem_wait", "mem_alloc", "mem_free",
	"mem_op", "conditional", "other",
}

// String returns the short name used in node counts, e.g. "kernel",
// "memcpy", "mem_op" (stream memory operations), "other" for unknown types.
func (t GraphNodeType) String() string {
	if t < 0 || t >= numGraphNodeTypeCounts {
		t = graphNodeTypeOther
	}
	return graphNodeNames[t]
}

// Graph is a CUDA graph (CUgraph).
type Graph struct {
	d *Driver
	h unsafe.Pointer
}

// GraphExec is an instantiated, launchable graph (CUgraphExec).
type GraphExec struct {
	d *Driver
	h unsafe.Pointer
}

// BeginCapture starts recording the work enqueued on s into a graph
// (cuStreamBeginCapture); s must not be the default stream.
func (s *Stream) BeginCapture(mode CaptureMode) error {
	if err := s.d.need(symStreamBeginCapture); err != nil {
		return err
	}
	if r := C.lc_cuStreamBeginCapture(s.d.fn[symStreamBeginCapture], s.h, C.int(mode)); r != 0 {
		return s.d.fail(r, fmt.Sprintf("cuStreamBeginCapture(mode %d)", mode))
	}
	s.capturing = true
	return nil
}

// EndCapture stops recording and returns the captured graph.
func (s *Stream) EndCapture() (*Graph, error) {
	if err := s.d.need(symStreamEndCapture); err != nil {
		return nil, err
	}
	o := C.lc_cuStreamEndCapture(s.d.fn[symStreamEndCapture], s.h)
	s.capturing = false
	if o.r != 0 {
		return nil, s.d.fail(o.r, "cuStreamEndCapture")
	}
	return &Graph{d: s.d, h: o.h}, nil
}

// Instantiate creates an executable graph (cuGraphInstantiateWithFlags).
func (g *Graph) Instantiate(flags uint64) (*GraphExec, error) {
	if err := g.d.need(symGraphInstantiateWithFlags); err != nil {
		return nil, err
	}
	o := C.lc_cuGraphInstantiateWithFlags(g.d.fn[symGraphInstantiateWithFlags], g.h, C.ulonglong(flags))
	if o.r != 0 {
		return nil, g.d.fail(o.r, fmt.Sprintf("cuGraphInstantiateWithFlags(%#x)", flags))
	}
	return &GraphExec{d: g.d, h: o.h}, nil
}

// NodeCounts returns the number of nodes of g per type name (see
// GraphNodeType.String), from cuGraphGetNodes and cuGraphNodeGetType.
func (g *Graph) NodeCounts() (map[string]int, error) {
	if err := g.d.need(symGraphGetNodes); err != nil {
		return nil, err
	}
	if err := g.d.need(symGraphNodeGetType); err != nil {
		return nil, err
	}
	var counts [numGraphNodeTypeCounts]C.int
	var total C.size_t
	if r := C.lc_graph_count_nodes(g.d.fn[symGraphGetNodes], g.d.fn[symGraphNodeGetType], g.h,
		(*C.int)(unsafe.Pointer(&counts[0])), numGraphNodeTypeCounts, &total); r != 0 {
		return nil, g.d.fail(r, fmt.Sprintf("cuGraphGetNodes/cuGraphNodeGetType (%d nodes)", total))
	}
	out := make(map[string]int)
	for t, n := range counts {
		if n > 0 {
			out[GraphNodeType(t).String()] = int(n)
		}
	}
	return out, nil
}

// Destroy releases the graph (instantiated copies stay valid).
func (g *Graph) Destroy() error {
	if err := g.d.need(symGraphDestroy); err != nil {
		return err
	}
	if r := C.lc_cuGraphDestroy(g.d.fn[symGraphDestroy], g.h); r != 0 {
		return g.d.fail(r, "cuGraphDestroy")
	}
	return nil
}

// Launch enqueues the whole graph on s (cuGraphLaunch).
func (e *GraphExec) Launch(s *Stream) error {
	if err := e.d.need(symGraphLaunch); err != nil {
		return err
	}
	if r := C.lc_cuGraphLaunch(e.d.fn[symGraphLaunch], e.h, s.handle()); r != 0 {
		return e.d.fail(r, "cuGraphLaunch")
	}
	return nil
}

// Destroy releases the executable graph.
func (e *GraphExec) Destroy() error {
	if err := e.d.need(symGraphExecDestroy); err != nil {
		return err
	}
	if r := C.lc_cuGraphExecDestroy(e.d.fn[symGraphExecDestroy], e.h); r != 0 {
		return e.d.fail(r, "cuGraphExecDestroy")
	}
	return nil
}

// KernelGraph launches one kernel through an instantiated graph of one
// kernel node, setting the node's arguments before each launch
// (cuGraphExecKernelNodeSetParams, then cuGraphLaunch). On the lent 2 x
// H200 VMs this took 2.2-2.6 us of host time per launch against 3.2-3.9 us
// for cuLaunchKernel in the same runs. The function is fixed; grid and block sizes may change
// from launch to launch. A KernelGraph is not safe for concurrent use, and
// a stream being captured must use LaunchKernel instead.
type KernelGraph struct {
	d    *Driver
	f    *Function
	g    unsafe.Pointer
	ge   unsafe.Pointer
	node unsafe.Pointer
}

// KernelGraphs reports whether the driver has what NewKernelGraph needs.
func (d *Driver) KernelGraphs() bool {
	for _, s := range []sym{symGraphCreate, symGraphAddKernelNode, symGraphExecKernelNodeSetParams,
		symGraphInstantiateWithFlags, symGraphLaunch, symGraphDestroy, symGraphExecDestroy} {
		if d.fn[s] == nil {
			return false
		}
	}
	return true
}

// NewKernelGraph builds and instantiates a one-node graph for f with the
// given launch shape and arguments (in the current context).
func (d *Driver) NewKernelGraph(f *Function, grid, block uint32, args *KernelArgs) (*KernelGraph, error) {
	if !d.KernelGraphs() {
		return nil, d.need(symGraphExecKernelNodeSetParams)
	}
	ca, err := args.c(f.name)
	if err != nil {
		return nil, err
	}
	o := C.lc_cuGraphCreate(d.fn[symGraphCreate])
	if o.r != 0 {
		return nil, d.fail(o.r, "cuGraphCreate")
	}
	k := &KernelGraph{d: d, f: f, g: o.h}
	n := C.lc_kernel_graph_add(d.fn[symGraphAddKernelNode], k.g, f.h, C.uint(max(grid, 1)), C.uint(max(block, 1)), ca)
	if n.r != 0 {
		_ = C.lc_cuGraphDestroy(d.fn[symGraphDestroy], k.g)
		return nil, d.fail(n.r, fmt.Sprintf("cuGraphAddKernelNode(%s)", f.name))
	}
	k.node = n.h
	e := C.lc_cuGraphInstantiateWithFlags(d.fn[symGraphInstantiateWithFlags], k.g, 0)
	if e.r != 0 {
		_ = C.lc_cuGraphDestroy(d.fn[symGraphDestroy], k.g)
		return nil, d.fail(e.r, fmt.Sprintf("cuGraphInstantiateWithFlags(one-kernel graph of %s)", f.name))
	}
	k.ge = e.h
	return k, nil
}

// Launch sets the kernel's arguments and launch shape and enqueues the
// graph on s.
func (k *KernelGraph) Launch(grid, block uint32, s *Stream, args *KernelArgs) error {
	ca, err := args.c(k.f.name)
	if err != nil {
		return err
	}
	var failedSet C.int
	r := C.lc_kernel_graph_launch(k.d.fn[symGraphExecKernelNodeSetParams], k.d.fn[symGraphLaunch], k.ge, k.node,
		k.f.h, C.uint(max(grid, 1)), C.uint(max(block, 1)), s.handle(), ca, &failedSet)
	if r != 0 {
		call := "cuGraphLaunch"
		if failedSet != 0 {
			call = "cuGraphExecKernelNodeSetParams"
		}
		return k.d.fail(r, fmt.Sprintf("%s(one-kernel graph of %s, grid %d, block %d)", call, k.f.name, grid, block))
	}
	return nil
}

// Destroy releases the graph and its executable.
func (k *KernelGraph) Destroy() error {
	var errs []error
	if k.ge != nil {
		if r := C.lc_cuGraphExecDestroy(k.d.fn[symGraphExecDestroy], k.ge); r != 0 {
			errs = append(errs, k.d.fail(r, "cuGraphExecDestroy"))
		}
		k.ge = nil
	}
	if k.g != nil {
		if r := C.lc_cuGraphDestroy(k.d.fn[symGraphDestroy], k.g); r != 0 {
			errs = append(errs, k.d.fail(r, "cuGraphDestroy"))
		}
		k.g = nil
	}
	return errors.Join(errs...)
}
