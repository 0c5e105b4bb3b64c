# %% [markdown]
# # Lab 04 · A window in shared memory
#
# The work-item loop, the window bounds and the fallback are written. Write the part that uses the window,
# for an item whose window fits (`span <= wrows`), in this order, calling the device functions given:
#
# 1. `fill_window(...)`: every thread copies its share of the window's rows (`vec` words a load: 16 bytes when D
#    is a multiple of 8) and times into shared memory; then `load_targets(...)` copies the item's targets.
# 2. `cuda.syncthreads()`: nobody may read the window before everybody has written it.
# 3. `locate_targets(...)`: each target's interval inside the window (a search in shared memory) and weight.
# 4. `cuda.syncthreads()` again: the intervals are read by other threads than the ones that wrote them.
# 5. `interpolate_window(...)`: every warp blends its targets from shared memory and stores them (16 bytes a
#    lane when D is a multiple of 8).
#
# Read the argument lists in `cudabook/resample/s04_smem_windows.py` (or `help(fill_window)`); `load_targets` is
# `cudabook/resample/windows.py`'s `load_row`: `load_targets(targets, smf, xbase, b, t0, nt, start, nthr)`, with
# `start` this thread's `tid`. The offsets are the kernel's shared-memory layout (its first comment): the window
# at word 0, its times at `TOFF`, the targets at `XOFF`, each target's interval at `LOFF` and weight at `WOFF`.
# Forget a barrier and the grader says so every time: in Numba's simulator, cudabook's race checker
# (`cudabook/simrace.py`) checks every shared-memory access against the barriers (on a GPU, a kernel the GPU
# passes is graded there once more), and a read or write that no barrier orders stops the kernel with a
# `SharedRace` error naming both threads. On a GPU alone, a race like that
# often goes unseen.

# %%
import cudabook
print(cudabook.where())
import numpy as np
from numba import cuda, float32, int32, uint32
from cudabook.resample.s04_smem_windows import *   # the device functions named above
from cudabook.resample import grade

# %%
#! kernel resample/s04_smem_windows resample_windows

# %%
grade("04_smem_windows", globals().get("resample_windows"))

# %% [markdown]
# The lesson this lab belongs to: [04 · smem windows](../../notebooks/resample/04_smem_windows.ipynb).
