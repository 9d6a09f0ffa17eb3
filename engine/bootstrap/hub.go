package bootstrap

import (
	"bufio"
	"crypto/hmac"
	"crypto/sha256"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"time"
)

// hub is the rendezvous server run by rank 0: it admits Size ranks,
// matches their collectives by sequence number, routes point-to-point
// messages and spreads failures.
type hub struct {
	size    int
	jobID   string
	timeout time.Duration
	ln      net.Listener
	key     []byte       // HMAC key of the job's secret
	log     func(string) // notes about refused connections

	mu         sync.Mutex
	peers      []*hubPeer // by rank, nil until hello
	joined     int
	colls      map[uint64]*hubColl
	aborted    bool
	abortFrame []byte
	stopped    bool
	conns      map[net.Conn]struct{}
	changed    chan struct{} // closed and replaced when a peer says goodbye or ends
	start      time.Time     // the job clock's zero (see clock.go)
	// refused says why the hello of each rank that said so was refused
	// (a wrong secret, another job size): mostly why the ranks the job
	// waits for never join.
	refused map[int]string

	wg sync.WaitGroup
}

type hubPeer struct {
	rank   int
	host   string
	conn   net.Conn
	out    *outbox
	bye    bool
	endWhy string // why the others were told that it ended (announceEndLocked)
	byeSeq uint64 // first collective this rank will not join
	byeWhy string // why it left early ("" for a plain goodbye)
	failed bool
	ended  bool
}

type hubColl struct {
	kind   collKind
	root   int
	first  int  // rank that started it
	atEnd  bool // its calls are those of ranks whose scripts ended (collAtEnd)
	data   [][]byte
	have   []bool
	n      int
	errMsg string
}

// startHub serves ln until shutdown or kill.
func startHub(ln net.Listener, size int, jobID string, timeout time.Duration, key []byte, log func(string)) *hub {
	if log == nil {
		log = func(s string) { fmt.Fprintln(os.Stderr, s) }
	}
	h := &hub{
		size: size, jobID: jobID, timeout: timeout, ln: ln, key: key, log: log,
		peers:   make([]*hubPeer, size),
		colls:   make(map[uint64]*hubColl),
		conns:   make(map[net.Conn]struct{}),
		changed: make(chan struct{}),
		start:   time.Now(),
	}
	h.wg.Add(1)
	go h.acceptLoop()
	return h
}

func (h *hub) acceptLoop() {
	defer h.wg.Done()
	for {
		c, err := h.ln.Accept()
		if err != nil {
			h.mu.Lock()
			stopped := h.stopped || h.joined == h.size
			h.mu.Unlock()
			if stopped || errors.Is(err, net.ErrClosed) {
				return
			}
			time.Sleep(20 * time.Millisecond) // e.g. out of file descriptors
			continue
		}
		h.mu.Lock()
		if h.stopped {
			h.mu.Unlock()
			_ = c.Close()
			return
		}
		h.conns[c] = struct{}{}
		h.wg.Add(1)
		h.mu.Unlock()
		go h.serve(c)
	}
}

// drop forgets and closes a connection.
func (h *hub) drop(c net.Conn) {
	h.mu.Lock()
	delete(h.conns, c)
	h.mu.Unlock()
	_ = c.Close()
}

// reject answers a hello with an error and closes the connection.
func (h *hub) reject(c net.Conn, msg string) {
	f := newFrame(frReject, len(msg))
	f.raw([]byte(msg))
	if frame, err := f.finish(); err == nil {
		_ = c.SetWriteDeadline(time.Now().Add(min(h.timeout, time.Second)))
		_, _ = c.Write(frame)
	}
	h.drop(c)
}

