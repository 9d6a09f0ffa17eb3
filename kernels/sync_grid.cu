// Spread plans: the plan interpreter on several blocks at once (lc_plan
// with LC_PLAN_SPREAD), each block running every step of the plan. A wide
// step (a copy, fill or reduction) is cut among the blocks as among the
// threads of one (block b's thread t is thread b * blockDim + t of the
// grid), so that a 64 KiB put or reduction is not one block's alone. The
// other steps:
//   - a wait: every block waits for itself (each reads the same slots);
//   - a small copy: block 0 alone;
//   - a signal (store, add, put_signal, a line alone): every block says it
//     got there (LC_SPREAD arrival: its own word of the plan's job area,
//     the count of such steps so far), and block 0, once every block did,
//     signals once for all of them: its release then covers what every
//     block wrote;
//   - wide line puts and drains: every block its share of the lines; a
//     drain's slot is block 0's to add to, and a wide drain (a group of
//     them) ends with every block waiting until every block drained its
//     share (a meeting, as a grid step's); a line drained alone: every
//     block waits for it, block 0 writes its bytes and adds to its slot;
//   - a grid step (LC_STEP_GRID, put there by the host's compiler,
//     kernels.SpreadSteps): every block waits until every block got there.
//     The host puts one before a step that touches bytes another block may
//     have touched since the last one (a small copy of block 0's, or a wide
//     step cut another way), so no block reads or writes them early.
// A run of signals with nothing between them takes one arrival. No block
// waits for another but block 0 at a signal and every block at a grid
// step; a block that gives up (a failed wait, an abort) raises the stop
// word, which the others' waits read, so a block never waits for one that
// gave up.
//
// Host-mapped memory (the record, the abort flag): reads across PCIe from
// several blocks queue (about 1.2 us each), so eight blocks reading the
// record as a launch starts cost 10 us a call. Block 0 reads the record
// and tells the others (the go word); every block's waits look at the
// host's words only as lc_host_look allows, and at the stop word every 64
// polls.
//
// The job area (LC_SPREAD_WORDS words): the arrivals (one word a block),
// the count of blocks that left, the stop and go words. The last block to leave zeroes the arrivals and the
// words, so the next launch starts from zero.

// A failure record's slot field for a plan: this bit, the plan's tag in
// bits 20-30, the step in bits 0-19 (kernels.PlanFailBit).
#define LC_PLAN_FAIL_BIT 0x80000000u

// The most blocks a spread plan runs on (kernels.PlanSpreadMax).
#define LC_SPREAD_MAX 32

// Words of the job area after the arrivals: blocks that left, the stop
// word and the go word (1: run, 2: the record held a failure).
#define LC_SPREAD_LEFT 32
#define LC_SPREAD_STOP 33
#define LC_SPREAD_GO 34
#define LC_SPREAD_WORDS 35

// A wide step's kind, as lc_plan_wide runs it: a copy, a fill, a
// reduction, a chain of reductions (reduce.cu's LC_CHAIN_MAX sources
// into one destination), or a copy of one source to several places.
#define LC_WIDE_COPY 1
#define LC_WIDE_FILL_BYTE 2
#define LC_WIDE_FILL_IOTA 3
#define LC_WIDE_FILL_RAND 4
#define LC_WIDE_REDUCE 5
#define LC_WIDE_CHAIN 6
#define LC_WIDE_COPY_GROUP 7

// LC_PLAN_JOB_SIZE is the size of a spread plan's job area
// (kernels.PlanJobSize).
#define LC_PLAN_JOB_SIZE 320
static_assert(8 * LC_SPREAD_WORDS <= LC_PLAN_JOB_SIZE, "the job area holds a spread plan's words");

// lc_plan_wide runs a wide step's share of thread tid of nth (a spread
// plan's block b being threads b * blockDim .. of the grid).
__device__ __noinline__ void lc_plan_wide(lc_u32 kind, lc_u32 k, lc_u8 *d, const lc_u8 *src, lc_u64 n, lc_u64 value,
                                          const lc_u8 *const *srcs, lc_u64 tid, lc_u64 nth) {
	if (kind == LC_WIDE_COPY) {
		lc_put_range(d, src, n, tid, nth);
	} else if (kind == LC_WIDE_FILL_BYTE) {
		for (lc_u64 i = tid; i < n; i += nth) d[i] = (lc_u8)value;
	} else if (kind == LC_WIDE_FILL_IOTA) {
		// Word i is start + i; a partial last word gets its leading bytes.
		for (lc_u64 i = tid; i < n; i += nth) d[i] = (lc_u8)(((lc_u32)value + (lc_u32)(i / 4)) >> (8 * (i % 4)));
	} else if (kind == LC_WIDE_FILL_RAND) {
		for (lc_u64 i = tid; i < n; i += nth) d[i] = (lc_u8)(lc_rand_word(value, i / 8) >> (8 * (i % 8)));
	} else if (kind == LC_WIDE_REDUCE) {
		lc_reduce_any((lc_u32)(value & 0xff), (lc_u32)((value >> 8) & 0xff), d, src, n, tid, nth);
	} else if (kind == LC_WIDE_COPY_GROUP) {
		// srcs holds the k destinations of src's n bytes.
		for (lc_u32 g = 0; g < k; g++) lc_put_range((lc_u8 *)srcs[g], src, n, tid, nth);
	} else if (kind == LC_WIDE_CHAIN) {
		lc_reduce_chain_any((lc_u32)(value & 0xff), (lc_u32)((value >> 8) & 0xff), d, src, srcs, (int)k, n / 16, tid, nth);
	}
}

