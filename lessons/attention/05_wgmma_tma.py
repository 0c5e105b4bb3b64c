# %% [markdown]
# # Attention 05 · TMA and wgmma: Hopper's copies and Hopper's tensor cores for both products
#
# Rung 04 made every warp do everything: issue its share of the copies, pull every fragment of K and V into
# registers with `ldmatrix`, multiply 16 x 8 x 16 at a time with `mma.sync`. Hopper takes the first two off the
# warps, as in GEMM rung 05:
#
# - the **Tensor Memory Accelerator** copies whole tiles (*boxes*) of q, k and v into shared memory when one
#   thread asks, described once on the host by a **tensor map**, and reports on an **mbarrier** by counting
#   bytes;
# - **`wgmma.mma_async`** lets a *warpgroup* (4 warps, 128 threads) multiply a 64 x N x 16 block in one
#   instruction, reading its operands **from shared memory** through descriptors, or its A operand from
#   registers.
#
# ```
#   thread 0: TMA Q (once), K/V tiles into a ring of STAGES slots ("full" mbarrier each)
#   each warpgroup (64 query rows), per key tile:
#     wait full[s] -> S = Q Kᵀ: d/16 wgmma m64n{bkv}k16 (Q and K from shared memory) -> wait
#       -> mask, online softmax in registers (rung 04's, unchanged)
#       -> O += P V: bkv/16 wgmma m64n{d}k16 (P from registers, V from shared memory) -> wait
#     __syncthreads; thread 0 refills slot s with the tile STAGES ahead
# ```
#
# The kernel is `cudabook/attention/kernels/wgmma_tma.cu` on the kit's Hopper pieces
# (`kit/include/hopper.cuh`: tensor maps, mbarriers, `Wgmma`, `WgmmaRS`). It needs sm_90a (H100, H200); without
# one it still compiles here. PTX ISA: [wgmma](https://docs.nvidia.com/cuda/parallel-thread-execution/index.html#asynchronous-warpgroup-level-matrix-instructions),
# [its register fragments](https://docs.nvidia.com/cuda/parallel-thread-execution/index.html#asynchronous-warpgroup-level-matrix-register-fragment),
# [the matrix descriptor](https://docs.nvidia.com/cuda/parallel-thread-execution/index.html#asynchronous-warpgroup-level-matrix-shared-memory-layout-matrix-descriptor),
# [cp.async.bulk.tensor](https://docs.nvidia.com/cuda/parallel-thread-execution/index.html#data-movement-and-conversion-instructions-cp-async-bulk-tensor),
# [mbarrier](https://docs.nvidia.com/cuda/parallel-thread-execution/index.html#parallel-synchronization-and-communication-instructions-mbarrier);
# driver API: [cuTensorMapEncodeTiled](https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__TENSOR__MEMORY.html).

# %%
import cudabook
print(cudabook.where())

import numpy as np
import matplotlib.pyplot as plt
from cudabook import attention, lesson, nvrtc, results, tma
from cudabook.attention import s05_wgmma_tma as s05
from cudabook.gemm import wgmma

source = s05.source()

# %% [markdown]
# ## Three tensor maps: q, k and v as [B·H, N, d]
#
# Each operand is described to TMA once, by the driver's `cuTensorMapEncodeTiled`, as a **3-D** tensor: heads
# (B·H of them), rows (N), channels (d). A box is `[1, rows, 64]`: one head, a tile of rows, 64 channels =
# 128 bytes, exactly the span of the 128-byte swizzle (the swizzled layout wgmma reads; GEMM 05 draws it). A row
# of d = 128 is two boxes side by side. Q's box has `64 · warpgroups` rows, K's and V's `bkv`.
#
# `cudabook.tma.check_tiled` checks each description against the driver's rules (and limits measured on H100
# and H200) before the driver sees it, so a mistake gets a sentence instead of `CUDA_ERROR_INVALID_VALUE`:

