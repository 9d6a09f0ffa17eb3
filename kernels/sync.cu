// Synchronization kernels: signal, wait, barrier, counter add and the raw
// flag ping-pong. All run one thread; extra threads return at once.
//
// Ordering: a signal is a system-scope release (__threadfence_system before
// the store), a wait an acquire (volatile loads, then __threadfence_system),
// so data put before a signal is visible to work ordered after the wait.
// Waits never trap (a trap would kill the context): on timeout or abort
// they fill the error record and return.

#define LC_ONE_THREAD() \
	if (threadIdx.x != 0 || blockIdx.x != 0) return

// lc_signal: op 0 stores value into *slot, op 1 adds value to it atomically.
LC_KERNEL void lc_signal(lc_u64 *slot, lc_u64 value, int op) {
	LC_ONE_THREAD();
	__threadfence_system();
	if (op == 0) {
		lc_store_volatile(slot, value);
	} else {
		atomicAdd_system((unsigned long long *)slot, (unsigned long long)value);
	}
}

// lc_wait_body spins until SUM(slots[i*stride], i < count) compares true
// with target, or the abort flag (host-mapped, may be null) becomes
// non-zero, or timeout_ns (0: none) passes by %globaltimer. stride is in
// bytes. One thread runs it; failures go to rec.
__device__ void lc_wait_body(const lc_u8 *slots, lc_u32 count, lc_u64 stride, int op, lc_u64 target,
                             lc_u64 timeout_ns, const lc_u32 *abort_flag, lc_record *rec) {
	const lc_u64 start = lc_globaltimer();
	lc_u64 host_at = LC_HOST_NS;
	for (lc_u32 spins = 0;;) {
		lc_u64 sum = 0, lowest = ~0ull;
		lc_u32 low_slot = 0;
		for (lc_u32 i = 0; i < count; i++) {
			const lc_u64 v = lc_load_volatile((const lc_u64 *)(slots + (lc_u64)i * stride));
			sum += v;
			if (v < lowest) {
				lowest = v;
				low_slot = i;
			}
		}
		if (lc_compare(sum, target, op)) {
			// Acquire: an acquire load of a single slot (lighter), a
			// system fence for a sum.
			if (count == 1) {
				(void)lc_load_acquire_sys((const lc_u64 *)slots);
			} else {
				__threadfence_system();
			}
			return;
		}
		// The clock every 64 polls; host memory (the record, the abort
		// flag) as lc_host_look allows. A poisoned record (an earlier
		// wait failed) ends the wait without a record of its own.
		if ((++spins & 63) != 0) continue;
		if (lc_wait_over(rec, abort_flag, timeout_ns, lc_globaltimer() - start, host_at, low_slot, sum, target)) return;
	}
}

// lc_wait is lc_wait_body as a one-thread kernel.
LC_KERNEL void lc_wait(const lc_u8 *slots, lc_u32 count, lc_u64 stride, int op, lc_u64 target,
                                   lc_u64 timeout_ns, const lc_u32 *abort_flag, lc_record *rec) {
	LC_ONE_THREAD();
	lc_wait_body(slots, count, stride, op, target, timeout_ns, abort_flag, rec);
}

// lc_barrier is one rank's arrival at a window barrier of nranks ranks.
//
// rows[p] is the address, as mapped here, of rank p's slot row: nranks
// 64-bit slots, slot q written only by rank q. rows[rank] is this rank's own
// row. epoch is this rank's barrier counter in device memory, so the same
// rows serve any number of barriers: the kernel increments it to e, writes e
// into slot `rank` of every row (own included), then waits until every slot
// of its own row is >= e.
LC_KERNEL void lc_barrier(lc_u64 *epoch, lc_u64 *const *rows, lc_u32 rank, lc_u32 nranks,
                                      lc_u64 timeout_ns, const lc_u32 *abort_flag, lc_record *rec) {
	LC_ONE_THREAD();
	if (lc_poisoned(rec)) return;
	const lc_u64 e = lc_load_volatile(epoch) + 1;
	lc_store_volatile(epoch, e);
	__threadfence_system();
	for (lc_u32 p = 0; p < nranks; p++) lc_store_volatile(rows[p] + rank, e);
	const lc_u64 *mine = rows[rank];
	const lc_u64 start = lc_globaltimer();
	lc_u64 host_at = LC_HOST_NS;
	lc_u32 from = 0;
	for (lc_u32 spins = 0;;) {
		while (from < nranks && lc_load_volatile(mine + from) >= e) from++;
		if (from == nranks) {
			__threadfence_system();
			return;
		}
		if ((++spins & 63) != 0) continue;
		if (lc_wait_over(rec, abort_flag, timeout_ns, lc_globaltimer() - start, host_at, from, lc_load_volatile(mine + from), e))
			return;
	}
}

