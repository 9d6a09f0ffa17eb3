package gpu

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/luacoll/luacoll/transport"
	"github.com/luacoll/luacoll/transport/knobs"
)

func openBoxes(t *testing.T, n int) []*transport.FDBox {
	t.Helper()
	job := fmt.Sprintf("fdt%d", time.Now().UnixNano())
	boxes := make([]*transport.FDBox, n)
	for r := range boxes {
		b, err := transport.OpenFDBox(job, r)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.Close() })
		boxes[r] = b
	}
	return boxes
}

func pipe(t *testing.T) (*os.File, *os.File) {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close(); w.Close() })
	return r, w
}

func TestPrelaunchDefault(t *testing.T) {
	for _, c := range []struct {
		env    string
		shared bool
		want   bool
	}{
		{"", false, true}, {"", true, false}, {"0", false, false}, {"1", true, true}, {"2", true, true},
	} {
		t.Cleanup(func() { knobs.Reload() }) // after t.Setenv's own
		t.Setenv(knobs.Prelaunch.Name, c.env)
		if err := knobs.Reload().Err(); err != nil {
			t.Fatal(err)
		}
		if got := PrelaunchDefault(c.shared); got != c.want {
			t.Errorf("%s=%q, shared %v: %v, want %v", knobs.Prelaunch.Name, c.env, c.shared, got, c.want)
		}
	}
}

// CUDA IPC (and so a symmetric window) cannot reach a network peer: the
// reason names the peer and the path such windows take instead.
func TestNetworkPeersNeedTheProxy(t *testing.T) {
	topo := &transport.Topology{Rank: 0, Kinds: []transport.PeerKind{transport.KindSelf, transport.KindNVL, transport.KindNet}}
	msg := ipcReach(topo)
	if !strings.Contains(msg, "rank 2 is reached over the network") || !strings.Contains(msg, "proxy path") {
		t.Errorf("ipcReach = %q", msg)
	}
	if msg := ipcReach(&transport.Topology{Kinds: []transport.PeerKind{transport.KindSelf, transport.KindNVL}}); msg != "" {
		t.Errorf("ipcReach(nvl only) = %q", msg)
	}
}
