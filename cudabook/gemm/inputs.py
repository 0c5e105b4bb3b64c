"""The matrix product's inputs: validation with errors that name the argument and the rule, random problems,
the float64 reference and the tolerance the checker allows.

    C = A @ B      A bf16 [M, K], B bf16 [K, N] (NumPy row-major, as `a @ b`), C bf16 [M, N]

The tolerance, per element of C, from the arithmetic. Products of two bf16 values are exact in float32 (8 + 8
significant bits), so a kernel's only errors are its float32 additions over K and the one rounding of C to bf16
at the end. Write p_k = a_ik b_kj, u = 2^-24 (float32's unit roundoff), S = sum_k |p_k| (that is |A| @ |B|), and
W = (S + |ref|) / 2, the larger of the sums of the positive p_k and of the negative ones' magnitudes.

1. What one step loses. Rungs 01 to 03 add with float32 FMAs, rounded to nearest: at most u times the result.
   The tensor cores of rungs 04 to 07 (mma.sync m16n8k16, wgmma k16) add a group of products to the accumulator
   in one step. The bound assumes the coarsest such step (a model: the bf16 step was not probed here; lesson
   08 probes the FP8 one), one that aligns every term to the exponent of the largest, drops the bits shifted
   out (round toward zero) and truncates the sum to float32's 24 bits. A step that merges m values (products,
   accumulators) into one loses less than one unit in the last place of the largest term (2^-23 of it) on each
   of the m - 1 others, and less than 2^-23 of the sum on the sum: m losses, each below 2u times a term or the
   sum. Extra alignment bits, rounding to nearest or smaller groups only lose less. Truncation's losses all
   point toward zero, so they need not cancel.
2. How large the terms and sums are. In any order and grouping, a value being added holds the sum of some of
   the p_k plus the error made so far, and every such partial sum lies between minus the sum of the negative
   p_k and the sum of the positive ones: every term and every sum is at most W + E, E the bound below (by
   induction over the steps, the error so far never exceeds it).
3. In all. A step that merges m >= 2 nonzero values loses less than m 2u (W + E) <= 4 (m - 1) u (W + E) (a zero,
   an accumulator's start or K's padding, costs nothing); from K products to one C the (m - 1) add up to K - 1,
   so E <= 4 K u (W + E), that is

       E <= 4 K u W / (1 - 4 K u)

   The attention track allows the same 4 u per term for its scores. The output is then rounded to bf16 once, to
   nearest: half a bf16 ulp of max(|ref|, |got|). Together:

    |got - ref| <= half a bf16 ulp of max(|ref|, |got|)  +  4 K u W / (1 - 4 K u)  (+ 1e-30)

This is a worst case, not an estimate. With the inputs uniform in [-1, 1] (S about K / 4, |ref| about sqrt(K) / 3)
it is about K^2 2^-25: 0.03 at the graders' longest K = 1000, about 2 at the benchmark's K = 8192. Measured with a
model of the tensor cores' arithmetic (tests/gemm/test_gemm_tolerance.py, one draw of random_problem a size):
at every size the graders use, leaving out one product fails 80 to 100 % of the elements of C and leaving out one
k16 step 97 to 100 %; at K = 8192 one missing product (at most 1 in size) hides under the slack, and a missing k16
step still fails about 14 % of them. Mistakes are caught at the graders' sizes (K at most 1000), not the benchmark's.
"""
from __future__ import annotations

import numpy as np

from ..kit.host_arrays import BF16, host_array, require_bf16

U32 = 2.0 ** -24          # float32 unit roundoff
LOSS_PER_TERM = 4 * U32   # what each product may cost, relative to W + E (the docstring's point 3)


def validate(a, b):
    """Check A and B; return them as C-contiguous uint16 arrays of bf16 bits: a [M, K], b [K, N].

    TypeError for a non-array or a wrong dtype, ValueError for a wrong rank, an empty dimension or K that
    does not agree; each message names the argument and the rule."""
    a = host_array("a", a, "a NumPy array of bfloat16", "`np.asarray(x).astype(ml_dtypes.bfloat16)`")
    b = host_array("b", b, "a NumPy array of bfloat16", "`np.asarray(x).astype(ml_dtypes.bfloat16)`")
    require_bf16("a", a)
    require_bf16("b", b)
    if a.ndim != 2:
        raise ValueError(f"a must be 2-D [M, K], got {a.ndim}-D with shape {a.shape}")
    if b.ndim != 2:
        raise ValueError(f"b must be 2-D [K, N], got {b.ndim}-D with shape {b.shape}")
    (M, K), (K2, N) = a.shape, b.shape
    if K != K2:
        raise ValueError(f"a is [M, K] = {a.shape} and b is [K, N] = {b.shape}: K must agree "
                         f"(a has {K} columns, b has {K2} rows)")
    for name, n in (("M (rows of a)", M), ("K (columns of a, rows of b)", K), ("N (columns of b)", N)):
        if n < 1:
            raise ValueError(f"{name} is {n}; every dimension must be at least 1")
    return np.ascontiguousarray(a).view(np.uint16), np.ascontiguousarray(b).view(np.uint16)


def to_bf16(x):
    """float -> bfloat16, rounded to nearest even (ml_dtypes does the rounding)."""
    return np.asarray(x, dtype=np.float32).astype(BF16)


def random_problem(M, N, K, *, rng=None, scale=1.0):
    """Fresh A [M, K] and B [K, N]: uniform in [-scale, scale), rounded to bf16."""
    rng = rng if rng is not None else np.random.default_rng()
    a = to_bf16(rng.uniform(-scale, scale, size=(M, K)))
    b = to_bf16(rng.uniform(-scale, scale, size=(K, N)))
    return a, b


def _float64(x):
    x = np.asarray(x)
    if x.dtype == np.uint16:
        x = x.view(BF16)
    return x.astype(np.float64)


def reference(a, b):
    """C = A @ B in float64 (exact products, nearly exact sums): what every stage is compared with."""
    return _float64(a) @ _float64(b)


def reference_with_bound(a, b):
    """The reference and the arithmetic's bound 4 K u W / (1 - 4 K u) for each element of C, W = (|A| @ |B| +
    |ref|) / 2 (the module's docstring derives it)."""
    fa, fb = _float64(a), _float64(b)
    K = fa.shape[1]
    ref = fa @ fb
    worst = K * LOSS_PER_TERM
    if worst >= 1:
        raise ValueError(f"K = {K}: from K = 2^22 on, float32 sums can lose everything and no tolerance holds")
    return ref, worst / (1.0 - worst) * 0.5 * (np.abs(fa) @ np.abs(fb) + np.abs(ref))
