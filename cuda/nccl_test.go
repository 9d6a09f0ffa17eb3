package cuda

import (
	"bytes"
	"strings"
	"testing"
)

// needNCCL skips the test when libnccl.so.2 cannot be opened, and checks
// that the error says so clearly.
func needNCCL(t *testing.T) *NCCL {
	t.Helper()
	n, err := LoadNCCL()
	if err != nil {
		if !strings.Contains(err.Error(), "NCCL not found") && !strings.Contains(err.Error(), "lacks") {
			t.Fatalf("unclear error without NCCL: %v", err)
		}
		t.Skipf("no NCCL: %v", err)
	}
	t.Cleanup(n.Close)
	return n
}

// TestNCCLVersion: the library reports a 2.x version.
func TestNCCLVersion(t *testing.T) {
	n := needNCCL(t)
	if !strings.HasPrefix(n.Version(), "2.") {
		t.Fatalf("version %q", n.Version())
	}
}

// TestNCCLAllGatherOneRank: a one-rank communicator gathers its own chunk
// (a copy) on a stream and inside a captured CUDA graph.
func TestNCCLAllGatherOneRank(t *testing.T) {
	n := needNCCL(t)
	g := needGPU(t)
	t.Setenv("NCCL_NVLS_ENABLE", "0")
	id, err := n.UniqueID()
	must(t, err)
	comm, err := n.InitRank(id, 1, 0)
	must(t, err)
	defer func() { must(t, comm.Destroy()) }()
	const size = 4096
	src, dst := alloc(t, g.d, size), alloc(t, g.d, size)
	want := randBytes(size, 3)
	must(t, g.d.MemcpyHtoD(src, want))
	s := stream(t, g.d)
	must(t, comm.AllGather(src, dst, size, NCCLUint8, s))
	must(t, s.Synchronize())
	got := make([]byte, size)
	must(t, g.d.MemcpyDtoH(got, dst))
	if !bytes.Equal(got, want) {
		t.Fatal("eager all-gather: wrong data")
	}
	must(t, g.d.MemcpyHtoD(dst, make([]byte, size)))
	must(t, s.BeginCapture(CaptureModeThreadLocal))
	if err := comm.AllGather(src, dst, size, NCCLUint8, s); err != nil {
		_, _ = s.EndCapture()
		t.Fatal(err)
	}
	gr, err := s.EndCapture()
	must(t, err)
	defer gr.Destroy()
	ex, err := gr.Instantiate(0)
	must(t, err)
	defer ex.Destroy()
	must(t, ex.Launch(s))
	must(t, s.Synchronize())
	must(t, g.d.MemcpyDtoH(got, dst))
	if !bytes.Equal(got, want) {
		t.Fatal("graph all-gather: wrong data")
	}
}
