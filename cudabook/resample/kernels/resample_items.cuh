// resample_items.cuh: the work item of the C++ resampling rungs (06 cp.async, 07 TMA): up to TW consecutive
// targets of one batch row and DC channels of them, and how one warp loads its targets. Include it after TW and
// DC are defined.
#pragma once

struct Item { int b, t0, nT, d0; };

__device__ __forceinline__ Item decode(int item, int ntc, int ndc, int T) {
    Item it;
    int dc = item % ndc, r = item / ndc, tc = r % ntc;
    it.b = r / ntc;
    it.t0 = tc * TW;
    it.nT = min(TW, T - it.t0);
    it.d0 = dc * DC;
    return it;
}

#define XPL ((TW + 31) / 32)                // targets per lane of the warp that loads an item's targets

// Warp-wide: lane j loads targets j, j + 32, ... of the item (NaN past its end). Issued one item ahead, so the
// loads are in flight while the block works on the current item.
__device__ __forceinline__ void load_targets(const float* __restrict__ targets, int T, const Item& it, float (&x)[XPL]) {
    const int lane = threadIdx.x & 31;
#pragma unroll
    for (int q = 0; q < XPL; ++q) {
        const int j = lane + 32 * q;
        x[q] = j < it.nT ? __ldg(targets + (size_t)it.b * T + it.t0 + j) : __int_as_float(0x7fc00000);
    }
}
