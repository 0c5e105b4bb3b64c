# %% [markdown]
# # GEMM 08 · FP8: the tensor cores at twice the rate
#
# Rung 07 runs bf16 close to cuBLAS. Hopper's tensor cores have one more gear: **8-bit floats**, multiplied
# twice as fast as bf16. This rung is 07's kernel compiled with `FP8=1`. The kernel changes in only a few places:
# the k-tile's wgmmas, B's layout, one multiply in the epilogue. The arithmetic changes more. Each input keeps 3
# bits of mantissa instead of 7, and the tensor cores' sums keep 13 bits below their largest term where float32
# keeps 23. This lesson covers the format, the scales, why the rate doubles, what the kernel changes, what the
# accuracy costs (measured here), and the ladder.
#
# The problem is still `C = A @ B` with bf16 inputs and a bf16 result. Each input is quantised to FP8 once per
# problem (on the host, not timed), and the kernel multiplies the quantised matrices.
#
# PTX ISA: [the FP8 formats](https://docs.nvidia.com/cuda/parallel-thread-execution/index.html#alternate-floating-point-data-formats),
# [wgmma.mma_async with .e4m3 (k32)](https://docs.nvidia.com/cuda/parallel-thread-execution/index.html#asynchronous-warpgroup-level-matrix-instructions-wgmma-mma-async),
# [the matrix descriptor](https://docs.nvidia.com/cuda/parallel-thread-execution/index.html#asynchronous-warpgroup-level-matrix-shared-memory-layout-matrix-descriptor);
# cuBLASLt: [fast accumulation (`CUBLASLT_MATMUL_DESC_FAST_ACCUM`)](https://docs.nvidia.com/cuda/cublas/#cublasltmatmuldescattributes-t).

# %%
import cudabook
print(cudabook.where())

import inspect

import matplotlib.pyplot as plt
import ml_dtypes
import numpy as np
from cudabook import SIMULATOR, emulate, gemm, lesson, nvrtc, tma
from cudabook.gemm import s07_clusters as s07, s08_fp8 as s08, wgmma
from cudabook.gemm.inputs import BF16

E4M3 = ml_dtypes.float8_e4m3fn

# %% [markdown]
# ## e4m3: one sign bit, four exponent bits, three mantissa bits
#
# A byte `s eeee mmm`. With the exponent field `e` from 1 to 15 the value is `(-1)^s 2^(e-7) (1 + m/8)` (bias
# 7). With `e = 0` it is subnormal: `(-1)^s 2^-6 (m/8)`, down to `2^-9`. There are **no infinities**. The only
# special code is `s 1111 111`, NaN. It takes one code from the top binade, so the largest value is
# `0 1111 110` = `2^8 x 1.75` = **448**. That is the `fn` in `float8_e4m3fn` (the name in ml_dtypes and PyTorch):
# *f*inite (no infinity), with *N*aN only at all ones. The other FP8 format, e5m2 (2 mantissa bits, values up to
# 57344), trades precision for range and is mostly used for gradients. This rung uses e4m3 for both inputs.
#
# All 256 codes, decoded. Each binade has 8 values, and the gap between neighbours doubles from one binade to
# the next:

# %%
codes = np.arange(128, dtype=np.uint8)                       # the positive half: s = 0
values = codes.view(E4M3).astype(np.float64)
print(f"0x7e = {values[0x7e]:g} (largest)   0x7f = {values[0x7f]} (the NaN)   0x08 = 2^{np.log2(values[0x08]):g} "
      f"(smallest normal)   0x01 = 2^{np.log2(values[0x01]):g} (smallest subnormal)")
print("\n exponent field e | values                  | gap between neighbours | relative gap")
for e in range(16):
    row = values[8 * e:8 * e + 8]
    row = row[np.isfinite(row) & (row > 0)]
    gap = 2.0 ** (max(e, 1) - 10)
    kind = "subnormal" if e == 0 else ""
    print(f"  {e:2d} {kind:9s}     | {row[0]:<10g} .. {row[-1]:<9g} | 2^{np.log2(gap):<4g} = {gap:<12g} | "
          f"{gap / row[-1]:.3f} .. {gap / row[0]:.3f}")

