# %% [markdown]
# # GEMM 02 · Shared-memory tiles
#
# In rung 01 every multiply-add issues two loads from global memory. But thread `(m, n)` and thread
# `(m, n+1)` read the same row of A, and thread `(m+1, n)` the same column of B: a block of threads needs
# far fewer distinct values than it loads. This rung loads each value **once per block** into shared memory
# and lets every thread of the block use it from there.
#
# A block of `TILE x TILE` threads owns a `TILE x TILE` tile of C. It walks along K one tile at a time: each
# thread loads one element of the A tile and one of the B tile into shared memory, the block waits at a
# barrier, and then every thread does `TILE` multiply-adds reading only shared memory.

# %%
import cudabook
print(cudabook.where())

import numpy as np
import matplotlib.pyplot as plt
from matplotlib.patches import Rectangle
from cudabook import SIMULATOR, gemm
from cudabook.gemm import s01_naive, s02_smem_tiles as s02

why = "small in the simulator, where every thread runs in Python" if SIMULATOR else "a block of 1,024 threads"
print(f"TILE = {s02.TILE} here ({why})")

# %% [markdown]
# ## The tiles, drawn
#
# The block computing the orange tile of C needs the blue row-strip of A and the green column-strip of B. It
# takes them one `TILE`-wide step of K at a time (the darker squares: step `k0 = 2 TILE`), and the last step
# is partial when K is not a multiple of `TILE`: past the edges the tiles are filled with zeros, which add
# nothing to the sums.

# %%
def draw_tiles(M=6, N=7, K=5, bm=2, bn=3, step=2):
    fig, axes = plt.subplots(1, 3, figsize=(11, 3.2), gridspec_kw={"width_ratios": [K, N, N]})
    for ax, (rows, cols, title) in zip(axes, ((M, K, "A [M, K]"), (K, N, "B [K, N]"), (M, N, "C [M, N]"))):
        ax.set_xlim(0, cols); ax.set_ylim(rows, 0); ax.set_aspect("equal"); ax.set_title(title, fontsize=9)
        ax.set_xticks(range(cols + 1)); ax.set_yticks(range(rows + 1)); ax.grid(True, lw=0.5)
        ax.tick_params(labelbottom=False, labelleft=False)
    axes[0].add_patch(Rectangle((0, bm), K - 0.4, 1, color="C0", alpha=0.25))        # the row strip of A
    axes[0].add_patch(Rectangle((step, bm), 1, 1, color="C0", alpha=0.8))             # A tile at step k0
    axes[0].add_patch(Rectangle((K - 0.4, bm), 0.4, 1, fill=False, hatch="///"))      # partial last tile
    axes[1].add_patch(Rectangle((bn, 0), 1, K - 0.4, color="C2", alpha=0.25))         # the column strip of B
    axes[1].add_patch(Rectangle((bn, step), 1, 1, color="C2", alpha=0.8))
    axes[1].add_patch(Rectangle((bn, K - 0.4), 1, 0.4, fill=False, hatch="///"))
    axes[2].add_patch(Rectangle((bn, bm), 1, 1, color="C1", alpha=0.8))               # the block's tile of C
    fig.suptitle("each square is a TILE x TILE tile; the orange tile's block reads the strips a tile at a time "
                 "(hatched: past K, zero-filled)", fontsize=9)
    plt.show()


draw_tiles()

# %% [markdown]
# ## The kernel
#
# Two barriers per tile, and both are needed:
#
# 1. **after the loads**: no thread may read the tiles before every thread has written its element;
# 2. **after the multiply-adds**: no thread may overwrite the tiles with the next step's values while a slower
#    thread is still reading them.
#
# Because every thread must reach every barrier, threads outside C do not return early: they load zeros,
# take part in the barriers, and skip only the final store. `TILE` is a compile-time constant (a shared
# array's size must be); `launch(p, tile=8)` compiles the same kernel with `TILE = 8`
# (`s02_smem_tiles.specialise`).

# %%
from numba import cuda, float32
from cudabook.bits import bf16_to_f32, f32_to_bf16
from cudabook.gemm.s02_smem_tiles import TILE


#! kernel gemm.s02_smem_tiles gemm_tiled

# %% [markdown]
# The values are widened to float32 once, when they are stored to shared memory, so the inner loop is pure
# float32 arithmetic. Bank conflicts: at step `k`, the 32 threads of a warp (same `ty`, consecutive `tx`)
# read one `As[ty, k]` (a broadcast) and 32 consecutive `Bs[k, tx]` (32 different banks): none.
#
# ## Is it right?

# %%
for name, M, N, K in gemm.cases():
    a, b = gemm.random_problem(M, N, K)
    print(f"{name:24s} M={M:4d} N={N:4d} K={K:4d}:", gemm.judge(gemm.run("02_smem_tiles", a, b), a, b).message)

# %% [markdown]
# ## What limits it now
#
# Global memory no longer: `T / 2 = 16` FLOPs per byte at `T = 32`, close to the fp32 ridge of an H100
# (20). The new limit is **shared memory**. Each multiply-add of the inner loop needs two shared loads
# (`As[ty, k]` and `Bs[k, tx]`), and an SM serves one warp-wide shared load per clock (128 bytes a clock).
# So an SM completes at most one warp-wide FMA every two clocks, 16 FMAs a clock, while its 128 fp32 lanes
# could do 128: **at most 1/8 of the fp32 peak**, about 8.4 TFLOP/s on an H100 SXM (67 / 8, spec-sheet
# values). Changing `TILE` does not move this bound: the inner loop is the same for every tile size. The
# machine code agrees: compiled for sm_90 (numba-cuda 0.30's NVVM, then nvJitLink 13), a tile's inner loop at
# `TILE = 32` is 64 `LDS` and 32 `FFMA`, every load 4 bytes wide (none merged into a wider one).
#
# Rung 03 fixes it by making each value read from shared memory serve many FMAs, in registers.
#
# ## How fast?
#
# Rungs 01 and 02 against cuBLAS SGEMM (fp32, TF32 off) and bf16 cuBLAS, all measured in the same process
# (no GPU: the records in `results/`).

# %%
record = gemm.ladder_so_far("02_smem_tiles", peers=True)

# %%
points = [(s, s01_naive.intensity(s), s01_naive.measured_TFLOPs(record, s))
          for s in ("01_naive", "02_smem_tiles", "03_register_blocking")]
fig, ax = plt.subplots(figsize=(7, 4))
s01_naive.draw_roofline(ax, points)
ax.axhline(s01_naive.H100_SXM["fp32_TFLOPs"] / 8, color="C1", lw=0.8, ls="-.", label="02's shared-memory bound (1/8)")
ax.legend(fontsize=7, loc="lower right")
plt.show()

# %% [markdown]
# ## Experiment: tile size
#
# Bigger tiles read fewer bytes per FLOP from global memory (`T / 2`), but the shared-memory bound above is the
# same for all of them. Prediction to test: 16 and 32 run at about the same speed, and 8 is slower (4 FLOPs per
# byte: the caches have to work harder, and 64-thread blocks are small). Without a GPU the sweep checks that
# each size is correct.

# %%
gemm.sweep("02_smem_tiles", "tile", [8, 16, 32] if not SIMULATOR else [8, 16])

# %% [markdown]
# Write this kernel's tile loop yourself in `labs/gemm/02_smem_tiles.ipynb`. Next:
# [03 · register blocking](03_register_blocking.ipynb).
