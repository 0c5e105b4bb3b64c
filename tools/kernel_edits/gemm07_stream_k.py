"""GEMM 07 with a Stream-K tail: the last waves' k-loops shared out evenly over every cluster.

At 4096^3 rung 07 has 256 cluster units (256 x 256) for 66 clusters: 3.9 waves, so in the fourth wave 8 clusters
have nothing to do while the others finish, and the kernel takes 4 units' time for 3.88 units of work. Here
every cluster first takes all but one of the whole waves (W = units / clusters - 1), as the rung does; the R
units left (between one and two waves' worth) are laid end to end as R x k_tiles k-tiles and cut into equal
ranges, one a cluster, so every cluster ends at the same k-tile count. A unit whose k-tiles fall in two ranges
is computed in two pieces: the cluster holding its first k-tiles computes them first thing in its tail (it walks
its range from the end back) and writes its float32 sums to a workspace, a slot a consumer warpgroup, then sets
a flag; the cluster holding the unit's last k-tiles computes them last, waits for the flag, adds the workspace
to its accumulators, clears the flag for the next launch and stores the tile. (The writer runs first, so no one
waits for long; each range is at least one unit long, so a unit is never cut in three.) With fewer units than
two waves the tail is the whole problem; with fewer than one, nothing is split.

The host is patched (host()): two more arguments, the workspace (clusters x 2 blocks x 2 consumer warpgroups
x 128 threads x 128 floats) and the flags (zeroed once; the owner of each split unit clears its flag).
"""
TRACK, STAGE = "gemm", "07_clusters"          # the rung whose kernel this edits
MARK = "// Stream-K edit (tools/kernel_edits/gemm07_stream_k.py)"

SCHEDULE = r"""
// Stream-K edit (tools/kernel_edits/gemm07_stream_k.py)
// A cluster's work, item by item: whole units of the first W waves, then its share of the tail's k-tiles,
// walked from the end back, a piece of a unit at a time. role 0: a whole unit; 1: the unit's first k-tiles (to
// the workspace); 2: its last k-tiles (adds the workspace's piece, then stores).
struct Work { int t, k0, k1, role; };
struct Schedule {
  int cluster, clusters, tiles, k_tiles, W, lo, hi, i, pos;
  __device__ __forceinline__ Schedule(int cluster_, int clusters_, int tiles_, int k_tiles_)
      : cluster(cluster_), clusters(clusters_), tiles(tiles_), k_tiles(k_tiles_), i(0) {
    W = tiles >= clusters ? tiles / clusters - 1 : 0;
    const int R = tiles - W * clusters;
    if (R < clusters) {                        // fewer units than clusters: whole units only
      W = (tiles + clusters - 1) / clusters;
      lo = hi = 0;
    } else {
      const long long total = (long long)R * k_tiles;
      lo = (int)(total * cluster / clusters);
      hi = (int)(total * (cluster + 1) / clusters);
    }
    pos = hi;
  }
  __device__ __forceinline__ bool next(Work& w) {
    if (i < W) {
      w.t = cluster + i * clusters;
      ++i;
      if (w.t < tiles) {
        w.k0 = 0; w.k1 = k_tiles; w.role = 0;
        return true;
      }
      i = W;
      pos = lo;
    }
    if (pos <= lo) return false;
    const int u = (pos - 1) / k_tiles, start = max(lo, u * k_tiles);
    w.t = W * clusters + u;
    w.k0 = start - u * k_tiles;
    w.k1 = pos - u * k_tiles;
    w.role = (w.k0 == 0 && w.k1 == k_tiles) ? 0 : (w.k0 == 0 ? 1 : 2);
    pos = start;
    return true;
  }
};

"""

PARK = r"""        if (w.role == 1) {                     // not the unit's last piece: park the sums, then raise the flag
          float4* slot = reinterpret_cast<float4*>(ws) + (size_t)me * 128 * (BN / 8) + tid % 128;
          asm volatile("" : "+l"(slot));       // computed here, not hoisted out of the tile loop (and spilled)
#pragma unroll
          for (int i = 0; i < BN / 8; ++i)
            slot[i * 128] = make_float4(d[4 * i], d[4 * i + 1], d[4 * i + 2], d[4 * i + 3]);
          __threadfence();
          named_barrier(1 + cw, 128);
          if (leader) atomicExch(flags + me, 1);
          continue;                            // the cluster holding the unit's last k-tiles stores it
        }
"""   # (shared with gemm07_stream_k_last_wave.py)

