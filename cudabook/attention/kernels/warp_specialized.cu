// 06 Warp specialisation and overlap (sm_90a): rung 05's fused attention, with the waits taken off the critical path.
//
// In rung 05 every warpgroup did, one after the other: wait for K, S = Q Kᵀ, wait, softmax, O += P V, wait,
// __syncthreads, and thread 0 refilled the stage. The tensor cores idled through every softmax. Here:
//
//   warpgroup 0, the producer: one thread issues every TMA copy: per work tile K_0, then Q, and for t = 1, 2, ...
//     K_t then V_{t-1}, each into a ring of STAGES stages with its own "full" and "empty" mbarriers (K and V
//     apart: a K tile is free as soon as S has been computed, a V tile only after P V). It gives most of its
//     registers back (setmaxnreg.dec to PRODUCER_REGS).
//   warpgroups 1..CONSUMERS: 64 query rows each; they take the registers back (setmaxnreg.inc to CONSUMER_REGS).
//     Iteration t of a consumer issues S_t = Q K_tᵀ, rescales O by the previous tile's max step while S_t runs,
//     issues O += P_{t-1} V_{t-1} (both asynchronous), waits for S_t only, and runs the softmax of S_t, meant
//     to run while the tensor cores are still busy with P_{t-1} V_{t-1} (overlap inside a warpgroup; how many
//     of the exponentials ptxas leaves between the two waits depends on the build: lesson 06 counts them in the
//     SASS). Only then does it wait for P V and round S_t to bf16: P_t, the A operand of the next P V.
//   ping-pong (PINGPONG, two or three consumers): named barriers hand the tensor cores from one consumer to the
//     next. Consumer c waits at barrier 1 + c before issuing its wgmmas and, once they are issued, arrives at
//     the next one's (c + 1, round the ring): while one consumer runs its softmax another's wgmmas run.
//     Three consumers (d = 64 only: at 160 registers each, d = 128 spills) make a block of 192 query rows;
//     at d = 64 the softmax weighs as much as the products, and a third consumer keeps the tensor cores fed.
//
//   persistent grid (PERSISTENT): one block an SM walks work tiles w = blockIdx.x, + gridDim.x, ... and the
//     rings run on from one tile to the next. A block costs more than its key tiles: the Q load and the first
//     K tile, S_0 with no P V beside it, the last P V with no S beside it, the stores and the block's own
//     launch; with a block per tile those are paid in series every time. Here the producer loads the next
//     tile's first K as soon as a stage is free and its Q once every consumer has done the softmax of its
//     last S of the tile (the "Q empty" mbarrier), under the last P V and the stores.
//   dynamic schedule (DYNAMIC, persistent only): a block's producer claims its next work tile from a counter
//     in global memory (atomicAdd) as it finishes issuing the loads of the last one, and hands its number to the
//     consumers in shared memory, published by Q's mbarrier (-1: no more work). The tiles go in rank order
//     (causal: longest first within groups of HEAD_GROUP heads, no snake). The last block to finish sets the
//     counter back to zero for the next launch. (Static: block b takes tiles b, b + gridDim.x, ...)
//
// A work tile is BQ = 64 * CONSUMERS query rows of one (batch, head). TMA zero-fills rows past Nq and Nk; keys
// past Nk (and, when CAUSAL, after the query) get s = -inf, and a causal tile stops at its last visible key
// tile. Compile-time constants (NVRTC -D): D (64 or 128), CONSUMERS (1 to 3), BKV (64 or 128), STAGES, CAUSAL,
// PINGPONG, OVERLAP (0: one product at a time, to measure what the overlap buys), PERSISTENT (0: a block per
// work tile, grid (query blocks, B H)), DYNAMIC, HEAD_GROUP, PRODUCER_REGS, CONSUMER_REGS.
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
#ifndef PERSISTENT
#define PERSISTENT 1  // 1: grid of at most one block an SM, each walking work tiles; 0: a block a work tile
#endif
#ifndef DYNAMIC
#define DYNAMIC 0     // (persistent) 1: tiles claimed from a counter as blocks free up; 0: a fixed stride
#endif
#ifndef HEAD_GROUP
#define HEAD_GROUP 0  // (persistent, causal) tiles ranked longest first within groups of this many heads; 0: all
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
constexpr int SMEM_BYTES = 1024 + Q_BYTES + STAGES * 2 * TILE_BYTES + 8 * (4 * STAGES + 2) + 8;   // + the tile slot
constexpr int NS = BKV / 8;                        // n8 column blocks of S
constexpr int NO = D / 8;                          // n8 column blocks of O
constexpr bool PING = PINGPONG && CONSUMERS >= 2;