# %%
for d in s05.HEAD_DIMS:
    for name, args in s05.tensor_maps(4, 16, 4096, 4096, d).items():
        a = dict(args)
        tma.check_tiled(a.pop("dtype"), a.pop("shape"), a.pop("strides"), a.pop("box"), **a)
        print(f"d={d:3d} {name}: shape {args['shape']}, strides {args['strides']} B, box {args['box']}, "
              f"swizzle {args['swizzle']}: accepted")
k_map = dict(s05.tensor_maps(4, 16, 4096, 4096, 128)["k"])
print("\nthe driver call for k (its lists innermost first):")
print(tma.format_driver_call(tma.driver_args(k_map.pop("dtype"), **k_map)))

# %% [markdown]
# The box is as wide as the swizzle allows. Ask for the whole d = 128 row in one box and the validator says
# which rule that breaks:

# %%
try:
    tma.check_tiled("bfloat16", (64, 4096, 128), (4096 * 256, 256, 2), (1, 128, 128), swizzle="128B")
except tma.TensorMapError as e:
    print(f"[{e.rule}] {e}")

# %% [markdown]
# **Why 3-D and not `[B·H·N, d]`?** At a ragged end (N not a multiple of the tile) a box reaches past the last
# row of its head. In 3-D that is outside the tensor, and TMA fills zeros. In 2-D it is the first rows of the
# next head: real numbers, that the kernel would have to mask out everywhere they could leak. `tma.load_box`
# (the arithmetic the emulator uses) shows both, for two heads of 5 rows and a 4-row box at row 4:

# %%
x = np.arange(2 * 5 * 64, dtype=np.float32).reshape(2, 5, 64)           # [heads, rows, channels]
in_3d = tma.load_box(x, (1, 4, 64), (0, 4, 0))[0]
in_2d = tma.load_box(x.reshape(10, 64), (4, 64), (4, 0))
print("3-D box, first channel of each row:", in_3d[:, 0], " (row 4 of head 0, then zeros)")
print("2-D box, first channel of each row:", in_2d[:, 0], " (row 4 of head 0, then head 1's rows)")

# %% [markdown]
# Keys past Nk still get `s = -inf` in the kernel (a zero row of K gives a score of 0, not nothing), but V's
# zero rows and Q's zero rows are harmless: P is 0 there, and rows past Nq are never stored.
#
# ## The descriptors: Q and K K-major, V MN-major
#
# `wgmma` reads shared memory through a 64-bit **descriptor** per operand: the start address, the leading and
# stride byte offsets (LBO, SBO) and the swizzle (GEMM 05 takes it apart field by field). What matters is
# which way each operand runs.
#
# **S = Q Kᵀ**, `[64 x bkv] = [64 x d] · [d x bkv]`. Q's box is `[rows][64 channels]`: the reduction dimension
# (d) runs along each 128-byte row, **K-major**. Kᵀ's columns are K's rows, so K's box `[keys][64 channels]` is
# the B operand with its reduction dimension contiguous too: K-major, transpose flag 0. For both: SBO = 1024
# (the next 8 rows), LBO unused (16 by convention), and a k16 step moves **32 bytes along** the rows; after 4
# steps (64 channels) the next box begins.

