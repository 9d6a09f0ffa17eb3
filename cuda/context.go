package cuda

/*
#include "lc_cuda.h"
*/
import "C"

import (
	"fmt"
	"unsafe"
)

// Context is a retained primary context of one device.
//
// The driver's current context belongs to the OS thread: callers must
// runtime.LockOSThread and call SetCurrent once, or call SetCurrent before
// every batch of driver calls made from a goroutine that may migrate.
type Context struct {
	d   *Driver
	h   unsafe.Pointer
	dev Device
}

// PrimaryCtxRetain retains the primary context of dev
// (cuDevicePrimaryCtxRetain). Release it with Release. It does not make the
// context current.
func (d *Driver) PrimaryCtxRetain(dev Device) (*Context, error) {
	o := C.lc_cuDevicePrimaryCtxRetain(d.fn[symDevicePrimaryCtxRetain], C.lc_dev(dev))
	if o.r != 0 {
		return nil, d.fail(o.r, fmt.Sprintf("cuDevicePrimaryCtxRetain(%d)", dev))
	}
	return &Context{d: d, h: o.h, dev: dev}, nil
}

// LoadPrimary loads the driver and retains the primary context of device
// ordinal (not made current): what a tool or test that wants one GPU needs.
// It fails when there is no driver or no such device.
func LoadPrimary(ordinal int) (*Driver, Device, *Context, error) {
	d, err := Load()
	if err != nil {
		return nil, 0, nil, err
	}
	n, err := d.DeviceCount()
	if err != nil {
		return nil, 0, nil, err
	}
	if ordinal < 0 || ordinal >= n {
		return nil, 0, nil, fmt.Errorf("no CUDA device %d (%d devices)", ordinal, n)
	}
	dev, err := d.DeviceGet(ordinal)
	if err != nil {
		return nil, 0, nil, err
	}
	ctx, err := d.PrimaryCtxRetain(dev)
	if err != nil {
		return nil, 0, nil, err
	}
	return d, dev, ctx, nil
}

// Driver returns the driver c belongs to.
func (c *Context) Driver() *Driver { return c.d }

// Device returns the device of c.
func (c *Context) Device() Device { return c.dev }

// Release drops the reference taken by PrimaryCtxRetain.
func (c *Context) Release() error {
	if r := C.lc_cuDevicePrimaryCtxRelease(c.d.fn[symDevicePrimaryCtxRelease], C.lc_dev(c.dev)); r != 0 {
		return c.d.fail(r, fmt.Sprintf("cuDevicePrimaryCtxRelease(%d)", c.dev))
	}
	return nil
}

// SetCurrent binds c to the calling OS thread (cuCtxSetCurrent). See the
// type documentation for the runtime.LockOSThread requirement.
func (c *Context) SetCurrent() error {
	if r := C.lc_cuCtxSetCurrent(c.d.fn[symCtxSetCurrent], c.h); r != 0 {
		return c.d.fail(r, fmt.Sprintf("cuCtxSetCurrent(device %d)", c.dev))
	}
	return nil
}

// Synchronize makes c current on the calling thread and waits for all of
// its work (cuCtxSynchronize).
func (c *Context) Synchronize() error {
	if err := c.SetCurrent(); err != nil {
		return err
	}
	if r := C.lc_cuCtxSynchronize(c.d.fn[symCtxSynchronize]); r != 0 {
		return c.d.fail(r, fmt.Sprintf("cuCtxSynchronize(device %d)", c.dev))
	}
	return nil
}

// EnablePeerAccess lets kernels and copies of c access memory of peer
// (cuCtxEnablePeerAccess). It makes c current on the calling thread. Access
// that is already enabled is not an error.
func (c *Context) EnablePeerAccess(peer *Context) error {
	if err := c.SetCurrent(); err != nil {
		return err
	}
	r := C.lc_cuCtxEnablePeerAccess(c.d.fn[symCtxEnablePeerAccess], peer.h, 0)
	if r != 0 && r != ErrorPeerAccessAlreadyEnabled {
		return c.d.fail(r, fmt.Sprintf("cuCtxEnablePeerAccess(device %d -> device %d)", c.dev, peer.dev))
	}
	return nil
}

// MemGetInfo returns the free and total memory of the current context's
// device (cuMemGetInfo).
func (d *Driver) MemGetInfo() (free, total uint64, err error) {
	var f, t C.size_t
	if r := C.lc_cuMemGetInfo(d.fn[symMemGetInfo], &f, &t); r != 0 {
		return 0, 0, d.fail(r, "cuMemGetInfo")
	}
	return uint64(f), uint64(t), nil
}
