"""08 FP8 (Hopper, sm_90a): 07's kernel on e4m3 inputs, the tensor cores' double rate.

Hopper's tensor cores multiply 8-bit floats (e4m3: 1 sign, 4 exponent and 3 mantissa bits, largest 448) twice
as fast as bf16: one wgmma covers k32 in the time a bf16 one covers k16. The kernel is 07's, compiled with FP8=1
(clusters.cu says what changes): the same 128-byte rows, stages, multicast and TMA store, each row now holding
128 of K.

The inputs arrive in bf16 like every rung's. Each matrix is quantised once per problem (on the host, and not
timed: a model quantises its weights once, and the peer, cuBLASLt's FP8 GEMM through torch._scaled_mm, gets the
same quantised inputs) with a per-tensor scale: the power of two that brings its largest magnitude to at most
448, so that x / scale rounds to e4m3 and (x / scale in e4m3) * scale is exact in bf16. B is stored transposed
(fp8 wgmma reads both operands K-major). The kernel multiplies the fp32 sums by scale_a * scale_b before
rounding C to bf16.

What it computes is the product of the quantised matrices: `judged_on(a, b)` gives them, as bf16, and `judge`
compares C with their float64 product. What quantising costs against the bf16 product is the lesson's question,
not the checker's.

The tolerance, from the arithmetic of the e4m3 tensor cores. Products of two e4m3 values are exact (4 + 4
significant bits). A wgmma k32 step adds 32 products to the accumulator, and it does not add them as float32
does: measured on an H100 (tests/gemm/test_gemm_fp8.py, test_the_tensor_cores_keep_13_bits), the accumulator
and the 32 products are aligned to the exponent e of the largest and each keeps only the multiples of
2^(e - 13): 2^8 + 2^-5 - 2^8 gives 2^-5, 2^8 + 2^-6 - 2^8 gives 0, whether 2^8 sits in the accumulator or in the
same step. So one step loses less than 2^-13 of the largest term on each
of its 33 terms, plus less than 2^-13 of the sum (a sum that grows past the largest term keeps 14 bits of
itself, cut toward zero: tools/probe_fp8_sums.py): less than c X with c = 34 * 2^-13 and X the largest of the
terms and the sum. Every term and partial sum is at most W + E (W = (|A| @ |B| + |ref|) / 2,
E the error so far: the argument of cudabook/gemm/inputs.py), so after each step E grows to at most
E + c (W + E), and after the ceil(K / 32) steps

    E <= ((1 + c)^steps - 1) W        (about K * 2^-13 W while that is small)

The output is rounded to bf16 as every rung's; the scales are powers of two, so multiplying by them is exact.
This is a worst case, and a loose one: measured errors are about a hundred times smaller. It is tight enough at
the graders' sizes (K of a few hundred) to catch a missing k32 step or a product left out; at K = 4096 it allows
0.7 W, which only a gross error exceeds. There the GPU test holds 08 to cuBLASLt's FP8 GEMM with fast
accumulation (the same arithmetic), bit for bit.
"""
from __future__ import annotations

import math
import re

import numpy as np
from numba import cuda

from ..kit.rung import CudaRung
from ..refmemo import References
from . import hopper, s07_clusters
from .checking import compare
from .inputs import BF16

NAME = "08_fp8"
TITLE = "FP8 (e4m3) inputs, per-tensor scales"
PARAMS = {                                  # 07's levers and defaults (its PARAMS says what each does): the bytes
    "bn": 256, "consumers": 2, "stages": 4,    # of a stage, a box and a row are the same at one byte an element
    "cluster": 2, "group_m": 8, "producer_regs": 40, "consumer_regs": 232, "tma_store": True, "mma_depth": 1,
    "multicast": 1, "stmatrix": True, "store_boxes": 2, "blocks": 0, "stream_k": "auto",
}
MIN_CC = (9, 0)
SOURCE = s07_clusters.SOURCE                # one kernel: clusters.cu with FP8=1
KERNEL = s07_clusters.KERNEL
ARG_TYPES = s07_clusters.ARG_TYPES          # 07 passes scale 1.0
RUNG = CudaRung(NAME, SOURCE, sm90a=True)
LAB_TAG = "08_fp8"                          # its lab is the region `// >>> lab[08_fp8]:` of clusters.cu
EMULATED = True                             # without a GPU the CPU emulator runs it (e4m3 wgmma included)
E4M3_MAX = 448.0
ALIGN = 16                                  # TMA rows of 16 bytes: K padded to a multiple of 16 one-byte values
source, unavailable = RUNG.source, RUNG.unavailable


