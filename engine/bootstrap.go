package engine

import (
	"bufio"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/luacoll/luacoll/transport"
)

// Wire protocol. Every frame is a 4-byte big-endian length (of what
// follows), a type byte and a body. The hub opens every connection with a
// challenge (a nonce); the client's first frame is hello, which proves
// with an HMAC keyed by the job's secret that it knows the secret; the hub
// answers accept (proving the same back) and welcome once every rank said
// hello, or reject.
const (
	bootVersion      = 2
	maxBootFrame     = 256 << 20 // largest frame (type byte and body)
	maxHelloFrame    = 64 << 10  // largest frame before a client is known
	defaultBootLimit = 30 * time.Second
	statusWait       = 250 * time.Millisecond // how long a timed-out call asks the hub who is missing
	failAckWait      = 2 * time.Second        // how long Fail waits for the hub to pass the news on
	drainWait        = time.Second            // how long the hub flushes its last frames when it stops
	maxListedRanks   = 16
	maxHostLen       = 1024 // longer host identities are cut
)

type frameType byte

const (
	frHello       frameType = iota + 1 // version u8, rank u32, size u32, host
	frWelcome                          // job bytes, n u32, n × host bytes
	frReject                           // message
	frColl                             // kind u8, flags u8, seq u64, root u32, data
	frResult                           // seq u64, kind u8, payload
	frCollErr                          // seq u64, message
	frSend                             // to u32, tag u32, data
	frDeliver                          // from u32, tag u32, data
	frFail                             // reason
	frFailAck                          //
	frAbort                            // rank u32, died u8, reason
	frBye                              // first seq this rank will not join u64
	frByeAck                           //
	frStatus                           // seq u64
	frStatusReply                      // seq u64, known u8, n u32, n × rank u32
	frChallenge                        // hub nonce
	frAccept                           // mac (acceptMAC)
)

// collKind is the kind of a collective call.
type collKind byte

const (
	collAllGather collKind = iota + 1
	collBroadcast
	collBarrier
)

func (k collKind) String() string {
	switch k {
	case collAllGather:
		return "allgather"
	case collBroadcast:
		return "broadcast"
	case collBarrier:
		return "barrier"
	}
	return fmt.Sprintf("collective(%d)", byte(k))
}

// collOversize marks a contribution too large to send: the collective then
// fails on every rank.
const collOversize = 1

// ErrBootstrapClosed is returned by calls on a closed Bootstrap.
var ErrBootstrapClosed = errors.New("bootstrap closed")

// RankError reports that another rank failed or died; the bootstrap sets it
// on the job's abort flag and returns it (wrapped) from every call.
type RankError struct {
	Rank   int
	Died   bool   // the rank vanished rather than reporting a failure
	Reason string // the failure, or how the death was noticed
}

// Error reads "rank 3 died (bootstrap connection lost)" or
// "rank 2 failed: script.lua:5: boom".
func (e *RankError) Error() string {
	if e.Died {
		if e.Reason == "" {
			return fmt.Sprintf("rank %d died", e.Rank)
		}
		return fmt.Sprintf("rank %d died (%s)", e.Rank, e.Reason)
	}
	if e.Reason == "" {
		return fmt.Sprintf("rank %d failed", e.Rank)
	}
	return fmt.Sprintf("rank %d failed: %s", e.Rank, e.Reason)
}

// TimeoutError reports a bootstrap call that got no answer in time.
type TimeoutError struct {
	Op      string        // e.g. "allgather #4"
	After   time.Duration // the time the call waited
	Missing []int         // ranks the hub still waited for, when known
}

// Error reads "bootstrap allgather #4: no answer within 10s (waiting for rank 3)".
func (e *TimeoutError) Error() string {
	msg := fmt.Sprintf("bootstrap %s: no answer within %v", e.Op, e.After.Round(time.Millisecond))
	if len(e.Missing) > 0 {
		msg += " (waiting for " + describeRanks(e.Missing) + ")"
	}
	return msg
}

// Unwrap makes errors.Is(err, context.DeadlineExceeded) hold.
func (e *TimeoutError) Unwrap() error { return context.DeadlineExceeded }

// Timeout reports true, as net errors do.
func (e *TimeoutError) Timeout() bool { return true }

// describeRanks writes "rank 3" or "ranks 1, 2, 5", shortening long lists.
func describeRanks(ranks []int) string {
	var b strings.Builder
	if len(ranks) == 1 {
		b.WriteString("rank ")
	} else {
		b.WriteString("ranks ")
	}
	for i, r := range ranks {
		if i == maxListedRanks {
			fmt.Fprintf(&b, " and %d more", len(ranks)-i)
			break
		}
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprint(&b, r)
	}
	return b.String()
}

