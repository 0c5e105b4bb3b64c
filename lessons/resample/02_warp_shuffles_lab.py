# %% [markdown]
# # Lab 02 · A warp per target
#
# Write the body of `resample_warp`. The target `(b, t)` of this warp, its time `x` and the `lane` (0..31) are
# given.
#
# 1. Find the interval with the whole warp: `lo = warp_find_interval(times, b, x, lane)` (the 32-way ballot
#    search, imported in the next cell; read it in `cudabook/resample/s02_warp_shuffles.py`) and the weight `w = warp_weight(times, b, lo, x, lane)` (lane 0 computes it, a
#    shuffle broadcasts it).
# 2. Let the lanes stride the channels: lane `i` handles `d = i, i + 32, i + 64, ...` while `d < feats.shape[2]` (D).
# 3. For each of its channels, blend the two bf16 neighbours as in lab 01 (`bf16_to_f32`, `lerp`, `f32_to_bf16`)
#    and store the result to `out[b, t, d]`.
#
# Every lane must reach every shuffle and ballot: do not return early from inside your part.

# %%
import cudabook
print(cudabook.where())
import numpy as np
from numba import cuda
from cudabook.bits import bf16_to_f32, f32_to_bf16, lerp
from cudabook.resample.s02_warp_shuffles import WARP, FULL_MASK, warp_and_lane, warp_find_interval, warp_weight
from cudabook.resample import grade

# %%
#! kernel resample/s02_warp_shuffles resample_warp

# %%
grade("02_warp_shuffles", globals().get("resample_warp"))

# %% [markdown]
# The lesson this lab belongs to: [02 · warp shuffles](../../notebooks/resample/02_warp_shuffles.ipynb).
