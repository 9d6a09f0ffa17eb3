package cost

import "github.com/luacoll/luacoll/transport"

// Ranks that outnumber their host's processors (host backend: a rank's
// stream is a thread of its process) take turns on them. Each processor
// runs one rank at a time, until that rank blocks (a wait whose signal has
// not landed, a barrier others have not reached) or its list ends; the
// next rank that wants it (first come, first served) gets it then, after
// the self class's Switch: the time the processor takes to pass from one
// rank to another (the blocked rank's yield, the other's return to its
// loop). A rank that blocked and can go on again waits for its processor
// the same way. Ranks are dealt to a host's processors in turn, as
// --cpu-bind auto deals them (the i-th rank of a host on processor i mod
// CPUs), and ops cost their calibrated times, which were measured with a
// processor for each rank.

// cpu is one shared processor: the rank on it (-1: none), the rank that
// was on it last (-1: none yet), and the ranks waiting for it, in order.
type cpu struct {
	holder, last int32
	queue        []int32
}

// resumption is what a rank that blocked does once its processor is back:
// end the op begun at start, which could go on at ready, after what its
// own costs still take (after); cause is what it waited for.
type resumption struct {
	on                  bool
	start, ready, after float64
	cause               ref
}

// placeCPUs returns each rank's shared processor, or nil when no host's
// ranks outnumber its cpus processors (0: a processor for each rank). A
// rank's host is the ranks it reaches without the network; the ranks of a
// host with no more ranks than processors get -1.
func placeCPUs(ranks int, class func(from, to int) transport.PeerKind, cpus int) []int32 {
	if cpus <= 0 || ranks <= cpus {
		return nil
	}
	out := make([]int32, ranks)
	host := hostsOf(ranks, class) // the host's lowest rank
	index := make([]int, ranks)
	count := map[int]int{}
	for r := range out {
		index[r] = count[host[r]]
		count[host[r]]++
	}
	hosts, any := map[int]int{}, false
	for r := range out {
		out[r] = -1
		if count[host[r]] <= cpus {
			continue
		}
		h, ok := hosts[host[r]]
		if !ok {
			h = len(hosts)
			hosts[host[r]] = h
		}
		out[r], any = int32(h*cpus+index[r]%cpus), true
	}
	if !any {
		return nil
	}
	return out
}

// take gives rank r, which wants to run its current op at t, its
// processor: it reports when the op can start, or false when the
// processor runs another rank (r is queued; it gets a step when its turn
// comes). An op that waited for it starts its time at wantFrom.
func (s *sim) take(r int, t float64) (float64, bool) {
	rk := &s.ranks[r]
	if rk.cpu < 0 || rk.hasCPU {
		return t, true
	}
	c := &s.cpus[rk.cpu]
	if rk.wantFrom < 0 {
		rk.wantFrom = t
	}
	if c.holder >= 0 {
		c.queue = append(c.queue, int32(r))
		return 0, false
	}
	start := s.grant(r, t)
	if start > t {
		s.push(event{t: start, to: int32(r)})
		return 0, false
	}
	if start == rk.wantFrom {
		rk.wantFrom = -1
	}
	return start, true
}

// grant puts rank r on its processor at t and returns when it runs there:
// after a switch unless it was the last one on it.
func (s *sim) grant(r int, t float64) float64 {
	rk := &s.ranks[r]
	c := &s.cpus[rk.cpu]
	switched := c.last >= 0 && c.last != int32(r)
	c.holder, c.last, rk.hasCPU = int32(r), int32(r), true
	if switched {
		return t + s.switchNs
	}
	return t
}

// release takes rank r off its processor at t (it blocked, or its list
// ended) and gives it to the next rank waiting for it.
func (s *sim) release(r int, t float64) {
	rk := &s.ranks[r]
	if rk.cpu < 0 || !rk.hasCPU {
		return
	}
	c := &s.cpus[rk.cpu]
	rk.hasCPU, c.holder = false, -1
	if len(c.queue) == 0 {
		return
	}
	q := int(c.queue[0])
	c.queue = c.queue[1:]
	s.handOver(q, t)
}

// handOver gives the processor to rank q, which waited for it, at t.
func (s *sim) handOver(q int, t float64) {
	rk := &s.ranks[q]
	at := s.grant(q, t)
	if rk.res.on {
		s.endResumed(q, at)
		return
	}
	s.push(event{t: at, to: int32(q)})
}

// resume ends rank r's blocked op (begun at start, able to go on at
// ready, then taking after; cause is what it waited for) once r has its
// processor back.
func (s *sim) resume(r int, start, ready, after float64, cause ref) {
	rk := &s.ranks[r]
	rk.blocked = false
	if rk.cpu < 0 {
		s.finish(r, start, ready+after-start, 0, cause)
		return
	}
	rk.res = resumption{on: true, start: start, ready: ready, after: after, cause: cause}
	c := &s.cpus[rk.cpu]
	if c.holder >= 0 {
		c.queue = append(c.queue, int32(r))
		return
	}
	s.endResumed(r, s.grant(r, ready))
}

// endResumed ends rank r's blocked op, its processor back at at.
func (s *sim) endResumed(r int, at float64) {
	rk := &s.ranks[r]
	res := rk.res
	rk.res = resumption{}
	rk.wantFrom = -1
	s.finish(r, res.start, max(at, res.ready)+res.after-res.start, 0, res.cause)
}