// BootstrapConfig configures Connect.
type BootstrapConfig struct {
	Rank, Size int
	// Addr is the hub's host:port; rank 0 listens there unless Listener
	// is set.
	Addr string
	// Listener, when set, is used by rank 0 instead of listening on Addr.
	// The bootstrap closes it.
	Listener net.Listener
	// JobID is rank 0's job id; when empty the hub makes a random one.
	JobID string
	// Timeout bounds every call, and connecting (30s when 0).
	Timeout time.Duration
	// Abort is set when a rank fails or dies or the hub is lost; every
	// call returns its error. Connect makes one when nil.
	Abort *transport.Abort
	// Host identifies this rank's machine to the others (opaque).
	Host string
	// Secret is the job's secret (JobSecret): every connection to the hub
	// proves it knows it, and the hub proves it back.
	Secret string
	// Log, when set, receives the hub's notes about connections it
	// refused (rank 0; default: standard error).
	Log func(string)
}

// Bootstrap is a rank's connection to the job's rendezvous hub, which rank
// 0 runs. It implements transport.Exchanger.
type Bootstrap struct {
	rank, size int
	jobID      string
	hosts      []string
	timeout    time.Duration
	conn       net.Conn
	out        *outbox
	abort      *transport.Abort
	hub        *hub // rank 0 only

	mu      sync.Mutex
	seq     uint64 // last collective sequence number used
	pending map[uint64]chan collReply
	status  map[uint64]chan []int
	mail    map[mailKey]*mailbox
	closing bool

	closed     chan struct{} // closed when Close starts tearing down
	readerDone chan struct{}
	failAck    chan struct{}
	byeAck     chan struct{}
	failOnce   sync.Once
	closeOnce  sync.Once
	closeErr   error
}

var _ transport.Exchanger = (*Bootstrap)(nil)

type collReply struct {
	data [][]byte
	err  error
}

type mailKey struct {
	from int
	tag  uint32
}

// mailbox holds messages from one peer with one tag until Recv takes them.
type mailbox struct {
	queue   [][]byte
	signal  chan struct{} // closed and replaced on every arrival
	waiters int
}

// Connect joins the job: rank 0 starts the hub, then every rank, rank 0
// included, connects to it, retrying until the deadline (min of ctx and
// cfg.Timeout), and waits until every rank has joined.
func Connect(ctx context.Context, cfg BootstrapConfig) (*Bootstrap, error) {
	if cfg.Size < 1 || cfg.Size > maxRanks {
		return nil, fmt.Errorf("bootstrap: job size %d out of range 1..%d", cfg.Size, maxRanks)
	}
	if cfg.Rank < 0 || cfg.Rank >= cfg.Size {
		return nil, fmt.Errorf("bootstrap: rank %d out of range for %d ranks", cfg.Rank, cfg.Size)
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = defaultBootLimit
	}
	if cfg.Abort == nil {
		cfg.Abort = transport.NewAbort()
	}
	limit := cfg.Timeout
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) < limit {
		limit = time.Until(dl)
	}
	cctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()

	if len(cfg.Host) > maxHostLen {
		cfg.Host = cfg.Host[:maxHostLen]
	}
	var h *hub
	addr := cfg.Addr
	if cfg.Rank == 0 {
		ln := cfg.Listener
		if ln == nil {
			if cfg.Addr == "" {
				cfg.Addr = "127.0.0.1:0"
			}
			var err error
			ln, err = net.Listen("tcp", cfg.Addr)
			if err != nil {
				return nil, fmt.Errorf("bootstrap: rank 0 cannot listen on %s: %w", cfg.Addr, err)
			}
		}
		job := cfg.JobID
		if job == "" {
			var err error
			if job, err = randomJobID(); err != nil {
				_ = ln.Close()
				return nil, fmt.Errorf("bootstrap: %w", err)
			}
		}
		h = startHub(ln, cfg.Size, job, cfg.Timeout, jobKey(cfg.Secret), cfg.Log)
		addr = dialableAddr(ln.Addr())
	} else {
		if cfg.Listener != nil {
			_ = cfg.Listener.Close()
		}
		if cfg.Addr == "" {
			return nil, fmt.Errorf("bootstrap: rank %d has no hub address", cfg.Rank)
		}
	}
	b, err := dialHub(cctx, cfg, addr, limit, h)
	if err != nil {
		if h != nil {
			h.kill()
		}
		return nil, err
	}
	b.hub = h
	return b, nil
}

// dialableAddr turns a listener's address into one a local client can dial
// (an unspecified IP becomes loopback).
func dialableAddr(a net.Addr) string {
	if ta, ok := a.(*net.TCPAddr); ok && (ta.IP == nil || ta.IP.IsUnspecified()) {
		ip := "127.0.0.1"
		if ta.IP != nil && ta.IP.To4() == nil {
			ip = "::1"
		}
		return net.JoinHostPort(ip, fmt.Sprint(ta.Port))
	}
	return a.String()
}

// randomJobID returns 16 random hex digits.
func randomJobID() (string, error) {
	var buf [8]byte
	if _, err := rand.Read(buf[:]); err != nil {
		return "", fmt.Errorf("making a job id: %w", err)
	}
	return hex.EncodeToString(buf[:]), nil
}

