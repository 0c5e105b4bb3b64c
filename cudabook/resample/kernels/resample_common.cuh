// resample_common.cuh: what the C++ rungs (06 cp.async, 07 TMA, 08 fused gather) share.
//
// The problem: out[b, t, :] = np.interp(targets[b, t], times[b, :], feats[b, :, :]) per channel, in float32,
// rounded to bfloat16 (nearest, ties to even). feats and out are bf16 bits (uint16). No headers are needed:
// NVRTC compiles this in a few tenths of a second.
#pragma once

typedef unsigned int u32;
typedef unsigned short u16;
typedef unsigned long long u64;

// ------------------------------------------------------------------------------------------ bf16 arithmetic

// A 32-bit word holds two bf16 values: element 2i in the low half, 2i+1 in the high half (little endian).
__device__ __forceinline__ float bf16_lo(u32 w) { return __uint_as_float(w << 16); }
__device__ __forceinline__ float bf16_hi(u32 w) { return __uint_as_float(w & 0xFFFF0000u); }

// float32 -> bf16 bits, round to nearest even; NaN stays NaN (same as cudabook/bits.py).
__device__ __forceinline__ u32 f32_to_bf16(float x) {
    if (x != x) return 0x7FC0u;
    u32 b = __float_as_uint(x);
    b += 0x7FFFu + ((b >> 16) & 1u);
    return b >> 16;
}

__device__ __forceinline__ float lerp(float a, float c, float w) { return a + w * (c - a); }

// Two float32 -> two bf16 packed in one word (lo in the low half), round to nearest even. With BF16_CVT (the
// default; sm_80 and newer) one instruction does both: cvt.rn.bf16x2.f32 (SASS F2FP.BF16.F32.PACK_AB). The
// integer recipe above costs about seven instructions a value, which counts in a kernel limited by issue slots
// (BF16_CVT=0 builds the recipe, to compare; no lesson times the two apart: lesson 04 leaves open how much of its
// gain over 03 the rounding is). The two agree on every finite value,
// overflow included; a NaN stays a NaN (the instruction's is 0x7FFF, the recipe's 0x7FC0).
#ifndef BF16_CVT
#define BF16_CVT 1
#endif
__device__ __forceinline__ u32 pack_bf16x2(float lo, float hi) {
#if BF16_CVT
    u32 r;
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(hi), "f"(lo));   // a -> upper half, b -> lower
    return r;
#else
    return f32_to_bf16(lo) | (f32_to_bf16(hi) << 16);
#endif
}

// Interpolate two bf16 pairs with weight w; the result is two bf16 values packed the same way.
__device__ __forceinline__ u32 lerp2(u32 a, u32 c, float w) {
    return pack_bf16x2(lerp(bf16_lo(a), bf16_lo(c), w), lerp(bf16_hi(a), bf16_hi(c), w));
}

__device__ __forceinline__ uint4 lerp_vec(uint4 a, uint4 c, float w) {
    return make_uint4(lerp2(a.x, c.x, w), lerp2(a.y, c.y, w), lerp2(a.z, c.z, w), lerp2(a.w, c.w, w));
}
__device__ __forceinline__ uint2 lerp_vec(uint2 a, uint2 c, float w) {
    return make_uint2(lerp2(a.x, c.x, w), lerp2(a.y, c.y, w));
}
__device__ __forceinline__ u32 lerp_vec(u32 a, u32 c, float w) { return lerp2(a, c, w); }

// Where x sits between t0 and t1, clamped to [0, 1]: np.interp holds the end values outside the range.
__device__ __forceinline__ float weight(float t0, float t1, float x) {
    float w = (x - t0) / (t1 - t0);
    return fminf(fmaxf(w, 0.0f), 1.0f);
}

// ------------------------------------------------------------------------------------------ searching

// The interval of x in one row of source times: the largest lo in [0, S-2] with row[lo] <= x, else 0.
__device__ __forceinline__ int find_interval(const float* __restrict__ row, int S, float x) {
    int lo = 0, hi = S - 1;
    while (hi - lo > 1) {
        int mid = (lo + hi) >> 1;
        if (__ldg(row + mid) <= x) lo = mid; else hi = mid;
    }
    return lo;
}

// The same answer for two values at once, found by a whole warp: each round the 32 lanes probe 64 evenly
// spaced times (two each) and ballots tell which stretch holds the answer (times increase, so the probes
// at or below x are a prefix: their count locates it). S = 4096 takes 2 rounds of loads, not 12.
// Every lane of the warp must call it, with the same xa and xb.
__device__ __forceinline__ void warp_interval2(const float* __restrict__ row, int S, float xa, float xb,
                                               int& loa, int& lob) {
    const int lane = threadIdx.x & 31;
    int ba = 0, la = S - 1, bb = 0, lb = S - 1;     // the answer lies in [base, base + len)
    while (la > 1 || lb > 1) {
        const int sa = (la + 63) >> 6, sb = (lb + 63) >> 6;
        int ka = -1, kb = -1;                       // the last probe at or below x
#pragma unroll
        for (int q = 0; q < 2; ++q) {
            const int ia = ba + (32 * q + lane) * sa, ib = bb + (32 * q + lane) * sb;
            const bool pa = la > 1 && ia < ba + la && __ldg(row + ia) <= xa;
            const bool pb = lb > 1 && ib < bb + lb && __ldg(row + ib) <= xb;
            ka += __popc(__ballot_sync(0xffffffffu, pa));
            kb += __popc(__ballot_sync(0xffffffffu, pb));
        }
        // no probe at or below x happens only at base 0 (x before the first time): the answer is 0
        if (la > 1) { const int nb = ba + max(ka, 0) * sa; la = min(sa, ba + la - nb); ba = nb; }
        if (lb > 1) { const int nb = bb + max(kb, 0) * sb; lb = min(sb, bb + lb - nb); bb = nb; }
    }
    loa = ba;
    lob = bb;
}

