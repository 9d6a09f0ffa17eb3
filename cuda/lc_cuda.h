// Minimal CUDA driver, NVRTC and NCCL declarations for package cuda.
//
// Nothing here comes from the CUDA toolkit: the types below are written by
// hand to match the ABI of cuda.h (CUDA 12 and 13). Every driver entry point
// is reached through a function pointer resolved with cuGetProcAddress, and
// cgo cannot call function pointers, so each one gets a tiny static
// trampoline that casts the pointer to the right prototype and calls it.
//
// Trampolines that produce a handle return it in an lc_hres instead of taking
// an out pointer, so Go never hands C the address of a pointer-typed slot.

#ifndef LC_CUDA_H
#define LC_CUDA_H

#include <dlfcn.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef int lc_res;                       // CUresult
typedef int lc_dev;                       // CUdevice
typedef unsigned long long lc_dptr;       // CUdeviceptr (64-bit)
typedef unsigned long long lc_memhandle;  // CUmemGenericAllocationHandle

// CUmemLocation
typedef struct {
	int type;  // CUmemLocationType
	int id;
} lc_mem_location;

// CUmemAllocationProp (32 bytes)
typedef struct {
	int type;                  // CUmemAllocationType
	int requestedHandleTypes;  // CUmemAllocationHandleType
	lc_mem_location location;
	void *win32HandleMetaData;
	struct {
		unsigned char compressionType;
		unsigned char gpuDirectRDMACapable;
		unsigned short usage;
		unsigned char reserved[4];
	} allocFlags;
} lc_mem_alloc_prop;

// CUmemAccessDesc (12 bytes)
typedef struct {
	lc_mem_location location;
	int flags;  // CUmemAccess_flags
} lc_mem_access_desc;

// CUipcMemHandle
typedef struct {
	char reserved[64];
} lc_ipc_mem_handle;

_Static_assert(sizeof(lc_mem_location) == 8, "CUmemLocation size");
_Static_assert(sizeof(lc_mem_alloc_prop) == 32, "CUmemAllocationProp size");
_Static_assert(offsetof(lc_mem_alloc_prop, location) == 8, "CUmemAllocationProp.location");
_Static_assert(offsetof(lc_mem_alloc_prop, win32HandleMetaData) == 16, "CUmemAllocationProp.win32HandleMetaData");
_Static_assert(offsetof(lc_mem_alloc_prop, allocFlags) == 24, "CUmemAllocationProp.allocFlags");
_Static_assert(sizeof(lc_mem_access_desc) == 12, "CUmemAccessDesc size");
_Static_assert(sizeof(lc_ipc_mem_handle) == 64, "CUipcMemHandle size");

// Enumerators used by the trampolines that build structs in C.
#define LC_MEM_ALLOCATION_TYPE_PINNED 1
#define LC_MEM_LOCATION_TYPE_DEVICE 1
#define LC_MEM_ACCESS_FLAGS_PROT_READWRITE 3

// A handle-or-pointer result.
typedef struct {
	lc_res r;
	void *h;
} lc_hres;

// ---------------------------------------------------------------------------
// Library loading.

static inline void *lc_dlopen(const char *path) { return dlopen(path, RTLD_NOW | RTLD_LOCAL); }
static inline void *lc_dlsym(void *lib, const char *name) { return dlsym(lib, name); }
static inline int lc_dlclose(void *lib) { return dlclose(lib); }
static inline const char *lc_dlerror(void) { return dlerror(); }

// cuGetProcAddress_v2 (CUDA 12+) and the CUDA 11.3 cuGetProcAddress.
static inline void *lc_resolve(void *getproc, int v2, const char *sym, int version, lc_res *res, int *status) {
	void *p = NULL;
	*status = 0;
	if (v2) {
		*res = ((lc_res(*)(const char *, void **, int, unsigned long long, int *))getproc)(sym, &p, version, 0, status);
	} else {
		*res = ((lc_res(*)(const char *, void **, int, unsigned long long))getproc)(sym, &p, version, 0);
	}
	return p;
}

// ---------------------------------------------------------------------------
// Errors, init, version.

