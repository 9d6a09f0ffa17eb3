package transport

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/luacoll/luacoll/transport/knobs"
	"os"
	"strings"

	"github.com/luacoll/luacoll/transport/launchenv"
)

// PeerKind says how this rank reaches a peer.
type PeerKind uint8

// The peer classes, from closest to farthest.
const (
	KindSelf PeerKind = iota // this rank
	KindSHM                  // same host: shared memory
	KindNVL                  // same host, GPU peer access (CUDA IPC over NVLink or PCIe)
	KindNet                  // another host (or logical node): the network
)

var kindNames = [...]string{"self", "shm", "nvl", "net"}

func (k PeerKind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return fmt.Sprintf("kind(%d)", k)
}

// ParseKind turns "self", "shm", "nvl" or "net" into a PeerKind.
func ParseKind(s string) (PeerKind, error) {
	for i, n := range kindNames {
		if s == n {
			return PeerKind(i), nil
		}
	}
	return 0, fmt.Errorf("unknown transport %q (want self, shm, nvl or net)", s)
}

// Identity is what a rank tells its peers about where it runs.
type Identity struct {
	Host   string `json:"host"`   // host identity: hostname and boot id
	Device string `json:"device"` // "host" or a GPU's identity
	PID    int    `json:"pid"`
}

// LogicalNodeEnv names the variable that makes this process part of a
// logical node: a host of its own as far as the job can tell (luacoll's
// launcher sets it for --nodes), so that the ranks of other nodes of the
// same machine are reached over the network.
const LogicalNodeEnv = "LUACOLL_LOGICAL_NODE"

// LocalIdentity describes this process; device names its memory ("host" on
// the host backend). The host is the hostname and boot id, and the logical
// node (LogicalNodeEnv) when there is one.
func LocalIdentity(device string) Identity {
	h, _ := os.Hostname()
	if b, err := os.ReadFile("/proc/sys/kernel/random/boot_id"); err == nil {
		h += "/" + strings.TrimSpace(string(b))
	}
	if node := strings.TrimSpace(launchenv.Get(LogicalNodeEnv)); node != "" {
		h += "/node" + node
	}
	return Identity{Host: h, Device: device, PID: os.Getpid()}
}

// Topology is every peer's class as seen from one rank.
type Topology struct {
	Rank   int
	Kinds  []PeerKind
	Idents []Identity
	// Net[q][r] says that rank q reaches rank r over the network (as q
	// sees it, forced classes included), so every rank knows which ranks
	// must register their memory with the network.
	Net [][]bool
}

// AnyNet reports whether any rank reaches any other over the network
// (the same answer on every rank).
func (t *Topology) AnyNet() bool {
	for _, row := range t.Net {
		for _, n := range row {
			if n {
				return true
			}
		}
	}
	return false
}

// HostShared returns a copy of t in which the peers this rank maps are
// reached through shared memory (shm), as in a region of host memory
// (Region.HostShared); network peers stay on the network.
func (t *Topology) HostShared() *Topology {
	c := *t
	c.Kinds = append([]PeerKind(nil), t.Kinds...)
	for r, k := range c.Kinds {
		if k == KindNVL {
			c.Kinds[r] = KindSHM
		}
	}
	return &c
}

// ReachedByNet reports whether some rank reaches rank r over the network.
func (t *Topology) ReachedByNet(r int) bool {
	for _, row := range t.Net {
		if r < len(row) && row[r] {
			return true
		}
	}
	return false
}

// OverrideEnv names the environment variable that forces peer classes:
// "net" (every other peer), or a list such as "1=net,3=shm" ("*" for every
// other peer). Tests use it to reach paths a single machine cannot.
const OverrideEnv = "LUACOLL_TRANSPORT"

