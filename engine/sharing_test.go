package engine

import (
	"strings"
	"testing"

	"github.com/luacoll/luacoll/transport"
	"github.com/luacoll/luacoll/window"
)

// resolveSharing turns ipc and symmetric requests into one way of sharing,
// the same on every rank, with the reason.
func TestResolveSharing(t *testing.T) {
	yes := []byte{1}
	no := func(why string) []byte { return append([]byte{0}, why...) }
	host := append([]byte{2}, "host windows are shared memory"...)
	for _, c := range []struct {
		ipc, sym string
		all      [][]byte
		wantIPC  string
		whyHas   string
		errHas   string
	}{
		{"auto", "auto", [][]byte{yes, yes}, transport.IPCSymmetric, "one range", ""},
		{"vmm", "auto", [][]byte{yes, yes}, transport.IPCSymmetric, "one range", ""},
		{"auto", "on", [][]byte{yes, yes, yes}, transport.IPCSymmetric, "one range", ""},
		{"auto", "auto", [][]byte{yes, no("no VMM")}, transport.IPCLegacy, "rank 1: no VMM", ""},
		{"vmm", "auto", [][]byte{no("no VMM"), yes}, transport.IPCVMM, "rank 0: no VMM", ""},
		{"auto", "off", [][]byte{yes, yes}, transport.IPCLegacy, "symmetric = false", ""},
		{"vmm", "off", [][]byte{yes, yes}, transport.IPCVMM, "symmetric = false", ""},
		{"legacy", "auto", [][]byte{yes, yes}, transport.IPCLegacy, "ipc legacy", ""},
		{"legacy", "on", [][]byte{yes, yes}, "", "", "bad argument 'symmetric' (a symmetric window needs VMM memory; ipc is legacy)"},
		{"auto", "on", [][]byte{yes, no("rank 0 is reachable only by transport shm")}, "", "", "bad argument 'symmetric' (true, but rank 1: rank 0 is reachable only by transport shm)"},
		{"auto", "on", [][]byte{host, host}, transport.IPCLegacy, "host windows", ""},
	} {
		o := window.Options{IPC: c.ipc, Symmetric: c.sym}
		err := resolveSharing(&o, c.all)
		if c.errHas != "" {
			if err == nil || !strings.Contains(err.Error(), c.errHas) {
				t.Errorf("ipc %s, symmetric %s: error %v, want %q", c.ipc, c.sym, err, c.errHas)
			}
			continue
		}
		if err != nil || o.IPC != c.wantIPC || !strings.Contains(o.SymmetricWhy, c.whyHas) {
			t.Errorf("ipc %s, symmetric %s: ipc %q why %q err %v; want %q, why with %q", c.ipc, c.sym, o.IPC, o.SymmetricWhy, err, c.wantIPC, c.whyHas)
		}
	}
}
