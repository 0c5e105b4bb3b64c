# %% [markdown]
# # Deformable attention lab 05 · A level's samples, branch-free
#
# In stage 05 a group of G lanes serves one `(image n, query q, head m)`, and lane `g` owns channels `8g .. 8g+7`
# of the head: one 16-byte vector (`Vec`, a `uint4` of four words, two bf16 channels each). Inside the loop over
# levels `l`, the lines before your region have loaded the level's `H`, `W` and `start` (its first row of `value`)
# and its `PV` samples: `lxy[2 * p]` and `lxy[2 * p + 1]` are sample `p`'s normalized location (`x` along W, `y`
# along H) and `law[p]` its attention weight; `base + r * pitch` is the address of this lane's vector of pixel
# `r`, row `r` of `value[n]` (in bytes: `base` is a `const char*`, `pitch` the bytes from one pixel to the next).
# `acc` holds the lane's float32 sums, `load_corner(base + row * pitch, g)` loads the lane's part of a pixel's row
# (a `Corner`: one 16-byte vector, or `VPL` of them with `vectors=2`), and `add_corner(acc, c, w)` adds a corner
# `c` to the sums times `w`. After your region the next level begins, and at the end the sums are rounded and
# stored.
#
# Write the loop over the level's points, `#pragma unroll` then `for (int p = 0; p < PV; ++p)`. For each:
#
# 1. **the position**, as grid_sample with `align_corners=False`: `x = s.x * W - 0.5f`, `y = s.y * H - 0.5f`,
#    with `s = make_float2(lxy[2 * p], lxy[2 * p + 1])` and the weight `a = law[p]`;
# 2. **the corner and the fractions**: `floorf(x)`, `floorf(y)`, `fx = x - floorf(x)`, likewise `fy`; the sample
#    touches the map (`on`) when `x > -1`, `y > -1`, `x < W`, `y < H`. When it does not, use `x0 = y0 = 0`:
#    `(int)floorf(x)` of a location far outside overflows;
# 3. **which corners are on the map**: `left` (`x0 >= 0`), `right` (`x0 + 1 < W`), `top` (`y0 >= 0`),
#    `bottom` (`y0 + 1 < H`), each only if `on`;
# 4. **four loads, no branch**: the row of pixel `(y0, x0)` is `start + y0 * W + x0` (an `int`, a pixel index
#    inside the image: `base + row * pitch` is then one 32 x 32 → 64-bit multiply-add); its right neighbour is
#    the row + 1, the pixel below the row + W. Load each corner with `load_corner(base + row * pitch, g)`, but
#    for a corner off the map load row `start` instead (a pixel that exists);
# 5. **the blend**: `add_corner` each corner with its bilinear weight times `a`: `(1 - fy)(1 - fx)`,
#    `(1 - fy) fx`, `fy (1 - fx)`, `fy fx` for `(y0, x0)`, `(y0, x0 + 1)`, `(y0 + 1, x0)`, `(y0 + 1, x0 + 1)`,
#    and weight `0.f` for a corner off the map.
#
# The stage compiles with `BRANCHLESS=1` by default; its own file keeps a version with branches after `#else`
# (`branchless=False`: a sample off the map, and each corner off it, skipped by an `if`). Write it too if you
# like, inside `#if BRANCHLESS ... #else ... #endif`: the grader runs every case with both settings, so both
# halves are graded (a region without `#if` is the same code both times). It compiles your code into
# `kernels/lane_groups.cu` for the shapes of each case. Without a GPU of compute capability 8.0 or newer it then
# runs it **on the CPU, in an emulator** (`cudabook.emulate`): every CUDA thread is a small coroutine, with the
# grader's fresh random cases (D = 8, 24 and 40, several levels, 40 samples an item in one, up to a quarter of
# the coordinates on edges). This kernel has no asynchronous copies and no shared memory: each case runs once. It
# cannot time anything: speed needs the GPU.
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
# - **clamping instead of zeros**: keep an off-map corner's weight (`a * (1.f - fy) * fx` whatever `right`
#   says), so the pixel it was redirected to counts. Every output with a sample near a border goes wrong (in
#   the grader's edge-heavy cases, nearly all of them), and the grader lists the first few.
# - **`(int)x` for the corner**, not `floorf`: `(int)` rounds toward zero, so a position just left of the first
#   pixel centre lands on pixel 0. The grader names it.
# - **`x0 + 1 <= W` for the right neighbour**: the corner one past the row is read. The grader names this too.
#
# Then back to the lesson's last sections: what the branch-free loads buy on a GPU, and how this kernel
# compares with the reference gather.
