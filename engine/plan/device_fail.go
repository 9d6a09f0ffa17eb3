package plan

// device_fail.go: naming a failed wait of a device-mode plan (its op, its
// replay from the launches remembered, its script line).

import (
	"fmt"

	"github.com/luacoll/luacoll/kernels"
	"github.com/luacoll/luacoll/transport"
	"github.com/luacoll/luacoll/window"
)

// launch is one launch of a plan's replays: the first one's number (from
// 1), how many, and the value of each moving step (in d.moving's order)
// in the first.
type launch struct {
	first, times int
	values       []uint64
}

// launchHistory is how many launches a plan remembers.
const launchHistory = 16

// noteLaunch remembers a launch of times replays from the next one, whose
// first replay has the moving values of d.steps k replays on. It reuses
// the oldest entry's storage: it runs at every launch.
func (p *Plan) noteLaunch(d *device, times int, k uint64) {
	l := &d.launches[d.nextLaunch]
	d.nextLaunch = (d.nextLaunch + 1) % launchHistory
	l.first, l.times, l.values = p.replays+1, times, l.values[:0]
	for _, m := range d.moving {
		l.values = append(l.values, d.steps[m.step].Value+k*m.per)
	}
}

// replayOf returns the replay (from 1) in which step, moving by per a
// replay, waited for target, from the launches remembered (newest first):
// 0 if none matches.
func (d *device) replayOf(step int, per, target uint64) int {
	at := -1
	for j, m := range d.moving {
		if m.step == step {
			at = j
		}
	}
	if per == 0 || at < 0 {
		return 0
	}
	for j := 1; j <= launchHistory; j++ {
		l := d.launches[(d.nextLaunch-j+launchHistory)%launchHistory]
		if l.times == 0 {
			break // never used
		}
		v0 := l.values[at]
		if target < v0 || (target-v0)%per != 0 {
			continue
		}
		if k := (target - v0) / per; k < uint64(l.times) {
			return l.first + int(k)
		}
	}
	return 0
}

// deviceFailure builds the error of a step's wait that did not succeed:
// the window's wait error, naming the op, the replay and the script line.
func (p *Plan) deviceFailure(d *device) func(step int, observed, target uint64, cause error) error {
	return func(step int, observed, target uint64, cause error) error {
		if step == len(d.steps) {
			// The interpreter saw the abort flag between two replays.
			return fmt.Errorf("plan stopped between replays: %w", cause)
		}
		if step < 0 || step > len(d.steps) {
			return fmt.Errorf("device plan: step %d: %v (observed %d, target %d)", step, cause, observed, target)
		}
		s := d.steps[step]
		i := int(s.Op)
		o := &p.ops[i]
		replay := ""
		if r := d.replayOf(step, s.Step, target); r > 0 {
			replay = fmt.Sprintf(", replay %d", r)
		}
		id := o.Sig
		switch o.Kind {
		case WaitCounter:
			id = o.Ctr
		case Barrier, BarrierPeer:
			id = o.Bar
		}
		name := window.WaitOpName(o.Kind.String(), o.Peer, id, target)
		cond := fmt.Sprintf("%s %d", transport.Cmp(s.Cmp), target)
		mode := "device"
		if d.graph != nil {
			mode = "graph"
		} else if d.segs != nil {
			mode = "stream"
		}
		where := fmt.Sprintf(" (plan op %d%s, %s mode, recorded at %s)", i+1, replay, mode, o.Site)
		if s.Kind == kernels.StepLineWait {
			// The drain before the wait: target and observed are the
			// line's flags (replay numbers), not signal values.
			cond = fmt.Sprintf("a put_signal's 16-byte line showing replay %d", target)
			if s.N > 8 {
				cond = fmt.Sprintf("a put_signal's %d 16-byte lines showing replay %d", LineCount(s.N), target)
			}
			where = fmt.Sprintf(" (drained before plan op %d%s, %s mode, recorded at %s)", i+1, replay, mode, o.Site)
		}
		return p.w.Raw().WaitFailed(name, cond, where, observed, p.w.Options().Timeout, cause)
	}
}