# %% [markdown]
# The gap between neighbours, relative to the value, for e4m3 and bf16 (8 exponent bits, 7 mantissa bits). A
# number rounds to the nearest neighbour, so it moves by at most half a gap: up to `2^-4` = 6.25 % in e4m3 (just
# above a power of two), `2^-8` = 0.4 % in bf16. Below `2^-6` the e4m3 values are subnormal, and the relative
# gap grows until there is nothing left but zero.

# %%
fig, axes = plt.subplots(1, 2, figsize=(11, 3.2))
finite = values[np.isfinite(values) & (values > 0)]
axes[0].vlines(finite[finite <= 16], 0, 1, lw=0.8)
axes[0].set_xlim(0, 16.5)
axes[0].set_yticks([])
axes[0].set_xlabel("value")
axes[0].set_title("the positive e4m3 values up to 16: 8 a binade, the gap doubling", fontsize=9)
gaps = np.diff(finite)
axes[1].loglog(finite[:-1], gaps / finite[:-1], ".", ms=4, label="e4m3")
b16 = np.arange(1, 0x7F80, dtype=np.uint16).view(BF16).astype(np.float64)    # the positive finite bf16 values
b16 = b16[np.isfinite(b16) & (b16 >= finite[0]) & (b16 <= 448)]
axes[1].loglog(b16[:-1], np.diff(b16) / b16[:-1], ".", ms=1, label="bf16")
axes[1].axvline(2.0 ** -6, color="gray", lw=0.8, ls=":")
axes[1].text(2.0 ** -6 * 1.1, 0.5, "subnormals below", fontsize=8)
axes[1].set_xlabel("value")
axes[1].set_ylabel("gap to the next value / value")
axes[1].legend(fontsize=8)
plt.tight_layout()
plt.show()

# %% [markdown]
# ## Per-tensor scales
#
# The range, `2^-9` to 448, is narrow. A matrix whose largest element is 3000 does not fit. One whose elements
# are around `10^-3` falls mostly below the smallest subnormal (`2^-9`, about 0.002) and rounds to zero. So each matrix is divided by a
# **scale** first: `x ≈ scale x q`, with `q` in e4m3. Rung 08 chooses, for each tensor, the smallest power of two
# that brings the largest magnitude to 448 or below:

# %%
print(inspect.getsource(s08.scale_for))
print(inspect.getsource(s08.quantize))

# %% [markdown]
# Why a **power of two**: dividing by `2^j` changes only the exponent, so `x / scale` is exact, and the one
# rounding is the one to e4m3. `q x scale` is exact in bf16 and float32 too, so the epilogue's multiply by
# `scale_a x scale_b` adds no rounding of its own. An exact `max|x| / 448` would fill the top binade, which
# gains at most a factor of 2 of range at the bottom, and every multiply by it would round.
#
# The scale matters only at the ends of the range: the relative precision of a float is the same in every
# binade. A matrix of values around `10^-3`, first without a scale, then with its own:

# %%
rng = np.random.default_rng(8)
small = (rng.uniform(-1, 1, (256, 256)) * 1e-3).astype(BF16).astype(np.float64)
for scale in (1.0, s08.scale_for(small)):
    back = (small / scale).astype(E4M3).astype(np.float64) * scale
    err = np.linalg.norm(back - small) / np.linalg.norm(small)
    print(f"scale 2^{np.log2(scale):<4g}: relative error {err:.4f}, {np.mean(back == 0) * 100:4.1f} % rounded to 0")

# %% [markdown]
# A per-tensor scale is one number for the whole matrix, so a single large element sets it for all the
# others. Below, one element of A is made larger and larger, and the cell measures how far the product of the
# quantised matrices moves from the product of the bf16 ones, in the rows that do *not* hold that element:

