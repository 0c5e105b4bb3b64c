# %% [markdown]
# # Attention 01 · Naive: the score matrix in memory
#
# **The problem.** Attention, as in every transformer: for each batch `b` and head `h`, every query row `q_i`
# scores every key row `k_j`, the scores become weights by a softmax over the keys, and the output row is the
# weighted average of the value rows:
#
# $$s_{ij} = \frac{q_i \cdot k_j}{\sqrt d}, \qquad w_{ij} = \frac{e^{s_{ij}}}{\sum_{j'} e^{s_{ij'}}}, \qquad
# \text{out}_i = \sum_j w_{ij}\, v_j .$$
#
# In matrices: `out = softmax(Q Kᵀ / √d) V`, one `Nq x Nk` matrix of scores per head.
#
# | array | shape | dtype |
# |---|---|---|
# | `q` | `[B, H, Nq, d]` | bf16 |
# | `k`, `v` | `[B, H, Nk, d]` | bf16 |
# | output | `[B, H, Nq, d]` | bf16, the softmax in float32, rounded once (nearest even) |
#
# `causal=True` (a decoder; needs `Nq == Nk`): query `i` sees keys `j <= i` only. The head dimension `d` is 64
# or 128 on every rung; any `N >= 1`.
#
# This rung computes it the way the formula reads, and stores the whole score matrix `S` in memory. That is the
# thing every later rung gets rid of. Without a GPU the kernels run in Numba's CUDA simulator, on small
# problems, and the speeds shown are the records in `results/`.

# %%
import cudabook
print(cudabook.where())

import numpy as np
import matplotlib.pyplot as plt
from cudabook import SIMULATOR, attention
from cudabook.attention import s01_naive
from cudabook.attention.problem import Problem

q, k, v, causal = attention.random_problem(1, 2, 24, 24, 64, rng=np.random.default_rng(0))
out = attention.run("01_naive", q, k, v)
print(attention.judge(out, q, k, v))
print("out[0, 0, 0, :4] =", out[0, 0, 0, :4], "   float64 reference:", attention.reference(q, k, v)[0, 0, 0, :4].round(4))

# %% [markdown]
# ## What the matrices look like
#
# One head of the problem above: the scores `S` (each row a query, each column a key), the weights `P` after the
# row-wise softmax (each row sums to 1), and the causal version, where query `i` may not look ahead.
# `random_problem` draws q and k around a common mean, so every score shares an offset; the softmax ignores
# anything common to a row, and what decides the weights is how far a score stands above the row's others.

# %%
from cudabook.attention import inputs

qf, kf = inputs.float64(q)[0, 0], inputs.float64(k)[0, 0]
S = qf @ kf.T / np.sqrt(qf.shape[1])
P = np.exp(S - S.max(axis=1, keepdims=True))
P /= P.sum(axis=1, keepdims=True)
Sc = np.where(np.tril(np.ones_like(S, bool)), S, -np.inf)
Pc = np.exp(Sc - Sc.max(axis=1, keepdims=True))
Pc /= Pc.sum(axis=1, keepdims=True)
fig, axes = plt.subplots(1, 3, figsize=(12, 3.6))
for ax, m, title in zip(axes, (S, P, Pc), ("scores S = q k / sqrt(d)", "weights P = softmax of each row",
                                           "causal: P with keys j > i masked")):
    im = ax.imshow(np.ma.masked_invalid(m), cmap="viridis")
    ax.set_title(title, fontsize=9); ax.set_xlabel("key j"); ax.set_ylabel("query i")
    fig.colorbar(im, ax=ax, shrink=0.8)
plt.tight_layout()
plt.show()
print("each row of P sums to", np.unique(P.sum(axis=1).round(12)), "; largest weight of a row, median over rows:",
      f"{np.median(P.max(axis=1)):.2f}")

