"""The running example's inputs: validation with errors that say what and where, random problems, and
bf16 on the host."""
from __future__ import annotations

import numpy as np

from ..kit.host_arrays import BF16


class InputError(ValueError):
    """Bad input to the resampler: the message names the array, the rule and the place."""


def _dtype_hint(name, arr, want):
    if want == "bfloat16":
        how = (f"convert with `{name}.astype(ml_dtypes.bfloat16)` (float data) or pass the raw bits as "
               f"`{name}.view(ml_dtypes.bfloat16)` (uint16 data)")
    else:
        how = f"convert with `{name}.astype(np.{want})`"
    return InputError(f"{name} must be {want}, got {arr.dtype}; {how}")


def _as_array(name, x):
    if hasattr(x, "copy_to_host"):
        raise InputError(f"{name} is a device array; pass a NumPy array (run() uploads it for you)")
    try:
        return np.asarray(x)
    except Exception as e:
        raise InputError(f"{name} could not be read as an array: {e}") from None


def validate(src_times, src_feats, tgt_times):
    """Check the three inputs; return them as contiguous (float32, uint16 bf16 bits, float32) arrays.

    Raises InputError (a ValueError) naming the array, the rule and the place.
    """
    src_times = _as_array("src_times", src_times)
    src_feats = _as_array("src_feats", src_feats)
    tgt_times = _as_array("tgt_times", tgt_times)
    if src_times.dtype != np.float32:
        raise _dtype_hint("src_times", src_times, "float32")
    if tgt_times.dtype != np.float32:
        raise _dtype_hint("tgt_times", tgt_times, "float32")
    if BF16 is None or src_feats.dtype != BF16:
        raise _dtype_hint("src_feats", src_feats, "bfloat16")
    if src_times.ndim != 2:
        raise InputError(f"src_times must be 2-D [B, S], got shape {src_times.shape}")
    if tgt_times.ndim != 2:
        raise InputError(f"tgt_times must be 2-D [B, T], got shape {tgt_times.shape}")
    if src_feats.ndim != 3:
        raise InputError(f"src_feats must be 3-D [B, S, D], got shape {src_feats.shape}")
    B, S = src_times.shape
    if src_feats.shape[:2] != (B, S):
        raise InputError(f"src_feats has shape {src_feats.shape} but src_times is {src_times.shape}: "
                         f"the first two dimensions [B, S] must agree")
    if tgt_times.shape[0] != B:
        raise InputError(f"tgt_times has {tgt_times.shape[0]} batch rows but src_times has {B}")
    if S < 2:
        raise InputError(f"src_times has S = {S} source times per row; interpolation needs S >= 2")
    if src_feats.shape[2] < 1:
        raise InputError("src_feats has D = 0 channels; D must be at least 1")
    _check_finite("src_times", src_times)
    _check_finite("tgt_times", tgt_times)
    _check_range(src_times, tgt_times)
    _check_increasing(src_times)
    return (np.ascontiguousarray(src_times), np.ascontiguousarray(src_feats).view(np.uint16),
            np.ascontiguousarray(tgt_times))


def _check_finite(name, a):
    bad = ~np.isfinite(a)
    if bad.any():
        b, i = np.argwhere(bad)[0]
        raise InputError(f"{name}[{b}, {i}] is {a[b, i]}; times must be finite ({int(bad.sum())} bad values)")


F32_MAX = float(np.finfo(np.float32).max)


def _check_range(src_times, tgt_times):
    """The kernels subtract times in float32 (x - t0, t1 - t0): a row whose times span more than float32's
    largest value would overflow to inf and give NaN. Refuse it, naming the row, rather than answer wrongly."""
    both = np.concatenate([src_times, tgt_times], axis=1).astype(np.float64)
    span = both.max(axis=1) - both.min(axis=1) if both.shape[1] else np.zeros(len(both))
    bad = np.nonzero(span > F32_MAX)[0]
    if bad.size:
        b = int(bad[0])
        raise InputError(f"the times of batch row {b} span {span[b]:.3g} (from {both[b].min():.3g} to "
                         f"{both[b].max():.3g}), more than float32 can hold ({F32_MAX:.3g}): differences of "
                         f"times would overflow. Shift or rescale that row's times (src_times and tgt_times "
                         f"together)")


