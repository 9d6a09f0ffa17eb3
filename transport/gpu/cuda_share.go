package gpu

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/luacoll/luacoll/cuda"
	"github.com/luacoll/luacoll/transport"
)

type cudaShare struct {
	Handle []byte `json:"h,omitempty"`
	Size   uint64 `json:"s,omitempty"` // VMM: the exported allocation's size
	Err    string `json:"err,omitempty"`
}

// ipcReach says why topo rules out a GPU window ("" when every peer can be
// mapped).
func ipcReach(topo *transport.Topology) string {
	for r, k := range topo.Kinds {
		if k == transport.KindNet {
			return fmt.Sprintf("rank %d is reached over the network (transport net): windows with network peers live in host memory the GPU maps, and the host runs their network operations (the proxy path)", r)
		}
		if k != transport.KindSelf && k != transport.KindNVL {
			return fmt.Sprintf("rank %d is reachable only by transport %s; GPU windows need CUDA IPC (nvl) to every peer", r, k)
		}
	}
	return ""
}

// SetTimeoutHint gives the device waits' timeouts an explanation (ranks
// that share this GPU without MPS); "" for none. Call it before the
// streams run.
func (b *CUDABackend) SetTimeoutHint(hint string) { b.timeoutHint = hint }

// timeoutCause is what a device wait that ran out of time failed with.
func (b *CUDABackend) timeoutCause() error {
	if b.timeoutHint == "" {
		return transport.ErrTimeout
	}
	return &transport.TimeoutHint{Hint: b.timeoutHint}
}

// SymmetricSupport implements transport.SymmetricCapable: symmetric
// windows need every peer reachable by CUDA IPC (nvl) and a device that
// supports VMM memory exported as file descriptors.
func (b *CUDABackend) SymmetricSupport(topo *transport.Topology) (bool, string) {
	if why := ipcReach(topo); why != "" {
		return false, why
	}
	for _, a := range []struct {
		attr cuda.DeviceAttribute
		what string
	}{{cuda.AttrVirtualMemoryManagement, "virtual memory management"}, {cuda.AttrHandleTypePosixFDSupported, "VMM handles as file descriptors"}} {
		v, err := b.drv.DeviceAttribute(b.dev, a.attr)
		if err != nil {
			return false, err.Error()
		}
		if v == 0 {
			return false, fmt.Sprintf("device %d does not support %s", b.ordinal, a.what)
		}
	}
	return true, ""
}

// Share implements Memory: device memory exported with a legacy IPC handle
// and opened by every same-host peer, or with ipc IPCVMM, see shareVMM.
func (b *CUDABackend) Share(ctx context.Context, ex transport.Exchanger, topo *transport.Topology, size uint64, ipc string) (*transport.Region, error) {
	if topo.AnyNet() {
		return b.shareProxy(ctx, ex, topo, size, ipc)
	}
	switch ipc {
	case transport.IPCVMM:
		return b.shareVMM(ctx, ex, topo, size, false)
	case transport.IPCSymmetric:
		return b.shareVMM(ctx, ex, topo, size, true)
	}
	defer onThread()()
	rank, n := ex.Rank(), ex.Size()
	var local cuda.DevicePtr
	st := cudaShare{Err: ipcReach(topo)}
	if st.Err == "" {
		p, err := b.alloc(size)
		if err != nil {
			st.Err = err.Error()
		} else {
			local = p
			h, err := b.drv.IpcGetMemHandle(p)
			if err != nil {
				st.Err = err.Error()
			} else {
				st.Handle = h[:]
			}
		}
	}
	all, err := exchangeCUDA(ctx, ex, st)
	opened := make([]cuda.DevicePtr, n)
	closePeers := func() error {
		var errs []error
		b.quiesce()
		_ = b.current()
		for r, p := range opened {
			if p != 0 && r != rank {
				if e := b.drv.IpcCloseMemHandle(p); e != nil {
					errs = append(errs, fmt.Errorf("closing rank %d's window: %w", r, e))
				}
			}
			opened[r] = 0
		}
		return errors.Join(errs...)
	}
	if err == nil {
		// The exchange may have moved this goroutine to another thread.
		if e := b.current(); e != nil {
			st.Err = e.Error()
		}
		for r, s := range all {
			if st.Err != "" {
				break
			}
			if r == rank {
				opened[r] = local
				continue
			}
			var h cuda.IpcMemHandle
			copy(h[:], s.Handle)
			p, e := b.drv.IpcOpenMemHandle(h)
			if e != nil {
				st = cudaShare{Err: fmt.Sprintf("opening rank %d's window: %v", r, e)}
				break
			}
			opened[r] = p
		}
		if st.Err == "" {
			st = cudaShare{}
		}
		_, err = exchangeCUDA(ctx, ex, st)
	}
	if err != nil {
		_ = closePeers()
		if local != 0 {
			_ = b.free(local)
		}
		return nil, err
	}
	peers := make([]transport.Addr, n)
	for r, p := range opened {
		peers[r] = transport.Addr(p)
	}
	freeLocal := func() error {
		if local == 0 {
			return nil
		}
		p := local
		local = 0
		return b.free(p)
	}
	return transport.NewRegion(size, transport.Addr(local), peers, closePeers, freeLocal), nil
}

func exchangeCUDA(ctx context.Context, ex transport.Exchanger, st cudaShare) ([]cudaShare, error) {
	raw, _ := json.Marshal(st)
	got, err := ex.AllGather(ctx, raw)
	if err != nil {
		return nil, err
	}
	out := make([]cudaShare, len(got))
	var msgs []string
	for r, g := range got {
		if err := json.Unmarshal(g, &out[r]); err != nil {
			return nil, fmt.Errorf("status from rank %d: %w", r, err)
		}
		if out[r].Err != "" {
			msgs = append(msgs, fmt.Sprintf("rank %d: %s", r, out[r].Err))
		}
	}
	if len(msgs) > 0 {
		return nil, fmt.Errorf("sharing GPU memory: %s", strings.Join(msgs, "; "))
	}
	return out, nil
}

// Alloc implements Memory.
func (b *CUDABackend) Alloc(size uint64) (*transport.Region, error) {
	if b.hostBuffers.Load() {
		return b.allocHost(size)
	}
	p, err := b.alloc(size)
	if err != nil {
		return nil, fmt.Errorf("allocating %d bytes on %s: %w", size, b.Name(), err)
	}
	done := false
	return transport.NewRegion(size, transport.Addr(p), nil, nil, func() error {
		if done {
			return nil
		}
		done = true
		return b.free(p)
	}), nil
}
