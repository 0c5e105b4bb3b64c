// 06 Warp specialisation and overlap (sm_90a): rung 05's fused attention, with the waits taken off the critical path.
//
// In rung 05 every warpgroup did, one after the other: wait for K, S = Q Kᵀ, wait, softmax, O += P V, wait,
// __syncthreads, and thread 0 refilled the stage. The tensor cores idled through every softmax. Here:
//
//   warpgroup 0, the producer: one thread issues every TMA copy: Q once, then K_0, and for t = 1, 2, ...
//     K_t then V_{t-1}, each into a ring of STAGES stages with its own "full" and "empty" mbarriers (K and V
//     apart: a K tile is free as soon as S has been computed, a V tile only after P V). It gives most of its
//     registers back (setmaxnreg.dec to PRODUCER_REGS).
//   warpgroups 1..CONSUMERS: 64 query rows each; they take the registers back (setmaxnreg.inc to CONSUMER_REGS).
//     Iteration t of a consumer issues S_t = Q K_tᵀ, rescales O by the previous tile's max step while S_t runs,
//     issues O += P_{t-1} V_{t-1} (both asynchronous), waits for S_t only, and runs the softmax of S_t, meant
//     to run while the tensor cores are still busy with P_{t-1} V_{t-1} (overlap inside a warpgroup; on NVRTC
//     13.0 and 13.5 ptxas still places the exponentials after the second wait: lesson 06 counts them in the
//     SASS). Only then does it wait for P V and round S_t to bf16: P_t, the A operand of the next P V.
//   ping-pong (PINGPONG, two or three consumers): named barriers hand the tensor cores from one consumer to the
//     next. Consumer c waits at barrier 1 + c before issuing its wgmmas and, once they are issued, arrives at
//     the next one's (c + 1, round the ring): while one consumer runs its softmax another's wgmmas run.
//     Three consumers (d = 64 only: at 160 registers each, d = 128 spills) make a block of 192 query rows;
//     at d = 64 the softmax weighs as much as the products, and a third consumer keeps the tensor cores fed.
//
// A block owns BQ = 64 * CONSUMERS query rows of one (batch, head). TMA zero-fills rows past Nq and Nk; keys
// past Nk (and, when CAUSAL, after the query) get s = -inf, and a causal block stops at its last visible tile.
// Compile-time constants (NVRTC -D): D (64 or 128), CONSUMERS (1 to 3), BKV (64 or 128), STAGES, CAUSAL,
// PINGPONG, OVERLAP (0: one product at a time, to measure what the overlap buys), PRODUCER_REGS, CONSUMER_REGS.
#include "hopper.cuh"
#include "attention.cuh"    // D, BKV, STAGES, CAUSAL, NEG_INF, quad_max, quad_sum

#ifndef CONSUMERS
#define CONSUMERS 2
#endif
#ifndef PINGPONG
#define PINGPONG 1
#endif
#ifndef OVERLAP
#define OVERLAP 1     // 1: S_t and P_{t-1} V_{t-1} in flight together, the softmax under P V
#endif
#ifndef PRODUCER_REGS
#define PRODUCER_REGS 24
#endif
#ifndef CONSUMER_REGS
#define CONSUMER_REGS (CONSUMERS == 3 ? 160 : 240)   // 24 + 3 x 160 = 504 of 512
#endif

constexpr int NT = 128 * (CONSUMERS + 1);
constexpr int BQ = 64 * CONSUMERS;
constexpr int BOXES = D / 64;                      // 64-channel boxes a row (1 or 2)
constexpr int Q_BOX = BQ * 128;                    // bytes of one Q box: BQ rows of 64 channels
constexpr int KV_BOX = BKV * 128;                  // bytes of one K or V box
constexpr int Q_BYTES = BOXES * Q_BOX;
constexpr int TILE_BYTES = BOXES * KV_BOX;         // one K (or V) tile
constexpr int SMEM_BYTES = 1024 + Q_BYTES + STAGES * 2 * TILE_BYTES + 8 * (4 * STAGES + 1);
constexpr int NS = BKV / 8;                        // n8 column blocks of S
constexpr int NO = D / 8;                          // n8 column blocks of O
constexpr bool PING = PINGPONG && CONSUMERS >= 2;

