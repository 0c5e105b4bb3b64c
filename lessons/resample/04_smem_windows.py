# %% [markdown]
# # 04 · Shared-memory windows and a persistent grid
#
# In stage 03 every warp fetches its own two source rows. With sorted targets and S = T, neighbouring
# targets share source rows, so most rows are requested about twice (the count below), and every warp first
# waits on a search. Both are waste we can see:
#
# ```
#   targets (sorted):  t0 t1 t2 t3 t4 t5 ... t31        one block = a run of 32 targets
#   source rows:       [ r17 r18 r19 ... r47 r48 ]       = the window those targets need
# ```
#
# A **block** takes a run of consecutive targets. Their intervals lie in one short stretch of source rows,
# the **window**: from the interval of the first target to the interval of the last. Two searches find it
# (not 32). The block loads the window's rows, and their times, into **shared memory** once, with wide
# coalesced loads, then interpolates all its targets from there. Each source row is now *requested* once per
# window, instead of once for every target that needs it. (That is fewer requests, not fewer DRAM bytes: in
# stage 03 the second request for a row mostly hits the L2 cache already, and a window also loads rows that no
# target uses. More on this below and in 05.)
#
# Shared memory is the block's scratchpad: on-chip, tens of cycles away instead of DRAM's hundreds, and
# visible to every thread of the block. The price is a `cuda.syncthreads()` between writing it and reading it.
#
# References: Numba [shared memory and `syncthreads`](https://nvidia.github.io/numba-cuda/user/memory.html#shared-memory-and-thread-synchronization);
# CUDA: [shared memory](https://docs.nvidia.com/cuda/cuda-c-programming-guide/index.html#shared-memory),
# [memory banks](https://docs.nvidia.com/cuda/cuda-c-best-practices-guide/index.html#shared-memory-and-memory-banks);
# PTX ISA: [bar.sync](https://docs.nvidia.com/cuda/parallel-thread-execution/index.html#parallel-synchronization-and-communication-instructions-bar-barrier)
# (what `syncthreads` becomes), [cvt](https://docs.nvidia.com/cuda/parallel-thread-execution/index.html#data-movement-and-conversion-instructions-cvt)
# (`cvt.rn.bf16x2.f32`: the kernel rounds two channels to bf16 in one instruction, emitted by a small `@intrinsic`).
#
# The grid is **persistent**: a fixed number of blocks (SMs x `blocks_per_sm`, never more than fit on the GPU at
# once) loops over all the work items (the design of the optimisation log this track grew from), so block
# start-up is paid once and shared memory is reused window after window.
#
# And it is **correct for every input**: when targets are unsorted, or a run spans more rows than the window
# holds, that work item falls back to stage 02's per-target path, reading global memory directly.

# %%
import cudabook
print(cudabook.where())

import numpy as np
import matplotlib.pyplot as plt
from cudabook import resample
from cudabook.resample import s04_smem_windows as s04

# %% [markdown]
# ## How much traffic does a window save?
#
# Count, for one batch row, how many source-row fetches stage 03 makes (two per target), how many distinct rows
# those are, and the rows the windows load (each window's rows once, from its first target's interval to its
# last's), for runs of 32 targets:

# %%
row_times, _, row_targets = resample.random_problem(1, 4096, 4096, 1, rng=1)
lo = np.clip(np.searchsorted(row_times[0], row_targets[0], side="right") - 1, 0, 4094)
per_target_rows = 2 * len(lo)
runs = lo.reshape(-1, 32)
window_rows = int(np.sum(runs[:, -1] + 2 - runs[:, 0]))
distinct_rows = len(np.unique(np.concatenate([lo, lo + 1])))     # the rows some target's interval uses
print(f"stage 03 fetches {per_target_rows} source rows, {distinct_rows} distinct ones; windows of 32 targets load "
      f"{window_rows} ({per_target_rows / window_rows:.1f}x fewer fetches, but {window_rows / distinct_rows:.2f}x the "
      f"distinct rows). Widest window: {int(np.max(runs[:, -1] + 2 - runs[:, 0]))} rows")
