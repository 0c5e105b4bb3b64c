# %% [markdown]
# # Attention 03 · Tiled: K and V tiles in shared memory, one rescale per tile
#
# Rung 02 has no score matrix, but every query row's warp fetches every key and value row it needs on its own:
# a key row travels from L2 once per query row. This rung gives a **block** a group of `BQ` query rows of one
# head, and walks the keys in **tiles of 32**: the block's threads copy a tile of K and V into shared memory
# once, and all `BQ` rows use it. And since a tile's 32 scores are at hand together, the running max is raised
# once per tile, not once per key: one rescale per tile.
#
# This is FlashAttention's idea ([arXiv:2205.14135](https://arxiv.org/abs/2205.14135): tiles in shared memory, an
# online softmax, S never in memory) in FlashAttention-2's loop order
# ([arXiv:2307.08691](https://arxiv.org/abs/2307.08691): a block owns query rows and walks the keys, O stays on
# chip and is divided by l once at the end; the first paper's loop runs over the key tiles outside, with O in
# global memory), on CUDA cores in float32; rungs 04 to 06 put the two matrix products on tensor cores. Numba:
# [shared memory and barriers](https://nvidia.github.io/numba-cuda/user/memory.html); CUDA:
# [shared memory](https://docs.nvidia.com/cuda/cuda-c-programming-guide/index.html#shared-memory),
# [bank conflicts](https://docs.nvidia.com/cuda/cuda-c-best-practices-guide/index.html#shared-memory-and-memory-banks).
#
# Without a GPU the kernel runs in Numba's CUDA simulator (blocks of 2 warps of 2 rows there, to keep it quick),
# and the speeds shown are the records in `results/`.

# %%
import cudabook
print(cudabook.where())

import math
import numpy as np
import matplotlib.pyplot as plt
from matplotlib.patches import Rectangle
from cudabook import SIMULATOR, attention
from cudabook.attention import inputs, s03_tiled as s03
from cudabook.attention.problem import Problem

print("launch parameters:", s03.PARAMS, "; keys a tile:", s03.BK)

# %% [markdown]
# ## The tiles, and the ones a causal problem skips
#
# Cut the `Nq x Nk` score matrix into blocks of `BQ` query rows by tiles of `BK = 32` keys: each block of the
# grid walks one row of tiles. With `causal=True`, query `i` sees keys `j <= i`: a tile that starts past the
# block's last row holds nothing any of its rows may see, and the block never loads it. A tile the diagonal
# cuts through is computed, with each key past its row masked. Drawn for N = 256 and this machine's block shape
# (`s03.PARAMS`: 4 warps of 4 rows on a GPU, 2 of 2 in the simulator):

