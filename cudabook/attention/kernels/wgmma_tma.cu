// 05 TMA + WGMMA (sm_90a): fused attention with Q, K and V tiles brought by TMA and both products on wgmma.
//
//   q [B*H, Nq, D], k and v [B*H, Nk, D]: bf16, one 3-D tensor map each (cuTensorMapEncodeTiled), boxes of
//   [rows x 64 channels] with 128-byte swizzle: a row of D = 128 channels is two boxes side by side.
//
// A block owns BQ = 64 * WGS query rows of one (batch, head); each warpgroup (128 threads) owns 64 of them.
//   - thread 0 asks TMA for Q once and for K/V tiles of BKV keys into a ring of STAGES stages, each announced
//     on the stage's "full" mbarrier (expect_tx);
//   - every warpgroup waits for the stage, then S = Q K^T on D/16 wgmma m64nBKVk16, both operands straight from
//     shared memory (K-major: a K tile is [keys][D], which is Bᵀ row by row, so no transpose);
//   - the online softmax on S in registers, exactly as rung 04 (the accumulator layout of a wgmma is, warp by
//     warp, the layout of mma.sync's);
//   - P rounded to bf16 in place is the A operand of O += P V: BKV/16 wgmma m64nDk16 with A from registers
//     and V from shared memory (V is [keys][D], N contiguous: MN-major, transposed on the way);
//   - __syncthreads: the stage is free; thread 0 refills it with the tile STAGES ahead.
// Each step waits for the one before (wgmma_wait<0>): nothing overlaps the softmax yet. That is rung 06's job.
//
// TMA zero-fills rows past Nq and Nk; keys past Nk (and, when CAUSAL, after the query) get s = -inf.
// Compile-time constants (NVRTC -D): D (64 or 128), WGS (warpgroups), BKV (64 or 128), STAGES, CAUSAL.
#include "hopper.cuh"
#include "attention.cuh"    // D, BKV, STAGES, CAUSAL, NEG_INF, quad_max, quad_sum

#ifndef WGS
#define WGS 2
#endif

constexpr int NT = 128 * WGS;
constexpr int BQ = 64 * WGS;
constexpr int BOXES = D / 64;                      // 64-channel boxes a row (1 or 2)
constexpr int Q_BOX = BQ * 128;                    // bytes of one Q box: BQ rows of 64 channels
constexpr int KV_BOX = BKV * 128;                  // bytes of one K or V box
constexpr int Q_BYTES = BOXES * Q_BOX;
constexpr int STAGE_BYTES = 2 * BOXES * KV_BOX;    // K then V
constexpr int SMEM_BYTES = 1024 + Q_BYTES + STAGES * STAGE_BYTES + 8 * (STAGES + 1);
constexpr int NS = BKV / 8;                        // n8 column blocks of S
constexpr int NO = D / 8;                          // n8 column blocks of O

static_assert(BKV == 64 || BKV == 128, "BKV: 64 or 128 (a wgmma N)");
static_assert(STAGES >= 1, "at least one stage");

