// Plan interpreter: one block runs a recorded plan's whole op list, replay
// after replay, with no launch between ops (a plan's "device" mode); or
// every block of the grid does, each with its share of the wide steps (a
// spread plan: sync_grid.cu).
//
// The host compiles each plan op into steps (kernels.PlanStep, 64 bytes):
// a copy (above LC_PLAN_SMALL bytes), fill or reduction done by every
// thread of the block, then a block barrier; or a small copy, store, add
// or wait done by thread 0 alone. A store or add is a release (a fence,
// shared by a run of them, then a relaxed write): the barrier after a
// wide step, or program order for thread 0's own, puts the copy or the
// reduction's result before it. A wait ends with an
// acquire; a block barrier before the next wide step puts every thread's
// part of it after the wait (and after thread 0's small copies). Values
// that move by replay (cumulative signal targets, barrier epochs) are
// value + replay * step.

#define LC_STEP_COPY 0
#define LC_STEP_STORE 1
#define LC_STEP_ADD 2
#define LC_STEP_WAIT 3
#define LC_STEP_FILL_BYTE 4
#define LC_STEP_FILL_IOTA 5
#define LC_STEP_FILL_RAND 6
#define LC_STEP_PUT_SIGNAL 7  // thread 0: a small copy, then a release of value at aux (cmp bit 0: add)
#define LC_STEP_LINE_PUT 8    // n bytes of src and flag value in (n + 7) / 8 16-byte lines at dst (n <= 8: thread 0's)
#define LC_STEP_LINE_WAIT 9   // until the lines at dst show flag value; their n bytes to src, cmp added to aux (n <= 8: thread 0's)
#define LC_STEP_REDUCE 10     // every thread: dst op= src over n bytes; value: type code (LC_DT_*) | operator code (LC_RED_*) << 8
#define LC_STEP_GRID 11       // a spread plan's blocks meet (sync_grid.cu); one block: nothing

// A line drain's count bit: the next step's line, when it comes right
// after, may go out before the drain writes its payload (no peer reads
// this rank's window with get, so none can tell).
#define LC_LINE_SEND_FIRST 1u

// Moving values given at launch (device mode): each word is a step's index
// << LC_PLAN_MOVE_SHIFT | its value in the launch's first replay (rep0), so
// that another plan moving the slots needs no rewrite of the table. They
// apply to a table read into shared memory whole (cached).
#define LC_PLAN_MOVES 20
#define LC_PLAN_MOVE_SHIFT 58
struct lc_plan_moves {
	lc_u64 n;
	lc_u64 v[LC_PLAN_MOVES];
};

// A put_signal step's cmp bit: its source is private (no peer writes it),
// so a wait just before may read it early (LC_PLAN_PREFETCH).
#define LC_PS_PRIVATE 2u

// lc_plan's flags: GPU-scope ordering (every peer on this GPU); poll a
// single slot with acquire loads (GPU scope only), so the poll that sees
// the value is the acquire; no early read of a put_signal's source.
#define LC_PLAN_GPU 1
#define LC_PLAN_POLL_ACQUIRE 2
#define LC_PLAN_NO_PREFETCH 4
// Every block runs the plan, wide steps cut among them (sync_grid.cu).
#define LC_PLAN_SPREAD 8

// Plans of up to this many steps run from shared memory (4 KiB).
#define LC_PLAN_CACHE 64

// Copies of up to this many bytes are thread 0's alone: no block barrier
// around them.
#define LC_PLAN_SMALL 256

// The largest block lc_plan runs with (kernels.PlanThreads): its launch
// bound, so that the reduce step's registers never keep a block of this
// size from launching. Blocks of up to LC_PLAN_MID_THREADS
// (kernels.PlanMidThreads) run the same interpreter built for that bound
// (lc_plan_mid, and the plan server lc_plan_serve): twice the registers a
// thread (128, not 64), and the interpreter's loop keeps its state in them
// rather than in local memory.
#define LC_PLAN_THREADS 512
#define LC_PLAN_MID_THREADS 256