// dialHub connects to the hub with retries, says hello and waits for the
// welcome.
func dialHub(ctx context.Context, cfg BootstrapConfig, addr string, limit time.Duration, h *hub) (*Bootstrap, error) {
	who := fmt.Sprintf("rank %d of %d", cfg.Rank, cfg.Size)
	var conn net.Conn
	var lastErr error
	backoff := 10 * time.Millisecond
	for conn == nil {
		var d net.Dialer
		c, err := d.DialContext(ctx, "tcp", addr)
		if err == nil {
			conn = c
			break
		}
		lastErr = err
		if ctx.Err() != nil {
			break
		}
		select {
		case <-ctx.Done():
		case <-time.After(backoff):
		}
		if backoff < 500*time.Millisecond {
			backoff *= 2
		}
	}
	if conn == nil {
		if err := ctx.Err(); err != nil && !errors.Is(err, context.DeadlineExceeded) {
			return nil, fmt.Errorf("bootstrap connect (%s): %w", who, err)
		}
		return nil, fmt.Errorf("bootstrap connect (%s): cannot reach rank 0 at %s within %v: %w",
			who, addr, limit.Round(time.Millisecond), lastErr)
	}

	fail := func(err error) (*Bootstrap, error) {
		_ = conn.Close()
		return nil, err
	}
	deadline, _ := ctx.Deadline()
	_ = conn.SetDeadline(deadline)
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Now()) })
	br := bufio.NewReader(conn)
	key := jobKey(cfg.Secret)
	rankNonce, err := newNonce()
	var hubNonce []byte
	if err == nil {
		var t frameType
		var body []byte
		t, body, err = readFrame(br, maxHelloFrame)
		if err == nil && (t != frChallenge || len(body) != nonceLen) {
			err = fmt.Errorf("%s does not speak this bootstrap protocol (frame %d first)", addr, t)
		}
		hubNonce = body
	}
	var frame []byte
	if err == nil {
		hello := newFrame(frHello, 9+2*nonceLen+len(cfg.Host))
		hello.u8(bootVersion)
		hello.u32(uint32(cfg.Rank))
		hello.u32(uint32(cfg.Size))
		hello.raw(rankNonce)
		hello.raw(helloMAC(key, hubNonce, rankNonce, uint32(cfg.Rank), uint32(cfg.Size), cfg.Host))
		hello.raw([]byte(cfg.Host))
		frame, err = hello.finish()
	}
	if err == nil {
		_, err = conn.Write(frame)
	}
	if err != nil {
		stop()
		if ctx.Err() != nil {
			err = ctx.Err()
		}
		return fail(fmt.Errorf("bootstrap connect (%s): hello to %s: %w", who, addr, err))
	}
	t, body, err := readFrame(br, maxBootFrame)
	if err == nil && t == frAccept {
		if !hmac.Equal(body, acceptMAC(key, hubNonce, rankNonce)) {
			stop()
			return fail(fmt.Errorf("bootstrap connect (%s): the hub at %s does not know this job's secret (%s): another job's?", who, addr, EnvJobSecret))
		}
		t, body, err = readFrame(br, maxBootFrame)
	} else if err == nil && t == frWelcome {
		stop()
		return fail(fmt.Errorf("bootstrap connect (%s): the hub at %s did not prove it knows this job's secret", who, addr))
	}
	if !stop() && ctx.Err() != nil {
		err = ctx.Err()
	}
	if err != nil {
		cerr := ctx.Err()
		if cerr != nil && !errors.Is(cerr, context.DeadlineExceeded) {
			return fail(fmt.Errorf("bootstrap connect (%s): %w", who, cerr))
		}
		if cerr != nil || errors.Is(err, os.ErrDeadlineExceeded) {
			te := &TimeoutError{Op: fmt.Sprintf("connect (%s, hub %s)", who, addr), After: limit}
			if h != nil {
				te.Missing = h.missingJoins()
			}
			return fail(te)
		}
		return fail(fmt.Errorf("bootstrap connect (%s): hub at %s closed the connection before every rank joined: %w",
			who, addr, err))
	}
	_ = conn.SetDeadline(time.Time{})
	r := frameReader{b: body}
	switch t {
	case frWelcome:
	case frReject:
		return fail(fmt.Errorf("bootstrap connect (%s): hub at %s rejected this rank: %s", who, addr, r.rest()))
	case frAbort:
		return fail(fmt.Errorf("bootstrap connect (%s): %w", who, decodeAbort(&r)))
	default:
		return fail(fmt.Errorf("bootstrap connect (%s): unexpected frame %d from hub at %s", who, t, addr))
	}
	job := string(r.bytes())
	n := int(r.u32())
	if r.err != nil || n != cfg.Size {
		return fail(fmt.Errorf("bootstrap connect (%s): malformed welcome from hub at %s", who, addr))
	}
	hosts := make([]string, n)
	for i := range hosts {
		hosts[i] = string(r.bytes())
	}
	if r.err != nil {
		return fail(fmt.Errorf("bootstrap connect (%s): malformed welcome from hub at %s", who, addr))
	}
	b := &Bootstrap{
		rank: cfg.Rank, size: cfg.Size, jobID: job, hosts: hosts, timeout: cfg.Timeout,
		conn: conn, abort: cfg.Abort,
		pending:    make(map[uint64]chan collReply),
		status:     make(map[uint64]chan []int),
		mail:       make(map[mailKey]*mailbox),
		closed:     make(chan struct{}),
		readerDone: make(chan struct{}),
		failAck:    make(chan struct{}, 1),
		byeAck:     make(chan struct{}, 1),
	}
	b.out = newOutbox(conn, cfg.Timeout, func(error) { _ = conn.Close() })
	go b.out.run()
	go b.readLoop(br)
	return b, nil
}

