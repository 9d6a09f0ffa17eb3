// Reductions: dst[i] = dst[i] op src[i] over count elements (kernels.ReduceBytes
// is the host reference, bit-exact for every type but the payload of NaNs).
// src may be a peer's memory (NVLink): the kernel then pulls it.

// Operator codes (kernels.RedOp).
#define LC_RED_SUM 0
#define LC_RED_PROD 1
#define LC_RED_MIN 2
#define LC_RED_MAX 3

// Element type codes (kernels.DType).
#define LC_DT_F32 0
#define LC_DT_F64 1
#define LC_DT_F16 2
#define LC_DT_BF16 3
#define LC_DT_I32 4
#define LC_DT_I64 5
#define LC_DT_U32 6
#define LC_DT_U64 7

typedef unsigned short lc_u16;
struct lc_f16 { lc_u16 x; };
struct lc_bf16 { lc_u16 x; };

template <int OP, typename A> __device__ __forceinline__ A lc_red(A a, A b) {
	if (OP == LC_RED_SUM) return a + b;
	if (OP == LC_RED_PROD) return a * b;
	if (OP == LC_RED_MIN) return b < a ? b : a;
	return b > a ? b : a;
}

__device__ __forceinline__ float lc_h2f(lc_u16 h) {
	float f;
	asm("{ cvt.f32.f16 %0, %1; }" : "=f"(f) : "h"(h));
	return f;
}

__device__ __forceinline__ lc_u16 lc_f2h(float f) {
	lc_u16 h;
	asm("{ cvt.rn.f16.f32 %0, %1; }" : "=h"(h) : "f"(f));
	return h;
}

__device__ __forceinline__ float lc_bf2f(lc_u16 h) {
	float f;
	asm("{ mov.b32 %0, %1; }" : "=f"(f) : "r"((lc_u32)h << 16));
	return f;
}

// Round to nearest even, in integer arithmetic like kernels.F32ToBF16 (no
// architecture requirement).
__device__ __forceinline__ lc_u16 lc_f2bf(float f) {
	lc_u32 b;
	asm("{ mov.b32 %0, %1; }" : "=r"(b) : "f"(f));
	if ((b & 0x7fffffffu) > 0x7f800000u) return (lc_u16)((b >> 16) | 0x40);
	b += 0x7fffu + ((b >> 16) & 1u);
	return (lc_u16)(b >> 16);
}

// Half types are combined in f32 and rounded once.
template <typename T, int OP> struct lc_redop {
	static __device__ __forceinline__ T apply(T a, T b) { return lc_red<OP, T>(a, b); }
};
template <int OP> struct lc_redop<lc_f16, OP> {
	static __device__ __forceinline__ lc_f16 apply(lc_f16 a, lc_f16 b) {
		lc_f16 r;
		r.x = lc_f2h(lc_red<OP, float>(lc_h2f(a.x), lc_h2f(b.x)));
		return r;
	}
};
template <int OP> struct lc_redop<lc_bf16, OP> {
	static __device__ __forceinline__ lc_bf16 apply(lc_bf16 a, lc_bf16 b) {
		lc_bf16 r;
		r.x = lc_f2bf(lc_red<OP, float>(lc_bf2f(a.x), lc_bf2f(b.x)));
		return r;
	}
};

template <typename T, int OP> __device__ __forceinline__ void lc_red_vec(uint4 &d, const uint4 &s) {
	T *dp = (T *)&d;
	const T *sp = (const T *)&s;
#pragma unroll
	for (int k = 0; k < (int)(16 / sizeof(T)); k++) dp[k] = lc_redop<T, OP>::apply(dp[k], sp[k]);
}

