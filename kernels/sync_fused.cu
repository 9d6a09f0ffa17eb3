// (Named to sort after put.cu and sync.cu, whose functions it uses.)
// Fused host-issued operations: a put + signal and a wait in one launch,
// in either order, so that a host-issued step of a protocol (send then wait
// for the answer, or wait then answer) costs one launch instead of two.
// Each part behaves as its own kernel would: the put + signal as
// lc_put_signal, the wait as lc_wait (a failed wait is recorded, and what
// follows it in the launch still runs, as a later launch would).

// lc_fused_put_signal copies n bytes with the block's threads, then
// thread 0 signals with a system-scope release (op 0: store, 1: add): the
// barrier puts every thread's copy before the release, which a peer's
// acquire of the slot then sees (no full fence per thread).
__device__ void lc_fused_put_signal(lc_u8 *dst, const lc_u8 *src, lc_u64 n, lc_u64 *slot, lc_u64 value, int op) {
	lc_put_range(dst, src, n, threadIdx.x, blockDim.x);
	__syncthreads();
	if (threadIdx.x == 0) lc_signal_release_sys(slot, value, op);
}

// Both end with thread 0 storing seq into *host_done (host-mapped; null:
// none) with a system-scope release, after everything else the launch
// does: the host can see the launch finish without asking the driver.
extern "C" __global__ void lc_put_signal_wait(lc_u8 *dst, const lc_u8 *src, lc_u64 n, lc_u64 *slot, lc_u64 value,
                                              int op, const lc_u8 *wslots, lc_u32 wcount, lc_u64 wstride, int wop,
                                              lc_u64 wtarget, lc_u64 timeout_ns, const lc_u32 *abort_flag,
                                              lc_record *rec, lc_u64 *host_done, lc_u64 seq) {
	lc_fused_put_signal(dst, src, n, slot, value, op);
	if (threadIdx.x == 0) {
		lc_wait_body(wslots, wcount, wstride, wop, wtarget, timeout_ns, abort_flag, rec);
		if (host_done) lc_store_release_sys(host_done, seq);
	}
}

extern "C" __global__ void lc_wait_put_signal(const lc_u8 *wslots, lc_u32 wcount, lc_u64 wstride, int wop,
                                              lc_u64 wtarget, lc_u64 timeout_ns, const lc_u32 *abort_flag,
                                              lc_record *rec, lc_u8 *dst, const lc_u8 *src, lc_u64 n, lc_u64 *slot,
                                              lc_u64 value, int op, lc_u64 *host_done, lc_u64 seq) {
	if (threadIdx.x == 0) lc_wait_body(wslots, wcount, wstride, wop, wtarget, timeout_ns, abort_flag, rec);
	__syncthreads();
	lc_fused_put_signal(dst, src, n, slot, value, op);
	if (threadIdx.x == 0 && host_done) lc_store_release_sys(host_done, seq);
}
