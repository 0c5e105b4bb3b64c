"""Attention's inputs: validation that names the argument and the rule, random problems, the float64 reference
and the tolerance the checker allows.

    out[b, h, i] = sum over keys j of  w_ij v[b, h, j],   w_ij = exp(s_ij) / sum_j' exp(s_ij')
    s_ij = scale * q[b, h, i] . k[b, h, j],               scale = 1 / sqrt(d)

q is bf16 [B, H, Nq, d], k and v bf16 [B, H, Nk, d], out bf16 [B, H, Nq, d]. With causal=True (Nq == Nk) query i
sees the keys j <= i only (the others get w_ij = 0).

The tolerance, per output element, from the arithmetic of the kernels of this track. Write u = 2^-24 (float32's
unit roundoff), A_ij = sum_c |q_ic| |k_jc|, w the exact softmax weights, and |v| the magnitudes of v:

1. Scores. Products of two bf16 values are exact in float32; the sum over d, in any order (a tensor core may
   truncate instead of rounding: 2u per addition), is off by at most 2 d u A_ij. Scaling (by scale, or by
   scale * log2(e) for exp2) and subtracting the row max m add a few roundings of |s_ij| and |m|. In all,
   the exponent is off by at most
       delta_ij = scale * (4 d u A_ij + 5 u (|q_i . k_j| + max_j' |q_i . k_j'|))
   (the factor 4 instead of 2 is room for a tensor core's alignment of its products). Any error common to a
   whole row (which max m the kernel subtracts, its rounding) cancels in the division by the row sum.
2. exp. exp or exp2 in float32 (libdevice's expf, or ex2.approx with log2(e) folded into the scale) is off by
   at most 2^-21 relatively. An online softmax rescales by alpha = exp(m_old - m_new) when the running max
   grows; each alpha is off by 2^-21 plus its own argument's roundings (8 u scale max|q_i . k_j|). The running
   max can grow only at a key that beats every key before it (a "record", counted in key order, near-ties
   included): R_i records in row i bound the rescales of any tiling.
   So p_ij, the unnormalised weight exp(s_ij - m), is off relatively by at most
       tau_ij = exp(delta_ij + R_i (2^-21 + 8 u scale max_j |q_i . k_j|) + 2^-21 + 2u) - 1.
   Normalising removes any error common to the row; what is left moves out[i] by at most
       sum_j w_ij |v_j| tau_ij + T_i sum_j w_ij |v_j|,      T_i = sum_j w_ij tau_ij,
   divided by 1 - T_i.
3. P in bf16. The tensor-core rungs round P = exp(s - m), in [0, 1], to bf16 before P @ V: at most 2^-8
   relatively when rounded to nearest (bf16 keeps 8 significant bits: u = 2^-8). We allow 2^-8 (1 + 2^-8): one
   rounding to nearest, with the row sum l summed in float32 from the unrounded p. A kernel that truncates P
   (up to 2^-7) or sums l from the rounded P (the two errors add up) has no such room as a worst case; it passes
   only where its errors happen to cancel.
4. float32 sums. P @ V and l over Nk keys in any order, the R_i rescales, and the final division O / l:
   (4 Nk + 4 R_i + 12) u, relative to sum_j w_ij |v_j|.
5. The output is rounded to bf16 once: half a bf16 ulp of max(|ref|, |got|).

Together:

    |got - ref| <= half a bf16 ulp of max(|ref|, |got|)
                 + [ (2^-8 (1 + 2^-8) + (4 Nk + 4 R_i + 12) u) (WV + WTV) + WTV + T_i WV ] / (1 - T_i)

with WV = sum_j w_ij |v_j| and WTV = sum_j w_ij tau_ij |v_j|, per output channel. At ordinary sizes this is
about 2^-8 WV, what bf16 P costs: half a bf16 step of an output as large as WV, and several steps of a typical
output, which is much smaller than WV when the v_j differ in sign. Every known mistake (a wrong
scale, a mask off by one, a missing rescale or division, a stale K tile) is off by far more; a Numba rung that
keeps P in float32 is well inside it. The bound holds while T_i < 1/2 (scores below about 10^4); a bf16 P
below 2^-126 (a bf16 subnormal) is off by less than 2^-134 absolutely, which the 1e-30 floor of the checker
absorbs.

random_problem's spread: q and k are spread * N(1, 1) per channel, so the scores are spread^2 * (about
sqrt(d) + a few): a common offset per row, which the softmax cancels, plus a spread of its own. At spread = 1
that is a moderate softmax with scores up to about 20; at spread >= 4 the scores pass 89, where float32's exp
overflows: a kernel that forgets to subtract the row max gives inf / inf = NaN there.
"""
from __future__ import annotations

import math

import numpy as np

from ..kit.host_arrays import BF16, finite_bf16_bits, host_array, require_bf16

POISON = np.uint16(0xFFC1)         # a bf16 NaN: an output nobody wrote can never pass the check; a NaN the
                                   # kernel computes has other bits (the hardware's and NumPy's are 0x7FFF, 0x7FC0)
