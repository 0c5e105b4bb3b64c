# %% [markdown]
# # Attention 02 · Online softmax: one pass over the keys, no N x N matrix
#
# Rung 01 computes attention the way the formula reads: every score `S = Q Kᵀ / √d` into memory, then each row's
# softmax, then `P V`. Yet an output row needs only its own row of scores, and only as two running sums. This
# rung keeps **no score matrix at all**: one warp owns one query row and streams over the keys once, carrying a
# running max, a running sum and a running output. The trick is the *online softmax* (Milakov and Gimelshein,
# [arXiv:1805.02867](https://arxiv.org/abs/1805.02867)); FlashAttention
# ([arXiv:2205.14135](https://arxiv.org/abs/2205.14135)) is built on it.
#
# Without a GPU every kernel below runs in Numba's CUDA simulator, on small problems, and there are no
# timings: the speeds shown are the records in `results/`, measured on real GPUs.

# %%
import cudabook
print(cudabook.where())

import math
import numpy as np
import matplotlib.pyplot as plt
from cudabook import SIMULATOR, attention
from cudabook.attention import inputs, s02_online_softmax as s02
from cudabook.attention.problem import Problem

# %% [markdown]
# ## Softmax with a shift
#
# Take one query row: scores `s_1 .. s_N` (already multiplied by `1/√d`) and value rows `v_1 .. v_N`. Its output is
#
# $$\text{out} = \frac{\sum_j e^{s_j} v_j}{\sum_j e^{s_j}} = \frac{\sum_j e^{s_j - M} v_j}{\sum_j e^{s_j - M}}
# \quad\text{for any } M,$$
#
# because the factor `e^{-M}` cancels. The usual choice is `M = max_j s_j`: then every exponent is at most 0,
# every term lies in `(0, 1]`, and nothing can overflow. The catch: the max is known only after the last key.
#
# ## Carrying the max along
#
# After the first `n` keys, keep three numbers (the last one a vector of d channels):
#
# $$m_n = \max_{j \le n} s_j, \qquad l_n = \sum_{j \le n} e^{s_j - m_n}, \qquad o_n = \sum_{j \le n} e^{s_j - m_n} v_j .$$
#
# Key `n+1` arrives with score `s`. The new max is `m_{n+1} = max(m_n, s)`. Every term already in `l_n` was
# taken relative to `m_n`; relative to the new max it is `e^{s_j - m_{n+1}} = e^{s_j - m_n} · e^{m_n - m_{n+1}}`.
# So with `α = e^{m_n - m_{n+1}}`:
#
# $$l_{n+1} = \alpha\, l_n + e^{s - m_{n+1}}, \qquad o_{n+1} = \alpha\, o_n + e^{s - m_{n+1}}\, v_{n+1}.$$
#
# `α = 1` when the max did not move, and `α < 1` when it grew: the old terms shrink to the new scale. After the
# last key, `l_N` and `o_N` are exactly the shifted sums with `M = m_N`, the row's max, so `out = o_N / l_N`.
# Start with `m_0 = -∞`, `l_0 = 0`, `o_0 = 0`: at the first key `α = e^{-∞} = 0`, and there is nothing to rescale.
#
# The same update in NumPy, for one row of a random problem, against the float64 reference:

# %%
def online_row(s, v):
    """The online softmax over one row: scores s [N], values v [N, d] -> out [d], plus every step's m and l."""
    m, l, o = -np.inf, 0.0, np.zeros(v.shape[1])
    ms, ls = [], []
    for sj, vj in zip(s, v):
        m_new = max(m, sj)
        alpha = np.exp(m - m_new)          # 0 at the first key
        p = np.exp(sj - m_new)
        l = l * alpha + p
        o = o * alpha + p * vj
        m = m_new
        ms.append(m)
        ls.append(l)
    return o / l, np.array(ms), np.array(ls)


q, k, v, causal = attention.random_problem(1, 1, 1, 40, 64, rng=np.random.default_rng(2))
qf, kf, vf = (inputs.float64(x)[0, 0] for x in (q, k, v))
s = qf[0] @ kf.T / math.sqrt(64)                        # the row's scores
out, ms, ls = online_row(s, vf)
ref = inputs.reference(q, k, v)[0, 0, 0]
print(f"online softmax vs the reference: largest difference {np.abs(out - ref).max():.1e} (float64 throughout)")

# %% [markdown]
# ## The update, pictured
#
# Above: the scores as the keys stream in, and the running max, a staircase that steps up at each new record.
# Below: the running sum `l_n` (relative to the running max), and the same keys' sum taken relative to the
# **final** max, `Σ_{j≤n} e^{s_j - m_N}`, which only a second pass could compute. Each time the max steps up,
# `α` pulls `l_n` down; between steps it grows by one term a key. At the last key the two curves meet.

