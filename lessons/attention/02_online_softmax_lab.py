# %% [markdown]
# # Attention lab 02 · The online-softmax update
#
# In this kernel one warp owns one query row `(b, h, i)`. Lane `lane` owns the channels
# `lane, lane + 32, ...` (`PER_LANE` of them: 2 at d = 64, 4 at d = 128): it holds them of `q` in `qr` (float32)
# and of the running output in `o` (zeros). The running max `m` starts at `-inf` and the running sum `l` at 0.
# Everything around the loop over the keys is written; the loop is missing, and so is the store. Write them:
#
# 1. **Which keys.** All `Nk` keys, or, when `causal`, keys `0 .. i` only (query `i` sees itself).
# 2. **The score.** For key `j`: each lane adds up `qr[c] * k_j` over its channels (`bf16_to_f32(k[b, h, j,
#    lane + WARP * c])` widens a bf16 value), `warp_sum(part)` adds the 32 lanes' parts (every lane gets the
#    sum), and the score is that times `scale` (the kernel's argument, `1 / sqrt(d)`).
# 3. **The update.** `m_new = max(m, s)`; `alpha = math.exp(m - m_new)` rescales what was summed under the old
#    max; `p = math.exp(s - m_new)`; then `l = l * alpha + p`, each of the lane's channels
#    `o[c] = o[c] * alpha + p * v_j[c]`, and `m = m_new`.
# 4. **The output.** After the last key, each lane stores `f32_to_bf16(o[c] / l)` to
#    `out[b, h, i, lane + WARP * c]`.
#
# Every lane of the warp must reach every shuffle: the loop bound is the same for all 32 lanes (it depends only
# on the row), so no lane may skip a key.
#
# The grader runs your kernel on fresh random problems: causal and not, d = 64 and 128, more queries than keys
# and fewer, a single key, and scores large enough to overflow `exp` unless the max is subtracted. Without a
# GPU it runs in Numba's simulator, where the workbook emulates warp shuffles (every key costs five of them, so
# a grade takes a while: the guide's table has the solution notebook's time), and then compiles your kernel for a GPU.
#
# The lesson: [02 · online softmax](../../notebooks/attention/02_online_softmax.ipynb).

# %%
import cudabook
print(cudabook.where())
import math
import numpy as np
from numba import cuda, float32
from cudabook.bits import bf16_to_f32, f32_to_bf16
from cudabook.attention import grade
from cudabook.attention.s02_online_softmax import FULL_MASK, PER_LANE, WARP, warp_sum

# %%
#! kernel attention.s02_online_softmax attention_online

# %%
grade("02_online_softmax", attention_online)

# %% [markdown]
# Passed? Try the mistakes the grader knows, one at a time, and read what it says: scale by `1 / d`, forget
# `* alpha` on `o`, leave out the division by `l`, let query `i` see keys `j < i` only. Then read how rung 03
# shares each key among many rows and rescales once per tile of keys:
# [03 · tiled](../../notebooks/attention/03_tiled.ipynb).
