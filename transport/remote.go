package transport

import (
	"errors"
	"fmt"
	"time"
)

// ErrPeerLost matches (errors.Is) a network error that means the
// connection to a peer broke: most often the peer's process died, which
// the job's failure news explains a moment later.
var ErrPeerLost = errors.New("connection to a peer lost")

// peerLostGrace is how long an operation that lost its peer waits for the
// job's failure news before it reports the bare network error.
const peerLostGrace = 2 * time.Second

// explained is a network error together with the failure that caused it
// (a rank that died or failed); both match errors.Is and errors.As.
type explained struct {
	cause, err error
	by         string // who reported err: "the network", "the device"
}

func (e *explained) Error() string   { return e.cause.Error() + "; " + e.by + " said: " + e.err.Error() }
func (e *explained) Unwrap() []error { return []error{e.cause, e.err} }

// ExplainPeerLost returns err unchanged unless it is ErrPeerLost; then it
// waits up to a short grace for abort and, when abort is set, returns an
// error that names its cause first ("rank 3 died (...); the network said:
// flush to rank 3: ...").
func ExplainPeerLost(err error, abort *Abort) error {
	return explainPeerLost(err, abort, peerLostGrace)
}

func explainPeerLost(err error, abort *Abort, grace time.Duration) error {
	if err == nil || abort == nil || !errors.Is(err, ErrPeerLost) {
		return err
	}
	return explainAbort(err, abort, grace, "the network")
}

// ExplainDeviceFault is ExplainPeerLost for a device error: a GPU shared
// under MPS may fault every client's work when one client dies mid-kernel,
// and then the job's failure news says why.
func ExplainDeviceFault(err error, abort *Abort) error {
	if err == nil || abort == nil {
		return err
	}
	return explainAbort(err, abort, peerLostGrace, "the device")
}

func explainAbort(err error, abort *Abort, grace time.Duration, by string) error {
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-abort.Done():
		return &explained{cause: abort.Err(), err: err, by: by}
	case <-t.C:
		return err
	}
}

// Ref names bytes of a peer's part of a window that this process cannot
// map: the peer, the key under which the peer's region is registered with
// a network transport, and an offset into that region.
type Ref struct {
	Peer int
	Key  RemoteKey
	Off  uint64
}

func (r Ref) String() string { return fmt.Sprintf("rank %d+%d", r.Peer, r.Off) }

// RemoteKey is a peer's region as a network transport reaches it: the
// unpacked remote key, the region's base address at the peer and the
// endpoint to the peer.
type RemoteKey interface {
	// Network is the transport that unpacked the key.
	Network() Network
	// Via names what carries operations on it, e.g. "ucx: tcp/eth0".
	Via() string
	// Close releases the key (before the owner deregisters the region).
	Close() error
}

// Registration is this rank's region registered with a network.
type Registration interface {
	// Packed is what a peer needs to reach the region (Network.Unpack).
	Packed() []byte
	// Close deregisters the region.
	Close() error
}

// RemoteKind is what a RemoteOp does.
type RemoteKind uint8

// The remote operations.
const (
	// RemotePut moves N bytes from Local to Ref.
	RemotePut RemoteKind = iota
	// RemoteGet moves N bytes from Ref to Local.
	RemoteGet
	// RemoteStore64 writes Value into the 8 bytes at Ref, landing after
	// every earlier operation on the same peer (a signal after its data).
	RemoteStore64
	// RemoteAdd64 atomically adds Value to the 8 bytes at Ref, ordered
	// like RemoteStore64.
	RemoteAdd64
	// RemoteFlush waits until every operation posted before it completed
	// at its target (remote completion). Ref is unused.
	RemoteFlush
	// RemotePutSignal moves N bytes from Local to Ref, then adds Value to
	// (SigAdd) or writes it into the 8 bytes at SigOff of the same region,
	// landing after the data (a put_signal as one operation where the
	// network can).
	RemotePutSignal
)

var remoteNames = [...]string{"put", "get", "store64", "add64", "flush", "put_signal"}

func (k RemoteKind) String() string {
	if int(k) < len(remoteNames) {
		return remoteNames[k]
	}
	return fmt.Sprintf("remote(%d)", k)
}

// RemoteOp is a stream operation on memory reached through a network.
type RemoteOp struct {
	Kind  RemoteKind
	Ref   Ref
	Local Addr // source of a put, destination of a get
	N     uint64
	Value uint64
	// SigOff and SigAdd place and say how a RemotePutSignal changes its
	// signal.
	SigOff uint64
	SigAdd bool
	// Timeout bounds the waits this op causes (local or remote
	// completion); it is the window's timeout.
	Timeout time.Duration
	// What names the op in errors, e.g. "rank 0: window 2: put to rank 3".
	What string
}

// RemoteStream is a stream that can run operations on peers reached
// through a Network. Remote operations are posted in stream order and the
// stream moves on without waiting for them; operations on one peer land in
// order where it matters (a store or add after the data before it), and any
// later local operation that touches memory (copy, store, add, host
// function) runs only once every posted operation completed locally, so a
// put's source may be reused and a get's destination read by whatever
// follows. A wait, which only reads its own slots, does not wait for them
// (a get into the slots it waits on is not complete when the wait ends).
// Sync includes a RemoteFlush.
type RemoteStream interface {
	Stream
	// Remote enqueues op.
	Remote(op RemoteOp)
}

// Network is a transport to peers whose memory this process cannot map
// (transport/net). One serves every window of a rank; endpoints are made
// once per peer.
type Network interface {
	// Name describes the network, e.g. "ucx 1.16.0".
	Name() string
	// Address returns what peers need to connect to this rank; the first
	// call opens the network (and loads its library).
	Address() ([]byte, error)
	// Connect makes the endpoint to peer from the address it published;
	// later calls for the same peer do nothing.
	Connect(peer int, addr []byte) error
	// Register registers size bytes at local for remote access.
	Register(local Addr, size uint64) (Registration, error)
	// Unpack turns a peer's packed registration into a key.
	Unpack(peer int, packed []byte) (RemoteKey, error)
	// Post starts op and returns before it completes.
	Post(op RemoteOp) error
	// Quiet returns once every posted operation completed locally: put
	// sources may be reused and get destinations hold their data. It ends
	// early with cancel's error when cancel returns one, and fails after
	// timeout naming the peer that did not complete.
	Quiet(cancel func() error, timeout time.Duration) error
	// Flush returns once every posted operation completed at its target,
	// ending like Quiet.
	Flush(cancel func() error, timeout time.Duration) error
	// Progress drives the network once; waits call it while they poll.
	Progress()
}

// Greeter is a Network that can prove its new endpoints wired up both
// ways (a message each way with every peer connected since its last
// greeting), so that no peer is still connecting when another closes.
type Greeter interface {
	Greet(cancel func() error, timeout time.Duration) error
}

// NetworkUser is a stream that drives a network while it waits (so that
// what peers send lands sooner than the network's own progress would).
type NetworkUser interface {
	UseNetwork(n Network)
}
