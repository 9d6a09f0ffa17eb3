package allgather

import (
	"context"
	"errors"
	"testing"

	"github.com/luacoll/luacoll/engine"
	"github.com/luacoll/luacoll/transport"
	"github.com/luacoll/luacoll/window"
)

// TestAGTag: the signal tag keeps n exactly up to window.MaxBytes and
// distinguishes consecutive execs, also across the exec counter's wrap.
func TestAGTag(t *testing.T) {
	for _, n := range []uint64{0, 1, 1000003, window.MaxBytes} {
		for _, k := range []uint64{1, 2, tagKMask, tagKMask + 1} {
			v := agTag(k, n)
			if v&tagNMask != n || v>>tagNBits != k&tagKMask {
				t.Fatalf("tag(%d, %d) = %#x does not decode", k, n, v)
			}
			if agTag(k+1, n) == v {
				t.Fatalf("tag(%d, %d) equals the next exec's", k, n)
			}
		}
	}
	if agTag(5, 64) == agTag(5, 65) {
		t.Fatal("n is not part of the tag")
	}
}

// TestNewNilWindow: a missing window is an argument error, not a panic.
func TestNewNilWindow(t *testing.T) {
	_, err := New(context.Background(), &engine.Comm{}, nil, "auto", false)
	var ae *window.ArgError
	if !errors.As(err, &ae) || ae.Arg != "window" {
		t.Fatalf("got %v", err)
	}
}

// TestSharedGPUs: two ranks on one host and device share it; the same
// device name on two hosts does not.
func TestSharedGPUs(t *testing.T) {
	id := func(host, dev string) transport.Identity { return transport.Identity{Host: host, Device: dev} }
	for _, c := range []struct {
		ids  []transport.Identity
		want bool
	}{
		{[]transport.Identity{id("a", "g0"), id("a", "g1")}, false},
		{[]transport.Identity{id("a", "g0"), id("b", "g0")}, false},
		{[]transport.Identity{id("a", "g0"), id("a", "g1"), id("a", "g0")}, true},
	} {
		if got := sharedGPUs(&transport.Topology{Idents: c.ids}); got != c.want {
			t.Errorf("%v: %v, want %v", c.ids, got, c.want)
		}
	}
	if sharedGPUs(nil) {
		t.Error("nil topology shares a GPU")
	}
}
