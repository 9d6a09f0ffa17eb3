// (Named to sort after put.cu, signal_put.cu and sync_agp.cu, whose
// functions it uses.)
//
// One-launch execs of the persistent all-gather on path "sm": the data,
// the synchronization and the exec counter in a single kernel, so an exec
// costs one launch (one graph node) instead of four.
//
// Both kernels end with the last block to finish (an arrival counter next
// to the exec counter) updating the exec counter: every block reads the
// counter first, and the last block writes it only after all blocks
// arrived, so every block of the launch works on the same exec number.

// lc_agp_arrive is called by thread 0 of every block at the end, after the
// block's threads synchronized; it returns true in the last block to
// arrive, which has reset the arrival counter and the block ticket and
// stored e as the exec counter. The block's writes are ordered before its
// arrival with a GPU-scope fence; the last block fences system-wide before
// anything it writes for the peers, which orders all blocks' writes (the
// arrivals chain them) before its signals.
// fence false skips the block's fence (the flagged-line kernel: nothing
// the last block signals depends on the other blocks' writes); sysfence
// false skips the last block's system-wide one (the flagged-line kernel,
// whose last block signals nothing: the next launch on the stream reads
// the counter after this kernel ended; on 2 x H200 that fence cost about
// 1 us of a 4.6 us exec).
__device__ bool lc_agp_arrive(lc_u32 *arrive, lc_u32 *ticket, lc_u64 *count, lc_u64 e, bool fence, bool sysfence) {
	if (gridDim.x > 1) {
		if (fence) __threadfence();
		if (atomicAdd(arrive, 1u) != gridDim.x - 1) return false;
	}
	if (sysfence) __threadfence_system();
	*(volatile lc_u32 *)arrive = 0;
	if (ticket) *(volatile lc_u32 *)ticket = 0;
	lc_store_volatile(count, e);
	return true;
}

// LC_PEERS_UNROLL is how many 16-byte words each thread of lc_put_peers
// has in flight: loads first, then the stores.
#define LC_PEERS_UNROLL 4

// lc_put_peers stores len bytes of src at ptrs[p] + off of every peer p
// (rank + 1, rank + 2, ...), as thread tid of nth. Each word is loaded once
// and stored to every peer: loading it again per peer put a load's latency
// on the path once per peer, and spreads the stores of every moment over
// all the peers' links. src and every ptrs[p] + off must be 16-byte
// aligned (lc_put_peers_ok).
__device__ void lc_put_peers(lc_u8 *const *ptrs, lc_u64 off, lc_u32 rank, lc_u32 nranks, const lc_u8 *src,
                             lc_u64 len, lc_u64 tid, lc_u64 nth) {
	const lc_u64 words = len / 16;
	const uint4 *s = (const uint4 *)src;
	for (lc_u64 i = tid; i < words; i += LC_PEERS_UNROLL * nth) {
		uint4 v[LC_PEERS_UNROLL];
#pragma unroll
		for (int k = 0; k < LC_PEERS_UNROLL; k++)
			if (i + k * nth < words) v[k] = s[i + k * nth];
		for (lc_u32 j = 1; j < nranks; j++) {
			uint4 *d = (uint4 *)(ptrs[(rank + j) % nranks] + off);
#pragma unroll
			for (int k = 0; k < LC_PEERS_UNROLL; k++)
				if (i + k * nth < words) d[i + k * nth] = v[k];
		}
	}
	const lc_u64 done = words * 16;
	if (done == len) return;
	for (lc_u32 j = 1; j < nranks; j++)
		lc_put_range(ptrs[(rank + j) % nranks] + off + done, src + done, len - done, tid, nth);
}

// lc_put_peers_ok reports whether lc_put_peers may copy src to ptrs[p] +
// off: both 16-byte aligned (the pointers of ptrs are allocations).
__device__ __forceinline__ bool lc_put_peers_ok(const lc_u8 *src, lc_u64 off) {
	return (((lc_u64)src | off) & 15) == 0;
}

