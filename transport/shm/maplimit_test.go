package shm

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/luacoll/luacoll/transport"
	"github.com/luacoll/luacoll/transport/inproc"
)

// TestMappingsNearTheLimitAreRefused: windows and buffers that would bring
// the process near the kernel's limit on mappings are refused with an
// error that says so and what helps; freeing gives room again.
func TestMappingsNearTheLimitAreRefused(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	g := inproc.NewGroup(1)
	be := NewHostBackend(fmt.Sprintf("maplimit%d", time.Now().UnixNano()))
	defer be.Close()
	be.MapLimit = mapHeadroom + 3
	topo, err := transport.Discover(ctx, g.Member(0), be.Identity(), be.GPUPeer, "")
	if err != nil {
		t.Fatal(err)
	}
	w1, err := be.Share(ctx, g.Member(0), topo, 64, "")
	if err != nil {
		t.Fatal(err)
	}
	b1, err := be.Alloc(64)
	if err != nil {
		t.Fatal(err)
	}
	w2, err := be.Share(ctx, g.Member(0), topo, 64, "")
	if err != nil {
		t.Fatal(err)
	}
	_, err = be.Share(ctx, g.Member(0), topo, 64, "")
	if err == nil || !strings.Contains(err.Error(), "already hold 3, near the kernel's limit of 1027 per process (vm.max_map_count)") ||
		!strings.Contains(err.Error(), "w:free()") {
		t.Fatalf("4th mapping: %v", err)
	}
	if _, err := be.Alloc(64); err == nil || !strings.Contains(err.Error(), "a buffer of 64 bytes needs 1 more memory mappings") {
		t.Fatalf("buffer at the limit: %v", err)
	}
	if err := b1.Close(); err != nil {
		t.Fatal(err)
	}
	b2, err := be.Alloc(64)
	if err != nil {
		t.Fatalf("after a free: %v", err)
	}
	for _, r := range []*transport.Region{w1, w2, b2} {
		if err := r.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
