# %% [markdown]
# # Attention 04 · Tensor cores and a cp.async ring: both products on mma.sync, P never leaves the registers
#
# Rung 03 tiled the work the right way, a block of queries sharing each K/V tile in shared memory, but it
# multiplies on the ordinary fp32 cores, one fused multiply-add per thread per instruction. This rung moves
# both products onto the **tensor cores** with `mma.sync.m16n8k16` (GEMM rung 04's instruction: one warp, a
# 16 x 16 by 16 x 8 product a time) and keeps everything between them in registers:
#
# ```
#   global --cp.async--> shared (a ring of STAGES K/V tiles, swizzled) --ldmatrix--> registers
#       S = Q Kᵀ (mma.sync) -> mask -> online softmax (registers, quad shuffles) -> P in bf16 -> O += P V (mma.sync)
# ```
#
# - a block owns `16 · warps` query rows of one (batch, head); each **warp** owns 16 of them and holds them, as
#   mma A fragments, in registers for the whole kernel;
# - the keys come in tiles of `bkv`; a ring of `stages` K/V tiles is filled by `cp.async` (resampling 06, GEMM
#   04) while the tensor cores work on the tile before;
# - S of a tile (16 x bkv floats a warp) never touches shared memory: the accumulator layout of `mma.sync` is,
#   key for key, the A-operand layout of the next `mma.sync`, so P is S rounded to bf16 **in place**.
#
# The kernel is CUDA C++ (`cudabook/attention/kernels/flash_mma.cu`) on the kit's tensor-core pieces
# (`kit/include/mma_sync.cuh`), compiled at run time by NVRTC. It needs sm_80 or newer; without a GPU it still
# compiles here, and the workbook's emulator runs it on the CPU. PTX ISA:
# [mma.m16n8k16 fragments](https://docs.nvidia.com/cuda/parallel-thread-execution/index.html#warp-level-matrix-fragment-mma-16816-float),
# [ldmatrix](https://docs.nvidia.com/cuda/parallel-thread-execution/index.html#warp-level-matrix-instructions-ldmatrix),
# [cp.async](https://docs.nvidia.com/cuda/parallel-thread-execution/index.html#data-movement-and-conversion-instructions-cp-async).

# %%
import cudabook
print(cudabook.where())

import numpy as np
import matplotlib.pyplot as plt
from cudabook import SIMULATOR, attention, emulate, lesson, nvrtc, results
from cudabook.attention import inputs
from cudabook.attention import s04_mma_cp_async as s04
from cudabook.gemm import s04_mma_sync as gemm04
from cudabook.verdict import bf16_half_ulp

source = s04.source()

# %% [markdown]
# ## A warp's registers
#
# Each warp keeps, for the whole kernel, its 16 query rows as `d / 16` A fragments (`qf`, four 32-bit registers
# each: 8 bf16 a lane) and its 16 rows of O as `d / 8` accumulator fragments (`o`, four floats each). Per tile
# it adds the tile's scores, `bkv / 8` fragments of S. Counted per thread, next to what ptxas allotted:

# %%
print(f"{'':18s} {'Q (regs)':>9s} {'O (floats)':>11s} {'S (floats)':>11s} {'registers':>10s} {'local':>6s}")
for d in s04.HEAD_DIMS:
    cfg = s04.config(d, False)
    use = nvrtc.resource_usage(s04.compile_cubin(d=d))[s04.KERNEL]
    print(f"d={d:<3d} bkv={cfg['BKV']:<3d}      {d // 16 * 4:9d} {d // 8 * 4:11d} {cfg['BKV'] // 8 * 4:11d} "
          f"{use['registers']:10d} {use['local']:6d}")
print(f"defaults: {s04.PARAMS}; shared memory a block at d=128: {s04.smem_bytes(s04.config(128, False)):,} bytes")

# %% [markdown]
# The prologue: Q and the first `stages - 1` K/V tiles are requested, the Q tile is waited for, and each warp
# pulls its rows into fragments with `ldmatrix`:

# %%
lesson.show_region(source, start="const int kv_end", end="u32 qf[KS][4]")
lesson.show_region(source, start="for (int ks = 0; ks < KS; ++ks)", end="ldmatrix_x4(qf[ks]")

