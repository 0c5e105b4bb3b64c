# %% [markdown]
# # 03 · Coalescing: wide, aligned accesses
#
# Stage 02 made the warp's accesses *contiguous*: 32 lanes x 2 bytes = 64 neighbouring bytes per load. But
# each lane still moves only 2 bytes per instruction, so for D = 256 a warp issues 8 load instructions per
# source row, 16 for the two rows it blends, and 8 stores. Every instruction costs issue slots and a trip
# through the load/store unit. Now each lane moves **4, 8 or 16 bytes** per instruction: 2, 4 or 8 channels.
#
# The catch is **alignment**: a 16-byte access must start at an address that is a multiple of 16. Row `r` of
# the features starts at `r * D * 2` bytes, so every row is aligned for a width only when `D * 2` is a
# multiple of it. For other D the stage falls back to the widest width that divides `D * 2`. Never wrong,
# only slower.
#
# References: CUDA: [device memory accesses](https://docs.nvidia.com/cuda/cuda-c-programming-guide/index.html#device-memory-accesses)
# (access sizes and alignment), [coalesced access to global memory](https://docs.nvidia.com/cuda/cuda-c-best-practices-guide/index.html#coalesced-access-to-global-memory);
# PTX ISA: [ld](https://docs.nvidia.com/cuda/parallel-thread-execution/index.html#data-movement-and-conversion-instructions-ld)
# and [st](https://docs.nvidia.com/cuda/parallel-thread-execution/index.html#data-movement-and-conversion-instructions-st)
# (the `.v4` vector forms); Numba: [`@intrinsic`](https://numba.readthedocs.io/en/stable/extending/high-level.html#implementing-intrinsics),
# [`inspect_sass`](https://nvidia.github.io/numba-cuda/reference/kernel.html#dispatcher-objects).

# %%
import cudabook
print(cudabook.where())

import numpy as np
import matplotlib.pyplot as plt
from numba import cuda
from cudabook import resample
from cudabook.bits import bf16_to_f32, f32_to_bf16, lerp
from cudabook.resample import s03_coalesced as s03
from cudabook.resample.s02_warp_shuffles import WARP, warp_and_lane, warp_find_interval, warp_target, warp_weight
from cudabook.resample.s03_coalesced import load_u32x4, store_u32x4   # its 16-byte load and store (below)

# %% [markdown]
# ## Which bytes does each lane touch, per instruction?
#
# One warp-wide load of one feature row (D = 256, 512 bytes). Each bar is one lane's access; the grey lines
# are 32-byte sector boundaries. With 2-byte accesses a warp covers 64 bytes per instruction; with 16-byte
# accesses it covers the whole 512-byte row in one instruction.

# %%
fig, axes = plt.subplots(4, 1, figsize=(9, 5), sharex=True)
for ax, width in zip(axes, (2, 4, 8, 16)):
    addrs = s03.lane_addresses(width, 256)
    for lane, first, last in addrs:
        ax.plot([first, last + 1], [lane, lane], lw=2.5, solid_capstyle="butt")
    for s in range(0, 513, 32):
        ax.axvline(s, color="0.85", lw=0.5, zorder=0)
    ax.set_ylabel("lane", fontsize=8)
    ax.set_title(f"{width:2d} bytes per lane: {len(addrs) * width} bytes, {s03.transactions(addrs)} sectors "
                 f"in one instruction", fontsize=8, loc="left")
axes[-1].set_xlabel("byte offset within the feature row")
fig.tight_layout(); plt.show()

# %% [markdown]
# ## How do you make Numba emit a 16-byte load?
#
# - 4 and 8 bytes are easy: view the `uint16` device array as `uint32` or `uint64` (`p.feats.view(np.uint32)`:
#   same memory, last axis D/2 long) and index it as usual; the compiler emits 4- and 8-byte loads.
# - 16 bytes: Numba has no 128-bit integer, and two 8-byte loads stay two instructions (the compiler cannot
#   know the pair is 16-byte aligned). A tiny `@intrinsic` loads a `<4 x i32>` LLVM vector through a pointer it
#   declares 16-byte aligned: `ld.global.v4.u32` in PTX, `LDG.E.128` in the machine code (SASS).
#
# Each 32-bit word holds two bf16 channels (the lower address in the low half); `lerp_pair` blends both.
# `warp_target` is stage 02's opening in one call: the warp's target, its time and the lane.