U32 = 2.0 ** -24                   # float32 unit roundoff
EXP_ERROR = 2.0 ** -21             # exp / exp2 in float32, relative
P_ROUNDING = 2.0 ** -8 * (1 + 2.0 ** -8)   # bf16 P (see the docstring: one round-to-nearest, u = 2^-8)
ARGS = ("q", "k", "v", "causal")
_AXES = {"q": "[B, H, Nq, d]", "k": "[B, H, Nk, d]", "v": "[B, H, Nk, d]"}


def validate(q, k, v, causal=False):
    """Check the inputs; return (q, k, v as C-contiguous uint16 arrays of bf16 bits, causal as a bool).

    TypeError for a non-array, a device array, a wrong dtype or a causal that is not a bool; ValueError for a
    wrong rank, sizes that disagree, an empty dimension, causal with Nq != Nk, or a value that is not finite.
    Each message names the argument and the rule."""
    arrays = {name: host_array(name, x, "a NumPy array of bfloat16", f"`np.asarray({name}).astype(ml_dtypes.bfloat16)`")
              for name, x in (("q", q), ("k", k), ("v", v))}
    for name, x in arrays.items():
        require_bf16(name, x)
    for name, x in arrays.items():
        if x.ndim != 4:
            raise ValueError(f"{name} must be 4-D {_AXES[name]}, got {x.ndim}-D with shape {x.shape}")
    q, k, v = arrays["q"], arrays["k"], arrays["v"]
    if k.shape != v.shape:
        raise ValueError(f"k and v must have the same shape [B, H, Nk, d] (one value row per key), got k {k.shape} "
                         f"and v {v.shape}")
    for axis, what in ((0, "B (batch, axis 0)"), (1, "H (heads, axis 1)"), (3, "d (head dimension, axis 3)")):
        if q.shape[axis] != k.shape[axis]:
            raise ValueError(f"q and k disagree on {what}: q has {q.shape[axis]}, k and v have {k.shape[axis]}; "
                             f"q, k and v must agree on B, H and d")
    B, H, Nq, d = q.shape
    Nk = k.shape[2]
    for name, n in (("B (batch, axis 0)", B), ("H (heads, axis 1)", H), ("Nq (queries, q's axis 2)", Nq),
                    ("Nk (keys, k's and v's axis 2)", Nk), ("d (head dimension, axis 3)", d)):
        if n < 1:
            raise ValueError(f"{name} is {n}; every dimension must be at least 1")
    if not isinstance(causal, (bool, np.bool_)):
        raise TypeError(f"causal must be True or False, got {causal!r} ({type(causal).__name__})")
    causal = bool(causal)
    if causal and Nq != Nk:
        raise ValueError(f"causal=True needs Nq == Nk (query i sees keys 0 .. i), got Nq = {Nq} and Nk = {Nk}")
    out = [finite_bf16_bits(name, x) for name, x in arrays.items()]
    return out[0], out[1], out[2], causal


# ----------------------------------------------------------------------------------------------------------
# Random problems
# ----------------------------------------------------------------------------------------------------------
def to_bf16(x):
    """float -> bfloat16, rounded to nearest even (ml_dtypes does the rounding)."""
    return np.asarray(x, dtype=np.float32).astype(BF16)


def random_problem(B, H, Nq, Nk, d, *, causal=False, spread=1.0, rise=0.0, rng=None):
    """Fresh inputs (q, k, v, causal): q and k are spread * N(1, 1) per channel, v is N(0, 1), all rounded to
    bf16. The scores grow as spread^2 (see the module's docstring): spread = 1 is an ordinary softmax, and at
    spread >= 4 exp(score) overflows float32 unless the row max is subtracted first. rise > 0 adds rise * j / Nk
    to every channel of key j, so later keys score higher (by about rise * sqrt(d) at the last): every row's max
    then grows as the keys go by, which a kernel that forgets to rescale its accumulator cannot hide."""
    rng = rng if rng is not None else np.random.default_rng()
    if causal and Nq != Nk:
        raise ValueError(f"causal=True needs Nq == Nk, got Nq = {Nq} and Nk = {Nk}")

    def normal(n, mean):
        return rng.standard_normal((B, H, n, d), dtype=np.float32) + np.float32(mean)
    q = to_bf16(np.float32(spread) * normal(Nq, 1.0))
    ramp = (np.float32(rise) * np.arange(Nk, dtype=np.float32) / np.float32(max(Nk, 1)))[None, None, :, None]
    k = to_bf16(np.float32(spread) * normal(Nk, 1.0) + ramp)
    v = to_bf16(normal(Nk, 0.0))
    return q, k, v, bool(causal)


# ----------------------------------------------------------------------------------------------------------
# The float64 reference
# ----------------------------------------------------------------------------------------------------------
def float64(x):
    """bf16 (or its uint16 bits) -> float64."""
    x = np.asarray(x)
    if x.dtype == np.uint16:
        x = x.view(BF16)
    return x.astype(np.float64)