# Hints the grader adds to a failed case when the learner's region shows a likely cause: (test of the region's
# code, comments stripped; hint).
def _has(pattern):
    return lambda code: re.search(pattern, code) is not None


LAB_TEXT_HINTS = [
    (_has(r"\bb\s*\+\s*2048\s*\*"),
     "Bt is K-major like A: k runs along its 128-byte rows, so a k32 step moves 32 bytes along the row; 16 rows "
     "down (2048 bytes) was 07's step through an MN-major B"),
    (_has(r"BK\s*/\s*16"), "one e4m3 wgmma covers k32, and a 128-byte row holds BK = 128 of K: BK / 32 steps"),
    (_has(r"\bWgmma<"), "Wgmma<BN> is the bf16 instruction (k16, two bytes an element); e4m3 bytes need WgmmaFp8<BN>"),
    (_has(r"smem_desc\([^;]*,\s*1024\s*,\s*16\s*\)"),
     "smem_desc(addr, LBO, SBO): in a K-major, 128B-swizzled operand SBO is the 1024 bytes from one 8-row group to "
     "the next; LBO is unused (16)"),
    (_has(r"<<\s*62"), "bits 62-63 of a descriptor are its swizzle; smem_desc already says 128-byte, as the tensor "
     "maps wrote the tiles"),
    (_has(r"\)\s*,\s*0\s*\)\s*;"),
     "scale_d = 0 makes a wgmma overwrite the accumulators (D = A B) instead of adding to them: every step of the "
     "k-loop must add (1)"),
]


def config(**params) -> dict:
    return dict(s07_clusters.config(**params), FP8=1)


def scale_for(x: np.ndarray) -> float:
    """The per-tensor scale: the smallest power of two s with max|x| / s <= 448 (1 for an all-zero x)."""
    amax = float(np.max(np.abs(x))) if x.size else 0.0
    return 1.0 if amax == 0.0 or not math.isfinite(amax) else 2.0 ** math.ceil(math.log2(amax / E4M3_MAX))


def quantize(x_bf16: np.ndarray) -> tuple[np.ndarray, float]:
    """(e4m3 values as ml_dtypes.float8_e4m3fn, scale): x / scale rounded to nearest even in e4m3."""
    import ml_dtypes
    x = np.asarray(x_bf16).astype(np.float32)
    s = scale_for(x)
    return (x / np.float32(s)).astype(ml_dtypes.float8_e4m3fn), s


def judged_on(a, b):
    """The inputs this rung computes with, as bf16: each matrix quantised and scaled back (exact in bf16)."""
    out = []
    for x in (a, b):
        q, s = quantize(np.asarray(x).view(BF16))
        out.append((q.astype(np.float32) * np.float32(s)).astype(BF16))
    return tuple(out)


KEPT_BITS = 13                              # bits below the largest term's leading bit a k32 step keeps (H100)
LOSS_PER_STEP = 34 * 2.0 ** -KEPT_BITS      # c above: 33 terms truncated, then the sum (cut to 14 bits)
_references = References()                  # the last reference of the benchmark's inputs and of a case's


