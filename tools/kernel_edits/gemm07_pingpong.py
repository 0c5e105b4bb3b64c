"""GEMM 07 with the two consumer warpgroups taking turns (a "ping-pong" schedule) instead of sharing each tile.

Rung 07's consumers split every 128 x 256 tile by rows and run its k-loop together, so they reach the epilogue
together: while both stage and store their results (about 1.5 µs of a 46 µs tile, results/readings/
H200_gemm_07_clusters_stamps.json) the tensor cores have nothing to do. Here each warpgroup owns a whole
64 x 256 half of the block's tile (warpgroup 0 the upper, 1 the lower), the producer loads the halves one after
the other (an A box of 64 rows a stage, 40 KiB), and the warpgroups take turns: one issues its half's k-loop
while the other finishes its epilogue and waits. A named barrier passes the turn when a warpgroup has issued its
last k-tile; it also keeps a warpgroup from waiting on a ring slot more than one phase ahead of the producer (its
parity would alias). A stage is released by the one warpgroup that read it (empty counts CLUSTER arrivals).
The price: B's boxes cross from L2 twice a tile (once a half) instead of once.

The host is patched (host()): A's tensor map gets 64-row boxes for this kernel's text alone.
"""
TRACK, STAGE = "gemm", "07_clusters"          # the rung whose kernel this edits
MARK = "// ping-pong edit (tools/kernel_edits/gemm07_pingpong.py)"
PARAMS = {"stream_k": False}                  # whole units only: the turns are counted in whole tiles


from cudabook.edits import swap as _swap  # noqa: E402  (one match, or the edit no longer fits)


def edit(text: str) -> str:
    text = _swap(text, "constexpr int A_BYTES = BM * BK * ELEMENT_BYTES;",
                 MARK + "\nconstexpr int A_BYTES = 64 * BK * ELEMENT_BYTES;   // a warpgroup's half: 64 rows")
    text = _swap(text, "mbar_init(empty + 8 * s, (MULTICAST ? CLUSTER : 1) * CONSUMERS);",
                 "mbar_init(empty + 8 * s, MULTICAST ? CLUSTER : 1);   // one warpgroup reads a stage")
    text = _swap(text, "        block_corner(t, tiles_m, tiles_n, rank, m0, n0);\n        for (int kt = k0; kt < k1; ++kt) {",
                 "        block_corner(t, tiles_m, tiles_n, rank, m0, n0);\n"
                 "        for (int h = 0; h < CONSUMERS; ++h)\n"
                 "        for (int kt = k0; kt < k1; ++kt) {")
    text = _swap(text, "tma_load_2d(a, &map_a, bar, kt * BK, m0);", "tma_load_2d(a, &map_a, bar, kt * BK, m0 + 64 * h);")
    # The consumers: a warpgroup takes half cw of each of the block's tiles, skipping the other's ring slots.
    text = _swap(text, """    int s = 0;
    uint32_t phase = 0;
    FOR_EACH_ITEM(items, w) {
      ITEM_RANGE(w);
      int m0, n0;
      block_corner(t, tiles_m, tiles_n, rank, m0, n0);
      float d[BN / 2];""", """    int s = 0;
    uint32_t phase = 0;
    static_assert(!STREAM_K, "the ping-pong edit takes whole units only");
    auto skip = [&](int n) { s += n; phase ^= (s / STAGES) & 1; s %= STAGES; };
    if (cw > 0) skip(cw * k_tiles);
    int i = 0;
    for (int t = cluster; t < tiles; t += clusters, ++i) {
      const int k0 = 0, k1 = k_tiles;
      int m0, n0;
      block_corner(t, tiles_m, tiles_n, rank, m0, n0);
      if (i > 0 || cw > 0) named_barrier(5 + cw, 256);   // my turn: the other warpgroup has issued its half
      float d[BN / 2];""")
    text = _swap(text, "mma_k_tile(d, a + cw * 64 * 128, a + A_BYTES);", "mma_k_tile(d, a, a + A_BYTES);")
    text = _swap(text, """#if MMA_DEPTH == 1
      wgmma_wait<0>();
      if (leader && prev >= 0) release(empty + 8 * prev);
#endif
      wgmma_keep(d);""", """      {                                        // pass the turn, if the other warpgroup has a half to come
        const int other = (cw + 1) % CONSUMERS;
        if (CONSUMERS > 1 && (other > cw || t + clusters < tiles)) named_arrive(5 + other, 256);
      }
      skip((CONSUMERS - 1) * k_tiles);         // the other warpgroups' halves of this tile
#if MMA_DEPTH == 1
      wgmma_wait<0>();
      if (leader && prev >= 0) release(empty + 8 * prev);
#endif
      wgmma_keep(d);""")
    return text


def host(stage_module):
    """Give A's tensor map 64-row boxes when the kernel text is this edit's (the rung's own launches keep BM)."""
    from cudabook.gemm import hopper
    original = hopper.prepare
    if getattr(original, "_pingpong", False):
        return

    def prepare(rung, kernel_name, p, kernel, cfg, smem, *, bm, bn, store_box=None):
        if kernel is not None and MARK in kernel:
            bm = 64
        return original(rung, kernel_name, p, kernel, cfg, smem, bm=bm, bn=bn, store_box=store_box)
    prepare._pingpong = True
    hopper.prepare = prepare
