package cuda

/*
#include "lc_cuda.h"

// NCCL types, written by hand to match nccl.h (NCCL 2.x ABI).
typedef struct { char internal[128]; } lc_nccl_unique_id;  // ncclUniqueId
typedef void *lc_nccl_comm;                                  // ncclComm_t

static inline int lc_ncclGetUniqueId(void *f, lc_nccl_unique_id *id) {
	return ((int (*)(lc_nccl_unique_id *))f)(id);
}
typedef struct { int r; lc_nccl_comm c; } lc_nccl_cres;
static inline lc_nccl_cres lc_ncclCommInitRank(void *f, int nranks, const lc_nccl_unique_id *id, int rank) {
	lc_nccl_cres o;
	o.c = 0;
	o.r = ((int (*)(lc_nccl_comm *, int, lc_nccl_unique_id, int))f)(&o.c, nranks, *id, rank);
	return o;
}
static inline int lc_ncclAllGather(void *f, lc_dptr send, lc_dptr recv, size_t count, int dtype, void *comm, void *stream) {
	return ((int (*)(const void *, void *, size_t, int, lc_nccl_comm, void *))f)(
		(const void *)(uintptr_t)send, (void *)(uintptr_t)recv, count, dtype, comm, stream);
}
static inline int lc_ncclCommCall(void *f, void *comm) { return ((int (*)(lc_nccl_comm))f)(comm); }
typedef struct { int r; void *p; } lc_nccl_pres;
static inline lc_nccl_pres lc_ncclMemAlloc(void *f, size_t size) {
	lc_nccl_pres o;
	o.p = 0;
	o.r = ((int (*)(void **, size_t))f)(&o.p, size);
	return o;
}
static inline int lc_ncclMemFree(void *f, lc_dptr p) { return ((int (*)(void *))f)((void *)(uintptr_t)p); }
static inline lc_nccl_pres lc_ncclCommWindowRegister(void *f, void *comm, lc_dptr buf, size_t size, int flags) {
	lc_nccl_pres o;
	o.p = 0;
	o.r = ((int (*)(lc_nccl_comm, void *, size_t, void **, int))f)(comm, (void *)(uintptr_t)buf, size, &o.p, flags);
	return o;
}
static inline int lc_ncclCommWindowDeregister(void *f, void *comm, void *win) {
	return ((int (*)(lc_nccl_comm, void *))f)(comm, win);
}
static inline const char *lc_ncclGetErrorString(void *f, int r) { return ((const char *(*)(int))f)(r); }
static inline const char *lc_ncclGetLastError(void *f, void *comm) { return ((const char *(*)(lc_nccl_comm))f)(comm); }
*/
import "C"

import (
	"fmt"
	"unsafe"
)

// NCCLUniqueIDBytes is the size of an ncclUniqueId.
const NCCLUniqueIDBytes = 128

// NCCLUniqueID is an ncclUniqueId: made by one rank, sent to all others
// over the bootstrap, then passed to NCCL.InitRank on every rank.
type NCCLUniqueID [NCCLUniqueIDBytes]byte

// NCCL data types (ncclDataType_t in nccl.h).
const (
	NCCLInt8  = 0 // also ncclChar
	NCCLUint8 = 1
)

// NCCL is libnccl.so.2 opened with dlopen (RTLD_NOW | RTLD_LOCAL). It
// binds what luacoll's baseline needs: version, unique id, communicator
// setup and teardown, and all-gather. It never enables NVLink SHARP:
// callers set NCCL_NVLS_ENABLE=0 in the environment before InitRank.
type NCCL struct {
	lib                                            unsafe.Pointer
	getVersion, getUniqueID, initRank, allGather   unsafe.Pointer
	finalize, destroy, errString, lastError, abort unsafe.Pointer
	// Symmetric windows (NCCL 2.27 and later; nil where the library
	// lacks them).
	memAlloc, memFree, winRegister, winDeregister unsafe.Pointer
	version                                       int
}

// NCCLComm is an ncclComm_t.
type NCCLComm struct {
	n *NCCL
	h unsafe.Pointer
}

