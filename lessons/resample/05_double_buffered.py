# %% [markdown]
# # 05 · Double buffering: keep the next loads in flight
#
# In stage 04 a block does one thing at a time: load a window, wait at a barrier, compute, repeat. While it
# computes, none of its own loads are in flight. DRAM only runs at full speed when enough bytes are *in
# flight* at every moment: on an H100, roughly 10 to 20 KB per SM (worked out below, with Little's law). This
# lesson tries two ways to keep the next loads flying while the current data is used, measures both, and keeps
# the faster.
#
# ## Way 1: two windows in shared memory (`buffers="shared"`)
#
# The classic picture: while the block interpolates from buffer A, it is already loading the next window for
# buffer B; then they swap.
#
# ```
#   stage 04:  [load 0][wait][compute 0][load 1][wait][compute 1] ...
#   shared:    [load 0][wait][compute 0 | loads of 1 in flight][store 1][compute 1 | loads of 2 in flight] ...
# ```
#
# A Numba load goes through a register: it does not block, and the thread stalls only at the first
# instruction that reads that register, not at the load itself. So the kernel issues the next window's loads into
# **registers**, interpolates the current window, and only then stores those registers to the other buffer.
# The costs are real: the in-flight data sits in registers (8 loads of 16 bytes a thread) for the whole
# interpolation, so fewer blocks fit on an SM, and the store to shared memory still needs its own barrier.
#
# References: Numba [warp intrinsics](https://nvidia.github.io/numba-cuda/reference/kernel.html#warp-intrinsics)
# (`shfl_sync`), [shared memory](https://nvidia.github.io/numba-cuda/user/memory.html#shared-memory-and-thread-synchronization);
# PTX ISA: [ld (vector loads)](https://docs.nvidia.com/cuda/parallel-thread-execution/index.html#data-movement-and-conversion-instructions-ld);
# CUDA Best Practices: [occupancy](https://docs.nvidia.com/cuda/cuda-c-best-practices-guide/index.html#occupancy).

# %%
import cudabook
print(cudabook.where())

import numpy as np
from numba import cuda, float32, int32, uint32
from cudabook import resample
from cudabook.resample import s05_double_buffered as s05
from cudabook.resample.s05_double_buffered import *   # stage 04's device functions, which these kernels reuse

# %%
#! kernel resample/s05_double_buffered resample_double

# %% [markdown]
# **Measured, and slower.** The lesson sweeps in results/sweeps/ time both ways on each card, and stage 04 in
# the same session:

# %%
from cudabook import lesson, profile
from cudabook.kit import occupancy
from cudabook.resample import s04_smem_windows as s04


def fit(regs, n):
    """Blocks of n threads an SM holds, by the register rule alone."""
    return occupancy.blocks_per_sm(regs, n, 0).by_registers


default = s04.PARAMS["targets_per_block"]
fours = {e["gpu"]: e for e in lesson.recorded_sweeps("resample", "04_smem_windows", "targets_per_block")}
for e in lesson.recorded_sweeps("resample", "05_double_buffered", "buffers"):
    us = {r["value"]: r["median_us"] for r in e["rows"] if "median_us" in r}
    four = fours.get(e["gpu"], {})
    us04 = next((r["median_us"] for r in four.get("rows", []) if r["value"] == default and "median_us" in r), None)
    if "shared" in us and us04:
        print(f"{e['gpu']} · lesson sweeps · commit {e['commit']}: buffers='shared' {us['shared']:.1f} µs; stage 04 "
              f"at its defaults (targets_per_block={default}, commit {four['commit']}) {us04:.1f} µs")

cap, threads = s05.PARAMS["max_registers"], s05.PARAMS["threads"]
regs04 = {rec["gpu"]: int(k["registers"]) for rec in profile.load_records("resample")
          if (k := profile.from_record(rec, ["04_smem_windows"]).kernel("04_smem_windows"))}

print(f"\nblocks of {threads} threads an SM that the registers allow: {fit(cap, threads)} at this kernel's cap of "
      f"{cap} a thread; " + "; ".join(f"{fit(r, s04.PARAMS['threads'])} at stage 04's {r} ({gpu} profile)"
                                     for gpu, r in regs04.items()))

