// 07 Clusters, TMA multicast and a TMA-store epilogue (sm_90a): C[M, N] = A[M, K] @ B[K, N], bf16 in, fp32
// accumulation, bf16 out.
//
// 06's warp-specialised persistent kernel (one producer warpgroup, CONSUMERS consumer warpgroups, a ring of
// full/empty mbarriers), with three changes:
//   1. Thread-block clusters of CLUSTER blocks (one above the other: CLUSTER consecutive BM-row tiles of the same
//      BN columns). They need the same B tile, so each block's producer loads only its share of B's boxes and
//      TMA *multicasts* every box into the shared memory of all the blocks of the cluster: B crosses from L2
//      once per cluster instead of once per block. A block's full[s] expects the whole stage (its A box, its own
//      B boxes and the ones its peers send); a stage may be refilled only when the consumers of *every* block
//      of the cluster are done with it, so each consumer warpgroup arrives on empty[s] of every block
//      (mbarrier.arrive on a cluster address from mapa), and empty[s] counts CONSUMERS * CLUSTER arrivals.
//      That arrive must be .relaxed: with .release.cluster, each one waits for a GPU-wide memory barrier and the
//      kernel ran at half speed (measured on an H100 while this rung was built, 4096^3; not a results/ record).
//      MULTICAST 2: block 0 multicasts all of B; MULTICAST 0: no multicast, every block loads its own B (the
//      cluster then only places its blocks side by side in time and space).
//   2. The epilogue writes the bf16 tile to shared memory (in the 128-byte-swizzled layout TMA expects, which
//      also keeps the writes free of bank conflicts) and one thread stores it with TMA (cp.async.bulk.tensor
//      global <- shared): TMA clips rows and columns outside C, so no masks. The store runs in the background
//      while the consumers start the next tile; before they overwrite the staging buffer they wait until TMA
//      has read it (cp.async.bulk.wait_group.read).
//   3. MMA_DEPTH 1 keeps one k-tile's wgmmas running while the next k-tile's are issued: a consumer releases
//      stage s-1 once wgmma.wait_group 1 says the group before the newest is done.
//   4. STREAM_K 1 shares out the last, partial wave (Stream-K, in the paper's "data-parallel + one-tile" hybrid):
//      every whole wave runs as above; the k-tiles of the units left over are laid end to end and cut into one
//      equal range a cluster (to within a k-tile), so the clusters end at about the same moment. A unit cut in pieces: every piece but the one holding its last
//      k-tile parks its float32 sums in the workspace `ws` (a slot a consumer warpgroup) and raises its flag;
//      the last piece waits for those flags, adds the parked sums and stores the tile (the host decides when
//      it pays: s07_clusters.stream_k_pays).
//
// Compile-time constants (NVRTC -D): BN (128 or 256), CONSUMERS (BM = 64 * CONSUMERS), STAGES, CLUSTER (1, 2 or
// 4; divides BN / 64), GROUP_M, PRODUCER_REGS, CONSUMER_REGS, TMA_STORE (0: 06's masked register stores),
// MMA_DEPTH (0 or 1), MULTICAST (0, 1 or 2), STMATRIX (0: 4-byte st.shared), STORE_BOXES (64 x 64 staging buffers a consumer warpgroup: 1 .. BN / 64),
// STREAM_K (0 or 1).
//
// FP8 1 is rung 08: the same kernel on e4m3 inputs. A [M, K] and B stored transposed, Bt [N, K] (fp8 wgmma
// reads both operands K-major), one byte an element: a 128-byte row holds BK = 128 of K, one wgmma covers k32,
// and the accumulators are multiplied by `scale` (the product of the two per-tensor scales) before rounding to
// bf16. The stages', boxes' and SBO's byte counts are the bf16 kernel's; B's descriptor is not (K-major here,
// MN-major there: its LBO and its step along k differ).
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
#ifndef CLUSTER
#define CLUSTER 2
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
#ifndef TMA_STORE
#define TMA_STORE 1
#endif
#ifndef MMA_DEPTH
#define MMA_DEPTH 1
#endif
#ifndef MULTICAST
#define MULTICAST 1
#endif
#ifndef STMATRIX
#define STMATRIX 1
#endif
#ifndef STORE_BOXES
#define STORE_BOXES 2
#endif
#ifndef FP8
#define FP8 0
#endif
#ifndef STREAM_K
#define STREAM_K 0
#endif