// Rank returns this rank.
func (b *Bootstrap) Rank() int { return b.rank }

// Size returns the number of ranks.
func (b *Bootstrap) Size() int { return b.size }

// JobID returns the job id chosen by rank 0.
func (b *Bootstrap) JobID() string { return b.jobID }

// Hosts returns every rank's host identity, indexed by rank.
func (b *Bootstrap) Hosts() []string { return append([]string(nil), b.hosts...) }

// AllGather returns every rank's data, indexed by rank (collective).
func (b *Bootstrap) AllGather(ctx context.Context, data []byte) ([][]byte, error) {
	return b.collective(ctx, collAllGather, 0, data)
}

// Broadcast returns root's data on every rank (collective; the data of
// other ranks is ignored).
func (b *Bootstrap) Broadcast(ctx context.Context, root int, data []byte) ([]byte, error) {
	if root < 0 || root >= b.size {
		return nil, fmt.Errorf("bootstrap broadcast: root %d out of range for %d ranks", root, b.size)
	}
	if root != b.rank {
		data = nil
	}
	all, err := b.collective(ctx, collBroadcast, root, data)
	if err != nil {
		return nil, err
	}
	return all[0], nil
}

// Barrier returns once every rank has entered it.
func (b *Bootstrap) Barrier(ctx context.Context) error {
	_, err := b.collective(ctx, collBarrier, 0, nil)
	return err
}

// collective runs one sequence-numbered collective through the hub.
func (b *Bootstrap) collective(ctx context.Context, kind collKind, root int, data []byte) ([][]byte, error) {
	if err := b.abort.Err(); err != nil {
		return nil, fmt.Errorf("bootstrap %s: %w", kind, err)
	}
	b.mu.Lock()
	if b.closing {
		b.mu.Unlock()
		return nil, fmt.Errorf("bootstrap %s: %w", kind, ErrBootstrapClosed)
	}
	b.seq++
	seq := b.seq
	ch := make(chan collReply, 1)
	b.pending[seq] = ch
	b.mu.Unlock()
	defer func() {
		b.mu.Lock()
		delete(b.pending, seq)
		b.mu.Unlock()
	}()
	op := fmt.Sprintf("%s #%d", kind, seq)

	f := newFrame(frColl, 14+len(data))
	f.u8(byte(kind))
	f.u8(0)
	f.u64(seq)
	f.u32(uint32(root))
	f.raw(data)
	frame, ferr := f.finish()
	if ferr != nil {
		// Tell the hub, so that the collective fails everywhere instead of
		// leaving the others waiting.
		o := newFrame(frColl, 14)
		o.u8(byte(kind))
		o.u8(collOversize)
		o.u64(seq)
		o.u32(uint32(root))
		if oframe, err := o.finish(); err == nil {
			b.out.send(oframe)
		}
		return nil, fmt.Errorf("bootstrap %s: %d bytes: %w", op, len(data), ferr)
	}
	if !b.out.send(frame) {
		return nil, fmt.Errorf("bootstrap %s: %w", op, b.lostErr())
	}

	limit := b.limit(ctx)
	timer := time.NewTimer(limit)
	defer timer.Stop()
	select {
	case r := <-ch:
		if r.err != nil {
			return nil, fmt.Errorf("bootstrap %s: %w", op, r.err)
		}
		return r.data, nil
	case <-b.abort.Done():
		return nil, fmt.Errorf("bootstrap %s: %w", op, b.abort.Err())
	case <-b.closed:
		return nil, fmt.Errorf("bootstrap %s: %w", op, ErrBootstrapClosed)
	case <-ctx.Done():
		if !errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return nil, fmt.Errorf("bootstrap %s: %w", op, context.Cause(ctx))
		}
	case <-timer.C:
	}
	terr := &TimeoutError{Op: op, After: limit, Missing: b.queryMissing(seq)}
	// This rank's contribution stays with the hub, so the sequence numbers
	// are out of step from here on: fail the job rather than let a late
	// rank pair with a collective nobody is in any more.
	b.Fail(terr.Error())
	return nil, terr
}

// noCallTimeout marks a context whose bootstrap calls wait as long as ctx
// allows instead of Timeout (see WithoutCallTimeout).
type noCallTimeout struct{}

// teardownWait bounds the waits that have no per-call timeout: a day.
const teardownWait = 24 * time.Hour

// WithoutCallTimeout returns ctx for bootstrap calls that may wait for
// ranks finishing their scripts at very different times (teardown): they
// end with ctx, an abort (a rank failed or died) or after a day, not after
// the per-call Timeout.
func WithoutCallTimeout(ctx context.Context) context.Context {
	return context.WithValue(ctx, noCallTimeout{}, true)
}

