// (Named to sort after sync_agp_one.cu, whose helpers it uses.)
//
// Staged execs of the persistent all-gather (lc_agp_staged): the mid sizes,
// too large for flagged lines (half of each line is flags) and too small to
// pay for a ready handshake (a round trip before any byte moves) and a done
// handshake. Each block of the grid owns one part of the chunk (parts of
// equal length, a multiple of 16 bytes, the last one shorter) and moves it
// with plain stores into every peer's staging slot; then one thread fences
// and stores the part's flag {e, n} with one 16-byte store. On the
// receiving side the same block waits for its part's flag from every peer
// and copies the part out of the staging slot into place as soon as it
// shows. No block waits for another block of its own launch.
//
// Staging of rank r (after the flagged lines' area; offsets from stage[r]):
//   flags: for b in {0, 1}, writer q, part j: 16 bytes at
//          ((b * nranks + q) * LC_ST_PARTS + j) * 16;
//   slots: for b in {0, 1}, writer q: slot bytes at
//          flag_bytes + (b * nranks + q) * slot.
// Exec e uses b = e & 1. As with the flagged lines, a writer reaches exec
// e + 2 (the next use of b) only after its exec e + 1 completed, which
// needed this rank's parts of exec e + 1, sent after this rank finished
// exec e, the last reader of b. A flag of b therefore shows exec e or an
// older one, never a newer one: the wait is for equality, and a flag of
// exec e with another n fails its wait at once (LC_STATUS_MISMATCH; the
// block's waits for other peers see the record within LC_HOST_NS).
#define LC_ST_PARTS 256u

__device__ __forceinline__ void lc_st_flag_store(lc_u64 *p, lc_u64 e, lc_u64 n) {
	asm volatile("st.volatile.global.v2.u64 [%0], {%1, %2};" ::"l"(p), "l"(e), "l"(n) : "memory");
}

__device__ __forceinline__ void lc_st_flag_load(const lc_u64 *p, lc_u64 &e, lc_u64 &n) {
	asm volatile("ld.volatile.global.v2.u64 {%0, %1}, [%2];" : "=l"(e), "=l"(n) : "l"(p) : "memory");
}

// lc_st_wait spins (one thread a peer) until flag shows exec e of n bytes. It
// returns false once a failure is recorded (here or by another wait).
// Host-mapped memory (the record, the abort flag) is read as lc_host_look
// allows: many blocks reading it at once queue behind one another across
// PCIe, so a wait that began the reads lasted as long as the queue, and one
// late rank stalled whole sweeps (20 us here gave execs of 60 us instead of
// 13 on 4 GPUs; docs/results/allgather-auto.md). An abort or another
// block's failure is seen within LC_HOST_NS.

__device__ bool lc_st_wait(const lc_u64 *flag, lc_u64 e, lc_u64 n, lc_u32 who, lc_u64 start, lc_u64 timeout_ns,
                           const lc_u32 *abort_flag, lc_record *rec) {
	const lc_u64 target = (e & LC_AGP_KMASK) << LC_AGP_NBITS | (n & LC_AGP_NMASK);
	lc_u64 host_at = LC_HOST_NS;
	for (lc_u32 spins = 1;; spins++) {
		lc_u64 fe, fn;
		lc_st_flag_load(flag, fe, fn);
		if (fe == e) {
			if (fn != n) {
				lc_fail(rec, LC_STATUS_MISMATCH, who, (e & LC_AGP_KMASK) << LC_AGP_NBITS | (fn & LC_AGP_NMASK),
				        target, lc_globaltimer() - start);
				return false;
			}
			(void)lc_load_acquire_sys(flag);
			return true;
		}
		if ((spins & 63) != 0) continue;
		const lc_u64 el = lc_globaltimer() - start;
		const bool host = lc_host_look(el, host_at);
		if (!host && (timeout_ns == 0 || el < timeout_ns)) continue;
		if (host && lc_poisoned(rec)) return false;
		const bool ab = host && lc_aborted(abort_flag);
		if (ab || (timeout_ns != 0 && el >= timeout_ns)) {
			lc_fail(rec, ab ? LC_STATUS_ABORTED : LC_STATUS_TIMEOUT, who, (fe & LC_AGP_KMASK) << LC_AGP_NBITS, target,
			        el);
			return false;
		}
	}
}

// LC_ST_UNROLL is how many 16-byte words each thread has in flight when a
// part is copied out of staging: loads first, then the stores.
#define LC_ST_UNROLL 4