constexpr int BM = 64 * CONSUMERS;
constexpr int ELEMENT_BYTES = FP8 ? 1 : 2;
constexpr int BK = 128 / ELEMENT_BYTES;                        // a 128-byte row of K: 64 bf16 or 128 e4m3
constexpr int A_BYTES = BM * BK * ELEMENT_BYTES;
constexpr int B_BOX_BYTES = BK * 64 * ELEMENT_BYTES;
constexpr int B_BOXES = BN / 64;
constexpr int B_BYTES = B_BOXES * B_BOX_BYTES;
constexpr int STAGE_BYTES = A_BYTES + B_BYTES;
constexpr int C_BOX_BYTES = 64 * 64 * 2;                       // one 64 x 64 bf16 box of C (8 rows of 128 B x 8)
constexpr int C_WG_BYTES = TMA_STORE ? STORE_BOXES * C_BOX_BYTES : 0;   // a consumer warpgroup's staging boxes
constexpr int SMEM_BYTES = 1024 + STAGES * STAGE_BYTES + CONSUMERS * C_WG_BYTES + 16 * STAGES;
static_assert(B_BOXES % CLUSTER == 0, "each block of the cluster multicasts the same number of B boxes");
static_assert(STORE_BOXES >= 1 && STORE_BOXES <= B_BOXES, "1 .. BN / 64 staging boxes");
static_assert(!STREAM_K || STAGES * STAGE_BYTES >= CONSUMERS * 64 * BN * 4, "Stream-K adds parked sums in the ring");

__device__ __forceinline__ void mma_k_tile(float (&d)[BN / 2], uint32_t a, uint32_t b) {
  wgmma_fence();
#if FP8
  // >>> lab[08_fp8]: issue the k-tile's e4m3 wgmmas (WgmmaFp8, k32 each) on A and Bt, both K-major and 128B-swizzled: how many steps, how far each step moves in A and in Bt, and which descriptor Bt needs
#pragma unroll
  for (int kk = 0; kk < BK / 32; ++kk)        // Bt is K-major like A: its k32 step is 32 bytes along the row too
    WgmmaFp8<BN>::mma(d, smem_desc(a + 32 * kk, 16, 1024), smem_desc(b + 32 * kk, 16, 1024), 1);
  // <<< lab
#else
#pragma unroll
  for (int kk = 0; kk < BK / 16; ++kk)
    Wgmma<BN>::mma<1>(d, smem_desc(a + 32 * kk, 16, 1024), smem_desc(b + 2048 * kk, B_BOX_BYTES, 1024), 1);
#endif
  wgmma_commit();
}

// Where B's box j of k-tile kt starts, in the tensor map's coordinates (innermost first): B [K, N] boxes are
// 64 rows of K by 64 columns of N; Bt [N, K] (FP8) boxes 64 rows of N by BK of K.
#if FP8
#define B_BOX(j) kt * BK, n0 + 64 * (j)
#else
#define B_BOX(j) n0 + 64 * (j), kt * BK
#endif

// This block's corner (m0, n0) of the cluster's unit of work t: the unit's place in the grouped order (GROUP_M
// unit rows at a time), then this block's BM rows (its rank) of the unit's CLUSTER * BM.
__device__ __forceinline__ void block_corner(int t, int tiles_m, int tiles_n, int rank, int& m0, int& n0) {
  int tm, tn;
  grouped_tile(t, tiles_m, tiles_n, GROUP_M, tm, tn);
  m0 = (tm * CLUSTER + rank) * BM;
  n0 = tn * BN;
}