# %%
a, b = gemm.random_problem(128, 256, 2048, rng=np.random.default_rng(8))
print(" outlier  scale_a   A values subnormal in e4m3   error of the product (other rows)")
for big in (1.0, 2.0 ** 6, 2.0 ** 10, 2.0 ** 12, 2.0 ** 14, 2.0 ** 16):
    a2 = a.copy()
    a2[0, 0] = big
    qa, qb = s08.judged_on(a2, b)                      # quantised, scaled back (exact in bf16)
    exact, quantised = gemm.reference(a2, b)[1:], gemm.reference(qa, qb)[1:]
    q, s = s08.quantize(a2)
    sub = np.mean(np.abs(q.astype(np.float64)[1:]) < 2.0 ** -6) * 100
    print(f" {big:7g}  2^{np.log2(s):<4g}   {sub:5.1f} %                      "
          f"{np.linalg.norm(quantised - exact) / np.linalg.norm(exact):.4f}")

# %% [markdown]
# The elements here are uniform in [-1, 1). Up to an outlier `2^10` times their size the error does not move:
# the other values slide down the binades and keep their 3 bits. From `2^12` on, more and more of them reach the
# subnormals, and the error climbs fast. That is why FP8 training recipes use finer scales (one per row, or per
# block of K) when tensors have large outliers. Rung 08 keeps the simplest: one scale per matrix, chosen once.
#
# ## Why twice as fast
#
# A wgmma step reads, for every row of A and of B, **32 bytes** of K from shared memory. For bf16 that is 16
# values (`m64nNk16`). For e4m3 it is 32 (`m64nNk32`), in the same time. So the same bytes give twice the
# multiply-adds. Everything before the tensor cores is counted in bytes, and stays as it was: a 128-byte row of
# a stage holds 128 of K instead of 64, and the stages, boxes and ring are 07's byte for byte. Per FLOP, half
# the bytes come from memory.

# %%
cfg = s08.config()
bm, bn = 64 * cfg["CONSUMERS"], cfg["BN"]
print("          BK   bytes a stage   FLOPs a stage   FLOP per byte   wgmmas a k-tile (per consumer)")
for name, element_bytes, k_step in (("07 bf16", 2, 16), ("08 e4m3", 1, 32)):
    bk = 128 // element_bytes
    stage = (bm + bn) * 128
    flops = 2 * bm * bn * bk
    print(f"{name:9s} {bk:3d}   {stage:13,d}   {flops:13,d}   {flops / stage:13.0f}   {bk // k_step} x k{k_step}")

# %% [markdown]
# ## What changes in the kernel
#
# Against 07 (the `#if FP8` parts of `clusters.cu`):
#
# 1. **One byte an element**: `BK = 128` (a 128-byte row of K), so every byte count stays the same.
# 2. **B is stored transposed**, `Bt [N, K]`. For e4m3 the PTX ISA has no transpose immediates (they exist for
#    `.f16`/`.bf16` only), so both operands must be **K-major**: each row of the shared-memory tile is 128 bytes
#    of K. The host writes `Bt` when it quantises B.
# 3. **B's boxes**: 07's box was 64 rows of K by 64 columns of N. 08's is 64 rows of N by 128 bytes of K, the
#    same 8192 bytes. The tensor map's coordinates (innermost first) swap, `B_BOX(j)`.
# 4. **The k-tile**: four `WgmmaFp8` k32 steps instead of four `Wgmma` k16 steps. Bt's descriptor is A's kind
#    (K-major: LBO 16, SBO 1024), and both start addresses move 32 bytes along the row each step. 07's B moved
#    16 rows = 2048 bytes down.
# 5. **The epilogue**: the float32 sums are multiplied by `scale = scale_a x scale_b` before rounding to bf16.

# %%
lesson.show_region(s08.source(), start="constexpr int ELEMENT_BYTES", end="constexpr int B_BOX_BYTES")
print()
lesson.show_region(s08.source(), start="void mma_k_tile", end="wgmma_commit")
print()
lesson.show_region(s08.source(), start="// Where B's box j", end="#endif")
print()
lesson.show_region(s08.source(), start="d[i] *= scale", end="d[i] *= scale", context=2)

