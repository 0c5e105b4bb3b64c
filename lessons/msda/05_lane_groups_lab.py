# %% [markdown]
# # Deformable attention lab 05 · A level's samples, in unrolled rounds
#
# In stage 05 a group of G lanes serves one `(image n, query q, head m)`, and lane `g` owns channels `8g .. 8g+7` of
# the head: one 16-byte vector (`Vec`, a `uint4` of four words, two bf16 channels each). Inside the loop over levels
# `l`, the lines before your region have loaded the level's `H`, `W` and `start` (its first row of `value`). `xy[l *
# PV + p]` is the item's sample `p` of this level (a `float2`, its normalized location: `x` along W, `y` along H) and
# `aw[l * PV + p]` its attention weight; `base + r * pitch` is the address of this lane's vector of pixel `r`, row `r`
# of `value[n]` (in bytes: `base` is a `const char*`, `pitch` the bytes from one pixel to the next). `acc` holds the
# lane's float32 sums, `load_corner(base + row * pitch, g)` loads the lane's part of a pixel's row (a `Corner`: one
# 16-byte vector, or `VPL` of them with `vectors=2` or 4), and `add_corner(acc, c, w)` adds a corner `c` to the sums
# times `w`. After your region the next level begins, and at the end the sums are rounded and stored.
#
# Write the level's samples in rounds of 2G: `#pragma unroll` then
# `for (int r = 0; r < (PV + 2 * G - 1) / (2 * G); ++r)`. In round `r`, lane `g` works out two samples alone and
# hands each to its group. Steps 2 to 5 are one sample's work: write them once (the kernel uses a lambda,
# `work_out(s, a, packed, w)`) and call it for each of the two.
#
# 1. **this lane's two samples**: `mine = 2 * (r * G + g)` and `mine + 1`. At even `PV` both are there or neither:
#    load both locations in one 16-byte load (`float4` at `xy + l * PV + mine`) and both weights in one 8-byte load
#    (`float2` at `aw + l * PV + mine`); a lane with none loads the level's last two locations in their place (that
#    load needs no predicate) and takes weights 0 without loading them (they are never handed on). At odd `PV` load
#    the two locations apart (each index clamped to `PV - 1`) and the two weights apart, a missing sample's weight 0;
# 2. **the position**, as grid_sample with `align_corners=False`: `x = s.x * W - 0.5f`, `y = s.y * H - 0.5f`;
# 3. **the corner and the fractions**: `floorf(x)`, `floorf(y)`, `fx = x - floorf(x)`, likewise `fy`; the sample
#    touches the map (`on`) when `x > -1`, `y > -1`, `x < W`, `y < H`. When it does not, use `x0 = y0 = 0`:
#    otherwise the clamps of step 4 cross (`x0 = -2` gives `xl = 0` but `xr = -1`), the packed steps turn
#    negative and a corner's address falls before the image, and `(int)floorf(x)` of a location far outside
#    overflows;
# 4. **which corners are on the map**: `left` (`x0 >= 0`), `right` (`x0 + 1 < W`), `top` (`y0 >= 0`),
#    `bottom` (`y0 + 1 < H`), each only if `on`; clamp the columns and rows onto the map (`xl = max(x0, 0)`,
#    `xr = min(x0 + 1, W - 1)`, likewise `yt`, `yb`), so that every corner's address is a pixel that exists;
# 5. **one int and four weights**: `((start + yt * W + xl) << 2) | ((yb - yt) << 1) | (xr - xl)` packs the
#    top-left corner's row with the steps down (bit 1) and right (bit 0); the weights are `a` times
#    `(1 - fy)(1 - fx)`, `(1 - fy) fx`, `fy (1 - fx)`, `fy fx` for top-left, top-right, bottom-left and
#    bottom-right, and `0.f` for a corner off the map;
# 6. **hand on, load, blend**: for each `j < 2 * G` with `r * 2 * G + j < PV` (a test on compile-time constants,
#    once unrolled), all lanes take the five values of sample `j`, which lane `j / 2` of their group worked out
#    (its first sample when `j` is even, its second when odd): `__shfl_sync(FULL, v, j >> 1, G)` with
#    `FULL = 0xFFFFFFFFu`; unpack the row (`packed >> 2`), the step right (`packed & 1`) and the step down
#    (`packed & 2 ? W : 0`); load the four corners and add each with its weight. No branch separates one
#    sample's loads from the next: a corner off the map is loaded from its clamped pixel, with weight 0.
#
# Every lane of the warp must reach every shuffle: the kernel keeps the lanes past the last item alive (they
# work on the last item and store nothing), so do not return early in your region.
#
# The stage compiles with `BRANCHLESS=1` by default; its own file keeps, after `#else`, the path with branches, in the
# way the rung worked before the shuffles (`branchless=False`: every lane works out every sample itself, no shuffles,
# the level's locations and weights read with `load_floats` into `lxy` and `law`, and a sample off the map, and each
# corner off it, skipped by an `if`). Write it too if you like, inside `#if BRANCHLESS ... #else ... #endif`: the
# grader runs every case with both settings, so both halves are graded (a region without `#if` is the same code both
# times). It compiles your code into `kernels/lane_groups.cu` for the shapes of each case. Without a GPU of compute
# capability 8.0 or newer it then runs it **on the CPU, in an emulator** (`cudabook.emulate`): every CUDA thread is a
# small coroutine, with the grader's fresh random cases (D = 8, 24 and 40, several levels, 40 samples an item in one,
# up to a quarter of the coordinates on edges). This kernel has no asynchronous copies and no shared memory: each case
# runs once. It cannot time anything: speed needs the GPU.
#
# The lesson: [05 · lane groups](../../notebooks/msda/05_lane_groups.ipynb).

