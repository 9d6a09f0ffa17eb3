// Latency kernels: a fused put + signal for small transfers, and
// device-initiated loops (put_signal ping-pong, window barrier) that time
// the protocol without host launches in the way.

// Release store and acquire fence at system scope: lighter than the full
// sequentially consistent fence of __threadfence_system.
__device__ __forceinline__ void lc_store_release_sys(lc_u64 *p, lc_u64 v) {
	asm volatile("st.release.sys.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}

__device__ __forceinline__ void lc_fence_acquire_sys() { asm volatile("fence.acq_rel.sys;" ::: "memory"); }

// lc_fence_scope is fence.acq_rel at GPU scope (gpu: everything at stake
// is this GPU's memory) or system scope (peers' memory, host memory).
__device__ __forceinline__ void lc_fence_scope(int gpu) {
	if (gpu) {
		asm volatile("fence.acq_rel.gpu;" ::: "memory");
	} else {
		asm volatile("fence.acq_rel.sys;" ::: "memory");
	}
}

// GPU-scope release store and acquire load: enough when every thread that
// takes part runs on this GPU (ranks that share one device), and far
// cheaper than system scope, which waits for the stores to be visible to
// other devices and the host.
__device__ __forceinline__ void lc_store_release_gpu(lc_u64 *p, lc_u64 v) {
	asm volatile("st.release.gpu.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}

// lc_signal_release_sys stores (op 0) or adds (op 1) value at slot with
// system-scope release semantics.
__device__ __forceinline__ void lc_signal_release_sys(lc_u64 *slot, lc_u64 value, int op) {
	if (op == 0) {
		lc_store_release_sys(slot, value);
	} else {
		asm volatile("red.release.sys.global.add.u64 [%0], %1;" ::"l"(slot), "l"(value) : "memory");
	}
}

// lc_put_signal copies n bytes with the threads of one block, then thread 0
// signals the slot with a system-scope release (op 0: store value, op 1:
// atomic add): the block barrier orders every thread's copy before it. One
// launch instead of two.
LC_KERNEL void lc_put_signal(lc_u8 *dst, const lc_u8 *src, lc_u64 n, lc_u64 *slot, lc_u64 value, int op) {
	lc_put_range(dst, src, n, threadIdx.x, blockDim.x);
	__syncthreads();
	if (threadIdx.x == 0) lc_signal_release_sys(slot, value, op);
}

// lc_pp_put_signal is one side of a device-initiated put_signal ping-pong:
// for i = 1..iters the initiator copies n bytes (one thread) into the
// peer's data, fences system-wide and stores i into the peer's slot, then
// waits for its own slot to reach i; the responder waits first, then does
// the same. Slots start at 0. *out_ns gets the elapsed ns, or ~0 on timeout.
// Ordering variants (variant): 0 release store of the flag and an
// acquire fence after the wait; 1 __threadfence_system before a relaxed
// flag store, acquire fence after; 2 acq_rel fences on both sides; 3 no
// ordering at all (a floor for measurements, not a correct protocol); 4
// release store and an acquire load of the flag; 6 (barrier only) release
// stores to the peers' rows and an acquire load of each peer's slot; 7
// variant 4 and 8 (barrier only) variant 6 at GPU scope, for peers whose
// memory and threads are on this GPU; 9 polls the flag with GPU-scope
// acquire loads (no load after the poll) and stores it with a GPU-scope
// release. 10 and 11 are 9 and 4 with the source read into a register
// before the wait (a private source, which no peer writes): the read then
// leaves the path from the wait to the flag.
__device__ __forceinline__ lc_u64 lc_load_acquire_sys(const lc_u64 *p) {
	lc_u64 v;
	asm volatile("ld.acquire.sys.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
	return v;
}

__device__ __forceinline__ lc_u64 lc_load_acquire_gpu(const lc_u64 *p) {
	lc_u64 v;
	asm volatile("ld.acquire.gpu.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
	return v;
}

__device__ __forceinline__ void lc_flag_store(lc_u64 *p, lc_u64 v, int variant) {
	switch (variant) {
	case 0:
	case 4:
	case 5: lc_store_release_sys(p, v); break;
	case 11: lc_store_release_sys(p, v); break;
	case 7:
	case 9:
	case 10: lc_store_release_gpu(p, v); break;
	case 1: __threadfence_system(); lc_store_volatile(p, v); break;
	case 2: asm volatile("fence.acq_rel.sys;" ::: "memory"); lc_store_volatile(p, v); break;
	default: lc_store_volatile(p, v);
	}
}

// lc_after_wait orders what follows a wait that saw flag p reach its
// value: a fence, or (variants 4, 5) an acquire load of the flag itself.
__device__ __forceinline__ void lc_after_wait(int variant, const lc_u64 *p) {
	if (variant == 3 || variant == 9 || variant == 10) return;
	if (variant == 4 || variant == 5 || variant == 11) {
		(void)lc_load_acquire_sys(p);
		return;
	}
	if (variant == 7) {
		(void)lc_load_acquire_gpu(p);
		return;
	}
	lc_fence_acquire_sys();
}

// lc_poll reads the flag a ping-pong waits on: a volatile load, or for
// variant 9 a GPU-scope acquire load (the poll that sees the value is the
// acquire, so nothing follows it).
__device__ __forceinline__ lc_u64 lc_poll(const lc_u64 *p, int variant) {
	return variant == 9 || variant == 10 ? lc_load_acquire_gpu(p) : lc_load_volatile(p);
}

LC_KERNEL void lc_pp_put_signal(lc_u8 *peer_data, const lc_u8 *src, lc_u64 n, lc_u64 *peer_slot,
                                            lc_u64 *my_slot, lc_u64 iters, int initiator, lc_u64 timeout_ns,
                                            lc_u64 *out_ns, int variant) {
	if (threadIdx.x != 0 || blockIdx.x != 0) return;
	const lc_u64 start = lc_globaltimer();
	const bool word = n == 8 && ((lc_u64)peer_data & 7) == 0 && ((lc_u64)src & 7) == 0;
	const bool early = word && variant >= 10;
	for (lc_u64 i = 1; i <= iters; i++) {
		const lc_u64 payload = early ? *(const lc_u64 *)src : 0;
		if (!initiator) {
			while (lc_poll(my_slot, variant) < i) {
				if (timeout_ns != 0 && lc_globaltimer() - start >= timeout_ns) {
					if (out_ns) *out_ns = ~0ull;
					return;
				}
			}
			lc_after_wait(variant, my_slot);
		}
		if (early) {
			*(volatile lc_u64 *)peer_data = payload;
		} else if (word) {
			*(volatile lc_u64 *)peer_data = *(const lc_u64 *)src;
		} else {
			for (lc_u64 b = 0; b < n; b++) peer_data[b] = src[b];
		}
		lc_flag_store(peer_slot, i, variant);
		if (initiator) {
			while (lc_poll(my_slot, variant) < i) {
				if (timeout_ns != 0 && lc_globaltimer() - start >= timeout_ns) {
					if (out_ns) *out_ns = ~0ull;
					return;
				}
			}
			lc_after_wait(variant, my_slot);
		}
	}
	if (out_ns) *out_ns = lc_globaltimer() - start;
}

// lc_row is rank p's row: from the pointer table rows, or, for a symmetric
// window (rows NULL), by arithmetic in its flat range.
__device__ __forceinline__ lc_u64 *lc_row(lc_u64 *const *rows, lc_u64 base, lc_u64 stride, lc_u32 p) {
	return rows ? rows[p] : (lc_u64 *)(base + (lc_u64)p * stride);
}

// lc_barrier_loop runs iters window barriers back to back on the device:
// rank p's slot row (nranks slots, slot q written by rank q) as mapped here
// is rows[p], or base + p*stride when rows is NULL (a symmetric window);
// barrier e writes e into slot `rank` of every row and waits until every
// slot of its own row reaches e. Rows start at 0.
LC_KERNEL void lc_barrier_loop(lc_u64 *const *rows, lc_u64 base, lc_u64 stride, lc_u32 rank, lc_u32 nranks, lc_u64 iters,
                                           lc_u64 timeout_ns, lc_u64 *out_ns, int variant) {
	if (threadIdx.x != 0 || blockIdx.x != 0) return;
	const lc_u64 start = lc_globaltimer();
	const lc_u64 *mine = lc_row(rows, base, stride, rank);
	for (lc_u64 e = 1; e <= iters; e++) {
		if (variant == 6 || variant == 8) {
			// Release stores to the peers only, then per-slot acquire
			// loads: no full fence, and no store to our own row (8: at
			// GPU scope, every rank on this GPU).
			for (lc_u32 i = 1; i < nranks; i++) {
				lc_u64 *slot = lc_row(rows, base, stride, (rank + i) % nranks) + rank;
				if (variant == 8) {
					lc_store_release_gpu(slot, e);
				} else {
					lc_store_release_sys(slot, e);
				}
			}
			for (lc_u32 i = 1; i < nranks; i++) {
				const lc_u32 p = (rank + i) % nranks;
				while (lc_load_volatile(mine + p) < e) {
					if (timeout_ns != 0 && lc_globaltimer() - start >= timeout_ns) {
						if (out_ns) *out_ns = ~0ull;
						return;
					}
				}
				if (variant == 8) {
					(void)lc_load_acquire_gpu(mine + p);
				} else {
					(void)lc_load_acquire_sys(mine + p);
				}
			}
			continue;
		}
		if (variant == 0 || variant == 4 || variant == 5) {
			for (lc_u32 p = 0; p < nranks; p++) lc_store_release_sys(lc_row(rows, base, stride, p) + rank, e);
		} else {
			if (variant == 1) __threadfence_system();
			if (variant == 2) asm volatile("fence.acq_rel.sys;" ::: "memory");
			for (lc_u32 p = 0; p < nranks; p++) lc_store_volatile(lc_row(rows, base, stride, p) + rank, e);
		}
		for (lc_u32 p = 0; p < nranks; p++) {
			while (lc_load_volatile(mine + p) < e) {
				if (timeout_ns != 0 && lc_globaltimer() - start >= timeout_ns) {
					if (out_ns) *out_ns = ~0ull;
					return;
				}
			}
		}
		lc_after_wait(variant, mine);
	}
	if (out_ns) *out_ns = lc_globaltimer() - start;
}