static inline const char *lc_cuGetErrorName(void *f, lc_res code) {
	const char *s = NULL;
	if (f == NULL || ((lc_res(*)(lc_res, const char **))f)(code, &s) != 0) return NULL;
	return s;
}
static inline const char *lc_cuGetErrorString(void *f, lc_res code) {
	const char *s = NULL;
	if (f == NULL || ((lc_res(*)(lc_res, const char **))f)(code, &s) != 0) return NULL;
	return s;
}
static inline lc_res lc_cuInit(void *f, unsigned flags) { return ((lc_res(*)(unsigned))f)(flags); }
static inline lc_res lc_cuDriverGetVersion(void *f, int *v) { return ((lc_res(*)(int *))f)(v); }

// ---------------------------------------------------------------------------
// Devices.

static inline lc_res lc_cuDeviceGetCount(void *f, int *n) { return ((lc_res(*)(int *))f)(n); }
static inline lc_res lc_cuDeviceGet(void *f, lc_dev *d, int ordinal) { return ((lc_res(*)(lc_dev *, int))f)(d, ordinal); }
static inline lc_res lc_cuDeviceGetName(void *f, char *name, int len, lc_dev d) {
	return ((lc_res(*)(char *, int, lc_dev))f)(name, len, d);
}
static inline lc_res lc_cuDeviceGetUuid(void *f, unsigned char *uuid16, lc_dev d) {
	return ((lc_res(*)(unsigned char *, lc_dev))f)(uuid16, d);
}
static inline lc_res lc_cuDeviceGetPCIBusId(void *f, char *bus, int len, lc_dev d) {
	return ((lc_res(*)(char *, int, lc_dev))f)(bus, len, d);
}
static inline lc_res lc_cuDeviceTotalMem(void *f, size_t *bytes, lc_dev d) { return ((lc_res(*)(size_t *, lc_dev))f)(bytes, d); }
static inline lc_res lc_cuDeviceGetAttribute(void *f, int *v, int attr, lc_dev d) {
	return ((lc_res(*)(int *, int, lc_dev))f)(v, attr, d);
}
static inline lc_res lc_cuDeviceCanAccessPeer(void *f, int *can, lc_dev d, lc_dev peer) {
	return ((lc_res(*)(int *, lc_dev, lc_dev))f)(can, d, peer);
}

// ---------------------------------------------------------------------------
// Contexts.

static inline lc_hres lc_cuDevicePrimaryCtxRetain(void *f, lc_dev d) {
	lc_hres o = {0, NULL};
	o.r = ((lc_res(*)(void **, lc_dev))f)(&o.h, d);
	return o;
}
static inline lc_res lc_cuDevicePrimaryCtxRelease(void *f, lc_dev d) { return ((lc_res(*)(lc_dev))f)(d); }
static inline lc_res lc_cuCtxSetCurrent(void *f, void *ctx) { return ((lc_res(*)(void *))f)(ctx); }
static inline lc_res lc_cuCtxSynchronize(void *f) { return ((lc_res(*)(void))f)(); }
static inline lc_res lc_cuCtxEnablePeerAccess(void *f, void *peer, unsigned flags) {
	return ((lc_res(*)(void *, unsigned))f)(peer, flags);
}
static inline lc_res lc_cuMemGetInfo(void *f, size_t *free_b, size_t *total_b) {
	return ((lc_res(*)(size_t *, size_t *))f)(free_b, total_b);
}

// ---------------------------------------------------------------------------
// Streams and events.

