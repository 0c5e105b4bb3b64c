// 06 Warp specialisation (sm_90a): C[M, N] = A[M, K] @ B[K, N], bf16 in, fp32 accumulation, bf16 out.
//
// 05 made every thread both wait for copies and compute, with a __syncthreads per k-tile. Here the roles split:
//   warpgroup 0, the producer: one thread issues all the TMA copies. It gives most of its registers back
//     (setmaxnreg.dec to PRODUCER_REGS): it needs few.
//   warpgroups 1..CONSUMERS: each owns 64 rows of the BM x BN tile and runs the wgmmas; they take the registers
//     the producer gave back (setmaxnreg.inc to CONSUMER_REGS): a 64 x 256 fp32 accumulator is 128 a thread.
// They talk through a ring of STAGES stages and two mbarriers per stage:
//   full[s]   the producer announces the stage's bytes (expect_tx); TMA completes them: the data is there.
//   empty[s]  each consumer warpgroup arrives once it has finished reading the stage: it may be refilled.
// Each side counts laps of the ring with a phase bit; a wait names the parity of the phase it waits for.
//
// The grid is persistent: one block per SM, each walking output tiles t = blockIdx.x, + gridDim.x, ... in a
// grouped order (GROUP_M tile rows at a time, see grouped_tile) so that the tiles in flight share A rows and
// B columns in L2. While the consumers store one tile's results, the producer is already loading the next.
//
// Compile-time constants (NVRTC -D): BN (128 or 256), CONSUMERS (BM = 64 * CONSUMERS), STAGES, GROUP_M,
// PRODUCER_REGS, CONSUMER_REGS.
#include "hopper.cuh"

#ifndef BN
#define BN 256
#endif
#ifndef CONSUMERS
#define CONSUMERS 2
#endif
#ifndef STAGES
#define STAGES 4
#endif
#ifndef GROUP_M
#define GROUP_M 8
#endif
#ifndef PRODUCER_REGS
#define PRODUCER_REGS 40
#endif
#ifndef CONSUMER_REGS
#define CONSUMER_REGS 232
#endif

constexpr int BM = 64 * CONSUMERS;
constexpr int BK = 64;
constexpr int A_BYTES = BM * BK * 2;
constexpr int B_BOX_BYTES = BK * 64 * 2;
constexpr int B_BYTES = BN / 64 * B_BOX_BYTES;
constexpr int STAGE_BYTES = A_BYTES + B_BYTES;
constexpr int SMEM_BYTES = 1024 + STAGES * STAGE_BYTES + 16 * STAGES;

// One k-tile of a consumer warpgroup: its 64 rows of A (K-major) times the stage's B (MN-major), 4 x k16.
__device__ __forceinline__ void mma_k_tile(float (&d)[BN / 2], uint32_t a, uint32_t b) {
  wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < BK / 16; ++kk)
    Wgmma<BN>::mma<1>(d, smem_desc(a + 32 * kk, 16, 1024), smem_desc(b + 2048 * kk, B_BOX_BYTES, 1024), 1);
  wgmma_commit();
}

extern "C" __global__ void __launch_bounds__(128 * (CONSUMERS + 1), 1)
gemm_warp_specialized(const __grid_constant__ TmaDesc map_a, const __grid_constant__ TmaDesc map_b,
                      uint16_t* __restrict__ c, int M, int N, int K) {
  extern __shared__ unsigned char smem_raw[];
  const uint32_t base = (smem_u32(smem_raw) + 1023) & ~1023u;
  const uint32_t full = base + STAGES * STAGE_BYTES, empty = full + 8 * STAGES;
  const int tid = threadIdx.x, wg = tid / 128;
  const int k_tiles = (K + BK - 1) / BK;
  const int tiles_m = (M + BM - 1) / BM, tiles_n = (N + BN - 1) / BN, tiles = tiles_m * tiles_n;

  if (tid == 0 && dynamic_smem_bytes() < SMEM_BYTES) asm volatile("trap;");   // host and kernel disagree
  if (tid == 0) {
    for (int s = 0; s < STAGES; ++s) {
      mbar_init(full + 8 * s, 1);              // the producer's arrive.expect_tx (+ the bytes)
      mbar_init(empty + 8 * s, CONSUMERS);     // one arrive per consumer warpgroup
    }
    mbar_fence_init();
  }
  __syncthreads();

  if (wg == 0) {                               // ---------------------------------------- producer
    setmaxnreg_dec<PRODUCER_REGS>();
    if (tid == 0) {
      int s = 0;
      uint32_t phase = 0;
      for (int t = blockIdx.x; t < tiles; t += gridDim.x) {
        int tm, tn;
        grouped_tile(t, tiles_m, tiles_n, GROUP_M, tm, tn);
        for (int kt = 0; kt < k_tiles; ++kt) {
          mbar_wait(empty + 8 * s, phase ^ 1);  // lap 0 passes at once: a fresh barrier's "previous phase"
          const uint32_t a = base + s * STAGE_BYTES, b = a + A_BYTES, bar = full + 8 * s;
          mbar_expect_tx(bar, STAGE_BYTES);
          tma_load_2d(a, &map_a, bar, kt * BK, tm * BM);
#pragma unroll
          for (int j = 0; j < BN / 64; ++j)
            tma_load_2d(b + j * B_BOX_BYTES, &map_b, bar, tn * BN + 64 * j, kt * BK);
          if (++s == STAGES) { s = 0; phase ^= 1; }
        }
      }
    }
  } else {                                     // ---------------------------------------- consumers
    setmaxnreg_inc<CONSUMER_REGS>();
    const int cw = wg - 1;                     // this warpgroup's 64 rows of the tile
    const int warp = (tid % 128) / 32, lane = tid % 32;
    int s = 0;
    uint32_t phase = 0;
    for (int t = blockIdx.x; t < tiles; t += gridDim.x) {
      int tm, tn;
      grouped_tile(t, tiles_m, tiles_n, GROUP_M, tm, tn);
      float d[BN / 2];
#pragma unroll
      for (int i = 0; i < BN / 2; ++i) d[i] = 0.f;
      for (int kt = 0; kt < k_tiles; ++kt) {
        // >>> lab: wait until stage s is full (which parity?), run its k-tile, wait for the wgmmas, arrive on empty[s] (how many arrivals does it count?), then step s and flip phase at the end of the ring
        mbar_wait(full + 8 * s, phase);
        const uint32_t a = base + s * STAGE_BYTES;
        mma_k_tile(d, a + cw * 64 * 128, a + A_BYTES);
        wgmma_wait<0>();                       // the wgmmas have read the stage
        if (tid % 128 == 0) mbar_arrive(empty + 8 * s);
        if (++s == STAGES) { s = 0; phase ^= 1; }
        // <<< lab
      }
      wgmma_keep(d);                           // the epilogue reads d only after the last wait
      const int row = tm * BM + cw * 64 + warp * 16 + lane / 4;
#pragma unroll
      for (int j = 0; j < BN / 8; ++j) {
        const int col = tn * BN + 8 * j + 2 * (lane % 4);
        if (col >= N) continue;
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int r = row + 8 * h;
          if (r < M)
            *reinterpret_cast<uint32_t*>(c + (size_t)r * N + col) = pack_bf16x2(d[4 * j + 2 * h], d[4 * j + 2 * h + 1]);
        }
      }
    }
  }
}
