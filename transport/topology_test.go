package transport

import (
	"context"
	"strings"
	"testing"
)

func TestParseOverride(t *testing.T) {
	got, err := ParseOverride("net", 1, 3)
	if err != nil || got[0] != int(KindNet) || got[1] != -1 || got[2] != int(KindNet) {
		t.Fatalf("net: %v %v", got, err)
	}
	got, err = ParseOverride(" 2=shm, 0=net ", 1, 3)
	if err != nil || got[0] != int(KindNet) || got[2] != int(KindSHM) {
		t.Fatalf("list: %v %v", got, err)
	}
	for _, bad := range []string{"5=net", "x=net", "1=warp", "self", "=net"} {
		if _, err := ParseOverride(bad, 0, 3); err == nil || !strings.Contains(err.Error(), OverrideEnv) {
			t.Errorf("%q: want an error naming %s, got %v", bad, OverrideEnv, err)
		}
	}
}

func FuzzParseOverride(f *testing.F) {
	for _, s := range []string{"", "net", "1=shm,2=net", "*=nvl", "3=", ",,"} {
		f.Add(s, 1, 4)
	}
	f.Fuzz(func(t *testing.T, s string, rank, size int) {
		if size <= 0 || size > 64 || rank < 0 || rank >= size {
			return
		}
		out, err := ParseOverride(s, rank, size)
		if err != nil {
			return
		}
		if len(out) != size || out[rank] != -1 {
			t.Fatalf("%q: %v", s, out)
		}
		for _, k := range out {
			if k < -1 || k > int(KindNet) || k == int(KindSelf) {
				t.Fatalf("%q: bad kind %d", s, k)
			}
		}
	})
}

type soloEx struct{}

func (soloEx) Rank() int { return 0 }
func (soloEx) Size() int { return 1 }
func (soloEx) AllGather(_ context.Context, d []byte) ([][]byte, error) {
	return [][]byte{d}, nil
}
func (soloEx) Barrier(context.Context) error { return nil }

func TestDiscoverSelf(t *testing.T) {
	topo, err := Discover(context.Background(), soloEx{}, LocalIdentity("host"), nil, "")
	if err != nil || topo.Kinds[0] != KindSelf {
		t.Fatalf("%v %v", topo, err)
	}
}

func TestChecksumIsOrderSensitiveAndLengthAware(t *testing.T) {
	a := []byte("abcdefgh12345678")
	b := []byte("12345678abcdefgh")
	if Checksum(a) == Checksum(b) {
		t.Fatal("swapped words give the same checksum")
	}
	if Checksum(a[:15]) == Checksum(append(a[:15:15], 0)) {
		t.Fatal("a trailing zero byte is not seen")
	}
	buf := make([]byte, 10)
	FillIota(buf, 7)
	if buf[0] != 7 || buf[4] != 8 || buf[8] != 9 {
		t.Fatalf("iota: %v", buf)
	}
}

func TestParseCmp(t *testing.T) {
	for s, want := range map[string]Cmp{"==": CmpEq, "eq": CmpEq, "~=": CmpNe, "!=": CmpNe, "lt": CmpLt, "<=": CmpLe, "gt": CmpGt, ">=": CmpGe} {
		if c, err := ParseCmp(s); err != nil || c != want {
			t.Errorf("%q: %v %v", s, c, err)
		}
	}
	if _, err := ParseCmp("=>"); err == nil {
		t.Error("=> accepted")
	}
	if !CmpLt.Holds(1, 2) || CmpLt.Holds(2, 2) || !CmpGe.Holds(^uint64(0), 5) {
		t.Error("Holds is wrong")
	}
}

// A region of host memory a GPU maps reaches the GPU peers of its host
// through shared memory; network peers, and the topology it came from,
// stay as they were.
func TestHostSharedTopology(t *testing.T) {
	topo := &Topology{Rank: 1, Kinds: []PeerKind{KindNVL, KindSelf, KindNet, KindSHM},
		Net: [][]bool{{false, false, true, false}, {false, false, true, false}, {true, true, false, true}, {false, false, true, false}}}
	h := topo.HostShared()
	want := []PeerKind{KindSHM, KindSelf, KindNet, KindSHM}
	for r, k := range want {
		if h.Kinds[r] != k {
			t.Errorf("rank %d: %v, want %v", r, h.Kinds[r], k)
		}
	}
	if topo.Kinds[0] != KindNVL {
		t.Errorf("the original changed: rank 0 is %v", topo.Kinds[0])
	}
	if !h.AnyNet() || !h.ReachedByNet(2) || h.ReachedByNet(1) != topo.ReachedByNet(1) {
		t.Error("the network matrix changed")
	}
}