# %% [markdown]
# The descriptors of one k-tile, side by side, for a stage at 1 KiB (A's 128 rows first, then B):

# %%
a_addr = 0x400
b_addr = a_addr + 128 * 128
print(" kk | 07 A   07 B (MN-major, LBO 8192) | 08 A   08 Bt (K-major, LBO 16)")
for kk in range(4):
    d07 = (wgmma.descriptor(a_addr + 32 * kk, **wgmma.A_K_MAJOR),
           wgmma.descriptor(b_addr + 2048 * kk, **wgmma.B_MN_MAJOR))           # 07's B: 16 rows down a k16 step
    d08 = (wgmma.descriptor(a_addr + 32 * kk, lbo=16, sbo=1024),
           wgmma.descriptor(b_addr + 32 * kk, lbo=16, sbo=1024))               # 08's Bt: A's kind
    f = [wgmma.fields(d) for d in d07 + d08]
    print(f"  {kk} | {f[0]['address']:#6x} {f[1]['address']:#8x} (LBO {f[1]['lbo']}) | {f[2]['address']:#6x} "
          f"{f[3]['address']:#8x} (LBO {f[3]['lbo']})")

# %% [markdown]
# And the tensor maps, checked as in lesson 05. A's box is the same 128 bytes wide. B's box turns around:

# %%
for rung in (s07, s08):
    for name, args in rung.tensor_maps(4096, 4096, 4096).items():
        x = dict(args)
        tma.check_tiled(x.pop("dtype"), x.pop("shape"), x.pop("strides"), x.pop("box"), **x)
        if name != "C":
            print(f"{rung.NAME} {name}: {args['dtype']:8s} shape {args['shape']}, box {args['box']}: accepted")

# %% [markdown]
# In SASS (no GPU needed): `QGMMA.64x256x32.F32.E4M3.E4M3` where 07 has `HGMMA.64x256x16.F32.BF16`, four in
# each k-tile for both rungs.

# %%
for rung, pattern in ((s07, "HGMMA"), (s08, "QGMMA")):
    found = nvrtc.sass_lines(rung.compile_cubin(), pattern, kernel=rung.KERNEL)
    print(f"{rung.NAME}: {pattern} x{len(found)}, e.g. {found[0] if found else '(none)'}")

# %% [markdown]
# ## Right?
#
# This rung has its own checker, `s08.judge`. It compares C with the float64 product of the **quantised**
# inputs (`s08.judged_on`), with a tolerance derived from the FP8 tensor cores' arithmetic (further down). What
# quantising costs is measured next, not hidden in the tolerance. On a Hopper GPU the cell runs the checker's
# ragged shapes. Elsewhere the CPU emulator runs the same kernel on smaller ones, e4m3 wgmma included.

# %%
def rung_product(rung, a, b):
    """C from a rung: on this Hopper GPU, or else in the CPU emulator (Numba's simulator holds the arrays)."""
    if not gemm.unavailable(rung.NAME):
        return gemm.run(rung.NAME, a, b)
    p = gemm.upload(a, b)
    p.poison()
    with emulate.emulating():
        rung.launch(p)
    return p.result()


why = gemm.unavailable("08_fp8")
RUNS = not why or SIMULATOR
if not RUNS:
    print(f"Not run here: {why}. (The CPU emulator works on host memory, where Numba runs in its simulator: "
          f"set CUDABOOK_SIMULATOR=1 before `import cudabook` to use it.)")
else:
    try:
        for name, M, N, K in gemm.cases(stage_name="08_fp8"):
            a, b = gemm.random_problem(M, N, K)
            verdict = s08.judge(rung_product(s08, a, b), a, b)
            print(f"{name:28s} {'emulated' if why else '':8s} {verdict.message.splitlines()[0]}")
    except emulate.HostCompilerMissing as e:
        RUNS = False
        print("Not emulated:", e)