// lc_counter_add adds value to a local completion counter after making all
// prior writes of the stream visible system-wide.
LC_KERNEL void lc_counter_add(lc_u64 *counter, lc_u64 value) {
	LC_ONE_THREAD();
	__threadfence_system();
	atomicAdd((unsigned long long *)counter, (unsigned long long)value);
}

// lc_pingpong is one side of a raw flag ping-pong for latency benchmarks:
// plain volatile stores and loads, no fences. For i = 1..iters the
// initiator stores i into *peer then waits for *mine >= i; the responder
// waits for *mine >= i then stores i into *peer. Both flags start at 0.
// *out_ns (may be null) receives the elapsed %globaltimer ns, or ~0 if
// timeout_ns (0: none) passed first.
LC_KERNEL void lc_pingpong(lc_u64 *mine, lc_u64 *peer, lc_u64 iters, int initiator, lc_u64 timeout_ns,
                                       lc_u64 *out_ns) {
	LC_ONE_THREAD();
	const lc_u64 start = lc_globaltimer();
	for (lc_u64 i = 1; i <= iters; i++) {
		if (initiator) lc_store_volatile(peer, i);
		while (lc_load_volatile(mine) < i) {
			if (timeout_ns != 0 && lc_globaltimer() - start >= timeout_ns) {
				if (out_ns) *out_ns = ~0ull;
				return;
			}
		}
		if (!initiator) lc_store_volatile(peer, i);
	}
	if (out_ns) *out_ns = lc_globaltimer() - start;
}

// lc_proxy_call hands one piece of stream work to a host thread (a CUDA
// graph's call into the network proxy): it counts the call in *calls
// (device memory, this kernel's alone), rings *bell (host-mapped) with the
// count after a system fence, and waits until the host stores a value at
// least as large into *done (host-mapped): what the host did is then
// ordered before what follows on the stream. Unlike other waits it does
// not end on a poisoned record (the host's work must be over before the
// stream moves on); it ends on the abort flag, or after timeout_ns (0:
// none), when it records a failure whose slot is LC_PROXY_SLOT.
#define LC_PROXY_SLOT 0x7ffffffeu
//
// strong (1): the bell is fenced after its store too, and the polls are
// system-scope acquire loads; 0: volatile store and polls (measurements).
LC_KERNEL void lc_proxy_call(lc_u64 *calls, lc_u64 *bell, const lc_u64 *done, lc_u64 timeout_ns,
                                         const lc_u32 *abort_flag, lc_record *rec, int strong) {
	LC_ONE_THREAD();
	const lc_u64 e = lc_load_volatile(calls) + 1;
	lc_store_volatile(calls, e);
	__threadfence_system();
	lc_store_volatile(bell, e);
	if (strong) __threadfence_system();
	const lc_u64 start = lc_globaltimer();
	for (lc_u32 spins = 0;;) {
		// A read of host memory crosses PCIe: each poll takes about 1 us.
		const lc_u64 v = strong ? lc_load_acquire_sys(done) : lc_load_volatile(done);
		if (v >= e) {
			__threadfence_system();
			return;
		}
		if ((++spins & 15) != 0) continue;
		if (lc_aborted(abort_flag)) {
			lc_fail(rec, LC_STATUS_ABORTED, LC_PROXY_SLOT, v, e, lc_globaltimer() - start);
			return;
		}
		if (timeout_ns != 0 && lc_globaltimer() - start >= timeout_ns) {
			lc_fail(rec, LC_STATUS_TIMEOUT, LC_PROXY_SLOT, v, e, lc_globaltimer() - start);
			return;
		}
	}
}
