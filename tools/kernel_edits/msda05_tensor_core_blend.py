"""msda 05 with the blend on the tensor cores: mma.sync m16n8k16, one warp an item, each sample's position once.

Rung 05 blends in float32 on the FMA pipe: 8 FFMAs and 8 integer widenings a corner in every lane, and every
lane of a group repeats each sample's position arithmetic. Here a warp serves one item (n, q, m) at a time
(8 items one after another, so the rung's own grid fits): lane s computes sample s's position once, keeps the
sample's 2 x 2 block of pixels on the map (an axis at the edge shifts the block and moves the weight to the
slot its pixel lands in), and writes the block's first pixel and its four weights (rounded to bf16, and what the
rounding left, also in bf16) to a table in shared memory. The blend out[c] = sum_k V[k][c] w[k] over the item's
128 corners is then the product D = A B of mma.m16n8k16 on 8 k-tiles, 4 samples x 4 corners each: A = V^T
(channels as rows, permuted so that a lane's 8 loaded bytes, 4 channels of one corner, fill its fragment with
PRMTs), B's column 0 the bf16 weights and column 1 the remainders, so that the two output columns add up to the
weights to about 2^-17. Only D = 32, L * P = 32, and M = 8 (a compile-time constant here) are built.

SASS (NVRTC 13.5, sm_90a): the loop over a warp's items runs about 340 instructions an item, against rung
05's 4,504 for its 8 items a warp (about 563 an item); 16 HMMA an item in place of 1,024 FFMAs in each of the
item's 4 lanes. Its corner loads are 8 bytes (a lane's 4 channels of a corner), twice rung 05's corner-load
instructions an item, and a warp has only one item's loads in flight at a time.

Measured (results/readings/H200_msda_05_lane_groups_edit_msda05_tensor_core_blend.json, H200, interleaved
rounds, commit 5b0136e): right on both workloads; 0.525x the rung's speed on `local`, 0.586x on `uniform`. Not
adopted. (Earlier probes of the same kernel with all of an item's loads issued before the first mma, and with
128 or 256 threads a block, were as slow.)
"""
TRACK, STAGE = "msda", "05_lane_groups"       # the rung whose kernel this edits
BASE = "8f88c1b"                              # the kernel it fits: the rung before it took head_pairs_packed32
ADOPTED = False                                # pinned, not adopted: it may still fit the rung's kernel