// ParseOverride parses an OverrideEnv value for a job of size ranks seen
// from rank. It returns, per peer, the forced kind or -1.
func ParseOverride(s string, rank, size int) ([]int, error) {
	out := make([]int, size)
	for i := range out {
		out[i] = -1
	}
	s = strings.TrimSpace(s)
	if s == "" {
		return out, nil
	}
	items, err := knobs.TransportItems(s)
	if err != nil {
		return nil, fmt.Errorf("%s=%q: %w", OverrideEnv, s, err)
	}
	for _, it := range items {
		k, _ := ParseKind(it.Kind) // shm, nvl or net: TransportItems takes no other
		switch {
		case it.Peer < 0:
			for i := range out {
				if i != rank {
					out[i] = int(k)
				}
			}
		case it.Peer >= size:
			return nil, fmt.Errorf("%s=%q: peer %d is not a rank in 0..%d", OverrideEnv, s, it.Peer, size-1)
		case it.Peer != rank:
			out[it.Peer] = int(k)
		}
	}
	return out, nil
}

// Discover is collective: it gathers every rank's identity and classifies
// each peer. gpuPeer reports whether this rank's device can reach a peer's
// device directly (nil on the host backend). override is an OverrideEnv value.
func Discover(ctx context.Context, ex Exchanger, self Identity, gpuPeer func(Identity) bool, override string) (*Topology, error) {
	forced, err := ParseOverride(override, ex.Rank(), ex.Size())
	if err != nil {
		return nil, err
	}
	// The pid classifies nothing: left out, every rank of a host on the
	// host backend sends the same message, which the bootstrap carries
	// as one run per host instead of one value per rank.
	self.PID = 0
	mine, err := json.Marshal(discoverMsg{Identity: self, Override: override})
	if err != nil {
		return nil, fmt.Errorf("topology: %w", err)
	}
	all, err := ex.AllGather(ctx, mine)
	if err != nil {
		return nil, fmt.Errorf("topology: exchanging identities: %w", err)
	}
	t := &Topology{Rank: ex.Rank(), Kinds: make([]PeerKind, len(all)), Idents: make([]Identity, len(all))}
	msgs := make([]discoverMsg, len(all))
	for r, b := range all {
		if err := json.Unmarshal(b, &msgs[r]); err != nil {
			return nil, fmt.Errorf("topology: identity of rank %d: %w", r, err)
		}
		t.Idents[r] = msgs[r].Identity
	}
	t.Net = netMatrix(msgs)
	for r := range all {
		id := t.Idents[r]
		switch {
		case r == t.Rank:
			t.Kinds[r] = KindSelf
		case id.Host != self.Host:
			t.Kinds[r] = KindNet
		case gpuPeer != nil && gpuPeer(id):
			t.Kinds[r] = KindNVL
		default:
			t.Kinds[r] = KindSHM
		}
		if forced[r] >= 0 {
			if PeerKind(forced[r]) == KindNVL && gpuPeer == nil {
				return nil, fmt.Errorf("%s: rank %d cannot be nvl without a GPU backend (--device cuda)", OverrideEnv, r)
			}
			t.Kinds[r] = PeerKind(forced[r])
		}
	}
	return t, nil
}

// discoverMsg is what each rank publishes in Discover: where it runs, and
// its OverrideEnv value (so every rank knows who forces whom onto net).
type discoverMsg struct {
	Identity
	Override string `json:"override,omitempty"`
}

// netMatrix computes Topology.Net from every rank's message: q reaches r
// over the network when they run on different hosts or q forces r to net.
// A value a rank cannot parse counts as no forcing here (that rank fails
// Discover itself).
func netMatrix(msgs []discoverMsg) [][]bool {
	n := len(msgs)
	out := make([][]bool, n)
	for q := range msgs {
		out[q] = make([]bool, n)
		forced, err := ParseOverride(msgs[q].Override, q, n)
		for r := range msgs {
			if r == q {
				continue
			}
			out[q][r] = msgs[q].Host != msgs[r].Host
			if err == nil && forced[r] >= 0 {
				out[q][r] = PeerKind(forced[r]) == KindNet
			}
		}
	}
	return out
}

// Mappable reports whether peer r's memory can be mapped into this process.
func (t *Topology) Mappable(r int) bool {
	return t.Kinds[r] != KindNet
}