def allowed_keys(rows, Nk, causal, shift=0):
    """Which keys each row sees: bool [n, Nk] for query indices `rows` [n] (all keys unless causal; j <= i +
    shift when causal)."""
    rows = np.asarray(rows)
    if not causal:
        return np.ones((rows.size, Nk), bool)
    return np.arange(Nk)[None, :] <= rows[:, None] + shift


def records(s, allowed, slack=0.0):
    """Per row, how many keys (in key order, among those allowed) beat every key before them, or come within
    `slack` of it (a kernel's rounded scores may break a near-tie the other way): where a running max can grow.
    s float64 [n, Nk], the exact scaled scores."""
    masked = np.where(allowed, s, -np.inf)
    best = np.maximum.accumulate(masked, axis=1)
    before = np.concatenate([np.full((s.shape[0], 1), -np.inf), best[:, :-1]], axis=1)
    return (allowed & (masked + 2 * slack >= before)).sum(axis=1)


def head(qh, kh, vh, rows, causal, *, bound=False, scale=None):
    """Attention of one head in float64: qh [n, d] the query rows with indices `rows` [n], kh and vh [Nk, d].
    Returns out [n, d], and with bound=True also the tolerance less the output's own bf16 rounding (see the
    module's docstring)."""
    n, d = qh.shape
    Nk = kh.shape[0]
    scale = 1.0 / math.sqrt(d) if scale is None else scale
    raw = qh @ kh.T                                           # [n, Nk], exact products, float64 sums
    allowed = allowed_keys(rows, Nk, causal)
    s = np.where(allowed, scale * raw, -np.inf)
    m = s.max(axis=1, keepdims=True)
    with np.errstate(invalid="ignore"):
        e = np.exp(s - m)                                     # 0 where masked
        w = e / e.sum(axis=1, keepdims=True)
    out = w @ vh
    if not bound:
        return out
    A = np.abs(qh) @ np.abs(kh).T
    big = np.where(allowed, np.abs(raw), 0.0).max(axis=1, keepdims=True)          # max_j |q_i . k_j|
    delta = scale * (4 * d * U32 * A + 5 * U32 * (np.abs(raw) + big))
    R = records(s, allowed, delta)[:, None].astype(np.float64)
    drift = R * (EXP_ERROR + 8 * U32 * scale * big)
    tau = np.where(allowed, np.expm1(delta + drift + EXP_ERROR + 2 * U32), 0.0)
    av = np.abs(vh)
    WV = w @ av
    WTV = (w * tau) @ av
    T = (w * tau).sum(axis=1, keepdims=True)
    sums = (4 * Nk + 4 * R + 12) * U32
    err = ((P_ROUNDING + sums) * (WV + WTV) + WTV + T * WV) / np.maximum(1.0 - T, 0.5)
    return out, err


def _row_chunk(Nk):
    return max(1, (1 << 20) // max(Nk, 1))                  # rows at a time: about 8 MB per float64 [n, Nk]


def attention(q, k, v, causal=False, *, bound=False, heads=None, rows=None):
    """out (and bound) in float64 for the heads `heads` (flat indices b * H + h; all by default) and, for each,
    the query rows `rows` (an int array [len(heads), n], or None for all): [len(heads), n, d]."""
    B, H, Nq, d = np.shape(q)
    Nk = np.shape(k)[2]
    qf, kf, vf = (np.asarray(x).reshape(B * H, -1, d) for x in (q, k, v))      # widened a head at a time below
    heads = np.arange(B * H) if heads is None else np.asarray(heads)
    n = Nq if rows is None else np.shape(rows)[1]
    out = np.empty((len(heads), n, d))
    err = np.empty((len(heads), n, d)) if bound else None
    step = _row_chunk(Nk)
    for g, hd in enumerate(heads):
        idx = np.arange(Nq) if rows is None else np.asarray(rows[g])
        kh, vh = float64(kf[hd]), float64(vf[hd])
        for r0 in range(0, n, step):
            part = idx[r0:r0 + step]
            got = head(float64(qf[hd, part]), kh, vh, part, causal, bound=bound)
            if bound:
                out[g, r0:r0 + step], err[g, r0:r0 + step] = got
            else:
                out[g, r0:r0 + step] = got
    return (out, err) if bound else out


def reference(q, k, v, causal=False):
    """out [B, H, Nq, d] in float64: what every stage is compared with."""
    B, H, Nq, d = np.shape(q)
    return attention(q, k, v, causal).reshape(B, H, Nq, d)


def reference_with_bound(q, k, v, causal=False):
    """(reference, bound), both [B, H, Nq, d]: the bound is the tolerance less the output's own bf16 rounding."""
    B, H, Nq, d = np.shape(q)
    out, err = attention(q, k, v, causal, bound=True)
    return out.reshape(B, H, Nq, d), err.reshape(B, H, Nq, d)
