package transport

import (
	"errors"
	"fmt"
	"time"
)

// Route is how this rank reaches one peer's part of a window.
type Route struct {
	Kind PeerKind
	// Base is the part as mapped in this process (shm, nvl, self); 0 when
	// it cannot be mapped.
	Base Addr
	// Key is the part as a network transport registered it (net); nil
	// when the part is mapped.
	Key RemoteKey
}

// Reachable reports whether operations can reach the part.
func (r Route) Reachable() bool { return r.Base != 0 || r.Key != nil }

// Peers is a window's dispatcher: it holds, for every peer, the route that
// reaches the peer's part of the window, and turns window operations
// (addressed as peer and offset) into stream operations on that route:
// loads, stores and copies where the part is mapped, RemoteOps where a
// network reaches it.
type Peers struct {
	routes []Route
	// What prefixes errors, e.g. "rank 0: window 2".
	What    string
	Timeout time.Duration
	net     bool
	// whats caches op names for errors, by peer and kind (ops are a hot path).
	whats [][]string
}

// NewPeers builds the dispatcher of a region shared as topo says.
func NewPeers(topo *Topology, reg *Region) *Peers {
	p := &Peers{routes: make([]Route, len(topo.Kinds))}
	for r, k := range topo.Kinds {
		rt := Route{Kind: k}
		if r < len(reg.Peers) {
			rt.Base = reg.Peers[r]
		}
		if rt.Base == 0 && r < len(reg.Keys) && reg.Keys[r] != nil {
			rt.Key = reg.Keys[r]
			p.net = true
		}
		p.routes[r] = rt
	}
	return p
}

// Clone returns a dispatcher with the same routes and caches of its own, for
// a user on another goroutine (a window's view on another stream).
func (p *Peers) Clone() *Peers {
	c := *p
	c.whats = nil
	return &c
}

// Route returns the route to peer.
func (p *Peers) Route(peer int) Route { return p.routes[peer] }

// Networked reports whether any peer is reached through a network.
func (p *Peers) Networked() bool { return p.net }

// Via names how peer is reached: its class, and for a network peer what
// carries it ("net (ucx/tcp)").
func (p *Peers) Via(peer int) string {
	r := p.routes[peer]
	if r.Key != nil {
		return fmt.Sprintf("%s (%s)", r.Kind, r.Key.Via())
	}
	return r.Kind.String()
}

// Addr returns peer's byte off as mapped here, or 0 when the part is not
// mapped (benchmarks and the all-gather use it for direct copies).
func (p *Peers) Addr(peer int, off uint64) Addr {
	if b := p.routes[peer].Base; b != 0 {
		return b.Add(off)
	}
	return 0
}

// Ref returns peer's byte off as a network reaches it.
func (p *Peers) Ref(peer int, off uint64) Ref {
	return Ref{Peer: peer, Key: p.routes[peer].Key, Off: off}
}

// errNoRemote is what a stream without remote operations reports.
var errNoRemote = errors.New("this stream cannot reach network peers")

func (p *Peers) remote(s Stream, op RemoteOp) {
	op.Timeout = p.Timeout
	if op.What == "" {
		op.What = p.what(op.Ref.Peer, op.Kind)
	}
	rs, ok := s.(RemoteStream)
	if !ok {
		what := op.What
		s.Host(func() error { return fmt.Errorf("%s: %w", what, errNoRemote) })
		return
	}
	rs.Remote(op)
}

// what names an operation of kind on peer, e.g. "rank 0: window 2: put to
// rank 3".
func (p *Peers) what(peer int, kind RemoteKind) string {
	if p.whats == nil {
		p.whats = make([][]string, len(p.routes))
	}
	if p.whats[peer] == nil {
		p.whats[peer] = make([]string, len(remoteNames))
		for k := range remoteNames {
			p.whats[peer][k] = fmt.Sprintf("%s: %s to rank %d", p.What, RemoteKind(k), peer)
		}
	}
	if int(kind) < len(remoteNames) {
		return p.whats[peer][kind]
	}
	return fmt.Sprintf("%s: %s to rank %d", p.What, kind, peer)
}

// Put copies n bytes at src into peer's part at off.
func (p *Peers) Put(s Stream, peer int, off uint64, src Addr, n uint64) {
	if b := p.routes[peer].Base; b != 0 {
		s.Copy(b.Add(off), src, n)
		return
	}
	p.remote(s, RemoteOp{Kind: RemotePut, Ref: p.Ref(peer, off), Local: src, N: n})
}

// Get copies n bytes of peer's part at off to dst.
func (p *Peers) Get(s Stream, dst Addr, peer int, off, n uint64) {
	if b := p.routes[peer].Base; b != 0 {
		s.Copy(dst, b.Add(off), n)
		return
	}
	p.remote(s, RemoteOp{Kind: RemoteGet, Ref: p.Ref(peer, off), Local: dst, N: n})
}

// Store64 writes v into the 8 bytes of peer's part at off, after every
// earlier operation's data (release).
func (p *Peers) Store64(s Stream, peer int, off, v uint64) {
	if b := p.routes[peer].Base; b != 0 {
		s.Store64(b.Add(off), v)
		return
	}
	p.remote(s, RemoteOp{Kind: RemoteStore64, Ref: p.Ref(peer, off), Value: v})
}

// Add64 atomically adds v to the 8 bytes of peer's part at off, ordered
// like Store64.
func (p *Peers) Add64(s Stream, peer int, off, v uint64) {
	if b := p.routes[peer].Base; b != 0 {
		s.Add64(b.Add(off), v)
		return
	}
	p.remote(s, RemoteOp{Kind: RemoteAdd64, Ref: p.Ref(peer, off), Value: v})
}

// PutSignal offers a put and its signal as one operation: to a stream that
// fuses them (PutSignaler) where the part is mapped, as a RemotePutSignal
// where a network reaches it. It reports false when the caller must enqueue
// them apart.
func (p *Peers) PutSignal(s Stream, peer int, off uint64, src Addr, n uint64, slotOff uint64, add bool, v uint64) bool {
	r := p.routes[peer]
	if r.Base == 0 {
		if r.Key == nil {
			return false
		}
		p.remote(s, RemoteOp{Kind: RemotePutSignal, Ref: p.Ref(peer, off), Local: src, N: n, SigOff: slotOff, SigAdd: add, Value: v})
		return true
	}
	ps, ok := s.(PutSignaler)
	if !ok {
		return false
	}
	return ps.PutSignal(r.Base.Add(off), src, n, r.Base.Add(slotOff), add, v)
}

// Flush enqueues a wait until every earlier operation on a network peer
// completed at its target; nothing when no peer is reached that way (stream
// order already completes mapped copies).
func (p *Peers) Flush(s Stream) {
	if p.net {
		p.remote(s, RemoteOp{Kind: RemoteFlush, What: p.What + ": flush"})
	}
}