// lc_st_recv copies the part (len bytes at lo) of every peer out of this
// rank's staging (area; writer q's part at base + q * slot) into out at
// q * n + lo, with the words of all peers in flight together. Every
// destination must be 16-byte aligned (out + lo and n multiples of 16).
__device__ void lc_st_recv(const lc_u8 *area, lc_u64 base, lc_u64 slot, lc_u32 rank, lc_u32 nranks, lc_u8 *out,
                           lc_u64 n, lc_u64 lo, lc_u64 len) {
	const lc_u64 words = len / 16, nth = blockDim.x, total = (lc_u64)(nranks - 1) * words;
	for (lc_u64 t = threadIdx.x; t < total; t += LC_ST_UNROLL * nth) {
		uint4 v[LC_ST_UNROLL];
		uint4 *d[LC_ST_UNROLL];
#pragma unroll
		for (int k = 0; k < LC_ST_UNROLL; k++) {
			const lc_u64 tt = t + k * nth;
			if (tt >= total) continue;
			const lc_u64 qi = tt / words, w = tt - qi * words;
			const lc_u32 q = (rank + nranks - 1 - (lc_u32)qi) % nranks;
			v[k] = ((const uint4 *)(area + base + q * slot))[w];
			d[k] = (uint4 *)(out + (lc_u64)q * n + lo) + w;
		}
#pragma unroll
		for (int k = 0; k < LC_ST_UNROLL; k++)
			if (t + k * nth < total) *d[k] = v[k];
	}
	const lc_u64 done = words * 16;
	if (done == len) return;
	for (lc_u32 i = 1; i < nranks; i++) {
		const lc_u32 q = (rank + nranks - i) % nranks;
		lc_put_range(out + (lc_u64)q * n + lo + done, area + base + q * slot + done, len - done, threadIdx.x, nth);
	}
}

// lc_agp_staged runs exec e = count+1 of n bytes per rank, cut into one
// part of part bytes per block (the last one shorter; the grid is the
// number of parts). The grid is kept small (AGPStagedGrid): a block waits
// for the peers' blocks, so every block of every rank's launch must be able
// to run at once, also where ranks share a GPU. stage[p] is rank p's
// staging area as mapped here, whose staged part starts at off; slot is the
// bytes of one writer's slot (>= n). out is this rank's window data; src
// the chunk (possibly in place, at out + rank * n). The flag follows the
// part's data after a release fence (fence.acq_rel.sys, lighter than the
// sequentially consistent one that __threadfence_system is): thread 0 has
// seen the block's stores at the barrier, and the fence is cumulative.
LC_KERNEL void lc_agp_staged(lc_u64 *count, lc_u32 *arrive, lc_u8 *const *stage, lc_u64 off, lc_u64 slot,
                                         lc_u32 rank, lc_u32 nranks, lc_u8 *out, const lc_u8 *src, lc_u64 n,
                                         lc_u64 part, lc_u64 timeout_ns, const lc_u32 *abort_flag, lc_record *rec) {
	__shared__ int failed;
	const lc_u64 e = lc_load_volatile(count) + 1;
	const lc_u64 b = e & 1, j = blockIdx.x;
	const lc_u64 lo = j * part < n ? j * part : n;
	const lc_u64 len = n - lo < part ? n - lo : part;
	const lc_u64 flag_bytes = 2ull * nranks * LC_ST_PARTS * 16;
	if (threadIdx.x == 0) failed = 0;
	// Send: this block's part to every peer, peers in the order rank+1, ...
	const lc_u64 mine = off + flag_bytes + (b * nranks + rank) * slot + lo;
	if (lc_put_peers_ok(src + lo, mine)) {
		lc_put_peers(stage, mine, rank, nranks, src + lo, len, threadIdx.x, blockDim.x);
	} else {
		for (lc_u32 i = 1; i < nranks; i++)
			lc_put_range(stage[(rank + i) % nranks] + mine, src + lo, len, threadIdx.x, blockDim.x);
	}
	__syncthreads();
	if (threadIdx.x == 0) {
		asm volatile("fence.acq_rel.sys;" ::: "memory");
		for (lc_u32 i = 1; i < nranks; i++) {
			const lc_u32 p = (rank + i) % nranks;
			lc_st_flag_store((lc_u64 *)(stage[p] + off + ((b * nranks + rank) * LC_ST_PARTS + j) * 16), e, n);
		}
	}
	// The own part, while the peers' parts travel.
	lc_u8 *own = out + (lc_u64)rank * n;
	if (own != src) lc_put_range(own + lo, src + lo, len, threadIdx.x, blockDim.x);
	// Receive: wait for the part of every peer, thread i - 1 for the peer
	// i places before (side by side: one thread polling every peer in turn
	// added a load's latency per peer), then copy them all out at once
	// (their flags come within a microsecond of one another, and one copy
	// of all the parts keeps more loads in flight than a copy after each
	// wait).
	const lc_u64 start = lc_globaltimer();
	const lc_u8 *area = stage[rank] + off;
	for (lc_u32 i = 1 + threadIdx.x; i < nranks; i += blockDim.x) {
		const lc_u32 q = (rank + nranks - i) % nranks;
		if (!lc_st_wait((const lc_u64 *)(area + ((b * nranks + q) * LC_ST_PARTS + j) * 16), e, n, q, start,
		                timeout_ns, abort_flag, rec))
			failed = 1;
	}
	__syncthreads();
	// On a failure every thread skips the copy alike (failed is read
	// after the barrier that follows its last write).
	if (!failed) {
		if ((((lc_u64)out + lo) & 15) == 0 && (n & 15) == 0) {
			lc_st_recv(area, flag_bytes + b * nranks * slot + lo, slot, rank, nranks, out, n, lo, len);
		} else {
			for (lc_u32 i = 1; i < nranks; i++) {
				const lc_u32 q = (rank + nranks - i) % nranks;
				lc_put_range(out + (lc_u64)q * n + lo, area + flag_bytes + (b * nranks + q) * slot + lo, len,
				             threadIdx.x, blockDim.x);
			}
		}
	}
	__syncthreads();
	if (threadIdx.x == 0) (void)lc_agp_arrive(arrive, 0, count, e, false, false);
}