// lc_agp_copy_part is the data movement of an exec, by this block: blocks
// below own_blocks copy the own chunk (n bytes) into place; the others put
// the first m bytes of the chunk to every peer, peers in the order rank+1,
// rank+2, ..., and, when own_blocks is 0, then copy the own chunk too
// (unless src is already in place).
__device__ void lc_agp_copy_part(lc_u8 *const *bases, lc_u32 rank, lc_u32 nranks, const lc_u8 *src, lc_u64 n,
                                 lc_u64 m, lc_u32 own_blocks) {
	const lc_u64 off = (lc_u64)rank * n;
	lc_u8 *own = bases[rank] + off;
	if (blockIdx.x < own_blocks) {
		const lc_u64 tid = (lc_u64)blockIdx.x * blockDim.x + threadIdx.x, nth = (lc_u64)own_blocks * blockDim.x;
		lc_put_range(own, src, n, tid, nth);
		return;
	}
	const lc_u64 b = blockIdx.x - own_blocks, nb = gridDim.x - own_blocks;
	const lc_u64 tid = b * blockDim.x + threadIdx.x, nth = nb * blockDim.x;
	if (lc_put_peers_ok(src, off)) {
		lc_put_peers(bases, off, rank, nranks, src, m, tid, nth);
	} else {
		for (lc_u32 i = 1; i < nranks; i++) lc_put_range(bases[(rank + i) % nranks] + off, src, m, tid, nth);
	}
	if (own != src && own_blocks == 0) lc_put_range(own, src, n, tid, nth);
}

// lc_agp_copy is lc_agp_one's data movement alone, for execs whose
// handshakes are separate kernels and whose last n - m bytes per peer go
// through the copy engines at the same time: the own chunk by one block in
// 8 (with 8 blocks or more; unless in place) and the first m bytes to the
// peers by the others.
LC_KERNEL void lc_agp_copy(lc_u8 *const *bases, lc_u32 rank, lc_u32 nranks, const lc_u8 *src, lc_u64 n,
                                       lc_u64 m) {
	const bool copy_own = bases[rank] + (lc_u64)rank * n != src;
	lc_agp_copy_part(bases, rank, nranks, src, n, m, copy_own && gridDim.x >= 8 ? gridDim.x / 8 : 0);
}

// lc_agp_one runs a whole exec e = count+1 of n bytes per rank on any grid.
// The block that takes ticket 0 (so it is running: no block waits for one
// that may not be scheduled) is the leader:
//  1. the leader stores e into every peer's ready slot and waits until every
//     local ready slot is >= e (no put of exec e lands on a rank still using
//     exec e-1), then publishes e, or e with the top bit set on failure, in
//     *go; the other blocks spin on *go (device memory: no host-mapped read
//     per block);
//  2. the blocks copy: with 8 blocks or more, one block in 8 copies the own
//     chunk into place (skipped in place), without waiting for step 1,
//     while the others put the chunk to the peers, peers in the order
//     rank+1, rank+2, ...; with fewer, every block does both;
//  3. the last block to arrive stores tag(e, n) into every peer's done slot
//     and waits until every local done slot equals tag(e, n) (a peer with
//     another n never matches).
// ctl is 16 bytes of zeroed device memory (arrival counter, ticket, go);
// bases[p] is rank p's window data as mapped here.
#define LC_AGP_FAILED (1ull << 63)

