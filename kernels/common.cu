// luacoll device kernels: shared definitions.
//
// The *.cu files of this directory are concatenated in name order and
// compiled as one NVRTC program; no header of the CUDA toolkit is included.
// Every kernel is extern "C" (LC_KERNEL) so that its symbol is its name.

// The program is compiled in parts, in parallel (kernels.ProgramParts):
// LC_PART 0 holds every kernel but the plan interpreter's three builds,
// parts 1, 2 and 3 one of those each (ptxas spends nearly all of a
// compile on them); the other parts' kernels become unused static
// functions (marked so: NVRTC warns of each otherwise), which are not
// emitted. Without LC_PART: the whole program.
#ifndef LC_PART
#define LC_PART -1
#endif
#define LC_IN_PART(p) (LC_PART < 0 || LC_PART == (p))
#if LC_IN_PART(0)
#define LC_KERNEL extern "C" __global__
#else
#define LC_KERNEL [[maybe_unused]] static __device__
#endif

typedef unsigned long long lc_u64;
typedef unsigned int lc_u32;
typedef unsigned char lc_u8;

// Record status codes (kernels.Status).
#define LC_STATUS_OK 0u
#define LC_STATUS_TIMEOUT 1u
#define LC_STATUS_ABORTED 2u
#define LC_STATUS_MISMATCH 3u  // an all-gather tag of the same exec with another n

// Comparison operators of wait (kernels.Cmp), on unsigned 64-bit values.
#define LC_CMP_EQ 0
#define LC_CMP_NE 1
#define LC_CMP_LT 2
#define LC_CMP_LE 3
#define LC_CMP_GT 4
#define LC_CMP_GE 5

// Error record, in host-mapped memory, written by wait and barrier when
// they give up. 32 bytes; layout mirrored by kernels.Record.
struct lc_record {
	lc_u32 status;    // LC_STATUS_*; 0 while no failure was recorded
	lc_u32 slot;      // slot index that held the wait back
	lc_u64 observed;  // value seen last (wait: the sum; barrier: that slot)
	lc_u64 target;    // value waited for
	lc_u64 elapsed;   // ns spent waiting, from %globaltimer
};

// Constants of the data kernels; kernels/ref.go documents the functions.
#define LC_GOLDEN 0x9E3779B97F4A7C15ull
#define LC_CHECK_STEP 0xD6E8FEB86659FD93ull

__device__ __forceinline__ lc_u64 lc_globaltimer() {
	lc_u64 t;
	asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
	return t;
}

__device__ __forceinline__ bool lc_compare(lc_u64 v, lc_u64 target, int op) {
	switch (op) {
	case LC_CMP_EQ: return v == target;
	case LC_CMP_NE: return v != target;
	case LC_CMP_LT: return v < target;
	case LC_CMP_LE: return v <= target;
	case LC_CMP_GT: return v > target;
	default: return v >= target;
	}
}

__device__ __forceinline__ lc_u64 lc_load_volatile(const lc_u64 *p) { return *(const volatile lc_u64 *)p; }

__device__ __forceinline__ void lc_store_volatile(lc_u64 *p, lc_u64 v) { *(volatile lc_u64 *)p = v; }

// A record that already holds a failure poisons later waits on it: they
// return within LC_HOST_NS (lc_host_look), so that one timeout does not
// cost a timeout per queued wait. The host clears the record to re-arm it.
__device__ __forceinline__ bool lc_poisoned(const lc_record *rec) {
	return rec != 0 && ((const volatile lc_record *)rec)->status != LC_STATUS_OK;
}

__device__ __forceinline__ bool lc_aborted(const lc_u32 *abort_flag) {
	return abort_flag != 0 && *(const volatile lc_u32 *)abort_flag != 0;
}

// The record and the abort flag are host-mapped: a read crosses PCIe (about
// 1.2 us, measured), and reads from several blocks or kernels queue behind
// one another. A wait that met them every 64 polls paid a read or two each
// time it lasted a little longer than usual (a peer a few microseconds
// late), and held back whoever waited for it in turn
// (docs/results/allgather-auto.md, docs/results/reductions.md). So a wait
// looks at host memory only once it has lasted LC_HOST_NS, and then at most
// once every LC_HOST_NS: an abort, or a failure recorded elsewhere, is seen
// within LC_HOST_NS. Its own timeout it checks on the GPU's clock.
#define LC_HOST_NS 1000000ull

