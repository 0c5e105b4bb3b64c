"""GEMM 07's epilogue staging the whole 64 x 256 tile a warpgroup before one fence, one barrier and its stores.

The rung stages its results box by box (64 x 64, STORE_BOXES buffers taking turns): each box pays a named
barrier, a fence.proxy.async, another barrier and a TMA store, four times a tile. With a buffer for every box
(store_boxes=4, which leaves room for 3 stages), this edit writes all four boxes with stmatrix, then fences and
synchronises the warpgroup once, and its leader issues the four stores back to back. The rung is probed at
the same settings (PARAMS); the edit asserts STORE_BOXES == BN / 64 at compile time.
"""
TRACK, STAGE = "gemm", "07_clusters"          # the rung whose kernel this edits
PARAMS = {"stages": 3, "store_boxes": 4}      # a staging buffer for every box leaves room for 3 stages


from cudabook.edits import swap as _swap  # noqa: E402  (one match, or the edit no longer fits)


def edit(text: str) -> str:
    start = text.index("      const uint32_t cbuf = cstage + cw * C_WG_BYTES;\n")
    end = text.index("#else\n      const int row = m0 + cw * 64")
    return text[:start] + """      static_assert(STORE_BOXES == B_BOXES, "one fence a tile needs a staging buffer for every box");
      const uint32_t cbuf = cstage + cw * C_WG_BYTES;
      if (leader) bulk_wait_read<0>();         // the last tile's stores have read the buffers
      named_barrier(1 + cw, 128);
      {
        const int r = warp * 16 + lane % 8 + 8 * ((lane / 8) % 2);
#pragma unroll
        for (int box = 0; box < B_BOXES; ++box)
#pragma unroll
          for (int jj = 0; jj < 8; jj += 2) {
            const int j = box * 8 + jj;
            const uint32_t addr = cbuf + box * C_BOX_BYTES + r * 128 + (((jj + lane / 16) ^ (r % 8)) * 16);
            stmatrix_x4(addr, pack_bf16x2(d[4 * j], d[4 * j + 1]), pack_bf16x2(d[4 * j + 2], d[4 * j + 3]),
                        pack_bf16x2(d[4 * j + 4], d[4 * j + 5]), pack_bf16x2(d[4 * j + 6], d[4 * j + 7]));
          }
      }
      fence_proxy_async();                     // all the writes, before TMA's reads of them
      named_barrier(1 + cw, 128);
      if (leader) {
#pragma unroll
        for (int box = 0; box < B_BOXES; ++box) tma_store_2d(&map_c, cbuf + box * C_BOX_BYTES, n0 + 64 * box, m0 + cw * 64);
        bulk_commit();
      }
""" + text[end:]
