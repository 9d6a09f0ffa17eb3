// put: copy n bytes from src to dst; either may be peer (IPC- or
// VMM-mapped) memory.
//
// The widest access w in {16, 8, 4} for which dst and src share alignment is
// used for the body, after a byte head that aligns dst to w and before a
// byte tail. When they share no 4-byte alignment, the body assembles 16
// bytes from byte loads per thread and writes them with one 16-byte store.
// All loops are grid-stride, so any grid covers any n.

template <typename T>
__device__ __forceinline__ void lc_copy_words(T *dst, const T *src, lc_u64 nw, lc_u64 tid, lc_u64 nth) {
	lc_u64 i = tid;
	// Four independent loads in flight per thread before the stores.
	for (; i + 3 * nth < nw; i += 4 * nth) {
		const T a = src[i];
		const T b = src[i + nth];
		const T c = src[i + 2 * nth];
		const T d = src[i + 3 * nth];
		dst[i] = a;
		dst[i + nth] = b;
		dst[i + 2 * nth] = c;
		dst[i + 3 * nth] = d;
	}
	for (; i < nw; i += nth) dst[i] = src[i];
}

__device__ __forceinline__ lc_u32 lc_load_u32_bytes(const lc_u8 *p) {
	return (lc_u32)p[0] | ((lc_u32)p[1] << 8) | ((lc_u32)p[2] << 16) | ((lc_u32)p[3] << 24);
}

// lc_put_range copies n bytes as thread tid of nth threads.
__device__ void lc_put_range(lc_u8 *dst, const lc_u8 *src, lc_u64 n, lc_u64 tid, lc_u64 nth) {
	const lc_u64 da = (lc_u64)dst, sa = (lc_u64)src;
	const lc_u64 diff = da ^ sa;
	// w == 0 selects byte loads with 16-byte stores.
	const lc_u64 w = (diff & 15) == 0 ? 16 : (diff & 7) == 0 ? 8 : (diff & 3) == 0 ? 4 : 0;
	const lc_u64 align = w ? w : 16;
	lc_u64 head = (align - (da & (align - 1))) & (align - 1);
	if (head > n) head = n;
	for (lc_u64 i = tid; i < head; i += nth) dst[i] = src[i];

	const lc_u64 body = (n - head) / align;
	lc_u8 *d = dst + head;
	const lc_u8 *s = src + head;
	switch (w) {
	case 16: lc_copy_words((uint4 *)d, (const uint4 *)s, body, tid, nth); break;
	case 8: lc_copy_words((lc_u64 *)d, (const lc_u64 *)s, body, tid, nth); break;
	case 4: lc_copy_words((lc_u32 *)d, (const lc_u32 *)s, body, tid, nth); break;
	default:
		for (lc_u64 i = tid; i < body; i += nth) {
			const lc_u8 *p = s + 16 * i;
			((uint4 *)d)[i] = make_uint4(lc_load_u32_bytes(p), lc_load_u32_bytes(p + 4), lc_load_u32_bytes(p + 8),
			                             lc_load_u32_bytes(p + 12));
		}
	}

	for (lc_u64 i = head + body * align + tid; i < n; i += nth) dst[i] = src[i];
}

LC_KERNEL void lc_put(lc_u8 *dst, const lc_u8 *src, lc_u64 n) {
	lc_put_range(dst, src, n, lc_tid(), lc_nthreads());
}

// lc_put_multi: the same n bytes from src to each of k places (1 <= k <=
// 8; d0..d7, the unused ones null), the grid's blocks dealt among them in
// turn (a grid of a multiple of k blocks gives each place as many).
LC_KERNEL void lc_put_multi(const lc_u8 *src, lc_u64 n, lc_u32 k, lc_u8 *d0, lc_u8 *d1, lc_u8 *d2, lc_u8 *d3, lc_u8 *d4,
                            lc_u8 *d5, lc_u8 *d6, lc_u8 *d7) {
	lc_u8 *const d[8] = {d0, d1, d2, d3, d4, d5, d6, d7};
	const lc_u32 which = blockIdx.x % k;
	const lc_u64 blocks = (gridDim.x - which + k - 1) / k;
	lc_put_range(d[which], src, n, (lc_u64)(blockIdx.x / k) * blockDim.x + threadIdx.x, blocks * blockDim.x);
}