# %% [markdown]
# ## What FP8 costs in accuracy
#
# One problem, `128 x 256 x 4096`: uniform inputs in [-1, 1), K as long as the benchmark's. Rungs 07 and 08
# compute it (on a Hopper GPU, or in the emulator), and NumPy gives the references. Each line is a relative
# error, `‖C - reference‖ / ‖reference‖`, with `exact` the float64 product of the bf16 inputs:
#
# - the exact product rounded to bf16: the floor for any bf16 output;
# - rung 07 against exact;
# - the product of the quantised inputs (in float64) against exact: what rounding the inputs to e4m3 costs;
# - rung 08 against the product of the quantised inputs: what its arithmetic costs (13-bit sums, bf16 output);
# - rung 08 against exact: the total.

# %%
if RUNS:
    a, b = gemm.random_problem(128, 256, 4096, rng=np.random.default_rng(4096))
    exact = gemm.reference(a, b)
    quantised = gemm.reference(*s08.judged_on(a, b))
    c07 = np.asarray(rung_product(s07, a, b)).astype(np.float64)
    c08 = np.asarray(rung_product(s08, a, b)).astype(np.float64)

    def rel(x, ref):
        return np.linalg.norm(x - ref) / np.linalg.norm(ref)
    print(f"exact rounded to bf16 vs exact    {rel(exact.astype(BF16).astype(np.float64), exact):.5f}")
    print(f"07 vs exact                       {rel(c07, exact):.5f}")
    print(f"quantised inputs vs exact         {rel(quantised, exact):.5f}")
    print(f"08 vs quantised inputs            {rel(c08, quantised):.5f}")
    print(f"08 vs exact                       {rel(c08, exact):.5f}   "
          f"({rel(c08, exact) / rel(c07, exact):.0f} x 07's)")

# %% [markdown]
# Read the lines from the top. Rung 07's error is the bf16 rounding of its output and nothing more: float32
# sums add nothing visible. Almost all of rung 08's error is in its **inputs**. Each element of A and B moves by
# up to 6 % when it is rounded to e4m3. The errors partly cancel along K, and the product is off by a few
# percent, an order of magnitude more than 07. The arithmetic adds a little on top of the bf16 rounding. That
# is fine for an inference layer whose weights were trained for it. It is not fine for a solver. FP8 is a
# choice about the inputs: the kernel's job is not to lose more.
#
# ## Sums that keep 13 bits
#
# The tensor cores do not add e4m3 products the way float32 does. A probe (tests/gemm/test_gemm_fp8.py) puts
# three products into one k32 step: `+2^8`, `-2^8` and a small `q = 2^-e`. In float32 the sum is `q`. On an H100
# it is `q` for `e ≤ 5` and **0** from `e = 6` on. Within a k32 step the 32 products and the accumulator are
# aligned to the exponent of the largest, and each keeps only multiples of `2^(8 - 13)` (cut toward zero). The
# same holds when `2^8` is already in the accumulator from an earlier step. (The bf16 rungs' k16 step was not put
# through this probe; their tolerance allows for alignment to float32's 24 bits, cudabook/gemm/inputs.py.)
#
# Two finer points show only on random data (tools/probe_fp8_sums.py read back about 150,000 accumulators of an
# H100; the CPU emulator reproduces every bit). A product aligns by its operands' exponents added, not by its own:
# `1.875 × 1.875 = 3.52` counts as `2^0`. And a sum that grows past the largest term keeps 14 bits of itself,
# cut toward zero.
#
# The cell runs that probe. On a Hopper GPU it measures. In the CPU emulator it shows the rule that the emulator
# implements, the one measured on the H100 (the emulator is a model; it does not measure anything):

# %%
if RUNS:
    for e in range(3, 9):
        a = np.zeros((64, 256), np.float32)
        b = np.zeros((256, 8), np.float32)
        a[:, 0], b[0] = 16.0, 16.0                    # +2^8
        a[:, 1], b[1] = -16.0, 16.0                   # -2^8
        a[:, 2], b[2] = 2.0 ** -e, 1.0                # q
        got = float(np.asarray(rung_product(s08, a.astype(BF16), b.astype(BF16))).astype(np.float64)[0, 0])
        print(f"2^8 - 2^8 + 2^-{e}: float32 gives {2.0 ** -e:<10g} rung 08 gives {got:g}")

