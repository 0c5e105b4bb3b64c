// 05 lane groups (sm_80 and newer): a level's samples unrolled, in rounds with no branch between their loads.
//
// A group of G lanes serves one (image n, query q, head m): lane g owns channels 8g .. 8g+7 (one 16-byte
// vector of the head's row), G = D / 8 rounded up to a power of two. The sizes are compile-time constants (D,
// L, P), so the loops over a level's points are unrolled: the compiler may start later samples' loads before
// the first ones are used, as far as registers allow (bytes in flight are what a gather needs; lesson 05 counts
// in the SASS how many loads it keeps in flight), and the blend is 8 FMAs per corner on values widened from
// bf16 with one shift or mask each.
//
// By default (BRANCHLESS=1) a level's P samples go in rounds of 2G (rung 02's were of G, one sample a lane), unrolled
// and branch-free: lane g works out samples 2(rG + g) and the one after of round r (each one's position; its top-left
// corner's row with the steps to the other corners, packed in one int; its four weights, zero for a corner off the
// map), their two locations in one 16-byte load and their weights in one 8-byte load when P is even (one line an item
// each, a wavefront of the L1's data pipe, once a round of 2G), and hands them to the group in five shuffles each;
// then every lane loads its vector of the round's samples' four corners each, a corner off the map from a pixel on it
// (its weight is 0), so no branch separates one sample's loads from the next. With BRANCHLESS=0 every lane works out
// every sample itself (no shuffles), loads the level's locations and weights in as few loads as their count allows
// (load_floats), skips corners off the map and samples wholly off it by branches (every lane working out every sample
// is how this rung went before; lesson 05 measures both). The sum is float32 and rounded to bf16 (nearest even) once,
// with cvt.rn.bf16x2.f32.
//
// The items are numbered (n, m / 2, q, m mod 2): two heads at a time, queries between them, so a warp serves 4
// neighbouring queries of heads 2k and 2k + 1 (at D = 32) and the blocks an SM holds read one or two head pairs'
// maps; at D = 32 head 2k's corner pieces are first halves of their 128-byte lines and head 2k + 1's second halves,
// which costs the L1's data pipe fewer wavefronts than 8 queries of one head at one place of theirs (lesson 05). With
// an odd number of heads they go head by head, (n, m, q). Each item still reads and writes its own (n, q, m) row.
// Item numbers are 32-bit (the host keeps the threads below 2**31). A corner's address is base + row * pitch in
// bytes, with a 64-bit pitch: one multiply-add (IMAD.WIDE) a corner. At one vector a lane, __launch_bounds__(NT, 1024
// / NT) holds the registers to 64 a thread, so that an SM still holds two blocks of 512 threads.
//
// A lane may own more than one vector (VPL, "vectors per lane"): lane g then owns vectors g, g + G, g + 2G, ...
// of the row, so each load instruction of the group still reads G contiguous vectors. Fewer lanes per item
// means fewer lanes to hand each sample to and VPL loads a corner in each thread, at the price of more
// registers, and each corner then costs the L1 VPL line accesses where one served it (lesson 05).
//
// Compile-time constants (NVRTC -D): DV channels per head (a multiple of 8, at most 128), LV levels (at most 8),
// PV points, NT threads a block, BRANCHLESS (0/1), VPL vectors per lane (1, 2 or 4).
#include "hopper.cuh"

#ifndef DV
#define DV 32
#endif
#ifndef LV
#define LV 4
#endif
#ifndef PV
#define PV 8
#endif
#ifndef NT
#define NT 256
#endif
#ifndef BRANCHLESS
#define BRANCHLESS 1   // 0: a sample off the map, and each corner off it, is skipped by a branch
#endif
#ifndef VPL
#define VPL 1
#endif
#define VECS (DV / 8)                                  // 16-byte vectors in a head's row
#define LANE_VECS ((VECS + VPL - 1) / VPL)             // lanes needed at VPL vectors a lane
#define G (LANE_VECS > 8 ? 16 : LANE_VECS > 4 ? 8 : LANE_VECS > 2 ? 4 : LANE_VECS > 1 ? 2 : 1)   // lanes a group