// The range as thread tid of nth: where dst and src share their
// alignment mod 16, a head of single elements, then 16-byte vectors four
// per thread and turn (loads first, so that eight are in flight), then the
// tail; otherwise single elements throughout.
template <typename T, int OP>
__device__ void lc_reduce_range(lc_u8 *dst, const lc_u8 *src, lc_u64 count, lc_u64 tid, lc_u64 nth) {
	T *d = (T *)dst;
	const T *s = (const T *)src;
	const lc_u64 per = 16 / sizeof(T);
	if ((((lc_u64)dst ^ (lc_u64)src) & 15) != 0) {
		for (lc_u64 i = tid; i < count; i += nth) d[i] = lc_redop<T, OP>::apply(d[i], s[i]);
		return;
	}
	lc_u64 head = ((16 - ((lc_u64)dst & 15)) & 15) / sizeof(T);
	if (head > count) head = count;
	for (lc_u64 i = tid; i < head; i += nth) d[i] = lc_redop<T, OP>::apply(d[i], s[i]);
	const lc_u64 nv = (count - head) / per;
	uint4 *dv = (uint4 *)(d + head);
	const uint4 *sv = (const uint4 *)(s + head);
	lc_u64 i = tid;
	for (; i + 3 * nth < nv; i += 4 * nth) {
		uint4 a0 = dv[i], a1 = dv[i + nth], a2 = dv[i + 2 * nth], a3 = dv[i + 3 * nth];
		const uint4 b0 = sv[i], b1 = sv[i + nth], b2 = sv[i + 2 * nth], b3 = sv[i + 3 * nth];
		lc_red_vec<T, OP>(a0, b0);
		lc_red_vec<T, OP>(a1, b1);
		lc_red_vec<T, OP>(a2, b2);
		lc_red_vec<T, OP>(a3, b3);
		dv[i] = a0;
		dv[i + nth] = a1;
		dv[i + 2 * nth] = a2;
		dv[i + 3 * nth] = a3;
	}
	for (; i < nv; i += nth) {
		uint4 a = dv[i];
		lc_red_vec<T, OP>(a, sv[i]);
		dv[i] = a;
	}
	for (lc_u64 j = head + nv * per + tid; j < count; j += nth) d[j] = lc_redop<T, OP>::apply(d[j], s[j]);
}

// The body of the reduce kernels: the range over the whole grid.
template <typename T, int OP> __device__ void lc_reduce_body(lc_u8 *dst, const lc_u8 *src, lc_u64 count) {
	lc_reduce_range<T, OP>(dst, src, count, lc_tid(), lc_nthreads());
}

// lc_by_type runs f.run<T, OP>() for the element type T of code type
// (LC_DT_*); signed sums and products run on the unsigned type of the
// same width, as the kernels below. An unknown code runs nothing.
template <int OP, typename F> __device__ __forceinline__ void lc_by_type(lc_u32 type, const F &f) {
	const bool wraps = OP == LC_RED_SUM || OP == LC_RED_PROD;
	if (type == LC_DT_F32) {
		f.template run<float, OP>();
	} else if (type == LC_DT_F64) {
		f.template run<double, OP>();
	} else if (type == LC_DT_F16) {
		f.template run<lc_f16, OP>();
	} else if (type == LC_DT_BF16) {
		f.template run<lc_bf16, OP>();
	} else if (type == LC_DT_I32) {
		if (wraps) {
			f.template run<lc_u32, OP>();
		} else {
			f.template run<int, OP>();
		}
	} else if (type == LC_DT_I64) {
		if (wraps) {
			f.template run<lc_u64, OP>();
		} else {
			f.template run<long long, OP>();
		}
	} else if (type == LC_DT_U32) {
		f.template run<lc_u32, OP>();
	} else if (type == LC_DT_U64) {
		f.template run<lc_u64, OP>();
	}
}

// lc_by_op_type is lc_by_type for the operator of code op (LC_RED_*) too;
// an unknown code runs nothing (the host checks them).
template <typename F> __device__ __forceinline__ void lc_by_op_type(lc_u32 op, lc_u32 type, const F &f) {
	if (op == LC_RED_SUM) {
		lc_by_type<LC_RED_SUM>(type, f);
	} else if (op == LC_RED_PROD) {
		lc_by_type<LC_RED_PROD>(type, f);
	} else if (op == LC_RED_MIN) {
		lc_by_type<LC_RED_MIN>(type, f);
	} else if (op == LC_RED_MAX) {
		lc_by_type<LC_RED_MAX>(type, f);
	}
}