# %% [markdown]
# ## S's accumulator is P's A fragment
#
# `S = Q Kᵀ` gives each warp `bkv / 8` accumulator fragments of 16 x 8: with `g = lane / 4` and `t = lane % 4`,
# lane `l` holds `S[g][2t], S[g][2t+1]` and the same two keys 8 rows down. The second product, `O += P V`,
# takes P as its A operand, 16 x 16 (16 rows, 16 keys) a step, and lane `l` must hold `P[g][2t..2t+1]`,
# `P[g+8][2t..2t+1]`, then the same 8 keys further. Put two neighbouring S fragments side by side (keys 0-7 and
# 8-15) and compare who holds what. Every number below is a lane (`gemm04.mma_fragments()`, the PTX ISA's
# fragment tables in code):

# %%
frag = gemm04.mma_fragments()
c_lane, c_reg = frag["c"]
a_lane, a_reg = frag["a"]
s_pair = np.hstack([c_lane, c_lane])            # S fragments 2 ps and 2 ps + 1: keys 0-7, then 8-15
fig, axes = plt.subplots(1, 2, figsize=(12, 4))
for ax, grid, title in ((axes[0], s_pair, "S: two accumulator fragments (16 x 8 each), side by side"),
                        (axes[1], a_lane, "P: the A fragment of mma.m16n8k16 (16 x 16)")):
    ax.imshow(grid % 8, cmap="Pastel2", aspect="equal")
    for (r, c), lane in np.ndenumerate(grid):
        ax.text(c, r, str(lane), ha="center", va="center", fontsize=6)
    ax.axvline(7.5, color="k", lw=1.5)
    ax.set_title(title, fontsize=9)
    ax.set_xlabel("key (within the 16 of one k16 step)")
    ax.set_ylabel("query row of the warp")
plt.tight_layout()
plt.show()
print("same lane for every (row, key):", np.array_equal(s_pair, a_lane))

# %% [markdown]
# The same lane, everywhere: no shuffle, no trip through shared memory. What is left is the order of the
# registers. A's registers hold two bf16 each (halves numbered `2r`, `2r+1` below); C's are floats. The map:

