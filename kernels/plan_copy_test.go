package kernels

import (
	"bytes"
	"fmt"
	"testing"
	"time"
)

// Copies of up to PlanSmall bytes, which thread 0 makes alone in batches
// of words: every size across a batch's edges, aligned and not, lands
// whole, and the byte after each stays as it was.
func TestPlanSmallCopies(t *testing.T) {
	d, k, s, c := kernelsOn(t)
	const slot = 512
	sizes := []uint64{1, 7, 8, 9, 56, 63, 64, 65, 72, 120, 128, 136, 200, 248, 255, PlanSmall}
	// Offsets of destination and source: both 8-byte aligned, both off by
	// the same 3 bytes, and a source only 4-byte aligned.
	offs := [][2]uint64{{0, 0}, {3, 3}, {0, 4}}
	srcData := make([]byte, 4096)
	FillRand(srcData, 11)
	src, dst := zeroed(t, d, 4096), zeroed(t, d, uint64(len(sizes)*len(offs))*slot)
	must(t, d.MemcpyHtoD(src, srcData))
	var steps []PlanStep
	want := make([]byte, uint64(len(sizes)*len(offs))*slot)
	for i, n := range sizes {
		for j, o := range offs {
			at := uint64(i*len(offs)+j) * slot
			from := uint64(i*8) + o[1]
			steps = append(steps, PlanStep{Kind: StepCopy, Dst: dst.Add(at + o[0]), Src: src.Add(from), N: n})
			copy(want[at+o[0]:], srcData[from:from+n])
		}
	}
	table := uploadPlan(t, d, steps)
	must(t, k.Plan(s, PlanSpec{Steps: table, Period: uint32(len(steps)), Count: uint64(len(steps)), Timeout: 5 * time.Second,
		Abort: c.abortDev(), Record: c.recordDev(), Tag: 3}))
	must(t, s.Synchronize())
	must(t, c.check(true))
	got := read(t, d, dst, len(want))
	for i, n := range sizes {
		for j, o := range offs {
			at := uint64(i*len(offs)+j) * slot
			if !bytes.Equal(got[at:at+slot], want[at:at+slot]) {
				t.Errorf("copy of %d bytes (dst +%d, src +%d): %s", n, o[0], o[1], firstDiff(got[at:at+slot], want[at:at+slot]))
			}
		}
	}
}

// firstDiff describes where two slices of one length first differ.
func firstDiff(got, want []byte) string {
	for i := range got {
		if got[i] != want[i] {
			return fmt.Sprintf("byte %d is %#x, want %#x", i, got[i], want[i])
		}
	}
	return "equal"
}
