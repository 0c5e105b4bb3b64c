# %% [markdown]
# # Attention lab 03 · The tile loop
#
# A block of `WARPS` warps serves `BQ = WARPS * ROWS` query rows of one head, starting at row `i0`; warp `w`
# serves rows `w * ROWS .. w * ROWS + ROWS - 1` of the block. The block's query rows are already in shared
# memory, widened to float32 (`Qs[row, c]`, zeros past `Nq`), and each lane has, for each of its rows `r`, a
# running max `m[r] = -inf`, a running sum `l[r] = 0` and its channels `lane, lane + 32, ...` of the running
# output in `o[r * PER_LANE + c]` (zeros). `end` is where the keys stop: `Nk`, or for a causal problem the
# block's last row + 1 (tiles past it are skipped). Write the loop over the tiles of `BK = 32` keys,
# `for j0 in range(0, end, BK):`
#
# 1. **Load the tiles.** All `THREADS` threads of the block copy the tile's `BK x D` elements of K and of V into
#    `Ks[t, c]` and `Vs[t, c]` (float32, `bf16_to_f32`): thread `tid` copies elements `tid, tid + THREADS, ...`
#    of the tile, element `e` being key `t = e // D`, channel `c = e % D`, so that neighbouring threads read
#    neighbouring channels. A key past `Nk` gets zeros. Then `cuda.syncthreads()`: nobody reads the tiles
#    before everyone has written them.
# 2. **Scores.** Lane `lane` owns key `j = j0 + lane`. For each of the warp's rows `r` (row `w * ROWS + r` of the
#    block, query `i0 + w * ROWS + r`): `s[r]` = the dot product of `Qs[w * ROWS + r, :]` and `Ks[lane, :]`. A
#    loop over `c` outside and over `r` inside reads each K value once for all rows.
# 3. **One rescale per tile.** For each row `r`: the score `x = s[r] * scale`, or `-inf` if the row may not see
#    the key (`j >= Nk`, or `j > i` when causal); `m_new = max(m[r], warp_max(x))`;
#    `alpha[r] = math.exp(m[r] - m_new)`; `p = math.exp(x - m_new)`; `l[r] = l[r] * alpha[r] + warp_sum(p)`;
#    `Ps[w * ROWS + r, lane] = p`; `m[r] = m_new`. Then `cuda.syncwarp(FULL_MASK)`: every lane's `p` is in `Ps`.
# 4. **o = o · alpha + P V.** Multiply each of the lane's accumulators of row `r` by `alpha[r]`, then for each
#    key `t` of the tile and each of the lane's channels `lane + WARP * c`, add `Ps[w * ROWS + r, t]` times
#    `Vs[t, lane + WARP * c]` to row `r`'s accumulator.
# 5. **A barrier** (`cuda.syncthreads()`) before the next tile's loads overwrite Ks and Vs.
#
# The store after the loop is written. The grader runs your kernel on fresh random problems: causal ones where
# the diagonal cuts through tiles and whole tiles are skipped, key counts that leave the last tile ragged, d = 64
# and 128, a single key, and scores that overflow `exp` without the max. Without a GPU it runs in Numba's
# simulator, where every shared-memory access is checked against the barriers: a missing barrier stops the
# kernel at the first unordered access, with a `SharedRace` that names the array, the element and both
# threads. Then it compiles your kernel for a GPU.
#
# Graded as handed out, the loop is missing: every row's `l` stays 0, the store divides 0 by 0, and the grader
# reports every output as NaN computed by the kernel.
#
# The lesson: [03 · tiled](../../notebooks/attention/03_tiled.ipynb).

# %%
import cudabook
print(cudabook.where())
import math
import numpy as np
from numba import cuda, float32
from cudabook.bits import bf16_to_f32, f32_to_bf16
from cudabook.attention import grade
from cudabook.attention.s02_online_softmax import FULL_MASK, WARP, warp_sum
from cudabook.attention.s03_tiled import (BK, BQ, D, KSTRIDE, OACC, PER_LANE, ROWS, THREADS, WARPS,
                                          warp_max)

# %%
#! kernel attention.s03_tiled attention_tiled

# %%
grade("03_tiled", attention_tiled)

# %% [markdown]
# Passed? Grade it with other block shapes too, where the causal skip and the diagonal fall elsewhere:
# `grade("03_tiled", attention_tiled, warps=3, rows_per_warp=3)`. Then take out one of the two
# `cuda.syncthreads()` and grade again: the simulator stops at the race and names both threads and the
# element (on a GPU, where the race may not show, the grader's second run in the simulator catches it). The
# next rungs do the same tile loop on tensor cores, in CUDA C++.
