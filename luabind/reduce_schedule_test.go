package luabind

import (
	"errors"
	"testing"

	"github.com/luacoll/luacoll/kernels"
)

// Each call kind's two plans are recorded at its first call and handed out
// in turn from then on, each kind keeping its own turn when calls of
// other kinds come in between (the staged schedules need the halves to
// alternate per kind); a failed recording leaves nothing behind.
func TestPlanTurns(t *testing.T) {
	var turns planTurns
	recorded := 0
	record := func() (*planRef, error) {
		recorded++
		return &planRef{num: recorded}, nil
	}
	a := planKey{call: ReduceCall{N: 1024, Type: kernels.F32, Op: kernels.Sum}}
	b := planKey{call: ReduceCall{N: 4096, Type: kernels.F32, Op: kernels.Sum}}
	c := planKey{call: ReduceCall{N: 1024, Type: kernels.BF16, Op: kernels.Sum}}
	for i, step := range []struct {
		k    planKey
		want int
	}{{a, 1}, {a, 2}, {b, 3}, {a, 1}, {b, 4}, {b, 3}, {a, 2}, {c, 5}, {a, 1}, {c, 6}} {
		r, err := turns.next(step.k, record)
		if err != nil {
			t.Fatal(err)
		}
		if r.num != step.want {
			t.Fatalf("call %d (n=%d, %s): plan %d, want %d", i+1, step.k.call.N, step.k.call.Type, r.num, step.want)
		}
	}
	if recorded != 6 {
		t.Fatalf("%d plans recorded, want 6", recorded)
	}
	// A failed recording (the second plan of a kind) is returned, and the
	// next call of the kind records both again.
	d := planKey{call: ReduceCall{N: 64, Type: kernels.I32, Op: kernels.Max}}
	boom := errors.New("boom")
	n := 0
	failSecond := func() (*planRef, error) {
		n++
		if n == 2 {
			return nil, boom
		}
		return &planRef{num: 100 + n}, nil
	}
	if _, err := turns.next(d, failSecond); !errors.Is(err, boom) {
		t.Fatalf("got %v, want the recording's error", err)
	}
	if r, err := turns.next(d, failSecond); err != nil || r.num != 103 {
		t.Fatalf("after the failure: plan %v, %v; want 103", r, err)
	}
	if r, err := turns.next(a, record); err != nil || r.num != 2 {
		t.Fatalf("back to the first kind: plan %v, %v; want 2", r, err)
	}
}
