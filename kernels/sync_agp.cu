// (Named to sort after common.cu and sync.cu: the program is the .cu files in name order.)
// Persistent all-gather synchronization kernels. Both run one thread and
// keep the exec counter in device memory, so a CUDA graph that captured
// them stays correct over any number of replays: every value that changes
// from one exec to the next is derived on the device from *count.
//
// remote[p] is the address, as mapped here, of the slot that rank p reads
// for this rank; local[p] is this rank's slot that rank p writes. Entries
// for this rank itself are ignored.

#define LC_AGP_NBITS 41
#define LC_AGP_NMASK ((1ull << LC_AGP_NBITS) - 1)
#define LC_AGP_KMASK ((1ull << (64 - LC_AGP_NBITS)) - 1)

// lc_agp_poll spins until *slot compares with target (op), then reads it
// once more with an acquire load. The timeout is looked at every 64 polls,
// the record and the abort flag (host-mapped) as lc_host_look allows, so
// they do not slow the spin. It returns false once a failure is
// recorded (here or by another wait). With op LC_CMP_EQ, target is a tag
// (e, n): a slot showing exec e with another n can never match, and the
// poll records LC_STATUS_MISMATCH at once.
__device__ bool lc_agp_poll(const lc_u64 *slot, int op, lc_u64 target, lc_u32 who, lc_u64 start, lc_u64 timeout_ns,
                            const lc_u32 *abort_flag, lc_record *rec) {
	lc_u64 host_at = LC_HOST_NS;
	for (lc_u32 spins = 1;; spins++) {
		const lc_u64 v = lc_load_volatile(slot);
		if (lc_compare(v, target, op)) {
			(void)lc_load_acquire_sys(slot);
			return true;
		}
		if (op == LC_CMP_EQ && v >> LC_AGP_NBITS == target >> LC_AGP_NBITS) {
			lc_fail(rec, LC_STATUS_MISMATCH, who, v, target, lc_globaltimer() - start);
			return false;
		}
		if ((spins & 63) != 0) continue;
		if (lc_wait_over(rec, abort_flag, timeout_ns, lc_globaltimer() - start, host_at, who, v, target)) return false;
	}
}

// Fence bits of the ready and done kernels (measurement variants; the
// acquire load that ends each poll is the ordering the protocol needs):
// LC_AGP_FENCE_READY fences system-wide before the ready signals,
// LC_AGP_FENCE_AFTER after the polls of both kernels. LC_AGP_NO_PRECHECK
// leaves out the look at the error record before the signals (a read
// across PCIe; the polls still look at it every 64 spins).
#define LC_AGP_FENCE_READY 1
#define LC_AGP_FENCE_AFTER 2
#define LC_AGP_NO_PRECHECK 4
// LC_AGP_FUSED_NOWAIT: the fused done+ready launch sends its signals and
// waits for none (a measurement of handshake-free back-to-back execs; safe
// only while every rank's execs follow each other with nothing between).
#define LC_AGP_FUSED_NOWAIT 8

// Trace (a measurement, trace non-null): exec e's ready part stores its
// start and end (%globaltimer ns) at trace[4 * (e % LC_AGP_TRACE_N)] and
// [+1], the done part its own at [+2] and [+3].
#define LC_AGP_TRACE_N 1024
__device__ __forceinline__ void lc_agp_trace(lc_u64 *trace, lc_u64 e, int at, lc_u64 t0) {
	if (trace == 0) return;
	lc_u64 *p = trace + 4 * (e % LC_AGP_TRACE_N) + at;
	p[0] = t0;
	p[1] = lc_globaltimer();
}

// lc_agp_wait_each polls every local[p] (p != rank) in turn until it
// compares with target (op), each poll ending with an acquire load, then
// fences when fences has LC_AGP_FENCE_AFTER: the ready and done kernels'
// wait. A failure ends it early (recorded by lc_agp_poll) and returns
// false.
__device__ bool lc_agp_wait_each(lc_u64 *const *local, lc_u32 rank, lc_u32 nranks, int op, lc_u64 target,
                                 lc_u64 timeout_ns, const lc_u32 *abort_flag, lc_record *rec, int fences) {
	const lc_u64 start = lc_globaltimer();
	for (lc_u32 i = 1; i < nranks; i++) {
		const lc_u32 p = (rank + i) % nranks;
		if (!lc_agp_poll(local[p], op, target, p, start, timeout_ns, abort_flag, rec)) return false;
	}
	if (fences & LC_AGP_FENCE_AFTER) __threadfence_system();
	return true;
}

