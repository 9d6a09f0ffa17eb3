package net

/*
#cgo LDFLAGS: -ldl
#include "lc_ucx.h"
*/
import "C"

import (
	"fmt"
	"os"
	"regexp"
	"sort"
	"strings"
	"sync"
	"unsafe"

	"github.com/luacoll/luacoll/transport"
)

// Package is what to install when UCX is missing.
const Package = "libucx0"

// Lib is the UCX library, loaded once per process.
type Lib struct {
	u       *C.lc_ucx // in C memory: cgo calls take it
	version string
}

var (
	loadOnce sync.Once
	loaded   *Lib
	loadErr  error
)

// The libraries Load opens.
const (
	ucsLibrary = "libucs.so.0"
	ucpLibrary = "libucp.so.0"
)

// Load opens UCX (libucs.so.0, libucp.so.0) once per process, or says what
// to install.
func Load() (*Lib, error) {
	loadOnce.Do(func() { loaded, loadErr = loadFrom(ucsLibrary, ucpLibrary) })
	return loaded, loadErr
}

// tcpDefaults are luacoll's settings for UCX's TCP transport, used where
// the environment does not set them. UCX's own segments (8 KiB sent, 64
// KiB received at a time) cap a process's TCP traffic: with 64 and 256
// KiB an all-gather of 32 MiB a rank between two logical nodes of the GPU
// machine took 12.6-14.4 ms instead of 32.7-34.7, a put of 64 MiB moved
// 2.5 GB/s instead of 1.2 (docs/results/net.md); larger segments or socket
// buffers gained nothing more.
var tcpDefaults = [][2]string{{"UCX_TCP_TX_SEG_SIZE", "64k"}, {"UCX_TCP_RX_SEG_SIZE", "256k"}}

// setTCPDefaults puts tcpDefaults in the environment UCX reads its
// configuration from, where unset, before UCX is loaded.
func setTCPDefaults() {
	for _, kv := range tcpDefaults {
		if _, ok := os.LookupEnv(kv[0]); !ok {
			_ = os.Setenv(kv[0], kv[1])
		}
	}
}

func loadFrom(ucsName, ucpName string) (*Lib, error) {
	setTCPDefaults()
	l := &Lib{u: (*C.lc_ucx)(C.calloc(1, C.sizeof_lc_ucx))}
	cs, cp := C.CString(ucsName), C.CString(ucpName)
	defer C.free(unsafe.Pointer(cs))
	defer C.free(unsafe.Pointer(cp))
	var buf [512]C.char
	if C.lc_ucx_load(l.u, cs, cp, &buf[0], C.size_t(len(buf))) != 0 {
		C.free(unsafe.Pointer(l.u))
		return nil, fmt.Errorf("UCX is not available (%s): install it (apt-get install %s on Debian/Ubuntu)",
			C.GoString(&buf[0]), Package)
	}
	var a, b, c C.uint
	C.lc_ucx_version(l.u, &a, &b, &c)
	l.version = fmt.Sprintf("%d.%d.%d", a, b, c)
	return l, nil
}

// Version is the loaded library's version, e.g. "1.13.1".
func (l *Lib) Version() string { return l.version }

// Error is a failed UCX call.
type Error struct {
	Call   string
	Status int
	Msg    string
}

func (e *Error) Error() string { return fmt.Sprintf("%s: %s (UCX status %d)", e.Call, e.Msg, e.Status) }

// Is makes errors.Is(err, transport.ErrPeerLost) hold for the statuses UCX
// reports when the connection to a peer breaks: I/O error (-3),
// unreachable (-6), canceled (-16, outstanding requests of a failed
// endpoint), rejected (-23), not connected (-24), connection reset (-25)
// and endpoint timeout (-80).
func (e *Error) Is(target error) bool {
	if target != transport.ErrPeerLost {
		return false
	}
	switch e.Status {
	case -3, -6, -16, -23, -24, -25, -80:
		return true
	}
	return false
}

func (l *Lib) fail(call string, s C.lc_status) error {
	return &Error{Call: call, Status: int(s), Msg: C.GoString(C.lc_ucx_strerror(l.u, s))}
}

// Resource is one transport on one device that UCX can use, e.g. tcp on
// eth0.
type Resource struct {
	Transport string `json:"transport"`
	Device    string `json:"device"`
}

// Info is what UCX sees on this machine (luacoll info).
type Info struct {
	Version   string     `json:"version"`
	Resources []Resource `json:"resources"`
	// CUDA is true when UCX can register CUDA device memory.
	CUDA bool `json:"cuda"`
}

// resourceLine matches ucp_context_print_info's "resource 1 : md 0 dev 1
// flags -- tcp/eth0".
var resourceLine = regexp.MustCompile(`resource\s+\d+\s*:.*\s(\S+)/(\S+)\s*$`)

// Describe opens a context with the features windows need and lists the
// transports and devices it would use (UCX_TLS and UCX_NET_DEVICES apply).
func Describe() (Info, error) {
	l, err := Load()
	if err != nil {
		return Info{}, err
	}
	var ctx, worker C.lc_h
	var where *C.char
	if s := C.lc_ucx_open(l.u, &ctx, &worker, &where); s != C.LC_OK {
		return Info{}, l.fail(C.GoString(where), s)
	}
	defer C.lc_ucx_cleanup(l.u, ctx)
	defer C.lc_ucx_worker_destroy(l.u, worker)
	info := Info{Version: l.version, Resources: parseResources(l.print(ctx, false))}
	const cudaTypes = 1<<1 | 1<<2 // UCS_MEMORY_TYPE_CUDA, _CUDA_MANAGED
	info.CUDA = C.lc_ucx_memory_types(l.u, ctx)&cudaTypes != 0
	return info, nil
}

func parseResources(text string) []Resource {
	var out []Resource
	for _, line := range strings.Split(text, "\n") {
		if m := resourceLine.FindStringSubmatch(line); m != nil {
			out = append(out, Resource{Transport: m[1], Device: m[2]})
		}
	}
	return out
}

// print captures ucp_context_print_info (ep false) or ucp_ep_print_info.
func (l *Lib) print(h C.lc_h, ep bool) string {
	e := C.int(0)
	if ep {
		e = 1
	}
	p := C.lc_ucx_print(l.u, h, e)
	if p == nil {
		return ""
	}
	defer C.free(unsafe.Pointer(p))
	return C.GoString(p)
}

// laneLine matches ucp_ep_print_info's "lane[0]:  2:tcp/lo.0 md[1] ...".
var laneLine = regexp.MustCompile(`lane\[\d+\]:\s+\d+:(\S+?)(?:\.\d+)?\s`)

// parseLanes returns the distinct transport/device pairs of an endpoint's
// lanes, sorted: "tcp/eth0".
func parseLanes(text string) []string {
	seen := map[string]bool{}
	var out []string
	for _, m := range laneLine.FindAllStringSubmatch(text, -1) {
		if !seen[m[1]] {
			seen[m[1]] = true
			out = append(out, m[1])
		}
	}
	sort.Strings(out)
	return out
}
