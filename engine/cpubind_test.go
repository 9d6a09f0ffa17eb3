package engine

import (
	"reflect"
	"testing"
	"time"

	"github.com/luacoll/luacoll/engine/cpuset"
)

// TestCPUBindSkipsRanksOfOneProcess opens two ranks in this process with
// --cpu-bind spread: binding one would bind both, so neither binds, and the
// process keeps its CPUs.
func TestCPUBindSkipsRanksOfOneProcess(t *testing.T) {
	before, err := cpuset.Current()
	if err != nil {
		t.Fatal(err)
	}
	const n = 2
	cpus := make([][]int, n)
	errs := withComms(t, n, Options{Device: "host", Timeout: 10 * time.Second, CPUBind: CPUBindSpread}, func(r int, c *Comm) error {
		cpus[r] = c.CPUs
		return nil
	})
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
		if !reflect.DeepEqual(cpus[r], before) {
			t.Errorf("rank %d: CPUs %v, want the process's %v", r, cpus[r], before)
		}
	}
	if after, _ := cpuset.Current(); !reflect.DeepEqual(after, before) {
		t.Errorf("process CPUs %v after open, were %v", after, before)
	}
	if err := CheckCPUBind("near"); err == nil {
		t.Error(`CheckCPUBind("near") accepted`)
	}
}
