# %% [markdown]
# # Deformable attention lab 03 · The table, the staged tile and the barriers
#
# In this kernel a group of `lanes` (G) lanes of one warp serves one `(image n, query q, head m)`, as in rung
# 02. Lane `g` owns vector `g` of the head's row (`WORDS` 32-bit words, two bf16 channels each; two vectors,
# `g` and `g + G`, when `PER_LANE` is 2) and keeps float32 sums `acc` for it. The group's slice of shared memory
# starts at `TILE` (the tile: 4 corners of `half = D / 2` words, corner `c` at `TILE + c * half`) and its table
# at `TABLE` (G entries of `TABLE_WORDS` = 8 words: four weights, then four rows). The same memory has three
# views: `tile` (uint32), `weights` (float32) and `rows` (int32). The sample loop `for j0 in range(0,
# samples, lanes):` is written; its body is missing. Write it:
#
# 1. **The table.** Lane `g` takes sample `j = j0 + g`, if `j < samples`: `l = j // P`, `p = j % P`, the level's
#    `H = shapes[l, 0]` and `W = shapes[l, 1]`, the position `x = loc[n, q, m, l, p, 0] * W - 0.5`, `y = ... 1] * H - 0.5` (float32). Start
#    with four zero weights and four rows of -1. If the sample touches the map (`-1 < x < W`, `-1 < y < H`):
#    `x0 = floor(x)`, `y0 = floor(y)`, the fractions, the four bilinear weights times
#    `a = attn[n, q, m, l, p]`, and for each corner **on the map** its row of `words`: the top-left pixel's
#    is `top = (starts[l] + y0 * W + x0) * M + m`, its right neighbour `top + M`, the pixel below
#    `top + W * M`. Write the entry at `mine = TABLE + TABLE_WORDS * g`: `weights[mine + 0..3]` in the order
#    `(y0, x0)`, `(y0, x0 + 1)`, `(y0 + 1, x0)`, `(y0 + 1, x0 + 1)`, then `rows[mine + 4..7]` in the same order.
#    Then every lane: `cuda.syncwarp(FULL_MASK)`.
# 2. **Per sample** `t` of the round, `for t in range(min(lanes, samples - j0)):`, with its entry at
#    `entry = TABLE + TABLE_WORDS * t`:
#    - **stage**: `for e in range(g, 4 * nvec, lanes):` corner `c = e // nvec`, vector `v = e - c * nvec`, at
#      `at = TILE + c * half + v * WORDS`; with `r = rows[entry + 4 + c]`, `copy_vector(tile, at, words, n, r,
#      v * WORDS, WORDS)` if `r >= 0`, else `zero_vector(tile, at, WORDS)`;
#    - `cuda.syncwarp(FULL_MASK)`;
#    - **blend**: for `k in range(PER_LANE)`, `v = g + k * lanes`, if `v < nvec`: for each corner `c`,
#      `add_staged(acc, 2 * WORDS * k, tile, TILE + c * half + v * WORDS, weights[entry + c], WORDS)`;
#    - `cuda.syncwarp(FULL_MASK)`.
#
# Every lane of the warp must reach every barrier: no `return` and no barrier inside an `if` that some lanes
# skip. The grader runs your kernel on fresh random problems (D from 8 to 40 in the simulator, to 128 on a GPU;
# rounds that repeat and end partial; up to a quarter of the coordinates on edges). Without a GPU it runs in
# Numba's simulator, which runs every lane as a thread, checks every index and checks every shared-memory access
# against the barriers: a read or write that no barrier orders stops the kernel with a `SharedRace` error that
# names both threads (on a GPU, a kernel the GPU passes is graded there once more). Then it compiles your kernel
# for a GPU.
#
# The lesson: [03 · shared tiles](../../notebooks/msda/03_smem_tiles.ipynb).

# %%
import cudabook
print(cudabook.where())
import math
import numpy as np
from numba import cuda, float32, int32, uint32
from cudabook.msda import grade
from cudabook.msda.s03_smem_tiles import (ACC, FULL_MASK, PER_LANE, TABLE_WORDS, WARP, WORDS, add_staged,
                                          copy_vector, lane_group, store_sums, zero_vector)

# %%
#! kernel msda.s03_smem_tiles msda_tiles

# %%
grade("03_smem_tiles", msda_tiles)

# %% [markdown]
# Passed? Take a barrier out and read what the grader says: without the one between staging and blending, the
# simulator's D = 8 case still passes (a group of one lane stages only what it blends itself), and the D = 24
# case, where lanes copy for each other, stops with a `SharedRace`. Or drop the `zero_vector` branch: a corner off the map then
# blends whatever the previous sample left in the tile. Grade it at the other vector widths too:
# `grade("03_smem_tiles", msda_tiles, vec_bytes=4)` (and 8). Then see what the copy engine makes
# of the same tiles: [04 · TMA boxes](../../notebooks/msda/04_tma_boxes.ipynb).