# %% [markdown]
# Over K the loss adds up. One step loses less than `2^-13` of its largest term on each of its 33 terms, and
# less than `2^-13` of the sum when that keeps 14 bits, so `s08.judge` allows `((1 + 34 x 2^-13)^(K/32) - 1) W`
# per element, with `W` the size of the element's terms. At small K that bound is tight enough to catch a k32
# step left out. At K = 4096 it is 0.7 W, loose enough to allow almost anything. There the GPU test holds
# rung 08 to the library instead, bit for bit.
#
# The library: cuBLASLt's FP8 GEMM (`torch._scaled_mm`) has a switch, `CUBLASLT_MATMUL_DESC_FAST_ACCUM`
# (`use_fast_accum=`). With it off (the default), intermediate results are "periodically promoted to a higher
# precision" (the documentation's words): the 13-bit sums run over only a stretch of K before they join a
# float32 total. That costs time. With it on, the library accumulates in the tensor cores, as rung 08 does: on
# an H100, rung 08 and cuBLASLt with fast accumulation give the same C bit for bit (the GPU test checks it).
# DeepSeek-V3's report saw the same limit on an H800, "around 14 bits", and promotes every 128 values of K
# ([arXiv:2412.19437](https://arxiv.org/abs/2412.19437), section 3.3.2). On a Hopper GPU with PyTorch, the cell
# compares the three:

# %%
try:
    import torch
except ImportError:
    torch = None
if gemm.unavailable("08_fp8") or torch is None or not torch.cuda.is_available():
    print("Not run here: it needs a Hopper GPU and PyTorch with CUDA.")
else:
    a, b = gemm.random_problem(2048, 2048, 4096, rng=np.random.default_rng(7))
    p = gemm.upload(a, b)
    p.poison()
    s08.launch(p)
    ours = np.asarray(p.result()).astype(np.float64)
    a8, bt8, _, _, _, scale = s08.operands(p)
    dev = torch.device("cuda")
    qa = torch.from_numpy(a8.copy_to_host()).to(dev).view(torch.float8_e4m3fn)
    qbt = torch.from_numpy(bt8.copy_to_host()).to(dev).view(torch.float8_e4m3fn)
    one, s = torch.tensor(1.0, device=dev), torch.tensor(float(scale), device=dev)
    quantised = gemm.reference(*s08.judged_on(a, b))
    for fast in (True, False):
        theirs = torch._scaled_mm(qa, qbt.t(), scale_a=one, scale_b=s, out_dtype=torch.bfloat16,
                                  use_fast_accum=fast).float().cpu().numpy().astype(np.float64)
        print(f"cuBLASLt use_fast_accum={fast!s:5s}: equal to rung 08 on {np.mean(theirs == ours) * 100:5.1f} % "
              f"of C; error vs quantised inputs {np.linalg.norm(theirs - quantised) / np.linalg.norm(quantised):.2e}")
    print(f"rung 08:                       error vs quantised inputs "
          f"{np.linalg.norm(ours - quantised) / np.linalg.norm(quantised):.2e}")

# %% [markdown]
# ## How fast?
#
# TFLOP/s here count `2 M N K` as for bf16. The records in `results/` hold rung 08 beside rung 07 and cuBLASLt's
# FP8 GEMM both ways (`torch._scaled_mm`, fast accumulation on and off), each card's rows from one run on the
# same data. The cell reads them:

# %%
from cudabook import results

FP8_ROWS = {"08_fp8": "rung 08, FP8", "cublaslt_fp8_fast": "cuBLASLt FP8, fast accumulation",
            "cublaslt_fp8": "cuBLASLt FP8, default (promoted sums)", "07_clusters": "rung 07, bf16"}
