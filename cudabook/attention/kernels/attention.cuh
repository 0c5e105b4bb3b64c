// attention.cuh: what the attention track's C++ rungs (04, 05 and 06) share: the compile-time constants they take,
// -infinity, and the reductions over the four lanes of a quad, which hold one row of an mma.sync or wgmma
// accumulator between them (lane l: row l / 4, columns 2 (l % 4) and 2 (l % 4) + 1 of every 8-column block).
#pragma once

#ifndef D
#define D 128         // channels a head: 64 or 128
#endif
#ifndef BKV
#define BKV 64        // keys a tile
#endif
#ifndef STAGES
#define STAGES 2      // K/V tiles in shared memory
#endif
#ifndef CAUSAL
#define CAUSAL 0      // 1: query i sees keys j <= i
#endif

#define NEG_INF __int_as_float(0xff800000u)      // -infinity (NVRTC has no math.h)

static_assert(D == 64 || D == 128, "D: 64 or 128");

__device__ __forceinline__ float quad_max(float x) {
    x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 1));
    return fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 2));
}
__device__ __forceinline__ float quad_sum(float x) {
    x += __shfl_xor_sync(0xffffffffu, x, 1);
    return x + __shfl_xor_sync(0xffffffffu, x, 2);
}
