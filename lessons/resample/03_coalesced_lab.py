# %% [markdown]
# # Lab 03 · Sixteen bytes per lane
#
# Write the body of `resample_vec16`. `feats` and `out` arrive viewed as `uint32` (two bf16 channels per
# word; the launch does the view), so a row has `D / 2` words, and here `D * 2` is a multiple of 16.
#
# 1. Search and weight exactly as in stage 02: `warp_find_interval`, `warp_weight`.
# 2. Lane `lane` handles words `i = 4 * lane, 4 * lane + 4 * 32, ...` while `i < feats.shape[2]`: 4 words = 16
#    bytes = 8 channels per access.
# 3. `load_u32x4(feats, b, row, i)` returns the 4 words of one 16-byte load; blend each word of row `lo` with
#    the same word of row `lo + 1` using `lerp_pair(a, c, w)`; store the 4 results with
#    `store_u32x4(out, b, t, i, r0, r1, r2, r3)`.

# %%
import cudabook
print(cudabook.where())
import numpy as np
from numba import cuda
from cudabook.resample.s02_warp_shuffles import WARP, warp_find_interval, warp_target, warp_weight
from cudabook.resample.s03_coalesced import lerp_pair, load_u32x4, store_u32x4
from cudabook.resample import grade

# %%
#! kernel resample/s03_coalesced resample_vec16

# %%
grade("03_coalesced", globals().get("resample_vec16"))

# %% [markdown]
# The lesson this lab belongs to: [03 · coalesced](../../notebooks/resample/03_coalesced.ipynb).