static inline lc_hres lc_cuStreamCreate(void *f, unsigned flags) {
	lc_hres o = {0, NULL};
	o.r = ((lc_res(*)(void **, unsigned))f)(&o.h, flags);
	return o;
}
static inline lc_res lc_cuStreamDestroy(void *f, void *s) { return ((lc_res(*)(void *))f)(s); }
static inline lc_res lc_cuStreamSynchronize(void *f, void *s) { return ((lc_res(*)(void *))f)(s); }
static inline lc_res lc_cuStreamQuery(void *f, void *s) { return ((lc_res(*)(void *))f)(s); }
static inline lc_res lc_cuStreamWaitEvent(void *f, void *s, void *e, unsigned flags) {
	return ((lc_res(*)(void *, void *, unsigned))f)(s, e, flags);
}
static inline lc_res lc_cuStreamWriteValue64(void *f, void *s, lc_dptr addr, unsigned long long v, unsigned flags) {
	return ((lc_res(*)(void *, lc_dptr, unsigned long long, unsigned))f)(s, addr, v, flags);
}
static inline lc_res lc_cuStreamWaitValue64(void *f, void *s, lc_dptr addr, unsigned long long v, unsigned flags) {
	return ((lc_res(*)(void *, lc_dptr, unsigned long long, unsigned))f)(s, addr, v, flags);
}
static inline lc_hres lc_cuEventCreate(void *f, unsigned flags) {
	lc_hres o = {0, NULL};
	o.r = ((lc_res(*)(void **, unsigned))f)(&o.h, flags);
	return o;
}
static inline lc_res lc_cuEventRecord(void *f, void *e, void *s) { return ((lc_res(*)(void *, void *))f)(e, s); }
static inline lc_res lc_cuEventQuery(void *f, void *e) { return ((lc_res(*)(void *))f)(e); }
static inline lc_res lc_cuEventSynchronize(void *f, void *e) { return ((lc_res(*)(void *))f)(e); }
static inline lc_res lc_cuEventElapsedTime(void *f, float *ms, void *start, void *end) {
	return ((lc_res(*)(float *, void *, void *))f)(ms, start, end);
}
static inline lc_res lc_cuEventDestroy(void *f, void *e) { return ((lc_res(*)(void *))f)(e); }

// ---------------------------------------------------------------------------
// Linear memory.

static inline lc_res lc_cuMemAlloc(void *f, lc_dptr *p, size_t n) { return ((lc_res(*)(lc_dptr *, size_t))f)(p, n); }
static inline lc_res lc_cuMemFree(void *f, lc_dptr p) { return ((lc_res(*)(lc_dptr))f)(p); }
static inline lc_res lc_cuMemsetD8Async(void *f, lc_dptr p, unsigned char v, size_t n, void *s) {
	return ((lc_res(*)(lc_dptr, unsigned char, size_t, void *))f)(p, v, n, s);
}
static inline lc_res lc_cuMemcpyAsync(void *f, lc_dptr dst, lc_dptr src, size_t n, void *s) {
	return ((lc_res(*)(lc_dptr, lc_dptr, size_t, void *))f)(dst, src, n, s);
}
static inline lc_res lc_cuMemcpyHtoD(void *f, lc_dptr dst, const void *src, size_t n) {
	return ((lc_res(*)(lc_dptr, const void *, size_t))f)(dst, src, n);
}
static inline lc_res lc_cuMemcpyDtoH(void *f, void *dst, lc_dptr src, size_t n) {
	return ((lc_res(*)(void *, lc_dptr, size_t))f)(dst, src, n);
}
static inline lc_res lc_cuMemcpyHtoDAsync(void *f, lc_dptr dst, const void *src, size_t n, void *s) {
	return ((lc_res(*)(lc_dptr, const void *, size_t, void *))f)(dst, src, n, s);
}
static inline lc_res lc_cuMemcpyDtoHAsync(void *f, void *dst, lc_dptr src, size_t n, void *s) {
	return ((lc_res(*)(void *, lc_dptr, size_t, void *))f)(dst, src, n, s);
}
static inline lc_res lc_cuMemcpyPeerAsync(void *f, lc_dptr dst, void *dctx, lc_dptr src, void *sctx, size_t n, void *s) {
	return ((lc_res(*)(lc_dptr, void *, lc_dptr, void *, size_t, void *))f)(dst, dctx, src, sctx, n, s);
}
static inline lc_hres lc_cuMemHostAlloc(void *f, size_t n, unsigned flags) {
	lc_hres o = {0, NULL};
	o.r = ((lc_res(*)(void **, size_t, unsigned))f)(&o.h, n, flags);
	return o;
}
static inline lc_res lc_cuMemHostGetDevicePointer(void *f, lc_dptr *d, void *host) {
	return ((lc_res(*)(lc_dptr *, void *, unsigned))f)(d, host, 0);
}
static inline lc_res lc_cuMemFreeHost(void *f, void *host) { return ((lc_res(*)(void *))f)(host); }
static inline lc_res lc_cuMemHostRegister(void *f, void *p, size_t n, unsigned flags) {
	return ((lc_res(*)(void *, size_t, unsigned))f)(p, n, flags);
}
static inline lc_res lc_cuMemHostUnregister(void *f, void *p) { return ((lc_res(*)(void *))f)(p); }