// lc_reduce_one is lc_reduce_range over n bytes, for lc_by_op_type.
struct lc_reduce_one {
	lc_u8 *dst;
	const lc_u8 *src;
	lc_u64 n, tid, nth;
	template <typename T, int OP> __device__ __forceinline__ void run() const {
		lc_reduce_range<T, OP>(dst, src, n / sizeof(T), tid, nth);
	}
};

// lc_reduce_any reduces n bytes of src into dst, dst op= src, as thread
// tid of nth, for type code type (LC_DT_*) and operator code op
// (LC_RED_*); an unknown code does nothing (the host checks them). The
// plan interpreter's reduce step: a call, not inlined, so that the 32
// bodies leave the registers and code of the interpreter's other steps
// (its wait-to-signal path) as they were.
__device__ __noinline__ void lc_reduce_any(lc_u32 type, lc_u32 op, lc_u8 *dst, const lc_u8 *src, lc_u64 n, lc_u64 tid, lc_u64 nth) {
	lc_by_op_type(op, type, lc_reduce_one{dst, src, n, tid, nth});
}

// One kernel per type and operator, lc_reduce_<type>_<op> (kernels.ReduceKernel);
// signed sums and products run on the unsigned type of the same width (the
// same bits, wrapping without undefined behaviour).
LC_KERNEL void lc_reduce_f32_sum(lc_u8 *dst, const lc_u8 *src, lc_u64 count) { lc_reduce_body<float, LC_RED_SUM>(dst, src, count); }
LC_KERNEL void lc_reduce_f32_prod(lc_u8 *dst, const lc_u8 *src, lc_u64 count) { lc_reduce_body<float, LC_RED_PROD>(dst, src, count); }
LC_KERNEL void lc_reduce_f32_min(lc_u8 *dst, const lc_u8 *src, lc_u64 count) { lc_reduce_body<float, LC_RED_MIN>(dst, src, count); }
LC_KERNEL void lc_reduce_f32_max(lc_u8 *dst, const lc_u8 *src, lc_u64 count) { lc_reduce_body<float, LC_RED_MAX>(dst, src, count); }
LC_KERNEL void lc_reduce_f64_sum(lc_u8 *dst, const lc_u8 *src, lc_u64 count) { lc_reduce_body<double, LC_RED_SUM>(dst, src, count); }
LC_KERNEL void lc_reduce_f64_prod(lc_u8 *dst, const lc_u8 *src, lc_u64 count) { lc_reduce_body<double, LC_RED_PROD>(dst, src, count); }
LC_KERNEL void lc_reduce_f64_min(lc_u8 *dst, const lc_u8 *src, lc_u64 count) { lc_reduce_body<double, LC_RED_MIN>(dst, src, count); }
LC_KERNEL void lc_reduce_f64_max(lc_u8 *dst, const lc_u8 *src, lc_u64 count) { lc_reduce_body<double, LC_RED_MAX>(dst, src, count); }
LC_KERNEL void lc_reduce_f16_sum(lc_u8 *dst, const lc_u8 *src, lc_u64 count) { lc_reduce_body<lc_f16, LC_RED_SUM>(dst, src, count); }
LC_KERNEL void lc_reduce_f16_prod(lc_u8 *dst, const lc_u8 *src, lc_u64 count) { lc_reduce_body<lc_f16, LC_RED_PROD>(dst, src, count); }
LC_KERNEL void lc_reduce_f16_min(lc_u8 *dst, const lc_u8 *src, lc_u64 count) { lc_reduce_body<lc_f16, LC_RED_MIN>(dst, src, count); }
LC_KERNEL void lc_reduce_f16_max(lc_u8 *dst, const lc_u8 *src, lc_u64 count) { lc_reduce_body<lc_f16, LC_RED_MAX>(dst, src, count); }
LC_KERNEL void lc_reduce_bf16_sum(lc_u8 *dst, const lc_u8 *src, lc_u64 count) { lc_reduce_body<lc_bf16, LC_RED_SUM>(dst, src, count); }
LC_KERNEL void lc_reduce_bf16_prod(lc_u8 *dst, const lc_u8 *src, lc_u64 count) { lc_reduce_body<lc_bf16, LC_RED_PROD>(dst, src, count); }
LC_KERNEL void lc_reduce_bf16_min(lc_u8 *dst, const lc_u8 *src, lc_u64 count) { lc_reduce_body<lc_bf16, LC_RED_MIN>(dst, src, count); }
LC_KERNEL void lc_reduce_bf16_max(lc_u8 *dst, const lc_u8 *src, lc_u64 count) { lc_reduce_body<lc_bf16, LC_RED_MAX>(dst, src, count); }
LC_KERNEL void lc_reduce_i32_sum(lc_u8 *dst, const lc_u8 *src, lc_u64 count) { lc_reduce_body<lc_u32, LC_RED_SUM>(dst, src, count); }
LC_KERNEL void lc_reduce_i32_prod(lc_u8 *dst, const lc_u8 *src, lc_u64 count) { lc_reduce_body<lc_u32, LC_RED_PROD>(dst, src, count); }
LC_KERNEL void lc_reduce_i32_min(lc_u8 *dst, const lc_u8 *src, lc_u64 count) { lc_reduce_body<int, LC_RED_MIN>(dst, src, count); }
LC_KERNEL void lc_reduce_i32_max(lc_u8 *dst, const lc_u8 *src, lc_u64 count) { lc_reduce_body<int, LC_RED_MAX>(dst, src, count); }
LC_KERNEL void lc_reduce_i64_sum(lc_u8 *dst, const lc_u8 *src, lc_u64 count) { lc_reduce_body<lc_u64, LC_RED_SUM>(dst, src, count); }
LC_KERNEL void lc_reduce_i64_prod(lc_u8 *dst, const lc_u8 *src, lc_u64 count) { lc_reduce_body<lc_u64, LC_RED_PROD>(dst, src, count); }
LC_KERNEL void lc_reduce_i64_min(lc_u8 *dst, const lc_u8 *src, lc_u64 count) { lc_reduce_body<long long, LC_RED_MIN>(dst, src, count); }
LC_KERNEL void lc_reduce_i64_max(lc_u8 *dst, const lc_u8 *src, lc_u64 count) { lc_reduce_body<long long, LC_RED_MAX>(dst, src, count); }
LC_KERNEL void lc_reduce_u32_sum(lc_u8 *dst, const lc_u8 *src, lc_u64 count) { lc_reduce_body<lc_u32, LC_RED_SUM>(dst, src, count); }
LC_KERNEL void lc_reduce_u32_prod(lc_u8 *dst, const lc_u8 *src, lc_u64 count) { lc_reduce_body<lc_u32, LC_RED_PROD>(dst, src, count); }
LC_KERNEL void lc_reduce_u32_min(lc_u8 *dst, const lc_u8 *src, lc_u64 count) { lc_reduce_body<lc_u32, LC_RED_MIN>(dst, src, count); }
LC_KERNEL void lc_reduce_u32_max(lc_u8 *dst, const lc_u8 *src, lc_u64 count) { lc_reduce_body<lc_u32, LC_RED_MAX>(dst, src, count); }
LC_KERNEL void lc_reduce_u64_sum(lc_u8 *dst, const lc_u8 *src, lc_u64 count) { lc_reduce_body<lc_u64, LC_RED_SUM>(dst, src, count); }
LC_KERNEL void lc_reduce_u64_prod(lc_u8 *dst, const lc_u8 *src, lc_u64 count) { lc_reduce_body<lc_u64, LC_RED_PROD>(dst, src, count); }
LC_KERNEL void lc_reduce_u64_min(lc_u8 *dst, const lc_u8 *src, lc_u64 count) { lc_reduce_body<lc_u64, LC_RED_MIN>(dst, src, count); }
LC_KERNEL void lc_reduce_u64_max(lc_u8 *dst, const lc_u8 *src, lc_u64 count) { lc_reduce_body<lc_u64, LC_RED_MAX>(dst, src, count); }