static_assert(BKV == 64 || BKV == 128, "BKV: 64 or 128 (a wgmma N)");
static_assert(CONSUMERS >= 1 && CONSUMERS <= 3, "CONSUMERS: 1 to 3");
static_assert(STAGES >= 1, "at least one stage");
static_assert(!DYNAMIC || PERSISTENT, "a dynamic schedule is one of the persistent grid");
static_assert(PRODUCER_REGS + CONSUMERS * CONSUMER_REGS <= 512, "the register file: 64 K registers a block");

struct Ring {                                      // shared-memory addresses of the K and V tiles and mbarriers
  uint32_t k, v, full_k, full_v, empty_k, empty_v;
  __device__ uint32_t k_tile(int s) const { return k + s * TILE_BYTES; }
  __device__ uint32_t v_tile(int s) const { return v + s * TILE_BYTES; }
};

// The block's work tiles: w = first, first + stride, ... below total, each (query block, head) of `heads`.
// Persistent: first = blockIdx.x, stride = gridDim.x. Otherwise one tile a block from the (x, y) grid. A
// causal head's query blocks go longest first (the last query block has every key tile to do).
// Causal and persistent, the tiles' lengths differ: tiles are ranked longest first within groups of HEAD_GROUP
// heads (0: all heads; rank r in a group of g heads: query block r / g from the end, head r % g), group after
// group. The static stride takes them in rounds of gridDim.x, and every other full round is walked backwards
// (a snake), so that the block that took the longest tile of one round takes the shortest of the next.
// (Head-major, a block would meet the same query block every round whenever gridDim.x is a multiple of the
// query blocks a head: 132 blocks, 22 of 192 rows at N = 4096.) Small groups keep fewer heads' keys in flight
// (the L2); large ones end the grid on short tiles everywhere.
struct Work {
  int heads, qblocks, total, first, stride;
  __device__ Work(int Nq, int heads_)
      : heads(heads_), qblocks((Nq + BQ - 1) / BQ), total(qblocks * heads_),
        first(PERSISTENT ? blockIdx.x : blockIdx.y * qblocks + blockIdx.x), stride(PERSISTENT ? gridDim.x : total) {}
  __device__ int rank(int w) const {              // the snake: odd full rounds backwards
    const int k = w / stride, i = w % stride;
    return (k & 1) && (k + 1) * stride <= total ? k * stride + stride - 1 - i : w;
  }
  static constexpr bool RANKED = PERSISTENT && CAUSAL, SNAKE = RANKED && !DYNAMIC;
  // the group of ranked tile r: its first head, its heads, and r's place in it
  __device__ void place(int w, int &h0, int &g, int &i) const {
    const int r = SNAKE ? rank(w) : w, group = HEAD_GROUP > 0 && HEAD_GROUP < heads ? HEAD_GROUP : heads;
    h0 = r / (group * qblocks) * group;
    g = min(group, heads - h0);
    i = r - h0 * qblocks;
  }
  __device__ int head(int w) const {
    if (!RANKED) return w / qblocks;
    int h0, g, i;
    place(w, h0, g, i);
    return h0 + i % g;
  }
  __device__ int qb(int w) const {
    if (!CAUSAL) return w % qblocks;
    if (!RANKED) return qblocks - 1 - w % qblocks;
    int h0, g, i;
    place(w, h0, g, i);
    return qblocks - 1 - i / g;
  }
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
// adds a compare and two multiplies per score). A P below 2^-126 becomes 0 here, though bf16 could hold it (its
// subnormals reach 2^-133); against l >= 1 each such key moves the output by less than about 2^-126 |v|.
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
                           float scale_log2, int heads, int* __restrict__ claimed) {
  // claimed (DYNAMIC): [0] tiles claimed beyond the first gridDim.x, [1] blocks done; zero between launches
  extern __shared__ unsigned char smem_raw[];
  const uint32_t base = (smem_u32(smem_raw) + 1023) & ~1023u;   // 128B-swizzled boxes need 1024-byte alignment
  const uint32_t sq = base, bars = base + Q_BYTES + STAGES * 2 * TILE_BYTES;
  const Ring ring{base + Q_BYTES, base + Q_BYTES + STAGES * TILE_BYTES,
                  bars, bars + 8 * STAGES, bars + 16 * STAGES, bars + 24 * STAGES};
  const uint32_t qbar = bars + 32 * STAGES, qempty = qbar + 8;   // Q landed; every consumer done with Q
  volatile int* tile_slot = reinterpret_cast<volatile int*>(smem_raw + (qempty + 8 - smem_u32(smem_raw)));
  // wg through a shuffle: ptxas then knows it is the same across the warp and keeps what derives from it
  // (the Q descriptors) in uniform registers; computed from threadIdx alone, a d = 64 causal build spilled one.
  const int tid = threadIdx.x, wg = __shfl_sync(0xffffffff, tid / 128, 0);
  const Work work(Nq, heads);
  // Causal, Nq not a multiple of BQ: the tiles start `pad` rows early, so that the rows past the end of the
  // queries (never stored) fall in the first query block, which has one key tile to do, not in the last, which
  // has them all. TMA fills the rows before row 0 with zeros, as it does those past Nq.
  const int pad = CAUSAL ? work.qblocks * BQ - Nq : 0;
  auto first_row = [&](int w) { return work.qb(w) * BQ - pad; };                       // q0 of work tile w
  auto key_tiles = [&](int w) { return ((CAUSAL ? min(Nk, first_row(w) + BQ) : Nk) + BKV - 1) / BKV; };

  if (tid == 0 && dynamic_smem_bytes() < SMEM_BYTES) asm volatile("trap;");   // host and kernel disagree
  if (tid == 0) {
    for (int s = 0; s < STAGES; ++s) {
      mbar_init(ring.full_k + 8 * s, 1);          // the producer's arrive.expect_tx (+ the bytes)
      mbar_init(ring.full_v + 8 * s, 1);
      mbar_init(ring.empty_k + 8 * s, CONSUMERS); // one arrive per consumer warpgroup
      mbar_init(ring.empty_v + 8 * s, CONSUMERS);
    }
    mbar_init(qbar, 1);
    mbar_init(qempty, CONSUMERS * 128);           // every consumer thread: see its arrival
    mbar_fence_init();
  }
  __syncthreads();

  // Consumers in the `if`, the producer in the `else`: with the producer's branch first, ptxas (NVRTC 13.0 and
  // 13.5) held the consumer code to about 180 registers despite setmaxnreg and d = 128 with 128-key tiles
  // spilled; in this order it did not. A measurement of those builds, not a documented rule.
  if (wg > 0) {                                   // ---------------------------------------------- consumers
    setmaxnreg_inc<CONSUMER_REGS>();
    const int c = wg - 1, warp = (tid % 128) / 32, lane = tid % 32, lead = tid % 128 == 0;
    const uint32_t q_rows = sq + c * 64 * 128;      // this consumer's 64 rows in each Q box
    auto my_turn = [&] { if (PING) named_barrier(1 + c, 256); };            // wait until the other has issued
    auto your_turn = [&] { if (PING) named_arrive(1 + (c + 1) % CONSUMERS, 256); };   // let the next issue
    int g = 0;                                      // key tiles of this block's earlier work tiles: the rings' laps
    for (int j = 0;; ++j) {
      int w = work.first + j * work.stride;
      if (DYNAMIC) {                                // the producer's claim, published with Q (or -1: done)
        mbar_wait(qbar, j & 1);
        w = *tile_slot;
        if (w < 0) break;
      } else if (w >= work.total) {
        break;
      }
      const int q0 = first_row(w), head = work.head(w), tiles = key_tiles(w);
      const int row0 = q0 + c * 64 + warp * 16 + lane / 4;   // this lane's rows: row0 and row0 + 8
      // Each work tile runs the hand-over from the start: every barrier's waits and arrivals balance inside it.
      if (PING && c == CONSUMERS - 1) your_turn();     // consumer 0 goes first

      float o[D / 2];
#pragma unroll
      for (int i = 0; i < D / 2; ++i) o[i] = 0.f;
      float m[2] = {NEG_INF, NEG_INF}, l[2] = {0.f, 0.f}, alpha[2];
      float sc[BKV / 2];
      uint32_t pa[BKV / 16][4];
      if (!DYNAMIC) mbar_wait(qbar, j & 1);

      // Tile 0: S_0 alone (no P V before it).
      const int s0 = g % STAGES;
      mbar_wait(ring.full_k + 8 * s0, (g / STAGES) & 1);
      my_turn();
      wgmma_fence();
      issue_qk(sc, q_rows, ring.k_tile(s0));
      wgmma_commit();
      if (!(PING && c == CONSUMERS - 1 && tiles == 1)) your_turn();   // the last consumer owes no hand-over after its last issue
      wgmma_wait<0>();
      wgmma_keep(sc);
      if (lead) mbar_arrive(ring.empty_k + 8 * s0);
      // Tiles from `masked` on may hold keys past Nk or (causal) after some query of the tile: only they are masked.
      const int masked = min(Nk / BKV, CAUSAL ? max(q0 + 1, 0) / BKV : Nk / BKV);   // q0 < 0: see `pad`
      if (masked == 0) mask_scores(sc, 0, row0, Nk, lane);
      softmax_step(sc, m, l, alpha, scale_log2);
      pack_p(sc, pa);

      // Iteration t: S_t and P_{t-1} V_{t-1} issued together, the softmax of S_t under P V.
      auto step = [&](int t, bool mask) {              // inlined: `mask` is a constant at each call
        const int s = (g + t) % STAGES, sp = (g + t - 1) % STAGES;
        mbar_wait(ring.full_k + 8 * s, ((g + t) / STAGES) & 1);
        mbar_wait(ring.full_v + 8 * sp, ((g + t - 1) / STAGES) & 1);
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
      // Every Q Kᵀ of this tile has landed: Q may be replaced. Every thread arrives, not the lead alone: each
      // read tile_slot (schedule="dynamic") that the producer overwrites once this barrier completes, and a
      // lead's arrival orders only its own read before that write (compute-sanitizer's racecheck flagged it).
      mbar_arrive(qempty);

      // The last P V.
      const int sl = (g + tiles - 1) % STAGES;
      mbar_wait(ring.full_v + 8 * sl, ((g + tiles - 1) / STAGES) & 1);
      rescale(o, alpha);
      wgmma_fence();
      issue_pv(o, pa, ring.v_tile(sl));
      wgmma_commit();
      wgmma_wait<0>();
      wgmma_keep(o);
#pragma unroll
      for (int ps = 0; ps < BKV / 16; ++ps) wgmma_keep_a(pa[ps]);
      if (lead) mbar_arrive(ring.empty_v + 8 * sl);
      g += tiles;

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
    }
  } else {                                        // ---------------------------------------------- producer
    setmaxnreg_dec<PRODUCER_REGS>();
    if (tid == 0) {
      // Key tile t of a work tile is the rings' tile g + t: its stage and lap count on from the block's last tile.
      auto load = [&](const TmaDesc* map, uint32_t tile, uint32_t full, uint32_t empty, int gt, int t, int head) {
        const int s = gt % STAGES;                // lap gt / STAGES of the ring: wait for the previous lap's release
        mbar_wait(empty + 8 * s, ((gt / STAGES) & 1) ^ 1);
        mbar_expect_tx(full + 8 * s, TILE_BYTES);
#pragma unroll
        for (int j = 0; j < BOXES; ++j) tma_load_3d(tile + s * TILE_BYTES + j * KV_BOX, map, full + 8 * s, 64 * j, t * BKV, head);
      };
      int g = 0, j = 0;
      for (int w = work.first; w < work.total; ++j) {
        const int q0 = first_row(w), head = work.head(w), tiles = key_tiles(w);
        load(&map_k, ring.k, ring.full_k, ring.empty_k, g, 0, head);   // first: it needs only a free stage
        if (j > 0) mbar_wait(qempty, (j - 1) & 1);  // every consumer's last Q Kᵀ of tile j - 1 has completed
        if (DYNAMIC) *tile_slot = w;                // read by the consumers once Q's barrier completes
        mbar_expect_tx(qbar, Q_BYTES);
#pragma unroll
        for (int b = 0; b < BOXES; ++b) tma_load_3d(sq + b * Q_BOX, &map_q, qbar, 64 * b, q0, head);
        for (int t = 1; t < tiles; ++t) {         // in the order the consumers use them: K_t, then V_{t-1}
          load(&map_k, ring.k, ring.full_k, ring.empty_k, g + t, t, head);
          load(&map_v, ring.v, ring.full_v, ring.empty_v, g + t - 1, t - 1, head);
        }
        load(&map_v, ring.v, ring.full_v, ring.empty_v, g + tiles - 1, tiles - 1, head);
        g += tiles;
        w = DYNAMIC ? gridDim.x + atomicAdd(&claimed[0], 1) : w + work.stride;
      }
      if (DYNAMIC) {                                // no more work: tell the consumers, then count this block out
        if (j > 0) mbar_wait(qempty, (j - 1) & 1);
        *tile_slot = -1;
        mbar_arrive(qbar);
        __threadfence();
        if (atomicAdd(&claimed[1], 1) == (int)gridDim.x - 1) {   // the last block: zero for the next launch
          atomicExch(&claimed[0], 0);
          atomicExch(&claimed[1], 0);
        }
      }
    }
  }
}