LC_KERNEL void lc_agp_one(lc_u64 *count, lc_u32 *ctl, lc_u64 *const *ready_remote,
                                      lc_u64 *const *ready_local, lc_u64 *const *done_remote,
                                      lc_u64 *const *done_local, lc_u32 rank, lc_u32 nranks, lc_u8 *const *bases,
                                      const lc_u8 *src, lc_u64 n, lc_u64 timeout_ns, const lc_u32 *abort_flag,
                                      lc_record *rec) {
	__shared__ int failed, lead, last;
	__shared__ lc_u64 epoch;
	lc_u32 *arrive = ctl, *ticket = ctl + 1;
	lc_u64 *go = (lc_u64 *)(ctl + 2);
	const lc_u64 off = (lc_u64)rank * n;
	lc_u8 *own = bases[rank] + off;
	const bool copy_own = own != src;
	// With 8 blocks or more, one in 8 copies the own chunk: those need no
	// handshake (the chunk is ours) and start at once.
	const lc_u32 own_blocks = copy_own && gridDim.x >= 8 ? gridDim.x / 8 : 0;
	const bool own_block = blockIdx.x < own_blocks;
	if (threadIdx.x == 0) {
		epoch = lc_load_volatile(count) + 1;
		failed = 0;
		lead = !own_block && atomicAdd(ticket, 1u) == 0;
	}
	__syncthreads();
	const lc_u64 e = epoch;
	if (lead) {
		// The look at the record (host-mapped: a read across PCIe of
		// about a microsecond) is issued first and its answer used after
		// the peers' ready signals came, so that it overlaps them; the
		// ready signals go out before it is known (a poisoned record then
		// fails the exec before its copies and its done signals, and the
		// peers' done waits fail). Thread i - 1 waits for the peer i
		// places after (side by side: one thread waiting for every peer
		// in turn added a load's latency per peer).
		lc_u32 status = LC_STATUS_OK;
		if (threadIdx.x == 0) {
			if (rec != 0) status = ((const volatile lc_record *)rec)->status;
			for (lc_u32 i = 1; i < nranks; i++) lc_store_volatile(ready_remote[(rank + i) % nranks], e);
		}
		const lc_u64 start = lc_globaltimer();
		for (lc_u32 i = 1 + threadIdx.x; i < nranks; i += blockDim.x) {
			const lc_u32 p = (rank + i) % nranks;
			if (!lc_agp_poll(ready_local[p], LC_CMP_GE, e, p, start, timeout_ns, abort_flag, rec)) failed = 1;
		}
		__syncthreads();
		if (threadIdx.x == 0) {
			const int f = failed || status != LC_STATUS_OK;
			failed = f;
			__threadfence();
			lc_store_volatile(go, f ? e | LC_AGP_FAILED : e);
		}
	} else if (!own_block && threadIdx.x == 0) {
		lc_u64 v;
		while (((v = lc_load_volatile(go)) & ~LC_AGP_FAILED) != e) {
		}
		failed = (v & LC_AGP_FAILED) != 0;
	}
	__syncthreads();
	if (own_block || !failed) lc_agp_copy_part(bases, rank, nranks, src, n, n, own_blocks);
	__syncthreads();
	if (threadIdx.x == 0) last = lc_agp_arrive(arrive, ticket, count, e, true, true);
	__syncthreads();
	// A failed start (go, device memory: no read across PCIe) sends no
	// done signals, so the peers' waits fail too.
	if (!last || (lc_load_volatile(go) & LC_AGP_FAILED)) return;
	const lc_u64 tag = (e & LC_AGP_KMASK) << LC_AGP_NBITS | (n & LC_AGP_NMASK);
	if (threadIdx.x == 0)
		for (lc_u32 i = 1; i < nranks; i++) lc_store_volatile(done_remote[(rank + i) % nranks], tag);
	// The done waits side by side, as the ready ones.
	const lc_u64 start = lc_globaltimer();
	for (lc_u32 i = 1 + threadIdx.x; i < nranks; i += blockDim.x) {
		const lc_u32 p = (rank + i) % nranks;
		if (!lc_agp_poll(done_local[p], LC_CMP_EQ, tag, p, start, timeout_ns, abort_flag, rec)) return;
	}
}


// Low-latency execs (lc_agp_ll): the chunk travels as 16-byte lines of
// {data0, flag, data1, flag} (8 data bytes per line), each written with one
// 16-byte store, into a staging area of the receiver; the flag is the exec
// number, so a line whose flags match is complete and the receiver needs no
// other signal and no fence. Line 0 carries n instead of data.
//
// Staging: rank r's area holds, for b in {0, 1} and every writer q, a slot
// of LC_LL_SLOT bytes at (b * nranks + q) * LC_LL_SLOT; exec e uses b = e & 1.
// Writing slot b of exec e + 2 is safe without a handshake: a rank starts
// exec e + 2 after its exec e + 1 completed, which needed the peer's lines
// of exec e + 1, which the peer sends after it finished exec e, the last
// reader of slot b.
#define LC_LL_MAX (64ull << 10)
#define LC_LL_SLOT (16ull * (1 + LC_LL_MAX / 8))

// lc_ll_store writes one line: variant bit 0 clear, a volatile 16-byte
// store; set, a plain (weak) one, which the memory system may combine.
__device__ __forceinline__ void lc_ll_store(lc_u8 *p, lc_u32 d0, lc_u32 d1, lc_u32 f, int variant) {
	if (variant & 1) {
		asm volatile("st.global.v4.u32 [%0], {%1, %2, %3, %4};" ::"l"(p), "r"(d0), "r"(f), "r"(d1), "r"(f) : "memory");
	} else {
		asm volatile("st.volatile.global.v4.u32 [%0], {%1, %2, %3, %4};" ::"l"(p), "r"(d0), "r"(f), "r"(d1), "r"(f)
		             : "memory");
	}
}