// lc_copy_small is thread 0's copy of n <= LC_PLAN_SMALL bytes. Aligned,
// it loads up to 8 words before it stores any: a store cannot go before
// the load it copies, so a loop of single words waited one trip to
// memory a word (up to 32 of them in a row).
__device__ __forceinline__ void lc_copy_small(lc_u8 *dst, const lc_u8 *src, lc_u64 n) {
	lc_u64 k = 0;
	if ((((lc_u64)dst | (lc_u64)src) & 7) == 0) {
		for (; k < n / 8 * 8;) {
			const lc_u64 w = (n - k) / 8, m = w < 8 ? w : 8;
			lc_u64 v[8];
#pragma unroll
			for (int j = 0; j < 8; j++)
				if (j < m) v[j] = *(const lc_u64 *)(src + k + 8 * j);
#pragma unroll
			for (int j = 0; j < 8; j++)
				if (j < m) *(lc_u64 *)(dst + k + 8 * j) = v[j];
			k += 8 * m;
		}
	}
	for (; k < n; k++) dst[k] = src[k];
}

struct lc_plan_step {
	lc_u32 kind;   // LC_STEP_*
	lc_u32 count;  // wait: slots summed
	lc_u32 cmp;    // wait: LC_CMP_*; put_signal: 1 to add, 0 to store
	lc_u32 op;     // the plan op the step belongs to (for the host)
	lc_u64 dst;    // copy, fill: destination; store, add: the slot; wait: the first slot
	lc_u64 src;    // copy, reduce: source
	lc_u64 n;      // copy, fill, reduce: bytes; wait: bytes between slots
	lc_u64 value;  // store, add: the value; wait: the target; fill: the byte, start or seed; reduce: type | op << 8
	lc_u64 step;   // added to value per replay (store, wait)
	lc_u64 aux;    // put_signal: the slot
};

// lc_plan_fence orders every write before it (thread 0's, and the
// block's before the barrier that precedes it) before thread 0's writes
// after it.
__device__ __forceinline__ void lc_plan_fence(int gpu) { lc_fence_scope(gpu); }