// ---------------------------------------------------------------------------
// Virtual memory management. The allocation properties are built here, in C,
// so their layout is the one declared above.

static inline void lc_fill_prop(lc_mem_alloc_prop *p, lc_dev d, int handle_types) {
	memset(p, 0, sizeof(*p));
	p->type = LC_MEM_ALLOCATION_TYPE_PINNED;
	p->requestedHandleTypes = handle_types;
	p->location.type = LC_MEM_LOCATION_TYPE_DEVICE;
	p->location.id = d;
}
static inline lc_res lc_cuMemGetAllocationGranularity(void *f, size_t *g, lc_dev d, int handle_types, int option) {
	lc_mem_alloc_prop prop;
	lc_fill_prop(&prop, d, handle_types);
	return ((lc_res(*)(size_t *, const lc_mem_alloc_prop *, int))f)(g, &prop, option);
}
static inline lc_res lc_cuMemCreate(void *f, lc_memhandle *h, size_t size, lc_dev d, int handle_types) {
	lc_mem_alloc_prop prop;
	lc_fill_prop(&prop, d, handle_types);
	return ((lc_res(*)(lc_memhandle *, size_t, const lc_mem_alloc_prop *, unsigned long long))f)(h, size, &prop, 0);
}
static inline lc_res lc_cuMemExportToFD(void *f, int *fd, lc_memhandle h, int handle_type) {
	return ((lc_res(*)(void *, lc_memhandle, int, unsigned long long))f)((void *)fd, h, handle_type, 0);
}
static inline lc_res lc_cuMemImportFromFD(void *f, lc_memhandle *h, int fd, int handle_type) {
	return ((lc_res(*)(lc_memhandle *, void *, int))f)(h, (void *)(intptr_t)fd, handle_type);
}
static inline lc_res lc_cuMemAddressReserve(void *f, lc_dptr *p, size_t size, size_t align) {
	return ((lc_res(*)(lc_dptr *, size_t, size_t, lc_dptr, unsigned long long))f)(p, size, align, 0, 0);
}
static inline lc_res lc_cuMemAddressFree(void *f, lc_dptr p, size_t size) { return ((lc_res(*)(lc_dptr, size_t))f)(p, size); }
static inline lc_res lc_cuMemMap(void *f, lc_dptr p, size_t size, size_t offset, lc_memhandle h) {
	return ((lc_res(*)(lc_dptr, size_t, size_t, lc_memhandle, unsigned long long))f)(p, size, offset, h, 0);
}
static inline lc_res lc_cuMemUnmap(void *f, lc_dptr p, size_t size) { return ((lc_res(*)(lc_dptr, size_t))f)(p, size); }
static inline lc_res lc_cuMemSetAccess(void *f, lc_dptr p, size_t size, const int *devs, int ndev) {
	lc_mem_access_desc desc[64];
	if (ndev < 0 || ndev > 64) return 1;  // CUDA_ERROR_INVALID_VALUE
	for (int i = 0; i < ndev; i++) {
		desc[i].location.type = LC_MEM_LOCATION_TYPE_DEVICE;
		desc[i].location.id = devs[i];
		desc[i].flags = LC_MEM_ACCESS_FLAGS_PROT_READWRITE;
	}
	return ((lc_res(*)(lc_dptr, size_t, const lc_mem_access_desc *, size_t))f)(p, size, desc, (size_t)ndev);
}
static inline lc_res lc_cuMemRelease(void *f, lc_memhandle h) { return ((lc_res(*)(lc_memhandle))f)(h); }

// ---------------------------------------------------------------------------
// Legacy IPC. cuIpcOpenMemHandle takes the handle by value.