def reference_with_bound(a, b):
    """The float64 product of the quantised inputs and, per element of C, the bound ((1 + c)^steps - 1) W."""
    qa, qb = (x.astype(np.float64) for x in judged_on(a, b))
    steps = -(-qa.shape[1] // 32)
    ref = qa @ qb
    w = 0.5 * (np.abs(qa) @ np.abs(qb) + np.abs(ref))
    return ref, math.expm1(steps * math.log1p(LOSS_PER_STEP)) * w


LAYOUT = ("A is [M, K] and Bt is [N, K], both K-major (k runs along the rows of both): A[i, k] is at "
          "i * Kp + k, Bt[j, k] at j * Kp + k")


def judge(got, a, b):
    """Compare C with the float64 product of the e4m3-quantised a and b, within the bound above. The hint reads
    the pattern of the wrong elements against an eighth of the bound: the bound is a worst case over every k32
    step, so a wrong kernel's elements fall inside or outside it by chance, and the same mistake would get
    another hint with other data."""
    ref, bound = _references.get((a, b), lambda: reference_with_bound(a, b))
    return compare(got, ref, bound, a=a, b=b, hint_bound=bound / 8, layout=LAYOUT)


def operands(p):
    """(A e4m3 [M, Kp], Bt e4m3 [N, Kp], C as the kernel writes it [M, Np], Kp, Np, scale_a * scale_b): device
    arrays of one-byte values, made once per problem (kept with its padded copies, which poison() also fills)."""
    if "fp8" not in p._aligned:
        M, N, K = p.shape
        Kp, Np = -(-K // ALIGN) * ALIGN, -(-N // 8) * 8
        qa, sa = quantize(p.host_a.view(BF16))
        qb, sb = quantize(p.host_b.view(BF16))
        a8 = np.zeros((M, Kp), np.uint8)
        a8[:, :K] = qa.view(np.uint8)
        bt8 = np.zeros((N, Kp), np.uint8)
        bt8[:, :K] = qb.view(np.uint8).T
        c = p.c if Np == N else cuda.device_array((M, Np), np.uint16)
        p._aligned["fp8"] = (cuda.to_device(a8), cuda.to_device(bt8), c, Kp, Np)
        p.fp8_scale = sa * sb
    return (*p._aligned["fp8"], p.fp8_scale)


def map_args(M, N, K, *, bm, bn, store_box=(64, 64)) -> dict:
    """The tensor maps as check_tiled arguments: A [M, Kp] and Bt [N, Kp] one-byte values in boxes of 128 bytes
    of K (bm rows of A, 64 rows of Bt), 128-byte swizzle; C [M, Np] bf16 as 07's."""
    Kp, Np = -(-K // ALIGN) * ALIGN, -(-N // 8) * 8
    maps = {"A": dict(dtype="uint8", shape=(M, Kp), strides=(Kp, 1), box=(bm, 128), swizzle="128B",
                      l2_promotion="256B"),
            "B": dict(dtype="uint8", shape=(N, Kp), strides=(Kp, 1), box=(64, 128), swizzle="128B",
                      l2_promotion="256B")}
    if store_box is not None:
        maps["C"] = dict(dtype="bfloat16", shape=(M, Np), strides=(Np * 2, 2), box=tuple(store_box),
                         swizzle="128B", l2_promotion="none")
    return maps


def tensor_maps(M, N, K, padded_rows=True, **params) -> dict:
    cfg = config(**RUNG.params(PARAMS, params))
    return map_args(M, N, K, bm=64 * cfg["CONSUMERS"], bn=cfg["BN"],
                    store_box=(64, 64) if cfg["TMA_STORE"] else None)


def compile_cubin(arch="sm_90a", source_text=None, **params) -> bytes:
    return RUNG.compile(config(**RUNG.params(PARAMS, params)), arch=arch, source_text=source_text)


_recent: dict = {}


def launch(p, kernel=None, **params):
    """Enqueue 08 on the legacy default stream (no synchronisation); the first launch on a problem quantises
    its inputs (operands). `kernel`: a whole clusters.cu."""
    hopper.enqueue(RUNG, PARAMS, _recent, p, kernel, params, _build)


def _build(p, kernel, params):
    cfg = config(**params)
    smem = s07_clusters.smem_bytes(cfg)
    M, N, K = p.shape
    a8, bt8, c, Kp, Np, scale = operands(p)
    maps = map_args(M, N, K, bm=64 * cfg["CONSUMERS"], bn=cfg["BN"])
    encoded = [hopper.tensor_map(maps[name], hopper.pointer(x)) for name, x in (("A", a8), ("B", bt8), ("C", c))]
    kern, blocks, workspace = s07_clusters.plan(cfg, smem, params, M, Np, Kp,
                                                lambda cf: RUNG.prepare(RUNG.text(kernel), cf, KERNEL, smem=smem)[KERNEL])
    args = [*encoded, hopper.pointer(c), M, Np, Kp, float(scale), *s07_clusters.workspace_args(workspace)]
    threads = 128 * (cfg["CONSUMERS"] + 1)
    return hopper.launcher(p, c, lambda: (kern.launch(blocks, threads, args, ARG_TYPES, shared=smem),
                                          workspace))   # (the closure keeps Stream-K's arrays alive)