// lc_plan_signal_after_fence writes a signal after lc_plan_fence: a
// fence.acq_rel followed by a relaxed write is a release pattern of the
// PTX memory model, for every such write after the fence. So a run of
// thread 0's signals with nothing written between them takes one fence,
// not a release each: every release waits for the stores before it to
// reach their peers, the previous signal's included.
__device__ __forceinline__ void lc_plan_signal_after_fence(lc_u64 *p, lc_u64 v, int add, int gpu) {
	if (gpu) {
		if (add) {
			asm volatile("red.relaxed.gpu.global.add.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
		} else {
			asm volatile("st.relaxed.gpu.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
		}
	} else if (add) {
		asm volatile("red.relaxed.sys.global.add.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
	} else {
		asm volatile("st.relaxed.sys.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
	}
}

__device__ __forceinline__ bool lc_plan_holds(lc_u64 v, lc_u64 target, lc_u32 cmp) {
	// An if chain, not a switch: no indirect branch in the poll loop.
	if (cmp == LC_CMP_GE) return v >= target;
	if (cmp == LC_CMP_EQ) return v == target;
	if (cmp == LC_CMP_GT) return v > target;
	if (cmp == LC_CMP_NE) return v != target;
	if (cmp == LC_CMP_LE) return v <= target;
	return v < target;
}

// Wait groups: k (2 to LC_LINE_GROUP_MAX) waits in a row run as one step,
// thread g waiting for the g-th, so that the waits for several peers'
// signals are polled side by side (the host's compiler marks the first:
// its count holds k << LC_WAIT_GROUP_SHIFT; a wait's count of slots is in
// the low bits).
#define LC_WAIT_GROUP_SHIFT 24
#define LC_WAIT_SLOTS_MASK 0xffffffu

// lc_plan_wait spins (thread 0) until the sum of the step's slots compares
// true with target; false after recording a timeout or an abort. arr: a
// spread plan's job area (lc_plan_quit), else 0.
__device__ bool lc_plan_wait(const lc_plan_step &s, lc_u64 target, lc_u64 timeout_ns, const lc_u32 *abort_flag,
                             lc_record *rec, lc_u32 tag, lc_u32 index, int flags, lc_u64 *arr, int *claim = 0) {
	const lc_u8 *slots = (const lc_u8 *)s.dst;
	const lc_u32 count = s.count & LC_WAIT_SLOTS_MASK, cmp = s.cmp;
	const lc_u64 stride = s.n;
	const int gpu = flags & LC_PLAN_GPU;
	// One slot at GPU scope: the poll itself may be the acquire.
	const bool pacq = count == 1 && gpu && (flags & LC_PLAN_POLL_ACQUIRE);
	lc_u64 start = 0, host_at = LC_HOST_NS;
	for (lc_u32 spins = 0;;) {
		lc_u64 sum = pacq ? lc_load_acquire_gpu((const lc_u64 *)slots) : lc_load_volatile((const lc_u64 *)slots);
		for (lc_u32 i = 1; i < count; i++) sum += lc_load_volatile((const lc_u64 *)(slots + (lc_u64)i * stride));
		if (lc_plan_holds(sum, target, cmp)) {
			if (pacq) return true;
			if (count == 1) {
				if (gpu) {
					(void)lc_load_acquire_gpu((const lc_u64 *)slots);
				} else {
					(void)lc_load_acquire_sys((const lc_u64 *)slots);
				}
			} else if (gpu) {
				asm volatile("fence.acq_rel.gpu;" ::: "memory");
			} else {
				lc_fence_acquire_sys();
			}
			return true;
		}
		// The clock every 64 polls, never before the first 64, so a wait
		// its signal already satisfies, or soon will, pays none of it;
		// the record and the abort flag (host-mapped) as lc_host_look
		// allows.
		if (spins == 0) start = lc_globaltimer();
		if ((++spins & 63) != 0) continue;
		if (lc_plan_quit(arr, rec, abort_flag, timeout_ns, start, host_at, tag, index, sum, target, claim)) return false;
	}
}

// lc_plan_line_wait spins (thread 0) until the line of step s shows flag
// (both flag words, the same; a later flag, the sender a replay ahead,
// counts too), then writes the payload to s.src and adds s.cmp to the
// slot at s.aux: the put_signal the line carried, done here in program
// order. When next is not null it is the line the next step sends (its
// words and flag read already): it goes first, as soon as the wait is
// over (the step allows it: LC_LINE_SEND_FIRST). False after recording a
// timeout or an abort. In a spread plan (arr, its job area) every block
// waits for the line; own (block 0's) does the rest.
__device__ __forceinline__ bool lc_plan_line_wait(const lc_plan_step &s, lc_u32 flag, lc_u64 timeout_ns,
                                                  const lc_u32 *abort_flag, lc_record *rec, lc_u32 tag, lc_u32 index,
                                                  lc_u8 *next, lc_u64 next_w, lc_u32 next_flag, lc_u64 *arr, bool own) {
	// Read before the spin: each poll's asm clobbers memory, so the
	// compiler would read them after it, on the path to the next step.
	const lc_u8 *line = (const lc_u8 *)s.dst;
	lc_u8 *data = (lc_u8 *)s.src;
	const lc_u64 n = s.n, add = s.cmp;
	lc_u64 *slot_at = (lc_u64 *)s.aux;
	lc_u32 d0, f0, d1, f1;
	lc_u64 start = 0, host_at = LC_HOST_NS;
	for (lc_u32 spins = 0;;) {
		lc_ll_load(line, d0, f0, d1, f1);
		if (f0 == f1 && (int)(f0 - flag) >= 0) break;
		// As lc_plan_wait: the clock every 64 polls, host memory as
		// lc_host_look allows.
		if (spins == 0) start = lc_globaltimer();
		if ((++spins & 63) != 0) continue;
		if (lc_plan_quit(arr, rec, abort_flag, timeout_ns, start, host_at, tag, index, f0, flag)) return false;
	}
	if (!own) return true;
	if (next) lc_ll_store(next, (lc_u32)next_w, (lc_u32)(next_w >> 32), next_flag, 0);
	lc_ll_put_word(data, (lc_u64)d1 << 32 | d0, n);
	asm volatile("red.relaxed.sys.global.add.u64 [%0], %1;" ::"l"(slot_at), "l"(add) : "memory");
	return true;
}

// Line groups: k (2 to LC_LINE_GROUP_MAX) line steps in a row run as one
// step of every thread (the host's compiler marks the first): line puts of
// one source to k places (a put's Count is k), or drains of k put_signals
// (a drain's Count holds k << LC_LINE_GROUP_SHIFT), whose lines every thread
// polls at once instead of one put_signal after another.
#define LC_LINE_GROUP_SHIFT 8
#define LC_LINE_GROUP_MAX 8

// lc_plan_line_group returns how many steps from c (k of them, inside the
// launch and the replay) run as one group of kind, 1 when they are not
// such steps: line puts of c's source and size, or drains.
__device__ __forceinline__ lc_u32 lc_plan_line_group(const lc_plan_step *c, lc_u32 k, bool inside, lc_u32 kind) {
	if (k < 2 || k > LC_LINE_GROUP_MAX || !inside) return 1;
	for (lc_u32 g = 1; g < k; g++) {
		if (c[g].kind != kind || (kind == LC_STEP_LINE_PUT && (c[g].src != c[0].src || c[g].n != c[0].n))) return 1;
	}
	return k;
}

// Copy groups: k (2 to LC_LINE_GROUP_MAX) wide copies in a row of one
// source and size run as one step of every thread, each thread copying
// its share to every place, with no block barrier between them (the
// host's compiler marks the first: its count holds k <<
// LC_LINE_GROUP_SHIFT; a copy's own chain count is in the low bits).
#define LC_COPY_CHAIN_MASK 0xffu

// lc_plan_copy_group returns how many copies from c (k of them, inside
// the launch and the replay) run as one group, their destinations in
// dsts; 1 when they are not such copies.
__device__ __forceinline__ lc_u32 lc_plan_copy_group(const lc_plan_step *c, lc_u32 k, bool inside, const lc_u8 **dsts) {
	if (k < 2 || k > LC_LINE_GROUP_MAX || k > LC_CHAIN_MAX || !inside) return 1;
	for (lc_u32 g = 0; g < k; g++) {
		if (c[g].kind != LC_STEP_COPY || c[g].src != c[0].src || c[g].n != c[0].n ||
		    (c[g].count & LC_COPY_CHAIN_MASK) != 0 || (g > 0 && c[g].count != 0))
			return 1;
		dsts[g] = (const lc_u8 *)c[g].dst;
	}
	return k;
}

// lc_plan_wait_group returns how many waits from c (k of them, inside the
// launch and the replay) run as one group; 1 when they are not such.
__device__ __forceinline__ lc_u32 lc_plan_wait_group(const lc_plan_step *c, lc_u32 k, bool inside) {
	if (k < 2 || k > LC_LINE_GROUP_MAX || k > blockDim.x || !inside) return 1;
	for (lc_u32 g = 1; g < k; g++) {
		if (c[g].kind != LC_STEP_WAIT || (c[g].count >> LC_WAIT_GROUP_SHIFT) != 0) return 1;
	}
	return k;
}

// lc_plan_lines_put writes the k line puts from c (one source, n bytes) as
// lines, every thread its own: line j of each holds bytes 8j to 8j+7 of
// the source and that step's flag (value + r * step), twice.
__device__ __forceinline__ void lc_plan_lines_put(const lc_plan_step *c, lc_u32 k, lc_u64 r, lc_u64 tid, lc_u64 nth) {
	const lc_u8 *src = (const lc_u8 *)c[0].src;
	const lc_u64 n = c[0].n, lines = (n + 7) / 8;
	for (lc_u64 j = tid; j < lines; j += nth) {
		const lc_u64 at = 8 * j;
		const lc_u64 w = lc_ll_word(src + at, n - at < 8 ? n - at : 8);
		for (lc_u32 g = 0; g < k; g++)
			lc_ll_store((lc_u8 *)c[g].dst + 16 * j, (lc_u32)w, (lc_u32)(w >> 32), (lc_u32)(c[g].value + r * c[g].step), 0);
	}
}

// lc_plan_lines_drain is lc_plan_line_wait for the k drains from c, run by
// every thread: each polls its share of all their lines (line j of drain
// g showing its flag, value + r * step) and writes their bytes to that
// drain's src; thread 0 keeps watch (the record, the abort flag, the
// clock) until every thread of its block is done (ndone reaches *expect),
// then, after a block barrier, adds each drain's cmp to its slot at aux.
// A thread still polling stops when *stop is up; every 64 polls it leaves
// the flag it saw in *seen (thread 0's failure record shows it). False
// after recording a timeout or an abort (every thread returns the same).
// In a spread plan (arr, its job area) the lines are shared out among the
// grid's threads (gtid of gnth), thread 0 of each block also looks at the
// stop word (lc_plan_quit), and block 0 alone adds to the slots.
__device__ bool lc_plan_lines_drain(const lc_plan_step *c, lc_u32 k, lc_u64 r, lc_u64 timeout_ns, const lc_u32 *abort_flag,
                                    lc_record *rec, lc_u32 tag, lc_u32 index, lc_u64 tid, lc_u64 nth, lc_u64 gtid,
                                    lc_u64 gnth, lc_u64 *arr, int *stop, lc_u32 *ndone, lc_u32 *seen, lc_u32 &expect) {
	lc_u64 total = 0;
	for (lc_u32 g = 0; g < k; g++) total += (c[g].n + 7) / 8;
	lc_u64 start = 0, host_at = LC_HOST_NS;
	lc_u32 spins = 0, flag = (lc_u32)(c[0].value + r * c[0].step);
	bool out = false;
	for (lc_u64 at = gtid; at < total && !out; at += gnth) {
		// Line at of the group: line j of drain g.
		lc_u32 g = 0;
		lc_u64 j = at;
		while (j >= (c[g].n + 7) / 8) j -= (c[g++].n + 7) / 8;
		const lc_plan_step &s = c[g];
		flag = (lc_u32)(s.value + r * s.step);
		const lc_u8 *line = (const lc_u8 *)s.dst + 16 * j;
		lc_u32 d0, f0, d1, f1;
		for (;;) {
			lc_ll_load(line, d0, f0, d1, f1);
			if (f0 == f1 && (int)(f0 - flag) >= 0) break;
			if (spins == 0) start = lc_globaltimer();
			if ((++spins & 63) != 0) continue;
			*(volatile lc_u32 *)seen = f0;
			if (*(volatile int *)stop) {
				out = true;
				break;
			}
			if (tid == 0 && lc_plan_quit(arr, rec, abort_flag, timeout_ns, start, host_at, tag, index, f0, flag)) {
				*(volatile int *)stop = 1;
				out = true;
				break;
			}
		}
		if (out) break;
		const lc_u64 b = 8 * j;
		lc_ll_put_word((lc_u8 *)s.src + b, (lc_u64)d1 << 32 | d0, s.n - b < 8 ? s.n - b : 8);
	}
	atomicAdd(ndone, 1u);
	if (tid == 0) {
		expect += (lc_u32)nth;
		while (!*(volatile int *)stop && *(volatile lc_u32 *)ndone != expect) {
			if (spins == 0) start = lc_globaltimer();
			if ((++spins & 63) != 0) continue;
			if (lc_plan_quit(arr, rec, abort_flag, timeout_ns, start, host_at, tag, index, *(volatile lc_u32 *)seen, flag))
				*(volatile int *)stop = 1;
		}
	}
	__syncthreads();
	if (*(volatile int *)stop) return false;
	if (tid == 0 && (arr == 0 || blockIdx.x == 0)) {
		for (lc_u32 g = 0; g < k; g++)
			asm volatile("red.relaxed.sys.global.add.u64 [%0], %1;" ::"l"(c[g].aux), "l"((lc_u64)c[g].cmp) : "memory");
	}
	return true;
}

// lc_plan_prefetchable reports whether step t's source may be read before
// the wait ahead of it: a put_signal of 8 or 16 aligned bytes, or a line
// of 8, from a private source.
__device__ __forceinline__ bool lc_plan_prefetchable(const lc_plan_step &t) {
	if (t.kind == LC_STEP_PUT_SIGNAL)
		return (t.cmp & LC_PS_PRIVATE) && (t.n == 8 || t.n == 16) && ((t.src | t.dst) & 7) == 0;
	return t.kind == LC_STEP_LINE_PUT && t.count <= 1 && (t.cmp & LC_PS_PRIVATE) && t.n == 8 && (t.src & 7) == 0;
}

// lc_plan_chain reports whether the k reduce steps from c run as one
// chain into dst (n bytes), from init (a copy's source) or else from dst:
// they are such steps (reductions of value into dst, n bytes each), all
// within the launch's steps and the replay (inside), every address 16-byte
// aligned. It leaves their sources in srcs (LC_WIDE_CHAIN's).
__device__ __forceinline__ bool lc_plan_chain(const lc_plan_step *c, lc_u32 k, bool inside, lc_u8 *dst, const lc_u8 *init,
                                              lc_u64 n, lc_u64 value, const lc_u8 **srcs) {
	if (k < 1 || k > LC_CHAIN_MAX || !inside || (((lc_u64)dst | (lc_u64)init | n) & 15) != 0) return false;
	for (lc_u32 j = 0; j < k; j++) {
		srcs[j] = (const lc_u8 *)c[j].src;
		if (((lc_u64)srcs[j] & 15) != 0 || c[j].kind != LC_STEP_REDUCE || c[j].dst != (lc_u64)dst || c[j].n != n ||
		    c[j].value != value)
			return false;
	}
	return true;
}