# %% [markdown]
# Slower than stage 04 on both cards. Holding eight 16-byte loads a thread across the interpolation takes
# registers; the stage caps them (`max_registers`), and at that cap no more blocks fit on an SM than stage 04
# already gets, so the extra registers bought no extra warps, while every item still waits at barriers and
# searches its window as in stage 04. Stage 04 already overlaps one block's loads with another block's
# compute: while one block waits at its barrier, the warp scheduler issues the warps of the others. That is not
# free either (it needs several blocks resident on each SM: stage 04's `blocks_per_sm` sweep is far slower with
# one), but it spends no registers on holding loads.
#
# ## Step back: what is the window for?
#
# The window requests each source row once, however many targets use it. But with sorted targets a source row
# is used by about two neighbouring targets, and the GPU's L2 cache (50 MiB on an H100, 60 MiB on an H200)
# already catches the second read: two warps that read the same row shortly after one another get one DRAM read
# between them. So the window never saved DRAM traffic; it adds some, since it also loads the rows no target
# uses (lesson 04's profile cell). What made stage 04 faster than 03 was fewer requests through L1 and L2, fewer
# searches, and, as far as the records tell, its cheaper bf16 rounding too (lesson 04: they do not separate the
# three). And the window costs barriers, shared memory and the searches inside it.
#
# What matters is **bytes in flight**. So:
#
# 1. **Search once, up front.** A small prepass kernel, `find_intervals`, finds every target's interval `lo`
#    and weight `w` and writes them out: 8 bytes a target, 2 MB at the benchmark size. It copies the row of
#    source times to shared memory and each thread runs four binary searches side by side, one step of each
#    in turn (`halve`: no branch, four independent loads in flight). A search is a chain of dependent loads,
#    so this kernel is mostly latency, whatever the GPU's bandwidth (its recorded time is printed under the
#    ladder below).
# 2. **Registers are the buffers.** In `resample_in_flight` a warp takes four consecutive targets. Lanes 0-3
#    read the four `(lo, w)` pairs, shuffles hand them to all 32 lanes, and each lane issues **all eight** of
#    its row loads (two rows for each of four targets, 16 bytes each) before it uses the first:
#
# ```
#   lane L:  ld lo(t)  ld lo(t)+1  ld lo(t+1) ... ld lo(t+3)+1      8 x 16 bytes requested, nothing waited for
#            |<------------------ all eight in flight ------------------>|
#                                   lerp t -> st | lerp t+1 -> st | lerp t+2 -> st | lerp t+3 -> st
#                                   (waits only for the first two)   (the others have landed meanwhile)
# ```
#
# 3. **A persistent grid** (SMs x `blocks_per_sm` blocks, 8 of 128 threads by default) walks the groups: 32
#    warps an SM, each lane with up to 128 bytes requested, is up to 131 kB (128 KiB) in flight per SM, several
#    times what DRAM needs to run at full speed (its bandwidth times its latency, spread over the SMs: below).
#
# Targets in any order take the same path, because every target's search is its own: no fallback needed.

# %%
#! kernel resample/s05_double_buffered find_intervals

# %%
#! kernel resample/s05_double_buffered resample_in_flight

# %% [markdown]
# ## Is it right? Both ways, sorted and unsorted

# %%
size = resample.demo_size()
print("registers, sorted  ", resample.check_launch(s05.launch, **size))
print("registers, unsorted", resample.check_launch(s05.launch, **size, sorted_targets=False))
print("registers, 1 block ", resample.check_launch(s05.launch, 3, 40, 41, 8, blocks=1))
print("shared, sorted     ", resample.check_launch(s05.launch, **size, buffers="shared"))
print("shared, unsorted   ", resample.check_launch(s05.launch, **size, buffers="shared", sorted_targets=False))

# %% [markdown]
# ## How fast? Is it faster than 04?
#
# The ladder below is stage 05's default, `buffers="registers"`, prepass included. The prepass is mostly
# latency (four interleaved searches a thread, the whole GPU waiting for the slowest), and its time is part of
# the stage's. The TMA lesson (07) meets the same cost.

# %%
resample.ladder_so_far("05_double_buffered")

# %% [markdown]
# The two kernels apart, in the Nsight Compute profiles recorded in results/profiles/ (one launch at the
# benchmark size; ncu's kernel times, which leave out the gaps between launches):

# %%
for rec in profile.load_records("resample"):
    p = profile.from_record(rec, ["05_double_buffered"])
    pre = p.kernel("05_double_buffered", "find_intervals")
    main = p.kernel("05_double_buffered", "resample_in_flight")
    if pre and main:
        print(f"{rec['gpu']} · Nsight Compute · commit {rec['commit']}: find_intervals {pre['duration_us']:.1f} µs "
              f"({pre['dram_read_MB']:.1f} MB read), resample_in_flight {main['duration_us']:.1f} µs: the prepass is "
              f"{pre['duration_us'] / (pre['duration_us'] + main['duration_us']):.0%} of the two")

# %% [markdown]
# ## Little's law: how many bytes must be in flight?
#
# In a queue that runs steadily, what is inside equals the rate at which things enter times how long each stays
# (Little's law). For memory: **bytes in flight = bandwidth x latency**. A load issued now returns after the
# latency; to keep DRAM busy for all that time, enough other loads must already be on their way. With fewer in
# flight, bandwidth drops to bytes in flight / latency, whatever the peak. With an H100 SXM's round figures:

