package gpu

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/luacoll/luacoll/transport"
	"github.com/luacoll/luacoll/transport/inproc"
)

// openOne opens a one-rank CUDA backend on device 0 with its topology, or
// skips without a GPU.
func openOne(t *testing.T) (*CUDABackend, *inproc.Member, *transport.Topology) {
	t.Helper()
	job := fmt.Sprintf("sym%d", time.Now().UnixNano())
	b, err := NewCUDABackend(job, 0, nil)
	if err != nil {
		t.Skipf("no usable CUDA backend: %v", err)
	}
	t.Cleanup(func() { _ = b.Close() })
	m := inproc.NewGroup(1).Member(0)
	topo, err := transport.Discover(context.Background(), m, b.Identity(), b.GPUPeer, "")
	if err != nil {
		t.Fatal(err)
	}
	return b, m, topo
}

// A symmetric region 1000 times: each is mapped at base + rank*stride with
// the stride rounded to whole granules (the size is not a multiple), data
// written reads back, and after the last free the device has as much free
// memory as before (no mapping or allocation left behind).
func TestSymmetricRegionLifecycle(t *testing.T) {
	b, m, topo := openOne(t)
	if ok, why := b.SymmetricSupport(topo); !ok {
		t.Skipf("no symmetric windows here: %s", why)
	}
	ctx := context.Background()
	const size = 3<<20 + 12345
	share := func() *transport.Region {
		reg, err := b.Share(ctx, m, topo, size, transport.IPCSymmetric)
		if err != nil {
			t.Fatal(err)
		}
		return reg
	}
	// A first one outside the count: the driver keeps some memory for
	// itself the first time.
	if err := share().Close(); err != nil {
		t.Fatal(err)
	}
	free0, _, err := b.drv.MemGetInfo()
	if err != nil {
		t.Fatal(err)
	}
	live0 := b.Live()
	for i := range 1000 {
		reg := share()
		f := reg.Flat
		if f == nil || f.Granularity == 0 || f.Stride%f.Granularity != 0 || f.Stride < size {
			t.Fatalf("round %d: flat range %+v for %d bytes", i, f, size)
		}
		if reg.Local != f.Base || reg.Peers[0] != f.Base {
			t.Fatalf("round %d: local %#x, peers %v, base %#x", i, reg.Local, reg.Peers, f.Base)
		}
		if i%100 == 0 {
			want := []byte(fmt.Sprintf("round %d", i))
			if err := b.Write(reg.Local.Add(size-uint64(len(want))), want); err != nil {
				t.Fatal(err)
			}
			got := make([]byte, len(want))
			if err := b.Read(got, reg.Local.Add(size-uint64(len(want)))); err != nil {
				t.Fatal(err)
			}
			if string(got) != string(want) {
				t.Fatalf("round %d: read %q", i, got)
			}
		}
		if err := reg.Close(); err != nil {
			t.Fatalf("round %d: close: %v", i, err)
		}
	}
	free1, _, err := b.drv.MemGetInfo()
	if err != nil {
		t.Fatal(err)
	}
	if b.Live() != live0 {
		t.Errorf("%d allocations live after 1000 frees, %d before", b.Live(), live0)
	}
	// Other processes share the GPU: allow a little drift, far below one
	// leaked window (4 MiB).
	if free1+(1<<20) < free0 {
		t.Errorf("device free memory %d after 1000 symmetric windows, %d before", free1, free0)
	}
	t.Logf("free memory before %d, after %d", free0, free1)
}