// limit returns how long a call may wait: the smaller of Timeout and what
// is left of ctx.
func (b *Bootstrap) limit(ctx context.Context) time.Duration {
	limit := b.timeout
	if ctx.Value(noCallTimeout{}) != nil {
		limit = teardownWait
	}
	if dl, ok := ctx.Deadline(); ok {
		if d := time.Until(dl); d < limit {
			limit = max(d, 0)
		}
	}
	return limit
}

// lostErr is the error of a call that found the connection gone.
func (b *Bootstrap) lostErr() error {
	if err := b.abort.Err(); err != nil {
		return err
	}
	b.mu.Lock()
	closing := b.closing
	b.mu.Unlock()
	if closing {
		return ErrBootstrapClosed
	}
	return &RankError{Rank: 0, Died: true, Reason: "lost the bootstrap connection"}
}

// queryMissing asks the hub which ranks have not joined collective seq.
func (b *Bootstrap) queryMissing(seq uint64) []int {
	ch := make(chan []int, 1)
	b.mu.Lock()
	b.status[seq] = ch
	b.mu.Unlock()
	defer func() {
		b.mu.Lock()
		delete(b.status, seq)
		b.mu.Unlock()
	}()
	f := newFrame(frStatus, 8)
	f.u64(seq)
	frame, err := f.finish()
	if err != nil || !b.out.send(frame) {
		return nil
	}
	timer := time.NewTimer(statusWait)
	defer timer.Stop()
	select {
	case missing := <-ch:
		return missing
	case <-timer.C:
	case <-b.abort.Done():
	case <-b.readerDone:
	}
	return nil
}

// Send delivers data to peer's mailbox under tag. It returns once the
// message is queued; peer's Recv with the same tag takes it, in order.
func (b *Bootstrap) Send(ctx context.Context, peer int, tag uint32, data []byte) error {
	op := fmt.Sprintf("send to rank %d tag %d", peer, tag)
	if peer < 0 || peer >= b.size {
		return fmt.Errorf("bootstrap %s: peer out of range for %d ranks", op, b.size)
	}
	if err := b.abort.Err(); err != nil {
		return fmt.Errorf("bootstrap %s: %w", op, err)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("bootstrap %s: %w", op, err)
	}
	b.mu.Lock()
	closing := b.closing
	b.mu.Unlock()
	if closing {
		return fmt.Errorf("bootstrap %s: %w", op, ErrBootstrapClosed)
	}
	f := newFrame(frSend, 8+len(data))
	f.u32(uint32(peer))
	f.u32(tag)
	f.raw(data)
	frame, err := f.finish()
	if err != nil {
		return fmt.Errorf("bootstrap %s: %d bytes: %w", op, len(data), err)
	}
	if !b.out.send(frame) {
		return fmt.Errorf("bootstrap %s: %w", op, b.lostErr())
	}
	return nil
}

// Recv returns the next message that peer sent to this rank under tag,
// waiting for it if needed.
func (b *Bootstrap) Recv(ctx context.Context, peer int, tag uint32) ([]byte, error) {
	op := fmt.Sprintf("recv from rank %d tag %d", peer, tag)
	if peer < 0 || peer >= b.size {
		return nil, fmt.Errorf("bootstrap %s: peer out of range for %d ranks", op, b.size)
	}
	limit := b.limit(ctx)
	timer := time.NewTimer(limit)
	defer timer.Stop()
	key := mailKey{peer, tag}
	for {
		if err := b.abort.Err(); err != nil {
			return nil, fmt.Errorf("bootstrap %s: %w", op, err)
		}
		b.mu.Lock()
		if b.closing {
			b.mu.Unlock()
			return nil, fmt.Errorf("bootstrap %s: %w", op, ErrBootstrapClosed)
		}
		mb := b.mailboxLocked(key)
		if len(mb.queue) > 0 {
			data := mb.queue[0]
			mb.queue[0] = nil
			mb.queue = mb.queue[1:]
			b.tidyMailboxLocked(key, mb)
			b.mu.Unlock()
			return data, nil
		}
		mb.waiters++
		sig := mb.signal
		b.mu.Unlock()

		var err error
		select {
		case <-sig:
		case <-b.abort.Done():
			err = b.abort.Err()
		case <-b.closed:
			err = ErrBootstrapClosed
		case <-ctx.Done():
			if !errors.Is(ctx.Err(), context.DeadlineExceeded) {
				err = ctx.Err()
			} else {
				err = &TimeoutError{Op: op, After: limit}
			}
		case <-timer.C:
			err = &TimeoutError{Op: op, After: limit}
		}
		b.mu.Lock()
		mb.waiters--
		b.tidyMailboxLocked(key, mb)
		b.mu.Unlock()
		if err != nil {
			var te *TimeoutError
			if errors.As(err, &te) {
				return nil, err
			}
			return nil, fmt.Errorf("bootstrap %s: %w", op, err)
		}
	}
}

// mailboxLocked returns key's mailbox, making it if needed.
func (b *Bootstrap) mailboxLocked(key mailKey) *mailbox {
	mb := b.mail[key]
	if mb == nil {
		mb = &mailbox{signal: make(chan struct{})}
		b.mail[key] = mb
	}
	return mb
}

