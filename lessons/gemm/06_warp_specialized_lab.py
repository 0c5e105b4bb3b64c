# %% [markdown]
# # GEMM lab 06 · The consumer's side of the barrier protocol
#
# In stage 06 one warpgroup only copies (the producer) and two only multiply (the consumers). They meet at a
# ring of `STAGES` shared-memory stages, each with two mbarriers:
#
# - `full[s]`: the producer's TMA copies complete on it (expect_tx counts the bytes); a consumer waits on it
#   before it reads stage `s`;
# - `empty[s]`: each consumer warpgroup arrives on it once it has finished reading stage `s`; the producer
#   waits on it before it refills the stage.
#
# An mbarrier has a *phase* that flips each time it completes; `mbar_wait(bar, parity)` returns once the phase
# with that parity has completed. Both sides walk the ring with a stage index `s` and a phase bit `phase` that
# starts at 0 and flips each time `s` wraps around. Write the consumer's loop body for one k-tile:
#
# 1. wait until stage `s` is full: `mbar_wait(full + 8 * s, parity)`. Which parity? Work it out from the picture
#    below: on the first lap the wait must block until the first fill has landed, on the second lap until the
#    second, and so on;
# 2. run the k-tile: `mma_k_tile(d, a + cw * 64 * 128, a + A_BYTES)` with `a` the stage's address
#    (`base + s * STAGE_BYTES`);
# 3. wait for the wgmmas to finish reading (`wgmma_wait<0>()`);
# 4. tell the producer the stage is free: arrive on `empty[s]` with `mbar_arrive`. The barrier completes after
#    the number of arrivals its `mbar_init` names (printed below). Which threads of your warpgroup should arrive,
#    then? (Every arrival counts: 128 threads arriving complete the phase before the other warpgroup is done
#    reading, and then complete the phases of later laps too, so the producer's laps no longer match the
#    barrier's.)
# 5. step `s`, flipping `phase` when it wraps.
#
# The blocks are persistent: one block works tile after tile, and `s` and `phase` carry on from one tile's last
# k-tile to the next tile's first, where the producer's own `s` and `phase` are too. A parity worked out from
# the k-tile number alone (lab 05's `(kt / STAGES) & 1`) is right only in a block's first tile.
#
# What `mbar_wait(bar, p)` does, lap by lap, for a barrier that one fill completes:
#
# ```
#                     fresh    after fill 1   after fill 2   after fill 3
# current phase bit     0           1              0              1
# mbar_wait(bar, 0)   blocks     returns         blocks        returns
# mbar_wait(bar, 1)   returns    blocks          returns       blocks
# ```
#
# Barriers are 8 bytes each: `full + 8 * s` and `empty + 8 * s` are stage `s`'s. The code around your lines
# is printed below.
#
# A wrong parity fails one of two ways. Waiting for the parity of a phase that has already completed returns
# at once (parity 1 on a fresh barrier, as the table shows): the wgmmas read a stage before its copies have landed,
# which gives wrong results, NaN in the emulator, whose shared memory starts as NaN. Waiting for a phase that
# nobody will complete never returns, and neither does a wait for arrivals that never come. On a GPU the
# kernel's waits carry a watchdog that traps after about 20 seconds instead; the grader then reports a failed
# launch (`CUDA_ERROR_LAUNCH_FAILED`): suspect your waits and arrivals, and restart the notebook's kernel before
# the next try. In the CPU emulator (where there is no Hopper GPU, and after a GPU's run) a wait that can never
# end is named at once, with the barrier, its phase and who was expected to arrive.

# %%
import cudabook
print(cudabook.where())
from cudabook import lesson
from cudabook.gemm import s06_warp_specialized as s06
from cudabook.gemm import grade

# %%
lesson.show_region(s06.source(), start="mbar_init(full", end="mbar_init(empty")
print()
lesson.show_region(s06.source(), start="if (wg == 0)", end=">>> lab")
print("        ... your lines ...")
lesson.show_region(s06.source(), start="<<< lab", end="const int row")

# %%
#! region gemm/kernels/warp_specialized.cu CONSUMER_STEP

# %%
grade("06_warp_specialized", CONSUMER_STEP)