# %%
import cudabook
print(cudabook.where())
from cudabook import lesson
from cudabook.msda import grade
from cudabook.msda import s05_lane_groups as s05

# %% [markdown]
# The kernel around your region, and what follows it:

# %%
lesson.show_region(s05.source(), start='extern "C" __global__', end=">>> lab")
print("            ... your lines ...")
lesson.show_region(s05.source(), start="<<< lab", end="pack_bf16x2(acc[8 * i + 6]")

# %%
#! region msda/kernels/lane_groups.cu SAMPLES

# %%
grade("05_lane_groups", SAMPLES)

# %% [markdown]
# Passed? Make the mistakes that deformable attention invites, one at a time, and read what the grader says:
#
# - **`align_corners=True` positions**: `x = s.x * (W - 1)`, `y = s.y * (H - 1)` (no half-pixel shift). The
#   grader names it.
# - **x and y swapped**: `s.y` along W and `s.x` along H. The grader names this one too.
# - **shuffle from lane `g`, not `j / 2`**: every lane takes its own sample's row in place of sample j's.
#   Outputs go wrong wherever a group has more than one lane, and the grader lists the first few.
# - **the two samples swapped**: sample `j` takes lane `j / 2`'s other sample's row.
# - **the second sample worked out from the first one's location.**
# - **shuffles of width 32**: `__shfl_sync(FULL, v, j >> 1, 32)` takes lane `j / 2` of the warp, the first
#   group's sample, for every group of the warp.
# - **the steps left out of the packed int**: all four corners then read the top-left pixel.
# - **dx and dy read from each other's bits**: a step right taken as a step down, at the bottom row, reads a row
#   past the level (the grader says FAIL, or the emulator stops the kernel where a row runs past the array; a GPU
#   may read another level's pixels, or fault).
#
# With `branchless=False` (the `#else` half), try `(int)x` for the corner in place of `floorf` and `x0 + 1 <= W`
# for the right neighbour: the grader names both.
#
# Then back to the lesson's last sections: what the branch-free loads buy on a GPU, and how this kernel
# compares with the reference gather.
