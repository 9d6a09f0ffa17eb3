package engine

import (
	"context"
	"net"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/luacoll/luacoll/engine/cpuset"
	"github.com/luacoll/luacoll/transport"
)

// TestCPUBindSkipsRanksOfOneProcess opens two ranks in this process with
// --cpu-bind spread: binding one would bind both, so neither binds, and the
// process keeps its CPUs.
func TestCPUBindSkipsRanksOfOneProcess(t *testing.T) {
	before, err := cpuset.Current()
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	const n = 2
	host := transport.LocalIdentity("").Host
	cpus := make([][]int, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for r := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx := context.Background()
			abort := transport.NewAbort()
			cfg := BootstrapConfig{Rank: r, Size: n, Addr: ln.Addr().String(), Timeout: 10 * time.Second, Abort: abort, Host: host}
			if r == 0 {
				cfg.Listener = ln
			}
			boot, err := Connect(ctx, cfg)
			if err != nil {
				errs[r] = err
				return
			}
			env := RankEnv{Rank: r, Size: n, LocalRank: r, LocalSize: n, JobID: boot.JobID()}
			c, err := OpenWith(ctx, env, Options{Device: "host", Timeout: 10 * time.Second, CPUBind: CPUBindSpread}, boot, abort, nil)
			if err != nil {
				errs[r] = err
				return
			}
			cpus[r] = c.CPUs
			errs[r] = c.Close(nil)
		}()
	}
	wg.Wait()
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
