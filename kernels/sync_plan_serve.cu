// Plan server: one launch of the interpreter that runs the device-mode
// plan calls the host posts to a ring of host-mapped command slots, one
// after another, so that a call costs the host a few stores instead of a
// kernel launch (several microseconds of driver time). The host posts
// command seq (1, 2, ...) in slot seq % LC_SERVE_SLOTS, its number stored
// last; thread 0 polls for it (each read crosses PCIe), the block reads
// the command's words at once, and runs it as lc_plan would. After each
// command the server stores its number in state[0] (the host reuses a
// slot once its command is done). It ends on a STOP command, on the abort
// flag, or after a command that failed (its record then holds the
// failure: later commands could not have run), and stores its first
// command's number (its identity) in state[1] as it ends. Each command
// costs two PCIe round trips before it runs (its number, then its words);
// the record is read before the first only.

#define LC_SERVE_SLOTS 8
#define LC_SERVE_RUN 1
#define LC_SERVE_STOP 2

struct lc_serve_cmd {
	lc_u64 seq;  // the command's number, stored last
	lc_u64 kind; // LC_SERVE_*
	lc_u64 steps, period, first, count, rep0, timeout_ns, rec, tag, flags;
	lc_plan_moves moves;
};

// LC_SERVE_CMD_SIZE is a slot's size (kernels.PlanServeCmdSize).
#define LC_SERVE_CMD_SIZE 256
static_assert(sizeof(lc_serve_cmd) <= LC_SERVE_CMD_SIZE, "a command fits its slot");

extern "C" __global__ void __launch_bounds__(LC_PLAN_THREADS) lc_plan_serve(const lc_u8 *ring, lc_u64 first, lc_u64 *state,
                                                                             const lc_u32 *abort_flag) {
	__shared__ lc_serve_cmd c;
	const int words = (int)(sizeof(lc_serve_cmd) / 8);
	lc_u64 arrivals = 0; // no spread plans here: no meetings
	bool check = true; // whether the record may hold a failure already
	for (lc_u64 seq = first;; seq++) {
		const lc_serve_cmd *slot = (const lc_serve_cmd *)(ring + (seq % LC_SERVE_SLOTS) * LC_SERVE_CMD_SIZE);
		if (!lc_host_cmd(&slot->seq, seq, (const lc_u64 *)slot, (lc_u64 *)&c, words, abort_flag) || c.kind != LC_SERVE_RUN)
			break;
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