# %% [markdown]
# ## The kernels: three passes, S in between
#
# 1. **scores**: one thread per score `S[b, h, i, j]`, a dot product of `d` products in float32, times
#    `1/√d`; `-inf` where a causal query may not see the key. Keys run fastest, so neighbouring threads write
#    neighbouring scores.
# 2. **softmax**: one thread per row of S, in place: the row's max `m`, then `p_j = exp(s_j - m)` and their sum
#    `l`, then every `p_j / l`. Subtracting `m` keeps every `exp` at most 1 (lesson 02 shows what happens
#    without it).
# 3. **P @ V**: one thread per output element, the weighted sum of a column of V, rounded to bf16 once.
#
# The two 2-D kernels, scores and P @ V, find their element with `grid_cell`: the thread's column and row, and
# the head its grid layer holds.

# %%
import math
from numba import cuda, float32
from cudabook.bits import bf16_to_f32, f32_to_bf16


#! kernel attention.s01_naive grid_cell


#! kernel attention.s01_naive attention_scores


#! kernel attention.s01_naive attention_softmax


#! kernel attention.s01_naive attention_pv

# %% [markdown]
# `bf16_to_f32` widens bf16 bits (a 16-bit shift; a product of two bf16 values is exact in float32),
# `f32_to_bf16` rounds to nearest even (`cudabook/bits.py`). `launch` allocates S once per problem, as a float32
# `[B, H, Nq, Nk]` device array, and runs the three kernels one after the other.
#
# ## Is it right?
#
# The checker's cases: ragged sizes, d = 64 and 128, causal and not, Nq != Nk, a single key, and scores so large
# that `exp` overflows float32 unless the max is subtracted. The output is poisoned with NaN before each launch,
# so an element nobody writes fails. The tolerance comes from the arithmetic (lesson 02 takes it apart).

# %%
for name, args, label in attention.grading_cases("01_naive"):
    print(f"{name:40s}", attention.judge(attention.run("01_naive", *args[:3], causal=args[3]), *args).message)

# %% [markdown]
# ## The memory S needs
#
# `S` holds `B · H · Nq · Nk` float32 values: it grows with the **square** of the sequence length, while q, k, v
# and the output grow linearly. At the benchmark's `B` and `H`, and square problems `N x N`:

# %%
size = attention.bench.WORKLOADS[0]
B, H, d = size["B"], size["H"], size["d"]
from cudabook import results

if not SIMULATOR:
    card = cuda.current_context().get_memory_info()[1]
    card_name = f"this GPU ({card / 1e9:.0f} GB)"
else:                                       # no GPU: the memory of a card in results/, or an 80 GB card
    cards = [r["workloads"][k]["machine"] for r in results.load_all() for k in r["workloads"]
             if r["workloads"][k].get("machine", {}).get("memory_bytes")]
    card, card_name = ((cards[0]["memory_bytes"], f"an {cards[0]['gpu']} ({cards[0]['memory_bytes'] / 1e9:.0f} GB, "
                        f"as recorded in results/)") if cards else (80e9, "an 80 GB card"))
Ns = [1024 * 2 ** i for i in range(6)]                       # 1k .. 32k
print(f"B = {B}, H = {H}, d = {d}: the benchmark's batch and heads")
print(f"{'N':>7s} {'S (GB)':>10s} {'q, k, v, out (GB)':>18s}   fits in {card_name}?")
for N in Ns:
    s_gb = s01_naive.score_bytes(B, H, N, N) / 1e9
    qkvo = Problem(None, None, None, None, dims=(B, H, N, N, d)).min_bytes / 1e9
    print(f"{N:7,d} {s_gb:10.1f} {qkvo:18.2f}   {'yes' if (s_gb + qkvo) * 1e9 <= card else 'NO'}")
largest = int(np.sqrt(card / (4 * B * H)))
print(f"S alone fills {card_name} at N = {largest:,}")