extern "C" __global__ void __launch_bounds__(NT, 1)
attention_wgmma(const __grid_constant__ TmaDesc map_q, const __grid_constant__ TmaDesc map_k,
                const __grid_constant__ TmaDesc map_v, uint16_t* __restrict__ out, int Nq, int Nk, float scale_log2) {
  extern __shared__ unsigned char smem_raw[];
  const uint32_t base = (smem_u32(smem_raw) + 1023) & ~1023u;   // 128B-swizzled boxes need 1024-byte alignment
  const uint32_t sq = base, skv = base + Q_BYTES;
  const uint32_t full = skv + STAGES * STAGE_BYTES, qbar = full + 8 * STAGES;
  const int tid = threadIdx.x, wg = tid / 128, warp = (tid % 128) / 32, lane = tid % 32;
  const int qb = CAUSAL ? gridDim.x - 1 - blockIdx.x : blockIdx.x;   // causal: the longest blocks first
  const int q0 = qb * BQ, head = blockIdx.y;
  const int kv_end = CAUSAL ? min(Nk, q0 + BQ) : Nk;
  const int tiles = (kv_end + BKV - 1) / BKV;

  if (tid == 0 && dynamic_smem_bytes() < SMEM_BYTES) asm volatile("trap;");
  if (tid == 0) {
    for (int s = 0; s <= STAGES; ++s) mbar_init(full + 8 * s, 1);
    mbar_fence_init();
  }
  __syncthreads();

  auto load = [&](int t, int s) {                  // thread 0: K and V of key tile t into stage s
    const uint32_t k = skv + s * STAGE_BYTES, v = k + BOXES * KV_BOX, bar = full + 8 * s;
    mbar_expect_tx(bar, STAGE_BYTES);
#pragma unroll
    for (int j = 0; j < BOXES; ++j) {
      tma_load_3d(k + j * KV_BOX, &map_k, bar, 64 * j, t * BKV, head);
      tma_load_3d(v + j * KV_BOX, &map_v, bar, 64 * j, t * BKV, head);
    }
  };
  if (tid == 0) {
    mbar_expect_tx(qbar, Q_BYTES);
#pragma unroll
    for (int j = 0; j < BOXES; ++j) tma_load_3d(sq + j * Q_BOX, &map_q, qbar, 64 * j, q0, head);
    for (int s = 0; s < STAGES && s < tiles; ++s) load(s, s);
  }

  float o[D / 2];                                  // O: 64 rows x D of this warpgroup
#pragma unroll
  for (int i = 0; i < D / 2; ++i) o[i] = 0.f;
  float m[2] = {NEG_INF, NEG_INF}, l[2] = {0.f, 0.f};
  const int row0 = q0 + wg * 64 + warp * 16 + lane / 4;   // this lane's rows: row0 and row0 + 8
  const uint32_t q_rows = sq + wg * 64 * 128;     // this warpgroup's 64 rows in each Q box
  mbar_wait(qbar, 0);

  for (int t = 0; t < tiles; ++t) {
    const int s = t % STAGES;
    const uint32_t k = skv + s * STAGE_BYTES, v = k + BOXES * KV_BOX;
    mbar_wait(full + 8 * s, (t / STAGES) & 1);

    // >>> lab: S = Q Kᵀ on D/16 wgmmas (descriptors of Q's rows and the K tile, both K-major), then the rescale of the running max, sum and O
    float sc[BKV / 2];
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {         // k16 step kk: box kk / 4, 32 bytes per step along a row
      const uint32_t off = 32 * (kk % 4);
      const uint64_t desc_q = smem_desc(q_rows + (kk / 4) * Q_BOX + off, 16, 1024);
      const uint64_t desc_k = smem_desc(k + (kk / 4) * KV_BOX + off, 16, 1024);
      Wgmma<BKV>::mma<0>(sc, desc_q, desc_k, kk > 0);
    }
    wgmma_commit();
    wgmma_wait<0>();
    wgmma_keep(sc);

    const int j0 = t * BKV;
    if (j0 + BKV > Nk || (CAUSAL && j0 + BKV - 1 > q0 + wg * 64 + warp * 16)) {
#pragma unroll
      for (int i = 0; i < BKV / 2; ++i) {
        const int j = j0 + 8 * (i / 4) + 2 * (lane % 4) + (i & 1), r = row0 + 8 * ((i / 2) & 1);
        if (j >= Nk || (CAUSAL && j > r)) sc[i] = NEG_INF;
      }
    }
#pragma unroll
    for (int h = 0; h < 2; ++h) {                 // h = 0: row0 (entries 4n, 4n+1); h = 1: row0 + 8 (4n+2, 4n+3)
      float mx = NEG_INF;
#pragma unroll
      for (int n = 0; n < NS; ++n) mx = fmaxf(mx, fmaxf(sc[4 * n + 2 * h], sc[4 * n + 2 * h + 1]));
      const float m_new = fmaxf(m[h], quad_max(mx) * scale_log2);
      const float sub = m_new == NEG_INF ? 0.f : m_new;
      const float alpha = exp2f(m[h] - sub);
      m[h] = m_new;
      float sum = 0.f;
#pragma unroll
      for (int n = 0; n < NS; ++n)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          float& x = sc[4 * n + 2 * h + e];
          x = exp2f(x * scale_log2 - sub);
          sum += x;
        }
      l[h] = l[h] * alpha + sum;
#pragma unroll
      for (int n = 0; n < NO; ++n) {
        o[4 * n + 2 * h] *= alpha;
        o[4 * n + 2 * h + 1] *= alpha;
      }
    }
    // <<< lab

    // O += P V: P's k16 step ps is S's column blocks 2 ps and 2 ps + 1, rounded to bf16; V's k16 step is 16
    // key rows of 128 bytes further (+2048), its two 64-channel boxes KV_BOX apart (LBO).
    uint32_t pa[BKV / 16][4];
#pragma unroll
    for (int ps = 0; ps < BKV / 16; ++ps) {
      pa[ps][0] = pack_bf16x2(sc[8 * ps + 0], sc[8 * ps + 1]);
      pa[ps][1] = pack_bf16x2(sc[8 * ps + 2], sc[8 * ps + 3]);
      pa[ps][2] = pack_bf16x2(sc[8 * ps + 4], sc[8 * ps + 5]);
      pa[ps][3] = pack_bf16x2(sc[8 * ps + 6], sc[8 * ps + 7]);
    }
    wgmma_fence();
#pragma unroll
    for (int ps = 0; ps < BKV / 16; ++ps)
      WgmmaRS<D>::mma<1>(o, pa[ps], smem_desc(v + 2048 * ps, KV_BOX, 1024), 1);
    wgmma_commit();
    wgmma_wait<0>();
    wgmma_keep(o);
#pragma unroll
    for (int ps = 0; ps < BKV / 16; ++ps) wgmma_keep_a(pa[ps]);

    __syncthreads();                               // every warpgroup is done with stage s
    if (tid == 0 && t + STAGES < tiles) load(t + STAGES, s);
  }

  // O / l in bf16; lane holds columns 8n + 2 (lane % 4) + {0, 1} of rows row0 and row0 + 8.
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const float inv = 1.f / quad_sum(l[h]);
    const int r = row0 + 8 * h;
    if (r >= Nq) continue;
    uint16_t* dst = out + ((size_t)head * Nq + r) * D + 2 * (lane % 4);
#pragma unroll
    for (int n = 0; n < NO; ++n)
      *reinterpret_cast<uint32_t*>(dst + 8 * n) = pack_bf16x2(o[4 * n + 2 * h] * inv, o[4 * n + 2 * h + 1] * inv);
  }
}
