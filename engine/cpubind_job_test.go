package engine_test

import (
	"context"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/luacoll/luacoll/engine"
	"github.com/luacoll/luacoll/engine/enginetest"
	"github.com/luacoll/luacoll/engine/launch"
	"github.com/luacoll/luacoll/engine/launch/cpuset"
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
	errs := enginetest.WithComms(t, n, engine.Options{Device: "host", Timeout: 10 * time.Second, CPUBind: launch.CPUBindSpread}, func(r int, c *engine.Comm) error {
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
	if err := launch.CheckCPUBind("near"); err == nil {
		t.Error(`launch.CheckCPUBind("near") accepted`)
	}
}

// TestPlacement: every rank learns every rank's CPUs, and the description
// folds identical lists.
func TestPlacement(t *testing.T) {
	const n = 3
	descs := make([]string, n)
	lists := make([][]string, n)
	errs := enginetest.WithComms(t, n, engine.Options{Device: "host", Timeout: 10 * time.Second}, func(r int, c *engine.Comm) error {
		var err error
		descs[r], lists[r], err = c.Placement(context.Background())
		if err != nil {
			return err
		}
		// Pretend rank 1 runs elsewhere: the description lists each rank.
		if r == 1 {
			c.CPUs = []int{7}
		}
		d, _, err := c.Placement(context.Background())
		if err == nil && d != fmt.Sprintf("rank 0 on %s, rank 1 on 7, rank 2 on %s", lists[r][0], lists[r][2]) {
			err = fmt.Errorf("description %q", d)
		}
		return err
	})
	cur, _ := cpuset.Current()
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
		if want := "every rank on " + cpuset.Format(cur); descs[r] != want || len(lists[r]) != n || lists[r][2] != cpuset.Format(cur) {
			t.Errorf("rank %d: %q %v, want %q", r, descs[r], lists[r], want)
		}
	}
}