def _check_increasing(src_times):
    steps = np.diff(src_times, axis=1)
    bad = steps <= 0
    if bad.any():
        b, i = np.argwhere(bad)[0]
        raise InputError(
            f"src_times must be strictly increasing in each row: row {b} has src_times[{b}, {i}] = "
            f"{src_times[b, i]!r} followed by src_times[{b}, {i + 1}] = {src_times[b, i + 1]!r}")


def to_bf16(x):
    """float array -> ml_dtypes.bfloat16 array (rounded to nearest even)."""
    return np.asarray(x, dtype=np.float32).astype(BF16)


def random_problem(B, S, T, D, *, sorted_targets=True, rng=None, knots=0.1, outside=0.05):
    """Fresh random inputs: irregular source times, bf16 features, and targets that include exact knots
    (`knots` of them) and times outside the source range (`outside` of them)."""
    rng = np.random.default_rng(rng)
    steps = rng.uniform(0.1, 1.0, size=(B, S)).astype(np.float32)
    src_times = (np.cumsum(steps, axis=1) + rng.uniform(-5, 5, size=(B, 1))).astype(np.float32)
    # cumsum in float32 can repeat a value only for huge S; make sure rows strictly increase anyway
    src_times = np.maximum.accumulate(src_times, axis=1)
    dup = np.diff(src_times, axis=1) <= 0
    if dup.any():
        src_times = np.cumsum(np.full((B, S), 0.5, np.float32), axis=1)
    src_feats = to_bf16(rng.standard_normal((B, S, D)) * rng.uniform(0.5, 4.0, size=(B, 1, D)))
    lo, hi = src_times[:, :1], src_times[:, -1:]
    span = hi - lo
    tgt = lo + rng.uniform(-outside, 1 + outside, size=(B, T)) * span
    if T:
        pick = rng.random((B, T)) < knots
        knot_idx = rng.integers(0, S, size=(B, T))
        tgt = np.where(pick, np.take_along_axis(src_times, knot_idx, axis=1), tgt)
    tgt = tgt.astype(np.float32)
    if sorted_targets:
        tgt = np.sort(tgt, axis=1)
    return src_times, src_feats, tgt


def interval(times_row, x):
    """(lo, w) for targets x in one batch row of source times, as np.interp blends: the lower source row lo in
    0 .. S-2 and the weight of row lo + 1, clamped to [0, 1] (so targets outside the range take the end rows)."""
    t = np.asarray(times_row, np.float64)
    x = np.asarray(x, np.float64)
    hi = np.clip(np.searchsorted(t, x, side="right"), 1, len(t) - 1)
    return hi - 1, np.clip((x - t[hi - 1]) / (t[hi] - t[hi - 1]), 0.0, 1.0)


def reference_with_scale(src_times, src_feats, tgt_times):
    """float64 np.interp per (batch, channel), and the magnitude of the two source values each output mixes
    (what float32 arithmetic error scales with)."""
    times, bits, targets = validate(src_times, src_feats, tgt_times)
    feats = bits.view(BF16).astype(np.float64)
    B, S, D = feats.shape
    T = targets.shape[1]
    out = np.empty((B, T, D))
    scale = np.empty((B, T, D))
    for b in range(B):
        lo, w = interval(times[b], targets[b])
        a, c = feats[b, lo], feats[b, lo + 1]
        out[b] = a + w[:, None] * (c - a)
        scale[b] = np.maximum(np.abs(a), np.abs(c))
    return out, scale


def needed_bytes(src_times, src_feats, tgt_times) -> int:
    """The bytes no resampler can avoid: every time (source and target) read once, each source row that some
    output mixes with a nonzero weight read once, the output written once. Fewer than Problem.min_bytes (which
    reads every source row) when the targets leave rows unused: sorted random targets at T = S use about 80 % of
    them, which is how a gather can finish sooner than a copy of min_bytes."""
    times, bits, targets = validate(src_times, src_feats, tgt_times)
    B, S, D = bits.shape
    T = targets.shape[1]
    rows = 0
    for b in range(B):
        lo, w = interval(times[b], targets[b])
        used = np.zeros(S, bool)
        used[lo[w < 1.0]] = True                       # the lower row, where it weighs anything
        used[lo[w > 0.0] + 1] = True                   # the upper row, likewise
        rows += int(used.sum())
    return 4 * B * S + 4 * B * T + 2 * D * rows + 2 * B * T * D


def reference(src_times, src_feats, tgt_times):
    """The definition, in float64: out[b, :, d] = np.interp(tgt_times[b], src_times[b], src_feats[b, :, d])."""
    return reference_with_scale(src_times, src_feats, tgt_times)[0]
