// Data kernels: fill, checksum, equal. Their exact functions are documented
// in kernels/ref.go, whose Go implementations the host backend shares.

// lc_fill_byte sets n bytes at dst to (lc_u8)value.
LC_KERNEL void lc_fill_byte(lc_u8 *dst, lc_u64 n, lc_u32 value) {
	const lc_u64 tid = lc_tid(), nth = lc_nthreads();
	const lc_u8 b = (lc_u8)value;
	const lc_u32 x = 0x01010101u * b;
	lc_u64 head = (16 - ((lc_u64)dst & 15)) & 15;
	if (head > n) head = n;
	for (lc_u64 i = tid; i < head; i += nth) dst[i] = b;
	const lc_u64 body = (n - head) / 16;
	uint4 *d = (uint4 *)(dst + head);
	for (lc_u64 i = tid; i < body; i += nth) d[i] = make_uint4(x, x, x, x);
	for (lc_u64 i = head + body * 16 + tid; i < n; i += nth) dst[i] = b;
}

// lc_fill_iota32 writes dst[i] = start + i (mod 2^32) for i < count.
LC_KERNEL void lc_fill_iota32(lc_u32 *dst, lc_u64 count, lc_u32 start) {
	const lc_u64 nth = lc_nthreads();
	for (lc_u64 i = lc_tid(); i < count; i += nth) dst[i] = start + (lc_u32)i;
}

// lc_fill_rand writes the pseudo-random stream of seed: byte k is byte k%8
// (little endian) of lc_rand_word(seed, k/8), k counted from dst.
LC_KERNEL void lc_fill_rand(lc_u8 *dst, lc_u64 n, lc_u64 seed) {
	const lc_u64 tid = lc_tid(), nth = lc_nthreads();
	const lc_u64 nw = n / 8;
	if (((lc_u64)dst & 7) == 0) {
		lc_u64 *d = (lc_u64 *)dst;
		for (lc_u64 i = tid; i < nw; i += nth) d[i] = lc_rand_word(seed, i);
	} else {
		for (lc_u64 i = tid; i < nw; i += nth) {
			const lc_u64 w = lc_rand_word(seed, i);
			for (int k = 0; k < 8; k++) dst[8 * i + k] = (lc_u8)(w >> (8 * k));
		}
	}
	if (tid == 0 && nw * 8 < n) {
		const lc_u64 w = lc_rand_word(seed, nw);
		for (lc_u64 k = 0; nw * 8 + k < n; k++) dst[nw * 8 + k] = (lc_u8)(w >> (8 * k));
	}
}

// lc_checksum adds the checksum of the n bytes at src to *out, which the
// caller zeroes first:
//   n*GOLDEN + sum over 8-byte little-endian words w_i (the last one
//   zero-padded) of mix64(w_i ^ (i*CHECK_STEP)), all mod 2^64.
// Addition commutes, so blocks combine with atomicAdd in any order.
LC_KERNEL void lc_checksum(const lc_u8 *src, lc_u64 n, lc_u64 *out) {
	const lc_u64 tid = lc_tid(), nth = lc_nthreads();
	const lc_u64 full = n / 8, nw = (n + 7) / 8;
	const bool aligned = ((lc_u64)src & 7) == 0;
	lc_u64 acc = 0;
	for (lc_u64 i = tid; i < nw; i += nth) {
		lc_u64 w = 0;
		if (aligned && i < full) {
			w = ((const lc_u64 *)src)[i];
		} else {
			for (lc_u64 k = 0; k < 8 && 8 * i + k < n; k++) w |= (lc_u64)src[8 * i + k] << (8 * k);
		}
		acc += lc_mix64(w ^ (i * LC_CHECK_STEP));
	}
	const lc_u64 s = lc_block_sum(acc);
	if (threadIdx.x == 0) {
		lc_u64 add = s;
		if (blockIdx.x == 0) add += n * LC_GOLDEN;
		atomicAdd((unsigned long long *)out, (unsigned long long)add);
	}
}

// Number of non-zero bytes of x.
__device__ __forceinline__ lc_u64 lc_nonzero_bytes(lc_u64 x) {
	const lc_u64 low7 = 0x7F7F7F7F7F7F7F7Full;
	const lc_u64 t = ((x & low7) + low7) | x;
	return (lc_u64)__popcll(t & ~low7);
}

// lc_equal adds to *out (zeroed by the caller) the number of byte positions
// k < n where a[k] != b[k].
LC_KERNEL void lc_equal(const lc_u8 *a, const lc_u8 *b, lc_u64 n, lc_u64 *out) {
	const lc_u64 tid = lc_tid(), nth = lc_nthreads();
	lc_u64 cnt = 0, from = 0;
	if ((((lc_u64)a | (lc_u64)b) & 7) == 0) {
		const lc_u64 nw = n / 8;
		const lc_u64 *wa = (const lc_u64 *)a, *wb = (const lc_u64 *)b;
		for (lc_u64 i = tid; i < nw; i += nth) cnt += lc_nonzero_bytes(wa[i] ^ wb[i]);
		from = nw * 8;
	}
	for (lc_u64 i = from + tid; i < n; i += nth) cnt += a[i] != b[i];
	const lc_u64 s = lc_block_sum(cnt);
	if (threadIdx.x == 0 && s != 0) atomicAdd((unsigned long long *)out, (unsigned long long)s);
}