// A chain: dst op= src[0], then dst op= src[1], ... (k of them, at most
// LC_CHAIN_MAX), each element combined with the sources in that order and
// rounded after each as the single steps round, so the bits are those of
// the steps one after another; one pass reads dst once. With init, dst
// starts as a copy of init (a copy to dst before the steps). Every pointer is
// 16-byte aligned and nv counts 16-byte vectors (the caller checks).
#define LC_CHAIN_MAX 8

template <typename T, int OP, int TURNS>
__device__ void lc_reduce_chain_range(lc_u8 *dst, const lc_u8 *init, const lc_u8 *const *src, int k, lc_u64 nv, lc_u64 tid,
                                      lc_u64 nth) {
	uint4 *dv = (uint4 *)dst;
	const uint4 *iv = init ? (const uint4 *)init : dv;
	lc_u64 i = tid;
	// TURNS vectors a thread at once (loads first): with few sources one
	// turn leaves too few loads in flight to keep the memory busy.
	for (; TURNS > 1 && i + (TURNS - 1) * nth < nv; i += TURNS * nth) {
		uint4 a[TURNS], b[TURNS][LC_CHAIN_MAX];
#pragma unroll
		for (int u = 0; u < TURNS; u++) a[u] = iv[i + u * nth];
#pragma unroll
		for (int j = 0; j < LC_CHAIN_MAX; j++) {
			if (j < k) {
#pragma unroll
				for (int u = 0; u < TURNS; u++) b[u][j] = ((const uint4 *)src[j])[i + u * nth];
			}
		}
#pragma unroll
		for (int u = 0; u < TURNS; u++) {
#pragma unroll
			for (int j = 0; j < LC_CHAIN_MAX; j++) {
				if (j < k) lc_red_vec<T, OP>(a[u], b[u][j]);
			}
			dv[i + u * nth] = a[u];
		}
	}
	for (; i < nv; i += nth) {
		uint4 a = iv[i];
		uint4 b[LC_CHAIN_MAX];
#pragma unroll
		for (int j = 0; j < LC_CHAIN_MAX; j++) {
			if (j < k) b[j] = ((const uint4 *)src[j])[i];
		}
#pragma unroll
		for (int j = 0; j < LC_CHAIN_MAX; j++) {
			if (j < k) lc_red_vec<T, OP>(a, b[j]);
		}
		dv[i] = a;
	}
}

