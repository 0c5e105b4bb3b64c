# %% [markdown]
# # 04 · Shared-memory windows and a persistent grid
#
# In stage 03 every warp fetches its own two source rows. With sorted targets and S = T, neighbouring
# targets share source rows, so most rows are requested about twice (the count below), and every warp first
# waits on a search. Both are waste we can see:
#
# ```
#   targets (sorted):  t0 t1 t2 t3 t4 t5 ... t31        one block = a run of 32 targets
#   source rows:       [ r17 r18 r19 ... r47 r48 ]       = the window those targets need
# ```
#
# A **block** takes a run of consecutive targets. Their intervals lie in one short stretch of source rows,
# the **window**: from the interval of the first target to the interval of the last. Two searches find it
# (not 32). The block loads the window's rows, and their times, into **shared memory** once, with wide
# coalesced loads, then interpolates all its targets from there. Each source row is now *requested* once per
# window, instead of once for every target that needs it. (That is fewer requests, not fewer DRAM bytes: in
# stage 03 the second request for a row mostly hits the L2 cache already. More on this below and in 05.)
#
# Shared memory is the block's scratchpad: on-chip, tens of cycles away instead of DRAM's hundreds, and
# visible to every thread of the block. The price is a `cuda.syncthreads()` between writing it and reading it.
#
# The grid is **persistent**: a fixed number of blocks (SMs x `blocks_per_sm`) loops over all the work items
# (the design of the optimisation log this track grew from), so block start-up is paid once and shared memory is reused window after window.
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
# ## Why is 04 faster than 03?
#
# Not because DRAM moves fewer bytes. A row that two neighbouring targets need is read by two warps of stage
# 03 shortly after one another, and the second read mostly hits the L2 cache: DRAM sees it about once in both
# stages, and the bytes that must cross DRAM (the minimum of lesson 00) are the same. What the window removes
# is work on the way there:
#
# - **fewer requests through L1 and L2**: the row fetches counted above, each a warp-wide load that occupies
#   the load/store units, L1 and the L2 slices whether it hits or not, shrink by the printed factor, so the
#   same request capacity moves more new bytes;
# - **fewer searches**: two per block of 32 targets instead of one per target, so far fewer chains of
#   dependent loads to wait on before any feature moves.
#
# The records, stage 03 against 04, at the benchmark size:

# %%
from cudabook import results

for record in results.load_all():
    for name, w in record["workloads"].items():
        a, b = (w["stages"].get(k, {}).get("median_us") for k in ("03_coalesced", "04_smem_windows"))
        if name.startswith("resample ") and a and b:
            print(f"{record['gpu']} · {name}: 03 {a:.1f} µs -> 04 {b:.1f} µs ({a / b:.2f}x)")

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

# %% [markdown]
# Write this stage's kernel yourself: [lab 04](../labs/04_smem_windows.ipynb) (the completed version:
# [solution](../solutions/04_smem_windows_SOLUTION.ipynb)).
