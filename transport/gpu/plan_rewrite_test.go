package gpu

import (
	"context"
	"encoding/binary"
	"fmt"
	"testing"
	"time"

	"github.com/luacoll/luacoll/cuda"
	"github.com/luacoll/luacoll/kernels"
)

// Rewrites of a plan are stream-ordered: each run sees the steps written
// just before it, also with more rewrites in flight than the stage has
// slots and no sync between them (a rewrite that waited for the stream, or
// one whose host copy was reused too early, stores the wrong values).
func TestPlanRewriteInStreamOrder(t *testing.T) {
	b, s := cudaStream(t, "rewrite")
	const runs = 3*planStageSlots + 1
	reg, err := b.Alloc(8 * runs)
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	slots := reg.Local
	// A copy of 1 MiB before each store keeps the stream busy, so that the
	// host gets ahead of it.
	big, err := b.Alloc(2 << 20)
	if err != nil {
		t.Fatal(err)
	}
	defer big.Close()
	steps := []kernels.PlanStep{
		{Kind: kernels.StepCopy, Dst: cuda.DevicePtr(big.Local.Add(1 << 20)), Src: cuda.DevicePtr(big.Local), N: 1 << 20},
		{Kind: kernels.StepStore, Dst: cuda.DevicePtr(slots), Value: 1},
	}
	dp, err := b.NewDevicePlan(steps, func(step int, observed, target uint64, cause error) error {
		return fmt.Errorf("step %d: %w", step, cause)
	})
	if err != nil {
		t.Fatal(err)
	}
	for i := range runs {
		steps[1].Dst, steps[1].Value = cuda.DevicePtr(slots.Add(uint64(8*i))), uint64(100+i)
		if err := dp.Rewrite(s, steps); err != nil {
			t.Fatal(err)
		}
		s.RunPlan(dp, 0, 1, 5*time.Second, true, nil)
	}
	if err := s.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 8*runs)
	if err := b.Read(got, slots); err != nil {
		t.Fatal(err)
	}
	for i := range runs {
		if v := binary.LittleEndian.Uint64(got[8*i:]); v != uint64(100+i) {
			t.Errorf("run %d stored %d, want %d", i, v, 100+i)
		}
	}
	if err := s.FreePlan(dp); err != nil {
		t.Fatal(err)
	}
}
