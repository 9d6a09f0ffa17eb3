package engine_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/luacoll/luacoll/engine"
	"github.com/luacoll/luacoll/engine/enginetest"
	"github.com/luacoll/luacoll/engine/launch"
	"github.com/luacoll/luacoll/transport"
)

// The ranks of one process yield to each other's goroutines; a lone rank
// per CPU spins.
func TestHostPolicyFromPlacement(t *testing.T) {
	errs := enginetest.WithComms(t, 3, engine.Options{Device: "host", Timeout: 10 * time.Second, CPUBind: launch.CPUBindAuto}, func(r int, c *engine.Comm) error {
		hs, ok := c.Rank.Stream.(*transport.HostStream)
		if !ok {
			return fmt.Errorf("stream %T", c.Rank.Stream)
		}
		if !hs.Policy().Goroutines {
			return fmt.Errorf("policy %+v: ranks of one process must yield to each other", hs.Policy())
		}
		return nil
	})
	for r, err := range errs {
		if err != nil {
			t.Errorf("rank %d: %v", r, err)
		}
	}
}
