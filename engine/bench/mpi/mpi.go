package mpi

/*
#cgo LDFLAGS: -ldl
#include <dlfcn.h>
#include <stdint.h>
#include <stdlib.h>

typedef void *lc_mpi_handle; // MPI_Comm, MPI_Datatype, MPI_Errhandler in Open MPI

static void *lc_mpi_dlopen(const char *path) { return dlopen(path, RTLD_NOW | RTLD_GLOBAL); }
static void *lc_mpi_dlsym(void *lib, const char *name) { return dlsym(lib, name); }
static const char *lc_mpi_dlerror(void) { return dlerror(); }

static int lc_MPI_Init_thread(void *f, int required, int *provided) {
	return ((int (*)(int *, char ***, int, int *))f)(0, 0, required, provided);
}
static int lc_MPI_Flag(void *f, int *flag) { return ((int (*)(int *))f)(flag); }
static int lc_MPI_Finalize(void *f) { return ((int (*)(void))f)(); }
static int lc_MPI_Comm_int(void *f, void *comm, int *out) { return ((int (*)(void *, int *))f)(comm, out); }
static int lc_MPI_Comm_set_errhandler(void *f, void *comm, void *eh) { return ((int (*)(void *, void *))f)(comm, eh); }
static int lc_MPI_Allgather(void *f, uintptr_t send, int scount, void *stype, uintptr_t recv, int rcount, void *rtype, void *comm) {
	return ((int (*)(const void *, int, void *, void *, int, void *, void *))f)(
		(const void *)send, scount, stype, (void *)recv, rcount, rtype, comm);
}
static int lc_MPI_Barrier(void *f, void *comm) { return ((int (*)(void *))f)(comm); }
static int lc_MPI_String(void *f, char *buf, int *len) { return ((int (*)(char *, int *))f)(buf, len); }
static int lc_MPI_Error_string(void *f, int code, char *buf, int *len) { return ((int (*)(int, char *, int *))f)(code, buf, len); }
*/
import "C"

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"unsafe"
)

// LibraryName is the library Load opens: Open MPI 4 and 5 (Debian's
// libopenmpi3, which openmpi-bin installs).
const LibraryName = "libmpi.so.40"

// InPlace is MPI_IN_PLACE as a send address in Open MPI.
const InPlace = uintptr(1)

// maxString is MPI_MAX_LIBRARY_VERSION_STRING and MPI_MAX_ERROR_STRING in
// Open MPI (256), with room to spare.
const maxString = 1024

// Library is an opened libmpi.
type Library struct {
	lib                                          unsafe.Pointer
	init, initialized, finalized, finalize       unsafe.Pointer
	commRank, commSize, setErrhandler, allgather unsafe.Pointer
	barrier, libVersion, errString               unsafe.Pointer
	world, byteType, errorsReturn                unsafe.Pointer
	inited                                       bool
}

// ErrNotFound is wrapped by Load's error when the library is missing.
var ErrNotFound = errors.New("libmpi (Open MPI) not found")

// Load opens libmpi.so.40 and resolves what the baseline needs. A missing
// library or symbol is an error naming it; nothing panics.
func Load() (*Library, error) {
	cpath := C.CString(LibraryName)
	defer C.free(unsafe.Pointer(cpath))
	lib := C.lc_mpi_dlopen(cpath)
	if lib == nil {
		return nil, fmt.Errorf("%w (%s: %s): install the Debian package openmpi-bin", ErrNotFound, LibraryName, dlerror())
	}
	l := &Library{lib: lib}
	for _, s := range []struct {
		name string
		dst  *unsafe.Pointer
	}{
		{"MPI_Init_thread", &l.init}, {"MPI_Initialized", &l.initialized}, {"MPI_Finalized", &l.finalized},
		{"MPI_Finalize", &l.finalize}, {"MPI_Comm_rank", &l.commRank}, {"MPI_Comm_size", &l.commSize},
		{"MPI_Comm_set_errhandler", &l.setErrhandler}, {"MPI_Allgather", &l.allgather},
		{"MPI_Barrier", &l.barrier}, {"MPI_Get_library_version", &l.libVersion},
		{"MPI_Error_string", &l.errString},
		// Open MPI's predefined handles are these objects' addresses.
		{"ompi_mpi_comm_world", &l.world}, {"ompi_mpi_byte", &l.byteType},
		{"ompi_mpi_errors_return", &l.errorsReturn},
	} {
		cn := C.CString(s.name)
		*s.dst = C.lc_mpi_dlsym(lib, cn)
		C.free(unsafe.Pointer(cn))
		if *s.dst == nil {
			// Not closed: an MPI library may not be unloaded safely.
			return nil, fmt.Errorf("%s has no %s (is it Open MPI?)", LibraryName, s.name)
		}
	}
	return l, nil
}

