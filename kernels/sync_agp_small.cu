// (Named to sort after put.cu and sync_agp.cu, whose functions it uses.)
// lc_agp_small runs a whole small persistent all-gather exec in one launch
// of one block: the ready handshake (thread 0), the copies (every thread:
// the own chunk unless in place, then each peer's chunk at rank * n of its
// window, peers in the order rank+1, rank+2, ...), then the done handshake
// (thread 0). bases[p] is rank p's window data as mapped here. One launch
// instead of four, for sizes where launches, not bytes, are the cost.
// lc_agp_small_wait is lc_agp_wait_each with acquire loads instead of a
// trailing system fence: once every slot compares true, each is read again
// with ld.acquire.sys, which orders what follows after the peers' writes.
__device__ void lc_agp_small_wait(lc_u64 *const *local, lc_u32 rank, lc_u32 nranks, int op, lc_u64 target,
                                  lc_u64 timeout_ns, const lc_u32 *abort_flag, lc_record *rec) {
	const lc_u64 start = lc_globaltimer();
	for (lc_u32 i = 1; i < nranks; i++) {
		const lc_u32 p = (rank + i) % nranks;
		for (;;) {
			const lc_u64 v = lc_load_volatile(local[p]);
			if (lc_compare(v, target, op)) break;
			if (lc_aborted(abort_flag)) {
				lc_fail(rec, LC_STATUS_ABORTED, p, v, target, lc_globaltimer() - start);
				return;
			}
			if (timeout_ns != 0) {
				const lc_u64 el = lc_globaltimer() - start;
				if (el >= timeout_ns) {
					lc_fail(rec, LC_STATUS_TIMEOUT, p, v, target, el);
					return;
				}
			}
		}
		(void)lc_load_acquire_sys(local[p]);
	}
}

extern "C" __global__ void lc_agp_small(lc_u64 *count, lc_u64 *const *ready_remote, lc_u64 *const *ready_local,
                                        lc_u64 *const *done_remote, lc_u64 *const *done_local, lc_u32 rank,
                                        lc_u32 nranks, lc_u8 *const *bases, const lc_u8 *src, lc_u64 n,
                                        lc_u64 timeout_ns, const lc_u32 *abort_flag, lc_record *rec) {
	__shared__ int failed;
	if (threadIdx.x == 0) {
		failed = lc_poisoned(rec);
		if (!failed) {
			// No fence before "ready": this launch wrote nothing yet, and
			// earlier work on the stream finished before it started.
			const lc_u64 e = lc_load_volatile(count) + 1;
			lc_store_volatile(count, e);
			for (lc_u32 i = 1; i < nranks; i++) lc_store_volatile(ready_remote[(rank + i) % nranks], e);
			lc_agp_small_wait(ready_local, rank, nranks, LC_CMP_GE, e, timeout_ns, abort_flag, rec);
			failed = lc_poisoned(rec);
		}
	}
	__syncthreads();
	if (failed) return;
	const lc_u64 off = (lc_u64)rank * n;
	lc_u8 *own = bases[rank] + off;
	if (own != src) lc_put_range(own, src, n, threadIdx.x, blockDim.x);
	for (lc_u32 i = 1; i < nranks; i++) {
		lc_put_range(bases[(rank + i) % nranks] + off, src, n, threadIdx.x, blockDim.x);
	}
	__threadfence_system();
	__syncthreads();
	if (threadIdx.x == 0) {
		const lc_u64 e = lc_load_volatile(count);
		const lc_u64 tag = (e & LC_AGP_KMASK) << LC_AGP_NBITS | (n & LC_AGP_NMASK);
		for (lc_u32 i = 1; i < nranks; i++) lc_store_volatile(done_remote[(rank + i) % nranks], tag);
		lc_agp_small_wait(done_local, rank, nranks, LC_CMP_EQ, tag, timeout_ns, abort_flag, rec);
	}
}
