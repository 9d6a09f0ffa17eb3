package engine

import (
	"fmt"

	"github.com/luacoll/luacoll/transport"
	"github.com/luacoll/luacoll/window"
)

// symmetricSupport says whether this rank could map a symmetric window,
// and if not, why; applies is false on a backend without symmetric windows
// (the host's), which ignores the option as it ignores ipc.
func (c *Comm) symmetricSupport() (ok bool, why string, applies bool) {
	sc, isSC := c.Backend.(transport.SymmetricCapable)
	if !isSC {
		return false, c.Backend.Name() + " windows are shared memory, mapped by each process where it likes (symmetric applies to CUDA windows)", false
	}
	ok, why = sc.SymmetricSupport(c.Rank.Topo)
	return ok, why, true
}

// resolveSharing turns the window's ipc and symmetric requests into the
// way its memory is shared, the same on every rank: all holds each rank's
// symmetric support (a byte, 1 when it can, then why not). ipc "auto" is
// symmetric VMM where every rank can map it, else legacy IPC; symmetric
// "on" makes a rank that cannot an error. A status byte 2 is a backend
// without symmetric windows: the request is ignored there.
func resolveSharing(o *window.Options, all [][]byte) error {
	can, why := true, ""
	for r, d := range all {
		if len(d) > 0 && d[0] == 2 {
			o.SymmetricWhy = string(d[1:])
			if o.IPC == "auto" {
				o.IPC = transport.IPCLegacy
			}
			return nil
		}
		if len(d) == 0 || d[0] != 1 {
			can = false
			if why == "" {
				msg := "no reason given"
				if len(d) > 1 {
					msg = string(d[1:])
				}
				why = fmt.Sprintf("rank %d: %s", r, msg)
			}
		}
	}
	legacy := o.IPC == transport.IPCLegacy
	switch {
	case o.Symmetric == "off":
		o.SymmetricWhy = "symmetric = false"
	case legacy:
		if o.Symmetric == "on" {
			return fmt.Errorf("bad argument 'symmetric' (a symmetric window needs VMM memory; ipc is legacy)")
		}
		o.SymmetricWhy = "ipc legacy (CUDA IPC handles map each part where the driver likes)"
	case !can:
		if o.Symmetric == "on" {
			return fmt.Errorf("bad argument 'symmetric' (true, but %s)", why)
		}
		o.SymmetricWhy = why
	default:
		o.IPC = transport.IPCSymmetric
		o.SymmetricWhy = "every rank maps every part in one range (VMM memory over CUDA IPC)"
	}
	if o.IPC == "auto" {
		o.IPC = transport.IPCLegacy
	}
	return nil
}