static_assert(BKV == 64 || BKV == 128, "BKV: 64 or 128 (a wgmma N)");
static_assert(CONSUMERS >= 1 && CONSUMERS <= 3, "CONSUMERS: 1 to 3");
static_assert(STAGES >= 1, "at least one stage");
static_assert(PRODUCER_REGS + CONSUMERS * CONSUMER_REGS <= 512, "the register file: 64 K registers a block");

struct Ring {                                      // shared-memory addresses of the K and V tiles and mbarriers
  uint32_t k, v, full_k, full_v, empty_k, empty_v;
  __device__ uint32_t k_tile(int s) const { return k + s * TILE_BYTES; }
  __device__ uint32_t v_tile(int s) const { return v + s * TILE_BYTES; }
};

// S = Q Kᵀ for one consumer's 64 rows: D/16 wgmmas m64nBKVk16, both operands K-major in shared memory.
__device__ __forceinline__ void issue_qk(float (&sc)[BKV / 2], uint32_t q_rows, uint32_t k) {
#pragma unroll
  for (int kk = 0; kk < D / 16; ++kk) {           // k16 step kk: box kk / 4, 32 bytes further along a row
    const uint32_t off = 32 * (kk % 4);
    Wgmma<BKV>::mma<0>(sc, smem_desc(q_rows + (kk / 4) * Q_BOX + off, 16, 1024),
                       smem_desc(k + (kk / 4) * KV_BOX + off, 16, 1024), kk > 0);
  }
}

// O += P V: P (bf16, registers) is the A operand, V [keys][D] is MN-major (16 key rows = 2048 bytes a k16 step).
__device__ __forceinline__ void issue_pv(float (&o)[D / 2], uint32_t (&pa)[BKV / 16][4], uint32_t v) {
#pragma unroll
  for (int ps = 0; ps < BKV / 16; ++ps) WgmmaRS<D>::mma<1>(o, pa[ps], smem_desc(v + 2048 * ps, KV_BOX, 1024), 1);
}

// Keys past Nk, and when CAUSAL keys after the query, get -inf. (row0: this lane's first row; rows of the
// accumulator entry i: row0 + 8 ((i / 2) & 1); its key: j0 + 8 (i / 4) + 2 (lane % 4) + (i & 1).) No branch:
// with a branch between wgmma_wait<1> and wgmma_wait<0>, ptxas (NVRTC 13.0, 13.5) hoisted the second wait above
// the whole softmax. The loop calls it only on the tiles that need it.
__device__ __forceinline__ void mask_scores(float (&sc)[BKV / 2], int j0, int row0, int Nk, int lane) {
#pragma unroll
  for (int i = 0; i < BKV / 2; ++i) {
    const int j = j0 + 8 * (i / 4) + 2 * (lane % 4) + (i & 1), r = row0 + 8 * ((i / 2) & 1);
    sc[i] = (j >= Nk || (CAUSAL && j > r)) ? NEG_INF : sc[i];
  }
}

// 2^x on the special-function unit, subnormal results flushed to zero: no range fix-up around it (plain exp2f
// adds a compare and two multiplies per score). A P below 2^-126 is 0 either way once rounded against l >= 1.
__device__ __forceinline__ float exp2_ftz(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

// The online-softmax step on S (rung 04's and 05's), without touching O: the new running max m (in log2
// units), P = 2^(s log2(e)/sqrt(d) - m) in place of S, l rescaled and summed, and alpha, by which O must be
// rescaled once the P V still in flight has landed.
__device__ __forceinline__ void softmax_step(float (&sc)[BKV / 2], float (&m)[2], float (&l)[2], float (&alpha)[2],
                                             float scale_log2) {
#pragma unroll
  for (int h = 0; h < 2; ++h) {                   // h = 0: row0 (entries 4n, 4n+1); h = 1: row0 + 8 (4n+2, 4n+3)
    float mx = NEG_INF;
#pragma unroll
    for (int n = 0; n < NS; ++n) mx = fmaxf(mx, fmaxf(sc[4 * n + 2 * h], sc[4 * n + 2 * h + 1]));
    const float m_new = fmaxf(m[h], quad_max(mx) * scale_log2);
    const float sub = m_new == NEG_INF ? 0.f : m_new;
    alpha[h] = exp2f(m[h] - sub);
    m[h] = m_new;
    float sum = 0.f;
#pragma unroll
    for (int n = 0; n < NS; ++n)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        float& x = sc[4 * n + 2 * h + e];
        x = exp2_ftz(x * scale_log2 - sub);
        sum += x;
      }
    l[h] = l[h] * alpha[h] + sum;
  }
}

