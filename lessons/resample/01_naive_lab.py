# %% [markdown]
# # Lab 01 · Naive resampling kernel
#
# Write the body of `resample_naive`: **one thread per target**.
#
# 1. Work out which target this thread owns: `t` from the block and thread index along x, `b = blockIdx.y`.
#    Threads past the last target (`t >= targets.shape[1]`) must do nothing. The target's time is
#    `x = targets[b, t]`.
# 2. Find the interval: `lo = find_interval(times, b, x)` and the weight `w = weight(times, b, lo, x)`
#    (both imported in the next cell from `cudabook/resample/s01_naive.py`; read them there).
# 3. For every channel `d` (`d < feats.shape[2]`, which is D): widen the two bf16 neighbours with `bf16_to_f32`, blend with `lerp(a, c, w)`,
#    and store `f32_to_bf16(...)` to `out[b, t, d]`.
#
# Run the kernel cell, then the check cell. The grader launches your kernel on fresh random inputs (sorted
# and unsorted targets, `S = 2`, `D = 1`, odd `D`) and tells you what is wrong.

# %%
import cudabook
print(cudabook.where())
import numpy as np
from numba import cuda
from cudabook.bits import bf16_to_f32, f32_to_bf16, lerp
from cudabook.resample.s01_naive import find_interval, weight
from cudabook.resample import grade

# %%
#! kernel resample/s01_naive resample_naive

# %%
grade("01_naive", globals().get("resample_naive"))

# %% [markdown]
# The lesson this lab belongs to: [01 · naive](../../notebooks/resample/01_naive.ipynb).
