# %% [markdown]
# # Deformable attention lab 04 · Announce the bytes, then ask for the boxes
#
# In stage 04 the producer warp's lanes handle the samples of a work item (one image `n`, query and head `m`), in
# rounds of 32: in round `r`, lane `lane` takes sample `i = r * 32 + lane`. Before your region each lane has
# worked out, for its sample of each round `r`, whether it touches the map (`on[r]`), the box's corner
# `(x0s[r], y0s[r])` (the pixel position rounded down: `-1` just left of the first pixel centre), and its four
# corner weights (already in the slot). The warp has also counted the boxes it will
# issue: `boxes`. The slot is `slot`, its "full" mbarrier `full` (a shared-memory address); the box of sample `i`
# goes to `smem_u32(slot) + i * BOX_STRIDE` (slots of boxes are 128-byte aligned), from the level's tensor map
# `&maps.level[i / PV]`.
#
# Write the region, in this order:
#
# 1. **Announce the bytes.** Lane 0: `mbar_expect_tx(full, bytes)`: it arrives on the barrier and tells it how
#    many bytes will land: every box brings `BOX_BYTES` (its parts outside the map too, as zeros), so
#    `boxes * BOX_BYTES`: not the slots' stride, not one box per sample. Then `__syncwarp()`, so that the
#    count is announced before any lane asks for a box (the kernel's order; PTX allows the other too: bytes
#    that land first count down from zero, and the phase cannot complete before lane 0 has arrived).
# 2. **Ask for the boxes.** Each lane, for each round `r` whose sample touches the map (`on[r]`):
#    `tma_load_5d(dst, map, full, c0, c1, c2, c3, c4)`, coordinates **innermost first**: channel `0`, head `m`,
#    column `x0s[r]`, row `y0s[r]`, image `n` (the map describes value as `[N, H, W, M, D]`). An item has
#    `LP = L * P` samples, and there may be more than the warp's 32 lanes: the samples come in rounds of 32,
#    lane `lane`'s sample of round `r` is `i = r * 32 + lane`, and there are `(LP + 31) / 32` rounds (one of the
#    grader's cases has L * P = 40: two rounds, the second with 8 samples).
# 3. **Arrive.** The barrier counts 32 arrivals, lane 0's expect_tx included: every other lane arrives once
#    (`mbar_arrive(full)`), after its weights and copies.
#
# The grader compiles your code into `kernels/tma_boxes.cu` for sm_90a. Without a Hopper GPU it then runs it
# **on the CPU, in an emulator** (`cudabook.emulate`): every CUDA thread is a small coroutine, and each TMA box
# is filled from the tensor map by `cudabook.tma.load_box` (zeros outside the level). It counts the mbarriers'
# arrivals and bytes, and runs every case twice: with the copies landing as late as the waits allow, and as
# early as they could. A correct kernel is right both ways. A barrier that can never complete (bytes announced
# that no box delivers, an arrival missing) does not hang it: it stops the kernel and says which barrier waits
# for what. It cannot time anything: speed needs the GPU.
#
# The lesson: [04 · TMA boxes](../../notebooks/msda/04_tma_boxes.ipynb).

# %%
import cudabook
print(cudabook.where())
from cudabook import lesson
from cudabook.msda import grade
from cudabook.msda import s04_tma_boxes as s04

# %% [markdown]
# The producer's loop around your region, and what follows it:

# %%
lesson.show_region(s04.source(), start="for (int r = 0; r < (LP + 31) / 32; ++r) {", end=">>> lab")
print("            ... your lines ...")

# %%
#! region msda/kernels/tma_boxes.cu ISSUE

# %%
grade("04_tma_boxes", ISSUE)

# %% [markdown]
# Passed? Try the mistakes a first TMA kernel makes, and read what the grader says: count `BOX_STRIDE` bytes a
# box (or `LP` boxes, on the map or not), leave the expect_tx out (lane 0 only arrives), swap `x0s[r]` and
# `y0s[r]`, or let every lane arrive, lane 0 too. On a CPU the emulator names a wrong byte count ("expect_tx
# says N bytes, the boxes deliver M"); on a GPU the barrier would never complete, and the kernel's watchdog
# would stop it after 20 s.
# Then go on to [05 · lane groups](../../notebooks/msda/05_lane_groups.ipynb), the fastest rung.
