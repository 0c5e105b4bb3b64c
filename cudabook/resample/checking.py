"""The resampling track's checker: fresh random inputs, a poisoned output, a float64 reference, a diagnosis.

Tolerance: one bf16 rounding of the float64 reference (half a bf16 unit in the last place) plus float32
arithmetic slack (8 float32 epsilons of the larger of the two source values mixed). NaN never passes.
"""
from __future__ import annotations

import numpy as np

from ..progress import FIRST_LAUNCH, watched
from ..verdict import Verdict, all_nan_hint, bf16_half_ulp, index_ranges, outside
from . import inputs
from .problem import POISON, upload

EPS32 = float(np.finfo(np.float32).eps)


def compare(got, ref, scale, *, targets=None, times=None, feats=None, show=5) -> Verdict:
    """Compare bf16 output `got` [B, T, D] with the float64 reference `ref` of the same shape (the inputs, where
    given, sharpen the hint)."""
    got = np.asarray(got)
    if got.shape != ref.shape:
        return Verdict(False, ref.size, ref.size, 0, ref.shape,
                       f"FAIL: output shape {got.shape}, expected {ref.shape}")
    g = got.astype(np.float64)
    nan = np.isnan(g)
    bits = got.view(np.uint16) if got.dtype.itemsize == 2 else None      # bf16 (or its uint16 bits)
    bad = outside(g, ref, 8 * EPS32 * scale)
    n_bad, n_nan = int(bad.sum()), int(nan.sum())
    if n_bad == 0:
        return Verdict(True, 0, ref.size, 0, ref.shape, f"PASS: all {ref.size:,} outputs match {_shape(ref)}")
    where = np.argwhere(bad)
    first = [(int(b), int(t), int(d), float(ref[b, t, d]), float(g[b, t, d])) for b, t, d in where[:show]]
    lines = [f"FAIL: {n_bad:,} of {ref.size:,} outputs are wrong {_shape(ref)}"
             + (f"; {_nan_words(n_nan, bits)}" if n_nan else "")]
    for b, t, d, e, x in first:
        rounded = float(inputs.to_bf16(e).astype(np.float64))
        lines.append(f"  out[{b}, {t}, {d}]: expected {e:.6g} (bf16 {rounded:.6g}), got {x:.6g}")
    hint = diagnose(bad, nan, targets, times, unwritten=None if bits is None else bits == POISON, bits=bits,
                    ref=ref, got=g, feats=feats)
    if hint:
        lines.append("Hint: " + hint)
    return Verdict(False, n_bad, ref.size, n_nan, ref.shape, "\n".join(lines), first)


def _nan_words(n_nan, bits):
    """How many NaN outputs, and which of them still hold the poison (never written)."""
    if bits is None:
        return f"{n_nan:,} are NaN (never written, or computed as NaN)"
    unwritten = int((bits == POISON).sum())
    parts = [f"{unwritten:,} were never written (still the poison NaN)"] if unwritten else []
    if n_nan > unwritten:
        parts.append(f"{n_nan - unwritten:,} are NaN values the kernel stored")
    return " and ".join(parts)


def _shape(ref):
    B, T, D = ref.shape
    return f"(B={B}, T={T}, D={D})"