// lc_agp_ready_part starts exec e = ++*count: it tells every peer that
// this rank reached exec e (so results of exec e-1 are consumed here),
// then waits until every peer said the same, so that no put of exec e
// lands on a rank still using exec e-1's result. (The work before it on
// the stream, the last user of that result, ended before it started.)
// An earlier failure on the stream (a poisoned record) skips it.
__device__ bool lc_agp_ready_part(lc_u64 *count, lc_u64 *const *remote, lc_u64 *const *local, lc_u32 rank,
                                  lc_u32 nranks, lc_u64 timeout_ns, const lc_u32 *abort_flag, lc_record *rec,
                                  int fences, bool wait, lc_u64 *trace, lc_u64 t0) {
	if (!(fences & LC_AGP_NO_PRECHECK) && lc_poisoned(rec)) return false;
	const lc_u64 e = lc_load_volatile(count) + 1;
	lc_store_volatile(count, e);
	if (fences & LC_AGP_FENCE_READY) __threadfence_system();
	for (lc_u32 i = 1; i < nranks; i++) lc_store_volatile(remote[(rank + i) % nranks], e);
	const bool ok = !wait || lc_agp_wait_each(local, rank, nranks, LC_CMP_GE, e, timeout_ns, abort_flag, rec, fences);
	lc_agp_trace(trace, e, 0, t0);
	return ok;
}

// lc_agp_done_part ends exec e = *count: every put of this rank is
// complete (stream order), so it sets tag(e, n) in every peer's slot, then
// waits until every peer set the same tag here. A peer that gathers a
// different n fails the wait as soon as its tag arrives (LC_STATUS_MISMATCH);
// the record then shows both tags. An earlier
// failure on the stream skips it, so that the peers' waits fail too.
__device__ bool lc_agp_done_part(const lc_u64 *count, lc_u64 *const *remote, lc_u64 *const *local, lc_u32 rank,
                                 lc_u32 nranks, lc_u64 n, lc_u64 timeout_ns, const lc_u32 *abort_flag,
                                 lc_record *rec, int fences, bool wait, lc_u64 *trace, lc_u64 t0) {
	if (!(fences & LC_AGP_NO_PRECHECK) && lc_poisoned(rec)) return false;
	const lc_u64 e = lc_load_volatile(count);
	const lc_u64 tag = (e & LC_AGP_KMASK) << LC_AGP_NBITS | (n & LC_AGP_NMASK);
	__threadfence_system();
	for (lc_u32 i = 1; i < nranks; i++) lc_store_volatile(remote[(rank + i) % nranks], tag);
	const bool ok = !wait || lc_agp_wait_each(local, rank, nranks, LC_CMP_EQ, tag, timeout_ns, abort_flag, rec, fences);
	lc_agp_trace(trace, e, 2, t0);
	return ok;
}

// lc_agp_ready is lc_agp_ready_part as a one-thread kernel.
LC_KERNEL void lc_agp_ready(lc_u64 *count, lc_u64 *const *remote, lc_u64 *const *local, lc_u32 rank,
                                        lc_u32 nranks, lc_u64 timeout_ns, const lc_u32 *abort_flag, lc_record *rec,
                                        int fences, lc_u64 *trace) {
	LC_ONE_THREAD();
	const lc_u64 t0 = trace ? lc_globaltimer() : 0;
	(void)lc_agp_ready_part(count, remote, local, rank, nranks, timeout_ns, abort_flag, rec, fences, true, trace, t0);
}

// lc_agp_done is lc_agp_done_part as a one-thread kernel.
LC_KERNEL void lc_agp_done(const lc_u64 *count, lc_u64 *const *remote, lc_u64 *const *local, lc_u32 rank,
                                       lc_u32 nranks, lc_u64 n, lc_u64 timeout_ns, const lc_u32 *abort_flag,
                                       lc_record *rec, int fences, lc_u64 *trace) {
	LC_ONE_THREAD();
	const lc_u64 t0 = trace ? lc_globaltimer() : 0;
	(void)lc_agp_done_part(count, remote, local, rank, nranks, n, timeout_ns, abort_flag, rec, fences, true, trace, t0);
}

// lc_agp_done_ready ends exec e (of n bytes per rank) and starts exec e+1
// in one launch, for execs enqueued back to back with nothing between
// them on the stream: the done part, then, if it succeeded, the ready
// part, each as its own kernel does it. The ready part's look at the
// record is left out: the done part just made it. With
// LC_AGP_FUSED_NOWAIT both parts send their signals and wait for none
// (and the done part does not look at the record either).
LC_KERNEL void lc_agp_done_ready(lc_u64 *count, lc_u64 *const *done_remote, lc_u64 *const *done_local,
                                             lc_u64 *const *ready_remote, lc_u64 *const *ready_local, lc_u32 rank,
                                             lc_u32 nranks, lc_u64 n, lc_u64 timeout_ns, const lc_u32 *abort_flag,
                                             lc_record *rec, int fences, lc_u64 *trace) {
	LC_ONE_THREAD();
	const lc_u64 t0 = trace ? lc_globaltimer() : 0;
	const bool wait = !(fences & LC_AGP_FUSED_NOWAIT);
	if (!lc_agp_done_part(count, done_remote, done_local, rank, nranks, n, timeout_ns, abort_flag, rec,
	                      wait ? fences : fences | LC_AGP_NO_PRECHECK, wait, trace, t0))
		return;
	const lc_u64 t1 = trace ? lc_globaltimer() : 0;
	(void)lc_agp_ready_part(count, ready_remote, ready_local, rank, nranks, timeout_ns, abort_flag, rec,
	                        fences | LC_AGP_NO_PRECHECK, wait, trace, t1);
}
