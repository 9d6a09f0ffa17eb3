package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"runtime"
	"strings"

	"github.com/luacoll/luacoll/engine/launch"
	"github.com/luacoll/luacoll/engine/launch/cpuset"
	"github.com/luacoll/luacoll/transport"
)

type cpuOffer struct {
	Host string `json:"host"`
	PID  int    `json:"pid"`
	CPUs string `json:"cpus"`
}

// bindCPUs agrees with every rank on who gets which CPUs and binds this
// process (collective: every rank calls it, whatever the mode). Ranks on
// one host that could use the same CPUs share them out in rank order, so
// two busy-polling ranks do not take turns on one core. Binding is per
// process: when ranks share a process, none binds. In mode auto a refusal
// by the system leaves the rank as it was; in mode spread it is an error.
func (c *Comm) bindCPUs(ctx context.Context) error {
	mode := c.Opts.CPUBind
	if mode == "" {
		mode = launch.CPUBindNone
	}
	allowed, cand, aerr := c.candidateCPUs()
	id := c.Backend.Identity()
	offer, _ := json.Marshal(cpuOffer{Host: id.Host, PID: id.PID, CPUs: cpuset.Format(cand)})
	all, err := c.Collective(ctx, "cpu_bind("+mode+")", offer)
	if err != nil {
		return err
	}
	c.CPUs = allowed
	hb, onHost := c.Backend.(transport.Crowdable)
	if onHost && aerr == nil {
		// Waits adapt to ranks that outnumber the CPUs they may run on
		// (decided again below if this rank gets a share of its own).
		over, shared := crowded(c.RankID(), cand, all)
		hb.SetOversubscribed(over)
		hb.SetSharedProcess(shared)
	}
	var min int
	switch mode {
	case launch.CPUBindSpread:
		min = 1
	case launch.CPUBindAuto:
		min = 2
		if onHost {
			// A host rank runs its waits on the script's thread: one CPU
			// each keeps two ranks that poll off one CPU.
			min = 1
		}
	default:
		return nil
	}
	fail := func(err error) error {
		if mode == launch.CPUBindAuto {
			return nil
		}
		return fmt.Errorf("cpu binding (%s): %w", mode, err)
	}
	if aerr != nil {
		return fail(aerr)
	}
	members, oneProcess, err := decodeOffers(all)
	if err != nil || oneProcess {
		return err // ranks that share a process: binding one binds them all
	}
	core := cpuset.CoreOf()
	shares := cpuset.Split(members, min, core)
	mine := shares[c.RankID()]
	crowd := -1 // ranks of this host dealt this rank's CPU; -1: not dealt
	if mine == nil && mode == launch.CPUBindAuto && onHost {
		mine, crowd = dealOne(members, core, c.RankID())
	}
	if mine == nil {
		if mode != launch.CPUBindSpread {
			return nil // too few CPUs for a share each: auto leaves them be
		}
		return spreadError(members, shares)
	}
	if err := cpuset.Apply(mine); err != nil {
		_ = cpuset.Apply(allowed) // undo a partial binding
		return fail(err)
	}
	c.CPUs = mine
	if os.Getenv("GOMAXPROCS") == "" {
		// The runtime would follow the new affinity only at its next
		// periodic check.
		runtime.GOMAXPROCS(len(mine))
	}
	if onHost && crowd <= 1 {
		// A share of its own: the rank runs its waits on the caller's
		// thread (one CPU is enough).
		hb.SetOversubscribed(false)
	}
	return nil
}

// candidateCPUs returns the CPUs this process may run on (allowed, with
// err when they cannot be read) and those it offers to run on: the
// allowed ones near its device when the backend names them.
func (c *Comm) candidateCPUs() (allowed, cand []int, err error) {
	allowed, err = cpuset.Current()
	cand = allowed
	if local, ok := c.Backend.(transport.CPULocal); ok && err == nil {
		if near, perr := cpuset.Parse(local.LocalCPUList()); perr == nil {
			if both := cpuset.Intersect(allowed, near); len(both) > 0 {
				cand = both
			}
		}
	}
	return allowed, cand, err
}

// decodeOffers reads every rank's offer; oneProcess reports ranks that
// share a process (then members is incomplete).
func decodeOffers(all [][]byte) (members []cpuset.Member, oneProcess bool, err error) {
	members = make([]cpuset.Member, len(all))
	procs := make(map[cpuOffer]bool)
	for r, d := range all {
		var o cpuOffer
		if err := json.Unmarshal(d, &o); err != nil {
			return nil, false, fmt.Errorf("cpu binding: rank %d's offer: %w", r, err)
		}
		cpus, err := cpuset.Parse(o.CPUs)
		if err != nil {
			return nil, false, fmt.Errorf("cpu binding: rank %d's offer: %w", r, err)
		}
		members[r] = cpuset.Member{Host: o.Host, CPUs: cpus}
		p := cpuOffer{Host: o.Host, PID: o.PID}
		if procs[p] {
			return members, true, nil
		}
		procs[p] = true
	}
	return members, false, nil
}

// dealOne is rank me's CPU when the host's ranks outnumber its CPUs: one
// CPU each, dealt in turn, so that as many ranks share each CPU. Unbound,
// the kernel put 3 of 4 ranks on one of 2 CPUs at times and 2 on each at
// others, and a small all-gather took 3.0-7.6 us an exec depending on
// which (2 each: 3.8-5.7). crowd counts the ranks of this host dealt the
// same CPU (3 ranks on 2 CPUs: rank 1 has its CPU to itself); -1 when
// none was dealt.
func dealOne(members []cpuset.Member, core func(int) int, me int) (mine []int, crowd int) {
	dealt := cpuset.Deal(members, core)
	mine = dealt[me]
	if mine == nil {
		return nil, -1
	}
	for r, d := range dealt {
		if d != nil && members[r].Host == members[me].Host && d[0] == mine[0] {
			crowd++
		}
	}
	return mine, crowd
}

// spreadError is the error of mode spread when some rank gets no share:
// every rank computes the same shares, so the same error everywhere,
// reported once (StatusError).
func spreadError(members []cpuset.Member, shares [][]int) error {
	msgs := make([]string, len(members))
	for r, m := range members {
		if shares[r] != nil {
			continue
		}
		peers := 0
		for _, o := range members {
			if o.Host == m.Host && cpuset.Format(o.CPUs) == cpuset.Format(m.CPUs) {
				peers++
			}
		}
		msgs[r] = fmt.Sprintf("%d ranks on one host share %d CPUs (%s): too few for one each (--cpu-bind auto or none runs them unbound)",
			peers, len(m.CPUs), cpuset.Format(m.CPUs))
	}
	return &StatusError{Call: "cpu_bind(spread)", Msgs: msgs}
}

// Placement gathers every rank's CPUs (collective) and describes them for
// a report: "every rank on 0-31" when every rank may use the same CPUs,
// else "rank 0 on 0-15, rank 1 on 16-31". It also returns the lists.
func (c *Comm) Placement(ctx context.Context) (string, []string, error) {
	all, err := c.Collective(ctx, "cpu_placement()", []byte(cpuset.Format(c.CPUs)))
	if err != nil {
		return "", nil, err
	}
	lists := make([]string, len(all))
	same := true
	for r, d := range all {
		lists[r] = string(d)
		same = same && lists[r] == lists[0]
	}
	if same {
		return "every rank on " + lists[0], lists, nil
	}
	parts := make([]string, len(lists))
	for r, l := range lists {
		parts[r] = fmt.Sprintf("rank %d on %s", r, l)
	}
	return strings.Join(parts, ", "), lists, nil
}
