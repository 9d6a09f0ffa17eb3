// (Named to sort after sync_plan.cu, whose steps and helpers it runs, and
// before sync_plan_serve.cu, which runs it: the program is the .cu files
// in name order.)
// The plan interpreter's loop over the steps (lc_plan_block) and its kernel
// (lc_plan).

// lc_plan_meet: every block of a spread plan meets here, at GPU scope (the
// bytes at stake are this GPU's): thread 0 arrives and waits for the other
// blocks, then the block meets. A failed wait (recorded at step index)
// stops this block, and stop0 keeps thread 0 from meeting again. False
// when the plan stops.
__device__ __forceinline__ bool lc_plan_meet(lc_u64 *arr, lc_u32 bid, lc_u64 &arrivals, int &stop, int &stop0,
                                             lc_u64 timeout_ns, const lc_u32 *abort_flag, lc_record *rec, lc_u32 tag,
                                             lc_u32 index) {
	arrivals++;
	if (threadIdx.x == 0 && !stop0) {
		lc_spread_arrive(arr, bid, arrivals, 1);
		if (!lc_spread_await(arr, bid, arrivals, 1, timeout_ns, abort_flag, rec, tag, index)) stop = stop0 = 1;
	}
	__syncthreads();
	return !stop;
}

// lc_plan_block runs count steps of a plan of period steps (steps: the whole
// table), from step first of replay rep0 on: step period-1 of replay r is
// followed by step 0 of replay r+1. Replays are counted from rep0, plus
// *epoch when epoch is not null (a graph's replay count). So one launch
// runs every replay of a p:run (first 0, count = period * replays), one
// run of steps of a replay, or the last run of a replay with the first of
// the next (stream mode's launches between replays).
// flags are LC_PLAN_*: LC_PLAN_GPU selects GPU-scope ordering (every
// peer's threads and memory on this GPU) over system scope. A failed wait
// ends the kernel; a record that already holds a failure keeps it from
// starting.
//
// A wait followed by a put_signal of 8 or 16 aligned bytes from a private
// source reads the source before it spins: the read (an L2 round trip once
// the wait's acquire has emptied L1) leaves the path from the peer's
// signal to ours. Nothing else writes a private source meanwhile: earlier
// steps are done (thread 0's in program order, every thread's before a
// block barrier) and no peer writes it.
//
// moves (LC_PLAN_MOVES) set moving values of a cached table for this
// launch, valid at rep0.
//
// With LC_PLAN_SPREAD in flags every block of the grid runs the steps
// (sync_grid.cu), job their job area and arrivals their meetings so far.
//
// It reports whether every step ran (no wait failed, no abort). check_rec:
// first look whether the record holds a failure already (a PCIe read);
// the plan server skips it after a call of its own that succeeded.
__device__ __forceinline__ bool lc_plan_block(const lc_plan_step *steps, lc_u32 period, lc_u32 first, lc_u64 count,
                                              lc_u64 rep0, lc_u64 timeout_ns, const lc_u32 *abort_flag, lc_record *rec,
                                              lc_u32 tag, int flags, const lc_u64 *epoch, const lc_plan_moves &moves,
                                              lc_u64 *job, bool check_rec, lc_u64 &arrivals) {
	const int gpu = flags & LC_PLAN_GPU;
	// Spread (sync_grid.cu): this block's number, and whether the last step
	// was a signal (every block alike); arrivals counts the meetings in the
	// job area job so far (the caller's).
	const bool spread = (flags & LC_PLAN_SPREAD) != 0;
	const lc_u32 bid = spread ? blockIdx.x : 0;
	lc_u64 *const arr = job;
	bool insig = false;
	__shared__ int stop;
	// A wide line drain's count of threads done, and a flag a polling
	// thread saw (lc_plan_lines_drain).
	__shared__ lc_u32 ndone, seen;
	// A wait group's claim on the failure record (lc_claim): taken
	// once a launch at most (a failure ends it).
	__shared__ int claim;
	lc_u32 expect = 0; // thread 0: ndone when this launch's drains are done
	// Short plans are read from shared memory, loaded once.
	__shared__ lc_plan_step cache[LC_PLAN_CACHE];
	const lc_u64 tid = threadIdx.x, nth = blockDim.x;
	// Thread 0 reads the record (host-mapped: about 1.2 us across PCIe)
	// before the table loads and looks at what it read only after, so the
	// read and the table's loads overlap. A spread plan's block 0 reads it
	// for every block.
	lc_u32 status = LC_STATUS_OK;
	if (tid == 0) {
		if (check_rec && rec != 0 && bid == 0) status = ((const volatile lc_record *)rec)->status;
		ndone = seen = 0;
		claim = 0;
	}
	// The whole plan when it fits, else the launch's own run of steps
	// when that does (read by its position in the run).
	const bool cached = period <= LC_PLAN_CACHE, run = !cached && count <= LC_PLAN_CACHE;
	if (cached || run) {
		const lc_u64 words = sizeof(lc_plan_step) / 8, n = cached ? period : count;
		lc_u64 *to = (lc_u64 *)cache;
		for (lc_u64 k = tid; k < n * words; k += nth) {
			const lc_u64 st = cached ? k / words : (first + k / words) % period;
			to[k] = ((const lc_u64 *)(steps + st))[k % words];
		}
		if (cached && moves.n != 0) {
			__syncthreads();
			for (lc_u64 k = tid; k < moves.n && k < LC_PLAN_MOVES; k += nth) {
				const lc_u64 m = moves.v[k];
				cache[m >> LC_PLAN_MOVE_SHIFT].value = m & ((1ull << LC_PLAN_MOVE_SHIFT) - 1);
			}
		}
	}
	if (tid == 0) {
		const bool bad = status != LC_STATUS_OK;
		stop = check_rec && (spread ? lc_spread_go(arr, bad) : bad) ? 1 : 0;
	}
	__syncthreads();
	if (stop) return false;
	// Thread 0's own copy of stop (it alone sets it in the loop).
	int stop0 = 0;
	// In a graph, the replay comes from device memory that the graph's
	// last node advances.
	if (epoch != 0) rep0 += lc_load_volatile(epoch);
	const lc_plan_step *table = cached ? cache : steps;
	const lc_plan_step *const runs = cache; // run: step v of the launch is runs[v]
	// dirty: thread 0 ran a wait or copied since the last block barrier,
	// so the next step of every thread needs one first. Every thread
	// tracks it alike (it depends on the steps only).
	bool dirty = false;
	// Thread 0's early read: the source words of step pre_at (~0u: none).
	lc_u32 pre_at = ~0u;
	lc_u64 pre0 = 0, pre1 = 0;
	// A line step the drain before it sent already (~0u: none).
	lc_u32 sent_at = ~0u;
	// Steps a reduce chain ran already (every thread alike).
	lc_u32 skip = 0;
	// Thread 0's last step was a signal (lc_plan_fence before it, nothing
	// written since): a signal next needs no fence of its own.
	bool fenced = false;
	const lc_u32 nsteps = period;
	lc_u64 r = rep0 + first / period;
	lc_u32 i = first % period;
	// i and r advance together: no division per step.
	for (lc_u64 v = 0; v < count; v++, i = i + 1 == period ? 0 : i + 1, r += i == 0 ? 1 : 0) {
		// Every 64 replays thread 0 looks at the abort flag (host-mapped:
		// one read across PCIe), so that a long run whose waits are met
		// at once still ends on an abort or interrupt. The failure names
		// step period, one past the last: between replays.
		if (i == 0 && tid == 0 && !stop0 && v != 0 && (r & 63) == 0) {
			if (bid != 0) {
				// Block 0 reads the host's words and raises the stop word.
				if (lc_load_relaxed_gpu(arr + LC_SPREAD_STOP) != 0) stop = stop0 = 1;
			} else if (lc_aborted(abort_flag)) {
				lc_fail(rec, LC_STATUS_ABORTED, LC_PLAN_FAIL_BIT | (tag << 20) | period, 0, 0, 0);
				stop = stop0 = 1;
				if (spread) lc_store_relaxed_gpu(arr + LC_SPREAD_STOP, 1);
			}
		}
		// And every 64 replays the block meets, so that a failed wait or
		// an abort ends the launch instead of running out its replays
		// (every thread takes the same steps, so all meet here).
		if (i == 0 && v != 0 && (r & 63) == 0) {
			__syncthreads();
			dirty = false;
			if (stop) return false;
		}
		if (skip != 0) {
			skip--;
			continue;
		}
		{
			// A copy in registers: the asm of waits and signals clobbers
			// memory, and would make every use of a field a new load.
			const lc_plan_step s = run ? runs[v] : table[i];
			const bool wide = s.kind == LC_STEP_FILL_BYTE || s.kind == LC_STEP_FILL_IOTA || s.kind == LC_STEP_FILL_RAND ||
			                  s.kind == LC_STEP_REDUCE || (s.kind == LC_STEP_COPY && (s.n > LC_PLAN_SMALL || s.count > 0)) ||
			                  ((s.kind == LC_STEP_LINE_PUT || s.kind == LC_STEP_LINE_WAIT) && s.n > 8) ||
			                  (s.kind == LC_STEP_LINE_PUT && s.count > 1) ||
			                  (s.kind == LC_STEP_LINE_WAIT && (s.count >> LC_LINE_GROUP_SHIFT) > 1) ||
			                  (s.kind == LC_STEP_WAIT && (s.count >> LC_WAIT_GROUP_SHIFT) > 1) || s.kind == LC_STEP_GRID;
			if (!wide) {
				// Thread 0's step; a failed wait skips them all until the
				// next barrier, where every thread stops.
				if (s.kind == LC_STEP_WAIT || s.kind == LC_STEP_COPY || s.kind == LC_STEP_PUT_SIGNAL ||
				    s.kind == LC_STEP_LINE_WAIT || s.kind == LC_STEP_LINE_PUT)
					dirty = true;
				if (spread) {
					// A run of signals: every block arrives once, and
					// block 0 signals once they all have. Waits run on
					// every block, the rest on block 0.
					// A line of thread 0's is a signal too (its peer may
					// go on once it has it).
					const bool sig = s.kind == LC_STEP_STORE || s.kind == LC_STEP_ADD || s.kind == LC_STEP_PUT_SIGNAL ||
					                 s.kind == LC_STEP_LINE_PUT;
					if (sig && !insig) {
						arrivals++;
						if (tid == 0 && !stop0) {
							if (bid != 0) {
								lc_spread_arrive(arr, bid, arrivals, gpu);
							} else if (lc_spread_await(arr, 0, arrivals, gpu, timeout_ns, abort_flag, rec, tag, i)) {
								fenced = true; // the await's fence releases what follows
							} else {
								stop = stop0 = 1;
							}
						}
					}
					insig = sig;
					if (bid != 0 && s.kind != LC_STEP_WAIT && s.kind != LC_STEP_LINE_WAIT) continue;
				}
				if (tid != 0 || stop0) continue;
				if (s.kind != LC_STEP_STORE && s.kind != LC_STEP_ADD) fenced = false;
				// If chains, not switches: no indirect branches on the
				// path from a wait to the next signal.
				if (s.kind == LC_STEP_WAIT) {
					if (!(flags & LC_PLAN_NO_PREFETCH)) {
						const lc_u32 nx = i + 1 < nsteps ? i + 1 : 0;
						const lc_plan_step &t = run ? runs[v + 1 < count ? v + 1 : v] : table[nx];
						if (lc_plan_prefetchable(t)) {
							pre0 = *(const lc_u64 *)t.src;
							if (t.n == 16) pre1 = *(const lc_u64 *)(t.src + 8);
							pre_at = nx;
						}
					}
					if (!lc_plan_wait(s, s.value + r * s.step, timeout_ns, abort_flag, rec, tag, i, flags, spread ? arr : 0))
						stop = stop0 = 1;
				} else if (s.kind == LC_STEP_LINE_WAIT) {
					lc_u8 *next = 0;
					lc_u64 next_w = 0;
					lc_u32 next_flag = 0;
					// Not in a spread plan: there a line of thread 0's goes
					// once every block got to it, as a signal does.
					if (!(flags & LC_PLAN_NO_PREFETCH) && !spread) {
						// The next step, or the one after when the next is
						// the wait this drain comes before; rr is its replay.
						lc_u32 nx = i + 1 < nsteps ? i + 1 : 0;
						lc_u64 nv = v + 1, rr = r + (nx == 0 ? 1 : 0);
						bool skipped = false;
						if (nv < count && (run ? runs[nv] : table[nx]).kind == LC_STEP_WAIT) {
							nx = nx + 1 < nsteps ? nx + 1 : 0;
							rr += nx == 0 ? 1 : 0;
							nv++;
							skipped = true;
						}
						if (nv < count) {
							const lc_plan_step &t = run ? runs[nv] : table[nx];
							if (lc_plan_prefetchable(t)) {
								pre0 = *(const lc_u64 *)t.src;
								if (t.n == 16) pre1 = *(const lc_u64 *)(t.src + 8);
								pre_at = nx;
								if (t.kind == LC_STEP_LINE_PUT && !skipped && (s.count & LC_LINE_SEND_FIRST)) {
									// Sent by the drain as soon as its line is in.
									next = (lc_u8 *)t.dst;
									next_w = pre0;
									next_flag = (lc_u32)(t.value + rr * t.step);
									pre_at = ~0u;
									sent_at = nx;
								}
							}
						}
					}
					if (!lc_plan_line_wait(s, (lc_u32)(s.value + r * s.step), timeout_ns, abort_flag, rec, tag, i, next, next_w,
					                       next_flag, spread ? arr : 0, bid == 0))
						stop = stop0 = 1;
				} else if (s.kind == LC_STEP_LINE_PUT) {
					lc_u64 w;
					if (sent_at == i) {
						sent_at = ~0u; // the drain before sent it
						continue;
					}
					if (pre_at == i) {
						w = pre0;
						pre_at = ~0u;
					} else {
						w = lc_ll_word((const lc_u8 *)s.src, s.n);
					}
					lc_ll_store((lc_u8 *)s.dst, (lc_u32)w, (lc_u32)(w >> 32), (lc_u32)(s.value + r * s.step), 0);
				} else if (s.kind == LC_STEP_PUT_SIGNAL) {
					if (pre_at == i) {
						*(lc_u64 *)s.dst = pre0;
						if (s.n == 16) *(lc_u64 *)(s.dst + 8) = pre1;
						pre_at = ~0u;
					} else {
						lc_copy_small((lc_u8 *)s.dst, (const lc_u8 *)s.src, s.n);
					}
					lc_plan_fence(gpu);
					lc_plan_signal_after_fence((lc_u64 *)s.aux, s.value, s.cmp & 1, gpu);
					fenced = true;
				} else if (s.kind == LC_STEP_COPY) {
					lc_copy_small((lc_u8 *)s.dst, (const lc_u8 *)s.src, s.n);
				} else {
					if (!fenced) lc_plan_fence(gpu);
					lc_plan_signal_after_fence((lc_u64 *)s.dst, s.value + r * s.step, s.kind == LC_STEP_ADD, gpu);
					fenced = true;
				}
				continue;
			}
			fenced = false;
			insig = false;
			if (dirty) {
				__syncthreads();
				dirty = false;
				if (stop) return false;
			}
			if (s.kind == LC_STEP_GRID) {
				// Every block of a spread plan got here.
				if (!spread) continue;
				if (!lc_plan_meet(arr, bid, arrivals, stop, stop0, timeout_ns, abort_flag, rec, tag, i)) return false;
				continue;
			}
			if (s.kind == LC_STEP_WAIT) {
				// A group of waits from this one (lc_plan_wait_group):
				// thread g waits for the g-th (every block of a spread
				// plan, as for a wait on its own), then the block meets.
				const lc_u32 want = s.count >> LC_WAIT_GROUP_SHIFT;
				const lc_plan_step *c = run ? &runs[v] : &table[i];
				const lc_u32 k = lc_plan_wait_group(c, want, v + want <= count && i + want <= period);
				skip = k - 1;
				// Waits that fail together: the first to claim the
				// record writes it.
				if (tid < k && !lc_plan_wait(c[tid], c[tid].value + r * c[tid].step, timeout_ns, abort_flag, rec, tag,
				                             i + (lc_u32)tid, flags, spread ? arr : 0, &claim))
					stop = 1;
				__syncthreads();
				if (stop) return false;
				continue;
			}
			if (s.kind == LC_STEP_LINE_WAIT || s.kind == LC_STEP_LINE_PUT) {
				// A group of line steps from this one (or this one
				// alone); a drain has its own barrier, then thread 0's
				// signals.
				const lc_u32 want = s.kind == LC_STEP_LINE_PUT ? s.count : s.count >> LC_LINE_GROUP_SHIFT;
				const lc_plan_step *c = run ? &runs[v] : &table[i];
				const lc_u32 k = lc_plan_line_group(c, want, v + want <= count && i + want <= period, s.kind);
				skip = k - 1;
				// A spread plan's blocks each take their share of the lines.
				const lc_u64 gtid = spread ? bid * nth + tid : tid, gnth = spread ? nth * gridDim.x : nth;
				if (s.kind == LC_STEP_LINE_WAIT) {
					if (!lc_plan_lines_drain(c, k, r, timeout_ns, abort_flag, rec, tag, i, tid, nth, gtid, gnth, spread ? arr : 0,
					                         &stop, &ndone, &seen, expect))
						return false;
					if (spread) {
						// A drain is a wait: no block goes on before every
						// block has its share of the lines (a block may
						// have none), as a wait holds every block.
						if (!lc_plan_meet(arr, bid, arrivals, stop, stop0, timeout_ns, abort_flag, rec, tag, i)) return false;
					}
					continue;
				}
				lc_plan_lines_put(c, k, r, gtid, gnth);
				__syncthreads();
				continue;
			}
			lc_u8 *d = (lc_u8 *)s.dst;
			const lc_u8 *src = (const lc_u8 *)s.src;
			lc_u32 kind = LC_WIDE_COPY, k = 0;
			lc_u64 value = s.value;
			const lc_u8 *srcs[LC_CHAIN_MAX];
			if (s.kind == LC_STEP_COPY) {
				// count >> LC_LINE_GROUP_SHIFT > 1: this copy and the ones
				// after it of the same source and size, to their own
				// places, as one step (lc_plan_copy_group).
				const lc_u32 want = s.count >> LC_LINE_GROUP_SHIFT, chain = s.count & LC_COPY_CHAIN_MASK;
				const lc_u32 g = lc_plan_copy_group(run ? &runs[v] : &table[i], want, v + want <= count && i + want <= period, srcs);
				if (g > 1) {
					kind = LC_WIDE_COPY_GROUP;
					k = g;
					skip = g - 1;
				} else if (chain > 0) {
					// chain > 0: the chain reduce steps after it reduce
					// into the bytes it writes (the host's compiler says
					// so): one chain that starts from the copy's source,
					// where lc_plan_chain allows.
					const lc_plan_step &r0 = run ? runs[v + 1 < count ? v + 1 : v] : table[i + 1 < period ? i + 1 : i];
					if (lc_plan_chain(&r0, chain, v + 1 + chain <= count && i + 1 + chain <= period, d, src, s.n, r0.value,
					                  srcs)) {
						kind = LC_WIDE_CHAIN;
						k = chain;
						value = r0.value;
						skip = chain;
					}
				}
			} else if (s.kind == LC_STEP_REDUCE) {
				// src may be a peer's window (NVLink): read as a get's
				// copy reads it, after the barrier that follows the wait.
				// count > 1: this step and the count - 1 after it reduce
				// into the same dst (the host's compiler says so), run as
				// one chain where lc_plan_chain allows.
				kind = LC_WIDE_REDUCE;
				if (s.count > 1 && lc_plan_chain(run ? &runs[v] : &table[i], s.count, v + s.count <= count && i + s.count <= period,
				                                 d, 0, s.n, s.value, srcs)) {
					kind = LC_WIDE_CHAIN;
					k = s.count;
					src = 0;
					skip = s.count - 1;
				}
			} else {
				kind = s.kind == LC_STEP_FILL_BYTE ? LC_WIDE_FILL_BYTE : s.kind == LC_STEP_FILL_IOTA ? LC_WIDE_FILL_IOTA : LC_WIDE_FILL_RAND;
			}
			// A spread plan's blocks each take their share.
			lc_plan_wide(kind, k, d, src, s.n, value, srcs, spread ? bid * nth + tid : tid, spread ? nth * gridDim.x : nth);
			// Every thread's part is done before thread 0 signals.
			__syncthreads();
		}
	}
	// Whether every step ran: a failure thread 0 saw after the last
	// barrier is in stop too.
	__syncthreads();
	return !stop;
}

