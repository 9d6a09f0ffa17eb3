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
LC_KERNEL void lc_put_signal_wait(lc_u8 *dst, const lc_u8 *src, lc_u64 n, lc_u64 *slot, lc_u64 value,
                                              int op, const lc_u8 *wslots, lc_u32 wcount, lc_u64 wstride, int wop,
                                              lc_u64 wtarget, lc_u64 timeout_ns, const lc_u32 *abort_flag,
                                              lc_record *rec, lc_u64 *host_done, lc_u64 seq) {
	lc_fused_put_signal(dst, src, n, slot, value, op);
	if (threadIdx.x == 0) {
		lc_wait_body(wslots, wcount, wstride, wop, wtarget, timeout_ns, abort_flag, rec);
		if (host_done) lc_store_release_sys(host_done, seq);
	}
}

LC_KERNEL void lc_wait_put_signal(const lc_u8 *wslots, lc_u32 wcount, lc_u64 wstride, int wop,
                                              lc_u64 wtarget, lc_u64 timeout_ns, const lc_u32 *abort_flag,
                                              lc_record *rec, lc_u8 *dst, const lc_u8 *src, lc_u64 n, lc_u64 *slot,
                                              lc_u64 value, int op, lc_u64 *host_done, lc_u64 seq) {
	if (threadIdx.x == 0) lc_wait_body(wslots, wcount, wstride, wop, wtarget, timeout_ns, abort_flag, rec);
	__syncthreads();
	lc_fused_put_signal(dst, src, n, slot, value, op);
	if (threadIdx.x == 0 && host_done) lc_store_release_sys(host_done, seq);
}

// A prelaunched fused step: the kernel is enqueued before the host knows
// its arguments and polls a host-mapped command block for them, so that
// the step starts about one PCIe read after the host writes the command
// instead of one launch after it issues it. The host writes the arguments,
// then gen (x86 stores stay in order); the kernel runs the step as the
// fused kernel would (kind 1: put + signal then wait, kind 2: wait then put
// + signal) or returns (kind 0: cancelled; also when the abort flag is
// raised and no command has come), and at its end stores gen into ack: the
// command block is free again.
struct lc_pre_cmd {
	lc_u64 gen, kind;
	lc_u64 dst, src, n, slot, value, op;
	lc_u64 wslots, wcount, wstride, wop, wtarget, timeout_ns, rec;
	lc_u64 host_done, seq;
};

// lc_host_cmd fetches a command the host posts to host-mapped memory,
// called by every thread of the block: thread 0 spins until *num shows
// want (an acquire) or the abort flag is raised (looked at every 16
// polls); then the block reads the command's words words from cmd into
// dst (shared memory), as many threads at once, since each read crosses
// PCIe (about 1 us). It returns whether the command came.
__device__ bool lc_host_cmd(const lc_u64 *num, lc_u64 want, const lc_u64 *cmd, lc_u64 *dst, int words,
                            const lc_u32 *abort_flag) {
	__shared__ int got;
	if (threadIdx.x == 0) {
		got = 0;
		for (lc_u32 spins = 0;; spins++) {
			if (lc_load_acquire_sys(num) == want) {
				got = 1;
				break;
			}
			if ((spins & 15) == 15 && lc_aborted(abort_flag)) break;
		}
	}
	__syncthreads();
	const bool ok = got != 0;
	for (int k = threadIdx.x; ok && k < words; k += blockDim.x) dst[k] = *((const volatile lc_u64 *)cmd + k);
	__syncthreads();
	return ok;
}

LC_KERNEL void lc_prelaunched(const lc_pre_cmd *cmd, lc_u64 gen, lc_u64 *ack, const lc_u32 *abort_flag) {
	__shared__ lc_pre_cmd c;
	const int words = (int)(sizeof(lc_pre_cmd) / 8);
	const bool got = lc_host_cmd(&cmd->gen, gen, (const lc_u64 *)cmd, (lc_u64 *)&c, words, abort_flag);
	// The command is in shared memory: its block may be reused (a step
	// says so after its end report, out of the way of the step).
	if (!got || c.kind == 0) {
		if (threadIdx.x == 0) lc_store_volatile(ack, gen);
		return;
	}
	lc_record *rec = (lc_record *)c.rec;
	if (c.kind == 2 && threadIdx.x == 0)
		lc_wait_body((const lc_u8 *)c.wslots, (lc_u32)c.wcount, c.wstride, (int)c.wop, c.wtarget, c.timeout_ns, abort_flag, rec);
	if (c.kind == 2) __syncthreads();
	lc_fused_put_signal((lc_u8 *)c.dst, (const lc_u8 *)c.src, c.n, (lc_u64 *)c.slot, c.value, (int)c.op);
	if (threadIdx.x == 0) {
		if (c.kind == 1)
			lc_wait_body((const lc_u8 *)c.wslots, (lc_u32)c.wcount, c.wstride, (int)c.wop, c.wtarget, c.timeout_ns, abort_flag, rec);
		if (c.host_done) lc_store_release_sys((lc_u64 *)c.host_done, c.seq);
		lc_store_volatile(ack, gen);
	}
}
