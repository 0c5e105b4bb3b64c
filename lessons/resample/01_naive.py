# %% [markdown]
# # 01 · Naive: one thread per target
#
# **The problem.** A robot logs its joints at irregular times. We want the same trajectory at *new* times.
# For every batch row `b` and every target time `x`: find the two source samples around `x`, and blend every
# feature channel linearly between them. The definition is NumPy's, per (batch, channel):
#
# ```python
# out[b, :, d] = np.interp(tgt_times[b], src_times[b], src_feats[b, :, d])
# ```
#
# Features are bf16 (`ml_dtypes.bfloat16` on the host); arithmetic is float32; the output is bf16, rounded
# to nearest even. Outside the source range np.interp holds the end values.

# %%
import cudabook
print(cudabook.where())

import numpy as np
import matplotlib.pyplot as plt
from cudabook import resample

src_times, src_feats, tgt_times = resample.random_problem(1, 12, 40, 1, rng=3)
out = resample.run("01_naive", src_times, src_feats, tgt_times)

fig, ax = plt.subplots(figsize=(7, 2.6))
ax.plot(src_times[0], src_feats[0, :, 0].astype(float), "o--", lw=0.6, label="source samples")
ax.plot(tgt_times[0], out[0, :, 0].astype(float), "x", label="resampled (stage 01)")
ax.set_xlabel("time"); ax.legend(); ax.set_title("one batch row, one channel")
plt.show()

# %% [markdown]
# ## The kernel
#
# The most direct mapping: **one thread per target**. A thread binary-searches its row of source times for
# the interval `[lo, lo+1]` around its target, computes the weight once, then loops over the `D` channels.
# The grid is 2-D: `blockIdx.y` is the batch row, `x` covers the targets.
#
# ```
#  thread t:  search times[b, :] for x = targets[b, t]  ->  lo, w
#             for d in 0..D-1:  out[b, t, d] = lerp(feats[b, lo, d], feats[b, lo+1, d], w)
# ```
#
# Numba: [writing kernels](https://nvidia.github.io/numba-cuda/user/kernels.html) (thread and block indices,
# launching a grid), [device functions](https://nvidia.github.io/numba-cuda/user/device-functions.html).

# %%
from numba import cuda
from cudabook.bits import bf16_to_f32, f32_to_bf16, lerp


#! kernel resample/s01_naive find_interval


#! kernel resample/s01_naive weight


#! kernel resample/s01_naive resample_naive

# %% [markdown]
# `bf16_to_f32` widens bf16 bits to float32 (a 16-bit shift), and `f32_to_bf16` rounds to nearest even
# (add `0x7FFF` plus the lowest kept bit, drop the low half). They live in `cudabook/bits.py`.
#
# ## Is it right?
#
# Fresh random inputs (irregular times, targets outside the range, targets exactly on source times), the
# output poisoned with NaN, compared with a float64 reference to within one bf16 rounding:

# %%
from cudabook.resample import s01_naive
size = resample.demo_size()
print(resample.check_launch(s01_naive.launch, **size))
print(resample.check_launch(s01_naive.launch, **size, sorted_targets=False))

# %% [markdown]
# ## Why it is slow
#
# Two things are wasteful, and both come from *neighbouring threads doing unrelated work*:
#
# 1. **Redundant searches.** The 32 threads of a warp have 32 neighbouring targets, and with sorted targets
#    they usually land in the same or neighbouring intervals. Each still performs its own `log2(S)` = 12
#    dependent loads (S = 4096): the warp waits for 12 loads, one after the other, before moving any feature.
# 2. **Strided accesses.** In the channel loop, at step `d` thread `i` reads `feats[b, lo_i, d]`. Neighbouring
#    threads read addresses about a row (`D x 2 bytes`) apart, so one warp-wide load touches up to 32
#    different 32-byte memory sectors to use 2 bytes of each. Stores to `out[b, t_i, d]` are just as scattered.
#    (CUDA Best Practices: [coalesced access to global memory](https://docs.nvidia.com/cuda/cuda-c-best-practices-guide/index.html#coalesced-access-to-global-memory).)
#
# The picture shows one warp-wide load at channel `d = 0`: each mark is the 2 bytes a lane reads.

