package engine

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/luacoll/luacoll/engine/cpuset"
	"github.com/luacoll/luacoll/transport"
)

// CPU binding modes (Options.CPUBind).
const (
	// CPUBindNone leaves the process's affinity as it was started.
	CPUBindNone = "none"
	// CPUBindAuto gives each rank its share of the CPUs it may run on
	// (those near its GPU, where the system says which) when the share
	// holds at least two CPUs, and leaves the ranks as started otherwise.
	CPUBindAuto = "auto"
	// CPUBindSpread is auto down to one CPU per rank.
	CPUBindSpread = "spread"
)

// CheckCPUBind reports whether mode is one of the binding modes ("" is
// none).
func CheckCPUBind(mode string) error {
	switch mode {
	case "", CPUBindNone, CPUBindAuto, CPUBindSpread:
		return nil
	}
	return fmt.Errorf("unknown CPU binding %q (want auto, spread or none)", mode)
}

type cpuOffer struct {
	Host string `json:"host"`
	CPUs string `json:"cpus"`
}

// bindCPUs agrees with every rank on who gets which CPUs and binds this
// process (collective: every rank calls it, whatever the mode). Ranks on
// one host that could use the same CPUs share them out in rank order, so
// two busy-polling ranks do not take turns on one core.
func (c *Comm) bindCPUs(ctx context.Context) error {
	mode := c.Opts.CPUBind
	if mode == "" {
		mode = CPUBindNone
	}
	allowed, err := cpuset.Current()
	if err != nil {
		return err
	}
	cand := allowed
	if local, ok := c.Backend.(transport.CPULocal); ok {
		if near, err := cpuset.Parse(local.LocalCPUList()); err == nil {
			if both := cpuset.Intersect(allowed, near); len(both) > 0 {
				cand = both
			}
		}
	}
	offer, _ := json.Marshal(cpuOffer{Host: c.Backend.Identity().Host, CPUs: cpuset.Format(cand)})
	all, err := c.Collective(ctx, "cpu_bind("+mode+")", offer)
	if err != nil {
		return err
	}
	c.CPUs = allowed
	var min int
	switch mode {
	case CPUBindSpread:
		min = 1
	case CPUBindAuto:
		min = 2
	default:
		return nil
	}
	members := make([]cpuset.Member, len(all))
	for r, d := range all {
		var o cpuOffer
		if err := json.Unmarshal(d, &o); err != nil {
			return fmt.Errorf("cpu binding: rank %d's offer: %w", r, err)
		}
		cpus, err := cpuset.Parse(o.CPUs)
		if err != nil {
			return fmt.Errorf("cpu binding: rank %d's offer: %w", r, err)
		}
		members[r] = cpuset.Member{Host: o.Host, CPUs: cpus}
	}
	mine := cpuset.Split(members, min, cpuset.CoreOf())[c.Env.Rank]
	if err := cpuset.Apply(mine); err != nil {
		return fmt.Errorf("cpu binding (%s): %w", mode, err)
	}
	c.CPUs = mine
	if hb, ok := c.Backend.(*transport.HostBackend); ok && len(mine) < 2 {
		// One core for the script and the stream: waits must yield.
		hb.Oversubscribed = true
	}
	return nil
}