# %%
# H100 SXM, approximate, not measured here. Peak HBM3 bandwidth 3.35 TB/s and 132 SMs: NVIDIA's H100 datasheet
# and "NVIDIA Hopper Architecture In-Depth" (NVIDIA technical blog, 2022). DRAM latency: a load that misses L2
# takes several hundred ns on Hopper in pointer-chasing microbenchmarks (e.g. Luo et al., "Benchmarking and
# Dissecting the Nvidia Hopper GPU Architecture", arXiv:2402.13499, and Chips and Cheese, "Nvidia's H100: Funny
# L2, and Tons of Bandwidth", 2023). The sources differ with their method (roughly 300 to 500 ns idle, more
# under load, when the queues fill): we span 400 to 800 ns, and the conclusion holds across it.
bandwidth, sms = 3.35e12, 132                   # bytes per second; SMs
for latency_ns in (400, 600, 800):
    in_flight = bandwidth * latency_ns * 1e-9
    print(f"latency {latency_ns} ns: {in_flight / 1e6:.1f} MB in flight on the GPU = {in_flight / sms / 1e3:.1f} KB "
          f"per SM")

need = bandwidth * 700e-9 / sms                 # bytes per SM, at 700 ns
per_lane = 8 * 16                               # resample_in_flight: eight 16-byte loads issued before the first use
threads = s05.PARAMS["threads"] * s05.PARAMS["blocks_per_sm"]
print(f"\nstage 05's main kernel: {s05.PARAMS['blocks_per_sm']} blocks x {s05.PARAMS['threads']} threads = {threads:,} "
      f"threads an SM, {per_lane} bytes each: up to {threads * per_lane / 1e3:.0f} KB an SM, "
      f"{threads * per_lane / need:.1f}x the {need / 1e3:.1f} KB needed at 700 ns")
print(f"with all eight loads in flight, {need / per_lane:.0f} threads ({need / per_lane / 32:.1f} warps) an SM "
      f"would do; with one 16-byte load a thread, {need / 16:,.0f} threads")

# %% [markdown]
# So with one 16-byte load in flight a thread (at 700 ns), more than half of the 2,048 threads an SM can hold
# must be resident just to break even; with eight a thread, a few warps suffice. Why then keep several times more in flight than the
# product? The latency grows when DRAM is busy (requests queue), and a lane's eight loads are in flight together
# only until they land: while it interpolates, stores and fetches the next group's `(lo, w)`, it has few or none on
# the way. The headroom is what keeps the *average* above the need. The copy ceiling in `results/` is below the
# 3.35 TB/s peak, so the real need is a little lower still.
#
# ## What the profiler says: bytes in flight
#
# The bytes in flight come from the warps an SM holds (achieved occupancy) times the bytes each has requested
# and not yet used: stage 05's main kernel raises the second factor, eight 16-byte loads a lane issued before
# the first is used.

# %%
p = profile.show("resample", "04_smem_windows", "05_double_buffered")
for stage in ("04_smem_windows", "05_double_buffered"):
    k = p.kernel(stage) if p else None
    if k:
        print(f"{stage} ({k['kernel']}): DRAM busy {k['dram_pct']:.0f} % of its peak, {k['dram_GBps']:,.0f} GB/s, "
              f"with {k['occupancy_pct']:.0f} % of the warp slots filled and {k['registers']:.0f} registers a thread")

# %% [markdown]
# ## Experiments
#
# **Which buffers?** The two ways, side by side. **Blocks per SM**: how many warps it takes to keep enough
# bytes in flight; with 4 targets a warp, too few warps starve DRAM and too many buy nothing (the launch never
# starts more blocks than fit on the SMs at once). Try also `vec_bytes=8` or `4`: fewer bytes a load means fewer bytes in flight.
#
# One more experiment worth trying in your own copy: prefetch the *next* group's rows before storing this one
# (a true double buffer in registers). On an H200 while this stage was built (a reading, not a results/ record;
# its commit was not kept) it was slower: 94 registers a thread instead of 56 in that build (the H100 and H200
# profiles in results/profiles/ have 64 for today's default kernel) cost more warps per SM than the prefetch
# gained.

# %%
resample.sweep("05_double_buffered", "buffers", ["shared", "registers"])
resample.sweep("05_double_buffered", "blocks_per_sm", [2, 4, 8, 16])

# %% [markdown]
# Next: [06 · cp.async](06_cp_async.ipynb): copies from global to shared memory with no registers in between
# and no stall, the hardware's own way to keep the window design's loads in flight.

# %% [markdown]
# Write this stage's kernel yourself: [lab 05](../../labs/resample/05_double_buffered.ipynb) (the completed version:
# [solution](../../solutions/resample/05_double_buffered_SOLUTION.ipynb)).
