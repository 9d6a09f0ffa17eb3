package transport

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"unsafe"
)

// recStream records what a dispatcher enqueues.
type recStream struct {
	Stream
	ops []string
	rem []RemoteOp
}

func (s *recStream) Copy(dst, src Addr, n uint64) {
	s.ops = append(s.ops, fmt.Sprintf("copy %v<-%v %d", dst, src, n))
}
func (s *recStream) Store64(dst Addr, v uint64) {
	s.ops = append(s.ops, fmt.Sprintf("store %v=%d", dst, v))
}
func (s *recStream) Add64(dst Addr, v uint64) {
	s.ops = append(s.ops, fmt.Sprintf("add %v+=%d", dst, v))
}
func (s *recStream) Remote(op RemoteOp) {
	s.rem = append(s.rem, op)
	s.ops = append(s.ops, fmt.Sprintf("remote %s %s", op.Kind, op.Ref))
}

type fakeKey struct{}

func (fakeKey) Network() Network { return nil }
func (fakeKey) Via() string      { return "fake/loop" }
func (fakeKey) Close() error     { return nil }

func TestPeersRoutes(t *testing.T) {
	topo := &Topology{Rank: 0, Kinds: []PeerKind{KindSelf, KindSHM, KindNet, KindNet}}
	reg := &Region{Peers: []Addr{0x1000, 0x2000, 0, 0}, Keys: []RemoteKey{nil, nil, fakeKey{}, nil}}
	p := NewPeers(topo, reg)
	p.What = "rank 0: window 1"
	if !p.Networked() {
		t.Fatal("a peer with a key: Networked() = false")
	}
	for peer, want := range []bool{true, true, true, false} {
		if got := p.Route(peer).Reachable(); got != want {
			t.Errorf("Reachable(%d) = %v, want %v", peer, got, want)
		}
	}
	if got := p.Via(2); got != "net (fake/loop)" {
		t.Errorf("Via(2) = %q", got)
	}
	if got := p.Via(1); got != "shm" {
		t.Errorf("Via(1) = %q", got)
	}
	if p.Addr(1, 8) != 0x2008 || p.Addr(2, 8) != 0 {
		t.Errorf("Addr: %v %v", p.Addr(1, 8), p.Addr(2, 8))
	}
	s := &recStream{}
	p.Put(s, 1, 16, 0x9000, 64)
	p.Put(s, 2, 16, 0x9000, 64)
	p.Get(s, 0x9000, 2, 32, 8)
	p.Store64(s, 1, 8, 3)
	p.Store64(s, 2, 8, 3)
	p.Add64(s, 0, 8, 1)
	p.Add64(s, 2, 8, 1)
	p.Flush(s)
	want := []string{
		"copy 0x2010<-0x9000 64", "remote put rank 2+16", "remote get rank 2+32",
		"store 0x2008=3", "remote store64 rank 2+8", "add 0x1008+=1", "remote add64 rank 2+8", "remote flush rank 0+0",
	}
	if strings.Join(s.ops, "\n") != strings.Join(want, "\n") {
		t.Fatalf("ops:\n%s\nwant:\n%s", strings.Join(s.ops, "\n"), strings.Join(want, "\n"))
	}
	if op := s.rem[0]; op.Local != 0x9000 || op.N != 64 || op.What != "rank 0: window 1: put to rank 2" {
		t.Errorf("put op = %+v", op)
	}
	if op := s.rem[2]; op.Value != 3 {
		t.Errorf("store op = %+v", op)
	}
}

// A stream without remote operations fails the op at its sync instead of
// dropping it.
func TestPeersWithoutRemoteStream(t *testing.T) {
	topo := &Topology{Rank: 0, Kinds: []PeerKind{KindSelf, KindNet}}
	var word uint64
	self := Addr(uintptr(unsafe.Pointer(&word)))
	p := NewPeers(topo, &Region{Peers: []Addr{self, 0}, Keys: []RemoteKey{nil, fakeKey{}}})
	p.What = "rank 0: window 0"
	s := NewHostStream(NewAbort(), PolicyOversubscribed)
	defer s.Close()
	p.Put(struct{ Stream }{s}, 1, 0, self, 8)
	err := s.Sync(context.Background())
	if !errors.Is(err, errNoRemote) || !strings.Contains(err.Error(), "put to rank 1") {
		t.Fatalf("sync = %v, want %v naming the put", err, errNoRemote)
	}
}

// A timeout with a hint is still a timeout, and says why.
func TestTimeoutHint(t *testing.T) {
	err := fmt.Errorf("wait: %w", &TimeoutHint{Hint: "ranks share a GPU without MPS"})
	if !errors.Is(err, ErrTimeout) {
		t.Error("a hinted timeout is not ErrTimeout")
	}
	if h := HintOf(err); h != "ranks share a GPU without MPS" {
		t.Errorf("hint %q", h)
	}
	if HintOf(ErrTimeout) != "" || HintOf(errors.New("x")) != "" {
		t.Error("a plain error has a hint")
	}
}