ANCHOR = "typedef uint4 Vec;"
BLEND = r"""#define ITEMS_PER_WARP 8                                       // 32 lanes / G = 4 lanes an item
__device__ __forceinline__ uint32_t perm(uint32_t a, uint32_t b, uint32_t sel) { return __byte_perm(a, b, sel); }
#ifndef MV
#define MV 8
#endif
constexpr uint32_t PITCH = MV * DV * 2;                        // bytes from one pixel to the next (all heads)

// One axis of a sample: the 2-pixel block [c, c + 1] kept on the map (needs a side of at least 2) and the weights
// of its two slots. z0 = floor(z) is in -1 .. n - 1 for a sample that touches the map; at -1 the real pixel 0 sits
// in the block's first slot, at n - 1 the real pixel n - 1 in its second.
__device__ __forceinline__ void axis(int z0, float f, int n, int& c, float& first, float& second) {
    c = min(max(z0, 0), n - 2);
    first = z0 < 0 ? f : (z0 > n - 2 ? 0.f : 1.f - f);
    second = z0 < 0 ? 0.f : (z0 > n - 2 ? 1.f - f : f);
}

extern "C" __global__ void __launch_bounds__(NT)
msda_lane_groups(const uint2* __restrict__ value, const int* __restrict__ shapes, const int* __restrict__ starts,
                 const float2* __restrict__ loc, const float* __restrict__ attn, uint2* __restrict__ out, int N, int S,
                 int Lq, int M) {
    // a warp's table, a sample a row: its block's first pixel and the B registers (hi = bf16 weights, lo = what
    // rounding left, zeros for B's columns 2 .. 7)
    __shared__ uint4 tab[NT / 32][3][32];
    if (M != MV) __trap();                                     // the heads are a compile-time constant here
    const int lane = threadIdx.x & 31, gid = lane >> 2, tig = lane & 3, wib = threadIdx.x >> 5;
    const long long warp = ((long long)blockIdx.x * NT + threadIdx.x) >> 5;
    const long long items = (long long)N * Lq * MV;
    const int l = lane / PV;
    const int H = __ldg(shapes + 2 * l), W = __ldg(shapes + 2 * l + 1), start = __ldg(starts + l);
    uint32_t down[LV];                                         // bytes from a pixel to the one below, a level each
#pragma unroll
    for (int k = 0; k < LV; ++k) down[k] = (uint32_t)__ldg(shapes + 2 * k + 1) * PITCH;
    const uint4* mine = &tab[wib][gid < 2 ? gid : 2][tig];     // this lane's B column: hi, lo or zeros
    for (int it = 0; it < ITEMS_PER_WARP; ++it) {
        const long long item = warp * ITEMS_PER_WARP + it;
        if (item >= items) return;
        const int m = (int)(item % MV);
        const int n = (int)(item / MV / Lq);
        const float2 s = __ldg(loc + item * 32 + lane);
        const float a = __ldg(attn + item * 32 + lane);
        const float x = s.x * W - 0.5f, y = s.y * H - 0.5f;
        const float fx0 = floorf(x), fy0 = floorf(y);
        const bool on = x > -1.0f && y > -1.0f && x < (float)W && y < (float)H;
        int xc, yc;
        float xl, xr, yt, yb;
        axis(on ? (int)fx0 : 0, x - fx0, W, xc, xl, xr);
        axis(on ? (int)fy0 : 0, y - fy0, H, yc, yt, yb);
        const float at = on ? a : 0.f;
        const float w00 = at * yt * xl, w01 = at * yt * xr, w10 = at * yb * xl, w11 = at * yb * xr;
        const uint32_t hi01 = pack_bf16x2(w00, w01), hi23 = pack_bf16x2(w10, w11);
        const uint32_t lo01 = pack_bf16x2(w00 - __uint_as_float(hi01 << 16), w01 - __uint_as_float(hi01 & 0xFFFF0000u));
        const uint32_t lo23 = pack_bf16x2(w10 - __uint_as_float(hi23 << 16), w11 - __uint_as_float(hi23 & 0xFFFF0000u));
        const uint32_t row = (uint32_t)(start + yc * W + xc);
        __syncwarp();                                          // the last item's readers are done with the table
        tab[wib][0][lane] = make_uint4(hi01, hi23, row, 0u);
        tab[wib][1][lane] = make_uint4(lo01, lo23, row, 0u);
        tab[wib][2][lane] = make_uint4(0u, 0u, row, 0u);
        __syncwarp();
        const char* base = (const char*)(value + ((long long)n * S * MV + m) * (DV / 4) + gid);
        float d0[4] = {0.f, 0.f, 0.f, 0.f}, d1[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
        for (int j = 0; j < 8; ++j) {
            const uint4 r = mine[4 * j];
            const char* p0 = base + (size_t)(r.z * PITCH);
            const char* p1 = p0 + down[(4 * j) / PV];
            const uint2 c00 = __ldg((const uint2*)p0), c01 = __ldg((const uint2*)(p0 + PITCH));
            const uint2 c10 = __ldg((const uint2*)p1), c11 = __ldg((const uint2*)(p1 + PITCH));
            const u32 b[2] = {r.x, r.y};
            const u32 a0[4] = {perm(c00.x, c01.x, 0x5410), perm(c00.x, c01.x, 0x7632),
                               perm(c10.x, c11.x, 0x5410), perm(c10.x, c11.x, 0x7632)};
            const u32 a1[4] = {perm(c00.y, c01.y, 0x5410), perm(c00.y, c01.y, 0x7632),
                               perm(c10.y, c11.y, 0x5410), perm(c10.y, c11.y, 0x7632)};
            mma_16816(d0, a0, b);
            mma_16816(d1, a1, b);
        }
        // d[0], d[1]: row gid, columns 2 tig, 2 tig + 1; d[2], d[3]: row gid + 8. Lanes with tig = 0 hold the
        // hi and lo columns: channel 4gid = d0[0] + d0[1], 4gid+1 = d0[2] + d0[3], 4gid+2 / +3 from d1.
        if (tig == 0)
            out[item * (DV / 4) + gid] = make_uint2(pack_bf16x2(d0[0] + d0[1], d0[2] + d0[3]),
                                                    pack_bf16x2(d1[0] + d1[1], d1[2] + d1[3]));
    }
}
"""


def edit(text: str) -> str:
    assert text.count(ANCHOR) == 1, f"the kernel no longer has exactly one {ANCHOR!r}"
    head = text[:text.index(ANCHOR)]
    return head + '#include "mma_sync.cuh"\n' + "static_assert(G == 4 && VPL == 1, \"the rung's grid gives a warp 8 items\");\n" + BLEND