# %%
cfg = s05.config(128, False)
BQ, BKV, BOXES = 64 * cfg["WGS"], cfg["BKV"], 128 // 64
Q_BOX, KV_BOX = BQ * 128, BKV * 128                    # bytes of one box, as in the kernel
base = 0x400                                           # the kernel rounds its shared memory up to 1024 bytes
sq, skv = base, base + BOXES * Q_BOX                   # Q, then stage 0's K and V
wg = 1                                                 # the second warpgroup: its 64 rows of Q
print(f"d = 128, bkv = {BKV}, {cfg['WGS']} warpgroups: Q box {Q_BOX:,} B, K/V box {KV_BOX:,} B")
print(" kk   desc_q              Q start   desc_k              K start")
for kk in range(128 // 16):
    off = 32 * (kk % 4)
    dq = wgmma.descriptor(sq + wg * 64 * 128 + (kk // 4) * Q_BOX + off, lbo=16, sbo=1024)
    dk = wgmma.descriptor(skv + (kk // 4) * KV_BOX + off, lbo=16, sbo=1024)
    print(f" {kk}    0x{dq:016x}  {wgmma.fields(dq)['address']:#7x}   0x{dk:016x}  {wgmma.fields(dk)['address']:#7x}")

# %% [markdown]
# **O += P V**, `[64 x d] = [64 x bkv] · [bkv x d]`. Now the reduction runs over the keys, and V's box is
# `[keys][64 channels]`: the N dimension (channels) is the contiguous one, **MN-major**, transpose flag 1. A k16
# step moves **16 rows down** (16 x 128 = 2048 bytes); SBO = 1024 is still the next 8 rows (of keys); and LBO
# is the step from one 64-channel group of N to the next: V's second box, `KV_BOX` bytes further.

# %%
v0 = skv + BOXES * KV_BOX                              # stage 0's V, after its K boxes
print(wgmma.explain(wgmma.descriptor(v0, lbo=KV_BOX, sbo=1024)))
print("k16 steps of V start at", [hex(wgmma.fields(wgmma.descriptor(v0 + 2048 * ps, lbo=KV_BOX, sbo=1024))["address"])
                                  for ps in range(BKV // 16)])

# %% [markdown]
# In the kernel, the first product (this is lab 05's region, with the mask and the rescale after it):

# %%
lesson.show_region(source, start="// >>> lab", end="wgmma_keep(sc);")

# %% [markdown]
# `wgmma_fence()` orders the accumulator registers with the asynchronous tensor cores; `mma<0>`'s 0 is the
# transpose flag of B (K-major), and its last argument `kk > 0` says whether to add to S or overwrite it (the
# first step overwrites: no zeroing needed). `commit` closes the group; `wait<0>` waits for it; `wgmma_keep`
# tells the compiler that `sc` is live across the asynchronous instructions.
#
# ## P straight from registers
#
# The accumulator of a wgmma is, warp by warp, the accumulator of `mma.sync`: warp `w` of the warpgroup holds
# rows `16w .. 16w+15`, and lane `l` holds, of each 8-column block `j`, `sc[4j], sc[4j+1]` = row `l/4`, columns
# `8j + 2(l%4)` and the next, `sc[4j+2], sc[4j+3]` the same 8 rows down. And the A operand of a wgmma *from
# registers* is, warp by warp, the A fragment of `mma.m16n8k16`. So rung 04's trick carries over: P's k16 step
# `ps` is S's column blocks `2ps` and `2ps+1`, rounded to bf16 in place, and `WgmmaRS` (the register-A form)
# takes them:

# %%
lesson.show_region(source, start="uint32_t pa[BKV / 16][4];", end="wgmma_keep_a(pa[ps])")
lesson.show_region((nvrtc.INCLUDE / "hopper.cuh").read_text(), start="template <> struct WgmmaRS<64>",
                   end='"{%32, %33, %34, %35}, %36, p, 1, 1, %38; }"')

# %% [markdown]
# The registers of an asynchronous A operand are read while the wgmma runs: they must not change until the wait
# (`wgmma_keep_a` keeps the compiler from reusing them early).
#
# ## The machine code
#
# No GPU needed: the cubin for sm_90a shows the two products as `HGMMA`. For S, `HGMMA.64x{bkv}x16.F32.BF16`
# with `gdesc[UR..]` (the two descriptors, in uniform registers); the first one adds to `RZ`, zero: it
# overwrites S (`kk > 0` is false). For O, `HGMMA.64x{d}x16` with A from registers (`R..`) and `.tnspB` (V
# MN-major). `UTMALDG.3D` are the 3-D TMA loads, `SYNCS` the mbarrier operations, `WARPGROUP.ARRIVE` the fence.
# Local memory 0 (no spills) at d = 64 and 128, causal or not.

# %%
cubin = s05.compile_cubin(d=128)
hgmma = nvrtc.sass_lines(cubin, "HGMMA", kernel=s05.KERNEL)
s_ops, o_ops = [i for i in hgmma if "tnspB" not in i], [i for i in hgmma if "tnspB" in i]
print(f"S = Q Kᵀ:  {len(s_ops):2d} HGMMA (d/16),  e.g. {s_ops[0]}")
print(f"O += P V:  {len(o_ops):2d} HGMMA (bkv/16), e.g. {o_ops[0]}")
for pattern in ("UTMALDG", "SYNCS", "WARPGROUP"):
    found = nvrtc.sass_lines(cubin, pattern, kernel=s05.KERNEL)
    print(f"{pattern:10s} x{len(found):<4d} e.g. {found[0] if found else '(none)'}")
for d in s05.HEAD_DIMS:
    for causal in (False, True):
        use = nvrtc.resource_usage(s05.compile_cubin(d=d, causal=causal))[s05.KERNEL]
        print(f"d={d:3d} causal={causal!s:5s} bkv={s05.config(d, causal)['BKV']}: {use['registers']} registers, "
              f"{use['local']} bytes of local memory")

# %% [markdown]
# ## Right?
#
# On an H100 or H200, the checker's ragged cases against the float64 reference. Without a Hopper GPU the
# workbook's CPU emulator runs the same kernel (`wgmma`, TMA and the mbarriers included; it also grades lab 05)
# on a few small cases, checked the same way.

# %%
from cudabook import SIMULATOR, emulate
from cudabook.attention import checking

why = attention.unavailable("05_wgmma_tma")
if why and not SIMULATOR:
    print(f"Not run here: {why}. (The CPU emulator works on host memory, where Numba runs in its simulator: "
          f"set CUDABOOK_SIMULATOR=1 before `import cudabook` to use it.)")
elif why:
    try:
        for kw in (dict(B=1, H=2, Nq=45, Nk=150, d=64, spread=0.25),
                   dict(B=1, H=1, Nq=130, Nk=130, d=128, causal=True)):
            args = attention.random_problem(**kw)
            for params in ({}, {"bkv": 64}):
                p = attention.upload(*args)
                p.poison()
                with emulate.emulating():
                    s05.launch(p, **params)
                verdict = attention.judge(p.result(), *args)
                print(f"{checking.label(**kw):46s} emulated {str(params or 'defaults'):12s} "
                      f"{verdict.message.splitlines()[0]}")
    except emulate.HostCompilerMissing as e:
        print("Not emulated:", e)
else:
    for name, kw in attention.cases():
        q, k, v, causal = attention.random_problem(**kw)
        for params in ({}, {"bkv": 64}, {"warpgroups": 1, "stages": 3}):
            verdict = attention.judge(attention.run("05_wgmma_tma", q, k, v, causal=causal, **params), q, k, v, causal)
            print(f"{name:40s} {str(params or 'defaults'):32s} {verdict.message.splitlines()[0]}")

# %% [markdown]
# ## Every step still waits
#
# Look at one pass of a warpgroup: wait for the tile; S's wgmmas, and **wait** for them; the softmax on
# ordinary cores; O's wgmmas, and **wait**; a block-wide barrier; the refill. While a warpgroup does its
# softmax, its tensor-core work is done and the next is not issued; and both warpgroups of a block run the same
# steps at the same moments, so where one block fills an SM (d = 128: its shared memory and registers leave room
# for no second) the tensor cores idle during every softmax. At d = 64 a block is small enough for two to share
# an SM, and one block's products can run during the other's softmax, though nothing arranges it. How long is a softmax, next to the
# products? Its exponentials alone (one `ex2` a score, on the SM's special-function units), against the two
# products, at the H100 SXM5 rates the FlashAttention-3 paper gives
# ([arXiv:2407.08608](https://arxiv.org/abs/2407.08608)): 989 TFLOP/s of bf16 matrix products, 3.9 TFLOP/s of
# special functions.

# %%
MMA_RATE, SFU_RATE = 989e12, 3.9e12                   # H100 SXM5, per second (the FlashAttention-3 paper)
ex2 = len(nvrtc.sass_lines(s05.compile_cubin(d=128), "MUFU.EX2", kernel=s05.KERNEL))
print(f"MUFU.EX2 in the d=128 loop: {ex2} a thread = {s05.config(128, False)['BKV'] // 2} scores + the rescales")
for d in s05.HEAD_DIMS:
    bkv = s05.config(d, False)["BKV"]
    products = 2 * (2 * 64 * bkv * d)                  # S and O of one tile, one warpgroup
    exps = 64 * bkv
    print(f"d={d:3d} bkv={bkv:3d}: the exponentials take {exps / SFU_RATE / (products / MMA_RATE):.0%} of the "
          f"products' time")

# %% [markdown]
# At d = 128 the exponentials alone take about half as long as the products, at d = 64 about as long, before
# counting the max, the scaling, the sums, the rescale of O and the conversions. Run one after the other, as in
# a block alone on its SM, the tensor cores wait that long every tile. A schematic of two warpgroups, then of what rung 06 does:

# %%
def lanes(ax, y0, overlapped, tiles=3):
    gemm_t, soft_t = 1.0, 0.8
    for wg in range(2):
        t = 0.9 * wg if overlapped else 0.0
        for i in range(tiles):
            ax.broken_barh([(t, gemm_t)], (y0 + wg, 0.8), color="C0")
            ax.broken_barh([(t + gemm_t, soft_t)], (y0 + wg, 0.8), color="C1")
            t += gemm_t + soft_t + (0.9 - soft_t if overlapped else 0.0)
        ax.text(-0.2, y0 + wg + 0.4, f"warpgroup {wg + 1}", ha="right", va="center", fontsize=8)


fig, ax = plt.subplots(figsize=(10, 3))
lanes(ax, 3, overlapped=False)
lanes(ax, 0, overlapped=True)
ax.text(0, 5.1, "05: both warpgroups in step, the tensor cores idle during every softmax", fontsize=8)
ax.text(0, 2.1, "06: ping-pong, one warpgroup's softmax under the other's products (a producer warpgroup feeds both)",
        fontsize=8)
ax.plot([], [], color="C0", lw=6, label="wgmma (S, then O)")
ax.plot([], [], color="C1", lw=6, label="softmax (ordinary cores)")
ax.legend(fontsize=7, loc="upper right")
ax.set_yticks([])
ax.set_xlabel("time (schematic)")
plt.tight_layout()
plt.show()

# %% [markdown]
# Rung 06, next, adds the overlap: a **producer** warpgroup that only issues TMA copies (and gives its registers to
# the others with `setmaxnreg`), and two **consumer** warpgroups (three at d = 64) that take turns on the tensor
# cores (*ping-pong*, ordered by named barriers), so that one's softmax runs while another's wgmmas do. Per-slot
# "empty" mbarriers replace the block-wide `__syncthreads`, and by default a block no
# longer stops after one tile of query rows: one block an SM walks tile after tile (a persistent grid).
#
# ## How fast?
#
# On a Hopper GPU the next cell measures rungs 04 and 05, with PyTorch's SDPA backends in the same process;
# rungs 01 to 03 come from this card's record (‡). Elsewhere it shows the records in `results/`.

# %%
attention.ladder_so_far("05_wgmma_tma", peers=True)

# %% [markdown]
# From the records: rung 05 against rung 04 and the fastest SDPA backend, and **the causal speed-up**. A causal
# block stops at the diagonal, so it loads and multiplies only the tiles at or below it; the TFLOP/s count only
# the unmasked half of the work, so the time ratio (non-causal / causal) is the figure to read. The tiles alone
# predict it:

# %%
for d in s05.HEAD_DIMS:
    c = s05.config(d, True)
    bq, bkv, n = 64 * c["WGS"], c["BKV"], 4096
    causal_tiles = sum(-(-min(n, (qb + 1) * bq) // bkv) for qb in range(n // bq))
    print(f"d={d:3d}: causal blocks read {causal_tiles / (n // bq * n // bkv):.1%} of the tiles: a speed-up of "
          f"{(n // bq * n // bkv) / causal_tiles:.2f}x at best (the diagonal tiles also pay for the mask)")

# Measured while this rung was built (H100 80GB HBM3, B=4 H=16 N=4096, CUDA events around back-to-back launches),
# before any record existed. Shown only while results/ has no record of rung 05: a record replaces it.
WHILE_BUILT_H100 = {"d=128, bkv=64": 467, "d=128, bkv=128 (default)": 521, "d=128 causal (bkv=128)": 453,
                    "d=128, 3 warpgroups": 504, "d=64, bkv=64 (default)": 397, "d=64, bkv=128": 363}
shown = False
for rec in results.load_all():
    for name, w in rec["workloads"].items():
        st = w.get("stages", {})
        if not name.startswith("attention ") or "median_us" not in st.get("05_wgmma_tma", {}):
            continue
        shown = True
        s5 = st["05_wgmma_tma"]
        print(f"{rec['gpu']} · {name}: 05 {s5['median_us']:,.0f} µs, {s5['TFLOPs']:,.0f} TFLOP/s"
              + (f", {s5['pct_of_sdpa']:.0f} % of the fastest SDPA" if "pct_of_sdpa" in s5 else "")
              + (f"; {st['04_mma_cp_async']['median_us'] / s5['median_us']:.2f}x rung 04"
                 if "median_us" in st.get("04_mma_cp_async", {}) else ""))
        if name.endswith("causal=True"):
            other = rec["workloads"].get(name.replace("causal=True", "causal=False"), {}).get("stages", {})
            if "median_us" in other.get("05_wgmma_tma", {}):
                print(f"  causal speed-up: {other['05_wgmma_tma']['median_us'] / s5['median_us']:.2f}x")
if not shown:
    print("\nNo record of rung 05 in results/ yet. On an H100 or H200: `make bench TRACKS=attention` (or "
          "`python -m cudabook.results attention`) measures it and writes results/<gpu>.json.")
    print("Measured while the rung was built (H100 80GB HBM3), TFLOP/s, not a record:")
    for what, tf in WHILE_BUILT_H100.items():
        print(f"  {what}: {tf}")
    nc, c = WHILE_BUILT_H100["d=128, bkv=128 (default)"], WHILE_BUILT_H100["d=128 causal (bkv=128)"]
    print(f"  causal speed-up at d=128 (time, non-causal / causal): 2 x {c} / {nc} = {2 * c / nc:.2f}x")

# %% [markdown]
# ## Experiments
#
# `bkv` (the N of the S wgmma: 64 or 128) trades registers for fewer passes; `stages` the depth of the ring;
# `warpgroups` how many 64-row groups share each K/V tile. Predictions to test: at d = 128, 128-key tiles win
# (fewer waits and barriers per key); at d = 64 they do not; a third stage changes nothing while every pass
# waits for its own products anyway. (Without an H100 or H200 there is nothing to time: the sweeps say so.)

# %%
attention.sweep("05_wgmma_tma", "bkv", [64, 128])
attention.sweep("05_wgmma_tma", "stages", [2, 3])
attention.sweep("05_wgmma_tma", "warpgroups", [1, 2, 3])

# %% [markdown]
# Write the S product and the rescale yourself: [lab 05](../../labs/attention/05_wgmma_tma.ipynb) (the completed
# version: [solution](../../solutions/attention/05_wgmma_tma_SOLUTION.ipynb)); without a Hopper GPU the CPU
# emulator grades it, on small cases.
# Back: [04 · tensor cores and a cp.async ring](04_mma_cp_async.ipynb). Next: rung 06, warp specialization, where
# the softmax of one warpgroup hides under the products of the other.