func dlerror() string {
	if s := C.lc_mpi_dlerror(); s != nil {
		return C.GoString(s)
	}
	return "unknown dlopen error"
}

// Version is MPI_Get_library_version's first line, e.g. "Open MPI v4.1.4, ...".
func (l *Library) Version() string {
	buf := make([]byte, maxString)
	var n C.int
	if C.lc_MPI_String(l.libVersion, (*C.char)(unsafe.Pointer(&buf[0])), &n) != 0 || n <= 0 {
		return "Open MPI (version unknown)"
	}
	s := string(buf[:min(int(n), len(buf))])
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	return strings.TrimRight(s, "\x00 ")
}

func (l *Library) fail(call string, code C.int) error {
	buf := make([]byte, maxString)
	var n C.int
	msg := fmt.Sprintf("error %d", int(code))
	if C.lc_MPI_Error_string(l.errString, code, (*C.char)(unsafe.Pointer(&buf[0])), &n) == 0 && n > 0 {
		msg = string(buf[:min(int(n), len(buf))])
	}
	return fmt.Errorf("%s: %s", call, msg)
}

// MPI thread support levels (MPI_THREAD_* in Open MPI).
const (
	threadSerialized = 2
)

// Init calls MPI_Init_thread for MPI_THREAD_SERIALIZED and makes errors on
// MPI_COMM_WORLD return instead of aborting. Open MPI's own handlers of
// SIGSEGV, SIGBUS, SIGFPE and SIGABRT are left out (OMPI_MCA_opal_signal,
// unless set): the Go runtime handles those signals. Calls must not
// overlap; they may come from any thread.
func (l *Library) Init() error {
	var flag C.int
	if C.lc_MPI_Flag(l.initialized, &flag) == 0 && flag != 0 {
		return errors.New("MPI_Init: MPI is already initialized in this process")
	}
	if _, ok := os.LookupEnv("OMPI_MCA_opal_signal"); !ok {
		_ = os.Setenv("OMPI_MCA_opal_signal", "")
	}
	var provided C.int
	if r := C.lc_MPI_Init_thread(l.init, threadSerialized, &provided); r != 0 {
		return fmt.Errorf("MPI_Init_thread: error %d", int(r))
	}
	l.inited = true
	if provided < threadSerialized {
		return fmt.Errorf("MPI_Init_thread: MPI provides thread level %d, below MPI_THREAD_SERIALIZED", int(provided))
	}
	if r := C.lc_MPI_Comm_set_errhandler(l.setErrhandler, l.world, l.errorsReturn); r != 0 {
		return l.fail("MPI_Comm_set_errhandler", r)
	}
	return nil
}

// Rank and Size are MPI_Comm_rank and MPI_Comm_size of MPI_COMM_WORLD.
func (l *Library) Rank() (int, error) {
	var v C.int
	if r := C.lc_MPI_Comm_int(l.commRank, l.world, &v); r != 0 {
		return 0, l.fail("MPI_Comm_rank", r)
	}
	return int(v), nil
}

// Size is MPI_Comm_size of MPI_COMM_WORLD.
func (l *Library) Size() (int, error) {
	var v C.int
	if r := C.lc_MPI_Comm_int(l.commSize, l.world, &v); r != 0 {
		return 0, l.fail("MPI_Comm_size", r)
	}
	return int(v), nil
}

// MaxCount is the largest count MPI's int arguments take.
const MaxCount = 1<<31 - 1

// Allgather is MPI_Allgather of n bytes (MPI_BYTE) from send (or InPlace)
// into recv on MPI_COMM_WORLD. Both are addresses of memory outside the Go
// heap (mapped memory).
func (l *Library) Allgather(send, recv uintptr, n uint64) error {
	if n > MaxCount {
		return fmt.Errorf("MPI_Allgather: %d bytes per rank do not fit MPI's int count", n)
	}
	r := C.lc_MPI_Allgather(l.allgather, C.uintptr_t(send), C.int(n), l.byteType, C.uintptr_t(recv), C.int(n), l.byteType, l.world)
	if r != 0 {
		return l.fail("MPI_Allgather", r)
	}
	return nil
}

// Barrier is MPI_Barrier on MPI_COMM_WORLD.
func (l *Library) Barrier() error {
	if r := C.lc_MPI_Barrier(l.barrier, l.world); r != 0 {
		return l.fail("MPI_Barrier", r)
	}
	return nil
}

// Finalize calls MPI_Finalize once Init succeeded (MPI cannot be
// initialized again in this process).
func (l *Library) Finalize() error {
	if !l.inited {
		return nil
	}
	var flag C.int
	if C.lc_MPI_Flag(l.finalized, &flag) == 0 && flag != 0 {
		return nil
	}
	if r := C.lc_MPI_Finalize(l.finalize); r != 0 {
		return l.fail("MPI_Finalize", r)
	}
	return nil
}
