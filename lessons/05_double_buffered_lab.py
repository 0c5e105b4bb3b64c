# %% [markdown]
# # Lab 05 · Loads in flight while you compute
#
# Everything but the overlap is written. Inside the loop, for the current item (in buffer `base`) and the next
# one (to go into buffer `nbase`), write:
#
# 1. `load_batch(...)`: issue the next window's wide loads into registers (the 32 values it returns). Do not
#    touch them yet: a load only stalls the thread when its register is first *read*.
# 2. Load the next window's times and targets into registers too (one per thread).
# 3. Interpolate the current item from its buffer (`interpolate_window`), or take the fallback (`per_target`).
# 4. Only now `store_batch(...)` the registers into the other buffer: the first use of the loaded values.
#
# Read `resample_double` in `cudabook/resample/s05_double_buffered.py` for the argument lists.

# %%
import cudabook
print(cudabook.where())
import numpy as np
from numba import cuda, float32, int32, uint32
from cudabook.resample.s05_double_buffered import *   # stage 04's device functions, reused here
from cudabook.labs import grade

# %%
#! kernel resample/s05_double_buffered resample_double

# %%
grade("05_double_buffered", globals().get("resample_double"))
