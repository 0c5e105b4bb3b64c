# %% [markdown]
# # 02 · Warp shuffles: a warp per target
#
# Stage 01 gave each *thread* a target. Its two problems, 32 redundant searches per warp and loads that
# scatter across memory, both come from neighbouring threads doing unrelated work. So turn the mapping
# around: give each **warp** a target, and spread its 32 lanes over the **channels**.
#
# ```
#   stage 01: lane i -> target i, all D channels        stage 02: all 32 lanes -> one target
#             (32 searches, 32 scattered rows)                    lane i -> channels i, i+32, i+64, ...
# ```
#
# The lanes of a warp can hand each other registers directly with **shuffles** (`cuda.shfl_sync`), and vote
# with **ballots** (`cuda.ballot_sync`: every lane gets a 32-bit word with one bit per lane). No shared memory,
# no `syncthreads`.
#
# Do not picture the 32 lanes as marching in lockstep. Since Volta (compute capability 7.0) GPUs have
# **independent thread scheduling**: each lane has its own program counter, and after a branch the two sides
# may run interleaved, or one may run ahead of the other for a long time; nothing guarantees that they meet
# again before the next instruction, nor that a lane has written what a neighbour is about to read. What *is*
# guaranteed is a *_sync operation's own contract: `shfl_sync(mask, ...)` and `ballot_sync(mask, ...)` wait
# until every lane named in `mask` has arrived, and then exchange the values; `__syncwarp(mask)` (in Numba
# `cuda.syncwarp(mask)`) does only the waiting, and orders the memory accesses of those lanes around it. So
# the mask is a promise the program makes: a lane named in it that takes another branch and never reaches the
# call can leave the warp hung; one that has exited is not waited for, and a value read from it is undefined,
# as is a value shuffled from a lane left out of the mask. That is why the mask-less `__shfl` of older CUDA is not available for Volta and
# later, and why this stage keeps whole warps together.
#
# References: Numba [warp intrinsics](https://nvidia.github.io/numba-cuda/reference/kernel.html#warp-intrinsics);
# CUDA: [warp shuffle functions](https://docs.nvidia.com/cuda/cuda-c-programming-guide/index.html#warp-shuffle-functions),
# [warp vote functions](https://docs.nvidia.com/cuda/cuda-c-programming-guide/index.html#warp-vote-functions),
# [independent thread scheduling](https://docs.nvidia.com/cuda/cuda-programming-guide/03-advanced/advanced-kernel-programming.html#independent-thread-scheduling);
# PTX ISA: [shfl.sync](https://docs.nvidia.com/cuda/parallel-thread-execution/index.html#data-movement-and-conversion-instructions-shfl-sync),
# [vote.sync](https://docs.nvidia.com/cuda/parallel-thread-execution/index.html#parallel-synchronization-and-communication-instructions-vote-sync)
# (the ballot), [bar.warp.sync](https://docs.nvidia.com/cuda/parallel-thread-execution/index.html#parallel-synchronization-and-communication-instructions-bar-warp-sync)
# (`syncwarp`).

# %%
import cudabook
print(cudabook.where())

import numpy as np
import matplotlib.pyplot as plt
from numba import cuda
from cudabook import resample
from cudabook.bits import bf16_to_f32, f32_to_bf16, lerp
from cudabook.resample import s02_warp_shuffles as s02, s03_coalesced as s03
from cudabook.resample.s01_naive import find_interval, weight

# %% [markdown]
# ## Which element does each lane touch?
#
# Colour = lane (0 dark to 31 yellow, see the bar; grey = not touched by this warp). Left: stage 01, one warp covers
# 32 targets (rows), and at each loop step the 32 lanes touch one *column*. Right: stage 02, one warp covers one
# target, and at each step the 32 lanes touch 32 neighbouring channels of one *row*: neighbouring addresses.

# %%
D, T = 64, 32
stage01 = np.repeat(np.arange(32)[:, None], D, axis=1)                 # lane = target index
stage02 = np.full((T, D), np.nan); stage02[0] = np.arange(D) % 32      # warp 0 does target 0 only
fig, axes = plt.subplots(1, 2, figsize=(10, 2.6))
for ax, grid, title in zip(axes, (stage01, stage02), ("01: lane per target", "02: lanes over channels (warp 0)")):
    image = ax.imshow(grid, cmap="viridis", vmin=0, vmax=31, aspect="auto", interpolation="nearest")
    ax.set_facecolor("0.92")                                           # blank = not touched by this warp
    ax.set_xlabel("channel d"); ax.set_ylabel("target t"); ax.set_title(title, fontsize=9)
fig.colorbar(image, ax=axes, label="lane", ticks=[0, 8, 16, 24, 31])
plt.show()

# %% [markdown]
# The memory system moves 32-byte **sectors**. One warp-wide load in stage 01 takes 2 bytes from up to 32
# different sectors; in stage 02 it takes 64 contiguous bytes: 2 sectors, every byte used.

# %%
for name, addrs in (("01 naive", s03.naive_lane_addresses(256)), ("02 warp", s03.lane_addresses(2, 256))):
    print(f"{name:>9}: one warp-wide load touches {s03.transactions(addrs):2d} sectors "
          f"for {sum(l - f + 1 for _, f, l in addrs)} useful bytes")