__device__ __forceinline__ void lc_ll_load(const lc_u8 *p, lc_u32 &d0, lc_u32 &f0, lc_u32 &d1, lc_u32 &f1) {
	asm volatile("ld.volatile.global.v4.u32 {%0, %1, %2, %3}, [%4];"
	             : "=r"(d0), "=r"(f0), "=r"(d1), "=r"(f1)
	             : "l"(p)
	             : "memory");
}

// lc_ll_word reads up to 8 bytes of p (k of them, k <= 8), little-endian.
__device__ __forceinline__ lc_u64 lc_ll_word(const lc_u8 *p, lc_u64 k) {
	if (k == 8 && ((lc_u64)p & 7) == 0) return *(const lc_u64 *)p;
	lc_u64 v = 0;
	for (lc_u64 i = 0; i < k; i++) v |= (lc_u64)p[i] << (8 * i);
	return v;
}

__device__ __forceinline__ void lc_ll_put_word(lc_u8 *p, lc_u64 v, lc_u64 k) {
	if (k == 8 && ((lc_u64)p & 7) == 0) {
		*(lc_u64 *)p = v;
		return;
	}
	for (lc_u64 i = 0; i < k; i++) p[i] = (lc_u8)(v >> (8 * i));
}

// lc_agp_ll_wait polls line j of the slot of peer q (who) until both its
// flags show flag, then leaves its data word in w. It returns false on a
// failure, recorded here (line 0 with another n than n, a timeout, an
// abort) or by another thread of the block (failed). Once a wait has
// lasted LC_HOST_NS, host-mapped memory (the record, the abort flag)
// is read by one waiting thread of the block at a time, at most every
// LC_HOST_NS (host_next, the block's: whichever thread claims it):
// reads across PCIe from many blocks queue behind one another, and a read
// every 64 polls held whole execs back (docs/results/allgather-auto.md;
// see lc_host_look). Any thread still waiting may be the one, so an
// abort or an earlier failure is seen within LC_HOST_NS whichever
// peer is missing.
__device__ bool lc_agp_ll_wait(const lc_u8 *line, lc_u64 j, lc_u32 flag, lc_u64 e, lc_u64 n, lc_u32 q, lc_u64 start,
                               lc_u64 timeout_ns, const lc_u32 *abort_flag, lc_record *rec, int variant,
                               volatile int *failed, unsigned long long *host_next, lc_u64 &w) {
	const lc_u64 target = (e & LC_AGP_KMASK) << LC_AGP_NBITS | (n & LC_AGP_NMASK);
	for (lc_u32 spins = 1;; spins++) {
		lc_u32 d0, f0, d1, f1;
		lc_ll_load(line, d0, f0, d1, f1);
		w = (lc_u64)d1 << 32 | d0;
		if (f0 == flag && f1 == flag) {
			if (j > 0 || w == n) return true;
			// Line 0 of this exec came with another n: it can never match.
			lc_fail(rec, LC_STATUS_MISMATCH, q, (e & LC_AGP_KMASK) << LC_AGP_NBITS | (w & LC_AGP_NMASK), target,
			        lc_globaltimer() - start);
			*failed = 1;
			return false;
		}
		// variant bit 1: back off between polls of a line.
		if (variant & 2) __nanosleep(100);
		if ((spins & 63) != 0) continue;
		if (*failed) return false;
		const lc_u64 now = lc_globaltimer(), el = now - start;
		if (el < LC_HOST_NS && (timeout_ns == 0 || el < timeout_ns)) continue;
		const unsigned long long h = *(volatile unsigned long long *)host_next;
		const bool host = now >= h && atomicCAS(host_next, h, (unsigned long long)(now + LC_HOST_NS)) == h;
		if (host && lc_poisoned(rec)) {
			*failed = 1;
			return false;
		}
		const bool ab = host && lc_aborted(abort_flag);
		if (ab || (timeout_ns != 0 && el >= timeout_ns)) {
			lc_u32 h0, hf0, h1, hf1;
			lc_ll_load(line - 16 * j, h0, hf0, h1, hf1);
			const lc_u64 hn = (lc_u64)h1 << 32 | h0;
			const lc_u64 obs = hf0 == flag && hf1 == flag ? (e & LC_AGP_KMASK) << LC_AGP_NBITS | (hn & LC_AGP_NMASK)
			                                              : ((lc_u64)hf0 & LC_AGP_KMASK) << LC_AGP_NBITS;
			lc_fail(rec, ab ? LC_STATUS_ABORTED : LC_STATUS_TIMEOUT, q, obs, target, el);
			*failed = 1;
			return false;
		}
	}
}