// serve admits one client and reads its frames.
func (h *hub) serve(c net.Conn) {
	defer h.wg.Done()
	br := bufio.NewReader(c)
	_ = c.SetDeadline(time.Now().Add(h.timeout))
	hubNonce, err := newNonce()
	if err == nil {
		ch := newFrame(frChallenge, nonceLen)
		ch.raw(hubNonce)
		var frame []byte
		if frame, err = ch.finish(); err == nil {
			_, err = c.Write(frame)
		}
	}
	if err != nil {
		h.drop(c)
		return
	}
	t, body, err := readFrame(br, maxHelloFrame)
	if err != nil || t != frHello {
		h.drop(c)
		return
	}
	r := frameReader{b: body}
	version := r.u8()
	rank := r.u32()
	size := r.u32()
	var rankNonce, mac []byte
	if version == bootVersion {
		rankNonce, mac = r.take(nonceLen), r.take(sha256.Size)
	}
	host := string(r.rest())
	switch {
	case r.err != nil && version == bootVersion:
		h.log(fmt.Sprintf("luacoll: the rendezvous hub refused a connection from %s: malformed hello", c.RemoteAddr()))
		h.drop(c)
		return
	case r.err != nil:
		h.drop(c)
		return
	case version != bootVersion:
		h.log(fmt.Sprintf("luacoll: the rendezvous hub refused a connection from %s: protocol version %d", c.RemoteAddr(), version))
		h.reject(c, fmt.Sprintf("protocol version %d, the hub speaks %d (mixed luacoll versions?)", version, bootVersion))
		return
	case !hmac.Equal(mac, helloMAC(h.key, hubNonce, rankNonce, rank, size, host)):
		h.log(fmt.Sprintf("luacoll: the rendezvous hub refused a connection from %s (says rank %d): it does not know this job's secret (%s); the job goes on",
			c.RemoteAddr(), rank, EnvJobSecret))
		h.noteRefused(rank, whySecret)
		h.reject(c, "authentication failed: this connection does not know the job's secret ("+EnvJobSecret+")")
		return
	case uint64(size) != uint64(h.size):
		why := fmt.Sprintf("rank %d says the job has %d ranks, rank 0 says %d", rank, size, h.size)
		h.log(fmt.Sprintf("luacoll: the rendezvous hub refused a connection from %s: %s", c.RemoteAddr(), why))
		h.noteRefused(rank, why)
		h.reject(c, why)
		return
	case uint64(rank) >= uint64(h.size):
		why := fmt.Sprintf("rank %d is out of range for %d ranks", rank, h.size)
		h.log(fmt.Sprintf("luacoll: the rendezvous hub refused a connection from %s: %s", c.RemoteAddr(), why))
		h.reject(c, why)
		return
	}
	_ = c.SetDeadline(time.Time{})
	p := &hubPeer{rank: int(rank), host: host, conn: c}
	h.mu.Lock()
	if old := h.peers[p.rank]; old != nil {
		h.mu.Unlock()
		h.reject(c, fmt.Sprintf("duplicate rank %d: rank %d already joined from host %q", rank, rank, old.host))
		return
	}
	if h.stopped {
		h.mu.Unlock()
		h.drop(c)
		return
	}
	p.out = newOutbox(c, h.timeout, func(error) { _ = c.Close() })
	accept := newFrame(frAccept, sha256.Size)
	accept.raw(acceptMAC(h.key, hubNonce, rankNonce))
	if frame, err := accept.finish(); err == nil {
		p.out.send(frame) // before anything else the hub sends this rank
	}
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		p.out.run()
	}()
	h.peers[p.rank] = p
	h.joined++
	if h.aborted {
		p.out.send(h.abortFrame)
	} else if h.joined == h.size {
		h.welcomeLocked()
	}
	h.mu.Unlock()

	for {
		t, body, err := readFrame(br, maxBootFrame)
		if err == nil {
			err = h.handle(p, t, body)
		}
		if err != nil {
			h.lost(p)
			return
		}
	}
}

// welcomeLocked tells every rank the job id and hosts and stops listening.
func (h *hub) welcomeLocked() {
	f := newFrame(frWelcome, 64)
	f.bytes([]byte(h.jobID))
	f.u32(uint32(h.size))
	hosts := make([][]byte, len(h.peers))
	for r, p := range h.peers {
		hosts[r] = []byte(p.host)
	}
	f.runs(hosts)
	frame, err := f.finish()
	if err != nil {
		h.abortLocked(0, false, fmt.Sprintf("bootstrap welcome: %v", err), -1)
		return
	}
	for _, p := range h.peers {
		p.out.send(frame)
	}
	_ = h.ln.Close()
}