# %%
final = np.cumsum(np.exp(s - s.max()))
steps = np.flatnonzero(np.diff(ms, prepend=-np.inf) > 0)         # keys where the running max moved
fig, (a1, a2) = plt.subplots(2, 1, figsize=(9, 5), sharex=True)
a1.plot(s, ".", ms=3, color="0.6", label="score $s_j$")
a1.step(np.arange(len(s)), ms, where="post", color="C3", label="running max $m_n$")
a1.plot(steps, s[steps], "o", mfc="none", color="C3", ms=6)
a1.set_ylabel("score"); a1.legend(fontsize=8, loc="lower right")
a2.plot(ls, ".-", color="C0", label="$l_n$ (relative to the running max)")
a2.plot(final, "--", color="C2", label="$\\sum_{j \\leq n} e^{s_j - m_N}$ (relative to the final max)")
for n in steps[1:]:
    a2.axvline(n, color="C3", lw=0.6, alpha=0.5)
    a2.annotate(f"α = {np.exp(ms[n - 1] - ms[n]):.2f}", (n, ls[n]), xytext=(4, 8), textcoords="offset points",
                fontsize=8, color="C3")
a2.set_xlabel("key n"); a2.set_ylabel("running sum"); a2.legend(fontsize=8)
a1.set_title(f"one query row, {len(s)} keys: the max moved {len(steps) - 1} times after the first key", fontsize=9)
plt.tight_layout()
plt.show()

# %% [markdown]
# The max moves rarely: a key sets a new record only if it beats every key before it, and on random scores the
# expected number of records among N keys is the harmonic number `1 + 1/2 + ... + 1/N ≈ ln N + 0.58`. Most
# keys leave `α = 1`. (Rung 03 cuts the cost differently: one α per tile of 32 keys instead of one per key,
# whether the max moved or not.)

# %%
rng = np.random.default_rng(0)
for N in (100, 1_000, 10_000):
    counted = np.mean([inputs.records(rng.standard_normal((1, N)), np.ones((1, N), bool))[0] for _ in range(200)])
    print(f"N = {N:6,}: records counted on 200 random rows {counted:5.2f}; harmonic number {np.sum(1 / np.arange(1, N + 1)):5.2f}")

# %% [markdown]
# ## Why the shift matters: overflow
#
# float32's largest value is about `3.4e38`, so `exp(x)` overflows for `x` above `ln(3.4e38)`. Scores are
# `q·k/√d`, and they grow with the square of the inputs' spread: `random_problem(spread=4)` gives q and k whose
# scores pass that limit. A softmax without the shift then computes `inf / inf = NaN`; with it, the largest term
# is exactly 1.

# %%
limit = math.log(np.finfo(np.float32).max)
q4, k4, v4, _ = attention.random_problem(1, 1, 1, 64, 64, spread=4.0, rng=np.random.default_rng(1))
s4 = (inputs.float64(q4)[0, 0, 0] @ inputs.float64(k4)[0, 0].T / math.sqrt(64)).astype(np.float32)
with np.errstate(over="ignore", invalid="ignore"):
    e = np.exp(s4)
    unshifted = (e / e.sum()) @ inputs.float64(v4)[0, 0]
shifted = np.exp(s4 - s4.max())
shifted = (shifted / shifted.sum()) @ inputs.float64(v4)[0, 0]
print(f"exp overflows float32 above {limit:.2f}; this row's scores reach {s4.max():.1f}, and {np.isinf(e).sum()} "
      f"of its {s4.size} exp(s) are inf")
print(f"without the shift: {np.isnan(unshifted).sum()} of {unshifted.size} outputs are NaN")
print(f"with the shift:    largest difference from the reference "
      f"{np.abs(shifted - inputs.reference(q4, k4, v4)[0, 0, 0]).max():.1e}")

# %% [markdown]
# The online softmax subtracts the running max, not the final one, so its exponents are all `<= 0` too: the
# kernel below passes at `spread = 4` (checked further down).
#
# ## The kernel: a warp per query row
#
# Warp `w` of the grid owns query row `(b, h, i)` (rows numbered with `i` fastest). Its 32 lanes split the `d`
# channels: lane `L` owns channels `L, L + 32, ...` (`PER_LANE = d / 32` of them: 2 at d = 64, 4 at d = 128),
# of `q` and of the running output `o`, in registers. For each key:
#
# 1. each lane multiplies its channels of `q` and `k_j` and adds them up;
# 2. `warp_sum` adds the 32 partial sums with five **xor-shuffles**: at step `x` (16, 8, 4, 2, 1) lane `L` adds
#    the value of lane `L xor x`. After five steps every lane holds the full dot product, so every lane computes
#    the same `m`, `α`, `p` and `l`;
# 3. each lane updates its own channels of `o` with `v_j`.
#
# At the end `o / l`, rounded to bf16 once. Causal rows stop at key `i`: the bound is the same for the whole
# warp, so every lane reaches every shuffle. CUDA: [warp shuffle functions](https://docs.nvidia.com/cuda/cuda-c-programming-guide/index.html#warp-shuffle-functions),
# PTX [shfl.sync](https://docs.nvidia.com/cuda/parallel-thread-execution/index.html#data-movement-and-conversion-instructions-shfl-sync).