// lc_host_look reports whether a wait that has lasted el may read host
// memory now, and if so moves host_at (the wait's own, LC_HOST_NS at
// first) on by LC_HOST_NS.
__device__ __forceinline__ bool lc_host_look(lc_u64 el, lc_u64 &host_at) {
	if (el < host_at) return false;
	host_at = el + LC_HOST_NS;
	return true;
}

// Writes the failure into rec (status last, after the fields, each step
// fenced system-wide so the host never sees a status without its fields).
__device__ void lc_fail(lc_record *rec, lc_u32 status, lc_u32 slot, lc_u64 observed, lc_u64 target, lc_u64 elapsed) {
	if (rec == 0) return;
	volatile lc_record *r = rec;
	if (r->status != LC_STATUS_OK) return;  // keep the first failure
	r->slot = slot;
	r->observed = observed;
	r->target = target;
	r->elapsed = elapsed;
	__threadfence_system();
	r->status = status;
	__threadfence_system();
}

// lc_claim reports whether this thread may write the failure record:
// always with no claim word (one thread of the block waits at a time),
// else when it is the first of the block's threads to claim it (a plan's
// wait group, whose waits run side by side).
__device__ __forceinline__ bool lc_claim(int *claim) { return claim == 0 || atomicCAS(claim, 0, 1) == 0; }

// lc_wait_over reports whether a wait that has lasted el (the GPU's clock)
// must end: where lc_host_look allows (host_at, the wait's own), the record
// already holds a failure, or the abort flag is up (recorded, with slot,
// observed and target); or its timeout_ns (0: none) passed (recorded).
// claim: lc_claim's.
__device__ __forceinline__ bool lc_wait_over(lc_record *rec, const lc_u32 *abort_flag, lc_u64 timeout_ns, lc_u64 el,
                                             lc_u64 &host_at, lc_u32 slot, lc_u64 observed, lc_u64 target,
                                             int *claim = 0) {
	if (lc_host_look(el, host_at)) {
		if (lc_poisoned(rec)) return true;
		if (lc_aborted(abort_flag)) {
			if (lc_claim(claim)) lc_fail(rec, LC_STATUS_ABORTED, slot, observed, target, el);
			return true;
		}
	}
	if (timeout_ns != 0 && el >= timeout_ns) {
		if (lc_claim(claim)) lc_fail(rec, LC_STATUS_TIMEOUT, slot, observed, target, el);
		return true;
	}
	return false;
}

// splitmix64's output function: a bijective 64-bit mixer.
__device__ __forceinline__ lc_u64 lc_mix64(lc_u64 z) {
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
	return z ^ (z >> 31);
}

// Word i of the pseudo-random stream for seed (see kernels.RandWord).
__device__ __forceinline__ lc_u64 lc_rand_word(lc_u64 seed, lc_u64 i) { return lc_mix64(seed + (i + 1) * LC_GOLDEN); }

// Sum of v over the block, valid in thread 0. blockDim.x is a multiple of
// 32 and at most 1024.
__device__ lc_u64 lc_block_sum(lc_u64 v) {
	__shared__ lc_u64 warp_sums[32];
	for (int off = 16; off > 0; off >>= 1) v += __shfl_down_sync(0xffffffffu, v, off);
	const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
	if (lane == 0) warp_sums[warp] = v;
	__syncthreads();
	v = 0;
	if (warp == 0) {
		if (lane < (int)(blockDim.x >> 5)) v = warp_sums[lane];
		for (int off = 16; off > 0; off >>= 1) v += __shfl_down_sync(0xffffffffu, v, off);
	}
	return v;
}

__device__ __forceinline__ lc_u64 lc_tid() { return (lc_u64)blockIdx.x * blockDim.x + threadIdx.x; }

__device__ __forceinline__ lc_u64 lc_nthreads() { return (lc_u64)gridDim.x * blockDim.x; }