// missingJoins lists the ranks that have not said hello.
func (h *hub) missingJoins() []int {
	h.mu.Lock()
	defer h.mu.Unlock()
	var missing []int
	for r, p := range h.peers {
		if p == nil {
			missing = append(missing, r)
		}
	}
	return missing
}

// written is how many bytes the hub has written to the ranks.
func (h *hub) written() int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	var n int64
	for _, p := range h.peers {
		if p != nil {
			n += p.out.written.Load()
		}
	}
	return n
}

// handle processes one frame from an admitted rank.
func (h *hub) handle(p *hubPeer, t frameType, body []byte) error {
	r := frameReader{b: body}
	h.mu.Lock()
	defer h.mu.Unlock()
	switch t {
	case frColl:
		kind := collKind(r.u8())
		flags := r.u8()
		seq := r.u64()
		root := int(r.u32())
		data := r.rest()
		if r.err != nil {
			return r.err
		}
		if kind < collAllGather || kind > collBarrier || root < 0 || root >= h.size {
			return fmt.Errorf("bad collective from rank %d", p.rank)
		}
		h.collLocked(p, kind, flags, seq, root, data)
	case frSend:
		to := r.u32()
		tag := r.u32()
		data := r.rest()
		if r.err != nil {
			return r.err
		}
		if uint64(to) >= uint64(h.size) {
			return fmt.Errorf("send to rank %d of %d", to, h.size)
		}
		q := h.peers[to]
		if q == nil || q.ended || q.bye {
			return nil
		}
		f := newFrame(frDeliver, 8+len(data))
		f.u32(uint32(p.rank))
		f.u32(tag)
		f.raw(data)
		if frame, err := f.finish(); err == nil {
			q.out.send(frame)
		}
	case frFail:
		reason := string(r.rest())
		p.failed = true
		h.abortLocked(p.rank, false, reason, p.rank)
		var flushed []<-chan struct{}
		for _, q := range h.peers {
			if q != nil && q != p && !q.ended {
				flushed = append(flushed, q.out.flush())
			}
		}
		ack, _ := newFrame(frFailAck, 0).finish()
		h.wg.Add(1)
		go func() {
			defer h.wg.Done()
			timer := time.NewTimer(h.timeout)
			defer timer.Stop()
			for _, ch := range flushed {
				select {
				case <-ch:
				case <-timer.C:
				}
			}
			p.out.send(ack)
		}()
	case frBye:
		seq := r.u64()
		why := string(r.rest())
		if r.err != nil {
			return r.err
		}
		p.bye, p.byeSeq, p.byeWhy = true, seq, why
		h.announceEndLocked(p)
		for s, c := range h.colls {
			if s >= seq && !c.have[p.rank] {
				if p.standsIn(c.kind) {
					c.have[p.rank] = true
					c.n++
					h.completeLocked(s, c)
					continue
				}
				h.abortLocked(p.rank, false, p.leftBefore(c.kind, s), -1)
				break
			}
		}
		ack, _ := newFrame(frByeAck, 0).finish()
		p.out.send(ack)
		h.signalLocked()
	case frStatus:
		seq := r.u64()
		if r.err != nil {
			return r.err
		}
		h.statusReplyLocked(p, seq)
	case frClock:
		id := r.u64()
		if r.err != nil {
			return r.err
		}
		h.clockReply(p, id)
	case frEnded:
		id := r.u64()
		if r.err != nil {
			return r.err
		}
		h.endedReplyLocked(p, id)
	default:
		return fmt.Errorf("unknown frame type %d from rank %d", t, p.rank)
	}
	return nil
}

