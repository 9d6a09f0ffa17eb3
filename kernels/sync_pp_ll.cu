// (Named to sort after sync_agp_one.cu, whose 16-byte line helpers it uses.)

// lc_pp_put_signal_ll is the put_signal ping-pong of lc_pp_put_signal with
// the payload carried in the signal's own store (a low-latency line): each
// put_signal of 8 bytes is one 16-byte store {lo, i, hi, i} into the
// peer's line; the receiver polls its own line until both flag words read
// i, then stores the payload into its data and i into its slot, both in its
// own memory, in program order. The sender needs no release: no store of
// the data can be seen without the flag beside it, so nothing waits for an
// earlier store's acknowledgement. src is private (no peer writes it): it
// is read before each wait. Lines start at 0 and i < 2^32.
// *out_ns gets the elapsed ns, or ~0 on timeout.
LC_KERNEL void lc_pp_put_signal_ll(lc_u8 *peer_line, const lc_u8 *my_line, lc_u64 *my_data, const lc_u64 *src,
                                               lc_u64 *my_slot, lc_u64 iters, int initiator, lc_u64 timeout_ns,
                                               lc_u64 *out_ns) {
	if (threadIdx.x != 0 || blockIdx.x != 0) return;
	const lc_u64 start = lc_globaltimer();
	for (lc_u64 i = 1; i <= iters; i++) {
		const lc_u64 payload = *(const volatile lc_u64 *)src;
		const lc_u32 flag = (lc_u32)i;
		for (int side = 0; side < 2; side++) {
			// The initiator sends, then receives; the responder the reverse.
			if ((side == 0) == (initiator != 0)) {
				lc_ll_store(peer_line, (lc_u32)payload, (lc_u32)(payload >> 32), flag, 0);
				continue;
			}
			lc_u32 d0, f0, d1, f1;
			for (lc_u32 spins = 1;; spins++) {
				lc_ll_load(my_line, d0, f0, d1, f1);
				if (f0 == flag && f1 == flag) break;
				if ((spins & 255) == 0 && timeout_ns != 0 && lc_globaltimer() - start >= timeout_ns) {
					if (out_ns) *out_ns = ~0ull;
					return;
				}
			}
			*(volatile lc_u64 *)my_data = (lc_u64)d1 << 32 | d0;
			*(volatile lc_u64 *)my_slot = i;
		}
	}
	if (out_ns) *out_ns = lc_globaltimer() - start;
}
