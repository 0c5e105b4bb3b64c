# %% [markdown]
# # Lab 06 · Keep the pipeline full
#
# Stage 06's kernel is written, but for the three lines that make it a pipeline. Before the loop, the block
# has already started the copies of items `0 .. STAGES-2` (one `fill` each; a `fill` issues its item's
# `cp.async` copies and closes them into one *commit group*). Inside the loop, before item `k` is
# interpolated from its stage, write:
#
# 1. `fill(k + STAGES - 1, nitems, ntc, ndc, times, feats, targets, S, T, D, smem, x, win);`: start the copies
#    of the item `STAGES - 1` ahead (the arguments after the first are those of the `fill(j, ...)` calls before
#    the loop, which this notebook does not show: `cudabook/resample/kernels/cp_async.cu` has them), so that
#    `STAGES - 1` items are always in flight;
# 2. `cp_async_wait<N>()`: wait until at most `N` of this thread's commit groups are still in flight. Which `N`
#    means "item `k` has landed, the later ones may still be flying"?
# 3. a barrier (`__syncthreads()`): every thread copied a share of the window, and a wait covers only this
#    thread's own copies, so *everyone's* must have landed before anyone reads the stage.
#
# The grader runs every case at the stage's default depth (`stages` = 2, compiled as `STAGES`) and again at 3,
# so write `N` in terms of `STAGES`: a number that is right at one depth is wrong at the other, or waits for more
# than it needs (still right, with fewer copies in flight).
#
# Write C++ in the string below; the grader puts it into `kernels/cp_async.cu` in place of the lab region,
# compiles the file with NVRTC and runs it. Without a suitable GPU it runs it on the CPU in an emulator
# (`cudabook.emulate`), three ways: once with every `cp.async` group landing only when its thread waits for it
# (and shared memory starting as NaN, so reading a row before its copy landed shows), once with every copy landing
# the moment it is issued, and once with the groups landing late and each warp running as far ahead of the others
# as your barriers allow (so a warp reads rows that another warp copied before that one waited). A correct
# pipeline is right every way; a wait one group too shallow, or a barrier that orders one warp only, is not.
# Read the lesson's loop (06 · cp.async) if you are stuck.

# %%
import cudabook
print(cudabook.where())
from cudabook.resample import grade

# %%
#! region resample/kernels/cp_async.cu PIPELINE

# %%
grade("06_cp_async", PIPELINE)

# %% [markdown]
# The lesson this lab belongs to: [06 · cp async](../../notebooks/resample/06_cp_async.ipynb).
