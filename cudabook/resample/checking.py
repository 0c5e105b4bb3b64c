"""The resampling track's checker: fresh random inputs, a poisoned output, a float64 reference, a diagnosis.

Tolerance: one bf16 rounding of the float64 reference (half a bf16 unit in the last place) plus float32
arithmetic slack (8 float32 epsilons of the larger of the two source values mixed). NaN never passes.
"""
from __future__ import annotations

import numpy as np

from ..verdict import Verdict, bf16_half_ulp
from . import inputs
from .problem import upload

EPS32 = float(np.finfo(np.float32).eps)


def compare(got, ref, scale, *, targets=None, times=None, show=5) -> Verdict:
    """Compare bf16 output `got` [B, T, D] with the float64 reference `ref` of the same shape."""
    got = np.asarray(got)
    if got.shape != ref.shape:
        return Verdict(False, ref.size, ref.size, 0, ref.shape,
                       f"FAIL: output shape {got.shape}, expected {ref.shape}")
    g = got.astype(np.float64)
    tol = bf16_half_ulp(np.maximum(np.abs(ref), np.abs(np.nan_to_num(g)))) + 8 * EPS32 * scale + 1e-30
    nan = np.isnan(g)
    bad = nan | ~(np.abs(g - ref) <= tol)
    n_bad, n_nan = int(bad.sum()), int(nan.sum())
    if n_bad == 0:
        return Verdict(True, 0, ref.size, 0, ref.shape, f"PASS: all {ref.size:,} outputs match {_shape(ref)}")
    where = np.argwhere(bad)
    first = [(int(b), int(t), int(d), float(ref[b, t, d]), float(g[b, t, d])) for b, t, d in where[:show]]
    lines = [f"FAIL: {n_bad:,} of {ref.size:,} outputs are wrong {_shape(ref)}"
             + (f"; {n_nan:,} are NaN (never written, or computed as NaN)" if n_nan else "")]
    for b, t, d, e, x in first:
        rounded = float(inputs.to_bf16(e).astype(np.float64))
        lines.append(f"  out[{b}, {t}, {d}]: expected {e:.6g} (bf16 {rounded:.6g}), got {x:.6g}")
    hint = diagnose(bad, nan, targets, times)
    if hint:
        lines.append("Hint: " + hint)
    return Verdict(False, n_bad, ref.size, n_nan, ref.shape, "\n".join(lines), first)


def _shape(ref):
    B, T, D = ref.shape
    return f"(B={B}, T={T}, D={D})"


def diagnose(bad, nan, targets=None, times=None) -> str | None:
    """A guess at the kind of bug from where the wrong outputs are."""
    B, T, D = bad.shape
    if nan.all():
        return "no output was written at all: does the kernel store to `out`, and is it launched?"
    channels = bad.any(axis=(0, 1))
    first_bad = int(np.argmax(channels)) if channels.any() else D
    if D > 1 and channels.any() and first_bad > 0 and channels[first_bad:].all():
        return (f"only the channels from {first_bad} on are wrong: a missing tail? The loop over D must also "
                f"cover the channels past the first sweep and those left over when D is not a multiple of the "
                f"step or vector width")
    for period in (2, 4, 8, 16):
        if D >= 2 * period and channels.any() and not channels.all():
            pattern = channels[: D // period * period].reshape(-1, period)
            if (pattern == pattern[0]).all() and pattern[0].any() and not pattern[0].all():
                which = ", ".join(str(i) for i in np.nonzero(pattern[0])[0])
                return (f"channels d with d % {period} in {{{which}}} are wrong, all the others right: one "
                        f"word (or lane) of each {period}-channel group is handled differently from the rest")
    if T > 1 and nan[:, -1, :].any() and not bad[:, 0, :].any():
        return "the last targets were never written: check the bound on the target index"
    if B > 1 and bad[-1].any() and not bad[0].any():
        return "only later batch rows are wrong: check how the batch index b enters the addresses"
    if targets is not None and times is not None:
        rows_t = np.any(bad, axis=2)
        outside = (targets < times[:, :1]) | (targets > times[:, -1:])
        if rows_t.any() and np.all(outside[rows_t]):
            return ("only targets outside the source range are wrong: np.interp holds the end values there "
                    "(clamp the weight to [0, 1], or the interval index to [0, S-2])")
    if nan.any():
        return "some outputs are NaN: unwritten elements, or a division by a zero time step?"
    return None


def check_launch(launch, B, S, T, D, *, sorted_targets=True, rng=None, **params) -> Verdict:
    """Run `launch(problem, **params)` on fresh random inputs of this size and judge the output."""
    src_times, src_feats, tgt_times = inputs.random_problem(B, S, T, D, sorted_targets=sorted_targets, rng=rng)
    return check_on(launch, src_times, src_feats, tgt_times, **params)


def check_on(launch, src_times, src_feats, tgt_times, **params) -> Verdict:
    """Run `launch` on these inputs (output poisoned first) and judge the result."""
    ref, scale = inputs.reference_with_scale(src_times, src_feats, tgt_times)
    problem = upload(src_times, src_feats, tgt_times)
    problem.poison()
    launch(problem, **params)
    return compare(problem.result(), ref, scale, targets=np.asarray(tgt_times), times=np.asarray(src_times))
