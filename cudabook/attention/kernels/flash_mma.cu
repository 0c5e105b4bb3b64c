// 04 tensor cores + cp.async: fused attention on mma.sync, K and V tiles double-buffered (sm_80 and newer).
//
//   q [B, H, Nq, D], k and v [B, H, Nk, D], out [B, H, Nq, D]: bf16 as 16-bit words, rows of D = 64 or 128.
//
// A block owns BQ = 16 * WARPS query rows of one (batch, head); each warp owns 16 of them, kept in registers
// as mma A fragments for the whole kernel. The block walks the keys in tiles of BKV:
//
//   global --cp.async--> shared (a ring of STAGES K/V tiles) --ldmatrix--> registers --mma.sync-->
//       S = Q K^T (16 x BKV floats a warp)  -> online softmax in registers -> P in bf16 -> O += P V (mma.sync)
//
// S never leaves the registers: the accumulator fragment of S (rows lane/4 and lane/4 + 8, two consecutive
// keys a lane) is, key for key, the A fragment the second product needs, so P goes from float to bf16 in
// place, without shared memory. The softmax works in base 2: s2 = (q . k) * scale * log2(e), p = 2^(s2 - m).
//
// Keys past Nk (the ragged last tile) and, when CAUSAL, keys after the query (j > i) get s = -inf. Causal
// blocks stop at the tile holding their last query row, and the grid starts with the longest blocks.
//
// Compile-time constants (NVRTC -D): D (64 or 128), WARPS (query rows = 16 * WARPS), BKV (keys a tile, a
// multiple of 16), STAGES (K/V tiles in the ring, at least 2), CAUSAL (0/1).
#include "mma_sync.cuh"
#include "attention.cuh"    // D, BKV, STAGES, CAUSAL, NEG_INF, quad_max, quad_sum

#ifndef WARPS
#define WARPS 4
#endif

constexpr int NT = 32 * WARPS;                    // threads a block
constexpr int BQ = 16 * WARPS;                    // query rows a block
constexpr int CPR = D / 8;                        // 16-byte chunks a row (8 or 16)
constexpr int KS = D / 16;                        // k16 steps of Q K^T (over D)
constexpr int NS = BKV / 8;                       // n8 tiles of S (over the keys of a tile)
constexpr int PS = BKV / 16;                      // k16 steps of P V (over the keys of a tile)
constexpr int NO = D / 8;                         // n8 tiles of O (over D)
constexpr int TILE_BYTES = BKV * D * 2;           // one K or V tile
constexpr int Q_BYTES = BQ * D * 2;
constexpr int SMEM_BYTES = Q_BYTES + STAGES * 2 * TILE_BYTES;   // the host asks for exactly this much

static_assert(BKV % 16 == 0 && BKV >= 16, "BKV: a multiple of 16");
static_assert(STAGES >= 2, "a ring of at least two tiles");

// Shared tiles are rows of D bf16 (128 or 256 bytes) whose 16-byte chunks are permuted: chunk c of row r sits
// in slot c ^ (r % 8). The eight rows one ldmatrix pass reads (the same chunk of eight consecutive rows) then
// lie in eight different slots, so in different banks. Returns the byte offset of (row, chunk).
__device__ __forceinline__ u32 swz(int row, int chunk) { return (u32)(row * CPR + (chunk ^ (row & 7))) * 16; }

// Copies of `rows` rows from `src` (rows past `valid` are zero-filled: src-size 0) into a swizzled tile.
template <int ROWS>
__device__ __forceinline__ void load_tile(u32 dst, const u16* __restrict__ src, int valid, int tid) {
    static_assert((ROWS * CPR) % NT == 0, "every thread copies the same number of chunks");
#pragma unroll
    for (int i = 0; i < ROWS * CPR / NT; ++i) {
        const int c = tid + i * NT, row = c / CPR, ch = c % CPR;
        const bool in = row < valid;
        cp_async16(dst + swz(row, ch), in ? src + (size_t)row * D + ch * 8 : src, in ? 16 : 0);
    }
}

