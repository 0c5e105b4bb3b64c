// 04 TMA boxes (sm_90a): each bilinear sample's 2 x 2 corners of D channels come in as ONE TMA box.
//
// value [N, S, M, D] is, level by level, a 5-D tensor [N, H_l, W_l, M, D] (the level's pixels are consecutive
// rows of value). The host encodes one tensor map per level over it, with a box of (1, 2, 2, 1, D): one image,
// two pixel rows, two pixel columns, one head, all D channels. A sample at pixel position (x, y) needs exactly
// the box whose corner is (x0, y0) = (floor x, floor y). Corners off the map are no special case: a box may
// start at -1 or end past W - 1 (or H - 1), and TMA fills the outside with zeros, which is what
// grid_sample(padding_mode="zeros") reads there. The border tests of rungs 01-03 become zero fill.
//
// A work item is one (image n, query q, head m): L * P samples. Warp specialisation, a ring of STAGES slots:
//   warp 0 (producer): for item k, wait until slot k % STAGES is free ("empty" mbarrier), then lane i takes
//     sample i: its position, its four corner weights times its attention weight (a float4 in the slot), and,
//     if the sample touches the map at all, one TMA box. Lane 0 announces the bytes of all the boxes
//     (arrive.expect_tx), the other lanes arrive after issuing theirs; the bytes complete the "full" barrier.
//   warps 1..NCW (consumers): warp w takes the items w-1, w-1 + NCW, ...; it waits on the slot's "full"
//     barrier, blends the four corners of every sample with their weights (lanes over the head's channels, two
//     bf16 per 32-bit word; with short rows the samples are split between groups of lanes and summed by
//     shuffles), writes the head's D outputs, and frees the slot.
// Each box is only 8 * D bytes (256 at D = 32): the lesson measures what a bulk copy that small costs.
//
// Compile-time constants (NVRTC -D): DV channels per head, LV levels (at most 8), PV points, NCW consumer warps,
// DEPTH slots per consumer warp (STAGES = NCW * DEPTH), STRIDED (0: each block walks a contiguous run of items;
// 1: block b takes the items b, b + gridDim.x, ..., so the blocks in flight work on neighbouring items).
#include "hopper.cuh"

#ifndef DV
#define DV 32
#endif
#ifndef LV
#define LV 4
#endif
#ifndef PV
#define PV 4
#endif
#ifndef NCW
#define NCW 2
#endif
#ifndef DEPTH
#define DEPTH 1
#endif
#ifndef STRIDED
#define STRIDED 0
#endif
#define LP (LV * PV)                        // samples per item
#define STAGES (NCW * DEPTH)
#define W2 (DV / 2)                         // 32-bit words in a head's row
#define WP (W2 > 16 ? 32 : W2 > 8 ? 16 : W2 > 4 ? 8 : 4)    // lanes per group: a power of two >= W2 (at most 32)
#define GROUPS (32 / WP)                    // groups of lanes that split an item's samples
#define WPL ((W2 + 31) / 32)                // words per lane (2 when D > 64)
#define MAXL 8

static_assert(DV % 8 == 0 && DV >= 8 && DV <= 128, "DV: a multiple of 8 from 8 to 128");
static_assert(LV >= 1 && LV <= MAXL && PV >= 1, "1 <= LV <= 8 levels, PV >= 1 points");

constexpr int BOX_BYTES = 4 * DV * 2;                      // what one box brings (its outside too, as zeros)
constexpr int BOX_STRIDE = (BOX_BYTES + 127) / 128 * 128;  // each box lands 128-byte aligned
constexpr int WT_OFF = LP * BOX_STRIDE;                    // the slot's float4 weights, one per sample
constexpr int SLOT_BYTES = (WT_OFF + LP * 16 + 127) / 128 * 128;
constexpr int OFF_BAR = STAGES * SLOT_BYTES;
constexpr int SMEM_BYTES = OFF_BAR + 2 * STAGES * 8 + 128; // + slack to align the base to 128 bytes
#ifdef EXPECT_SMEM
static_assert(SMEM_BYTES == EXPECT_SMEM, "smem_bytes() in s04_tma_boxes.py disagrees with SMEM_BYTES");
#endif

struct Maps { TmaDesc level[MAXL]; };                      // one tensor map per level, by value

__device__ __forceinline__ float lo_f32(uint32_t w) { return __uint_as_float(w << 16); }
__device__ __forceinline__ float hi_f32(uint32_t w) { return __uint_as_float(w & 0xFFFF0000u); }