static_assert(DV % 8 == 0 && DV >= 8 && DV <= 128, "DV: a multiple of 8 from 8 to 128");
static_assert(LV >= 1 && LV <= 8 && PV >= 1, "1 <= LV <= 8, PV >= 1");
static_assert(VPL == 1 || VPL == 2 || VPL == 4, "VPL: 1, 2 or 4 vectors a lane");

typedef uint4 Vec;                                     // 8 bf16 channels, two a word (the lower one in the low half)

__device__ __forceinline__ void add_word(float& lo, float& hi, uint32_t word, float w) {
    lo += w * __uint_as_float(word << 16);
    hi += w * __uint_as_float(word & 0xFFFF0000u);
}

__device__ __forceinline__ void add_vec(float* acc, const Vec& v, float w) {
    add_word(acc[0], acc[1], v.x, w);
    add_word(acc[2], acc[3], v.y, w);
    add_word(acc[4], acc[5], v.z, w);
    add_word(acc[6], acc[7], v.w, w);
}

// A corner: the lane's VPL vectors of one pixel (those past the row's end, when G * VPL > VECS, are left out).
struct Corner { Vec v[VPL]; };

__device__ __forceinline__ Corner load_corner(const char* bytes, int g) {   // `bytes`: the lane's first vector
    const Vec* at = (const Vec*)bytes;
    Corner c;
#pragma unroll
    for (int i = 0; i < VPL; ++i) c.v[i] = g + i * G < VECS ? __ldg(at + i * G) : make_uint4(0u, 0u, 0u, 0u);
    return c;
}

__device__ __forceinline__ void add_corner(float (&acc)[8 * VPL], const Corner& c, float w) {
#pragma unroll
    for (int i = 0; i < VPL; ++i) add_vec(acc + 8 * i, c.v[i], w);
}

// N consecutive floats from src into dst, in the widest loads N allows: 16 bytes when N is a multiple of 4, else
// 8 when it is even, else 4. A level's locations (2 P floats) and weights (P floats) start a whole number of such
// pieces into their arrays (item * L + l of them), so each load is aligned to its width. The G lanes of a group
// read the same address: one wide load a warp in place of one a float2 or float.
template <int N>
__device__ __forceinline__ void load_floats(float (&dst)[N], const float* src) {
    constexpr int WIDTH = N % 4 == 0 ? 4 : N % 2 == 0 ? 2 : 1;
#pragma unroll
    for (int i = 0; i < N / WIDTH; ++i) {
        if constexpr (WIDTH == 4) {
            const float4 v = __ldg((const float4*)src + i);
            dst[4 * i] = v.x, dst[4 * i + 1] = v.y, dst[4 * i + 2] = v.z, dst[4 * i + 3] = v.w;
        } else if constexpr (WIDTH == 2) {
            const float2 v = __ldg((const float2*)src + i);
            dst[2 * i] = v.x, dst[2 * i + 1] = v.y;
        } else {
            dst[i] = __ldg(src + i);
        }
    }
}