// lc_agp_ll runs exec e = count+1 of n <= LC_LL_MAX bytes per rank. Its
// work is (nranks - 1) * lines items, item t = (i - 1) * lines + j being
// line j to and from the peers i places away: a thread sends line j of
// the chunk to the staging of peer rank+i, copies its share of the own
// chunk into out (unless in place), then polls line j of the slot of
// peer rank-i here and unpacks it into out. One thread per item where the
// grid is large enough: the peers' lines are polled side by side (a
// thread that polled every peer in turn added a load's latency per peer
// to the exec). Its first word is loaded before the exec counter, so the
// two loads overlap. stage[p] is rank p's staging area as mapped here.
// A failure records target tag(e, n) and, as observed, tag(e, n') when the
// peer's line 0 arrived with n' (at once: LC_STATUS_MISMATCH), else the
// exec number it last showed.
LC_KERNEL void lc_agp_ll(lc_u64 *count, lc_u32 *arrive, lc_u8 *const *stage, lc_u32 rank, lc_u32 nranks,
                                     lc_u8 *out, const lc_u8 *src, lc_u64 n, lc_u64 timeout_ns,
                                     const lc_u32 *abort_flag, lc_record *rec, int variant) {
	__shared__ int failed;
	__shared__ unsigned long long host_next;
	const lc_u64 tid = lc_tid(), nth = lc_nthreads();
	const lc_u64 lines = 1 + (n + 7) / 8, items = (lc_u64)(nranks - 1) * lines;
	lc_u64 w0 = n;
	if (tid < items && tid % lines > 0) {
		const lc_u64 at = 8 * (tid % lines - 1);
		w0 = lc_ll_word(src + at, n - at < 8 ? n - at : 8);
	}
	const lc_u64 e = lc_load_volatile(count) + 1;
	// No look at the record here: reads of host-mapped memory from many
	// blocks queue behind one another (about 1.2 us each, measured), so a
	// poisoned record is noticed only by a poll that waits long.
	if (threadIdx.x == 0) {
		failed = 0;
		host_next = 0;
	}
	__syncthreads();
	const lc_u32 flag = (lc_u32)e;
	const lc_u64 b = e & 1;
	for (lc_u64 t = tid; t < items; t += nth) {
		const lc_u64 j = t % lines;
		lc_u64 w = w0;
		if (t != tid) {
			w = n;
			if (j > 0) {
				const lc_u64 at = 8 * (j - 1);
				w = lc_ll_word(src + at, n - at < 8 ? n - at : 8);
			}
		}
		const lc_u32 p = (rank + 1 + (lc_u32)(t / lines)) % nranks;
		lc_ll_store(stage[p] + (b * nranks + rank) * LC_LL_SLOT + 16 * j, (lc_u32)w, (lc_u32)(w >> 32), flag, variant);
	}
	lc_u8 *own = out + (lc_u64)rank * n;
	if (own != src) lc_put_range(own, src, n, tid, nth);
	const lc_u64 start = lc_globaltimer();
	// variant bit 2 skips receiving: a diagnostic that leaves the peers'
	// chunks out (the data checks fail), never a protocol.
	for (lc_u64 t = tid; t < items && !(variant & 4); t += nth) {
		const lc_u64 j = t % lines;
		const lc_u32 q = (rank + nranks - 1 - (lc_u32)(t / lines)) % nranks;
		const lc_u8 *line = stage[rank] + (b * nranks + q) * LC_LL_SLOT + 16 * j;
		lc_u64 w;
		if (!lc_agp_ll_wait(line, j, flag, e, n, q, start, timeout_ns, abort_flag, rec, variant, (volatile int *)&failed,
		                    &host_next, w))
			break;
		if (j == 0) continue;
		const lc_u64 at = 8 * (j - 1);
		lc_ll_put_word(out + (lc_u64)q * n + at, w, n - at < 8 ? n - at : 8);
	}
	__syncthreads();
	if (threadIdx.x == 0) (void)lc_agp_arrive(arrive, 0, count, e, false, (variant & 64) != 0);
}