// statusReplyLocked answers p's question about collective seq: the ranks
// that have not joined it (known 0 when the hub holds no such call). The
// caller holds h.mu.
func (h *hub) statusReplyLocked(p *hubPeer, seq uint64) {
	f := newFrame(frStatusReply, 16)
	f.u64(seq)
	c := h.colls[seq]
	if c == nil {
		f.u8(0)
		f.u32(0)
	} else {
		f.u8(1)
		f.u32(uint32(h.size - c.n))
		for rank, have := range c.have {
			if !have {
				f.u32(uint32(rank))
			}
		}
	}
	if frame, err := f.finish(); err == nil {
		p.out.send(frame)
	}
}

// standsIn reports whether p, gone, counts as present in collectives of
// kind: a rank that left early on purpose (os.exit(0)) has nothing left
// to meet the others about, so their barriers (the teardown of windows
// it no longer maps) go on without it; data collectives fail naming it.
func (p *hubPeer) standsIn(kind collKind) bool {
	return p.byeWhy != "" && kind == collBarrier
}

// leftBefore says that p said goodbye before collective seq of kind.
func (p *hubPeer) leftBefore(kind collKind, seq uint64) string {
	if p.byeWhy != "" {
		return fmt.Sprintf("%s, before %s #%d", p.byeWhy, kind, seq)
	}
	return fmt.Sprintf("%s before %s #%d (it made fewer collective calls than the ranks in this one)", EndedCleanly, kind, seq)
}

// EndedCleanly begins the reason given for a rank that closed the
// bootstrap with a plain goodbye (it ended without error) before a
// collective the others then started: a failure of theirs, not its own.
const EndedCleanly = "ended without error"

// collLocked records p's contribution to collective seq and answers every
// rank once all have contributed.
func (h *hub) collLocked(p *hubPeer, kind collKind, flags byte, seq uint64, root int, data []byte) {
	if h.aborted {
		return
	}
	c := h.colls[seq]
	if c == nil {
		c = &hubColl{kind: kind, root: root, first: p.rank, atEnd: flags&collAtEnd != 0,
			data: make([][]byte, h.size), have: make([]bool, h.size)}
		h.colls[seq] = c
		for _, q := range h.peers {
			if q != nil && q.bye && q.byeSeq <= seq {
				if q.standsIn(kind) {
					c.have[q.rank] = true
					c.n++
					continue
				}
				h.abortLocked(q.rank, false, q.leftBefore(kind, seq), -1)
				return
			}
		}
	} else if c.atEnd != (flags&collAtEnd != 0) {
		// One side's script has ended: it ended before the other's call.
		ended, other := p, c.kind
		if c.atEnd {
			ended, other = h.peers[c.first], kind
		}
		h.abortLocked(ended.rank, false, fmt.Sprintf("%s before %s #%d (it made fewer collective calls than the ranks in this one)", EndedCleanly, other, seq), -1)
		return
	} else if c.kind != kind || c.root != root {
		what := func(k collKind, root int) string {
			if k == collBroadcast {
				return fmt.Sprintf("%s #%d from root %d", k, seq, root)
			}
			return fmt.Sprintf("%s #%d", k, seq)
		}
		h.abortLocked(p.rank, false, fmt.Sprintf("called %s where rank %d called %s",
			what(kind, root), c.first, what(c.kind, c.root)), -1)
		return
	}
	if c.have[p.rank] {
		h.abortLocked(p.rank, false, fmt.Sprintf("joined %s #%d twice", kind, seq), -1)
		return
	}
	c.have[p.rank] = true
	c.n++
	if c.atEnd {
		h.announceEndLocked(p)
	}
	if flags&collOversize != 0 && c.errMsg == "" {
		c.errMsg = fmt.Sprintf("rank %d's data exceeds the %d MiB bootstrap frame limit", p.rank, maxBootFrame>>20)
	}
	switch {
	case kind == collAllGather:
		c.data[p.rank] = data
	case kind == collBroadcast && p.rank == root:
		c.data[p.rank] = data
	}
	h.completeLocked(seq, c)
}