extern "C" __global__ void __launch_bounds__((NCW + 1) * 32)
msda_tma_boxes(const __grid_constant__ Maps maps, const int* __restrict__ shapes, const float* __restrict__ loc,
               const float* __restrict__ attn, uint32_t* __restrict__ out, int N, int Lq, int M) {
    extern __shared__ unsigned char smem_raw[];
    if (dynamic_smem_bytes() < SMEM_BYTES) asm volatile("trap;");   // the host's layout disagrees with this one
    unsigned char* smem = smem_raw + ((128 - (smem_u32(smem_raw) & 127)) & 127);
    const uint32_t full0 = smem_u32(smem + OFF_BAR), empty0 = full0 + 8 * STAGES;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const long long items = (long long)N * Lq * M;
#if STRIDED   // this block's k-th item is first + k * step, while below last
    const long long first = blockIdx.x, step = gridDim.x, last = items;
#else
    const long long first = items * blockIdx.x / gridDim.x, step = 1, last = items * (blockIdx.x + 1) / gridDim.x;
#endif

    if (threadIdx.x == 0) {
        for (int s = 0; s < STAGES; ++s) {
            mbar_init(full0 + 8 * s, 32);                  // the producer's 32 lanes arrive (lane 0 with the bytes)
            mbar_init(empty0 + 8 * s, 1);                  // one lane of the slot's consumer warp
        }
        mbar_fence_init();
    }
    __syncthreads();

    if (warp == 0) {
        // ------------------------------------------------------------ producer
        for (long long k = 0; first + k * step < last; ++k) {
            const long long item = first + k * step;
            const int m = (int)(item % M), q = (int)(item / M % Lq), n = (int)(item / ((long long)M * Lq));
            const int s = (int)(k % STAGES);
            mbar_wait(empty0 + 8 * s, (uint32_t)((k / STAGES) & 1) ^ 1);   // its consumer is done with the slot
            unsigned char* slot = smem + s * SLOT_BYTES;
            float4* wts = reinterpret_cast<float4*>(slot + WT_OFF);
            const size_t row = ((size_t)n * Lq + q) * M + m;               // this item's row of loc and attn
            int boxes = 0, x0s[(LP + 31) / 32], y0s[(LP + 31) / 32];
            bool on[(LP + 31) / 32];
#pragma unroll
            for (int r = 0; r < (LP + 31) / 32; ++r) {
                const int i = r * 32 + lane;
                on[r] = false;
                if (i < LP) {
                    const int l = i / PV, H = shapes[2 * l], W = shapes[2 * l + 1];
                    const float x = loc[(row * LP + i) * 2] * W - 0.5f, y = loc[(row * LP + i) * 2 + 1] * H - 0.5f;
                    const float a = attn[row * LP + i];
                    float4 w = make_float4(0.f, 0.f, 0.f, 0.f);
                    if (x > -1.0f && y > -1.0f && x < (float)W && y < (float)H) {
                        const float fx0 = floorf(x), fy0 = floorf(y), fx = x - fx0, fy = y - fy0;
                        x0s[r] = (int)fx0;
                        y0s[r] = (int)fy0;
                        w = make_float4((1.f - fy) * (1.f - fx) * a, (1.f - fy) * fx * a, fy * (1.f - fx) * a, fy * fx * a);
                        on[r] = true;
                    }
                    wts[i] = w;
                }
                boxes += __popc(__ballot_sync(0xffffffffu, on[r]));
            }
            const uint32_t full = full0 + 8 * s;
            // >>> lab: lane 0 announces the bytes of the item's boxes; then each lane asks for the box of each of its samples that touches the map; the other lanes arrive
            if (lane == 0) mbar_expect_tx(full, (uint32_t)boxes * BOX_BYTES);   // a box brings all its bytes
            __syncwarp();
#pragma unroll
            for (int r = 0; r < (LP + 31) / 32; ++r) {
                const int i = r * 32 + lane;
                if (on[r])   // innermost first: channel 0, head m, column x0, row y0, image n
                    tma_load_5d(smem_u32(slot) + i * BOX_STRIDE, &maps.level[i / PV], full, 0, m, x0s[r], y0s[r], n);
            }
            if (lane != 0) mbar_arrive(full);              // (after this lane's weights and copies)
            // <<< lab
        }
    } else {
        // ------------------------------------------------------------ consumers
        const int cw = warp - 1, g = lane / WP, j0 = lane % WP;
        for (long long k = cw; first + k * step < last; k += NCW) {
            const long long item = first + k * step;
            const int s = (int)(k % STAGES);
            mbar_wait(full0 + 8 * s, (uint32_t)((k / STAGES) & 1));      // the boxes have landed
            const unsigned char* slot = smem + s * SLOT_BYTES;
            const float4* wts = reinterpret_cast<const float4*>(slot + WT_OFF);
            float acc_lo[WPL], acc_hi[WPL];
#pragma unroll
            for (int u = 0; u < WPL; ++u) acc_lo[u] = acc_hi[u] = 0.f;
            for (int i = g; i < LP; i += GROUPS) {
                const float4 w = wts[i];
                if (w.x == 0.f && w.y == 0.f && w.z == 0.f && w.w == 0.f) continue;   // no box (or no weight)
                const uint32_t* box = reinterpret_cast<const uint32_t*>(slot + i * BOX_STRIDE);
#pragma unroll
                for (int u = 0; u < WPL; ++u) {
                    const int j = j0 + 32 * u;
                    if (j < W2) {   // corners in the box: (x0, y0), (x0 + 1, y0), (x0, y0 + 1), (x0 + 1, y0 + 1)
                        const uint32_t c00 = box[j], c01 = box[W2 + j], c10 = box[2 * W2 + j], c11 = box[3 * W2 + j];
                        acc_lo[u] += w.x * lo_f32(c00) + w.y * lo_f32(c01) + w.z * lo_f32(c10) + w.w * lo_f32(c11);
                        acc_hi[u] += w.x * hi_f32(c00) + w.y * hi_f32(c01) + w.z * hi_f32(c10) + w.w * hi_f32(c11);
                    }
                }
            }
#pragma unroll
            for (int u = 0; u < WPL; ++u)
                for (int o = WP; o < 32; o <<= 1) {        // the groups' partial sums
                    acc_lo[u] += __shfl_xor_sync(0xffffffffu, acc_lo[u], o);
                    acc_hi[u] += __shfl_xor_sync(0xffffffffu, acc_hi[u], o);
                }
            __syncwarp();
            if (lane == 0) mbar_arrive(empty0 + 8 * s);    // the slot may be refilled
            if (g == 0) {
#pragma unroll
                for (int u = 0; u < WPL; ++u) {
                    const int j = j0 + 32 * u;
                    if (j < W2) out[item * W2 + j] = pack_bf16x2(acc_lo[u], acc_hi[u]);
                }
            }
        }
    }
}
