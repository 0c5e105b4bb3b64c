// How many bytes an SM's L1 serves a cycle to a gather of small pieces from many lines (tools/probe_l1_gather.py).
// Every lane issues 16-byte loads (LDG.128); the G = PIECE / 16 lanes of a group read one PIECE-byte piece of a
// 128-byte line, so one load instruction of a warp reads 32 / G pieces, each from a random line (nearly always
// one of its own: among the l1 span's 256 lines two of a warp's 32 coincide now and then; PAIRED = 1: groups
// 2j and 2j + 1 read the two 64-byte halves of one line, so the warp's 8 pieces sit in 4 lines). PIECE 64,
// PAIRED 0 is the deformable-attention track's corner load: 8 items' 64-byte corners, 8 lines an instruction.
//
// A group's lines are random (a 32-bit LCG whose state the group's lanes share), inside the block's own region
// of region_lines lines (a power of two) (block_stride = region_lines: a region of its own, read once first so that it sits in the
// L1) or inside one region all blocks share (block_stride = 0, a region larger than the L1: the L2 serves it).
// UNROLL independent loads a lane a round. The block's clock64() around the rounds goes to cycles[block]; the XOR
// of every word a thread loaded goes to sums[thread], which the host recomputes (the probe measured the loads it meant to).
// SHARED = 1 gathers the same pieces from a copy of the block's region in shared memory (the smem span).
// SHUFFLES = S adds S warp shuffles of each loaded vector (pairs that leave every value as it was), and
// NO_LOADS = 1 takes the loads away: loads alone, shuffles alone and both together, timed alike.
#ifndef PIECE
#define PIECE 64          // bytes a group reads from one line: 16, 32, 64 or 128
#endif
#ifndef PAIRED
#define PAIRED 0          // 1: two groups share a line, one half each (PIECE 64 only)
#endif
#ifndef SPREAD
#define SPREAD 0          // 1: the groups' pieces sit at successive places of their lines (group g at byte
                          // (g * PIECE) mod 128), so 128 / PIECE successive groups' pieces fall in different
                          // banks (a warp's pieces four to a set of banks, at every PIECE)
#endif
#ifndef UNROLL
#define UNROLL 8          // independent loads a lane keeps in flight a round
#endif
#ifndef SHARED
#define SHARED 0          // 1: the block copies its region (at most 256 lines, 32 KiB) into shared memory first and
                          // gathers from there (LDS.128): the same pieces, from the shared memory's 32 banks
#endif
#ifndef SHUFFLES
#define SHUFFLES 0        // warp shuffles after each load, in pairs that undo each other (__shfl_xor_sync of the
                          // loaded vector's first word, twice with the same lane mask): whether shuffles and the
                          // L1's loads share a unit shows in the time of both together against each alone
#endif
#ifndef NO_LOADS
#define NO_LOADS 0        // 1: no loads, only the shuffles (each "load" is a register holding the LCG's state)
#endif
constexpr int G = PIECE / 16;
static_assert(SHUFFLES % 2 == 0, "SHUFFLES: an even number (pairs that undo each other)");
static_assert(PIECE == 16 || PIECE == 32 || PIECE == 64 || PIECE == 128, "PIECE: 16, 32, 64 or 128 bytes");
static_assert(!PAIRED || PIECE == 64, "PAIRED: two 64-byte halves of one line");
static_assert(!(PAIRED && SPREAD), "PAIRED or SPREAD, not both");

__device__ __forceinline__ unsigned lcg(unsigned s) { return s * 1664525u + 1013904223u; }

extern "C" __global__ void l1_gather(const uint4* __restrict__ data, unsigned region_lines, unsigned block_stride,
                                     int rounds, unsigned seed, long long* __restrict__ cycles,
                                     unsigned* __restrict__ sums) {
    const int lane = threadIdx.x & 31, group = lane / G;
    const unsigned warp = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
#if SHARED
    __shared__ uint4 tile[256 * 8];                     // the block's region, copied: region_lines <= 256
    const uint4* global_region = data + (size_t)blockIdx.x * block_stride * 8;
    unsigned acc = 0;
    for (unsigned i = threadIdx.x; i < region_lines * 8; i += blockDim.x) tile[i] = __ldg(global_region + i);
    const uint4* region = tile;
#else
    const uint4* region = data + (size_t)blockIdx.x * block_stride * 8;
    unsigned acc = 0;
    if (block_stride)                                   // bring the block's own region into the L1 first
        for (unsigned i = threadIdx.x; i < region_lines * 8; i += blockDim.x) {
            const uint4 v = __ldg(region + i);
            acc ^= v.x ^ v.y ^ v.z ^ v.w;
        }
#endif
    __syncthreads();
    const long long t0 = clock64();
    unsigned state = seed ^ (warp * 0x9E3779B9u) ^ ((unsigned)(group >> PAIRED) * 0x85EBCA6Bu);
    const int within = (PAIRED ? (group & 1) * 4 : SPREAD ? (group * G) % 8 : 0) + lane % G;   // its 16 bytes
    unsigned sum = 0;
    for (int r = 0; r < rounds; ++r) {
        uint4 v[UNROLL];
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) {
            state = lcg(state);
#if NO_LOADS
            v[u] = make_uint4(state, 0u, 0u, 0u);
#elif SHARED
            v[u] = region[((state >> 8) & (region_lines - 1)) * 8 + within];
#else
            v[u] = __ldg(region + (size_t)((state >> 8) & (region_lines - 1)) * 8 + within);
#endif
        }
#pragma unroll
        for (int k = 0; k < SHUFFLES; ++k)                 // pairs: lane mask 1 + (k / 2) % 31, twice
#pragma unroll
            for (int u = 0; u < UNROLL; ++u) v[u].x = __shfl_xor_sync(0xFFFFFFFFu, v[u].x, 1 + (k / 2) % 31);
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) sum ^= v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
    }
    __syncthreads();
    const long long t1 = clock64();
    const unsigned t = blockIdx.x * blockDim.x + threadIdx.x, all = gridDim.x * blockDim.x;
    sums[t] = sum;                                      // the host replays each thread's loads
    sums[all + t] = acc;                                // keeps the warm-up's loads (the host ignores these)
    if (threadIdx.x == 0) cycles[blockIdx.x] = t1 - t0;
}