extern "C" __global__ void __launch_bounds__(NT)
attention_mma(const u16* __restrict__ Q, const u16* __restrict__ K, const u16* __restrict__ V, u16* __restrict__ O,
              int Nq, int Nk, float scale_log2) {
    extern __shared__ __align__(128) unsigned char smem[];
    if (dynamic_smem_bytes() < (uint32_t)SMEM_BYTES) __trap();
    const u32 s0 = (u32)__cvta_generic_to_shared(smem);
    const u32 sq = s0, skv = s0 + Q_BYTES;            // Q, then STAGES x (K tile, V tile)
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int qb = CAUSAL ? gridDim.x - 1 - blockIdx.x : blockIdx.x;   // causal: the longest blocks first
    const int q0 = qb * BQ;
    const size_t head = blockIdx.y;
    const u16* q = Q + (head * Nq + q0) * D;
    const u16* k = K + head * Nk * D;
    const u16* v = V + head * Nk * D;

    const int kv_end = CAUSAL ? min(Nk, q0 + BQ) : Nk;             // keys any row of the block may see
    const int tiles = (kv_end + BKV - 1) / BKV;
    auto stage_k = [&](int s) { return skv + s * 2 * TILE_BYTES; };
    auto stage_v = [&](int s) { return skv + s * 2 * TILE_BYTES + TILE_BYTES; };
    auto load_kv = [&](int t, int s) {
        const int j0 = t * BKV;
        load_tile<BKV>(stage_k(s), k + (size_t)j0 * D, Nk - j0, tid);
        load_tile<BKV>(stage_v(s), v + (size_t)j0 * D, Nk - j0, tid);
    };

    // Prologue: Q and the first STAGES-1 K/V tiles in flight; Q rides in the first group.
    load_tile<BQ>(sq, q, Nq - q0, tid);
#pragma unroll
    for (int s = 0; s < STAGES - 1; ++s) {
        if (s < tiles) load_kv(s, s);
        cp_async_commit();
    }
    cp_async_wait<STAGES - 2>();
    __syncthreads();

    // This warp's 16 query rows as A fragments, one per k16 step over D.
    u32 qf[KS][4];
#pragma unroll
    for (int ks = 0; ks < KS; ++ks)
        ldmatrix_x4(qf[ks], sq + swz(warp * 16 + (lane & 15), ks * 2 + (lane >> 4)));

    float o[NO][4];
#pragma unroll
    for (int j = 0; j < NO; ++j) o[j][0] = o[j][1] = o[j][2] = o[j][3] = 0.f;
    float m[2] = {NEG_INF, NEG_INF};              // running max (base 2) of rows lane/4 and lane/4 + 8
    float l[2] = {0.f, 0.f};                          // this lane's part of the running sums
    const int row0 = q0 + warp * 16 + (lane >> 2);    // the query rows of this lane: row0 and row0 + 8

    for (int t = 0; t < tiles; ++t) {
        const int s = t % STAGES;
        // >>> lab: the pipeline step: start the copies of tile t + STAGES - 1 (into the stage tile t - 1 used), commit, wait until tile t has landed, and make everyone's copies visible
        if (t + STAGES - 1 < tiles) load_kv(t + STAGES - 1, (t + STAGES - 1) % STAGES);
        cp_async_commit();                            // always commit: group g is always tile g
        cp_async_wait<STAGES - 1>();                  // this thread's copies of tile t have landed...
        __syncthreads();                              // ...and everyone's
        // <<< lab

        // S = Q K^T: NS n8 tiles of 16 x 8 floats. ldmatrix (not transposed) of K rows gives the B fragments
        // of two n8 tiles at once: keys (lane % 8) + 8 (lane / 16), D half (lane / 8) % 2.
        float sc[NS][4];
#pragma unroll
        for (int n = 0; n < NS; ++n) sc[n][0] = sc[n][1] = sc[n][2] = sc[n][3] = 0.f;
#pragma unroll
        for (int ks = 0; ks < KS; ++ks)
#pragma unroll
            for (int n = 0; n < NS; n += 2) {
                u32 b[4];
                ldmatrix_x4(b, stage_k(s) + swz(n * 8 + (lane & 7) + ((lane >> 4) << 3), ks * 2 + ((lane >> 3) & 1)));
                const u32 b0[2] = {b[0], b[1]}, b1[2] = {b[2], b[3]};
                mma_16816(sc[n], qf[ks], b0);
                mma_16816(sc[n + 1], qf[ks], b1);
            }

        // Mask: keys past Nk, and (causal) keys after the row. Only the tiles that reach them pay for it.
        const int j0 = t * BKV;
        if (j0 + BKV > Nk || (CAUSAL && j0 + BKV - 1 > q0 + warp * 16)) {
#pragma unroll
            for (int n = 0; n < NS; ++n)
#pragma unroll
                for (int e = 0; e < 4; ++e) {
                    const int j = j0 + n * 8 + 2 * (lane & 3) + (e & 1), i = row0 + (e >> 1) * 8;
                    if (j >= Nk || (CAUSAL && j > i)) sc[n][e] = NEG_INF;
                }
        }

        // The online softmax, row by row (h = 0: row0, h = 1: row0 + 8); a row's keys are spread over the
        // four lanes of a quad.
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            float mx = NEG_INF;
#pragma unroll
            for (int n = 0; n < NS; ++n) mx = fmaxf(mx, fmaxf(sc[n][2 * h], sc[n][2 * h + 1]));
            const float m_new = fmaxf(m[h], quad_max(mx) * scale_log2);
            const float sub = m_new == NEG_INF ? 0.f : m_new;        // a row with no key yet: nothing to scale
            const float alpha = exp2f(m[h] - sub);                     // how much the old maximum shrinks
            m[h] = m_new;
            float sum = 0.f;
#pragma unroll
            for (int n = 0; n < NS; ++n)
#pragma unroll
                for (int e = 2 * h; e < 2 * h + 2; ++e) {
                    sc[n][e] = exp2f(sc[n][e] * scale_log2 - sub);
                    sum += sc[n][e];
                }
            l[h] = l[h] * alpha + sum;
#pragma unroll
            for (int j = 0; j < NO; ++j) {
                o[j][2 * h] *= alpha;
                o[j][2 * h + 1] *= alpha;
            }
        }

        // O += P V. P's A fragment for keys 16 ps .. 16 ps + 15 is S's n8 tiles 2 ps and 2 ps + 1, rounded to
        // bf16. V is stored key-row by key-row ([BKV][D]), so ldmatrix.trans gives the B fragments of two n8
        // tiles of O: keys (lane % 8) + 8 ((lane / 8) % 2), D columns 8 (lane / 16) further.
#pragma unroll
        for (int ps = 0; ps < PS; ++ps) {
            const u32 pa[4] = {pack_bf16x2(sc[2 * ps][0], sc[2 * ps][1]), pack_bf16x2(sc[2 * ps][2], sc[2 * ps][3]),
                               pack_bf16x2(sc[2 * ps + 1][0], sc[2 * ps + 1][1]),
                               pack_bf16x2(sc[2 * ps + 1][2], sc[2 * ps + 1][3])};
#pragma unroll
            for (int j = 0; j < NO; j += 2) {
                u32 b[4];
                ldmatrix_x4_trans(b[0], b[1], b[2], b[3],
                                  stage_v(s) + swz(ps * 16 + (lane & 7) + (((lane >> 3) & 1) << 3), j + (lane >> 4)));
                const u32 b0[2] = {b[0], b[1]}, b1[2] = {b[2], b[3]};
                mma_16816(o[j], pa, b0);
                mma_16816(o[j + 1], pa, b1);
            }
        }
        __syncthreads();                              // everyone is done with stage s before it is refilled
    }
    cp_async_wait<0>();

    // O / l, rounded to bf16 once; lane holds columns 8j + 2 (lane % 4) + {0, 1} of its two rows.
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        const float inv = 1.f / quad_sum(l[h]);       // (every lane of the warp shuffles, stored or not)
        const int i = row0 + 8 * h;
        if (i >= Nq) continue;
        u16* out = O + (head * Nq + i) * D + 2 * (lane & 3);
#pragma unroll
        for (int j = 0; j < NO; ++j)
            *reinterpret_cast<u32*>(out + 8 * j) = pack_bf16x2(o[j][2 * h] * inv, o[j][2 * h + 1] * inv);
    }
}