// LoadNCCL opens libnccl.so.2. A missing library or entry point is an
// error naming it; nothing panics.
func LoadNCCL() (*NCCL, error) {
	cpath := C.CString(NCCLLibrary)
	defer C.free(unsafe.Pointer(cpath))
	lib := C.lc_dlopen(cpath)
	if lib == nil {
		return nil, fmt.Errorf("NCCL not found (%s): %s", NCCLLibrary, dlerror())
	}
	n := &NCCL{lib: lib}
	for _, s := range []struct {
		name     string
		dst      *unsafe.Pointer
		optional bool
	}{
		{"ncclGetVersion", &n.getVersion, false},
		{"ncclGetUniqueId", &n.getUniqueID, false},
		{"ncclCommInitRank", &n.initRank, false},
		{"ncclAllGather", &n.allGather, false},
		{"ncclCommDestroy", &n.destroy, false},
		{"ncclGetErrorString", &n.errString, false},
		{"ncclCommFinalize", &n.finalize, true},
		{"ncclGetLastError", &n.lastError, true},
		{"ncclCommAbort", &n.abort, true},
		{"ncclMemAlloc", &n.memAlloc, true},
		{"ncclMemFree", &n.memFree, true},
		{"ncclCommWindowRegister", &n.winRegister, true},
		{"ncclCommWindowDeregister", &n.winDeregister, true},
	} {
		cname := C.CString(s.name)
		*s.dst = C.lc_dlsym(lib, cname)
		C.free(unsafe.Pointer(cname))
		if *s.dst == nil && !s.optional {
			C.lc_dlclose(lib)
			return nil, fmt.Errorf("NCCL (%s) lacks %s", NCCLLibrary, s.name)
		}
	}
	var v C.int
	if r := C.lc_ncclGetVersion(n.getVersion, &v); r != 0 {
		C.lc_dlclose(lib)
		return nil, fmt.Errorf("ncclGetVersion: NCCL error %d", int(r))
	}
	n.version = int(v)
	return n, nil
}

// Version returns the library's version, e.g. "2.28.3".
func (n *NCCL) Version() string { return ncclVersionString(n.version) }

// Close closes the library; communicators must be destroyed first.
func (n *NCCL) Close() {
	if n.lib != nil {
		C.lc_dlclose(n.lib)
		n.lib = nil
	}
}

func (n *NCCL) fail(r C.int, call string, comm unsafe.Pointer) error {
	msg := C.GoString(C.lc_ncclGetErrorString(n.errString, r))
	if comm != nil && n.lastError != nil {
		if last := C.GoString(C.lc_ncclGetLastError(n.lastError, comm)); last != "" {
			msg += " (" + last + ")"
		}
	}
	return fmt.Errorf("%s: NCCL error %d: %s", call, int(r), msg)
}

// UniqueID makes a new unique id (ncclGetUniqueId); one rank calls it.
func (n *NCCL) UniqueID() (NCCLUniqueID, error) {
	var id C.lc_nccl_unique_id
	if r := C.lc_ncclGetUniqueId(n.getUniqueID, &id); r != 0 {
		return NCCLUniqueID{}, n.fail(r, "ncclGetUniqueId", nil)
	}
	var out NCCLUniqueID
	copy(out[:], C.GoBytes(unsafe.Pointer(&id), NCCLUniqueIDBytes))
	return out, nil
}

// InitRank joins communicator id as rank of nranks (ncclCommInitRank). It
// blocks until every rank joined; the CUDA context of the rank's device
// must be current on the calling thread.
func (n *NCCL) InitRank(id NCCLUniqueID, nranks, rank int) (*NCCLComm, error) {
	var cid C.lc_nccl_unique_id
	C.memcpy(unsafe.Pointer(&cid), unsafe.Pointer(&id[0]), NCCLUniqueIDBytes)
	o := C.lc_ncclCommInitRank(n.initRank, C.int(nranks), &cid, C.int(rank))
	if o.r != 0 {
		return nil, n.fail(o.r, fmt.Sprintf("ncclCommInitRank(rank %d of %d)", rank, nranks), nil)
	}
	return &NCCLComm{n: n, h: unsafe.Pointer(o.c)}, nil
}