// lc_reduce_chain is lc_reduce_chain_range, for lc_by_op_type.
template <int TURNS> struct lc_reduce_chain {
	lc_u8 *dst;
	const lc_u8 *init;
	const lc_u8 *const *src;
	int k;
	lc_u64 nv, tid, nth;
	template <typename T, int OP> __device__ __forceinline__ void run() const {
		lc_reduce_chain_range<T, OP, TURNS>(dst, init, src, k, nv, tid, nth);
	}
};

// lc_reduce_chain_any is the chain for type and operator codes, as
// lc_reduce_any is for one source; not inlined for the same reason.
__device__ __noinline__ void lc_reduce_chain_any(lc_u32 type, lc_u32 op, lc_u8 *dst, const lc_u8 *init,
                                                 const lc_u8 *const *src, int k, lc_u64 nv, lc_u64 tid, lc_u64 nth) {
	lc_by_op_type(op, type, lc_reduce_chain<1>{dst, init, src, k, nv, tid, nth});
}

// lc_reduce_chain_k: the chain as a kernel of its own (stream and graph
// mode's reduce steps into one place, kernels.ReduceChain): dst op= s0,
// then s1, ... (k of them, 1 <= k <= LC_CHAIN_MAX; the unused ones null)
// over nv 16-byte vectors, every pointer 16-byte aligned; two vectors a
// thread and turn (the interpreter's chain keeps one: its registers).
LC_KERNEL void lc_reduce_chain_k(lc_u32 type, lc_u32 op, lc_u8 *dst, lc_u64 nv, lc_u32 k, const lc_u8 *s0, const lc_u8 *s1,
                                 const lc_u8 *s2, const lc_u8 *s3, const lc_u8 *s4, const lc_u8 *s5, const lc_u8 *s6,
                                 const lc_u8 *s7) {
	const lc_u8 *const src[LC_CHAIN_MAX] = {s0, s1, s2, s3, s4, s5, s6, s7};
	lc_by_op_type(op, type, lc_reduce_chain<2>{dst, nullptr, src, (int)k, nv, lc_tid(), lc_nthreads()});
}