# %%
B, S, T, D = resample.bench.BENCH_SIZE.values()  # the benchmark's shape: S = T
times, _, targets = resample.random_problem(1, S, T, 1, rng=1)    # one row, sorted targets
lo = np.clip(np.searchsorted(times[0], targets[0], side="right") - 1, 0, S - 2)
print(f"S = {S}, T = {T}: on average {T / (S - 1):.2f} targets per source interval; one warp's 32 targets "
      f"(targets {T // 2}..{T // 2 + 31}) fall in {len(np.unique(lo[T // 2:T // 2 + 32]))} different intervals")
lane_rows = lo[T // 2:T // 2 + 32] - lo[T // 2]   # the row each lane of that warp reads, from the warp's first
addresses = lane_rows * D * 2           # byte offset of feats[b, lo_i, 0] from the row start
sectors = np.unique(addresses // 32)
fig, ax = plt.subplots(figsize=(8, 1.8))
ax.scatter(addresses, np.arange(32), s=8)
ax.set_xlabel("byte address (relative)"); ax.set_ylabel("lane")
ax.set_title(f"stage 01, one load: 32 lanes read {len(sectors)} different 32-byte sectors, 2 bytes of each")
plt.show()

# %% [markdown]
# ## What the profiler says
#
# Nsight Compute reads the GPU's own counters while a kernel runs. `profile.show` profiles the stage now when
# this machine has a GPU and `ncu`, and otherwise shows the profile recorded on a real card, naming it. Its
# stall columns answer *what were the warps waiting for?* A warp stalled on the **long scoreboard** waits for a
# value from global memory that its next instruction needs: here the search's chain of dependent loads, then
# the channel loop's scattered reads, each warp-wide load split into many 32-byte sectors. Nsight Compute's
# [profiling guide](https://docs.nvidia.com/nsight-compute/ProfilingGuide/index.html) defines its counters and stall
# reasons.

# %%
from cudabook import profile
p01 = profile.show("resample", "01_naive")
if p01:
    k = p01.kernel()
    print(f"{k['kernel']}: {k['sectors_per_request']:.1f} sectors per warp-wide global load; its warps' cycles:")
    for reason, share in list(k["stalls"].items())[:3]:
        print(f"  {share:5.1f} {k['stall_unit']}: {reason}, {profile.STALLS.get(reason, '')}")

# %% [markdown]
# Stage 02 fixes both at once by turning the mapping around: a *warp* per target, lanes spread over
# channels.
#
# ## How fast?
#
# The ladder so far, against the copy ceiling measured in the same run (with no GPU: the records in
# `results/`, measured on real GPUs). Here that is stage 01 alone.
#
# From lesson 02 on, this cell measures only the lesson's stage and the one before it. The earlier stages come
# from this card's record in `results/`, marked ‡ with its card, commit and date, and drawn lighter. With no
# record for this card it says so and shows just the two. To measure every stage now, pass `full=True`
# (`resample.ladder_so_far("03_coalesced", full=True)`) or set `CUDABOOK_FULL_LADDER=1` before starting
# Jupyter; it takes longer.

# %%
resample.ladder_so_far("01_naive")

# %% [markdown]
# ## Experiment: block size
#
# Does the number of threads per block matter for this kernel? Change the list and rerun. (A guess to test:
# it barely matters, because the kernel is limited by scattered memory accesses, not by occupancy.)

# %%
resample.sweep("01_naive", "threads", [32, 64, 128, 256, 512])

# %% [markdown]
# Check the guess against the table. The sweeps recorded in results/sweeps/ do not bear it out: on both cards,
# 32 threads a block (one warp) ran much faster than 64 or more (more than twice as fast on the H100). A block
# of one warp means at most 32 blocks, 1,024 threads, an SM (the limit on blocks an SM), half the threads the
# other sizes get, so fewer threads compete for the same L1; whether that is the reason is open, a question for
# the profiler (`cudabook.profile`), not for a guess.
#
# Next: [02 · warp shuffles](02_warp_shuffles.ipynb). To write this kernel yourself, open
# [lab 01](../../labs/resample/01_naive.ipynb) (the completed version: [solution](../../solutions/resample/01_naive_SOLUTION.ipynb)).
