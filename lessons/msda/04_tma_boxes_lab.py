# %% [markdown]
# # Deformable attention lab 04 · Where the box starts, and what its corners weigh
#
# In stage 04 the producer warp's lane `i` handles sample `i` of a work item (one image, query and head). The
# lines before your region have computed the sample's pixel position `x`, `y` (`loc * W - 0.5`: grid_sample
# with `align_corners=False`), its level's `H` and `W`, and its attention weight `a`; `w` starts as four
# zeros and `on[r]` as false. After your region the weights go to the slot (`wts[i] = w`), lane 0 counts the
# bytes of every box the warp will issue (`expect_tx`), and each lane with `on[r]` issues its box: a
# `(1, 2, 2, 1, D)` box of the level's tensor map at coordinates, innermost first, `(0, m, x0s[r], y0s[r], n)`.
#
# Write the region: **if the sample touches the map** (`x > -1`, `y > -1`, `x < W`, `y < H`, as floats):
#
# 1. the box's corner: `x0s[r]` and `y0s[r]`, the integer parts of `x` and `y` rounded **down** (`floorf`): a
#    sample just left of the first pixel centre has `x0 = -1`;
# 2. the fractions `fx = x - floor(x)`, `fy = y - floor(y)`, and the four weights times `a`, in the order the
#    box holds its pixels: `(x0, y0)`, `(x0 + 1, y0)`, `(x0, y0 + 1)`, `(x0 + 1, y0 + 1)`, as
#    `w = make_float4(...)`;
# 3. `on[r] = true`: this sample gets a box.
#
# No test per corner: a corner off the map is the part of the box outside the tensor, and the copy engine fills
# it with zeros (the lesson draws it). A sample with all four corners off the map (half a pixel or more past
# its edge) gets no box and keeps `w` zero.
#
# The grader compiles your code into `kernels/tma_boxes.cu` for sm_90a. Without a Hopper GPU it then runs it
# **on the CPU, in an emulator** (`cudabook.emulate`): every CUDA thread is a small coroutine, and each TMA box
# is filled from the tensor map by `cudabook.tma.load_box` (zeros outside the level). It counts the mbarriers'
# arrivals and bytes, and runs every case twice: with the copies landing as late as the waits allow, and as
# early as they could. A correct kernel is right both ways. It cannot time anything: speed needs the GPU.
#
# The lesson: [04 · TMA boxes](../../notebooks/msda/04_tma_boxes.ipynb).

# %%
import cudabook
print(cudabook.where())
from cudabook import lesson
from cudabook.labs import grade
from cudabook.msda import s04_tma_boxes as s04

# %% [markdown]
# The producer's loop around your region, and what follows it:

# %%
lesson.show_region(s04.source(), start="for (int r = 0; r < (LP + 31) / 32; ++r) {", end=">>> lab")
print("                    ... your lines ...")
lesson.show_region(s04.source(), start="<<< lab", end="if (lane != 0) mbar_arrive(full);")

# %%
#! region msda/kernels/tma_boxes.cu CORNERS

# %%
grade("04_tma_boxes", CORNERS, track="msda")

# %% [markdown]
# Passed? Try the mistakes the earlier rungs invite, and read what the grader says: keep rung 01's border
# thinking and start the test at `x >= 0` (a sample between the edge and the first pixel centre then gets no
# box), or round toward zero with `truncf` instead of `floorf` (`x0` is then 0, not -1, for `x` in (-1, 0)).