__device__ __forceinline__ void rescale(float (&o)[D / 2], const float (&alpha)[2]) {
#pragma unroll
  for (int n = 0; n < NO; ++n)
#pragma unroll
    for (int i = 0; i < 4; ++i) o[4 * n + i] *= alpha[i / 2];
}

// P, rounded to bf16, as the A operand of P V: k16 step ps is S's column blocks 2 ps and 2 ps + 1.
__device__ __forceinline__ void pack_p(const float (&sc)[BKV / 2], uint32_t (&pa)[BKV / 16][4]) {
#pragma unroll
  for (int ps = 0; ps < BKV / 16; ++ps)
#pragma unroll
    for (int i = 0; i < 4; ++i) pa[ps][i] = pack_bf16x2(sc[8 * ps + 2 * i], sc[8 * ps + 2 * i + 1]);
}

extern "C" __global__ void __launch_bounds__(NT, 1)
attention_warp_specialized(const __grid_constant__ TmaDesc map_q, const __grid_constant__ TmaDesc map_k,
                           const __grid_constant__ TmaDesc map_v, uint16_t* __restrict__ out, int Nq, int Nk,
                           float scale_log2) {
  extern __shared__ unsigned char smem_raw[];
  const uint32_t base = (smem_u32(smem_raw) + 1023) & ~1023u;   // 128B-swizzled boxes need 1024-byte alignment
  const uint32_t sq = base, bars = base + Q_BYTES + STAGES * 2 * TILE_BYTES;
  const Ring ring{base + Q_BYTES, base + Q_BYTES + STAGES * TILE_BYTES,
                  bars, bars + 8 * STAGES, bars + 16 * STAGES, bars + 24 * STAGES};
  const uint32_t qbar = bars + 32 * STAGES;
  const int tid = threadIdx.x, wg = tid / 128;
  const int qb = CAUSAL ? gridDim.x - 1 - blockIdx.x : blockIdx.x;   // causal: the longest blocks first
  // Causal, Nq not a multiple of BQ: the blocks start `pad` rows early, so that the rows past the end of the
  // queries (never stored) fall in the first block, which has one key tile to do, not in the last, which has
  // them all. TMA fills the rows before row 0 with zeros, as it does those past Nq.
  const int pad = CAUSAL ? gridDim.x * BQ - Nq : 0;
  const int q0 = qb * BQ - pad, head = blockIdx.y;
  const int kv_end = CAUSAL ? min(Nk, q0 + BQ) : Nk;
  const int tiles = (kv_end + BKV - 1) / BKV;

  if (tid == 0 && dynamic_smem_bytes() < SMEM_BYTES) asm volatile("trap;");   // host and kernel disagree
  if (tid == 0) {
    for (int s = 0; s < STAGES; ++s) {
      mbar_init(ring.full_k + 8 * s, 1);          // the producer's arrive.expect_tx (+ the bytes)
      mbar_init(ring.full_v + 8 * s, 1);
      mbar_init(ring.empty_k + 8 * s, CONSUMERS); // one arrive per consumer warpgroup
      mbar_init(ring.empty_v + 8 * s, CONSUMERS);
    }
    mbar_init(qbar, 1);
    mbar_fence_init();
  }
  __syncthreads();

  // Consumers in the `if`, the producer in the `else`: with the producer's branch first, ptxas (NVRTC 13.0 and
  // 13.5) held the consumer code to about 180 registers despite setmaxnreg and d = 128 with 128-key tiles
  // spilled; in this order it did not. A measurement of those builds, not a documented rule.
  if (wg > 0) {                                   // ---------------------------------------------- consumers
    setmaxnreg_inc<CONSUMER_REGS>();
    const int c = wg - 1, warp = (tid % 128) / 32, lane = tid % 32, lead = tid % 128 == 0;
    const int row0 = q0 + c * 64 + warp * 16 + lane / 4;   // this lane's rows: row0 and row0 + 8
    const uint32_t q_rows = sq + c * 64 * 128;      // this consumer's 64 rows in each Q box
    auto my_turn = [&] { if (PING) named_barrier(1 + c, 256); };            // wait until the other has issued
    auto your_turn = [&] { if (PING) named_arrive(1 + (c + 1) % CONSUMERS, 256); };   // let the next issue
    if (PING && c == CONSUMERS - 1) your_turn();     // consumer 0 goes first

    float o[D / 2];
#pragma unroll
    for (int i = 0; i < D / 2; ++i) o[i] = 0.f;
    float m[2] = {NEG_INF, NEG_INF}, l[2] = {0.f, 0.f}, alpha[2];
    float sc[BKV / 2];
    uint32_t pa[BKV / 16][4];
    mbar_wait(qbar, 0);

    // Tile 0: S_0 alone (no P V before it).
    mbar_wait(ring.full_k, 0);
    my_turn();
    wgmma_fence();
    issue_qk(sc, q_rows, ring.k_tile(0));
    wgmma_commit();
    if (!(PING && c == CONSUMERS - 1 && tiles == 1)) your_turn();   // the last consumer owes no hand-over after its last issue
    wgmma_wait<0>();
    wgmma_keep(sc);
    if (lead) mbar_arrive(ring.empty_k);
    // Tiles from `masked` on may hold keys past Nk or (causal) after some query of the block: only they are masked.
    const int masked = min(Nk / BKV, CAUSAL ? max(q0 + 1, 0) / BKV : Nk / BKV);   // q0 < 0: see `pad`
    if (masked == 0) mask_scores(sc, 0, row0, Nk, lane);
    softmax_step(sc, m, l, alpha, scale_log2);
    pack_p(sc, pa);

    // Iteration t: S_t and P_{t-1} V_{t-1} issued together, the softmax of S_t under P V.
    auto step = [&](int t, bool mask) {              // inlined: `mask` is a constant at each call
      const int s = t % STAGES, sp = (t - 1) % STAGES;
      mbar_wait(ring.full_k + 8 * s, (t / STAGES) & 1);
      mbar_wait(ring.full_v + 8 * sp, ((t - 1) / STAGES) & 1);
      my_turn();
#if OVERLAP
      wgmma_fence();
      issue_qk(sc, q_rows, ring.k_tile(s));         // S_t
      wgmma_commit();
      rescale(o, alpha);                            // by S_{t-1}'s max step, while S_t runs
      wgmma_fence();
      issue_pv(o, pa, ring.v_tile(sp));             // O += P_{t-1} V_{t-1}
      wgmma_commit();
      if (!(PING && c == CONSUMERS - 1 && t == tiles - 1)) your_turn();
      wgmma_wait<1>();                              // S_t has landed; P V may still be running
      wgmma_keep(sc);
      if (lead) mbar_arrive(ring.empty_k + 8 * s);
      if (mask) mask_scores(sc, t * BKV, row0, Nk, lane);
      softmax_step(sc, m, l, alpha, scale_log2);
      wgmma_keep(sc);                               // the softmax happens here, under P V: without this the
      wgmma_keep(l);                                // compiler may sink it below the wait (plain arithmetic)
      wgmma_wait<0>();                              // P_{t-1} V_{t-1} has landed: pa may be rewritten
      wgmma_keep(o);
#pragma unroll
      for (int ps = 0; ps < BKV / 16; ++ps) wgmma_keep_a(pa[ps]);
      if (lead) mbar_arrive(ring.empty_v + 8 * sp);
#else                                             // one product at a time: P_{t-1} and S_t never both live
      rescale(o, alpha);
      wgmma_fence();
      issue_pv(o, pa, ring.v_tile(sp));             // O += P_{t-1} V_{t-1}
      wgmma_commit();
      wgmma_wait<0>();
      wgmma_keep(o);
#pragma unroll
      for (int ps = 0; ps < BKV / 16; ++ps) wgmma_keep_a(pa[ps]);
      if (lead) mbar_arrive(ring.empty_v + 8 * sp);
      wgmma_fence();
      issue_qk(sc, q_rows, ring.k_tile(s));         // S_t
      wgmma_commit();
      if (!(PING && c == CONSUMERS - 1 && t == tiles - 1)) your_turn();
      wgmma_wait<0>();
      wgmma_keep(sc);
      if (lead) mbar_arrive(ring.empty_k + 8 * s);
      if (mask) mask_scores(sc, t * BKV, row0, Nk, lane);
      softmax_step(sc, m, l, alpha, scale_log2);
#endif
      pack_p(sc, pa);
    };
    int t = 1;
    for (; t < min(masked, tiles); ++t) step(t, false);
    for (; t < tiles; ++t) step(t, true);

    // The last P V.
    const int sl = (tiles - 1) % STAGES;
    mbar_wait(ring.full_v + 8 * sl, ((tiles - 1) / STAGES) & 1);
    rescale(o, alpha);
    wgmma_fence();
    issue_pv(o, pa, ring.v_tile(sl));
    wgmma_commit();
    wgmma_wait<0>();
    wgmma_keep(o);
#pragma unroll
    for (int ps = 0; ps < BKV / 16; ++ps) wgmma_keep_a(pa[ps]);

    // O / l in bf16; lane holds columns 8n + 2 (lane % 4) + {0, 1} of rows row0 and row0 + 8.
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const float inv = 1.f / quad_sum(l[h]);
      const int r = row0 + 8 * h;
      if (r < 0 || r >= Nq) continue;
      uint16_t* dst = out + ((size_t)head * Nq + r) * D + 2 * (lane % 4);
#pragma unroll
      for (int n = 0; n < NO; ++n)
        *reinterpret_cast<uint32_t*>(dst + 8 * n) = pack_bf16x2(o[4 * n + 2 * h] * inv, o[4 * n + 2 * h + 1] * inv);
    }
  } else {                                        // ---------------------------------------------- producer
    setmaxnreg_dec<PRODUCER_REGS>();
    if (tid == 0) {
      auto load = [&](const TmaDesc* map, uint32_t tile, uint32_t full, uint32_t empty, int t) {
        const int s = t % STAGES;                 // lap t / STAGES of the ring: wait for the previous lap's release
        mbar_wait(empty + 8 * s, ((t / STAGES) & 1) ^ 1);
        mbar_expect_tx(full + 8 * s, TILE_BYTES);
#pragma unroll
        for (int j = 0; j < BOXES; ++j) tma_load_3d(tile + s * TILE_BYTES + j * KV_BOX, map, full + 8 * s, 64 * j, t * BKV, head);
      };
      mbar_expect_tx(qbar, Q_BYTES);
#pragma unroll
      for (int j = 0; j < BOXES; ++j) tma_load_3d(sq + j * Q_BOX, &map_q, qbar, 64 * j, q0, head);
      load(&map_k, ring.k, ring.full_k, ring.empty_k, 0);
      for (int t = 1; t < tiles; ++t) {           // in the order the consumers use them: K_t, then V_{t-1}
        load(&map_k, ring.k, ring.full_k, ring.empty_k, t);
        load(&map_v, ring.v, ring.full_v, ring.empty_v, t - 1);
      }
      load(&map_v, ring.v, ring.full_v, ring.empty_v, tiles - 1);
    }
  }
}