# %%
fig, ax = plt.subplots(figsize=(10, 2.6))
lanes = 16                                          # half a warp drawn; the first step (xor 16) pairs the halves
for stage, x in enumerate((8, 4, 2, 1)):
    for L in range(lanes):
        ax.plot([L, L ^ x], [stage, stage + 1], color=f"C{stage}", lw=0.8, alpha=0.7)
ax.plot(np.tile(np.arange(lanes), 5), np.repeat(np.arange(5), lanes), "k.", ms=4)
ax.set_yticks(range(5), ["after xor 16", "after xor 8", "after xor 4", "after xor 2", "after xor 1: the sum"],
              fontsize=8)
ax.set_xticks(range(lanes)); ax.set_xlabel("lane (16 of 32 drawn)"); ax.invert_yaxis()
ax.set_title("warp_sum: at each step every lane adds the value of lane L xor x; five steps reach all 32", fontsize=9)
plt.tight_layout()
plt.show()

# %%
from numba import cuda, float32
from cudabook.bits import bf16_to_f32, f32_to_bf16
from cudabook.attention.s02_online_softmax import FULL_MASK, PER_LANE, WARP


#! kernel attention.s02_online_softmax warp_sum


#! kernel attention.s02_online_softmax attention_online

# %% [markdown]
# `bf16_to_f32` widens bf16 bits (a 16-bit shift), `f32_to_bf16` rounds to nearest even (`cudabook/bits.py`).
# `PER_LANE` is a compile-time constant: `launch` compiles one copy of the kernel for d = 64 and one for d = 128,
# so the loops over a lane's channels unroll and `qr` and `o` live in registers.
#
# ## Is it right?
#
# The kernel defined in this notebook, through the stage's own launch, on the checker's cases (fresh random
# inputs; the output is poisoned with NaN before each launch, so an element nobody writes fails), then on
# scores that overflow float32 without the shift:

# %%
from cudabook.check import check_case

for name, args, label in attention.grading_cases("02_online_softmax"):
    verdict = check_case("attention", lambda p: s02.launch(p, kernel=attention_online), args)
    print(f"{name:40s}", verdict.message.splitlines()[0])
args = attention.random_problem(1, 1, 3, 20, 64, spread=4.0)
verdict = check_case("attention", lambda p: s02.launch(p, kernel=attention_online), args)
print(f"{'spread = 4 (scores past exp limit)':40s}", verdict.message)

# %% [markdown]
# ## Numerics: why the tolerance is what it is
#
# Every stage is judged against the float64 reference with a tolerance per output element, derived from the
# arithmetic (`cudabook/attention/inputs.py` has the derivation). Where the error comes from:
#
# - **the scores**: a float32 dot product of d terms is off by at most about `d · 2⁻²⁴ Σ|q_c k_c|`. An error `δ`
#   in a score becomes a relative error `δ` in its weight `e^{s-m}`: `exp` passes absolute errors through as
#   relative ones;
# - **exp** itself (float32, about `2⁻²¹` relatively), and **every rescale** `α`, once per record of the max
#   (the harmonic number above: a handful, not N);
# - **P in bf16**: the tensor-core rungs (04 and up) round `P` to bf16 before `P V`, `2⁻⁸` relatively. The
#   tolerance allows that for every rung, so the same judge serves the whole ladder; a Numba rung keeps P in
#   float32 and sits well inside;
# - **the float32 sums** over Nk keys, and finally **one bf16 rounding** of the output (half a bf16 ulp).
#
# In the tolerance, the allowance for a bf16 P dominates (about `2⁻⁸` of the weighted average of `|v|`: several
# bf16 steps of a typical output, more with more keys, since the output's signed terms cancel and `|v|` does not). In this rung's actual error, the output's own rounding dominates. Per
# element, on one random problem, the error against half a bf16 ulp and against the tolerance:

# %%
from cudabook.verdict import bf16_half_ulp

q, k, v, causal = attention.random_problem(1, 2, 8, 40, 64)
got = attention.run("02_online_softmax", q, k, v).astype(np.float64)
ref, bound = inputs.reference_with_bound(q, k, v)
half_ulp = bf16_half_ulp(ref)                          # half a bf16 ulp of each reference value
err = np.abs(got - ref)
print(f"outputs: {ref.size}; largest |error| {err.max():.2e}; largest allowed {(bound + half_ulp).max():.2e}")
print(f"error / (half a bf16 ulp of the reference): median {np.median(err / half_ulp):.2f}, "
      f"largest {np.max(err / half_ulp):.2f}")
