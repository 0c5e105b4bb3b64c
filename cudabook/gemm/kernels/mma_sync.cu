// 04 mma.sync: C = A @ B in bf16 with float32 accumulation, on the tensor cores (sm_80 and newer).
//
//   A [M, K], B [K, N], C [M, N]: row-major bf16 (as 16-bit words). K and N are multiples of 8 here (the host
//   pads them when they are not), so every row starts on a 16-byte boundary and a 16-byte copy never
//   straddles the end of a row.
//
// A block computes a BM x BN tile of C; its WARPS_M x WARPS_N warps each own a WTM x WTN piece of it, held
// in registers as MI x NI accumulator fragments of 16 x 8 floats. The loop over K walks BK-wide slices:
//
//   global --cp.async--> shared (a ring of STAGES slices) --ldmatrix--> registers --mma.sync--> accumulators
//
// The host passes every size as a -D define (BM, BN, BK, WARPS_M, WARPS_N, STAGES, SWIZZLE, GROUP_M); the
// defaults below only let the file compile on its own.

#ifndef BM
#define BM 128
#endif
#ifndef BN
#define BN 128
#endif
#ifndef BK
#define BK 32
#endif
#ifndef WARPS_M
#define WARPS_M 2
#endif
#ifndef WARPS_N
#define WARPS_N 2
#endif
#ifndef STAGES
#define STAGES 4
#endif
#ifndef SWIZZLE
#define SWIZZLE 1
#endif
#ifndef GROUP_M
#define GROUP_M 8
#endif

#include "mma_sync.cuh"       // the PTX wrappers: cp.async, ldmatrix, mma.sync, cvt to bf16x2

constexpr int NT = WARPS_M * WARPS_N * 32;         // threads per block
constexpr int WTM = BM / WARPS_M;                  // a warp's tile of C: WTM x WTN
constexpr int WTN = BN / WARPS_N;
constexpr int MI = WTM / 16;                       // m16 fragments per warp
constexpr int NI = WTN / 8;                        // n8 fragments per warp
constexpr int A_CPR = BK / 8;                      // 16-byte chunks per row of the A slice [BM][BK]
constexpr int B_CPR = BN / 8;                      // 16-byte chunks per row of the B slice [BK][BN]
constexpr int A_CHUNKS = BM * A_CPR;
constexpr int B_CHUNKS = BK * B_CPR;
constexpr int STAGE_BYTES = (A_CHUNKS + B_CHUNKS) * 16;
constexpr int SMEM_BYTES = STAGES * STAGE_BYTES;   // the host asks for exactly this much dynamic shared memory

static_assert(WTM % 16 == 0 && WTN % 16 == 0, "a warp tile is a whole number of 16 x 16 pieces");
static_assert(BK % 16 == 0 && BK >= 32, "BK is a whole number of k16 steps, at least two (see the main loop)");
static_assert(A_CHUNKS % NT == 0 && B_CHUNKS % NT == 0, "every thread copies the same number of chunks");
static_assert((BK == 32 || BK % 64 == 0) && BN % 32 == 0, "16 rows down, the swizzle repeats (see a_lane)");
static_assert(STAGES >= 2, "a pipeline needs at least two stages");

// ------------------------------------------------------------------------------------------ the swizzle
//
// Shared memory has 32 banks of 4 bytes: one 128-byte line is served in one pass. ldmatrix reads eight 16-byte
// rows per pass (one 8 x 8 matrix); if two of them sit in the same 16-byte column of a line (the same four
// banks), they are served one after the other. A plain [rows][BK] layout puts column c of eight consecutive
// rows in the same banks whenever a row is a multiple of 128 bytes long (8-way conflict), or in two sets
// when it is 64 bytes (4-way).
//
// The fix permutes the 16-byte chunks inside each 128-byte line: the chunk's slot is XORed with the row's
// number (mod 8) for rows of 128 bytes or more, with the line's number (mod 8) where shorter rows share a line.
// Eight consecutive rows at the same logical chunk then land in eight different slots.
// Nothing moves between lines, so each cp.async still writes whole 16-byte chunks, and it costs one XOR.
//   returns: the chunk's index within the tile (multiply by 16 for bytes)
__device__ __forceinline__ int swz(int row, int chunk, int cpr) {
#if SWIZZLE
    if (cpr >= 8) return row * cpr + (chunk ^ (row & 7));        // rows of 128 bytes or more
    const int u = row * cpr + chunk, line = u >> 3;               // shorter rows share a 128-byte line
    return (u & ~7) | ((u & 7) ^ (line & 7));
#else
    return row * cpr + chunk;                                     // plain row-major: bank conflicts
#endif
}