# %% [markdown]
# ## Searching as a warp
#
# **Lane 0 searches, then broadcasts** (the first design in the optimisation log this track grew from): one search
# per warp instead of 32, but it is still a chain of `log2(S)` dependent loads, 12 for S = 4096, while 31 lanes
# wait.
#
# **A 32-way search with a ballot**: each round, the 32 lanes each test one of 32 evenly spaced probes at the
# same time. Times increase, so the lanes whose probe is `<= x` form a prefix of the warp, and the ballot's
# population count says which gap holds `x`. Each round divides the range by 32: S = 4096 takes 3 rounds.
#
# ```
#   round 1: probes every 128 rows  ->  ballot 0b0000...0111111  (popcount 6)  ->  x is in rows 641..768
#   round 2: probes every 4 rows    ->  ...                                       ->  x is in 4 rows
#   round 3: probes every row       ->  done
# ```

# %%
S_values = 2 ** np.arange(4, 17)
fig, ax = plt.subplots(figsize=(6, 2.6))
ax.plot(S_values, np.ceil(np.log2(S_values - 1)), "o-", label="binary search (lane 0)")
ax.plot(S_values, np.ceil(np.log(S_values - 1) / np.log(32)), "s-", label="32-way ballot search")
ax.set_xscale("log", base=2); ax.set_xlabel("S (source samples per row)")
ax.set_ylabel("dependent rounds of loads"); ax.legend(); plt.show()

# %% [markdown]
# ## The kernel
#
# Every lane must reach each shuffle and ballot (the mask `0xFFFFFFFF` promises that all 32 lanes take part).
# So a warp is either wholly inside the problem or wholly past its end: the early `return` is taken by all
# 32 lanes together, never by some of them. The small helpers are device functions with `forceinline=True`: NVVM
# pastes each into its caller (its arguments and local arrays then live in the caller's registers), and Numba
# compiles them several times faster than with `inline=True`, which inlines Numba's own IR instead (the kernels
# ran at much the same speed either way, measured side by side on an H200).

# %%
WARP, FULL_MASK = s02.WARP, s02.FULL_MASK
warp_and_lane = s02.warp_and_lane


#! kernel resample/s02_warp_shuffles warp_find_interval


#! kernel resample/s02_warp_shuffles lane0_find_interval


#! kernel resample/s02_warp_shuffles warp_weight


#! kernel resample/s02_warp_shuffles resample_warp

# %% [markdown]
# No GPU? The simulator has no warp operations of its own; `cudabook` adds them, with CUDA's semantics, and
# stricter: a lane outside the mask, or a read from a lane that has exited, raises an error instead of
# silently returning garbage as hardware may.
#
# ## Is it right?

# %%
size = resample.demo_size()
for search in ("ballot", "lane0"):
    print(search, resample.check_launch(s02.launch, **size, search=search))
print("unsorted", resample.check_launch(s02.launch, **size, sorted_targets=False))

# %% [markdown]
# ## How fast?

# %%
resample.ladder_so_far("02_warp_shuffles")

# %% [markdown]
# ## Experiment: the search, and warps per block
#
# Compare the two searches, then the block size. Prediction to test: the search matters less than you might think,
# because the feature traffic (2 x 512 bytes read per target at D = 256; neighbouring targets share rows, so DRAM
# sees about half of it, the rest hits in cache) dwarfs the search's (its source times are few and stay in cache;
# counted in 32-byte sectors at L1, the ballot search still reads more than the two feature rows: about 50
# against their 32, at S = 4096), but the 12 *dependent* loads of the lane-0 search add latency that only many
# warps in flight hide.

# %%
resample.sweep("02_warp_shuffles", "search", ["lane0", "ballot"])
resample.sweep("02_warp_shuffles", "warps_per_block", [1, 2, 4, 8, 16])

# %% [markdown]
# Read the records against the prediction. Its first half is refuted: the search does matter, and the lane-0
# search takes about a third longer than the ballot search on both cards. Its second half fits: lane 0's twelve
# loads depend on each other, and at the default block size that chain is not hidden. The block-size sweep (run
# with the default ballot search) is flat from two to eight warps a block, a little slower at sixteen, and
# clearly slower only at one warp a block: an SM
# holds at most 32 blocks (compute capability 9.0), so one-warp blocks leave it at most 32 warps of the 64 it can
# hold, and fewer warps in flight hide less of the loads' latency. Whether more warps in
# flight would hide the lane-0 chain is not in these records: the lane-0 search was timed at the default block
# size only.
#
# Each lane still moves only 2 bytes per instruction: for D = 256 that is 8 load instructions per source row
# per warp. Next, [03 · coalescing](03_coalesced.ipynb), makes each instruction move 16 bytes.

# %% [markdown]
# Write this stage's kernel yourself: [lab 02](../../labs/resample/02_warp_shuffles.ipynb) (the completed version:
# [solution](../../solutions/resample/02_warp_shuffles_SOLUTION.ipynb)).