static inline lc_res lc_cuIpcGetMemHandle(void *f, lc_ipc_mem_handle *h, lc_dptr p) {
	return ((lc_res(*)(lc_ipc_mem_handle *, lc_dptr))f)(h, p);
}
static inline lc_res lc_cuIpcOpenMemHandle(void *f, lc_dptr *p, const lc_ipc_mem_handle *h, unsigned flags) {
	return ((lc_res(*)(lc_dptr *, lc_ipc_mem_handle, unsigned))f)(p, *h, flags);
}
static inline lc_res lc_cuIpcCloseMemHandle(void *f, lc_dptr p) { return ((lc_res(*)(lc_dptr))f)(p); }

// ---------------------------------------------------------------------------
// Graphs.

static inline lc_res lc_cuStreamBeginCapture(void *f, void *s, int mode) { return ((lc_res(*)(void *, int))f)(s, mode); }
static inline lc_hres lc_cuStreamEndCapture(void *f, void *s) {
	lc_hres o = {0, NULL};
	o.r = ((lc_res(*)(void *, void **))f)(s, &o.h);
	return o;
}
static inline lc_hres lc_cuGraphInstantiateWithFlags(void *f, void *g, unsigned long long flags) {
	lc_hres o = {0, NULL};
	o.r = ((lc_res(*)(void **, void *, unsigned long long))f)(&o.h, g, flags);
	return o;
}
static inline lc_res lc_cuGraphLaunch(void *f, void *ge, void *s) { return ((lc_res(*)(void *, void *))f)(ge, s); }
// lcHostFuncGo is the Go side of every host function (hostfunc.go); the
// handle of the Go function to run travels as the user data.
extern void lcHostFuncGo(void *);
static inline lc_res lc_cuLaunchHostFunc(void *f, void *s, uintptr_t handle) {
	return ((lc_res(*)(void *, void (*)(void *), void *))f)(s, lcHostFuncGo, (void *)handle);
}
static inline lc_res lc_cuGraphExecDestroy(void *f, void *ge) { return ((lc_res(*)(void *))f)(ge); }
static inline lc_res lc_cuGraphDestroy(void *f, void *g) { return ((lc_res(*)(void *))f)(g); }

// Counts the nodes of g by CUgraphNodeType into counts[0..ncounts).
// Types at or past ncounts are added to counts[ncounts-1].
static inline lc_res lc_graph_count_nodes(void *getNodes, void *getType, void *g, int *counts, int ncounts, size_t *total) {
	size_t n = 0;
	lc_res r = ((lc_res(*)(void *, void **, size_t *))getNodes)(g, NULL, &n);
	*total = n;
	if (r != 0 || n == 0) return r;
	void **nodes = (void **)calloc(n, sizeof(void *));
	if (nodes == NULL) return 2;  // CUDA_ERROR_OUT_OF_MEMORY
	r = ((lc_res(*)(void *, void **, size_t *))getNodes)(g, nodes, &n);
	for (size_t i = 0; r == 0 && i < n; i++) {
		int t = 0;
		r = ((lc_res(*)(void *, int *))getType)(nodes[i], &t);
		if (r == 0) {
			if (t < 0 || t >= ncounts) t = ncounts - 1;
			counts[t]++;
		}
	}
	free(nodes);
	*total = n;
	return r;
}

// ---------------------------------------------------------------------------
// Modules and launches.

static inline lc_hres lc_cuModuleLoadData(void *f, const void *image) {
	lc_hres o = {0, NULL};
	o.r = ((lc_res(*)(void **, const void *))f)(&o.h, image);
	return o;
}
static inline lc_hres lc_cuModuleGetFunction(void *f, void *mod, const char *name) {
	lc_hres o = {0, NULL};
	o.r = ((lc_res(*)(void **, void *, const char *))f)(&o.h, mod, name);
	return o;
}
static inline lc_res lc_cuModuleUnload(void *f, void *mod) { return ((lc_res(*)(void *))f)(mod); }

#define LC_MAX_ARGS 40

// Kernel arguments, passed by value so that they live on the C stack for the
// duration of the launch. Each argument takes one 8-byte slot; narrower
// arguments sit in the low bytes (little endian).
typedef struct {
	unsigned long long v[LC_MAX_ARGS];
	int n;
} lc_args;