// tidyMailboxLocked forgets an empty mailbox nobody waits on.
func (b *Bootstrap) tidyMailboxLocked(key mailKey, mb *mailbox) {
	if len(mb.queue) == 0 && mb.waiters == 0 && b.mail[key] == mb {
		delete(b.mail, key)
	}
}

// Fail tells every other rank that this rank failed with reason, and sets
// this rank's abort flag. It waits briefly for the hub to pass the news on
// and never blocks for long. Only the first call has an effect.
func (b *Bootstrap) Fail(reason string) {
	b.failOnce.Do(func() {
		b.abort.Set(&RankError{Rank: b.rank, Reason: reason})
		f := newFrame(frFail, len(reason))
		f.raw([]byte(reason))
		frame, err := f.finish()
		if err != nil {
			f = newFrame(frFail, 64)
			f.raw([]byte("failure reason too long to send"))
			if frame, err = f.finish(); err != nil {
				return
			}
		}
		if !b.out.send(frame) {
			return
		}
		timer := time.NewTimer(min(b.timeout, failAckWait))
		defer timer.Stop()
		select {
		case <-b.failAck:
		case <-b.readerDone:
		case <-timer.C:
		}
	})
}

// Close says goodbye to the hub and closes the connection. Rank 0's Close
// keeps the hub up until every rank has said goodbye (or its connection
// ended), or until Timeout. Calls still waiting return ErrBootstrapClosed.
func (b *Bootstrap) Close() error {
	b.closeOnce.Do(func() {
		b.mu.Lock()
		b.closing = true
		next := b.seq + 1
		b.mu.Unlock()
		if b.abort.Err() == nil {
			f := newFrame(frBye, 8)
			f.u64(next)
			if frame, err := f.finish(); err == nil && b.out.send(frame) {
				timer := time.NewTimer(b.timeout)
				select {
				case <-b.byeAck:
				case <-b.readerDone:
				case <-timer.C:
					b.closeErr = fmt.Errorf("bootstrap close (rank %d): no goodbye from the hub within %v",
						b.rank, b.timeout)
				}
				timer.Stop()
			}
		}
		// After an abort the others already know (or will learn from the
		// lost connection); otherwise keep the hub up for their goodbyes.
		// Ranks may finish long after this one: the hub stays up while
		// their connections are alive (a rank that dies ends its connection).
		if b.hub != nil && b.abort.Err() == nil {
			if missing := b.hub.waitQuiet(teardownWait); len(missing) > 0 && b.closeErr == nil {
				b.closeErr = fmt.Errorf("bootstrap close (rank 0): %s did not say goodbye within %v",
					describeRanks(missing), teardownWait)
			}
		}
		if b.hub != nil {
			b.hub.shutdown()
		}
		close(b.closed)
		b.out.close()
		_ = b.conn.Close()
		<-b.readerDone
		<-b.out.done
	})
	return b.closeErr
}

// readLoop dispatches the hub's frames until the connection ends.
func (b *Bootstrap) readLoop(br *bufio.Reader) {
	defer close(b.readerDone)
	for {
		t, body, err := readFrame(br, maxBootFrame)
		if err == nil {
			err = b.dispatch(t, body)
			if err != nil {
				err = fmt.Errorf("bootstrap: bad frame from the hub: %w", err)
				_ = b.conn.Close()
			}
		}
		if err != nil {
			b.mu.Lock()
			closing := b.closing
			b.mu.Unlock()
			if !closing {
				b.abort.Set(&RankError{Rank: 0, Died: true, Reason: "lost the bootstrap connection"})
			}
			return
		}
	}
}

// dispatch handles one frame from the hub.
func (b *Bootstrap) dispatch(t frameType, body []byte) error {
	r := frameReader{b: body}
	switch t {
	case frResult:
		seq := r.u64()
		kind := collKind(r.u8())
		var data [][]byte
		switch kind {
		case collAllGather:
			n := int(r.u32())
			if r.err == nil && n != b.size {
				return fmt.Errorf("allgather result with %d entries, want %d", n, b.size)
			}
			data = make([][]byte, n)
			for i := range data {
				data[i] = r.bytes()
			}
		case collBroadcast:
			data = [][]byte{r.rest()}
		case collBarrier:
		default:
			return fmt.Errorf("result of unknown kind %d", kind)
		}
		if r.err != nil {
			return r.err
		}
		b.reply(seq, collReply{data: data})
	case frCollErr:
		seq := r.u64()
		msg := string(r.rest())
		if r.err != nil {
			return r.err
		}
		b.reply(seq, collReply{err: errors.New(msg)})
	case frDeliver:
		from := int(r.u32())
		tag := r.u32()
		data := r.rest()
		if r.err != nil {
			return r.err
		}
		if from < 0 || from >= b.size {
			return fmt.Errorf("message from rank %d of %d", from, b.size)
		}
		b.mu.Lock()
		key := mailKey{from, tag}
		mb := b.mailboxLocked(key)
		mb.queue = append(mb.queue, data)
		close(mb.signal)
		mb.signal = make(chan struct{})
		b.mu.Unlock()
	case frAbort:
		err := decodeAbort(&r)
		if r.err != nil {
			return r.err
		}
		b.abort.Set(err)
	case frFailAck:
		notify(b.failAck)
	case frByeAck:
		notify(b.byeAck)
	case frStatusReply:
		seq := r.u64()
		known := r.u8()
		n := r.u32()
		if r.err != nil || uint64(n) > uint64(b.size) {
			return fmt.Errorf("malformed status reply")
		}
		missing := make([]int, n)
		for i := range missing {
			missing[i] = int(r.u32())
		}
		if r.err != nil {
			return r.err
		}
		if known == 0 {
			missing = nil
		}
		b.mu.Lock()
		ch := b.status[seq]
		b.mu.Unlock()
		if ch != nil {
			select {
			case ch <- missing:
			default:
			}
		}
	default:
		return fmt.Errorf("unknown frame type %d", t)
	}
	return nil
}