#if STREAM_K
// A cluster's work, item by item: the units of every whole wave (W = tiles / clusters of them), then its share of
// the leftover units' k-tiles, walked from the end of its range back, a piece of a unit at a time. Pieces: 0, a
// whole unit; 1, not the unit's last piece (its sums go to the workspace); 2, the unit's last piece (it adds the
// other pieces' sums and stores the tile). Walking back, a cluster's first item is the only one that may be a
// piece 1 and its last item the only one that may be a piece 2, so the pieces that park come before the ones
// that wait, everywhere.
struct Work { int t, k0, k1, piece; };
__device__ __forceinline__ int range_start(int c, int clusters, int total) { return (int)((long long)total * c / clusters); }
struct StreamK {
  int cluster, clusters, tiles, k_tiles, W, total, lo, pos, i;
  __device__ __forceinline__ StreamK(int cluster_, int clusters_, int tiles_, int k_tiles_)
      : cluster(cluster_), clusters(clusters_), tiles(tiles_), k_tiles(k_tiles_), i(0) {
    W = tiles / clusters;
    total = (tiles - W * clusters) * k_tiles;
    lo = range_start(cluster, clusters, total);
    pos = range_start(cluster + 1, clusters, total);
  }
  __device__ __forceinline__ bool next(Work& w) {
    if (i < W) {
      w.t = cluster + clusters * i++;
      w.k0 = 0; w.k1 = k_tiles; w.piece = 0;
      return true;
    }
    if (pos <= lo) return false;
    const int u = (pos - 1) / k_tiles, start = max(lo, u * k_tiles);
    w.t = W * clusters + u;
    w.k0 = start - u * k_tiles;
    w.k1 = pos - u * k_tiles;
    w.piece = (w.k0 == 0 && w.k1 == k_tiles) ? 0 : (w.k1 < k_tiles ? 1 : 2);
    pos = start;
    return true;
  }
};

// Piece 1: park a consumer warpgroup's sums in its slot (each thread its own BN / 8 float4s), then raise its flag.
__device__ __forceinline__ void park(const float (&d)[BN / 2], float* ws, int* flags, int slot, int cw, bool leader) {
  float4* mine = reinterpret_cast<float4*>(ws) + (size_t)slot * 128 * (BN / 8) + threadIdx.x % 128;
  asm volatile("" : "+l"(mine));               // computed here, not hoisted out of the tile loop (and spilled)
#pragma unroll
  for (int i = 0; i < BN / 8; ++i) mine[i * 128] = make_float4(d[4 * i], d[4 * i + 1], d[4 * i + 2], d[4 * i + 3]);
  __threadfence();                             // the sums are visible GPU-wide before the flag
  named_barrier(1 + cw, 128);
  if (leader) atomicExch(flags + slot, 1);
}

// Piece 2: add the sums parked in `slot` once its flag is up (and lower it for the next launch). Each thread
// copies its float4s into `buf`, the ring (free: this is the cluster's last item), with cp.async, many in flight
// and no registers held, then adds them from there.
__device__ __forceinline__ void add_parked(float (&d)[BN / 2], const float* ws, int* flags, int slot, int cw,
                                           bool leader, uint32_t buf, const unsigned char* buf_ptr) {
  if (leader) {                                // (no wgmma is in flight here: the watchdog's trap may diverge)
    const uint64_t t0 = globaltimer_ns();
    while (atomicAdd(flags + slot, 0) == 0)
      if (globaltimer_ns() - t0 > WATCHDOG_NS) asm volatile("trap;");   // a piece that never parks
    atomicExch(flags + slot, 0);
    __threadfence();
  }
  named_barrier(1 + cw, 128);
  const float4* theirs = reinterpret_cast<const float4*>(ws) + (size_t)slot * 128 * (BN / 8) + threadIdx.x % 128;
  asm volatile("" : "+l"(theirs));
#pragma unroll
  for (int i = 0; i < BN / 8; ++i)
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" :: "r"(buf + i * 2048), "l"(theirs + i * 128) : "memory");
  asm volatile("cp.async.wait_all;" ::: "memory");
#pragma unroll
  for (int i = 0; i < BN / 8; ++i) {
    const float4 v = *reinterpret_cast<const float4*>(buf_ptr + i * 2048);
    d[4 * i] += v.x; d[4 * i + 1] += v.y; d[4 * i + 2] += v.z; d[4 * i + 3] += v.w;
  }
}
#endif