// lc_plan_entry is the interpreter kernels' body: count steps of a plan of
// period steps (lc_plan_block) on one block, or with LC_PLAN_SPREAD on
// every block of the grid (sync_grid.cu), job their job area.
__device__ __forceinline__ void lc_plan_entry(const lc_plan_step *steps, lc_u32 period, lc_u32 first, lc_u64 count,
                                              lc_u64 rep0, lc_u64 timeout_ns, const lc_u32 *abort_flag, lc_record *rec,
                                              lc_u32 tag, int flags, const lc_u64 *epoch, lc_u64 *job,
                                              const lc_plan_moves &moves) {
	// Every thread of a block leaves lc_plan_block at the same step.
	lc_u64 arrivals = 0;
	(void)lc_plan_block(steps, period, first, count, rep0, timeout_ns, abort_flag, rec, tag, flags, epoch, moves, job, true,
	                    arrivals);
	if ((flags & LC_PLAN_SPREAD) && threadIdx.x == 0) lc_spread_leave(job);
}

// lc_plan runs a plan (lc_plan_entry) with blocks of up to LC_PLAN_THREADS
// threads; lc_plan_mid, the same with blocks of up to LC_PLAN_MID_THREADS
// (more registers a thread).
#if LC_IN_PART(1)
extern "C" __global__ void __launch_bounds__(LC_PLAN_THREADS) lc_plan(const lc_plan_step *steps, lc_u32 period,
                                                                       lc_u32 first, lc_u64 count, lc_u64 rep0,
                                                                       lc_u64 timeout_ns, const lc_u32 *abort_flag,
                                                                       lc_record *rec, lc_u32 tag, int flags,
                                                                       const lc_u64 *epoch, lc_u64 *job,
                                                                       const lc_plan_moves moves) {
	lc_plan_entry(steps, period, first, count, rep0, timeout_ns, abort_flag, rec, tag, flags, epoch, job, moves);
}
#endif

#if LC_IN_PART(2)
extern "C" __global__ void __launch_bounds__(LC_PLAN_MID_THREADS)
    lc_plan_mid(const lc_plan_step *steps, lc_u32 period, lc_u32 first, lc_u64 count, lc_u64 rep0, lc_u64 timeout_ns,
                const lc_u32 *abort_flag, lc_record *rec, lc_u32 tag, int flags, const lc_u64 *epoch, lc_u64 *job,
                const lc_plan_moves moves) {
	lc_plan_entry(steps, period, first, count, rep0, timeout_ns, abort_flag, rec, tag, flags, epoch, job, moves);
}
#endif