for record in results.load_all():
    for name, w in record["workloads"].items():
        rows = {**w.get("stages", {}), **w.get("peers", {})}
        tf = {k: rows.get(k, {}).get("TFLOPs") for k in FP8_ROWS}
        if not name.startswith("gemm ") or not tf["08_fp8"]:
            continue
        print(f"{record['gpu']} · {name} · commit {w.get('commit') or record.get('commit')}")
        for k, label in FP8_ROWS.items():
            print(f"  {label:38s} " + (f"{tf[k]:7,.0f} TFLOP/s" if tf[k] else "not in this record"))
        if tf["07_clusters"]:
            print(f"  rung 08 runs {tf['08_fp8'] / tf['07_clusters']:.2f}x rung 07")
        for k in ("cublaslt_fp8_fast", "cublaslt_fp8"):
            if tf[k]:
                print(f"  rung 08 against {FP8_ROWS[k]}: {100 * (tf['08_fp8'] / tf[k] - 1):+.1f} % TFLOP/s "
                      f"(medians of the ladder run)")
        for d in w.get("head_to_head", []):
            if d.get("stage") == "08_fp8" and d.get("peer") in FP8_ROWS and "ratio" in d:
                print(f"  interleaved, {d['rounds']} rounds: {FP8_ROWS[d['peer']]}'s time / rung 08's = "
                      f"{d['ratio']:.3f}x (rung 08 {min(d['stage_us']):,.1f}-{max(d['stage_us']):,.1f} µs, the "
                      f"library {min(d['peer_us']):,.1f}-{max(d['peer_us']):,.1f} µs over the rounds; rounds with "
                      f"rung 08 ahead: {sum(p > s for s, p in zip(d['stage_us'], d['peer_us']))} of {d['rounds']})")
                if "sustained" in d:
                    print(f"  back to back, {d['sustained']['seconds']:g} s each ({', '.join(d['sustained']['order'])}),"
                          f" at the power cap: {d['sustained']['ratio']:.3f}x")

# %% [markdown]
# Read the two cards side by side. Rung 08 runs about twice rung 07 at 8192³, and short of that at 4096³ on
# both. Why is open: the last partial wave cannot be it (4096³ and 8192³ keep the clusters equally busy, 97 %,
# without Stream-K, lesson 09; the H100 record has no Stream-K, and the H200's 8192³ record shares that wave
# out), and part of the larger ratio at 8192³ is rung 07 running slower there than at 4096³ in the H100
# record, not rung 08 running faster. The epilogue, which FP8 does not speed up, is a guess nobody measured.
# Against cuBLASLt's default, whose promoted sums cost time, rung 08 is ahead in every record, by more at 4096³
# than at 8192³. The strongest peer is cuBLASLt doing the same arithmetic (fast accumulation). By the medians of
# the ladder run, rung 08 is a percent or so behind it on the H100 at both sizes and on the H200 at 4096³, and
# further behind on the H200 at 8192³. Those medians carry whatever the card's clock did between the turns of
# the run. The H200 record also times the two again, side by side, two ways: in interleaved rounds, a few
# milliseconds each after a pause, which share the card's clock; and (since f44d140) each run back to back for
# two seconds, peer first and last, as a long job meets the power cap (lesson 09 shows the clock held down under
# a GEMM load). The second is the comparison to quote. At 4096³ rung 08 is a hair behind either way. At 8192³
# it is ahead in every round and in both back-to-back runs, by less back to back than in the rounds.
# A reading adds the SM clocks to the back-to-back measure, with runs of three seconds
# (`tools/probe_clocks.py --rung 08_fp8`, a reading: cuBLASLt, 08, 08, cuBLASLt, as for rung 07 in lesson 07):

# %%
print("\n".join(results.sustained_lines("gemm", "08_fp8")) or "no such reading in results/readings/ yet")

# %% [markdown]
# Held at the cap, rung 08 keeps a lead at 8192³, smaller than the rounds', and at 4096³ it stays a little
# behind: the same picture as rung 07 against cuBLAS. The H100's record has no head-to-head. On a Hopper GPU the next cell
# measures rungs 07 and 08 with their peers (cuBLAS, and cuBLASLt's FP8 GEMM both ways). Elsewhere it shows the
# records in `results/`, each with its own card, commit and date.

# %%
gemm.ladder_so_far("08_fp8", peers=True)