// ------------------------------------------------------------------------------------------ one slice

// Start the copies of one operand's slice, CHUNKS 16-byte chunks of CPR a row, from row r0 and column c0 of X
// [rows][cols] into a swizzled tile at dst (chunks past the matrix's edges zero-filled: src-size 0).
template <int CHUNKS, int CPR>
__device__ __forceinline__ void load_tile(u32 dst, const u16* __restrict__ X, int rows, int cols, int r0, int c0,
                                          int tid) {
#pragma unroll
    for (int i = 0; i < CHUNKS / NT; ++i) {
        const int c = tid + i * NT, row = c / CPR, ch = c % CPR;
        const int gr = r0 + row, gc = c0 + ch * 8;
        const bool in = gr < rows && gc < cols;
        cp_async16(dst + swz(row, ch, CPR) * 16, in ? X + (size_t)gr * cols + gc : X, in ? 16 : 0);
    }
}

// Start the copies of the k-slice starting at k0 into one stage of the ring (A: BM x BK, B: BK x BN).
__device__ __forceinline__ void load_slice(u32 sa, u32 sb, const u16* __restrict__ A, const u16* __restrict__ B,
                                           int M, int N, int K, int m0, int n0, int k0, int tid) {
    load_tile<A_CHUNKS, A_CPR>(sa, A, M, K, m0, k0, tid);
    load_tile<B_CHUNKS, B_CPR>(sb, B, K, N, k0, n0, tid);
}

// ------------------------------------------------------------------------------------------ the kernel

