"""GEMM 07 with Stream-K on the last, partial wave alone: every whole wave as the rung runs it, then the units
left over (fewer than there are clusters) cut into equal k-tile ranges, one a cluster.

gemm07_stream_k.py shares out the last one to two waves (W = units / clusters - 1 whole waves first). Measured
at 4096^3 it reads a third more from DRAM than the rung: its clusters work on all 124 tail units at once,
twice as many as a wave holds, and L2 keeps fewer of their rows and columns. Here the whole waves are all of them
(W = units / clusters) and only the R leftover units are shared, so at any moment the clusters touch at most R
units, as the rung's last wave does. A range is then shorter than a unit (R x k_tiles / clusters k-tiles), so a
unit may be cut in three or more pieces: every piece but the last (the one holding the unit's last k-tile)
parks its sums in its cluster's workspace slot and raises its cluster's flag; the last one, computed last by its
cluster, waits for every cluster before it whose range reaches into the unit, adds their sums and stores the tile.
A cluster holds at most one piece that is not a unit's last (the one at the end of its range, which it computes
first), so one slot and one flag a cluster (a consumer warpgroup of each block) suffice.

The last piece reads the parked sums through shared memory: its cluster's ring is free by then (the last piece
is the cluster's last item), so each thread copies its own 64 float4s there with cp.async and adds them from
there. The first version read them with __ldcg straight into registers (H200, commit 1df682f, interleaved rounds:
0.951x the rung at 4096^3, 1.016x at 8192^3); its stamps showed the sum taking 3 to 6 µs, as long as the whole
epilogue several times over, most likely because with 128 accumulators live few registers are left for loads
in flight (not measured).
"""
from cudabook import edits as _edits

_base = _edits.load("gemm07_stream_k")
TRACK, STAGE = _base.TRACK, _base.STAGE
MARK = "// Stream-K on the last wave edit (tools/kernel_edits/gemm07_stream_k_last_wave.py)"

SCHEDULE = r"""
// A cluster's work, item by item: the units of every whole wave, then its share of the leftover units' k-tiles,
// walked from the end back. role 0: a whole unit; 1: a piece that is not the unit's last (to the workspace);
// 2: the unit's last piece (adds every other piece's sums, then stores).
struct Work { int t, k0, k1, role; };
__device__ __forceinline__ int tail_lo(int c, int clusters, int total) { return (int)((long long)total * c / clusters); }
struct Schedule {
  int cluster, clusters, tiles, k_tiles, W, total, lo, hi, i, pos;
  __device__ __forceinline__ Schedule(int cluster_, int clusters_, int tiles_, int k_tiles_)
      : cluster(cluster_), clusters(clusters_), tiles(tiles_), k_tiles(k_tiles_), i(0) {
    W = tiles / clusters;
    total = (tiles - W * clusters) * k_tiles;
    lo = tail_lo(cluster, clusters, total);
    hi = tail_lo(cluster + 1, clusters, total);
    pos = hi;
  }
  __device__ __forceinline__ bool next(Work& w) {
    if (i < W) {
      w.t = cluster + i * clusters;
      ++i;
      w.k0 = 0; w.k1 = k_tiles; w.role = 0;
      return true;
    }
    if (pos <= lo) return false;
    const int u = (pos - 1) / k_tiles, start = max(lo, u * k_tiles);
    w.t = W * clusters + u;
    w.k0 = start - u * k_tiles;
    w.k1 = pos - u * k_tiles;
    w.role = (w.k0 == 0 && w.k1 == k_tiles) ? 0 : (w.k1 < k_tiles ? 1 : 2);
    pos = start;
    return true;
  }
};

"""

FIXUP = r"""
      {                                        // Stream-K: a unit cut in pieces
        const int me = (cluster * CLUSTER + rank) * CONSUMERS + cw;
""" + _base.PARK + r"""        if (w.role == 2) {                     // the last piece: add the sums of every cluster before that reaches in
          // The ring is free now (this is the cluster's last item): each thread copies its own float4s of a
          // partial into it with cp.async (many in flight, no registers held), waits, and adds them from there.
          named_barrier(3, 128 * CONSUMERS);   // both consumer warpgroups are past the ring's last stage
          const uint32_t mine = base + cw * 128 * (BN / 8) * 16 + (tid % 128) * 16;
          const unsigned char* mine_ptr = smem_raw + (mine - smem_u32(smem_raw));
          const int unit_start = (w.t - q.W * clusters) * k_tiles;
          for (int c = cluster - 1; c >= 0 && tail_lo(c + 1, clusters, q.total) > unit_start; --c) {
            if (tail_lo(c + 1, clusters, q.total) == tail_lo(c, clusters, q.total)) continue;   // an empty range
            const int from = (c * CLUSTER + rank) * CONSUMERS + cw;
            if (leader) {
              while (atomicAdd(flags + from, 0) == 0) {
              }
              atomicExch(flags + from, 0);     // clear it for the next launch
              __threadfence();
            }
            named_barrier(1 + cw, 128);
            const float4* slot = reinterpret_cast<const float4*>(ws) + (size_t)from * 128 * (BN / 8) + tid % 128;
            asm volatile("" : "+l"(slot));
#pragma unroll
            for (int i = 0; i < BN / 8; ++i)
              asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" :: "r"(mine + i * 2048), "l"(slot + i * 128)
                           : "memory");
            asm volatile("cp.async.wait_all;" ::: "memory");
#pragma unroll
            for (int i = 0; i < BN / 8; ++i) {
              const float4 v = *reinterpret_cast<const float4*>(mine_ptr + i * 2048);
              d[4 * i] += v.x; d[4 * i + 1] += v.y; d[4 * i + 2] += v.z; d[4 * i + 3] += v.w;
            }
          }
        }
      }
"""


def edit(text: str) -> str:
    return _base.edit(text, schedule=SCHEDULE, fixup=FIXUP, mark=MARK)


def host(stage_module):
    _base.host(stage_module, mark=MARK)