# %%
keys = np.arange(16)[None, :]
same = np.array_equal(a_reg // 2, 2 * (keys // 8) + np.hstack([c_reg, c_reg]) // 2) and \
    np.array_equal(a_reg % 2, np.hstack([c_reg, c_reg]) % 2)
for r in range(4):
    halves = []
    for h in range(2):
        row, key = map(int, np.argwhere((a_reg == 2 * r + h) & (a_lane == 0))[0])
        halves.append(f"c{int(c_reg[row, key % 8])} of S fragment 2ps{'+1' if key >= 8 else ''}")
    print(f"a{r} = pack_bf16x2({halves[0]}, {halves[1]})")
print("the same map in every lane:", same)

# %% [markdown]
# which is exactly the kernel's `pa` (then, for each pair of 8-column blocks of O, one `ldmatrix.trans` of V
# and two `mma.sync`):

# %%
lesson.show_region(source, start="// O += P V.", end="mma_16816(o[j + 1], pa, b1)")

# %% [markdown]
# The online softmax in between is rung 02's update, spread over a quad: a row's `bkv` scores lie in the four
# lanes `4g .. 4g+3` (two keys per fragment each), so its max needs two `__shfl_xor_sync` steps (1 and 2) a
# tile, not five; its sum needs none in the loop (each lane keeps its own partial sum, and the four are added
# with the same two steps once, after the last tile). It works in base 2, `p = 2^(s · scale · log2 e - m)`, so each exponential is one `ex2`
# instruction (`MUFU.EX2`, with the compare and multiplies of `exp2f`'s subnormal fix-up around it, which
# lesson 06 removes from the per-score exponentials; its rescale factor keeps `exp2f`) and `log2 e` is folded into the scale. Note that the row sum `l` adds the float
# values of p, before they are rounded for the product.

# %%
lesson.show_region(source, start="// The online softmax", end="o[j][2 * h + 1] *= alpha")

# %% [markdown]
# ## P in bf16: what it costs
#
# `mma.sync` multiplies bf16, so P must be rounded: relative error at most `2^-8` (round to nearest: bf16 keeps
# 8 significant bits) on each weight, in `[0, 1]`. The output is a weighted average of V's rows, so the error it
# can cause is at most `2^-8 · Σ_j w_j |v_j|` (`WV`): several bf16 steps of a typical output, since the output's
# signed terms cancel and WV's do not (the cell below prints half a step against WV). This kernel rounds
# to nearest and sums `l` from the float p, so only the numerator changes: it is off by `Σ_j w_j δ_j v_j` with
# every `|δ_j| ≤ 2^-8`, at most `2^-8 WV`. The checker's tolerance (see `cudabook/attention/inputs.py`) allows
# `2^-8 (1 + 2^-8) WV` for this step: one rounding to nearest, no more. A kernel that truncates (up to `2^-7`)
# or sums `l` from the rounded P (the errors of numerator and denominator add up) is outside it as a worst case,
# and passes only where its errors cancel, as random data mostly lets them.
#
# The same arithmetic in NumPy on a random problem (float64 except for P's rounding), the error of each output
# in units of its WV:

# %%
q, k, v, _ = attention.random_problem(1, 1, 256, 1024, 64)
qf64, kf64, vf64 = (inputs.float64(x)[0, 0] for x in (q, k, v))
s = qf64 @ kf64.T / np.sqrt(64)
p = np.exp(s - s.max(axis=1, keepdims=True))
l = p.sum(axis=1, keepdims=True)
exact = p @ vf64 / l
p_bf16 = inputs.to_bf16(p).astype(np.float64)
with_bf16_p = p_bf16 @ vf64 / l                     # the kernel's way: numerator rounded, l not
wv = (p / l) @ np.abs(vf64)
ratio = np.abs(with_bf16_p - exact) / wv
fig, ax = plt.subplots(figsize=(8, 3))
ax.hist(np.log2(ratio[ratio > 0]), bins=60, color="C0")
for x, what in ((np.log2(inputs.P_ROUNDING), "2^-8 (1 + 2^-8): one rounding to nearest, the tolerance's share"),):
    ax.axvline(x, color="k", ls="--", lw=1)
    ax.text(x, ax.get_ylim()[1] * 0.9, " " + what, fontsize=8)
ax.set_xlabel("log2( |error| / WV )")
ax.set_ylabel("outputs")
ax.set_title("error from P in bf16, relative to sum_j w_j |v_j| (256 rows x 64 channels, 1024 keys)", fontsize=9)
plt.tight_layout()
plt.show()
print(f"error / WV: largest 2^{np.log2(ratio.max()):.1f}, median 2^{np.log2(np.median(ratio)):.1f}. For scale, half "
      f"a bf16 step of the output (its final rounding): median 2^{np.log2(np.median(bf16_half_ulp(exact) / wv)):.1f} of WV")

# %% [markdown]
# The errors of a thousand keys have random signs and mostly cancel: the typical error is far below the bound,
# and the tolerance covers the worst case. A Numba rung, with P in
# float32, sits far inside the same tolerance; a real mistake (a wrong scale, a missing rescale) lands far
# outside it.
#
# ## The cp.async ring and the pipeline step
#
# The ring has `stages` slots, each a K tile and a V tile (`bkv` rows of d bf16 each). Before the loop, Q and
# tiles `0 .. stages-2` were requested, one **commit group** each (Q rides in group 0). Then, at tile `t`:
#
# 1. request tile `t + stages - 1` into slot `(t + stages - 1) % stages`: the slot tile `t - 1` used, which every
#    warp finished reading at the barrier that ended the last pass;
# 2. commit, **always**, even past the last tile: then group `g` is always tile `g`, and the count below holds
#    at the end too;
# 3. `cp.async.wait_group N`: by now `(stages - 1) + (t + 1)` groups are committed, and groups `0 .. t` must be
#    complete, so `N = stages - 1` may still be in flight (GEMM 04 waits for `stages - 2` because it waits one
#    step early, for the *next* slice; here the wait is for this tile, after the next request);
# 4. `__syncthreads()`: the wait covers only this thread's copies; every thread copied a share of the tile.
#
# At the end of the pass a second barrier says that every warp is done with slot `t % stages`, which the next
# pass refills. The ring, drawn for 2 and 3 stages (light: being copied; dark: being read):

# %%
def ring(ax, stages, tiles=7):
    for t in range(tiles):
        ax.add_patch(plt.Rectangle((t, t % stages), 1, 1, color="C0"))
        ax.text(t + 0.5, t % stages + 0.5, f"read {t}", ha="center", va="center", fontsize=7, color="w")
        nxt = t + stages - 1
        if nxt < tiles:
            ax.add_patch(plt.Rectangle((t, nxt % stages), 1, 1, color="C0", alpha=0.3))
            ax.text(t + 0.5, nxt % stages + 0.5, f"copy {nxt}", ha="center", va="center", fontsize=7)
    ax.set_xlim(0, tiles)
    ax.set_ylim(stages, 0)
    ax.set_xticks(np.arange(tiles) + 0.5, [f"t={t}" for t in range(tiles)])
    ax.set_yticks(np.arange(stages) + 0.5, [f"slot {s}" for s in range(stages)])
    ax.set_title(f"stages = {stages}: wait_group {stages - 1} after each commit", fontsize=9)


fig, axes = plt.subplots(1, 2, figsize=(13, 2.8))
for ax, stages in zip(axes, (2, 3)):
    ring(ax, stages)
plt.tight_layout()
plt.show()

# %% [markdown]
# (Tiles 0 .. stages-2 were requested in the prologue.) This is the lab's region, and the rest of the pass:

# %%
lesson.show_region(source, start="for (int t = 0; t < tiles; ++t)", end="<<< lab")
lesson.show_region(source, start="everyone is done with stage s", end="cp_async_wait<0>()")

# %% [markdown]
# Rows of K and V are 128 or 256 bytes; their 16-byte chunks are stored XOR-swizzled (chunk `c` of row `r` in
# slot `c ^ (r % 8)`), so the eight rows one `ldmatrix` phase reads sit in eight different groups of banks:
# GEMM 04 draws it. Rows past Nk are copied with a source size of 0: `cp.async` writes zeros and reads nothing.
#
# ## Causal: fewer tiles, and the longest blocks first
#
# With `causal=True` a block of query rows `q0 .. q0 + BQ - 1` sees keys `< q0 + BQ` only: it stops after the
# tile holding its last row, and only the tiles that cross the diagonal pay for the mask. The blocks' work then
# grows along the grid, from one tile to all of them. A GPU starts blocks roughly in grid order, so the kernel runs
# them backwards (`qb = gridDim.x - 1 - blockIdx.x`): the long blocks start first and the short ones fill the
# gaps at the end, as a greedy scheduler would want.

# %%
lesson.show_region(source, start="const int qb = CAUSAL", end="const int qb = CAUSAL")
lesson.show_region(source, start="// Mask:", end="if (j >= Nk || (CAUSAL")

# %% [markdown]
# How much that order matters, in a model: blocks go, in grid order, to the first free slot of an H100 SXM (132
# SMs, times the blocks an SM holds, from this kernel's registers and shared memory and the SM's 64 K registers
# and 228 KB), each taking as long as its tiles. Against the same blocks run in the other order, and the ideal
# (all work spread evenly):

# %%
import heapq


def finish(work, slots):
    free = [0.0] * slots
    for w in work:
        heapq.heappush(free, heapq.heappop(free) + w)
    return max(free)


cfg = s04.config(128, True)
use = nvrtc.resource_usage(s04.compile_cubin(d=128, causal=True))[s04.KERNEL]
threads = 32 * cfg["WARPS"]
per_sm = min(65536 // (-(-use["registers"] // 8) * 8 * threads), 228 * 1024 // (s04.smem_bytes(cfg) + 1024))
slots = 132 * per_sm
N, BQ, BKV = 4096, 16 * cfg["WARPS"], cfg["BKV"]
tiles = [-(-min(N, (qb + 1) * BQ) // BKV) for qb in range(N // BQ)]
print(f"{per_sm} blocks an SM -> {slots} slots; a causal block does {tiles[0]} to {tiles[-1]} tiles; "
      f"all blocks together {sum(tiles) / (len(tiles) * N // BKV):.1%} of the non-causal tiles")
for heads in (4, 8, 16, 64):
    longest_first = finish([w for _ in range(heads) for w in reversed(tiles)], slots)
    shortest_first = finish([w for _ in range(heads) for w in tiles], slots)
    ideal = heads * sum(tiles) / slots
    print(f"B*H = {heads:2d} ({heads * len(tiles):5,d} blocks): longest first {longest_first / ideal:.3f} x the "
          f"ideal, shortest first {shortest_first / ideal:.3f} x")

# %% [markdown]
# When every block fits on the GPU at once (4 heads), the order cannot matter: the time is the longest block's,
# and only a shorter block (fewer query rows) would help. With a few rounds of blocks (8, 16 heads) running the
# long ones first shortens the modelled time by a few percent (compare the two columns): a model of whole
# tiles on free slots, not a measurement. At the benchmark's 64 heads the grid runs many rounds and the order
# only shapes the last of them: a smaller gain still. The main saving is the tiles themselves: about half of them
# are never loaded.
#
# ## The machine code
#
# No GPU needed: NVRTC compiles for sm_90a here and cuobjdump reads it. `HMMA.16816.F32.BF16` is `mma.sync`,
# `LDSM.16.M88.4` the `ldmatrix` of Q and K, `LDSM.16.MT88.4` the transposing one of V, `LDGSTS` the
# `cp.async` copies, `MUFU.EX2` the exponentials, `F2FP.BF16` the rounding of P, `SHFL.BFLY` the quad
# reductions. Local memory 0: no spills, for d 64 and 128, causal or not (the tests check it).

# %%
cubin = s04.compile_cubin(d=128)
for pattern in ("HMMA", "LDSM.16.M88", "LDSM.16.MT88", "LDGSTS", "MUFU.EX2", "F2FP", "SHFL.BFLY"):
    found = nvrtc.sass_lines(cubin, pattern, kernel=s04.KERNEL)
    print(f"{pattern:13s} x {len(found):3d}   e.g. {found[0] if found else '(none)'}")
for d in s04.HEAD_DIMS:
    for causal in (False, True):
        use = nvrtc.resource_usage(s04.compile_cubin(d=d, causal=causal))[s04.KERNEL]
        print(f"d={d:3d} causal={causal!s:5s}: {use['registers']} registers, {use['local']} bytes of local memory")

# %% [markdown]
# ## Is it right?
#
# On a GPU of compute capability 8.0 or newer the stage runs for real, on the checker's ragged cases. Without
# one, `cudabook.emulate` runs the same C++ on the CPU: every CUDA thread a coroutine, `mma.sync` and
# `ldmatrix` as warp operations, the copies landing as late as the waits allow. Both ways the output is judged
# against the float64 reference, and the largest error is shown as a fraction of its tolerance.

# %%
def used(got, q, k, v, causal):
    ref, bound = inputs.reference_with_bound(q, k, v, causal)
    g = np.asarray(got).astype(np.float64)
    tol = bf16_half_ulp(np.maximum(np.abs(ref), np.abs(g))) + bound
    return np.max(np.abs(g - ref) / tol)


why = attention.unavailable("04_mma_cp_async")
if why and not SIMULATOR:
    print(f"Not run here: {why}. (The CPU emulator works on host memory, where Numba runs in its simulator: "
          f"set CUDABOOK_SIMULATOR=1 before `import cudabook` to use it.)")
else:
    try:
        for name, kw in attention.cases():
            args = attention.random_problem(**kw)
            for params in ({}, {"bkv": 16, "stages": 3}):
                if why:
                    p = attention.upload(*args)
                    p.poison()
                    with emulate.emulating():
                        s04.launch(p, **params)
                    got, how = p.result(), "emulated"
                else:
                    q, k, v, causal = args
                    got, how = attention.run("04_mma_cp_async", q, k, v, causal=causal, **params), "GPU"
                verdict = attention.judge(got, *args)
                print(f"{name:40s} {how} {str(params or 'defaults'):24s} "
                      + (f"right, {used(got, *args):.2f} of the tolerance" if verdict.ok else verdict.message))
    except emulate.HostCompilerMissing as e:
        print("Not emulated:", e)

# %% [markdown]
# ## How fast?
#
# On a GPU the next cell measures rungs 03 and 04 at the benchmark's first size (B=4, H=16, N=4096, d=128),
# with PyTorch's `scaled_dot_product_attention` backends in the same process; rungs 01 and 02 come from this
# card's record (‡). Without a GPU it shows the records in `results/`.

# %%
attention.ladder_so_far("04_mma_cp_async", peers=True)

# %% [markdown]
# Every attention record in `results/`, rung 04 beside its peers of the same run (TFLOP/s count 4 B H N² d, half
# of it when causal):

# %%
# Measured while this rung was built (H100 80GB HBM3, B=4 H=16 N=4096, CUDA events around back-to-back launches),
# before any record existed. Shown only while results/ has no record of rung 04: a record replaces it.
WHILE_BUILT_H100 = {"d=128": {"04": 285, "04 causal": 262, "04 warps=8": 251, "sdpa_flash": 360, "sdpa_cudnn": 672,
                              "sdpa_efficient": 176},
                    "d=64": {"04": 253, "04 causal": 221, "sdpa_flash": 304, "sdpa_cudnn": 476, "sdpa_efficient": 131}}
shown = False
for rec in results.load_all():
    for name, w in rec["workloads"].items():
        st = w.get("stages", {})
        if not name.startswith("attention ") or "median_us" not in st.get("04_mma_cp_async", {}):
            continue
        shown = True
        s = st["04_mma_cp_async"]
        peers = ", ".join(f"{k} {r['TFLOPs']:,.0f}" for k, r in w.get("peers", {}).items() if "TFLOPs" in r)
        print(f"{rec['gpu']} · {name}: 04 {s['median_us']:,.0f} µs, {s['TFLOPs']:,.0f} TFLOP/s"
              + (f", {s['pct_of_sdpa']:.0f} % of the fastest SDPA" if "pct_of_sdpa" in s else "")
              + (f"; peers (TFLOP/s): {peers}" if peers else ""))
if not shown:
    print("No record of rung 04 in results/ yet. On a GPU: `make bench TRACKS=attention` "
          "(or `python -m cudabook.results attention`) measures it and writes results/<gpu>.json.")
    print("Measured while the rung was built (H100 80GB HBM3), TFLOP/s, not a record:")
    for d, row in WHILE_BUILT_H100.items():
        print(f"  {d}: " + ", ".join(f"{k} {v}" for k, v in row.items()))

# %% [markdown]
# Where the time goes: every warp issues its own copies, its own `ldmatrix` for every fragment of K and V, and
# its own softmax between the two products, and `mma.sync` is an Ampere instruction (16 x 8 x 16 a warp)
# that does not reach a Hopper tensor core's rate. FlashAttention-3's kernels on Hopper use the next rung's
# tools, TMA copies and `wgmma` (cuDNN's kernel names say `wgmma` too; lesson 06 reads them), and `wgmma` reads
# its B operand (and A, unless A is given in registers) from shared memory itself, with no `ldmatrix`.
#
# PyTorch's `flash` backend (`sdpa_flash` in the records) is FlashAttention-2 (Dao, 2023,
# [arXiv:2307.08691](https://arxiv.org/abs/2307.08691)): this rung's design, built for Ampere. A block owns a tile
# of query rows, split among its warps; K and V tiles stream through shared memory with `cp.async`; both products
# run on `mma.sync`, the softmax online between them. So it is this rung's yardstick, more than cuDNN is. The records, rung 04 against it (time of `sdpa_flash` over rung 04's: above 1
# means rung 04 is faster):

# %%
for rec in results.load_all():
    for name, w in rec["workloads"].items():
        st, peers = w.get("stages", {}).get("04_mma_cp_async", {}), w.get("peers", {})
        if name.startswith("attention ") and "median_us" in st and "median_us" in peers.get("sdpa_flash", {}):
            print(f"{rec['gpu']} · {name} · commit {w.get('commit') or rec.get('commit')}: "
                  f"{peers['sdpa_flash']['median_us'] / st['median_us']:.2f}x")

# %% [markdown]
# ## Experiments
#
# The tile of keys `bkv` (more work per barrier, more registers for S), the depth of the ring, and the warps a
# block (more query rows share each K/V tile, fewer blocks an SM). Predictions to test: `bkv = 64` is the
# sweet spot at d = 128; a third stage changes little, because each tile's two products already take longer
# than its copies. (Without a GPU of compute capability 8.0 or newer there is nothing to time: the sweeps say
# so.)

# %%
attention.sweep("04_mma_cp_async", "bkv", [32, 64, 128])
attention.sweep("04_mma_cp_async", "stages", [2, 3])
attention.sweep("04_mma_cp_async", "warps", [2, 4, 8])

# %% [markdown]
# Write the pipeline step yourself: [lab 04](../../labs/attention/04_mma_cp_async.ipynb) (the completed version:
# [solution](../../solutions/attention/04_mma_cp_async_SOLUTION.ipynb)). Back: [03 · tiled](03_tiled.ipynb).
# Next: [05 · TMA + wgmma](05_wgmma_tma.ipynb), where Hopper takes the copies and the operand loads off the warps.