fig, ax = plt.subplots(figsize=(6, 3))
used = (err / (bound + half_ulp)).ravel()
ax.hist(used, bins=40)
ax.set_xlabel("|got - reference| / tolerance (1 = the limit)"); ax.set_ylabel("outputs")
ax.set_title(f"02_online_softmax: the largest error is {used.max():.2f} of its tolerance", fontsize=9)
plt.tight_layout()
plt.show()

# %% [markdown]
# Errors up to half an ulp are the output's own bf16 rounding; the float32 arithmetic before it adds only a
# sliver (a float32 result a hair from a rounding midpoint can round the other way). Every mistake the lab's
# grader names (a wrong scale, a mask off by one, a missing rescale or division) is off by far more than the
# tolerance.
#
# ## What it costs
#
# No N x N matrix: the memory a head needs is its q, k, v and output. But every query row's warp reads **every**
# key and value row it sees, on its own: Nq times over in all. At the benchmark's size, the bytes the warps ask
# for against the minimum (q, k, v read once, the output written once):

# %%
size = attention.bench.WORKLOADS[0]
B, H, N, d = (size[x] for x in ("B", "H", "N", "d"))
big = Problem(None, None, None, None, dims=(B, H, N, N, d), causal=size.get("causal", False))
seen = N * (N + 1) // 2 if big.causal else N * N               # (query, key) pairs
asked = 2 * B * H * seen * d * 2 + 2 * B * H * N * d * 2       # K and V rows per pair, plus q and the output
print(f"benchmark: B={B} H={H} N={N} d={d}{' causal' if big.causal else ''}")
print(f"minimum traffic {big.min_bytes / 1e9:8.3f} GB;  bytes the warps ask for {asked / 1e9:8.1f} GB "
      f"({asked / big.min_bytes:,.0f} x)")
print(f"FLOPs {big.flops / 1e9:,.0f} G;  shuffles: 5 a key, {5 * N:,} for a row that sees all {N:,} keys")
print(f"one head's K and V: {2 * N * d * 2 / 1e6:.1f} MB")

# %% [markdown]
# The re-reads can come from L2 rather than DRAM: the warps running at one time serve neighbouring rows of a few
# heads, and a head's K and V (last line) fit in an L2 cache of tens of megabytes. But L2's bandwidth is finite
# too, and five shuffles and a rescale for every key are a lot of work around its `4 d` FLOPs.
# Rung 03 shares each key tile among many query rows in shared memory, and rescales once per tile.
#
# ## How fast?
#
# On a GPU the next cell times rungs 01 and 02 at the benchmark's size, with PyTorch's scaled-dot-product
# attention measured in the same process; without one it shows the records in `results/`.

# %%
record = attention.ladder_so_far("02_online_softmax", peers=True)

# %% [markdown]
# ## Experiment: warps per block
#
# The kernel's one knob. A warp is a whole query row, so the block size only decides how many rows share an SM's
# scheduler slot. Prediction to test: it hardly matters beyond 2 warps. Without a GPU the sweep checks that every
# setting is correct.

# %%
attention.sweep("02_online_softmax", "warps_per_block", [1, 2, 4] if SIMULATOR else [1, 2, 4, 8, 16])

# %% [markdown]
# Check the prediction against the recorded sweeps: each block size's time against the default, 4 warps.

# %%
from cudabook import lesson

lesson.recorded_against("attention", "02_online_softmax", "warps_per_block", 4)

# %% [markdown]
# It holds up to 8 warps a block and fails at 16, which is clearly slower on both cards. The likely reason is
# occupancy, read from profiles of the 4-, 8- and 16-warp blocks (Nsight Compute on an H200 at commit 21368d8,
# one launch each, not a record): the kernel takes 72 registers a thread, so an SM's 65,536 registers hold
# 28 of its warps, in blocks of 1, 2 or 4 warps; only 24 in blocks of 8 (three blocks); and only 16 in blocks
# of 16, since a second block would need 73,728. Achieved occupancy was 43.5, 37.3 and 25.0 % of the 64 warp
# slots, and the commonest stall in all three was `long_scoreboard`, a warp waiting for its loads of k and v.
# Each warp has one query row and little to do between loads, so fewer warps leave more of that wait unhidden.

# %% [markdown]
# Write the online-softmax update yourself: [lab 02](../../labs/attention/02_online_softmax.ipynb) (the completed
# version: [solution](../../solutions/attention/02_online_softmax_SOLUTION.ipynb)). Back:
# [01 · naive](01_naive.ipynb). Next: [03 · tiled](03_tiled.ipynb), where a block of query rows shares each tile
# of keys and values in shared memory.
