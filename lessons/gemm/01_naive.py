# %% [markdown]
# # GEMM 01 · Naive: one thread per element of C
#
# **The problem.** `C = A @ B`, with A `[M, K]` and B `[K, N]` in bf16 (`ml_dtypes.bfloat16` on the host,
# row-major as NumPy's `a @ b`). Every product is summed in float32, and each element of C is rounded to bf16
# (nearest even) **once**, at the end. Any M, N, K >= 1.
#
# The resampling track was about moving bytes. A matrix product is about arithmetic: it does `2 M N K` FLOPs
# on `2 (M K + K N + M N)` bytes, so at M = N = K = 4096 each byte that *must* be read is used in about 1,400
# FLOPs. A GEMM can keep the GPU's arithmetic units busy, if the kernel reuses what it loads. This rung
# reuses nothing, on purpose: it is the yardstick the next two rungs are measured against.

# %%
import cudabook
print(cudabook.where())

import numpy as np
import matplotlib.pyplot as plt
from cudabook import SIMULATOR, gemm, lesson
from cudabook.gemm import s01_naive

a, b = gemm.random_problem(17, 33, 20, rng=np.random.default_rng(0))
c = gemm.run("01_naive", a, b)
print(gemm.judge(c, a, b))
print("C[0, :4] =", c[0, :4], "   float64 reference:", gemm.reference(a, b)[0, :4].round(4))

# %% [markdown]
# ## The kernel
#
# One thread per element of C. Thread `(m, n)` walks row `m` of A and column `n` of B: K multiply-adds into a
# float32 register, then one rounding. The grid is 2-D and **`threadIdx.x` runs along N**: the 32 threads of
# a warp are 32 neighbouring columns of the same row.
#
# ```
#   thread (m, n):  acc = 0
#                   for k in 0..K-1:  acc += A[m, k] * B[k, n]        (bf16 widened to float32)
#                   C[m, n] = round_to_bf16(acc)
# ```

# %%
from numba import cuda, float32
from cudabook.bits import bf16_to_f32, f32_to_bf16


#! kernel gemm.s01_naive gemm_naive

# %% [markdown]
# `bf16_to_f32` widens bf16 bits to float32 (a 16-bit shift); `f32_to_bf16` rounds to nearest even. Both are
# in `cudabook/bits.py`. Threads outside C (the grid is rounded up to whole blocks) return at once: this
# kernel has no barrier, so an early return is safe.
#
# ## Why `threadIdx.x` along N
#
# At step `k` the 32 threads of a warp read `A[m, k]`, one value for all of them (the hardware broadcasts it),
# and `B[k, n .. n+31]`, 64 consecutive bytes: two 32-byte sectors. At the end they store 64 consecutive
# bytes of C. Had `threadIdx.x` run along M instead, a warp would read 32 values of A from 32 different rows
# (`2 K` bytes apart) and store C in 32 different rows: 32 sectors for 64 useful bytes.

# %%
fig, axes = plt.subplots(1, 2, figsize=(9, 2.6))
for ax, along_n in zip(axes, (True, False)):
    grid = np.zeros((8, 40))
    if along_n:
        grid[2, 4:36] = 1                       # one warp: 32 neighbouring columns of row 2 of C
        title = "threadIdx.x along N: a warp stores 64 contiguous bytes of C"
    else:
        grid[0:8, 5] = 1                        # one warp: 32 rows of one column (8 drawn)
        title = "threadIdx.x along M: 32 rows, a sector each"
    ax.imshow(grid, cmap="Blues", aspect="auto", vmin=0, vmax=1.3)
    ax.set_title(title, fontsize=9)
    ax.set_xlabel("column n of C")
    ax.set_ylabel("row m")
plt.tight_layout()
plt.show()

# %% [markdown]
# ## Is it right?
#
# The checker's cases are mostly ragged on purpose: most sizes are not a multiple of a block, some K are not a
# multiple of 8, one case is 1 x 1 x 1 (and, on a GPU, one case is whole tiles). C is poisoned with NaN before each launch, so an element nobody writes fails. The
# tolerance is half a bf16 ulp (the final rounding) plus a worst-case bound on the float32 sums,
# `4 K u W / (1 - 4 K u)` with u = 2^-24 and W = (|A| @ |B| + |C|) / 2. It leaves room for the tensor cores of
# rungs 04 to 07, which cut toward zero where this rung rounds to nearest (`cudabook/gemm/inputs.py` derives it).

# %%
for name, M, N, K in gemm.cases():
    a, b = gemm.random_problem(M, N, K)
    print(f"{name:24s} M={M:4d} N={N:4d} K={K:4d}:", gemm.judge(gemm.run("01_naive", a, b), a, b).message)

# %% [markdown]
# ## How fast?
#
# On a GPU, the next cell times the rung at M = N = K = 4096 (CUDA events, median of many runs) together with
# cuBLAS in the same process on the same data: `torch.matmul` in bf16 (tensor cores) and in float32 with TF32
# off (SGEMM, the CUDA cores: the fair yardstick for rungs 01 to 03, which compute in fp32). With no GPU
# there is no clock to read: it shows the records in `results/` instead, measured on real GPUs.
#
# From lesson 02 on, this cell measures only the lesson's rung and the one before it, with cuBLAS. The earlier
# rungs come from this card's record in `results/`, marked ‡ with its card, commit and date, and drawn lighter.
# With no record for this card it says so and shows just the two. To measure every rung now, pass `full=True`
# (`gemm.ladder_so_far("03_register_blocking", peers=True, full=True)`) or set `CUDABOOK_FULL_LADDER=1`
# before starting Jupyter; it takes longer.