// completeLocked answers every rank once all have contributed to c.
func (h *hub) completeLocked(seq uint64, c *hubColl) {
	kind, root := c.kind, c.root
	if c.n < h.size {
		return
	}
	delete(h.colls, seq)
	var frame []byte
	if c.errMsg == "" {
		f := newFrame(frResult, 16)
		f.u64(seq)
		f.u8(byte(kind))
		switch kind {
		case collAllGather:
			f.u32(uint32(h.size))
			f.runs(c.data)
		case collBroadcast:
			f.raw(c.data[root])
		}
		var err error
		if frame, err = f.finish(); err != nil {
			c.errMsg = fmt.Sprintf("the result exceeds the %d MiB bootstrap frame limit", maxBootFrame>>20)
		}
	}
	if c.errMsg != "" {
		f := newFrame(frCollErr, 8+len(c.errMsg))
		f.u64(seq)
		f.raw([]byte(c.errMsg))
		frame, _ = f.finish()
	}
	for _, q := range h.peers {
		if q != nil && !q.ended {
			q.out.send(frame)
		}
	}
}

// abortLocked tells every rank but except that rank failed or died; only
// the first abort is sent.
func (h *hub) abortLocked(rank int, died bool, reason string, except int) {
	if h.aborted || h.stopped {
		return
	}
	f := newFrame(frAbort, 5+len(reason))
	f.u32(uint32(rank))
	if died {
		f.u8(1)
	} else {
		f.u8(0)
	}
	f.raw([]byte(reason))
	frame, err := f.finish()
	if err != nil {
		f = newFrame(frAbort, 64)
		f.u32(uint32(rank))
		f.u8(0)
		f.raw([]byte("failed (reason too long to send)"))
		frame, _ = f.finish()
	}
	h.aborted = true
	h.abortFrame = frame
	h.colls = make(map[uint64]*hubColl)
	for _, q := range h.peers {
		if q != nil && !q.ended && q.rank != except {
			q.out.send(frame)
		}
	}
}

// lost handles the end of an admitted rank's connection.
func (h *hub) lost(p *hubPeer) {
	_ = p.conn.Close()
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.conns, p.conn)
	if p.ended {
		return
	}
	p.ended = true
	p.out.close()
	if !p.bye && !p.failed {
		why := "bootstrap connection lost"
		if note := h.refusedNoteLocked(); h.joined < h.size && note != "" {
			// It gave up waiting for ranks that could not join: say why.
			why += " while the job waited for ranks that cannot join: " + note
		}
		h.abortLocked(p.rank, true, why, p.rank)
	}
	h.signalLocked()
}

// signalLocked wakes waitQuiet.
func (h *hub) signalLocked() {
	close(h.changed)
	h.changed = make(chan struct{})
}

// waitQuiet waits until every rank but rank 0 (whose Close calls it) has
// said goodbye or its connection ended, or until timeout; it returns the
// ranks still there.
func (h *hub) waitQuiet(timeout time.Duration) []int {
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	for {
		h.mu.Lock()
		var missing []int
		for r, p := range h.peers {
			if r != 0 && (p == nil || !(p.bye || p.ended)) {
				missing = append(missing, r)
			}
		}
		changed := h.changed
		h.mu.Unlock()
		if len(missing) == 0 {
			return nil
		}
		select {
		case <-changed:
		case <-timer.C:
			return missing
		}
	}
}

// shutdown flushes what the hub still has to say (briefly), then closes
// every connection and waits for the hub's goroutines.
func (h *hub) shutdown() {
	h.mu.Lock()
	h.stopped = true
	_ = h.ln.Close()
	var outs []*outbox
	for _, p := range h.peers {
		if p != nil {
			p.out.close()
			outs = append(outs, p.out)
		}
	}
	h.mu.Unlock()
	timer := time.NewTimer(drainWait)
	defer timer.Stop()
	for _, o := range outs {
		select {
		case <-o.done:
		case <-timer.C:
		}
	}
	h.kill()
}

// kill closes everything at once and waits for the hub's goroutines.
func (h *hub) kill() {
	h.mu.Lock()
	h.stopped = true
	_ = h.ln.Close()
	for c := range h.conns {
		_ = c.Close()
	}
	for _, p := range h.peers {
		if p != nil {
			_ = p.conn.Close()
			p.out.close()
		}
	}
	h.mu.Unlock()
	h.wg.Wait()
}
