# %% [markdown]
# # Attention lab 04 · Turn the K/V ring
#
# Stage 04's kernel is written, but for the four lines that make its `cp.async` ring turn. Shared memory holds
# `STAGES` slots, each a K tile and a V tile of `BKV` keys; `load_kv(t, slot)` issues this thread's share of the
# copies of key tile `t` into a slot (keys past `Nk` are zero-filled), and `tiles` is how many key tiles this
# block reads. Before the loop, Q and tiles `0 .. STAGES-2` were requested, one *commit group* each (Q rides in
# group 0), and the loop below your lines reads tile `t` from slot `s = t % STAGES`. At the top of pass `t`,
# write the pipeline step:
#
# 1. **the next request**: if tile `t + STAGES - 1` exists (`< tiles`), `load_kv` it into slot
#    `(t + STAGES - 1) % STAGES`, the slot tile `t - 1` used (every warp finished reading it at the
#    `__syncthreads()` that ended the last pass). Not into `s`: that is the slot about to be read. (Write it as
#    above, not `(t - 1) % STAGES`: in C++ that is -1 at `t = 0`, a slot before the first);
# 2. **`cp_async_commit();`**, always, outside the `if`: then commit group `g` is always tile `g`, and the
#    wait counts right at the last tiles too;
# 3. **`cp_async_wait<N>();`** so that tile `t` has landed while later ones may still fly. Count before you
#    write N: how many groups has this thread committed by now, and how many of them must be complete?
#    (`cp.async.wait_group N` waits until at most the N newest groups are still in flight);
# 4. **`__syncthreads();`**: the wait covers only this thread's copies, and every thread copied a share of the
#    tile.
#
# Write the C++ in the string below. The grader puts it into `kernels/flash_mma.cu` in place of the lab
# region, compiles the file with NVRTC, and runs it on the grader's fresh random cases (ragged, causal and not,
# d = 64 and 128, Nq != Nk), with 64-key tiles and with 16-key tiles at 2 and 3 stages (small cases must have
# several tiles for the ring to turn). Without a GPU of compute capability 8.0 or newer it runs your kernel
# **on the CPU, in an emulator** (`cudabook.emulate`): every CUDA thread a coroutine, `mma.sync` and `ldmatrix`
# as warp operations, every case three times: with the copies landing as late as your waits allow (shared memory
# starts as NaN, so a read before its copy landed shows), with them landing at once, and with late copies and
# each warp running as far ahead of the others as your barriers allow. It cannot time anything: speed needs the
# GPU.
#
# A race passes a run more often than not, on a GPU especially. So the grader also reads your text, for a
# commit under the `if`, a missing barrier after the wait, and copies into the slot being read. Count by hand
# as well.
#
# The lesson: [04 · tensor cores and a cp.async ring](../../notebooks/attention/04_mma_cp_async.ipynb).

# %%
import cudabook
print(cudabook.where())
from cudabook import lesson
from cudabook.attention import s04_mma_cp_async as s04
from cudabook.attention import grade

# %% [markdown]
# The code around your lines: the ring's helpers and the prologue, then what follows your region (the first
# reads of slot `s`) and the end of the pass.

# %%
lesson.show_region(s04.source(), start="const int kv_end", end=">>> lab")
print("        ... your lines ...")
lesson.show_region(s04.source(), start="<<< lab", end="mma_16816(sc[n + 1]")
print("        ...")
lesson.show_region(s04.source(), start="everyone is done with stage s", end="cp_async_wait<0>()")

# %%
#! region attention/kernels/flash_mma.cu PIPELINE

# %%
grade("04_mma_cp_async", PIPELINE)

# %% [markdown]
# Passed? Make the mistakes this step invites, one at a time, and read what the grader says:
#
# - **a wait one group too shallow**: `cp_async_wait<STAGES>()`. Tile `t` may still be in flight when it is
#   read. On the CPU the late landing catches it (NaN everywhere, and a hint that the timing is wrong); on a
#   GPU it often passes, which is why you count.
# - **the copies into the slot being read**: `load_kv(t + STAGES - 1, s)`. The grader names it.
# - **the commit inside the `if`**: `if (...) { load_kv(...); cp_async_commit(); }`. The last `STAGES - 1`
#   passes commit no group, so the newest `STAGES - 1` groups that `wait<STAGES - 1>` leaves in flight are no
#   longer all tiles after `t`: they include tile `t` itself, which may still fly. The grader names it.
# - **no barrier**: delete `__syncthreads()`. The grader names it too.
#
# Then back to the lesson: the causal order of the blocks, and how fast the stage is.
