# %% [markdown]
# # 04 · Shared-memory windows and a persistent grid
#
# In stage 03 every warp fetches its own two source rows. With sorted targets and S = T, neighbouring
# targets share source rows, so most rows are fetched two or three times, and every warp first waits on a
# search. Both are waste we can see:
#
# ```
#   targets (sorted):  t0 t1 t2 t3 t4 t5 ... t31        one block = a run of 32 targets
#   source rows:       [ r17 r18 r19 ... r47 r48 ]       = the window those targets need
# ```
#
# A **block** takes a run of consecutive targets. Their intervals lie in one short stretch of source rows,
# the **window**: from the interval of the first target to the interval of the last. Two searches find it
# (not 32). The block loads the window's rows, and their times, into **shared memory** once, with wide
# coalesced loads, then interpolates all its targets from there. Each source row now comes from DRAM once.
#
# Shared memory is the block's scratchpad: on-chip, tens of cycles away instead of DRAM's hundreds, and
# visible to every thread of the block. The price is a `cuda.syncthreads()` between writing it and reading it.
#
# The grid is **persistent**: a fixed number of blocks (SMs x `blocks_per_sm`) loops over all the work items
# (seed 000's design), so block start-up is paid once and shared memory is reused window after window.
#
# And it is **correct for every input**: when targets are unsorted, or a run spans more rows than the window
# holds, that work item falls back to stage 02's per-target path, reading global memory directly.

# %%
import cudabook
print(cudabook.where())

import numpy as np
import matplotlib.pyplot as plt
from cudabook import resample, check, labs, lesson
from cudabook.resample import s04_smem_windows as s04

# %% [markdown]
# ## How much traffic does a window save?
#
# Count, for one batch row, how many source-row fetches stage 03 makes (two per target) against the rows the
# windows need (each window's rows once), for runs of 32 targets:

# %%
st, sf, tt = resample.random_problem(1, 4096, 4096, 1, rng=1)
lo = np.clip(np.searchsorted(st[0], tt[0], side="right") - 1, 0, 4094)
per_target_rows = 2 * len(lo)
runs = lo.reshape(-1, 32)
window_rows = int(np.sum(runs[:, -1] + 2 - runs[:, 0]))
print(f"stage 03 fetches {per_target_rows} source rows; windows of 32 targets need {window_rows} "
      f"({per_target_rows / window_rows:.1f}x fewer). Widest window: {int(np.max(runs[:, -1] + 2 - runs[:, 0]))} rows")
fig, ax = plt.subplots(figsize=(7, 2.4))
ax.hist(runs[:, -1] + 2 - runs[:, 0], bins=30)
ax.set_xlabel("rows in a window of 32 sorted targets (S = T = 4096)"); ax.set_ylabel("windows"); plt.show()

# %% [markdown]
# ## The kernel
#
# The work item loop, and inside it the part you write in the lab: fill the window, sync, locate each target
# in the window (a search in shared memory), sync, interpolate.

# %%
from numba import cuda, float32, int32, uint32
from cudabook.resample.s04_smem_windows import *   # the device functions the kernel calls


#! kernel resample/s04_smem_windows resample_windows

# %% [markdown]
# Filling the window is where the bandwidth goes. Each thread issues a batch of wide loads (16 bytes each)
# into registers before it stores any of them to shared memory, so 8 loads per thread are in flight at once:

# %%
#! kernel resample/s04_smem_windows fill_window

# %% [markdown]
# ## Is it right? Sorted, unsorted, windows too wide

# %%
size = labs.demo_size()
print("sorted   ", check.check_launch(s04.launch, **size))
print("unsorted ", check.check_launch(s04.launch, **size, sorted_targets=False))
print("too wide ", check.check_launch(s04.launch, 1, 200, 12, 6, window_rows=4))

# %% [markdown]
# ## How fast?

# %%
lesson.ladder_so_far("04_smem_windows")

# %% [markdown]
# ## Experiment: targets per block, and blocks per SM
#
# Larger runs share more rows per window but need bigger windows (shared memory), so fewer blocks fit on an
# SM. Prediction to test: performance follows the bytes in flight per SM (blocks per SM x loads per thread x
# threads), until shared memory runs out.

# %%
lesson.sweep("04_smem_windows", "targets_per_block", [16, 32, 64])
lesson.sweep("04_smem_windows", "blocks_per_sm", [1, 2, 4, 8])

# %% [markdown]
# While a block waits at `syncthreads` for its window, it has no loads in flight of its own. Next,
# [05 · double buffering](05_double_buffered.ipynb): keep the next loads in flight while computing.