// The items a cluster walks, written once for its producer and its consumers, who must walk the same ones: for
// each, the unit t and its k-tiles [k0, k1). With Stream-K, the schedule `items` hands out (whole units, then
// pieces); without, the cluster's whole units in turn.
#if STREAM_K
#define FOR_EACH_ITEM(items, w) \
  StreamK items(cluster, clusters, tiles, k_tiles); \
  for (Work w; items.next(w);)
#define ITEM_RANGE(w) const int t = w.t, k0 = w.k0, k1 = w.k1
#else
#define FOR_EACH_ITEM(items, w) for (int t = cluster; t < tiles; t += clusters)
#define ITEM_RANGE(w) const int k0 = 0, k1 = k_tiles
#endif

// A consumer warpgroup is done with stage `bar`'s data: tell the producer of every block of the cluster.
__device__ __forceinline__ void release(uint32_t empty_bar) {
#if CLUSTER == 1 || MULTICAST == 0
  mbar_arrive(empty_bar);
#else
#pragma unroll
  for (int r = 0; r < CLUSTER; ++r) mbar_arrive_cluster(empty_bar, r);
#endif
}

extern "C" __global__ void __cluster_dims__(CLUSTER, 1, 1) __launch_bounds__(128 * (CONSUMERS + 1), 1)
gemm_clusters(const __grid_constant__ TmaDesc map_a, const __grid_constant__ TmaDesc map_b,
              const __grid_constant__ TmaDesc map_c, uint16_t* __restrict__ c, int M, int N, int K,
              float scale, float* __restrict__ ws, int* __restrict__ flags) {
  // scale: FP8's scale_a * scale_b (bf16 ignores it); ws, flags: STREAM_K's workspace and flags (else unused)
  extern __shared__ unsigned char smem_raw[];
  const uint32_t base = (smem_u32(smem_raw) + 1023) & ~1023u;   // the same offset in every block of a cluster
  const uint32_t cstage = base + STAGES * STAGE_BYTES;
  const uint32_t full = cstage + CONSUMERS * C_WG_BYTES, empty = full + 8 * STAGES;
  const int tid = threadIdx.x, wg = tid / 128;
  const int k_tiles = (K + BK - 1) / BK;
  const int rank = CLUSTER == 1 ? 0 : (int)cluster_ctarank();
  const int cluster = blockIdx.x / CLUSTER, clusters = gridDim.x / CLUSTER;
  // The cluster's unit of work: CLUSTER * BM rows x BN columns; this block takes its rank's BM rows.
  const int tiles_m = (M + CLUSTER * BM - 1) / (CLUSTER * BM), tiles_n = (N + BN - 1) / BN;
  const int tiles = tiles_m * tiles_n;

  if (tid == 0 && dynamic_smem_bytes() < SMEM_BYTES) asm volatile("trap;");   // host and kernel disagree
  if (tid == 0) {
    for (int s = 0; s < STAGES; ++s) {
      mbar_init(full + 8 * s, 1);
      mbar_init(empty + 8 * s, (MULTICAST ? CLUSTER : 1) * CONSUMERS);
    }
    mbar_fence_init();
  }
  if (CLUSTER > 1) cluster_sync(); else __syncthreads();   // peers' barriers exist before anyone multicasts

  if (wg == 0) {                               // ---------------------------------------- producer
    setmaxnreg_dec<PRODUCER_REGS>();
    if (tid == 0) {
      int s = 0;
      uint32_t phase = 0;
      FOR_EACH_ITEM(items, w) {
        ITEM_RANGE(w);
        int m0, n0;
        block_corner(t, tiles_m, tiles_n, rank, m0, n0);
        for (int kt = k0; kt < k1; ++kt) {
          mbar_wait(empty + 8 * s, phase ^ 1);
          const uint32_t a = base + s * STAGE_BYTES, b = a + A_BYTES, bar = full + 8 * s;
          mbar_expect_tx(bar, STAGE_BYTES);    // all of it: the peers' multicast boxes land here too
          tma_load_2d(a, &map_a, bar, kt * BK, m0);
#if CLUSTER == 1 || MULTICAST == 0
#pragma unroll
          for (int j = 0; j < B_BOXES; ++j) tma_load_2d(b + j * B_BOX_BYTES, &map_b, bar, B_BOX(j));
#elif MULTICAST == 1
#pragma unroll
          for (int i = 0; i < B_BOXES / CLUSTER; ++i) {   // this block's share of B, sent to every block
            const int j = rank * (B_BOXES / CLUSTER) + i;
            tma_load_2d_multicast(b + j * B_BOX_BYTES, &map_b, bar, B_BOX(j), (1 << CLUSTER) - 1);
          }
#else
          if (rank == 0)
#pragma unroll
            for (int j = 0; j < B_BOXES; ++j)
              tma_load_2d_multicast(b + j * B_BOX_BYTES, &map_b, bar, B_BOX(j), (1 << CLUSTER) - 1);
#endif
          if (++s == STAGES) { s = 0; phase ^= 1; }
        }
      }
    }
  } else {                                     // ---------------------------------------- consumers
    setmaxnreg_inc<CONSUMER_REGS>();
    const int cw = wg - 1;
    const int warp = (tid % 128) / 32, lane = tid % 32;
    const bool leader = tid % 128 == 0;
    int s = 0;
    uint32_t phase = 0;
    FOR_EACH_ITEM(items, w) {
      ITEM_RANGE(w);
      int m0, n0;
      block_corner(t, tiles_m, tiles_n, rank, m0, n0);
      float d[BN / 2];
#pragma unroll
      for (int i = 0; i < BN / 2; ++i) d[i] = 0.f;
      int prev = -1;                           // the stage whose wgmmas may still run (MMA_DEPTH 1)
      for (int kt = k0; kt < k1; ++kt) {
        // >>> lab: wait for stage s to be full (which parity?), issue its k-tile, then release the stage whose wgmmas are known to be done on every block of the cluster (empty counts CONSUMERS * CLUSTER arrivals), and advance s / phase
        mbar_wait(full + 8 * s, phase);
        const uint32_t a = base + s * STAGE_BYTES;
        mma_k_tile(d, a + cw * 64 * 128, a + A_BYTES);
#if MMA_DEPTH == 1
        wgmma_wait<1>();                       // all but the newest group are done: stage `prev` is free
        if (leader && prev >= 0) release(empty + 8 * prev);
        prev = s;
#else
        wgmma_wait<0>();
        if (leader) release(empty + 8 * s);
#endif
        if (++s == STAGES) { s = 0; phase ^= 1; }
        // <<< lab
      }
#if MMA_DEPTH == 1
      wgmma_wait<0>();
      if (leader && prev >= 0) release(empty + 8 * prev);
#endif
      wgmma_keep(d);                           // the epilogue reads d only after the last wait
#if STREAM_K
      if (w.piece != 0) {                      // a unit cut in pieces (slots: a consumer warpgroup of each block)
        const int slot = (cluster * CLUSTER + rank) * CONSUMERS + cw;
        if (w.piece == 1) {                    // not the unit's last piece: park the sums; the last one stores
          park(d, ws, flags, slot, cw, leader);
          continue;
        }
        named_barrier(1 + CONSUMERS, 128 * CONSUMERS);   // every consumer warpgroup is past the ring's last stage
        const uint32_t buf = base + cw * 128 * (BN / 8) * 16 + (tid % 128) * 16;   // this thread's float4s
        const int unit_start = (t - items.W * clusters) * k_tiles;   // every cluster before whose range reaches in
        for (int c = cluster - 1; c >= 0 && range_start(c + 1, clusters, items.total) > unit_start; --c)
          if (range_start(c + 1, clusters, items.total) > range_start(c, clusters, items.total))   // not empty
            add_parked(d, ws, flags, (c * CLUSTER + rank) * CONSUMERS + cw, cw, leader, buf,
                       smem_raw + (buf - smem_u32(smem_raw)));
      }
#endif
#if FP8
#pragma unroll
      for (int i = 0; i < BN / 2; ++i) d[i] *= scale;   // the inputs were divided by their scales: undo it
#endif
#if TMA_STORE
      // Stage the warpgroup's 64 x BN bf16 results box by box (64 x 64 each) in TMA's 128B-swizzled layout, where
      // row r's 16-byte chunk q sits at chunk q ^ (r % 8), and store each box with TMA. The boxes take turns in
      // STORE_BOXES buffers: before a buffer is rewritten, the store that last read it must have finished reading.
      const uint32_t cbuf = cstage + cw * C_WG_BYTES;
#pragma unroll
      for (int box = 0; box < B_BOXES; ++box) {
        const uint32_t buf = cbuf + (box % STORE_BOXES) * C_BOX_BYTES;
        if (box < STORE_BOXES) {               // a buffer's first use in this tile: last tile's stores
          if (box == 0 && leader) bulk_wait_read<0>();
          if (box == 0) named_barrier(1 + cw, 128);
        } else {
          if (leader) bulk_wait_read<STORE_BOXES - 1>();
          named_barrier(1 + cw, 128);
        }
#if STMATRIX
        {                                      // lane: row (lane % 8) + 8 * (matrix % 2) of column block + matrix / 2
          const int r = warp * 16 + lane % 8 + 8 * ((lane / 8) % 2);
#pragma unroll
          for (int jj = 0; jj < 8; jj += 2) {
            const int j = box * 8 + jj;
            const uint32_t addr = buf + r * 128 + (((jj + lane / 16) ^ (r % 8)) * 16);
            stmatrix_x4(addr, pack_bf16x2(d[4 * j], d[4 * j + 1]), pack_bf16x2(d[4 * j + 2], d[4 * j + 3]),
                        pack_bf16x2(d[4 * j + 4], d[4 * j + 5]), pack_bf16x2(d[4 * j + 6], d[4 * j + 7]));
          }
        }
#else
        const int r0 = warp * 16 + lane / 4;   // the accumulator's rows of this lane (Wgmma's layout)
#pragma unroll
        for (int jj = 0; jj < 8; ++jj) {
          const int j = box * 8 + jj;          // the 8-column block of the accumulator
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            const int r = r0 + 8 * h;
            const uint32_t addr = buf + r * 128 + ((jj ^ (r % 8)) * 16) + 4 * (lane % 4);
            asm volatile("st.shared.u32 [%0], %1;" :: "r"(addr), "r"(pack_bf16x2(d[4 * j + 2 * h], d[4 * j + 2 * h + 1]))
                         : "memory");
          }
        }
#endif
        fence_proxy_async();                   // these writes, before TMA's reads of them
        named_barrier(1 + cw, 128);
        if (leader) {
          tma_store_2d(&map_c, buf, n0 + 64 * box, m0 + cw * 64);
          bulk_commit();
        }
      }
#else
      const int row = m0 + cw * 64 + warp * 16 + lane / 4;
#pragma unroll
      for (int j = 0; j < BN / 8; ++j) {
        const int col = n0 + 8 * j + 2 * (lane % 4);
        if (col >= N) continue;
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int r = row + 8 * h;
          if (r < M)
            *reinterpret_cast<uint32_t*>(c + (size_t)r * N + col) = pack_bf16x2(d[4 * j + 2 * h], d[4 * j + 2 * h + 1]);
        }
      }
#endif
    }
#if TMA_STORE
    if (leader) bulk_wait<0>();                // the last stores are complete before the block ends
#endif
  }
  if (CLUSTER > 1) cluster_sync();             // no block leaves while a peer may still arrive on its barriers
}
