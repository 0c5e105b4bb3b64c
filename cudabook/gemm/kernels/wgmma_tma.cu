// 05 TMA + WGMMA (sm_90a): C[M, N] = A[M, K] @ B[K, N], bf16 in, fp32 accumulation, bf16 out.
//
// One block per BM x BN output tile (BM = 64 * WGS: each warpgroup of 128 threads owns 64 rows). The tile's
// K loop walks BK = 64 columns of A and rows of B at a time through a ring of STAGES shared-memory stages:
//   - thread 0 asks TMA for the stage's boxes: A's [BM rows x 64 K] and B's BN/64 boxes of [64 K x 64 N], all
//     with 128-byte swizzle, and announces their bytes on the stage's "full" mbarrier (expect_tx);
//   - every thread waits on "full" (the phase bit says which lap of the ring this is), then each warpgroup
//     runs four wgmma.mma_async m64nBNk16 (K = 4 x 16), reading A and B straight from shared memory through
//     descriptors, accumulating in registers;
//   - __syncthreads: nobody reads the stage any more; thread 0 refills it with the tile STAGES ahead.
// TMA fills whatever lies outside the matrices with zeros: ragged M, N and K need no code (the host pads K and
// N to a multiple of 8 when they are not: a TMA row stride must be a multiple of 16 bytes).
// Epilogue: fp32 -> bf16 (round to nearest even, cvt.rn.bf16x2.f32), stored from registers, masked at the edges.
//
// A is K-major ([M, K] row-major: K contiguous); B is [K, N] row-major: N contiguous, "MN-major", so the wgmma
// reads it with the transpose flag set. Descriptors: see hopper.cuh (smem_desc) and cudabook/gemm/wgmma.py.
//
// Compile-time constants (NVRTC -D): BN (64, 128 or 256), WGS (warpgroups; BM = 64 * WGS), STAGES.
#include "hopper.cuh"

#ifndef BN
#define BN 128
#endif
#ifndef WGS
#define WGS 2
#endif
#ifndef STAGES
#define STAGES 4
#endif

constexpr int BM = 64 * WGS;
constexpr int BK = 64;                       // one 128-byte swizzle span of bf16
constexpr int A_BYTES = BM * BK * 2;         // A's box: BM rows of 128 B
constexpr int B_BOX_BYTES = BK * 64 * 2;     // one of B's boxes: 64 K-rows of 64 N (128 B)
constexpr int B_BYTES = BN / 64 * B_BOX_BYTES;
constexpr int STAGE_BYTES = A_BYTES + B_BYTES;
constexpr int SMEM_BYTES = 1024 + STAGES * STAGE_BYTES + 8 * STAGES;   // + 1024: room to align to 1024

extern "C" __global__ void __launch_bounds__(128 * WGS, 1)
gemm_wgmma_tma(const __grid_constant__ TmaDesc map_a, const __grid_constant__ TmaDesc map_b,
               uint16_t* __restrict__ c, int M, int N, int K) {
  extern __shared__ unsigned char smem_raw[];
  const uint32_t base = (smem_u32(smem_raw) + 1023) & ~1023u;   // 128B-swizzled tiles need 1024-byte alignment
  const uint32_t full = base + STAGES * STAGE_BYTES;           // STAGES mbarriers of 8 bytes
  const int tid = threadIdx.x, wg = tid / 128;
  const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;
  const int k_tiles = (K + BK - 1) / BK;

  if (tid == 0 && dynamic_smem_bytes() < SMEM_BYTES) asm volatile("trap;");   // host and kernel disagree
  if (tid == 0) {
    for (int s = 0; s < STAGES; ++s) mbar_init(full + 8 * s, 1);
    mbar_fence_init();
  }
  __syncthreads();

  auto load = [&](int kt, int s) {   // thread 0: bring k-tile kt into stage s
    const uint32_t a = base + s * STAGE_BYTES, b = a + A_BYTES, bar = full + 8 * s;
    mbar_expect_tx(bar, STAGE_BYTES);
    tma_load_2d(a, &map_a, bar, kt * BK, m0);
#pragma unroll
    for (int j = 0; j < BN / 64; ++j) tma_load_2d(b + j * B_BOX_BYTES, &map_b, bar, n0 + 64 * j, kt * BK);
  };
  if (tid == 0)
    for (int s = 0; s < STAGES && s < k_tiles; ++s) load(s, s);

  float d[BN / 2];
#pragma unroll
  for (int i = 0; i < BN / 2; ++i) d[i] = 0.f;

  for (int kt = 0; kt < k_tiles; ++kt) {
    const int s = kt % STAGES;
    mbar_wait(full + 8 * s, (kt / STAGES) & 1);
    // >>> lab: describe this warpgroup's 64 rows of A (K-major) and the stage's B (MN-major) to four m64nBNk16 wgmmas: fence first, then the wgmmas, then commit and wait
    const uint32_t a = base + s * STAGE_BYTES + wg * 64 * 128;   // this warpgroup's 64 rows of 128 B
    const uint32_t b = base + s * STAGE_BYTES + A_BYTES;
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < BK / 16; ++kk) {
      const uint64_t desc_a = smem_desc(a + 32 * kk, 16, 1024);            // k16 step: 32 B along the row
      const uint64_t desc_b = smem_desc(b + 2048 * kk, B_BOX_BYTES, 1024); // k16 step: 16 rows of 128 B
      Wgmma<BN>::mma<1>(d, desc_a, desc_b, 1);
    }
    wgmma_commit();
    wgmma_wait<0>();
    // <<< lab
    __syncthreads();                                   // every warpgroup is done with stage s
    if (tid == 0 && kt + STAGES < k_tiles) load(kt + STAGES, s);
  }
  wgmma_keep(d);                                       // the epilogue reads d only after the last wait

  // Epilogue: the accumulator layout of hopper.cuh (Wgmma), two columns a store.
  const int warp = (tid % 128) / 32, lane = tid % 32;
  const int row = m0 + wg * 64 + warp * 16 + lane / 4;
#pragma unroll
  for (int j = 0; j < BN / 8; ++j) {
    const int col = n0 + 8 * j + 2 * (lane % 4);
    if (col >= N) continue;                            // N is even (padded to 8): a pair is all in or all out
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int r = row + 8 * h;
      if (r < M)
        *reinterpret_cast<uint32_t*>(c + (size_t)r * N + col) = pack_bf16x2(d[4 * j + 2 * h], d[4 * j + 2 * h + 1]);
    }
  }
}
