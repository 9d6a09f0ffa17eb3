package engine

import (
	"encoding/json"

	"github.com/luacoll/luacoll/engine/launch/cpuset"
)

// crowded reports whether more ranks may run on this rank's CPUs than
// there are CPUs: the ranks of this host (offers, by rank, as bindCPUs
// gathers them) whose CPUs overlap mine, this one included, outnumber
// mine. Such ranks must hand their processor over while they wait, since
// the rank they wait for may need it. Ranks of one process count once
// each (each has its own stream). shared reports whether other ranks run
// in this process.
func crowded(me int, mine []int, offers [][]byte) (over, shared bool) {
	var own cpuOffer
	if me >= len(offers) || json.Unmarshal(offers[me], &own) != nil {
		return false, false
	}
	n := 0
	for r, d := range offers {
		var o cpuOffer
		if json.Unmarshal(d, &o) != nil || o.Host != own.Host {
			continue
		}
		if o.PID == own.PID && r != me {
			shared = true
		}
		cpus, err := cpuset.Parse(o.CPUs)
		if err != nil {
			continue
		}
		if len(cpuset.Intersect(cpus, mine)) > 0 {
			n++
		}
	}
	return len(mine) > 0 && n > len(mine), shared
}