def diagnose(bad, nan, targets=None, times=None, *, unwritten=None, bits=None, ref=None, got=None,
             feats=None) -> str | None:
    """A guess at the kind of bug from where the wrong outputs are (and, given them, from which outputs still
    hold the poison, `unwritten`, and what the stored bits and the reference are). Every hint names a cause the
    data allows: the inputs are validated (source times strictly increase), so none blames the data."""
    B, T, D = bad.shape
    known = unwritten is not None
    if unwritten is None:
        unwritten = nan
    if nan.all():
        return all_nan_hint(None if not known else True if unwritten.all() else False if not unwritten.any()
                            else None)
    if got is not None and ref is not None and not nan.any() and not got.any() and ref.any():
        return ("every output is zero and the reference is not: the kernel stored zeros. Is the value it stores "
                "the interpolation's, and do the rows and weights it reads hold what was loaded (a search over rows "
                "that were never filled finds no interval, or one with no width)?")
    if bits is not None and ref is not None and _stored_as_integers(bits, ref):
        return ("the stored bits are the values converted to integers (1.7 is stored as 1, a bf16 bit pattern "
                "that means 1e-40): a float32 stored straight into the uint16 output. `out` holds bf16 bits: "
                "store f32_to_bf16(value)")
    if got is not None and ref is not None and _truncated(got, ref, bad, nan, targets, times, feats):
        return ("every wrong output is a little smaller in magnitude than the correct one, by less than one bf16 "
                "step: rounded toward zero (the low 16 bits cut off) instead of to nearest even: use f32_to_bf16")
    channels = bad.any(axis=(0, 1))
    first_bad = int(np.argmax(channels)) if channels.any() else D
    # a channel whose source rows all hold one value comes out right whatever the weight: its being right says
    # nothing (S = 2 with both rows equal in channel 0: seed 400029 of lab 06's planted mistakes)
    flat = _flat_channels(feats, D)
    if D > 1 and channels.any() and first_bad > 0 and channels[first_bad:].all() and not flat[:first_bad].all():
        return (f"only the channels from {first_bad} on are wrong: a missing tail? The loop over D (or over a "
                f"row's vectors) must also cover the channels past the first sweep and those left over when D is not "
                f"a multiple of the step or vector width; or the element-to-channel mapping repeats too early")
    for period in (2, 4, 8, 16):
        if D >= 2 * period and channels.any() and not channels.all():
            pattern = channels[: D // period * period].reshape(-1, period)
            wrong = pattern.any(axis=0)                 # the positions in a group with a wrong channel
            # A wrong value can equal the right one by chance (its two source values nearly equal, a small weight):
            # with few wrong targets that leaves holes in the pattern, so given four groups or more, most of the
            # channels at the wrong positions being wrong is enough (one wrong target of 'wide rows': seed
            # 3089427426); the positions never wrong must be right in every group.
            holes_allowed = D // period >= 4
            if wrong.any() and not wrong.all() and (pattern[:, wrong].mean() > 0.5 if holes_allowed
                                                    else pattern[:, wrong].all()):
                which = ", ".join(str(i) for i in np.nonzero(wrong)[0])
                return (f"channels d with d % {period} in {{{which}}} are wrong, all the others right: one "
                        f"word (or lane) of each {period}-channel group is handled differently from the rest")
    rows_t = bad.any(axis=2)
    suffix = all(not r.any() or r[int(np.argmax(r)):].all() for r in rows_t)    # wrong from some t to the end
    if T > 1 and nan[:, -1, :].any() and not bad[:, 0, :].any() and suffix:
        return ("the last targets were never written: check the bound on the target index, and that the grid's "
                "blocks together cover every target (blockIdx.x * blockDim.x + threadIdx.x)")
    rows_b = rows_t.any(axis=1)
    if B > 1 and bad[-1].any() and not bad[0].any() and rows_t[rows_b].mean() > 0.5:   # most of their targets
        return "only later batch rows are wrong: check how the batch index b enters the addresses"
    if targets is not None and times is not None:
        outside = (targets < times[:, :1]) | (targets > times[:, -1:])
        if rows_t.any() and np.all(outside[rows_t]) and _extrapolated(got, bad, targets, times, feats):
            return ("only targets outside the source range are wrong: np.interp holds the end values there "
                    "(clamp the weight to [0, 1]: with the interval index in [0, S-2], an unclamped weight carries the "
                    "end interval's line on past the ends)")
    hint = _where_unwritten(unwritten, bad)
    if hint:
        return hint
    if D > 1 and _row_starts(bad, rows_t):
        return (f"only the first channels of {int(rows_t.sum())} target(s) are wrong, the rest of each of those rows "
                f"right: something wrote over the start of those rows. A store past the end of the elements a thread "
                f"owns (a missing guard on the last, partly filled sweep) lands at the start of a row")
    whole = rows_t.any() and bad[rows_t].mean() > 0.9                 # wrong targets wrong in nearly every channel
    if D > 1 and not nan.any() and (whole or _other_blends(got, rows_t, targets, times, feats)):
        # The count is said the same way whether it is every target or not: a wrong row or weight can give the
        # right value by chance, so whether every target fails changes with the draw (issue 27: one mistake, one
        # hint; "every target is wrong" came and went between seeds for five mistakes of labs 02, 03 and 08).
        # The two readings are said as one: which of them holds changes with the draw too (D = 2: a wrong target
        # right in one of its channels by chance).
        which = f"{int(rows_t.sum())} of the {B * T} targets are wrong"
        how = ("in (nearly) every channel, or else each one as a blend of two neighbouring source rows with one "
               "weight for all its channels, but not the right rows or weight (where that weight is near the right "
               "one, some channels still pass)")
        return (f"{which}, {how}. So what a target shares across its channels is off: the two "
                f"source rows it blends (lo and lo + 1 of its batch row, from the search) or its weight "
                f"(w = (x - t[lo]) / (t[lo + 1] - t[lo]), clamped to [0, 1]; w = 0 gives row lo, w = 1 row lo + 1)")
    if nan.any() and not (nan & ~unwritten).any():
        return (f"{int(unwritten.sum()):,} outputs were never written (they still hold the grader's poison NaN): "
                f"a loop bound or a guard too strict, or a store that went to another element")
    if nan.any():
        return ("some outputs are NaN values the kernel stored: the source times strictly increase (the inputs "
                "are checked), so a NaN comes from reading times or features that are not the target's interval, "
                "or from storing something that is not bf16 bits (store f32_to_bf16(value))")
    return None


def _row_starts(bad, rows_t) -> bool:
    """Are the wrong rows of outputs a minority, each wrong only in a leading stretch: no more than three quarters
    of the row (a stray store covers part of a sweep; a row wrong up to a late channel is wrong as a whole, in its
    first channel chunk), and most of the channels up to its last wrong one wrong (a value stored over the right
    one may match it by chance, so holes are allowed)?"""
    if not rows_t.any() or rows_t.mean() > 0.5:
        return False
    wrong = bad[rows_t]                                            # [rows, D]
    D = wrong.shape[1]
    last = D - 1 - np.argmax(wrong[:, ::-1], axis=1)              # the last wrong channel of each row
    return bool(all(k + 1 <= 0.75 * D and r[:k + 1].mean() >= 0.5 for r, k in zip(wrong, last)))


def _flat_channels(feats, D):
    """[D] bool: the channels whose source rows hold one value in every row of every batch row (none without
    the inputs)."""
    if feats is None:
        return np.zeros(D, bool)
    f = _float64(feats)
    if f.ndim != 3 or f.shape[2] != D:
        return np.zeros(D, bool)
    return (f.max(axis=1) == f.min(axis=1)).all(axis=0)


def _float64(feats):
    """The source features as float64 (given as bf16 values or their uint16 bits)."""
    f = np.asarray(feats)
    return (f.view(inputs.BF16) if f.dtype == np.uint16 else f).astype(np.float64)


def _extrapolated(got, bad, targets, times, feats) -> bool:
    """Do the wrong outputs (all at targets outside the source range) hold the line through the end interval,
    extended past the end (an unclamped weight)? True when that cannot be told (no inputs given)."""
    if got is None or feats is None:
        return True
    f = _float64(feats)
    t = np.asarray(times, np.float64)
    S = t.shape[1]
    b, i, d = np.nonzero(bad)
    x = np.asarray(targets, np.float64)[b, i]
    lo = np.where(x < t[b, 0], 0, S - 2)
    w = (x - t[b, lo]) / (t[b, lo + 1] - t[b, lo])
    line = f[b, lo, d] + w * (f[b, lo + 1, d] - f[b, lo, d])
    g = got[b, i, d]
    return bool(np.mean(np.abs(g - line) <= 0.02 * np.maximum(np.abs(line), 1e-3)) > 0.9)


def _other_blends(got, rows_t, targets, times, feats, most=64) -> bool:
    """Is each wrong target (the first `most` of them) all of a piece, its channels a blend a + w (c - a) of two
    neighbouring source rows a, c with one weight w, but not its right rows and weight? What that points at is
    the search or the weight: a target's channels share both. False when that cannot be told."""
    if got is None or feats is None or targets is None or times is None or not rows_t.any():
        return False
    f = _float64(feats)
    if f.shape[1] < 2:
        return False
    told = 0                                  # wrong targets that tell: not within a rounding of the right blend
    for b, i in list(zip(*np.nonzero(rows_t)))[:most]:
        y = np.asarray(got[b, i], np.float64)
        a, c = f[b, :-1], f[b, 1:]                                   # [S - 1, D]: every neighbouring pair
        dc = c - a
        norm = np.maximum((dc * dc).sum(axis=1), 1e-300)
        w = np.clip(((y - a) * dc).sum(axis=1) / norm, 0.0, 1.0)
        fit = a + w[:, None] * dc
        # the fitted weight is off by as much as the output's bf16 rounding moves it (a least-squares weight: its
        # largest channels' rounding moves a small channel's fit by more than that channel's own rounding)
        slack = 2 * np.abs(dc) * ((np.abs(dc) * bf16_half_ulp(y)).sum(axis=1) / norm)[:, None]
        ok = (np.abs(fit - y) <= 2 ** -7 * np.abs(fit) + slack + 1e-6).mean(axis=1) >= 0.95
        lo, right = inputs.interval(times[b], targets[b, i])
        if ok[lo] and abs(w[lo] - right) <= 1e-3:
            # the right rows with (nearly) the right weight: wrong only where a bf16 rounding flips (a weight
            # within 1e-3 of the right one, as a neighbouring target's can be), so this target tells nothing
            continue
        if not ok.any():                    # (the right rows, where they fit from here on, with another weight)
            return False
        told += 1
    return told > 0


def _truncated(got, ref, bad, nan, targets=None, times=None, feats=None) -> bool:
    """True when every wrong output lies within one bf16 step of the reference, toward zero. Given the inputs,
    only outputs whose two source values are more than a step apart count (and there must be some): where they
    are closer, any weight, right or wrong, gives a value within a step of the reference, so such an output
    cannot tell a rounding mistake from a wrong weight."""
    if nan.any():
        return False
    g, r = got[bad], ref[bad]
    if targets is not None and times is not None and feats is not None:
        f = _float64(feats)
        b, i, d = np.nonzero(bad)
        x = np.asarray(targets)[b, i]
        lo = np.empty(len(x), np.int64)
        for row in np.unique(b):                           # the interval of each wrong output's target
            at = b == row
            lo[at] = inputs.interval(np.asarray(times)[row], x[at])[0]
        telling = np.abs(f[b, lo + 1, d] - f[b, lo, d]) > 2 * bf16_half_ulp(r)
        if not telling.any():
            return False
        g, r = g[telling], r[telling]
    return bool(np.all((np.abs(g) <= np.abs(r)) & (np.abs(r - g) <= 2 * bf16_half_ulp(r)) & (g * r >= 0)))


def _stored_as_integers(bits, ref) -> bool:
    """True when (nearly) every stored uint16 is int(reference), wrapped (the simulator) or saturated (a GPU). An
    output of zeros where (nearly) every reference is a whole number or more is not that, though saturation sends
    every negative reference to 0 (a review's wrong kernel stored zeros where the references were all negative,
    and was told it stored integers)."""
    if ref.size == 0 or not np.isfinite(ref).all():
        return False
    big = np.abs(ref) >= 1
    if big.any() and np.mean(bits[big] == 0) > 0.9:
        return False
    whole = np.trunc(ref)
    wrapped = whole.astype(np.int64) & 0xFFFF
    saturated = np.clip(whole, 0, 0xFFFF).astype(np.int64)
    b = bits.astype(np.int64)
    return bool(np.mean((b == wrapped) | (b == saturated)) > 0.9 and np.mean(np.abs(ref) >= 1) > 0.2)


def _where_unwritten(unwritten, bad) -> str | None:
    """Say which outputs still hold the poison when they form whole targets or whole channels."""
    if not unwritten.any():
        return None
    B, T, D = unwritten.shape
    targets = unwritten.any(axis=2)
    if (unwritten.all(axis=2) == targets).all():
        flat = np.nonzero(targets.reshape(-1))[0]
        first = ", ".join(f"({i // T}, {i % T})" for i in flat[:6]) + (", ..." if flat.size > 6 else "")
        return (f"{flat.size} targets (b, t) = {first} were never written in any channel (they still hold the "
                f"grader's poison NaN), while the others were: check which output row each store goes to and "
                f"the guard on the target index")
    channels = unwritten.any(axis=(0, 1))
    if B * T > 1 and (unwritten.all(axis=(0, 1)) == channels).all():
        also = bad.any(axis=(0, 1)) & ~channels
        return (f"channels {index_ranges(np.nonzero(channels)[0])} were never written for any target (they still hold "
                f"the grader's poison NaN)" + (f", and channels {index_ranges(np.nonzero(also)[0])} hold wrong values"
                                                if also.any() else "")
                + ": check the loop over the channels (its bound and step) and the column each store goes to")
    return None


def past_the_end(problem, rng=None, count=2):
    """The problem (src_times, src_feats, tgt_times) with at least `count` targets of every batch row past its last
    source time: where a row has fewer, its largest targets inside the range move past the end (by up to 5 % of
    the range; sorted rows stay sorted). The grader's cases take it: a search or a gather that overshoots the last
    interval (a popcount off by one, elements taken a whole row wide) then reads past the end of the row on every
    draw, not on some, so one mistake gets one message whatever the data. Two, because stage 08's last warp of a
    row at the simulator's 'wide rows' (T = 17, three targets a warp) holds the last two targets, and such a
    gather reads past the first of them."""
    src_times, src_feats, tgt = problem
    times = np.asarray(src_times)
    tgt = np.array(tgt, copy=True)
    B, T = tgt.shape
    count = min(count, T)
    rng = rng if rng is not None else np.random.default_rng()
    was_sorted = bool(np.all(np.diff(tgt, axis=1) >= 0))
    for b in range(B):
        end, span = times[b, -1], times[b, -1] - times[b, 0]
        need = count - int(np.sum(tgt[b] > end))
        if need > 0:
            inside = [i for i in np.argsort(tgt[b], kind="stable")[::-1] if tgt[b, i] <= end][:need]
            tgt[b, inside] = (end + rng.uniform(0.001, 0.05, size=len(inside)) * span).astype(tgt.dtype)
    if was_sorted:
        tgt = np.sort(tgt, axis=1)
    return src_times, src_feats, tgt


def check_launch(launch, B, S, T, D, *, sorted_targets=True, rng=None, **params) -> Verdict:
    """Run `launch(problem, **params)` on fresh random inputs of this size and judge the output."""
    src_times, src_feats, tgt_times = inputs.random_problem(B, S, T, D, sorted_targets=sorted_targets, rng=rng)
    return check_on(launch, src_times, src_feats, tgt_times, **params)


def check_on(launch, src_times, src_feats, tgt_times, **params) -> Verdict:
    """Run `launch` on these inputs (output poisoned first) and judge the result."""
    with watched(FIRST_LAUNCH):
        ref, scale = inputs.reference_with_scale(src_times, src_feats, tgt_times)
        problem = upload(src_times, src_feats, tgt_times)
        problem.poison()
        launch(problem, **params)
    return compare(problem.result(), ref, scale, targets=np.asarray(tgt_times), times=np.asarray(src_times),
                   feats=src_feats)
