// Plan server: one launch of the interpreter that runs the device-mode
// plan calls the host posts to a ring of host-mapped command slots, one
// after another, so that a call costs the host a few stores instead of a
// kernel launch (several microseconds of driver time). The host posts
// command seq (1, 2, ...) in slot seq % LC_SERVE_SLOTS as 16-byte lines,
// line k holding word k of the command and seq (stored after the word),
// line 0 last. The server reads every line at once, one thread a line:
// where the host posted the command already (calls queued ahead of the
// server), that one PCIe round trip fetches it. Else thread 0 polls line
// 0 until it shows seq (each read crosses PCIe), and the block reads the
// lines again. It runs the command as lc_plan would, then stores its
// number in state[0] (the host reuses a slot once its command is done).
// It ends on a STOP command, on the abort flag, or after a command that
// failed (its record then holds the failure: later commands could not
// have run), and stores its first command's number (its identity) in
// state[1] as it ends. The record is read before the first command only.
//
// A line is read with one 16-byte load, which sees both of its words as
// the host left them at one moment (one PCIe read of an aligned 16 bytes);
// the host stores the word before seq, and x86 keeps its stores in order,
// so a line showing seq shows its word.

#define LC_SERVE_SLOTS 8
#define LC_SERVE_RUN 1
#define LC_SERVE_STOP 2

struct lc_serve_cmd {
	lc_u64 kind; // LC_SERVE_*
	lc_u64 steps, period, first, count, rep0, timeout_ns, rec, tag, flags;
	lc_plan_moves moves;
};

// LC_SERVE_CMD_SIZE is a slot's size (kernels.PlanServeCmdSize): a line
// of 16 bytes for every word of a command.
#define LC_SERVE_CMD_SIZE 512
static_assert(2 * sizeof(lc_serve_cmd) <= LC_SERVE_CMD_SIZE, "a command's lines fit its slot");

__device__ __forceinline__ void lc_serve_line(const lc_u64 *line, lc_u64 &w, lc_u64 &seq) {
	asm volatile("ld.volatile.global.v2.u64 {%0, %1}, [%2];" : "=l"(w), "=l"(seq) : "l"(line) : "memory");
}

// lc_serve_fetch reads command want from the lines of slot into dst
// (shared memory, words words), every thread of the block taking part: in
// one round trip when every line shows want at the first read, else once
// line 0 (posted last) does. It returns whether the command came (not:
// the abort flag was raised first).
__device__ bool lc_serve_fetch(const lc_u64 *slot, lc_u64 want, lc_u64 *dst, int words, const lc_u32 *abort_flag) {
	__shared__ int missing, got;
	if (threadIdx.x == 0) missing = 0;
	__syncthreads();
	for (int k = threadIdx.x; k < words; k += blockDim.x) {
		lc_u64 w, seq;
		lc_serve_line(slot + 2 * k, w, seq);
		if (seq == want) {
			dst[k] = w;
		} else {
			missing = 1;
		}
	}
	__syncthreads();
	if (!missing) {
		// What the host wrote before it posted the command is seen after.
		if (threadIdx.x == 0) lc_fence_acquire_sys();
		__syncthreads();
		return true;
	}
	if (threadIdx.x == 0) {
		got = 0;
		for (lc_u32 spins = 0;; spins++) {
			lc_u64 w, seq;
			lc_serve_line(slot, w, seq);
			if (seq == want) {
				got = 1;
				lc_fence_acquire_sys();
				break;
			}
			if ((spins & 15) == 15 && lc_aborted(abort_flag)) break;
		}
	}
	__syncthreads();
	const bool ok = got != 0;
	for (int k = threadIdx.x; ok && k < words; k += blockDim.x) {
		lc_u64 w, seq;
		lc_serve_line(slot + 2 * k, w, seq);
		dst[k] = w;
	}
	__syncthreads();
	return ok;
}

// lc_serve is the plan server kernels' body: it runs the plan calls
// posted to ring from command first on (kernels.PlanServe), one after
// another, until a STOP, the abort flag, or a call that fails.
__device__ __forceinline__ void lc_serve(const lc_u8 *ring, lc_u64 first, lc_u64 *state, const lc_u32 *abort_flag) {
	__shared__ lc_serve_cmd c;
	const int words = (int)(sizeof(lc_serve_cmd) / 8);
	lc_u64 arrivals = 0; // no spread plans here: no meetings
	bool check = true; // whether the record may hold a failure already
	for (lc_u64 seq = first;; seq++) {
		const lc_u64 *slot = (const lc_u64 *)(ring + (seq % LC_SERVE_SLOTS) * LC_SERVE_CMD_SIZE);
		if (!lc_serve_fetch(slot, seq, (lc_u64 *)&c, words, abort_flag) || c.kind != LC_SERVE_RUN) break;
		const bool ok = lc_plan_block((const lc_plan_step *)c.steps, (lc_u32)c.period, (lc_u32)c.first, c.count, c.rep0,
		                              c.timeout_ns, abort_flag, (lc_record *)c.rec, (lc_u32)c.tag, (int)c.flags, 0, c.moves, 0,
		                              check, arrivals);
		if (threadIdx.x == 0) lc_store_release_sys(&state[0], seq);
		if (!ok) break;
		// Nothing but this server's calls writes the record meanwhile
		// (the stream runs nothing else).
		check = false;
	}
	if (threadIdx.x == 0) lc_store_release_sys(&state[1], first);
}

// lc_plan_serve: lc_serve, built for blocks of up to LC_PLAN_MID_THREADS
// (sync_plan.cu's lc_plan_mid; a plan of larger blocks is launched, not
// served).
#if LC_IN_PART(3)
extern "C" __global__ void __launch_bounds__(LC_PLAN_MID_THREADS)
    lc_plan_serve(const lc_u8 *ring, lc_u64 first, lc_u64 *state, const lc_u32 *abort_flag) {
	lc_serve(ring, first, state, abort_flag);
}
#endif
