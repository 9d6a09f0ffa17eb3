package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/luacoll/luacoll/cuda"
	"github.com/luacoll/luacoll/kernels"
)

// info says, per compute capability of the GPUs, whether this build's
// kernels are in the cache or the first CUDA run will compile them: two
// GPUs of one capability make one line, and a valid cache file turns
// "not compiled yet" into "compiled".
func TestDescribeKernels(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	devs := []cuda.DeviceInfo{{CCMajor: 9, CCMinor: 0}, {CCMajor: 9, CCMinor: 0}, {CCMajor: 8, CCMinor: 0}}
	got := describeKernels(devs)
	if len(got) != 2 || got[0].Arch != "sm_90" || got[1].Arch != "sm_80" || got[0].Cached || got[1].Cached {
		t.Fatalf("empty cache: %+v", got)
	}
	if s := got[0].String(); !strings.Contains(s, "not compiled yet for this build") || !strings.Contains(s, got[0].Path) {
		t.Fatalf("empty cache: %q", s)
	}
	// Any complete ELF file passes for a CUBIN: this test binary is one.
	self, err := os.Executable()
	if err != nil {
		t.Skip(err)
	}
	b, err := os.ReadFile(self)
	if err != nil {
		t.Skip(err)
	}
	dir, err := kernels.DefaultCacheDir()
	if err != nil {
		t.Fatal(err)
	}
	p := kernels.CachePath(dir, kernels.Arch{Major: 9, Minor: 0})
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	parts := make([][]byte, kernels.ProgramParts)
	for i := range parts {
		parts[i] = b
	}
	if err := os.WriteFile(p, kernels.CacheFile(parts), 0o644); err != nil {
		t.Fatal(err)
	}
	got = describeKernels(devs)
	if !got[0].Cached || got[1].Cached || got[0].Path != p {
		t.Fatalf("sm_90 cached at %s: %+v", p, got)
	}
	if s := got[0].String(); !strings.Contains(s, "kernels for sm_90: compiled for this build, in "+p) {
		t.Fatalf("cached: %q", s)
	}
	if describeKernels(nil) == nil {
		t.Fatal("no GPUs: want an empty list (JSON []), not null")
	}
}