// lc_plan_gave_up reports whether a wait of the plan (tag) at step index,
// polling since start, must end: its timeout_ns passed (it records that,
// with what it observed and its target), or, where lc_host_look allows
// (host_at, the wait's own), the record already holds a failure or the
// abort flag is up (recorded). claim: lc_claim's.
__device__ __forceinline__ bool lc_plan_gave_up(lc_record *rec, const lc_u32 *abort_flag, lc_u64 timeout_ns, lc_u64 start,
                                                lc_u64 &host_at, lc_u32 tag, lc_u32 index, lc_u64 observed,
                                                lc_u64 target, int *claim = 0) {
	return lc_wait_over(rec, abort_flag, timeout_ns, lc_globaltimer() - start, host_at, LC_PLAN_FAIL_BIT | (tag << 20) | index,
	                    observed, target, claim);
}

__device__ __forceinline__ lc_u64 lc_load_relaxed_gpu(const lc_u64 *p) {
	lc_u64 v;
	asm volatile("ld.relaxed.gpu.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
	return v;
}

__device__ __forceinline__ void lc_store_relaxed_gpu(lc_u64 *p, lc_u64 v) {
	asm volatile("st.relaxed.gpu.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}

// lc_plan_quit is lc_plan_gave_up for a wait of block blockIdx.x: arr is
// the spread plan's job area, or 0 for a plan on one block. In a spread
// plan a block stops when the stop word is up, and a block that gives up
// raises it.
__device__ __forceinline__ bool lc_plan_quit(lc_u64 *arr, lc_record *rec, const lc_u32 *abort_flag, lc_u64 timeout_ns,
                                             lc_u64 start, lc_u64 &host_at, lc_u32 tag, lc_u32 index, lc_u64 observed,
                                             lc_u64 target, int *claim = 0) {
	if (arr == 0) return lc_plan_gave_up(rec, abort_flag, timeout_ns, start, host_at, tag, index, observed, target, claim);
	if (lc_load_relaxed_gpu(arr + LC_SPREAD_STOP) != 0) return true;
	const bool quit = lc_plan_gave_up(rec, abort_flag, timeout_ns, start, host_at, tag, index, observed, target, claim);
	if (quit) lc_store_relaxed_gpu(arr + LC_SPREAD_STOP, 1);
	return quit;
}

// lc_spread_arrive (thread 0 of block b, after a block barrier) says that
// block b got to arrival seq: a fence at the plan's scope, then a relaxed
// store, so whoever reads seq there also sees the block's writes before
// (its peers' memory included).
__device__ __forceinline__ void lc_spread_arrive(lc_u64 *arr, lc_u32 b, lc_u64 seq, int gpu) {
	lc_fence_scope(gpu);
	lc_store_relaxed_gpu(arr + b, seq);
}

// lc_spread_await (thread 0) waits until every block but self got to
// arrival seq, then fences at the plan's scope (what they wrote before is
// then this thread's to release). A failed wait is recorded at step index
// as the plan's waits record theirs; false then.
__device__ bool lc_spread_await(lc_u64 *arr, lc_u32 self, lc_u64 seq, int gpu, lc_u64 timeout_ns,
                                const lc_u32 *abort_flag, lc_record *rec, lc_u32 tag, lc_u32 index) {
	lc_u64 start = 0, host_at = LC_HOST_NS;
	const lc_u32 nb = gridDim.x;
	for (lc_u32 spins = 0;;) {
		lc_u64 least = ~0ull;
		for (lc_u32 b = 0; b < nb; b++) {
			if (b == self) continue;
			const lc_u64 v = lc_load_relaxed_gpu(arr + b);
			least = v < least ? v : least;
		}
		if (least >= seq) break;
		if (spins == 0) start = lc_globaltimer();
		if ((++spins & 63) != 0) continue;
		if (lc_plan_quit(arr, rec, abort_flag, timeout_ns, start, host_at, tag, index, least, seq)) return false;
	}
	lc_fence_scope(gpu);
	return true;
}

// lc_spread_go (thread 0 of each block, as a spread launch starts): block
// 0, which read the record (bad: it holds a failure), tells the others
// whether the plan runs (the go word); true when it does not.
__device__ bool lc_spread_go(lc_u64 *arr, bool bad) {
	if (blockIdx.x == 0) {
		lc_store_relaxed_gpu(arr + LC_SPREAD_GO, bad ? 2 : 1);
		return bad;
	}
	lc_u64 g;
	while ((g = lc_load_relaxed_gpu(arr + LC_SPREAD_GO)) == 0) {
	}
	return g == 2;
}

// lc_spread_leave (thread 0 of every block, as it leaves): the last block
// to leave zeroes the arrivals and the words after them.
__device__ void lc_spread_leave(lc_u64 *arr) {
	const lc_u32 nb = gridDim.x;
	__threadfence();
	const lc_u64 left = atomicAdd((unsigned long long *)(arr + LC_SPREAD_LEFT), 1ull);
	if (left + 1 != nb) return;
	__threadfence();
	for (lc_u32 b = 0; b < nb; b++) arr[b] = 0;
	for (int w = LC_SPREAD_LEFT; w < LC_SPREAD_WORDS; w++) arr[w] = 0;
}