// With a hint: `base` is a row known to be at or below the answer for xa (for sorted targets, the previous
// item's last interval). One round of 128 probes (rows base .. base+127, four per lane) usually brackets both
// answers; whichever it does not falls back to warp_interval2. base < 0: no hint.
__device__ __forceinline__ bool probe_result(int count, int base, int end, int S, int& lo) {
    if (count == 0) { lo = 0; return base == 0; }                   // x is before row `base`
    if (count == end - base) { lo = end - 1; return end == S - 1; } // x is at or past the last probe
    lo = base + count - 1;
    return true;
}

__device__ __forceinline__ void warp_interval2_hint(const float* __restrict__ row, int S, float xa, float xb,
                                                    int base, int& loa, int& lob) {
    bool fa = false, fb = false;
    if (base >= 0 && base <= S - 2) {
        const int lane = threadIdx.x & 31, end = min(base + 128, S - 1);
        int ca = 0, cb = 0;
#pragma unroll
        for (int q = 0; q < 4; ++q) {
            const int i = base + 32 * q + lane;
            const float t = i < end ? __ldg(row + i) : 0.0f;
            ca += __popc(__ballot_sync(0xffffffffu, i < end && t <= xa));
            cb += __popc(__ballot_sync(0xffffffffu, i < end && t <= xb));
        }
        fa = probe_result(ca, base, end, S, loa);
        fb = probe_result(cb, base, end, S, lob);
    }
    if (!fa || !fb) {
        int ga, gb;
        warp_interval2(row, S, xa, xb, ga, gb);
        if (!fa) loa = ga;
        if (!fb) lob = gb;
    }
}

// The interval of x inside a window of n >= 2 consecutive source times wt[0..n) = times[L .. L+n), as an
// index relative to the window; -1 when the answer needs a row outside the window.
__device__ __forceinline__ int window_interval(const float* wt, int n, int L, int S, float x) {
    int lo = 0, hi = n;                 // first index with wt[i] > x
    while (lo < hi) {
        int mid = (lo + hi) >> 1;
        if (wt[mid] <= x) lo = mid + 1; else hi = mid;
    }
    int j = lo - 1;                     // last index with wt[j] <= x, or -1
    if (j < 0) return L == 0 ? 0 : -1;  // before the window: fine only if the window starts the row
    if (j >= n - 1) return L + n == S ? n - 2 : -1;   // at or past its last time: fine only at the row's end
    return j;
}

// ------------------------------------------------------------------------------------------ fallback kernel

// The plain path, for shapes the fast kernels do not take (rows that are not whole 16-byte chunks for TMA, odd
// D for cp.async): one block per GEN_T targets of one batch row (a 1-D grid of B * ceil(T / GEN_T) blocks);
// the interval of each target is found once and kept in shared memory, then the threads sweep
// (target, channel) pairs with the channel fastest, so neighbouring threads touch neighbouring addresses.
#ifndef GEN_T
#define GEN_T 64
#endif

extern "C" __global__ void __launch_bounds__(256)
resample_generic(const float* __restrict__ times, const u16* __restrict__ feats,
                 const float* __restrict__ targets, u16* __restrict__ out, int B, int S, int T, int D) {
    __shared__ int slo[GEN_T];
    __shared__ float sw[GEN_T];
    const int ntb = (T + GEN_T - 1) / GEN_T;
    const int b = blockIdx.x / ntb;
    const int t0 = (blockIdx.x - b * ntb) * GEN_T;
    const int nT = min(GEN_T, T - t0);
    const float* row = times + (size_t)b * S;
    for (int i = threadIdx.x; i < nT; i += blockDim.x) {
        float x = __ldg(targets + (size_t)b * T + t0 + i);
        int lo = find_interval(row, S, x);
        slo[i] = lo;
        sw[i] = weight(__ldg(row + lo), __ldg(row + lo + 1), x);
    }
    __syncthreads();
    const u16* f = feats + (size_t)b * S * D;
    u16* o = out + ((size_t)b * T + t0) * D;
    for (int k = threadIdx.x; k < nT * D; k += blockDim.x) {
        int i = k / D, d = k - i * D;
        int lo = slo[i];
        float a = __uint_as_float((u32)__ldg(f + (size_t)lo * D + d) << 16);
        float c = __uint_as_float((u32)__ldg(f + (size_t)(lo + 1) * D + d) << 16);
        o[k] = (u16)f32_to_bf16(lerp(a, c, sw[i]));
    }
}
