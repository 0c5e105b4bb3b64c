# %% [markdown]
# # Deformable attention lab 02 · Rounds and shuffles
#
# In this kernel a group of `lanes` (G) lanes of one warp serves one `(image n, query q, head m)`. Lane `g` of
# the group owns vector `vec` of the head's row of channels (`WORDS` 32-bit words, two bf16 channels each), and
# has float32 accumulators `acc` for them. Everything around the sample loop is written; the loop is missing.
# Write it:
#
# 1. **Rounds.** `for j0 in range(0, samples, lanes):` (`samples = L * P`). In round `j0`, lane `g` computes
#    sample `j = j0 + g`, if `live and j < samples`:
#    `w00, w01, w10, w11, row = sample_corners(shapes, starts, loc, attn, n, q, m, j // P, j % P)`: the four
#    corner weights (attention weight folded in, zero for a corner off the map) and the row of its top-left
#    pixel. Other lanes keep zeros (set them before the `if`: `float32(0.0)` and `int32(0)`).
# 2. **Shuffles.** `for t in range(min(lanes, samples - j0)):` every lane fetches sample `j0 + t` from the lane
#    that computed it, `src = leader + t`: five calls `cuda.shfl_sync(FULL_MASK, w00, src)`, ... and the row.
#    Every lane of the warp must reach every shuffle: no `if` around them.
# 3. **Corners.** Then, if `vec < nvec` (this lane's vector is inside the row), add each corner whose weight is
#    not zero with `add_corner(acc, words, n, row_of_value, vec * WORDS, weight, WORDS)`. The value row of pixel
#    `top`, head `m` is `top * M + m`; the right neighbour is pixel `top + 1`, the one below `top + W` with
#    `W = shapes[(j0 + t) // P, 1]` (the width of that sample's level).
#
# The grader runs your kernel on fresh random problems in which the samples' rounds repeat and the last one is
# partial, and groups of the last warp lie past the end. Without a GPU it runs in Numba's simulator, where the
# workbook emulates `shfl_sync` warp by warp (a launch that never finishes is stopped after a time limit and
# reported), and then compiles your kernel for a GPU.
#
# The lesson: [02 · warp-cooperative](../../notebooks/msda/02_warp_cooperative.ipynb).

# %%
import cudabook
print(cudabook.where())
import math
import numpy as np
from numba import cuda, float32, int32
from cudabook.bits import bf16_to_f32, f32_to_bf16
from cudabook.msda import grade
from cudabook.msda.s02_warp_cooperative import (FULL_MASK, WARP, WORDS, add_corner, lane_group, sample_corners,
                                               store_vector)

# %%
#! kernel msda.s02_warp_cooperative msda_warp

# %%
grade("02_warp_cooperative", msda_warp)

# %% [markdown]
# Passed? Grade it at the other vector widths too: `grade("02_warp_cooperative", msda_warp, vec_bytes=4)`
# (and 8). With 4-byte vectors a row at D = 40 is 20 vectors, the group is 32 lanes, and 12 of
# them sit past the row. Then read what the next rung gains, and loses, by staging each sample's four corners
# in shared memory: [03 · shared tiles](../../notebooks/msda/03_smem_tiles.ipynb).
