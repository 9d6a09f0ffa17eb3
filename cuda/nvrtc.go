package cuda

/*
#include "lc_cuda.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"unsafe"
)

// ErrNoNVRTC is wrapped by LoadNVRTC when no runtime compiler library is
// found.
var ErrNoNVRTC = errors.New("NVRTC not available")

// NVRTCError is a failed NVRTC call; Log holds the compiler output for
// nvrtcCompileProgram failures.
type NVRTCError struct {
	Call string
	Code int
	Msg  string
	Log  string
}

// Error formats the error as "call: message" followed by the compile log.
func (e *NVRTCError) Error() string {
	s := e.Call + ": " + e.Msg
	if e.Log != "" {
		s += "\n" + strings.TrimRight(e.Log, "\n")
	}
	return s
}

// NVRTC is a loaded CUDA runtime compiler library.
type NVRTC struct {
	lib          unsafe.Pointer
	path         string
	major, minor int

	version, errorString, create, compile, logSize, getLog, cubinSize, getCubin, destroy unsafe.Pointer
}

// nvrtcSonames are tried in order, newest first.
var nvrtcSonames = []string{"libnvrtc.so.13", "libnvrtc.so.12"}

// nvrtcCandidates lists what LoadNVRTC tries: the sonames through the
// dynamic loader, then the toolkit directory ($CUDA_HOME, else
// /usr/local/cuda).
func nvrtcCandidates() []string {
	out := append([]string(nil), nvrtcSonames...)
	home := os.Getenv("CUDA_HOME")
	if home == "" {
		home = "/usr/local/cuda"
	}
	lib := filepath.Join(home, "lib64")
	for _, s := range nvrtcSonames {
		out = append(out, filepath.Join(lib, s))
	}
	return append(out, filepath.Join(lib, "libnvrtc.so"))
}

// LoadNVRTC opens libnvrtc.so.13, else libnvrtc.so.12, else the copy in
// $CUDA_HOME/lib64 (default /usr/local/cuda/lib64).
func LoadNVRTC() (*NVRTC, error) {
	tried := nvrtcCandidates()
	var lib unsafe.Pointer
	var path string
	for _, p := range tried {
		cp := C.CString(p)
		lib = C.lc_dlopen(cp)
		C.free(unsafe.Pointer(cp))
		if lib != nil {
			path = p
			break
		}
	}
	if lib == nil {
		return nil, fmt.Errorf("NVRTC not found (tried %s): install the CUDA runtime compiler: %w", strings.Join(tried, ", "), ErrNoNVRTC)
	}
	n := &NVRTC{lib: lib, path: path}
	for _, s := range []struct {
		dst  *unsafe.Pointer
		name string
	}{
		{&n.version, "nvrtcVersion"},
		{&n.errorString, "nvrtcGetErrorString"},
		{&n.create, "nvrtcCreateProgram"},
		{&n.compile, "nvrtcCompileProgram"},
		{&n.logSize, "nvrtcGetProgramLogSize"},
		{&n.getLog, "nvrtcGetProgramLog"},
		{&n.cubinSize, "nvrtcGetCUBINSize"},
		{&n.getCubin, "nvrtcGetCUBIN"},
		{&n.destroy, "nvrtcDestroyProgram"},
	} {
		cname := C.CString(s.name)
		*s.dst = C.lc_dlsym(lib, cname)
		C.free(unsafe.Pointer(cname))
		if *s.dst == nil {
			C.lc_dlclose(lib)
			return nil, fmt.Errorf("%s lacks %s: %w", path, s.name, ErrNoNVRTC)
		}
	}
	var maj, min C.int
	if r := C.lc_nvrtcVersion(n.version, &maj, &min); r != 0 {
		C.lc_dlclose(lib)
		return nil, n.fail(r, "nvrtcVersion", "")
	}
	n.major, n.minor = int(maj), int(min)
	return n, nil
}

// Version returns the NVRTC version, e.g. 13, 0.
func (n *NVRTC) Version() (major, minor int) { return n.major, n.minor }

// Path returns the library that was opened.
func (n *NVRTC) Path() string { return n.path }

// Close unloads the library.
func (n *NVRTC) Close() error {
	if n.lib == nil {
		return nil
	}
	if C.lc_dlclose(n.lib) != 0 {
		return fmt.Errorf("dlclose %s: %s", n.path, dlerror())
	}
	n.lib = nil
	return nil
}

func (n *NVRTC) fail(code C.int, call, log string) error {
	msg := fmt.Sprintf("NVRTC error %d", int(code))
	if s := C.lc_nvrtcGetErrorString(n.errorString, code); s != nil {
		msg = C.GoString(s)
	}
	return &NVRTCError{Call: call, Code: int(code), Msg: msg, Log: log}
}

// CompileCUBIN compiles CUDA C++ source src (named name in diagnostics)
// with the given options, which must select a real architecture
// (e.g. "--gpu-architecture=sm_90"), and returns the CUBIN and the compile
// log (warnings). A failed compile returns an *NVRTCError carrying the log.
func (n *NVRTC) CompileCUBIN(src, name string, opts []string) (cubin []byte, log string, err error) {
	csrc := C.CString(src)
	defer C.free(unsafe.Pointer(csrc))
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	o := C.lc_nvrtcCreateProgram(n.create, csrc, cname)
	if o.r != 0 {
		return nil, "", n.fail(o.r, "nvrtcCreateProgram("+name+")", "")
	}
	prog := o.h
	defer C.lc_nvrtcDestroyProgram(n.destroy, prog)

	// The option array lives in C memory and holds C strings only.
	var copts **C.char
	if len(opts) > 0 {
		copts = (**C.char)(C.calloc(C.size_t(len(opts)), C.size_t(unsafe.Sizeof(uintptr(0)))))
		arr := unsafe.Slice(copts, len(opts))
		for i, s := range opts {
			arr[i] = C.CString(s)
		}
		defer func() {
			for _, p := range arr {
				C.free(unsafe.Pointer(p))
			}
			C.free(unsafe.Pointer(copts))
		}()
	}
	cr := C.lc_nvrtcCompileProgram(n.compile, prog, C.int(len(opts)), copts)
	log = n.programLog(prog)
	if cr != 0 {
		return nil, log, n.fail(cr, fmt.Sprintf("nvrtcCompileProgram(%s, %s)", name, strings.Join(opts, " ")), log)
	}
	var size C.size_t
	if r := C.lc_nvrtcGetSize(n.cubinSize, prog, &size); r != 0 {
		return nil, log, n.fail(r, "nvrtcGetCUBINSize("+name+")", "")
	}
	if size == 0 {
		return nil, log, &NVRTCError{Call: "nvrtcGetCUBINSize(" + name + ")", Msg: "empty CUBIN (options must name a real architecture, sm_XY)"}
	}
	buf := C.malloc(size)
	defer C.free(buf)
	if r := C.lc_nvrtcGetBytes(n.getCubin, prog, (*C.char)(buf)); r != 0 {
		return nil, log, n.fail(r, "nvrtcGetCUBIN("+name+")", "")
	}
	return C.GoBytes(buf, C.int(size)), log, nil
}

// programLog fetches the compile log of prog.
func (n *NVRTC) programLog(prog unsafe.Pointer) string {
	var size C.size_t
	if C.lc_nvrtcGetSize(n.logSize, prog, &size) != 0 || size == 0 {
		return ""
	}
	buf := C.malloc(size)
	defer C.free(buf)
	if C.lc_nvrtcGetBytes(n.getLog, prog, (*C.char)(buf)) != 0 {
		return ""
	}
	return strings.TrimRight(cstr(C.GoBytes(buf, C.int(size))), "\n")
}