FIXUP = r"""
      {                                        // Stream-K: a unit cut in two
        const int me = (cluster * CLUSTER + rank) * CONSUMERS + cw;
        const int from = ((cluster - 1) * CLUSTER + rank) * CONSUMERS + cw;   // the cluster before holds the first k's
""" + PARK + r"""        if (w.role == 2) {                     // the last k-tiles: wait for the first k's sums, add them
          if (leader) {
            while (atomicAdd(flags + from, 0) == 0) {
            }
            atomicExch(flags + from, 0);       // clear it for the next launch
            __threadfence();
          }
          named_barrier(1 + cw, 128);
          const float4* slot = reinterpret_cast<const float4*>(ws) + (size_t)from * 128 * (BN / 8) + tid % 128;
          asm volatile("" : "+l"(slot));
#pragma unroll
          for (int i = 0; i < BN / 8; ++i) {
            const float4 v = __ldcg(slot + i * 128);
            d[4 * i] += v.x; d[4 * i + 1] += v.y; d[4 * i + 2] += v.z; d[4 * i + 3] += v.w;
          }
        }
      }
"""


def _swap(text: str, old: str, new: str) -> str:
    assert text.count(old) == 1, f"the kernel no longer has exactly one {old!r}"
    return text.replace(old, new)


def edit(text: str, schedule: str = SCHEDULE, fixup: str = FIXUP, mark: str = MARK) -> str:
    text = _swap(text, "// A consumer warpgroup is done with stage", schedule + "// A consumer warpgroup is done with stage")
    text = _swap(text, "              float scale) {                   // scale: FP8's scale_a * scale_b (bf16 ignores it)",
                 "              float scale, float* __restrict__ ws, int* __restrict__ flags) {")
    # the producer: the same items, the same k-tiles
    text = _swap(text, """      for (int t = cluster; t < tiles; t += clusters) {
        int m0, n0;
        block_corner(t, tiles_m, tiles_n, rank, m0, n0);
        for (int kt = 0; kt < k_tiles; ++kt) {
          mbar_wait(empty + 8 * s, phase ^ 1);""", """      Schedule q(cluster, clusters, tiles, k_tiles);
      Work w;
      while (q.next(w)) {
        int m0, n0;
        block_corner(w.t, tiles_m, tiles_n, rank, m0, n0);
        for (int kt = w.k0; kt < w.k1; ++kt) {
          mbar_wait(empty + 8 * s, phase ^ 1);""")
    text = _swap(text, """    for (int t = cluster; t < tiles; t += clusters) {
      int m0, n0;
      block_corner(t, tiles_m, tiles_n, rank, m0, n0);
      float d[BN / 2];""", """    Schedule q(cluster, clusters, tiles, k_tiles);
    Work w;
    while (q.next(w)) {
      int m0, n0;
      block_corner(w.t, tiles_m, tiles_n, rank, m0, n0);
      float d[BN / 2];""")
    text = _swap(text, "      for (int kt = 0; kt < k_tiles; ++kt) {\n        // >>> lab: wait for stage s",
                 "      for (int kt = w.k0; kt < w.k1; ++kt) {\n        // >>> lab: wait for stage s")
    text = _swap(text, "      wgmma_keep(d);                           // the epilogue reads d only after the last wait\n",
                 "      wgmma_keep(d);                           // the epilogue reads d only after the last wait\n" + fixup)
    return mark + "\n" + text


def host(stage_module, mark=MARK):
    """Launch this edit's text with its workspace and flags (the rung's own launches are untouched)."""
    import ctypes

    from cudabook.gemm import hopper
    s07 = stage_module
    original = s07._build
    if mark in getattr(original, "_stream_k", ()):
        return

    def build(p, kernel, params):
        if kernel is None or mark not in kernel:
            return original(p, kernel, params)
        from numba import cuda
        import numpy as np
        cfg = s07.config(**params)
        smem = s07.smem_bytes(cfg)
        grid = s07.cluster_grid(cfg, smem, params["blocks"])
        M, N, K = p.shape
        kern, c, Kp, Np, maps = hopper.prepare(s07.RUNG, s07.KERNEL, p, kernel, cfg, smem, bm=64 * cfg["CONSUMERS"],
                                               bn=cfg["BN"], store_box=(64, 64))
        blocks = grid(kern, M, Np)
        slots = blocks * cfg["CONSUMERS"]
        ws = cuda.device_array(slots * 128 * (cfg["BN"] // 2), dtype=np.float32)
        flags = cuda.to_device(np.zeros(slots, dtype=np.int32))
        args = [*maps, hopper.pointer(c), M, Np, Kp, 1.0, hopper.pointer(ws), hopper.pointer(flags)]
        types = s07.ARG_TYPES + (ctypes.c_void_p, ctypes.c_void_p)
        threads = 128 * (cfg["CONSUMERS"] + 1)
        keep = (ws, flags)

        def launch():
            kern.launch(blocks, threads, args, types, shared=smem)
            return keep
        return hopper.launcher(p, c, launch)
    build._stream_k = (*getattr(original, "_stream_k", ()), mark)
    s07._build = build