# %%
#! kernel resample/s02_warp_shuffles warp_target


#! kernel resample/s03_coalesced lerp_pair


#! kernel resample/s03_coalesced resample_vec16

# %% [markdown]
# On a GPU, the machine code proves it: look for `LDG.E.128` (16-byte global loads) and `STG.E.128`.

# %%
if cudabook.SIMULATOR:
    print("No GPU: SASS needs a real compile for a real GPU. On an H100 the loop body shows LDG.E.128 / STG.E.128.")
else:
    st, sf, tt = resample.random_problem(2, 64, 64, 256)
    s03.launch(resample.upload(st, sf, tt))          # compiles the kernel for this GPU
    sass = next(iter(s03.resample_vec16.inspect_sass().values()))
    print("\n".join(line.strip() for line in sass.splitlines() if ".128" in line))

# %% [markdown]
# ## Is it right, for every width and any D?

# %%
size = resample.demo_size()
for width in (4, 8, 16):
    for D in (size["D"], 7, 12):
        v = resample.check_launch(s03.launch, size["B"], size["S"], size["T"] // 2, D, vec_bytes=width)
        print(f"vec_bytes={width:2d} D={D:3d} (runs {s03.vector_width(width, D):2d}-byte accesses): {v.message.splitlines()[0]}")

# %% [markdown]
# ## What the profiler says: requests and sectors
#
# A *request* is one warp-wide load instruction arriving at L1; a *sector* is one of the 32-byte pieces it
# moves. Stages 02 and 03 read the same rows, so about the same sectors: for a 512-byte row (D = 256),
# 2-byte lanes need 8 requests and 16-byte lanes one. The counters show what that did to the whole kernel,
# searches included.

# %%
from cudabook import profile
p = profile.show("resample", "02_warp_shuffles", "03_coalesced")
k02, k03 = (p.kernel(s) if p else None for s in ("02_warp_shuffles", "03_coalesced"))
for k in (k02, k03):
    if k:
        print(f"{k['stage']}: {k['load_requests']:,.0f} global load requests x {k['sectors_per_request']:.1f} "
              f"sectors = {k['load_sectors']:,.0f} sectors")
if k02 and k03:
    print(f"03 reads {k03['load_sectors'] / k02['load_sectors']:.2f}x the sectors of 02 with "
          f"{k02['load_requests'] / k03['load_requests']:.1f}x fewer requests")

# %% [markdown]
# ## How fast?

# %%
resample.ladder_so_far("03_coalesced")

# %% [markdown]
# ## Experiment: the vector width
#
# Prediction: fewer, wider instructions help, but the gain flattens out, because at some point the kernel
# waits on memory latency, not on instruction issue: each warp still handles one target at a time, with
# the feature loads waiting on the search. What limits it next is *how many bytes are in flight*.

# %%
resample.sweep("03_coalesced", "vec_bytes", [2, 4, 8, 16])

# %% [markdown]
# Compare with the prediction. In the sweeps recorded in results/sweeps/ (H100 and H200) the gain does not flatten:
# the last doubling, 8 to 16 bytes, gains more than 4 to 8. A 16-byte load is one instruction where 8-byte loads are
# two: fewer instructions to issue, and more of a row in flight at once. Which of the two pays here, the profile
# printed above hints: this stage's warps wait mostly for an issue slot or a pipe, and only a small share of their
# cycles on memory, so fewer instructions is the likelier reason (a reading of that profile, not a separate
# measurement). Bytes in flight become the theme of the next stages, once the instructions are few.
#
# Every warp reads its two source rows straight from global memory, and neighbouring targets share source
# rows (about one source interval per target at S = T): a source row is fetched about twice on average (some
# not at all, some three times or more), from L2 if lucky. Next, [04 · shared-memory windows](04_smem_windows.ipynb): a block loads the rows its targets need
# once, into shared memory.

# %% [markdown]
# Write this stage's kernel yourself: [lab 03](../../labs/resample/03_coalesced.ipynb) (the completed version:
# [solution](../../solutions/resample/03_coalesced_SOLUTION.ipynb)).