// reply hands a collective's outcome to its waiting call, if any.
func (b *Bootstrap) reply(seq uint64, r collReply) {
	b.mu.Lock()
	ch := b.pending[seq]
	b.mu.Unlock()
	if ch != nil {
		select {
		case ch <- r:
		default:
		}
	}
}

// notify does a non-blocking send on a one-slot channel.
func notify(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// decodeAbort reads an abort frame's body.
func decodeAbort(r *frameReader) *RankError {
	rank := int(r.u32())
	died := r.u8() != 0
	reason := string(r.rest())
	return &RankError{Rank: rank, Died: died, Reason: reason}
}

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

	wg sync.WaitGroup
}

type hubPeer struct {
	rank   int
	host   string
	conn   net.Conn
	out    *outbox
	bye    bool
	byeSeq uint64 // first collective this rank will not join
	failed bool
	ended  bool
}

type hubColl struct {
	kind    collKind
	root    int
	first   int // rank that started it
	data    [][]byte
	have    []bool
	n       int
	errMsg  string
	maxSize int
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
		h.reject(c, "authentication failed: this connection does not know the job's secret ("+EnvJobSecret+")")
		return
	case uint64(size) != uint64(h.size):
		h.reject(c, fmt.Sprintf("rank %d says the job has %d ranks, rank 0 says %d", rank, size, h.size))
		return
	case uint64(rank) >= uint64(h.size):
		h.reject(c, fmt.Sprintf("rank %d is out of range for %d ranks", rank, h.size))
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
	for _, p := range h.peers {
		f.bytes([]byte(p.host))
	}
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
		if r.err != nil {
			return r.err
		}
		p.bye, p.byeSeq = true, seq
		for s, c := range h.colls {
			if s >= seq && !c.have[p.rank] {
				h.abortLocked(p.rank, false, fmt.Sprintf("closed the bootstrap before %s #%d", c.kind, s), -1)
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
	default:
		return fmt.Errorf("unknown frame type %d from rank %d", t, p.rank)
	}
	return nil
}

// collLocked records p's contribution to collective seq and answers every
// rank once all have contributed.
func (h *hub) collLocked(p *hubPeer, kind collKind, flags byte, seq uint64, root int, data []byte) {
	if h.aborted {
		return
	}
	c := h.colls[seq]
	if c == nil {
		c = &hubColl{kind: kind, root: root, first: p.rank,
			data: make([][]byte, h.size), have: make([]bool, h.size)}
		h.colls[seq] = c
		for _, q := range h.peers {
			if q != nil && q.bye && q.byeSeq <= seq {
				h.abortLocked(q.rank, false, fmt.Sprintf("closed the bootstrap before %s #%d", kind, seq), -1)
				return
			}
		}
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
	if flags&collOversize != 0 && c.errMsg == "" {
		c.errMsg = fmt.Sprintf("rank %d's data exceeds the %d MiB bootstrap frame limit", p.rank, maxBootFrame>>20)
	}
	switch {
	case kind == collAllGather:
		c.data[p.rank] = data
	case kind == collBroadcast && p.rank == root:
		c.data[p.rank] = data
	}
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
			for _, d := range c.data {
				f.bytes(d)
			}
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
		h.abortLocked(p.rank, true, "bootstrap connection lost", p.rank)
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

// outbox writes frames to a connection in order from its own goroutine, so
// that no caller ever blocks on a slow peer.
type outbox struct {
	conn    net.Conn
	timeout time.Duration // bound of one frame's write
	onErr   func(error)

	mu      sync.Mutex
	queue   []outItem
	closing bool // write what is queued, then stop
	dead    bool // stopped; sends are dropped
	wake    chan struct{}
	done    chan struct{} // closed when run returns
}

type outItem struct {
	frame   []byte
	flushed chan struct{} // a flush marker instead of a frame
}

func newOutbox(conn net.Conn, timeout time.Duration, onErr func(error)) *outbox {
	return &outbox{conn: conn, timeout: timeout, onErr: onErr,
		wake: make(chan struct{}, 1), done: make(chan struct{})}
}

// send queues a frame; it reports false when the outbox has stopped.
func (o *outbox) send(frame []byte) bool {
	o.mu.Lock()
	if o.dead || o.closing {
		o.mu.Unlock()
		return false
	}
	o.queue = append(o.queue, outItem{frame: frame})
	o.mu.Unlock()
	notify(o.wake)
	return true
}

// flush returns a channel closed once everything queued so far is written
// (or the outbox stopped).
func (o *outbox) flush() <-chan struct{} {
	ch := make(chan struct{})
	o.mu.Lock()
	if o.dead {
		o.mu.Unlock()
		close(ch)
		return ch
	}
	o.queue = append(o.queue, outItem{flushed: ch})
	o.mu.Unlock()
	notify(o.wake)
	return ch
}

// close makes run write what is queued and return.
func (o *outbox) close() {
	o.mu.Lock()
	o.closing = true
	o.mu.Unlock()
	notify(o.wake)
}

// run is the writer goroutine.
func (o *outbox) run() {
	defer close(o.done)
	for {
		o.mu.Lock()
		for len(o.queue) == 0 {
			if o.closing {
				o.dead = true
				o.mu.Unlock()
				return
			}
			o.mu.Unlock()
			<-o.wake
			o.mu.Lock()
		}
		it := o.queue[0]
		o.queue[0] = outItem{}
		o.queue = o.queue[1:]
		o.mu.Unlock()
		if it.flushed != nil {
			close(it.flushed)
			continue
		}
		_ = o.conn.SetWriteDeadline(time.Now().Add(o.timeout))
		if _, err := o.conn.Write(it.frame); err != nil {
			o.mu.Lock()
			o.dead = true
			rest := o.queue
			o.queue = nil
			o.mu.Unlock()
			for _, r := range rest {
				if r.flushed != nil {
					close(r.flushed)
				}
			}
			if o.onErr != nil {
				o.onErr(err)
			}
			return
		}
	}
}

// frameBuilder encodes one frame.
type frameBuilder struct{ b []byte }

func newFrame(t frameType, hint int) *frameBuilder {
	b := make([]byte, 4, 5+max(hint, 0))
	return &frameBuilder{b: append(b, byte(t))}
}

func (f *frameBuilder) u8(v byte)    { f.b = append(f.b, v) }
func (f *frameBuilder) u32(v uint32) { f.b = binary.BigEndian.AppendUint32(f.b, v) }
func (f *frameBuilder) u64(v uint64) { f.b = binary.BigEndian.AppendUint64(f.b, v) }
func (f *frameBuilder) raw(p []byte) { f.b = append(f.b, p...) }

// bytes appends a length-prefixed byte string.
func (f *frameBuilder) bytes(p []byte) {
	f.u32(uint32(min(len(p), maxBootFrame+1)))
	f.b = append(f.b, p...)
}

// finish fills in the length; frames over the limit are an error.
func (f *frameBuilder) finish() ([]byte, error) {
	n := len(f.b) - 4
	if n > maxBootFrame {
		return nil, fmt.Errorf("frame of %d bytes exceeds the %d MiB bootstrap limit", n, maxBootFrame>>20)
	}
	binary.BigEndian.PutUint32(f.b, uint32(n))
	return f.b, nil
}

// readFrame reads one frame of at most limit bytes (type byte included).
func readFrame(r io.Reader, limit int) (frameType, []byte, error) {
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return 0, nil, err
	}
	n := binary.BigEndian.Uint32(hdr[:])
	if n < 1 || uint64(n) > uint64(limit) {
		return 0, nil, fmt.Errorf("frame length %d out of range 1..%d", n, limit)
	}
	buf := make([]byte, n)
	if _, err := io.ReadFull(r, buf); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return 0, nil, err
	}
	return frameType(buf[0]), buf[1:], nil
}

// frameReader decodes a frame body; the first short read sets err and
// makes every later read return zero.
type frameReader struct {
	b   []byte
	err error
}

func (r *frameReader) take(n int) []byte {
	if r.err != nil {
		return nil
	}
	if n < 0 || len(r.b) < n {
		r.err = io.ErrUnexpectedEOF
		return nil
	}
	p := r.b[:n:n]
	r.b = r.b[n:]
	return p
}

func (r *frameReader) u8() byte {
	if p := r.take(1); p != nil {
		return p[0]
	}
	return 0
}

func (r *frameReader) u32() uint32 {
	if p := r.take(4); p != nil {
		return binary.BigEndian.Uint32(p)
	}
	return 0
}

func (r *frameReader) u64() uint64 {
	if p := r.take(8); p != nil {
		return binary.BigEndian.Uint64(p)
	}
	return 0
}

// bytes reads a length-prefixed byte string.
func (r *frameReader) bytes() []byte {
	n := r.u32()
	if r.err != nil {
		return nil
	}
	if uint64(n) > uint64(len(r.b)) {
		r.err = io.ErrUnexpectedEOF
		return nil
	}
	return r.take(int(n))
}

// rest returns what is left of the body.
func (r *frameReader) rest() []byte {
	if r.err != nil {
		return nil
	}
	p := r.b
	r.b = nil
	return p
}
