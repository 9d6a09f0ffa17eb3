// Helper blocks of the plan interpreter (lc_plan launched with more than
// one block). Block 0 runs the plan; every other block only helps with
// its wide steps of at least LC_PLAN_HELP_MIN bytes (copies, fills,
// reductions and reduce chains): block 0 posts the step as a job, every
// block does its share (block b is threads b * blockDim .. of a grid of
// gridDim * blockDim) and block 0 goes on once every helper has said it is
// done. The hand-over costs about what one block takes to move a few tens
// of KiB, so only steps well above that are shared (docs/results/reductions.md,
// "Helper blocks").
//
// The job area (LC_PLAN_JOB_SIZE bytes of device memory, the plan's own)
// is all zero when a launch starts: block 0 posts END as it leaves, waits
// for every helper to take it and zeroes seq and done. A helper that never
// took it (it did not start within the wait's bound) leaves seq at
// LC_JOB_DEAD: later launches of the plan fail at once instead of reading
// a stale job.
//
// Ordering: block 0's threads meet at a block barrier before thread 0
// posts (a GPU-scope release of seq after the job's fields), so a helper
// that acquires seq sees what they wrote and what thread 0's waits
// acquired; a helper's threads meet before its thread 0 releases done,
// and block 0's thread 0 acquires done before its block barrier and its
// next signal (whose release then covers the helpers' stores too).

#define LC_JOB_COPY 1
#define LC_JOB_FILL_BYTE 2
#define LC_JOB_FILL_IOTA 3
#define LC_JOB_FILL_RAND 4
#define LC_JOB_REDUCE 5
#define LC_JOB_CHAIN 6
#define LC_JOB_END 7

// Wide steps of at least this many bytes are shared with the helpers
// (kernels.PlanHelpMin).
#define LC_PLAN_HELP_MIN 131072

// seq value of a job area a helper never left (see above).
#define LC_JOB_DEAD (~0ull)

// The job area: seq and done on lines of their own, then the job.
struct lc_plan_job {
	lc_u64 seq;  // the last job posted, 1, 2, ... in a launch
	lc_u64 pad0[15];
	lc_u64 done; // helpers' completions, cumulative over the launch
	lc_u64 pad1[15];
	lc_u32 kind, k;   // LC_JOB_*; a chain's length
	lc_u64 dst, src;  // src: a copy's source, a chain's first (0: dst)
	lc_u64 n, value;  // bytes; a fill's value, a reduction's type | op << 8
	lc_u64 srcs[LC_CHAIN_MAX];
};

// LC_PLAN_JOB_SIZE is the job area's size (kernels.PlanJobSize).
#define LC_PLAN_JOB_SIZE 384
static_assert(sizeof(lc_plan_job) <= LC_PLAN_JOB_SIZE, "the job area holds a job");

// lc_plan_wide runs a wide step's (or a job's) share of thread tid of nth.
__device__ __noinline__ void lc_plan_wide(lc_u32 kind, lc_u32 k, lc_u8 *d, const lc_u8 *src, lc_u64 n, lc_u64 value,
                                          const lc_u8 *const *srcs, lc_u64 tid, lc_u64 nth) {
	if (kind == LC_JOB_COPY) {
		lc_put_range(d, src, n, tid, nth);
	} else if (kind == LC_JOB_FILL_BYTE) {
		for (lc_u64 i = tid; i < n; i += nth) d[i] = (lc_u8)value;
	} else if (kind == LC_JOB_FILL_IOTA) {
		// Word i is start + i; a partial last word gets its leading bytes.
		for (lc_u64 i = tid; i < n; i += nth) d[i] = (lc_u8)(((lc_u32)value + (lc_u32)(i / 4)) >> (8 * (i % 4)));
	} else if (kind == LC_JOB_FILL_RAND) {
		for (lc_u64 i = tid; i < n; i += nth) d[i] = (lc_u8)(lc_rand_word(value, i / 8) >> (8 * (i % 8)));
	} else if (kind == LC_JOB_REDUCE) {
		lc_reduce_any((lc_u32)(value & 0xff), (lc_u32)((value >> 8) & 0xff), d, src, n, tid, nth);
	} else if (kind == LC_JOB_CHAIN) {
		lc_reduce_chain_any((lc_u32)(value & 0xff), (lc_u32)((value >> 8) & 0xff), d, src, srcs, (int)k, n / 16, tid, nth);
	}
}

// lc_plan_post (block 0's thread 0) posts job number seq.
__device__ __forceinline__ void lc_plan_post(lc_plan_job *job, lc_u64 seq, lc_u32 kind, lc_u32 k, lc_u8 *d,
                                             const lc_u8 *src, lc_u64 n, lc_u64 value, const lc_u8 *const *srcs) {
	job->kind = kind;
	job->k = k;
	job->dst = (lc_u64)d;
	job->src = (lc_u64)src;
	job->n = n;
	job->value = value;
	for (lc_u32 j = 0; j < k && j < LC_CHAIN_MAX; j++) job->srcs[j] = (lc_u64)srcs[j];
	asm volatile("st.release.gpu.u64 [%0], %1;" ::"l"(&job->seq), "l"(seq) : "memory");
}

// lc_plan_helper is a helper block's whole life: every job block 0 posts,
// until END (or a dead job area: block 0 then posts nothing). It takes END
// even where the plan does not run at all (a record that holds a failure):
// block 0 waits for that.
__device__ void lc_plan_helper(lc_plan_job *job) {
	__shared__ lc_u32 kind, k;
	__shared__ lc_u64 dst, src, n, value;
	__shared__ const lc_u8 *srcs[LC_CHAIN_MAX];
	const lc_u64 tid = threadIdx.x, nth = blockDim.x;
	const lc_u64 me = (lc_u64)blockIdx.x * nth + tid, all = (lc_u64)gridDim.x * nth;
	for (lc_u64 want = 1;; want++) {
		if (tid == 0) {
			lc_u64 seq;
			do {
				asm volatile("ld.acquire.gpu.u64 %0, [%1];" : "=l"(seq) : "l"(&job->seq) : "memory");
			} while (seq < want);
			// Volatile: no copy of an earlier job's fields in L1.
			const volatile lc_plan_job *jv = job;
			kind = seq == LC_JOB_DEAD ? 0 : jv->kind;
			k = jv->k;
			dst = jv->dst;
			src = jv->src;
			n = jv->n;
			value = jv->value;
			for (lc_u32 j = 0; j < k && j < LC_CHAIN_MAX; j++) srcs[j] = (const lc_u8 *)jv->srcs[j];
		}
		__syncthreads();
		// Read between the barriers: thread 0 writes the next job's
		// fields only after the second.
		const lc_u32 kd = kind;
		if (kd == 0) return; // a dead job area: nobody waits for us
		if (kd != LC_JOB_END) lc_plan_wide(kd, k, (lc_u8 *)dst, (const lc_u8 *)src, n, value, srcs, me, all);
		__syncthreads();
		if (tid == 0) asm volatile("red.release.gpu.global.add.u64 [%0], %1;" ::"l"(&job->done), "l"(1ull) : "memory");
		if (kd == LC_JOB_END) return;
	}
}
