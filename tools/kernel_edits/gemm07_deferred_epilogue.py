"""GEMM 07 with each tile's epilogue deferred into the next tile's k-loop, one 64-column box a k-tile.

Rung 07's consumers reach the epilogue together, and while both stage and store their 64 x 256 results (about
1.5 µs of a 46 µs tile, results/readings/H200_gemm_07_clusters_stamps.json) the tensor cores have nothing to
do. Here a consumer waits for its last wgmmas, rounds its 128 accumulators to 64 registers of bf16 pairs, and
starts the next tile at once; box b of the last tile (stmatrix into the staging buffer, the fence, the TMA store)
is written after k-tile b of the new tile is issued (counted from the item's first k-tile, k0, so that a
Stream-K piece stores them too), while that k-tile's wgmmas run. The bytes moved are the
rung's; only the order changes. TMA store and stmatrix only (the defaults).

The bf16 pairs need 64 registers beside the 128 accumulators, and ptxas spills them: it holds the consumer code
to about 184 registers (the highest register it names there is R183), under the 232 that setmaxnreg grants (240
bytes of stack; 85 local stores and 136 local loads in the SASS, NVRTC 13.5 read with cuobjdump on a CPU).
Measured (results/readings/H200_gemm_07_clusters_edit_gemm07_deferred_epilogue.json): right, and slower by the
spills. gemm07_deferred_consumers_first.py puts the consumers' branch first, and then it does not spill.
"""
TRACK, STAGE = "gemm", "07_clusters"          # the rung whose kernel this edits


from cudabook.edits import swap as _swap  # noqa: E402  (one match, or the edit no longer fits)


STORE_BOX = r"""
// Box BOX of a consumer's last tile (bf16 pairs, packed[i] = d[2i], d[2i + 1]) to staging buffer
// BOX % STORE_BOXES, then TMA to (n0 + 64 BOX, m0 + 64 cw).
template <int BOX>
__device__ __forceinline__ void store_box(const uint32_t (&packed)[BN / 4], uint32_t cbuf, const TmaDesc* map_c,
                                          int m0, int n0, int cw, int warp, int lane, bool leader) {
  const uint32_t buf = cbuf + (BOX % STORE_BOXES) * C_BOX_BYTES;
  if (BOX < STORE_BOXES) {
    if (BOX == 0 && leader) bulk_wait_read<0>();
    if (BOX == 0) named_barrier(1 + cw, 128);
  } else {
    if (leader) bulk_wait_read<STORE_BOXES - 1>();
    named_barrier(1 + cw, 128);
  }
  const int r = warp * 16 + lane % 8 + 8 * ((lane / 8) % 2);
#pragma unroll
  for (int jj = 0; jj < 8; jj += 2) {
    const int j = BOX * 8 + jj;
    const uint32_t addr = buf + r * 128 + (((jj + lane / 16) ^ (r % 8)) * 16);
    stmatrix_x4(addr, packed[2 * j], packed[2 * j + 1], packed[2 * j + 2], packed[2 * j + 3]);
  }
  fence_proxy_async();
  named_barrier(1 + cw, 128);
  if (leader) {
    tma_store_2d(map_c, buf, n0 + 64 * BOX, m0 + cw * 64);
    bulk_commit();
  }
}

// store_box<box> for a box known at run time (0 <= box < B_BOXES): a switch keeps packed in registers.
__device__ __forceinline__ void store_box_at(int box, const uint32_t (&packed)[BN / 4], uint32_t cbuf,
                                             const TmaDesc* map_c, int m0, int n0, int cw, int warp, int lane,
                                             bool leader) {
  switch (box) {
    case 0: store_box<0>(packed, cbuf, map_c, m0, n0, cw, warp, lane, leader); break;
    case 1: store_box<1 % B_BOXES>(packed, cbuf, map_c, m0, n0, cw, warp, lane, leader); break;
    case 2: store_box<2 % B_BOXES>(packed, cbuf, map_c, m0, n0, cw, warp, lane, leader); break;
    case 3: store_box<3 % B_BOXES>(packed, cbuf, map_c, m0, n0, cw, warp, lane, leader); break;
  }
}

"""
KEEP = """
    uint32_t packed[BN / 4];                   // the last tile's results, stored during the next tile
    int pm0 = -1, pn0 = 0;
    const uint32_t cbuf = cstage + cw * C_WG_BYTES;
"""
CALL = "store_box_at({box}, packed, cbuf, &map_c, pm0, pn0, cw, warp, lane, leader)"


def edit(text: str) -> str:
    text = _swap(text, "// A consumer warpgroup is done with stage", STORE_BOX + "// A consumer warpgroup is done with stage")
    text = _swap(text, "    const bool leader = tid % 128 == 0;\n    int s = 0;",
                 "    const bool leader = tid % 128 == 0;" + KEEP + "    int s = 0;")
    # after k-tile kt is issued (the lab's region ends there), the last tile's box kt
    text = _swap(text, """        if (++s == STAGES) { s = 0; phase ^= 1; }
        // <<< lab
      }""", """        if (++s == STAGES) { s = 0; phase ^= 1; }
        // <<< lab
        if (pm0 >= 0 && kt - k0 < B_BOXES) """ + CALL.format(box="kt - k0") + """;
      }
      if (pm0 >= 0)                            // fewer k-tiles than boxes: the rest now
        for (int box = k1 - k0; box < B_BOXES; ++box) """ + CALL.format(box="box") + ";")
    # the epilogue: round to bf16 pairs and go on; the stores happen in the next tile (or after the last)
    start = text.index("#if TMA_STORE\n      // Stage the warpgroup's")
    end = text.index("#else\n      const int row = m0 + cw * 64")
    text = text[:start] + """#if TMA_STORE
#pragma unroll
      for (int i = 0; i < BN / 4; ++i) packed[i] = pack_bf16x2(d[2 * i], d[2 * i + 1]);
      pm0 = m0;
      pn0 = n0;
""" + text[end:]
    text = _swap(text, "#if TMA_STORE\n    if (leader) bulk_wait<0>();", """#if TMA_STORE
    if (pm0 >= 0)
      for (int box = 0; box < B_BOXES; ++box) """ + CALL.format(box="box") + """;
    if (leader) bulk_wait<0>();""")
    return text