extern "C" __global__ void __launch_bounds__(NT)
gemm_mma_sync(const u16* __restrict__ A, const u16* __restrict__ B, u16* __restrict__ C, int M, int N, int K) {
    extern __shared__ __align__(128) unsigned char smem[];
    const u32 s0 = (u32)__cvta_generic_to_shared(smem);
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int wm0 = (warp / WARPS_N) * WTM, wn0 = (warp % WARPS_N) * WTN;   // this warp's corner in the tile

    // Which tile of C: blocks that run at the same time take GROUP_M tile-rows column by column, so they
    // share slices of A and B in L2 instead of each streaming its own.
    const int gm = (M + BM - 1) / BM, gn = (N + BN - 1) / BN;
    int bm, bn;
    {
        const int pid = blockIdx.x, per_group = GROUP_M * gn, first = pid / per_group * GROUP_M;
        const int rows = min(gm - first, GROUP_M), r = pid % per_group;
        bm = first + r % rows;
        bn = r / rows;
    }
    const int m0 = bm * BM, n0 = bn * BN;
    auto stage_a = [&](int s) { return s0 + s * STAGE_BYTES; };
    auto stage_b = [&](int s) { return s0 + s * STAGE_BYTES + A_CHUNKS * 16; };

    float acc[MI][NI][4];
#pragma unroll
    for (int i = 0; i < MI; ++i)
#pragma unroll
        for (int j = 0; j < NI; ++j)
#pragma unroll
            for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.f;

    // Each lane's ldmatrix row address inside a stage, computed once. 16 rows further down (A's next m16
    // fragment, B's next k16 step) the swizzle pattern repeats (whole groups of eight 128-byte lines), so
    // those addresses are a constant offset away: an immediate in the instruction, no arithmetic.
    constexpr int KS = BK / 16;                        // k16 steps per slice (at least 2)
    u32 a_lane[KS], b_lane[NI / 2];
#pragma unroll
    for (int ks = 0; ks < KS; ++ks)                    // A: lane gives row (lane % 16) at k half (lane / 16)
        a_lane[ks] = swz(wm0 + (lane & 15), ks * 2 + (lane >> 4), A_CPR) * 16;
#pragma unroll
    for (int j = 0; j < NI / 2; ++j)                   // B: two n8 fragments; k row (lane % 16), n half (lane / 16)
        b_lane[j] = A_CHUNKS * 16 + swz(lane & 15, (wn0 + j * 16) / 8 + (lane >> 4), B_CPR) * 16;

    // Fragments for one k16 step, double-buffered: the next step's are read from shared memory while this
    // step's mma instructions run.
    u32 a[2][MI][4], b[2][NI][2];
    auto load_fragments = [&](int buf, int stage, int ks) {
        const u32 base = s0 + stage * STAGE_BYTES;
#pragma unroll
        for (int i = 0; i < MI; ++i) ldmatrix_x4(a[buf][i], base + a_lane[ks] + i * 16 * BK * 2);
#pragma unroll
        for (int j = 0; j < NI; j += 2)
            ldmatrix_x4_trans(b[buf][j][0], b[buf][j][1], b[buf][j + 1][0], b[buf][j + 1][1],
                              base + b_lane[j / 2] + ks * 16 * BN * 2);
    };

    const int KT = (K + BK - 1) / BK;                  // k-slices; the last one is zero-filled past K
    // Prologue: slices 0 .. STAGES-2 in flight, one commit group each (empty groups keep the count right).
#pragma unroll
    for (int s = 0; s < STAGES - 1; ++s) {
        if (s < KT) load_slice(stage_a(s), stage_b(s), A, B, M, N, K, m0, n0, s * BK, tid);
        cp_async_commit();
    }
    cp_async_wait<STAGES - 2>();                       // slice 0 has landed (this thread's copies)...
    __syncthreads();                                   // ...and everyone's
    load_fragments(0, 0, 0);

    int rs = 0, ws = STAGES - 1;                       // the stage read now, the stage refilled next
    for (int kt = 0; kt < KT; ++kt) {
#pragma unroll
        for (int ks = 0; ks < KS; ++ks) {
            // Next step's fragments: from this slice, or at its last step from the next slice's stage.
            const bool last = ks == KS - 1;
            if (!last) load_fragments((ks + 1) & 1, rs, ks + 1);
            else if (kt + 1 < KT) load_fragments((ks + 1) & 1, rs + 1 == STAGES ? 0 : rs + 1, 0);
            if (ks == KS - 2) {
                // >>> lab: issue the copies of slice kt+STAGES-1 into stage ws (load_slice, then commit), wait until slice kt+1 has landed (how many commit groups may still be in flight?), then a barrier
                if (kt + STAGES - 1 < KT)              // the stage of slice kt-1: nobody reads it any more
                    load_slice(stage_a(ws), stage_b(ws), A, B, M, N, K, m0, n0, (kt + STAGES - 1) * BK, tid);
                cp_async_commit();                     // always commit, so group g is always slice g
                cp_async_wait<STAGES - 2>();           // this thread's copies of slice kt+1 have landed...
                __syncthreads();                       // ...and everyone's: the next step may read them
                // <<< lab
                ws = ws + 1 == STAGES ? 0 : ws + 1;
            }
#pragma unroll
            for (int i = 0; i < MI; ++i)
#pragma unroll
                for (int j = 0; j < NI; ++j) mma_16816(acc[i][j], a[ks & 1][i], b[ks & 1][j]);
        }
        rs = rs + 1 == STAGES ? 0 : rs + 1;
    }
    cp_async_wait<0>();                                // nothing may be in flight when the block exits

    // Epilogue: lane l holds C[l/4][2(l%4) + {0,1}] and the same two columns 8 rows down, for each fragment.
    // N is even (a multiple of 8), so the two columns are one aligned 4-byte store.
#pragma unroll
    for (int i = 0; i < MI; ++i) {
        const int row = m0 + wm0 + i * 16 + (lane >> 2);
#pragma unroll
        for (int j = 0; j < NI; ++j) {
            const int col = n0 + wn0 + j * 8 + 2 * (lane & 3);
            if (col >= N) continue;
            if (row < M) *reinterpret_cast<u32*>(C + (size_t)row * N + col) = pack_bf16x2(acc[i][j][0], acc[i][j][1]);
            if (row + 8 < M)
                *reinterpret_cast<u32*>(C + (size_t)(row + 8) * N + col) = pack_bf16x2(acc[i][j][2], acc[i][j][3]);
        }
    }
}