fig, ax = plt.subplots(figsize=(7, 2.4))
ax.hist(runs[:, -1] + 2 - runs[:, 0], bins=30)
ax.set_xlabel("rows in a window of 32 sorted targets (S = T = 4096)"); ax.set_ylabel("windows"); plt.show()

# %% [markdown]
# Fewer fetches, more rows. Random sorted targets at S = T leave some intervals without a target, and the rows
# of those are needed by no one: stage 03 never fetches them, but a window loads every row from its first
# target's interval to its last's. Neighbouring windows also share an edge row, which both load.

# %% [markdown]
# ## The kernel
#
# The work item loop, and inside it the part you write in the lab: fill the window, sync, locate each target
# in the window (a search in shared memory), sync, interpolate.

# %%
from numba import cuda, float32, int32, uint32
from cudabook.resample.s04_smem_windows import *   # the device functions the kernel calls


#! kernel resample/s04_smem_windows resample_windows

# %% [markdown]
# Filling the window is where the bandwidth goes. Each thread issues a batch of wide loads (16 bytes each)
# into registers before it stores any of them to shared memory, so 8 loads per thread are in flight at once:

# %%
#! kernel resample/s04_smem_windows fill_window

# %% [markdown]
# ## Shared-memory banks: do any of these accesses conflict?
#
# Shared memory is 32 **banks** of 4-byte words: the word at byte address `a` lives in bank `(a / 4) % 32`, and a
# bank delivers one word per cycle. A warp's access takes one pass when its lanes hit different banks, or the
# very same word (read once and broadcast). Lanes that want *different* words of the *same* bank **conflict**:
# the bank serves them one after another, and an n-way conflict takes n passes. One pass moves at most
# 32 x 4 = 128 bytes, so a 16-byte access per lane (512 bytes a warp) takes at least four passes, a quarter-warp
# of 8 lanes each; it is conflict-free when each quarter-warp's 8 lanes cover all 32 banks.
#
# The bank each lane hits, for the window's rows (D = 256: a row is `cw` = 128 words; colour: the quarter-warp,
# one pass each), and for the access this kernel avoids:

# %%
def passes(byte_addresses, width):
    """Passes one warp-wide shared-memory access takes, in the model above: for each group of lanes one pass can
    serve (32 lanes of 4 bytes, 16 of 8, 8 of 16), the most distinct 4-byte words that fall in one bank."""
    group = 32 if width == 4 else 128 // width
    total = 0
    for g in range(0, 32, group):
        words = {(a + i) // 4 for a in byte_addresses[g:g + group] for i in range(0, width, 4)}
        if words:
            total += np.bincount([w % 32 for w in words], minlength=32).max()
    return total


cw = s04.PARAMS["chunk_cols"] // 2              # words a window row holds (D = 256: 128)
lane = np.arange(32)
row = 5 * cw                                    # any row of the window: row r starts at word r * cw
patterns = [
    ("interpolate_window, fill_window:\nlane L, 16 bytes at word row + 4L", 4 * (row + 4 * lane), 16),
    ("a column, lane L in row L\n(not in this kernel)", 4 * (lane * cw), 4),
    ("the same column, rows padded\nto cw + 1 words", 4 * (lane * (cw + 1)), 4),
]
fig, axes = plt.subplots(1, 3, figsize=(10, 3), sharey=True)
for ax, (title, addr, width) in zip(axes, patterns):
    for L in lane:
        banks = [(addr[L] // 4 + i) % 32 for i in range(width // 4)]
        ax.scatter([L] * len(banks), banks, s=10, color=f"C{L // 8 if width == 16 else 0}")
    n = passes(list(addr), width)
    ax.set_title(f"{title}\n{n} pass{'es' if n > 1 else ''}", fontsize=8)
    ax.set_xlabel("lane")
axes[0].set_ylabel("bank")
fig.tight_layout(); plt.show()

# %% [markdown]
# The window is packed, row `r` at word `r * cw` with no padding, and needs none: every warp that touches it runs
# *along* a row (the fill's stores, consecutive threads on consecutive 16-byte pieces; the interpolation's two
# row reads, lane L at bytes 16L..16L+15), and takes the four passes any 512-byte access needs. Padding is the
# cure for the middle picture: a warp that reads down a column of a table whose rows are a multiple of 32 words
# long sends all 32 lanes to one bank, and one float more per row spreads them over all 32 (the tiled attention
# lesson pads its keys for exactly this). The times and targets are written one word a lane (consecutive: no
# conflict), and each target's interval and weight are read by a whole warp at one address (a broadcast).
#
# One access here is data-dependent: the search in the window's times (`locate_targets`, one lane a target, warp
# 0 for a run of 32). Every lane probes `wt[mid]` of its own search, and the window's times start at word
# `window_rows * cw`, a multiple of 32; two lanes conflict when their probes are different words 32 apart.
# Replayed on the windows of the first cell's batch row:

# %%
tbase = s04.PARAMS["window_rows"] * cw          # the window's times start here (words)
per_step = {}
for r in range(len(runs)):
    row0, span = runs[r, 0], runs[r, -1] + 2 - runs[r, 0]
    if span > s04.PARAMS["window_rows"]:
        continue                                # too wide: the per-target path, no search in shared memory
    wt, x = row_times[0, row0:row0 + span], row_targets[0, 32 * r:32 * r + 32]
    low, high = np.zeros(32, int), np.full(32, span - 1)    # window_interval, for 32 lanes at once
    step = 0
    while np.any(high - low > 1):
        active = high - low > 1
        mid = (low + high) // 2
        per_step.setdefault(step, []).append(passes(list(4 * (tbase + mid[active])), 4))
        right = active & (wt[mid] <= x)
        low, high = np.where(right, mid, low), np.where(active & ~right, mid, high)
        step += 1
print("probe step  windows still searching  passes: mean  worst")
for step, counts in per_step.items():
    print(f"{step + 1:10d}  {len(counts):23d}  {np.mean(counts):12.2f}  {max(counts):5d}")

# %% [markdown]
# The first probes are the same word for every lane (a broadcast); the later ones spread over the window, and
# now and then two of them fall 32 words apart: a 2-way conflict. That is less than one extra pass per search on
# average, on one warp of the block, next to the window's fill: not worth a layout change.

# %% [markdown]
# ## Is it right? Sorted, unsorted, windows too wide

# %%
size = resample.demo_size()
print("sorted   ", resample.check_launch(s04.launch, **size))
print("unsorted ", resample.check_launch(s04.launch, **size, sorted_targets=False))
print("too wide ", resample.check_launch(s04.launch, 1, 200, 12, 6, window_rows=4))

# %% [markdown]
# ## How fast?

# %%
resample.ladder_so_far("04_smem_windows")

# %% [markdown]
# ## Why is 04 faster than 03?
#
# Not because DRAM moves fewer bytes: it moves more. A row that two neighbouring targets need is read by two
# warps of stage 03 shortly after one another, and the second read mostly hits the L2 cache, so DRAM sees it
# about once in both stages; and the windows add the rows no target uses, counted above. The Nsight Compute
# profiles recorded in results/profiles/ (one launch at the benchmark size on each card) show it, with the
# load requests and what the warps waited for:

# %%
from cudabook import profile

for rec in profile.load_records("resample"):
    p = profile.from_record(rec, ["03_coalesced", "04_smem_windows"])
    k3, k4 = p.kernel("03_coalesced"), p.kernel("04_smem_windows")
    if not (k3 and k4):
        continue
    size = p.stages["04_smem_windows"]["size"]
    print(f"{rec['gpu']} · Nsight Compute · commit {rec['commit']} (the source features: "
          f"{2 * size['B'] * size['S'] * size['D'] / 1e6:.1f} MB)")
    for k in (k3, k4):
        stalls = ", ".join(f"{r} {v:.0f}" for r, v in list(k["stalls"].items())[:3])
        print(f"  {k['stage']}: {k['dram_read_MB']:.1f} MB read from DRAM, {k['load_requests']:,.0f} global load "
              f"requests; stalls ({k['stall_unit']}): {stalls}")
    print(f"  04 reads {k4['dram_read_MB'] / k3['dram_read_MB'] - 1:.0%} more from DRAM than 03, "
          f"with {k3['load_requests'] / k4['load_requests']:.1f}x fewer global load requests")

# %% [markdown]
# Stage 04 reads about the whole feature tensor, stage 03 only the rows some target uses. What the window removes
# is work on the way, and it is not the only change between the two kernels:
#
# - **fewer requests through L1 and L2**: each row fetch is a warp-wide load that occupies the load/store units,
#   L1 and the L2 slices whether it hits or not; the window makes far fewer (printed above);
# - **fewer searches in global memory**: two per block of 32 targets instead of one per target, so far fewer
#   chains of dependent global loads to wait on before any feature moves (each target still searches the
#   window, in shared memory);
# - **cheaper arithmetic per channel**, which has nothing to do with the window: stage 03 rounds each channel
#   to bf16 with the integer recipe of lesson 01 (`f32_to_bf16`: a NaN test, an add, shifts and a mask),
#   stage 04 rounds two channels with one `cvt.rn.bf16x2.f32` and unpacks each with a single shift or mask.
#   Both round to nearest even and write the same bf16 values with the same 16-byte stores: the output is the
#   same, the instruction count is not. Stage 03's warps wait mostly for an issue slot or a math pipe
#   (`not_selected`, `math_pipe_throttle` above), so fewer instructions can be worth as much as the window.
#
# The records do not separate the three. How much of the gain is the window and how much the rounding is open:
# stage 04 built with 03's rounding (or 03 with `cvt`) would tell. The timings, stage 03 against 04, at the
# benchmark size:

# %%
from cudabook import results

for record in results.load_all():
    for name, w in record["workloads"].items():
        a, b = (w["stages"].get(k, {}).get("median_us") for k in ("03_coalesced", "04_smem_windows"))
        if name.startswith("resample ") and a and b:
            print(f"{record['gpu']} · {name}: 03 {a:.1f} µs -> 04 {b:.1f} µs ({a / b:.2f}x)")

# %% [markdown]
# ## Experiment: targets per block, and blocks per SM
#
# Larger runs share more rows per window, but the window holds `window_rows` rows (64): a run of 64 sorted
# targets spans about 65 rows at S = T, overflows it, and takes the slower per-target path. Prediction to test:
# performance follows the bytes in flight per SM (blocks per SM x loads per thread x threads), until the
# registers cap the blocks an SM holds (102 registers a thread in the H100 profile: 4 blocks of 128 threads);
# the launch never starts more blocks than fit, so asking for more changes nothing.

# %%
resample.sweep("04_smem_windows", "targets_per_block", [16, 32, 64])
resample.sweep("04_smem_windows", "blocks_per_sm", [1, 2, 4, 8])

# %% [markdown]
# While a block waits at `syncthreads` for its window, it has no loads in flight of its own. Next,
# [05 · double buffering](05_double_buffered.ipynb): keep the next loads in flight while computing.

# %% [markdown]
# Write this stage's kernel yourself: [lab 04](../../labs/resample/04_smem_windows.ipynb) (the completed version:
# [solution](../../solutions/resample/04_smem_windows_SOLUTION.ipynb)).
