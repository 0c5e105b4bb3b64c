# %% [markdown]
# # Lab 05 · Eight loads in flight
#
# The prepass (`find_intervals`) is written and runs before your kernel. In `resample_in_flight` everything is
# written up to the point where a lane knows, for its warp's four targets, where their rows start (`r0` .. `r3`,
# flat word offsets, already including this lane's column `j`) and their weights (`w0` .. `w3`). Write:
#
# 1. **Eight loads, first.** `load_element(feats, feats64, offset, ok, vec)` returns four words; load the lower
#    row (`rq`) and the upper row (`rq + Dc`) of each target `q` = 0 .. 3, all eight, before you use any
#    (`ok`, given: this lane's column `j` lies inside the row, `j < Dc`). A load does not stall the warp when it
#    is issued, only when an instruction first *reads* its register: issue them all, then read.
# 2. **Four stores.** Target `i + q` goes to flat word offset `o + q * Dc`: `store_element(out, offset, ok,
#    vec, word0, word1, word2, word3)`, each word a `lerp2(lower_word, upper_word, weight)` (target `i + q`'s
#    weight is `wq`, the same for its four words). Guard the targets past the end:
#    target `i + q` exists only if `i + q < n`, so its store's `ok` is `ok and i + q < n` (target `i` always
#    exists: plain `ok`).
#
# Read `resample_in_flight` in `cudabook/resample/s05_double_buffered.py` if you are stuck.

# %%
import cudabook
print(cudabook.where())
import numpy as np
from numba import cuda, float32, int32, uint32
from cudabook.resample.s05_double_buffered import *   # the device functions the kernel uses
from cudabook.resample import grade

# %%
#! kernel resample/s05_double_buffered resample_in_flight

# %%
grade("05_double_buffered", globals().get("resample_in_flight"))

# %% [markdown]
# The lesson this lab belongs to: [05 · double buffered](../../notebooks/resample/05_double_buffered.ipynb).