// AllGather enqueues ncclAllGather of count elements of dtype per rank
// from send into recv (rank-major) on s.
func (c *NCCLComm) AllGather(send, recv DevicePtr, count uint64, dtype int, s *Stream) error {
	if r := C.lc_ncclAllGather(c.n.allGather, C.lc_dptr(send), C.lc_dptr(recv), C.size_t(count), C.int(dtype), c.h, s.handle()); r != 0 {
		return c.n.fail(r, fmt.Sprintf("ncclAllGather(count %d)", count), c.h)
	}
	return nil
}

// NCCLWinCollSymmetric is NCCL_WIN_COLL_SYMMETRIC: a window every rank
// registers with the same size, on which NCCL runs its symmetric kernels.
const NCCLWinCollSymmetric = 1

// HasWindows reports whether the library registers windows
// (ncclMemAlloc, ncclCommWindowRegister: NCCL 2.27 and later).
func (n *NCCL) HasWindows() bool {
	return n.memAlloc != nil && n.memFree != nil && n.winRegister != nil && n.winDeregister != nil
}

// MemAlloc allocates size bytes of device memory that NCCL can register
// as a window (ncclMemAlloc); the CUDA context must be current.
func (n *NCCL) MemAlloc(size uint64) (DevicePtr, error) {
	if !n.HasWindows() {
		return 0, fmt.Errorf("NCCL %s has no ncclMemAlloc", n.Version())
	}
	o := C.lc_ncclMemAlloc(n.memAlloc, C.size_t(size))
	if o.r != 0 {
		return 0, n.fail(o.r, fmt.Sprintf("ncclMemAlloc(%d)", size), nil)
	}
	return DevicePtr(uintptr(o.p)), nil
}

// MemFree releases memory of MemAlloc (ncclMemFree).
func (n *NCCL) MemFree(p DevicePtr) error {
	if p == 0 || n.memFree == nil {
		return nil
	}
	if r := C.lc_ncclMemFree(n.memFree, C.lc_dptr(p)); r != 0 {
		return n.fail(r, "ncclMemFree", nil)
	}
	return nil
}

// NCCLWindow is a registered window (ncclWindow_t).
type NCCLWindow struct{ h unsafe.Pointer }

// WindowRegister registers size bytes at buf as a window of the
// communicator with flags (e.g. NCCLWinCollSymmetric); collective: every
// rank calls it, with the same size for a symmetric window.
func (c *NCCLComm) WindowRegister(buf DevicePtr, size uint64, flags int) (NCCLWindow, error) {
	if !c.n.HasWindows() {
		return NCCLWindow{}, fmt.Errorf("NCCL %s has no ncclCommWindowRegister", c.n.Version())
	}
	o := C.lc_ncclCommWindowRegister(c.n.winRegister, c.h, C.lc_dptr(buf), C.size_t(size), C.int(flags))
	if o.r != 0 {
		return NCCLWindow{}, c.n.fail(o.r, fmt.Sprintf("ncclCommWindowRegister(%d bytes)", size), c.h)
	}
	return NCCLWindow{h: o.p}, nil
}

// WindowDeregister releases a window of WindowRegister (collective).
func (c *NCCLComm) WindowDeregister(w NCCLWindow) error {
	if w.h == nil {
		return nil
	}
	if r := C.lc_ncclCommWindowDeregister(c.n.winDeregister, c.h, w.h); r != 0 {
		return c.n.fail(r, "ncclCommWindowDeregister", c.h)
	}
	return nil
}

// Destroy finalizes (where the library has ncclCommFinalize) and destroys
// the communicator.
func (c *NCCLComm) Destroy() error {
	if c.h == nil {
		return nil
	}
	h := c.h
	c.h = nil
	if c.n.finalize != nil {
		if r := C.lc_ncclCommCall(c.n.finalize, h); r != 0 {
			_ = C.lc_ncclCommCall(c.n.destroy, h)
			return c.n.fail(r, "ncclCommFinalize", nil)
		}
	}
	if r := C.lc_ncclCommCall(c.n.destroy, h); r != 0 {
		return c.n.fail(r, "ncclCommDestroy", nil)
	}
	return nil
}
