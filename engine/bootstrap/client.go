package bootstrap

import (
	"bufio"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"time"

	"github.com/luacoll/luacoll/transport"
)

// Config configures Connect.
type Config struct {
	Rank, Size int
	// Addr is the hub's host:port, or UnixPrefix and a socket path when
	// every rank is on one host; rank 0 listens there unless Listener is
	// set.
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
	// Secret is the job's secret: every connection to the hub proves it
	// knows it, and the hub proves it back.
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
	// clocks are the JobClock calls waiting for the hub's answer.
	clocks   map[uint64]chan time.Duration
	clockSeq uint64
	// endedQ are the EndedRanks calls waiting for the hub's answer.
	endedQ   map[uint64]chan map[int]string
	endedSeq uint64

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
func Connect(ctx context.Context, cfg Config) (*Bootstrap, error) {
	if cfg.Size < 1 || cfg.Size > MaxRanks {
		return nil, fmt.Errorf("bootstrap: job size %d out of range 1..%d", cfg.Size, MaxRanks)
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
			ln, err = listenAddr(cfg.Addr)
			if err != nil {
				return nil, fmt.Errorf("bootstrap: rank 0 cannot listen on %s: %w", cfg.Addr, err)
			}
		}
		job := cfg.JobID
		if job == "" {
			var err error
			if job, err = NewJobID(); err != nil {
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
// (an unspecified IP becomes loopback, a Unix socket gets UnixPrefix).
func dialableAddr(a net.Addr) string {
	if ua, ok := a.(*net.UnixAddr); ok {
		return UnixPrefix + ua.Name
	}
	if ta, ok := a.(*net.TCPAddr); ok && (ta.IP == nil || ta.IP.IsUnspecified()) {
		ip := "127.0.0.1"
		if ta.IP != nil && ta.IP.To4() == nil {
			ip = "::1"
		}
		return net.JoinHostPort(ip, fmt.Sprint(ta.Port))
	}
	return a.String()
}

// NewJobID returns 16 random hex digits.
func NewJobID() (string, error) {
	var buf [8]byte
	if _, err := rand.Read(buf[:]); err != nil {
		return "", fmt.Errorf("making a job id: %w", err)
	}
	return hex.EncodeToString(buf[:]), nil
}

// dialHub connects to the hub with retries, says hello and waits for the
// welcome.
func dialHub(ctx context.Context, cfg Config, addr string, limit time.Duration, h *hub) (*Bootstrap, error) {
	who := fmt.Sprintf("rank %d of %d", cfg.Rank, cfg.Size)
	conn, err := connectHub(ctx, who, addr, limit)
	if err != nil {
		return nil, err
	}
	fail := func(err error) (*Bootstrap, error) {
		_ = conn.Close()
		return nil, err
	}
	br := bufio.NewReader(conn)
	t, body, err := helloHub(ctx, cfg, who, conn, br, addr, limit, h)
	if err != nil {
		return fail(err)
	}
	_ = conn.SetDeadline(time.Time{})
	job, hosts, err := readWelcome(cfg, who, addr, t, body)
	if err != nil {
		return fail(err)
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

// connectHub connects to the hub at addr, retrying with a growing pause
// until ctx ends.
func connectHub(ctx context.Context, who, addr string, limit time.Duration) (net.Conn, error) {
	var conn net.Conn
	var lastErr error
	backoff := 10 * time.Millisecond
	network, dialAddr := splitAddr(addr)
	for conn == nil {
		if network == "unix" {
			if err := checkDialUnix(dialAddr); err != nil && !errors.Is(err, errNotYet) {
				return nil, fmt.Errorf("bootstrap connect (%s): %w", who, err)
			}
		}
		var d net.Dialer
		c, err := d.DialContext(ctx, network, dialAddr)
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
	return conn, nil
}

// helloHub answers the hub's challenge with this rank's hello, checks
// that the hub knows the job's secret, and returns the hub's answer (a
// welcome, a rejection or an abort), all before ctx's deadline. The
// caller closes conn on an error.
func helloHub(ctx context.Context, cfg Config, who string, conn net.Conn, br *bufio.Reader, addr string,
	limit time.Duration, h *hub) (frameType, []byte, error) {
	deadline, _ := ctx.Deadline()
	_ = conn.SetDeadline(deadline)
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Now()) })
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
		return 0, nil, fmt.Errorf("bootstrap connect (%s): hello to %s: %w", who, addr, err)
	}
	t, body, err := readFrame(br, maxBootFrame)
	if err == nil && t == frAccept {
		if !hmac.Equal(body, acceptMAC(key, hubNonce, rankNonce)) {
			stop()
			return 0, nil, fmt.Errorf("bootstrap connect (%s): the hub at %s does not know this job's secret (%s): another job's?", who, addr, EnvJobSecret)
		}
		t, body, err = readFrame(br, maxBootFrame)
	} else if err == nil && t == frWelcome {
		stop()
		return 0, nil, fmt.Errorf("bootstrap connect (%s): the hub at %s did not prove it knows this job's secret", who, addr)
	}
	if !stop() && ctx.Err() != nil {
		err = ctx.Err()
	}
	if err != nil {
		cerr := ctx.Err()
		if cerr != nil && !errors.Is(cerr, context.DeadlineExceeded) {
			return 0, nil, fmt.Errorf("bootstrap connect (%s): %w", who, cerr)
		}
		if cerr != nil || errors.Is(err, os.ErrDeadlineExceeded) {
			te := &TimeoutError{Op: fmt.Sprintf("connect (%s, hub %s)", who, addr), After: limit}
			if h != nil {
				te.Missing, te.Note = h.missingJoins(), h.refusedNote()
			}
			return 0, nil, te
		}
		return 0, nil, fmt.Errorf("bootstrap connect (%s): hub at %s closed the connection before every rank joined: %w",
			who, addr, err)
	}
	return t, body, nil
}

// readWelcome reads the hub's answer of type t: the job id and every
// rank's host from a welcome, the reason from a rejection or an abort.
func readWelcome(cfg Config, who, addr string, t frameType, body []byte) (job string, hosts []string, err error) {
	r := frameReader{b: body}
	switch t {
	case frWelcome:
	case frReject:
		return "", nil, fmt.Errorf("bootstrap connect (%s): hub at %s rejected this rank: %s", who, addr, r.rest())
	case frAbort:
		return "", nil, fmt.Errorf("bootstrap connect (%s): %w", who, decodeAbort(&r))
	default:
		return "", nil, fmt.Errorf("bootstrap connect (%s): unexpected frame %d from hub at %s", who, t, addr)
	}
	job = string(r.bytes())
	n := int(r.u32())
	if r.err != nil || n != cfg.Size {
		return "", nil, fmt.Errorf("bootstrap connect (%s): malformed welcome from hub at %s", who, addr)
	}
	hosts = make([]string, n)
	var prev []byte
	for i, v := range r.runs(n) {
		if i > 0 && len(v) == len(prev) && (len(v) == 0 || &v[0] == &prev[0]) {
			hosts[i] = hosts[i-1] // the same run: the same string
			continue
		}
		hosts[i], prev = string(v), v
	}
	if r.err != nil {
		return "", nil, fmt.Errorf("bootstrap connect (%s): malformed welcome from hub at %s", who, addr)
	}
	return job, hosts, nil
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
