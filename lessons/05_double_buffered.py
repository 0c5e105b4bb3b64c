# %% [markdown]
# # 05 · Double buffering
#
# In stage 04 a block does one thing at a time: load a window, wait at a barrier, compute, repeat. While it
# computes, none of its own loads are in flight; other blocks on the SM fill that gap only as far as shared
# memory lets enough of them live there.
#
# **Double buffering**: two windows in shared memory. While the block interpolates from buffer A, it is
# already loading the next window into buffer B; then they swap.
#
# ```
#   stage 04:  [load 0][wait][compute 0][load 1][wait][compute 1] ...
#   stage 05:  [load 0][wait][compute 0 | loads of 1 in flight][store 1][compute 1 | loads of 2 in flight] ...
# ```
#
# ## What synchronous loads can, and cannot, overlap
#
# A Numba load is *synchronous* in one precise sense: the thread stalls at the first instruction that reads
# the loaded register, not at the load itself. So the trick is to issue next window's loads into
# **registers**, compute the current window, and only then store those registers to the other buffer. The
# loads fly during the compute. The costs are real:
#
# - the in-flight data sits in registers (here 16 x 8 bytes a thread), so fewer blocks fit on an SM;
# - the store to shared memory still passes through those registers and needs its own barrier.
#
# The hardware can do better: `cp.async` (stage 06) copies global to shared memory without registers and
# without stalling the thread. That is why this rung exists: to feel the limit that stage 06 removes.

# %%
import cudabook
print(cudabook.where())

import numpy as np
from numba import cuda, float32, int32, uint32
from cudabook import resample, check, labs, lesson
from cudabook.resample import s05_double_buffered as s05
from cudabook.resample.s05_double_buffered import *   # stage 04's device functions, which this kernel reuses

# %% [markdown]
# ## The kernel

# %%
#! kernel resample/s05_double_buffered resample_double

# %% [markdown]
# ## Is it right?

# %%
size = labs.demo_size()
print("sorted   ", check.check_launch(s05.launch, **size))
print("unsorted ", check.check_launch(s05.launch, **size, sorted_targets=False))
print("tiny grid", check.check_launch(s05.launch, 2, 40, 40, 8, blocks=1))

# %% [markdown]
# ## How fast? Is it faster than 04?
#
# It should be, *if* the block's own idle time mattered. If enough other blocks already fill each SM's gaps,
# double buffering buys little and its extra registers can even cost. The measurement decides.
#
# **An honest rung.** In the H200 record in `results/`, stage 05 is *slower* than stage 04. The reason is
# the registers: holding a batch of eight 16-byte loads across the interpolation takes about 200 registers a
# thread uncapped; capped at 128 (the launch does that), 4 blocks fit on an SM, where stage 04's leaner kernel
# fits more. Stage 04 already overlaps one block's loads with another block's compute: the SM's warp
# scheduler does for free what stage 05 does by hand, and does it without spending registers. Overlap inside
# a block only pays when it is nearly free, which is what `cp.async` (stage 06) gives.

# %%
lesson.ladder_so_far("05_double_buffered")

# %% [markdown]
# ## Experiment: blocks per SM
#
# Double buffering and more blocks per SM are two ways to keep loads in flight. Compare them: sweep
# `blocks_per_sm` here, and the same sweep in lesson 04.

# %%
lesson.sweep("05_double_buffered", "blocks_per_sm", [1, 2, 4, 8])

# %% [markdown]
# Next: [06 · cp.async](06_cp_async.ipynb), where copies need no registers and no stalls.