fig, ax = plt.subplots(figsize=(7, 3.4))
n = np.logspace(np.log10(512), np.log10(Ns[-1]), 100)
ax.loglog(n, 4 * B * H * n ** 2 / 1e9, label="S, float32 (B H N² x 4 bytes)")
ax.loglog(n, 8 * B * H * n * d / 1e9, label="q, k, v and out, bf16 (B H N d x 8 bytes)")
ax.axhline(card / 1e9, color="k", ls="--", lw=1, label=card_name)
ax.axvline(largest, color="C3", lw=0.8)
ax.set_xticks(Ns, [f"{N // 1024}k" for N in Ns]); ax.set_xlabel("N (queries = keys)"); ax.set_ylabel("GB")
ax.set_title(f"memory of one launch at B = {B}, H = {H}, d = {d}", fontsize=9)
ax.legend(fontsize=8)
plt.tight_layout()
plt.show()

# %% [markdown]
# Past that N, rung 01 cannot run at all (its `launch` refuses with the numbers, before it allocates), while the
# inputs themselves take only a GB or two. Long before it, S costs time: every byte of it goes through memory several
# times.
#
# ## Bytes and FLOPs: the roofline
#
# A kernel's **arithmetic intensity** is the FLOPs it does per byte it moves through global memory; with
# bandwidth `BW` and arithmetic peak `F`, it cannot beat `min(F, intensity x BW)` (the roofline). Attention does
# `4 B H Nq Nk d` FLOPs: two matrix products of `2 Nq Nk d` each (the softmax's few operations per score are
# small beside them). Count the passes over S in the kernels above:

# %%
passes = [("scores", 0, 1), ("softmax: the max", 1, 0), ("softmax: p = exp(s - m), l", 1, 1),
          ("softmax: p / l", 1, 1), ("P @ V", 1, 0)]                       # (pass, reads of S, writes of S)
print(f"{'pass':30s} reads  writes")
for name, r, w in passes:
    print(f"{name:30s} {r:5d} {w:7d}")
trips = sum(r + w for _, r, w in passes)
print(f"S goes through memory {trips} times")

N = size["N"]
big = Problem(None, None, None, None, dims=(B, H, N, N, d))
s_traffic = trips * s01_naive.score_bytes(B, H, N, N)
naive_bytes = s_traffic + big.min_bytes
print(f"\nat the benchmark's size (B={B} H={H} N={N} d={d}):")
print(f"  FLOPs                           {big.flops / 1e12:8.2f} T")
print(f"  bytes with S in memory          {naive_bytes / 1e9:8.1f} GB  -> {big.flops / naive_bytes:6.1f} FLOPs per byte")
print(f"  bytes fused (q, k, v, out once) {big.min_bytes / 1e9:8.2f} GB  -> {big.flops / big.min_bytes:6.0f} FLOPs per byte")
small_d = Problem(None, None, None, None, dims=(B, H, N, N, 64))
print(f"at d = 64 instead: {small_d.flops / (s_traffic + small_d.min_bytes):.1f} FLOPs per byte with S in memory")

# %% [markdown]
# With S in memory the intensity is about `4 N² d / (trips · 4 N²) = d / trips` FLOPs per byte, whatever N: it
# only grows with d. Fused (q, k, v read once, out written once, S never stored) it is `N / 2`: it grows with the
# sequence.
#
# (The count is the least traffic these steps need; the kernels ask for more: the P @ V kernel has d / 32 warps
# read each row of P, so 10 trips at d = 128. Caches catch some of it: a row of S that one softmax
# thread walks three times may stay in L1 or L2. But S at the benchmark's size is gigabytes, and an L2 cache
# holds tens of megabytes: most of S goes to DRAM and back.)
#
# ## How fast?
#
# On a GPU the next cell times the rung at the benchmark's size (CUDA events, median of many runs), with
# PyTorch's scaled-dot-product attention (SDPA: FlashAttention, cuDNN and the memory-efficient kernel, each that
# runs here) measured in the same process on the same data. Without a GPU it shows the records in `results/`.
#
# From lesson 02 on, this cell measures only the lesson's rung and the one before it, with SDPA. The earlier
# rungs come from this card's record in `results/`, marked ‡ with its card, commit and date, and drawn lighter.
# With no record for this card it says so and shows just the two. To measure every rung now, pass `full=True`
# (`attention.ladder_so_far("03_tiled", peers=True, full=True)`) or set `CUDABOOK_FULL_LADDER=1` before
# starting Jupyter; it takes longer.

