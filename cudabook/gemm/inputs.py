"""The matrix product's inputs: validation with errors that name the argument and the rule, random problems,
the float64 reference and the tolerance the checker allows.

    C = A @ B      A bf16 [M, K], B bf16 [K, N] (NumPy row-major, as `a @ b`), C bf16 [M, N]

Products of two bf16 values are exact in float32 (8 + 8 significant bits), so a kernel's only errors are the
float32 additions over K and the one rounding of C to bf16 at the end. The tolerance says exactly that:

    |got - ref| <= half a bf16 ulp of max(|ref|, |got|)  +  K * 2^-24 * (|A| @ |B|)  (+ 1e-30)

The second term is the classical bound on summing K float32 terms in any order (K unit roundoffs times the sum
of the terms' magnitudes). It grows with K, so graders use small K, where a missing term is far larger.
"""
from __future__ import annotations

import numpy as np

from ..kit.host_arrays import BF16, host_array, require_bf16

U32 = 2.0 ** -24          # float32 unit roundoff


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
    """The reference and the float32 summation bound K * 2^-24 * (|A| @ |B|) for each element of C."""
    fa, fb = _float64(a), _float64(b)
    K = fa.shape[1]
    return fa @ fb, K * U32 * (np.abs(fa) @ np.abs(fb))