static inline lc_res lc_cuLaunchKernel(void *f, void *fn, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                                unsigned bz, unsigned shmem, void *stream, lc_args a) {
	void *params[LC_MAX_ARGS];
	if (a.n < 0 || a.n > LC_MAX_ARGS) return 1;  // CUDA_ERROR_INVALID_VALUE
	for (int i = 0; i < a.n; i++) params[i] = &a.v[i];
	return ((lc_res(*)(void *, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, void *, void **,
	                   void **))f)(fn, gx, gy, gz, bx, by, bz, shmem, stream, params, NULL);
}

// One-kernel graphs: CUDA_KERNEL_NODE_PARAMS_v2 (CUDA 12 ABI), and a graph
// with a single kernel node whose arguments are set before each launch.
typedef struct {
	void *func;
	unsigned gx, gy, gz, bx, by, bz, shmem;
	void **params;
	void **extra;
	void *kern;
	void *ctx;
} lc_kernel_node_params;

static inline lc_hres lc_cuGraphCreate(void *f) {
	lc_hres o = {0, NULL};
	o.r = ((lc_res(*)(void **, unsigned))f)(&o.h, 0);
	return o;
}

static inline lc_hres lc_kernel_graph_add(void *f, void *g, void *fn, unsigned gx, unsigned bx, lc_args a) {
	lc_hres o = {0, NULL};
	void *params[LC_MAX_ARGS];
	if (a.n < 0 || a.n > LC_MAX_ARGS) {
		o.r = 1;
		return o;
	}
	for (int i = 0; i < a.n; i++) params[i] = &a.v[i];
	lc_kernel_node_params p = {fn, gx, 1, 1, bx, 1, 1, 0, params, NULL, NULL, NULL};
	o.r = ((lc_res(*)(void **, void *, const void *, size_t, const lc_kernel_node_params *))f)(&o.h, g, NULL, 0, &p);
	return o;
}

// Sets the node's arguments (and grid) in the executable graph, then
// launches it: one call from Go per launch.
static inline lc_res lc_kernel_graph_launch(void *set, void *launch, void *ge, void *node, void *fn, unsigned gx,
                                            unsigned bx, void *stream, lc_args a, int *failed_set) {
	void *params[LC_MAX_ARGS];
	if (a.n < 0 || a.n > LC_MAX_ARGS) return 1;
	for (int i = 0; i < a.n; i++) params[i] = &a.v[i];
	lc_kernel_node_params p = {fn, gx, 1, 1, bx, 1, 1, 0, params, NULL, NULL, NULL};
	lc_res r = ((lc_res(*)(void *, void *, const lc_kernel_node_params *))set)(ge, node, &p);
	if (r != 0) {
		*failed_set = 1;
		return r;
	}
	*failed_set = 0;
	return ((lc_res(*)(void *, void *))launch)(ge, stream);
}

// ---------------------------------------------------------------------------
// NVRTC (resolved with dlsym from libnvrtc).

static inline int lc_nvrtcVersion(void *f, int *major, int *minor) { return ((int (*)(int *, int *))f)(major, minor); }
static inline const char *lc_nvrtcGetErrorString(void *f, int code) {
	if (f == NULL) return NULL;
	return ((const char *(*)(int))f)(code);
}
static inline lc_hres lc_nvrtcCreateProgram(void *f, const char *src, const char *name) {
	lc_hres o = {0, NULL};
	o.r = ((int (*)(void **, const char *, const char *, int, const char *const *, const char *const *))f)(
	    &o.h, src, name, 0, NULL, NULL);
	return o;
}
static inline int lc_nvrtcCompileProgram(void *f, void *prog, int nopt, char **opts) {
	return ((int (*)(void *, int, const char *const *))f)(prog, nopt, (const char *const *)opts);
}
static inline int lc_nvrtcGetSize(void *f, void *prog, size_t *n) { return ((int (*)(void *, size_t *))f)(prog, n); }
static inline int lc_nvrtcGetBytes(void *f, void *prog, char *out) { return ((int (*)(void *, char *))f)(prog, out); }
static inline int lc_nvrtcDestroyProgram(void *f, void *prog) {
	void *p = prog;
	return ((int (*)(void **))f)(&p);
}

// ---------------------------------------------------------------------------
// NCCL version probe.

static inline int lc_ncclGetVersion(void *f, int *v) { return ((int (*)(int *))f)(v); }

#endif  // LC_CUDA_H
