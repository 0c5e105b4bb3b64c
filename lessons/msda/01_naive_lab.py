# %% [markdown]
# # Deformable attention lab 01 · The bilinear corner loop
#
# The kernel below has one thread per output element `(n, q, m, c)`: image, query, head, channel. It walks its
# query's levels `l` and points `p`, but the body of the point loop is missing. For each sample, write:
#
# 1. **The pixel position** (grid_sample with `align_corners=False`): `x = loc[n, q, m, l, p, 0] * W - 0.5`,
#    `y = loc[n, q, m, l, p, 1] * H - 0.5`, in float32 (`float32(W)`, `float32(0.5)`). `[..., 0]` is x, along
#    W (the column); `[..., 1]` is y, along H (the row).
# 2. **Skip** the sample unless `-1 < x < W` and `-1 < y < H`: beyond that (half a pixel or more past the
#    map's edge) every corner is off the map or weighs zero (at `x = -1` exactly, column 0 has `fx = 0`), and far
#    outside `floor(x)` would overflow an integer.
# 3. **The corners**: `x0 = int32(math.floor(x))`, `y0` likewise, `fx = x - x0`, `fy = y - y0`. The top-left
#    corner is row `top = start + y0 * W + x0` of `value`; its right neighbour is `top + 1`, the pixel below
#    `top + W`.
# 4. **Add each corner that is on the map** (`0 <= column < W`, `0 <= row < H`), with its bilinear weight:
#    `(1 - fy)(1 - fx)` for `(y0, x0)`, `(1 - fy) fx` for `(y0, x0 + 1)`, `fy (1 - fx)` for `(y0 + 1, x0)`,
#    `fy fx` for `(y0 + 1, x0 + 1)`. A corner off the map reads zero: leave it out, don't clamp it onto the map.
#    Read a value as `bf16_to_f32(value[n, row, m, c])`.
# 5. **Weigh and sum**: `acc += attn[n, q, m, l, p] * (the blend)`.
#
# The store after the loops (one rounding to bf16) is written. The grader runs your kernel on fresh random
# problems (several levels, a 1 x 1 level, D from 8 to 40 in the simulator and to 128 on a GPU, up to a quarter
# of the coordinates on edges: exact map edges, exact pixel centres, one pixel off, far outside) and, when the output is wrong, says which usual
# mistake explains it: `align_corners=True` arithmetic, clamping at the borders, x and y swapped, the weights
# left out, the level's start ignored. Without a GPU it runs in Numba's simulator, which checks every index,
# and then compiles your kernel for a GPU too.
#
# The lesson: [01 · naive](../../notebooks/msda/01_naive.ipynb).

# %%
import cudabook
print(cudabook.where())
import math
import numpy as np
from numba import cuda, float32, int32
from cudabook.bits import bf16_to_f32, f32_to_bf16
from cudabook.msda import grade

# %%
#! kernel msda.s01_naive msda_naive

# %%
grade("01_naive", msda_naive)

# %% [markdown]
# Passed? Break it on purpose and read what the grader says: replace `- float32(0.5)` by nothing and
# `float32(W)` by `float32(W - 1)` (the `align_corners=True` convention), or clamp the corners onto the map
# instead of testing them. Then go on to [02 · warp-cooperative](../../notebooks/msda/02_warp_cooperative.ipynb),
# where the D threads of a head stop repeating each other's work.
