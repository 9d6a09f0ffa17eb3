package gpu

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/luacoll/luacoll/transport"
)

// On a GPU, stamps taken some time apart on an idle stream are reached at
// host times within the calls that made them and the sync after: the
// anchors tie the device clock to the host's, also after an anchor aged.
func TestCUDAStamps(t *testing.T) {
	_, st := cudaStream(t, "stamp")
	s := transport.Stamper(st)
	for _, gap := range []time.Duration{0, 20 * time.Millisecond, anchorEvery + 100*time.Millisecond} {
		time.Sleep(gap)
		before := time.Now()
		stamp := s.Stamp()
		if err := st.Sync(context.Background()); err != nil {
			t.Fatal(err)
		}
		after := time.Now()
		at, ok := stamp.Reached()
		// The anchor's own reading is up to a query late.
		const slack = 50 * time.Microsecond
		if !ok || at.Before(before.Add(-slack)) || at.After(after.Add(slack)) {
			t.Fatalf("gap %v: stamp at %v (%v), want within [%v, %v]", gap, at.Sub(before), ok, time.Duration(0), after.Sub(before))
		}
	}
}

// cudaStream opens a CUDA backend on device 0 (skipping the test where
// there is none) and a stream of it, both closed when the test ends.
func cudaStream(t *testing.T, job string) (*CUDABackend, *CUDAStream) {
	t.Helper()
	b, err := NewCUDABackend(fmt.Sprintf("%s%d", job, time.Now().UnixNano()), 0, nil)
	if err != nil {
		t.Skipf("no CUDA device: %v", err)
	}
	t.Cleanup(func() { b.Close() })
	st, err := b.NewStream(transport.NewAbort())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return b, st.(*CUDAStream)
}