# %%
record = gemm.ladder_so_far("01_naive", peers=True)

# %% [markdown]
# ## Arithmetic intensity and the roofline
#
# How many FLOPs does a kernel do per byte it asks of global memory? That number, the **arithmetic
# intensity**, says which ceiling applies. A kernel at `I` FLOPs per byte on a GPU with bandwidth `BW` cannot
# beat `I x BW`, nor the arithmetic peak: the roofline is `min(peak, I x BW)`.
#
# - **01 naive:** per step k a warp loads 66 bytes (one broadcast `a`, 32 values of `b`) for 64 FLOPs: about
#   **1 FLOP per byte**.
# - **02 shared tiles** (next lesson): a block loads two `T x T` tiles (`4 T^2` bytes) and does `2 T^3` FLOPs
#   with them: **T / 2 FLOPs per byte**, 16 for T = 32.
# - **03 register blocking:** a `BM x BN` block tile loads `(BM + BN)` values per step k for `2 BM BN` FLOPs:
#   **BM BN / (BM + BN)**, 64 for 128 x 128.
#
# The picture uses an H100 SXM's spec-sheet values (3.35 TB/s, 67 TFLOP/s fp32 on the CUDA cores, 989 TFLOP/s
# dense bf16 on the tensor cores). The fp32 ridge is at 67 / 3.35 = 20 FLOPs per byte: left of it memory
# limits, right of it arithmetic. The intensities count every byte a warp asks for as if it came from DRAM;
# caches catch re-reads, so for rung 01 the line is a prediction to check. Stars are the TFLOP/s measured
# above (on this GPU, or recorded in `results/`).

# %%
points = [(s, s01_naive.intensity(s), s01_naive.measured_TFLOPs(record, s))
          for s in ("01_naive", "02_smem_tiles", "03_register_blocking")]
fig, ax = plt.subplots(figsize=(7, 4))
s01_naive.draw_roofline(ax, points)
plt.show()

# %% [markdown]
# The check, card by card: rung 01's recorded speed against what 1 FLOP a byte allows at that card's DRAM
# bandwidth (from the record's own machine description).

# %%
from cudabook import results

for rec in results.load_all():
    w = rec["workloads"].get("gemm M=4096 N=4096 K=4096", {}).get("stages", {}).get("01_naive", {})
    gbps = rec.get("machine", {}).get("theoretical_GBps")
    if w.get("TFLOPs") and gbps:
        roof = s01_naive.intensity("01_naive") * gbps / 1e3
        print(f"{rec['gpu']} at {rec['commit']}: DRAM {gbps:,.0f} GB/s -> roof {roof:.2f} TFLOP/s; "
              f"rung 01 measured {w['TFLOPs']:.2f} TFLOP/s ({w['TFLOPs'] / roof:.0%} of the roof)")

# %% [markdown]
# The prediction fails. Rung 01 runs at the same speed on both cards, though the H200's DRAM is the faster, and
# well under the line on each: DRAM bandwidth is not what holds it. A profile says what does (Nsight Compute
# on an H200 at commit 21368d8, one launch, not a record): DRAM moved 2.0 GB in the 103.6 ms, 0.4 % of its
# peak; the L2 hit rate was 87 %; and the warps waited mostly for the issue slot (`not_selected`, 43 % of warp
# cycles) and for a busy arithmetic pipe (`math_pipe_throttle`, 36 %). With 16 warps a scheduler, each
# issuing in 4.8 % of its cycles, a scheduler issues in about three quarters of its cycles: the limit is
# instructions (the loads, index arithmetic and bf16 widening around each FMA), not bytes.
#
# ## Experiment: the block's shape
#
# Change `threads_y` (rows of C a block covers; `threads_x` = 32 columns on a GPU). A taller block reuses
# each column of B across more rows while it is still in L1. Prediction to test: it helps a little, and no
# shape comes near cuBLAS, because every multiply-add still issues two loads. (Without a GPU the sweep only
# checks that every shape is correct.)

# %%
gemm.sweep("01_naive", "threads_y", [1, 2, 4, 8, 16])

# %% [markdown]
# Check the prediction against the recorded sweep: each shape's time against one row a block.

# %%
lesson.recorded_against("gemm", "01_naive", "threads_y", 1)

# %% [markdown]
# The first half of the prediction fails: in the record the five shapes are level, within about a percent.
# The second half holds. A warp's 32 lanes are 32 neighbouring columns of one row, so at every shape its load of
# A is one value for all of them and its load of B one coalesced row; a taller block only changes how many rows
# share each B row in L1. What no shape changes is the count: two loads for every multiply-add, the thing the
# next rung removes. Why the extra reuse gains nothing: it saves bytes, and bytes are not the limit (the
# profile above). One row a block, profiled the same way (H200, commit 21368d8, one launch, not a record),
# read 11.4 GB from DRAM instead of 2.0 GB and took the same time; with 8 warps a scheduler each issuing in
# 9.6 % of cycles, its schedulers were just as busy, about three quarters of their cycles.

# %% [markdown]
# Next: [02 · shared-memory tiles](02_smem_tiles.ipynb): load each value once per block, and use it T times.