# %%
record = attention.ladder_so_far("01_naive", peers=True)

# %% [markdown]
# Both intensities on the roofline of an H100 SXM (spec-sheet peaks, `cudabook.gemm.s01_naive.H100_SXM`), with
# rung 01's measured speed as a star where there is one:

# %%
from cudabook.gemm.s01_naive import H100_SXM as peaks, measured_TFLOPs

bw = peaks["GBps"] / 1e3                                    # TB/s = TFLOP/s per FLOP/byte
x = np.logspace(0, 4, 200)
fig, ax = plt.subplots(figsize=(7, 4))
ax.loglog(x, np.minimum(peaks["fp32_TFLOPs"], x * bw), "k-", lw=1.5, label="fp32 roof (CUDA cores)")
ax.loglog(x, np.minimum(peaks["bf16_TFLOPs"], x * bw), "k:", lw=1, label="bf16 roof (tensor cores)")
for i, (label, fi) in enumerate((("01: S in memory", big.flops / naive_bytes),
                                 ("fused: the minimum traffic", big.flops / big.min_bytes))):
    ax.axvline(fi, color=f"C{i}", ls="--", lw=0.8)
    ax.plot([fi], [min(peaks["bf16_TFLOPs"], fi * bw)], "o", color=f"C{i}", mfc="none",
            label=f"{label}: {fi:,.0f} FLOPs/byte")
star = measured_TFLOPs(record, "01_naive")
if star:
    ax.plot([big.flops / naive_bytes], [star], "*", ms=12, color="C0", label=f"01 measured: {star:,.1f} TFLOP/s")
ax.set_xlabel("FLOPs per byte of global memory"); ax.set_ylabel("TFLOP/s")
ax.set_title(f"{peaks['name']}: {peaks['GBps']:,.0f} GB/s; ridge at {peaks['fp32_TFLOPs'] / bw:.0f} (fp32) and "
             f"{peaks['bf16_TFLOPs'] / bw:.0f} (bf16) FLOPs/byte", fontsize=9)
ax.legend(fontsize=7, loc="lower right")
plt.show()
if star:
    roof = min(peaks["fp32_TFLOPs"], big.flops / naive_bytes * bw)
    print(f"rung 01 measured {star:.2f} TFLOP/s: {100 * star / roof:.1f} % of its roof at that intensity")

# %% [markdown]
# Left of a ridge memory limits, right of it arithmetic. With S in memory attention sits at the CUDA cores'
# (fp32) ridge at d = 128, left of it at d = 64, and an order of magnitude left of the tensor cores' (bf16)
# ridge: **memory-bound**, whatever the arithmetic units could do. Fused, it sits far right of both ridges:
# **compute-bound**, the tensor cores' job. That is the whole ladder: rungs 02 and 03 stop storing S, and rungs
# 04 to 06 feed the tensor cores.
#
# The measured star (where results/ has one) sits far below even its own roof. The count above is the least traffic
# the passes over S could make (its seven trips); these kernels make more, and make it slowly. The softmax gives
# each row to one thread, so the 32 threads of a warp walk 32 rows `4 · Nk` bytes apart: every load instruction
# touches 32 different memory sectors for 32 useful floats. And the scores kernel reads a whole row of q and of k
# for every single score, `4 d` bytes (from L1 or L2) for `2 d` FLOPs.
#
# ## Experiment: threads a block
#
# The rung's one knob, the block size of all three kernels. Prediction to test: it barely matters, because the
# time goes into moving S. Without a GPU the sweep checks that every setting is correct.

# %%
attention.sweep("01_naive", "threads", [32, 64] if SIMULATOR else [64, 128, 256, 512, 1024])

# %% [markdown]
# Next: [02 · online softmax](02_online_softmax.ipynb): one pass over the keys per query row, and no S at all.