// (NT, 1024 / NT) at one vector a lane: registers held to 64 a thread, so an SM holds at least 1024 threads (two
// blocks of 512). More vectors a lane need more registers than that: held to 64 they would spill
#define MIN_BLOCKS (VPL == 1 ? 1024 / NT : 1)
extern "C" __global__ void __launch_bounds__(NT, MIN_BLOCKS)
msda_lane_groups(const Vec* __restrict__ value, const int* __restrict__ shapes, const int* __restrict__ starts,
                 const float2* __restrict__ loc, const float* __restrict__ attn, Vec* __restrict__ out, int N, int S,
                 int Lq, int M) {
    // 32-bit item arithmetic (the host keeps N Lq M G below 2**31): 64-bit divisions cost hundreds of instructions
    const unsigned t = blockIdx.x * NT + threadIdx.x;
    const unsigned items = (unsigned)N * Lq * M;
    const int g = (int)(t % G);
    const bool live = t / G < items;                   // no lane returns: the shuffles need the whole warp
    const unsigned order = live ? t / G : items - 1;
    int q, m, n;
    if (M % 2 == 0) {                                  // (n, m / 2, q, m mod 2): two heads, queries between them
        q = (int)((order >> 1) % (unsigned)Lq);
        const unsigned np = (order >> 1) / (unsigned)Lq;
        m = (int)(np % (M / 2)) * 2 + (int)(order & 1);
        n = (int)(np / (M / 2));
    } else {                                           // an odd number of heads: head by head
        q = (int)(order % (unsigned)Lq);
        const unsigned nm = order / (unsigned)Lq;
        m = (int)(nm % M);
        n = (int)(nm / M);
    }
    const long long item = ((long long)n * Lq + q) * M + m;   // the (n, q, m) row it reads and writes
    // value[n, row, m, 8g ..] is at base + row * pitch, in bytes. The pitch is a 64-bit variable holding a 32-bit
    // product (the host checks M * VECS * 16 < 2**31), so each corner's address is one 32 x 32 -> 64-bit
    // multiply-add (IMAD.WIDE) of its row; a 64-bit product there would cost a wider multiply and more adds
    const char* base = (const char*)(value + ((long long)n * S * M + m) * VECS + g);
    const long long pitch = M * VECS * (int)sizeof(Vec);
    const float2* xy = loc + item * (LV * PV);
    const float* aw = attn + item * (LV * PV);
    float acc[8 * VPL];
#pragma unroll
    for (int i = 0; i < 8 * VPL; ++i) acc[i] = 0.f;
#pragma unroll
    for (int l = 0; l < LV; ++l) {
        const int H = __ldg(shapes + 2 * l), W = __ldg(shapes + 2 * l + 1), start = __ldg(starts + l);
        // >>> lab: the level's samples, 2G at a time: this lane's two samples (each one's position, its corner row and steps packed in one int, its four weights), handed to the group by shuffles; then each of the round's samples: four corner loads and the blend
#if BRANCHLESS
        constexpr unsigned FULL = 0xFFFFFFFFu;
        // one sample, worked out by the lane that owns it: its top-left corner's row packed with the steps to the
        // other corners (row << 2 | dy << 1 | dx, a step of 0 where a column or row is clamped onto the map) and
        // its four weights (zero for a corner off the map)
        const auto work_out = [&](float2 s, float a, int& packed, float (&w)[4]) {
            const float x = s.x * W - 0.5f, y = s.y * H - 0.5f;
            const float fx0 = floorf(x), fy0 = floorf(y), fx = x - fx0, fy = y - fy0;
            const bool on = x > -1.0f && y > -1.0f && x < (float)W && y < (float)H;
            const int x0 = on ? (int)fx0 : 0, y0 = on ? (int)fy0 : 0;
            const bool left = on && x0 >= 0, right = on && x0 + 1 < W, top = on && y0 >= 0, bottom = on && y0 + 1 < H;
            const int xl = max(x0, 0), xr = min(x0 + 1, W - 1), yt = max(y0, 0), yb = min(y0 + 1, H - 1);
            packed = ((start + yt * W + xl) << 2) | ((yb - yt) << 1) | (xr - xl);
            w[0] = top && left ? a * (1.f - fy) * (1.f - fx) : 0.f;
            w[1] = top && right ? a * (1.f - fy) * fx : 0.f;
            w[2] = bottom && left ? a * fy * (1.f - fx) : 0.f;
            w[3] = bottom && right ? a * fy * fx : 0.f;
        };
#pragma unroll
        for (int r = 0; r < (PV + 2 * G - 1) / (2 * G); ++r) {
            // this lane's two samples of the round: samples 2 (r G + g) and the one after (none past P: weights 0)
            const int mine = 2 * (r * G + g);
#if PV % 2 == 0
            const bool has = mine < PV;                // P even: both samples or neither
            const int at = has ? mine : PV - 2;        // a lane without samples loads the level's last two
            const float4 s2 = __ldg((const float4*)(xy + l * PV + at));   // both locations in one 16-byte load
            const float2 a2 = has ? __ldg((const float2*)(aw + l * PV + at)) : make_float2(0.f, 0.f);
#else
            const float2 s0 = __ldg(xy + l * PV + min(mine, PV - 1)), s1 = __ldg(xy + l * PV + min(mine + 1, PV - 1));
            const float4 s2 = make_float4(s0.x, s0.y, s1.x, s1.y);
            const float2 a2 = make_float2(mine < PV ? __ldg(aw + l * PV + mine) : 0.f,
                                          mine + 1 < PV ? __ldg(aw + l * PV + mine + 1) : 0.f);
#endif
            int my_r0, my_r1;                          // each sample's top-left row, packed with its steps
            float my_w0[4], my_w1[4];                  // and its four corner weights
            work_out(make_float2(s2.x, s2.y), a2.x, my_r0, my_w0);
            work_out(make_float2(s2.z, s2.w), a2.y, my_r1, my_w1);
#pragma unroll
            for (int j = 0; j < 2 * G; ++j) {
                if (r * 2 * G + j < PV) {                                 // compile-time: the round's samples
                    const int packed = __shfl_sync(FULL, j & 1 ? my_r1 : my_r0, j >> 1, G);   // lane j/2's sample j%2
                    const int r00 = packed >> 2;
                    float w[4];
#pragma unroll
                    for (int c = 0; c < 4; ++c) w[c] = __shfl_sync(FULL, j & 1 ? my_w1[c] : my_w0[c], j >> 1, G);
                    const int dx = packed & 1, dyW = packed & 2 ? W : 0;
                    const Corner c00 = load_corner(base + r00 * pitch, g);
                    const Corner c01 = load_corner(base + (r00 + dx) * pitch, g);
                    const Corner c10 = load_corner(base + (r00 + dyW) * pitch, g);
                    const Corner c11 = load_corner(base + (r00 + dyW + dx) * pitch, g);
                    add_corner(acc, c00, w[0]);
                    add_corner(acc, c01, w[1]);
                    add_corner(acc, c10, w[2]);
                    add_corner(acc, c11, w[3]);
                }
            }
        }
#else
        float lxy[2 * PV], law[PV];        // the level's P locations (x, y, x, y, ...) and P attention weights
        load_floats(lxy, (const float*)(xy + l * PV));
        load_floats(law, aw + l * PV);
#pragma unroll
        for (int p = 0; p < PV; ++p) {
            const float2 s = make_float2(lxy[2 * p], lxy[2 * p + 1]);
            const float a = law[p];
            const float x = s.x * W - 0.5f, y = s.y * H - 0.5f;
            if (x > -1.0f && y > -1.0f && x < (float)W && y < (float)H) {     // touches the map
                const float fx0 = floorf(x), fy0 = floorf(y), fx = x - fx0, fy = y - fy0;
                const int x0 = (int)fx0, y0 = (int)fy0;
                const bool left = x0 >= 0, right = x0 + 1 < W, top = y0 >= 0, bottom = y0 + 1 < H;
                const int row = start + y0 * W + x0;
                const Corner zero = {};
                const Corner c00 = top && left ? load_corner(base + row * pitch, g) : zero;
                const Corner c01 = top && right ? load_corner(base + (row + 1) * pitch, g) : zero;
                const Corner c10 = bottom && left ? load_corner(base + (row + W) * pitch, g) : zero;
                const Corner c11 = bottom && right ? load_corner(base + (row + W + 1) * pitch, g) : zero;
                add_corner(acc, c00, a * (1.f - fy) * (1.f - fx));
                add_corner(acc, c01, a * (1.f - fy) * fx);
                add_corner(acc, c10, a * fy * (1.f - fx));
                add_corner(acc, c11, a * fy * fx);
            }
        }
#endif
        // <<< lab
    }
#pragma unroll
    for (int i = 0; i < VPL; ++i)
        if (live && g + i * G < VECS)
            out[item * VECS + g + i * G] = make_uint4(pack_bf16x2(acc[8 * i], acc[8 * i + 1]),
                                                      pack_bf16x2(acc[8 * i + 2], acc[8 * i + 3]),
                                                      pack_bf16x2(acc[8 * i + 4], acc[8 * i + 5]),
                                                      pack_bf16x2(acc[8 * i + 6], acc[8 * i + 7]));
}
