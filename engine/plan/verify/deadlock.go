package verify

import (
	"fmt"
	"strings"

	"github.com/luacoll/luacoll/engine/plan"
)

// deadlock reports every blocked rank: the wait, what it would see, and
// who could still change that.
func (s *sim) deadlock() {
	s.deadlocked = true
	for r := range s.rk {
		st := &s.rk[r]
		if st.done {
			continue
		}
		ops := s.lists[r].Ops
		i, rep := st.pc%len(ops), st.pc/len(ops)
		o := ops[i]
		v := o.Value + uint64(rep)*s.adv[r][i]
		var msg string
		switch o.Kind {
		case plan.WaitSignalFrom:
			sl := s.sig[s.sigIdx(r, o.Peer, o.Sig)]
			msg = fmt.Sprintf("blocked: waits for signal %d from rank %d %s %d, which is %d; %s", o.Sig, o.Peer, o.Cmp, v, sl.val, s.writers(r, rep, o.Sig, []int{o.Peer}))
		case plan.WaitSignal:
			var sum uint64
			all := make([]int, s.n)
			for p := range all {
				all[p] = p
				sum += s.sig[s.sigIdx(r, p, o.Sig)].val
			}
			msg = fmt.Sprintf("blocked: waits for signal %d summed over all ranks %s %d, which is %d; %s", o.Sig, o.Cmp, v, sum, s.writers(r, rep, o.Sig, all))
		case plan.WaitCounter:
			k := st.ctr[o.Peer*s.sh.Counters+o.Ctr]
			msg = fmt.Sprintf("blocked: waits for counter %d of rank %d %s %d, which is %d; no op left on this rank adds to it", o.Ctr, o.Peer, o.Cmp, v, k.val)
		case plan.Barrier:
			e := st.epoch[o.Bar]
			var missing []string
			for p := 0; p < s.n; p++ {
				if p != r && s.bar[s.barIdx(r, p, o.Bar)].val < e {
					missing = append(missing, fmt.Sprintf("rank %d (%s)", p, s.where(p)))
				}
			}
			msg = fmt.Sprintf("blocked in barrier %d (use %d): waiting for %s", o.Bar, e, strings.Join(missing, ", "))
		case plan.BarrierPeer:
			msg = fmt.Sprintf("blocked in barrier_peer %d with rank %d (use %d): rank %d is %s", o.Bar, o.Peer, st.pepoch[o.Bar*s.n+o.Peer], o.Peer, s.where(o.Peer))
		}
		s.add(Problem{Kind: "deadlock", Rank: r, Op: i + 1, OpName: o.Kind.String(), Replay: rep + 1, Site: o.Site, Msg: msg})
	}
}

// where says where rank p stopped.
func (s *sim) where(p int) string {
	st := &s.rk[p]
	ops := s.lists[p].Ops
	if st.done || len(ops) == 0 {
		return "done"
	}
	i := st.pc % len(ops)
	return fmt.Sprintf("blocked at op %d, %s at %s", i+1, ops[i].Kind, ops[i].Site)
}

// writers says which of the senders could still signal rank r's slot sig
// in replay rep (0-based).
func (s *sim) writers(r, rep, sig int, senders []int) string {
	var could []string
	for _, p := range senders {
		st := &s.rk[p]
		ops := s.lists[p].Ops
		for pc := st.pc; pc < (rep+1)*len(ops); pc++ {
			o := ops[pc%len(ops)]
			if o.Kind.HasSignal() && o.Sig == sig && ((o.Kind == plan.SignalAll && p != r) || (o.Kind != plan.SignalAll && o.Peer == r)) {
				could = append(could, fmt.Sprintf("rank %d would at op %d (%s) but is %s", p, pc%len(ops)+1, o.Site, s.where(p)))
				break
			}
		}
	}
	if stray := s.stray(r, sig, senders); stray != "" {
		could = append(could, stray)
	}
	if len(could) == 0 {
		if len(senders) == 1 {
			return fmt.Sprintf("rank %d signals it no more in this replay (%s)", senders[0], s.where(senders[0]))
		}
		return "no rank signals it in what is left of this replay"
	}
	return strings.Join(could, "; ")
}

// stray names signals that senders sent on slot sig to ranks other than r
// that those ranks never wait for from them: often the signal r misses,
// sent to the wrong peer.
func (s *sim) stray(r, sig int, senders []int) string {
	waits := func(q, from int) bool {
		for _, o := range s.lists[q].Ops {
			if o.Sig == sig && (o.Kind == plan.WaitSignal || (o.Kind == plan.WaitSignalFrom && o.Peer == from)) {
				return true
			}
		}
		return false
	}
	var out []string
	for _, p := range senders {
		for i, o := range s.lists[p].Ops {
			if (o.Kind == plan.Signal || o.Kind == plan.PutSignal || o.Kind == plan.PutSignalCounter) && o.Sig == sig && o.Peer != r && !waits(o.Peer, p) {
				out = append(out, fmt.Sprintf("rank %d signals rank %d instead at op %d (%s), which rank %d never waits for", p, o.Peer, i+1, o.Site, o.Peer))
			}
		}
	}
	return strings.Join(out, "; ")
}