# %%
def tile_kinds(N, bq, bk):
    """For a causal N x N problem: per (query block, key tile), 0 skipped, 1 cut by the diagonal, 2 whole."""
    kinds = np.zeros((-(-N // bq), -(-N // bk)), int)
    for a in range(kinds.shape[0]):
        first, last = a * bq, min(N, (a + 1) * bq) - 1              # the block's rows
        for t in range(kinds.shape[1]):
            lo, hi = t * bk, min(N, (t + 1) * bk) - 1               # the tile's keys
            kinds[a, t] = 0 if lo > last else (2 if hi <= first else 1)
    return kinds


bq = s03.PARAMS["warps"] * s03.PARAMS["rows_per_warp"]             # query rows a block
N = 256
kinds = tile_kinds(N, bq, s03.BK)
fig, ax = plt.subplots(figsize=(5, 5))
colors = {0: "0.93", 1: "C1", 2: "C0"}
for a in range(kinds.shape[0]):
    for t in range(kinds.shape[1]):
        ax.add_patch(Rectangle((t * s03.BK, a * bq), s03.BK, bq, facecolor=colors[kinds[a, t]],
                               edgecolor="w", lw=0.5))
ax.plot([0, N], [0, N], "k-", lw=0.8)
ax.set_xlim(0, N); ax.set_ylim(N, 0); ax.set_aspect("equal")
ax.set_xlabel("key j (tiles of 32)"); ax.set_ylabel(f"query i (blocks of {bq})")
ax.set_title("causal: blue whole tiles, orange cut by the diagonal, grey skipped", fontsize=9)
plt.show()
for N in (256, 4096):
    k_ = tile_kinds(N, bq, s03.BK)
    print(f"N = {N:5,}: {np.mean(k_ == 0):.1%} of the tiles skipped, {np.mean(k_ == 1):.1%} cut by the diagonal")

# %% [markdown]
# ## One rescale per tile
#
# Rung 02 updated the running max at every key. With a tile's scores `s_1 .. s_32` at hand, take their max
# first, then update once:
#
# $$m_\text{new} = \max\big(m, \max_t s_t\big), \quad \alpha = e^{m - m_\text{new}}, \quad
# l \leftarrow \alpha\, l + \sum_t e^{s_t - m_\text{new}}, \quad o \leftarrow \alpha\, o + \sum_t e^{s_t - m_\text{new}}\, v_t .$$
#
# It is rung 02's update applied to a tile as if it were one key: by the same argument every term still ends up
# as `e^{s_j - m_final}`. In NumPy, for one row, against the reference; and how many times `exp` computes an
# `alpha` each way:

# %%
def tiled_row(s, v, bk=32):
    """The online softmax over one row, a tile of bk keys at a time: scores s [N], values v [N, d] -> out [d]."""
    m, l, o = -np.inf, 0.0, np.zeros(v.shape[1])
    for j0 in range(0, len(s), bk):
        st, vt = s[j0:j0 + bk], v[j0:j0 + bk]
        m_new = max(m, st.max())
        alpha = np.exp(m - m_new)
        p = np.exp(st - m_new)
        l = l * alpha + p.sum()
        o = o * alpha + p @ vt
        m = m_new
    return o / l


q, k, v, _ = attention.random_problem(1, 1, 1, 200, 64, rng=np.random.default_rng(0))
s = inputs.float64(q)[0, 0, 0] @ inputs.float64(k)[0, 0].T / math.sqrt(64)
out = tiled_row(s, inputs.float64(v)[0, 0])
print(f"tiled online softmax vs the reference: {np.abs(out - inputs.reference(q, k, v)[0, 0, 0]).max():.1e}")
print(f"alphas computed for {len(s)} keys: {len(s)} one key at a time (rung 02), "
      f"{-(-len(s) // s03.BK)} a tile at a time (rung 03)")

# %% [markdown]
# ## Who does what in a block
#
# A block is `WARPS` warps; warp `w` serves `ROWS` query rows. For each tile:
#
# 1. **load**: all the block's threads copy the tile's K and V rows (32 x d each) into shared memory, widened to
#    float32; thread `tid` copies elements `tid, tid + THREADS, ...`, so neighbouring threads read neighbouring
#    channels of a row: coalesced. Keys past `Nk` are written as zeros. **Barrier.**
# 2. **scores**: lane `L` owns key `j0 + L`. It computes that key's score with each of the warp's `ROWS` rows:
#    a loop over the channels `c`, reading `Ks[L, c]` once and `Qs[row, c]` for each row (the same address in
#    every lane: a broadcast). Each K value read from shared memory serves `ROWS` rows.
# 3. **the update**: per row, the tile's max (a warp max, five shuffles), `alpha`, the lane's `p`, the tile's
#    sum of `p` (a warp sum). Each lane writes its `p` to shared memory (`Ps`), and `syncwarp`.
# 4. **o = alpha o + P V**: lane `L` owns channels `L, L + 32, ...` of each row's output (as in rung 02); for
#    each key `t` of the tile it reads `Vs[t, L + 32 c]` once for all its rows, and `Ps[row, t]` (a broadcast).
#    **Barrier**: nobody may overwrite the tiles with the next ones while another warp still reads them.
#
# ### Why Ks rows are `d + 1` floats
#
# Shared memory is 32 banks of 4-byte words; word `a` sits in bank `a mod 32`, and a warp's 32 reads are served
# at once only if they hit 32 different banks (or the very same word, a broadcast). In step 2 lane `L` reads
# `Ks[L, c]`, at word `L · stride + c`. With `stride = d`, a multiple of 32, all 32 lanes hit the same bank: a
# 32-way conflict, served as 32 reads one after another. One float of padding per row spreads them over all 32:

# %%
d = 128
fig, ax = plt.subplots(figsize=(9, 2.2))
for row, stride in enumerate((d, d + 1)):
    banks = (np.arange(32) * stride + 0) % 32                     # c = 0; any c shifts all lanes alike
    ax.scatter(np.arange(32), np.full(32, row), c=banks, cmap="hsv", vmin=0, vmax=32, s=60)
    worst = np.bincount(banks, minlength=32).max()
    ax.text(32.5, row, f"stride {stride}: {len(np.unique(banks))} bank(s), {worst}-way", va="center", fontsize=8)
ax.set_yticks([0, 1], [f"Ks rows of {d} floats", f"Ks rows of {d + 1} floats"])
ax.set_xlabel("lane L, reading Ks[L, c] (colour: the bank)"); ax.set_xlim(-1, 45); ax.set_ylim(-0.7, 1.7)
plt.tight_layout()
plt.show()

# %% [markdown]
# Vs is read along a row (`Vs[t, L + 32c]`: 32 consecutive words, 32 banks) and Qs and Ps at one address per
# warp (a broadcast): neither needs padding.
#
# ## The kernel

# %%
from numba import cuda, float32
from cudabook.bits import bf16_to_f32, f32_to_bf16
from cudabook.attention.s02_online_softmax import FULL_MASK, WARP, warp_sum
from cudabook.attention.s03_tiled import BK, BQ, D, KSTRIDE, OACC, PER_LANE, ROWS, THREADS, WARPS


#! kernel attention.s03_tiled warp_max


#! kernel attention.s03_tiled attention_tiled

# %% [markdown]
# The shapes are compile-time constants (`D`, `ROWS`, `WARPS`, ...: the sizes of shared and register arrays
# must be): `launch` compiles one copy per head dimension and block shape. Every loop over `r` and `c` has a
# constant trip count, so LLVM unrolls it and `m`, `l`, `o`, `s` and `alpha` stay in registers. Every thread of
# the block reaches every barrier: the loop bound `end` is the same for the whole block, and rows past `Nq` (in a
# head's last block) compute on zeros and store nothing.
#
# ## Is it right?
#
# The kernel defined in this notebook, through the stage's launch, on the checker's cases (in the simulator every
# other one, to keep the cell short: the lab's grader runs them all), then with two other block shapes (the
# causal skip and the diagonal fall elsewhere):

# %%
from cudabook.check import check_case

cases = attention.grading_cases("03_tiled")
for name, args, label in (cases[::2] if SIMULATOR else cases):
    verdict = check_case("attention", lambda p: s03.launch(p, kernel=attention_tiled), args)
    print(f"{name:40s}", verdict.message.splitlines()[0])
args = attention.random_problem(1, 1, 40, 40, 64, causal=True)
for shape in (dict(warps=1, rows_per_warp=1), dict(warps=3, rows_per_warp=3)):
    verdict = check_case("attention", lambda p: s03.launch(p, kernel=attention_tiled, **shape), args)
    print(f"causal N=40, {shape}:", verdict.message)

# %% [markdown]
# ## Arithmetic intensity per tile: compute-bound once fused
#
# For one tile a block reads `32 x d` keys and `32 x d` values, `4 · 32 · d` bytes of bf16, and with them does
# the scores `2 · BQ · 32 · d` FLOPs and `P V` another `2 · BQ · 32 · d`: **`BQ` FLOPs per byte**, whatever `d`.
# Against what reaches DRAM the picture is better still, if the blocks of one head, running side by side,
# share its K and V through L2: then DRAM sees q, k, v and the output about once, the fused minimum, `N / 2`
# FLOPs per byte. That is what the tiling implies; a profile confirms it at the benchmark's size, d = 128
# (Nsight Compute on an H200 at commit 21368d8, one launch, not a record): DRAM read 202.2 MB against the
# 201.3 MB of q, k and v, and wrote 62.8 MB of the output's 67.1 MB (the rest likely still in L2 when the
# kernel ended).
# Both against the spec-sheet ridges of an H100 SXM, and what each block shape costs in shared memory:

# %%
from cudabook.gemm.s01_naive import H100_SXM as peaks

bw = peaks["GBps"] / 1e3
ridge32, ridge16 = peaks["fp32_TFLOPs"] / bw, peaks["bf16_TFLOPs"] / bw
size = attention.bench.WORKLOADS[0]
big = Problem(None, None, None, None, dims=(size["B"], size["H"], size["N"], size["N"], size["d"]))
print(f"ridges: {ridge32:.0f} FLOPs/byte (fp32, CUDA cores), {ridge16:.0f} (bf16, tensor cores)")
print(f"fused at the benchmark's size (N = {size['N']}): {big.flops / big.min_bytes:,.0f} FLOPs per byte of DRAM")
print(f"\n{'warps x rows':>12s} {'BQ':>4s} {'FLOPs/byte of a tile':>21s} {'shared, d=64':>20s} {'shared, d=128':>20s}")
for w, r in ((4, 1), (4, 2), (4, 4), (4, 8), (4, 16)):
    tile_flops, tile_bytes = 4 * (w * r) * s03.BK * size["d"], 4 * s03.BK * size["d"]   # 2 products; K, V bf16
    sh = [s03.shared_bytes(dd, w, r) for dd in (64, 128)]
    cells = [f"{x / 1024:.1f} KB" + (" (too big)" if x > s03.SHARED_LIMIT else "") for x in sh]
    print(f"{w:>5d} x {r:<4d} {w * r:4d} {tile_flops / tile_bytes:21.0f} {cells[0]:>20s} {cells[1]:>20s}")
most = max(bq_ for bq_ in range(1, 129) if s03.shared_bytes(128, 1, bq_) <= s03.SHARED_LIMIT)
print(f"(a block may have {s03.SHARED_LIMIT // 1024} KB of static shared memory: at d = 128 that holds at most "
      f"{most} query rows)")

# %% [markdown]
# Fused, attention is right of both ridges: by the roofline, DRAM is no longer the limit, arithmetic is. The
# H200 profile above agrees on the first half: DRAM ran at 0.06 % of its peak bandwidth (Nsight Compute, one
# launch at commit 21368d8, not a record). A tile's own intensity, `BQ`, says how hard the block leans on L2;
# the more rows share a tile, the less. Here float32 tiles in shared memory cap it (the last line above). The tensor-core rungs keep Q, K and V in bf16 (Q in registers in rung 04, in
# shared memory, read by `wgmma`, in 05 and 06), and by default serve 64, 128 or 192 query rows a block (192:
# rung 06 at d = 64, three consumer warpgroups).
#
# What this rung gains over rung 02, counted per query row at the benchmark's size (rung 03 with the GPU's
# default block of 16 rows, which share each tile's fetch):

# %%
Nk = size["N"]
bq_gpu = 4 * 4                                       # rung 03's block on a GPU: 4 warps x 4 rows
rows = [("key and value rows fetched from L2", 2 * Nk, 2 * Nk / bq_gpu),
        ("exp for alpha (rescales)", Nk, -(-Nk // s03.BK)),
        ("warp shuffles", 5 * Nk, 10 * -(-Nk // s03.BK))]
print(f"per query row, N = {Nk}: {'02':>10s} {'03':>10s}")
for what, a, b in rows:
    print(f"  {what:36s} {a:10,.0f} {b:10,.0f}")

# %% [markdown]
# ## How fast?
#
# On a GPU the next cell times rungs 02 and 03 at the benchmark's size with PyTorch's scaled-dot-product
# attention in the same process; rung 01 comes from this card's record (‡). Without a GPU it shows the records
# in `results/`.

# %%
record = attention.ladder_so_far("03_tiled", peers=True)

# %% [markdown]
# ## Compute-bound, and still far below the roof
#
# Fused, DRAM no longer limits this rung: it does the `N / 2` FLOPs per byte of DRAM computed above. So how close
# does it come to what the CUDA cores can do? The same card's fp32 matrix product from cuBLAS (SGEMM, measured in
# the GEMM track's record in `results/`) says what float32 arithmetic on CUDA cores reaches:

# %%
from cudabook import results

shown = False
for rec in results.load_all():
    sgemm = [w["peers"]["cublas_sgemm"]["TFLOPs"] for k, w in rec["workloads"].items()
             if k.startswith("gemm ") and w.get("peers", {}).get("cublas_sgemm", {}).get("TFLOPs")]
    for name, w in rec["workloads"].items():
        row = w["stages"].get("03_tiled", {})
        if name.startswith("attention ") and row.get("TFLOPs") and sgemm:
            shown = True
            print(f"{rec['gpu']} · {name}: 03_tiled {row['TFLOPs']:.1f} TFLOP/s = "
                  f"{100 * row['TFLOPs'] / sgemm[0]:.0f} % of cuBLAS's fp32 SGEMM ({sgemm[0]:.1f} TFLOP/s)")
if not shown:
    print("No record with both rung 03 and cuBLAS's SGEMM in results/ yet: `make bench` on a GPU measures them.")

# %% [markdown]
# Where the rest goes: inside the SM. For every multiply-add this kernel also loads from shared memory, and an
# SM serves warp-wide shared loads several times more slowly than it issues warp-wide multiply-adds. Counted from
# the loops above (the GPU's block of 4 rows a warp, d = 128), against the GEMM track's rung 03, whose 8 x 8
# register blocks are what let it come near SGEMM:

# %%
from cudabook.gemm.s03_register_blocking import TM, TN

R, C = 4, 128 // 32                                   # rows a warp, channels a lane (d = 128)
print(f"shared loads per multiply-add, scores (one Ks and {R} Qs values for {R} FMAs): {(1 + R) / R:.2f}")
print(f"shared loads per multiply-add, P V (at least {C} Vs and {R} Ps values for {R * C} FMAs): {(C + R) / (R * C):.2f}")
print(f"GEMM rung 03 ({TM} + {TN} values for {TM} x {TN} FMAs): {(TM + TN) / (TM * TN):.2f}")

# %% [markdown]
# Add an `exp` per score, ten shuffles per row and tile, and two block barriers per tile, and a float32 rung
# stays far below the roof. The tensor-core rungs change the arithmetic itself: `mma` instructions do a 16 x 8 x
# 16 block of multiply-adds from registers, so loads per FLOP fall by an order of magnitude, and the FLOPs
# themselves become cheap.

# %% [markdown]
# ## Experiment: rows a warp
#
# `rows_per_warp` sets how many query rows share each tile (`BQ = warps x rows_per_warp`), and so the tile's
# intensity. Prediction to test: more rows help until the registers (each row costs a lane `d / 32 + 4` floats)
# or shared memory run out; at the benchmark's d = 128 the launch refuses 8 rows with 4 warps, naming the shared
# memory it would need (try it). Without a GPU the sweep checks that every setting is correct.

# %%
attention.sweep("03_tiled", "rows_per_warp", [1, 2, 3] if SIMULATOR else [1, 2, 4],
                fixed={"warps": 2 if SIMULATOR else 4})

# %% [markdown]
# Write the tile loop yourself: [lab 03](../../labs/attention/03_tiled.ipynb) (the completed version:
# [solution](../../solutions/attention/03_tiled_SOLUTION.ipynb)). Back: [02 · online softmax](02_online_softmax.ipynb).
# Next: [04 · tensor cores and cp.async](04_mma_cp_async.ipynb), where the same tile loop runs on `mma.sync`.
