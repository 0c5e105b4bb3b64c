"""Is a deformable attention output right? The float64 reference, the tolerance from the arithmetic (see
inputs.py), and a diagnosis that names the usual mistakes.

NaN never passes; an element nobody wrote is NaN (the output is poisoned before every launch). When the output
is wrong, the checker also tries the mistakes people make with grid_sample's conventions (align_corners=True
arithmetic, clamping at the borders instead of reading zero, x and y swapped, the attention weights left out,
every level read from the start of value) and says so when one of them explains the output.
"""
from __future__ import annotations

import numpy as np

from .. import SIMULATOR
from ..refmemo import References
from ..verdict import Verdict, outside, small_errors_everywhere, tolerance
from .inputs import BF16, random_problem, reference_with_bound, sample

# The grader's and the tests' cases: (name, random_problem's arguments). Every loop runs more than once and
# ends ragged: L >= 2 and P >= 2; L * P above the lanes that share samples in rung 02 (D = 8 -> 1 lane, 24 and
# 32 -> 4, 40 -> 8, 128 -> 16), so its rounds of samples repeat and the last is partial; the threads are not a
# multiple of any block. Up to a quarter of the coordinates sit on edges: exact map edges, pixel centres, one pixel
# off, far outside. One case has L * P = 40 samples an item, more than a warp's 32 lanes: rung 04's producer lanes
# take the samples in rounds of 32, and a kernel without that loop must fail (it would pass every case of 32 or
# fewer).
_CASES_SIM = [
    ("two levels, D=8, edges", dict(N=2, Lq=7, M=2, levels=((4, 5), (2, 3)), P=3, D=8, borders=0.25)),
    ("a 1x1 level, D=24, uniform", dict(N=1, Lq=5, M=3, levels=((3, 4), (2, 2), (1, 1)), P=2, D=24,
                                       locations="uniform", borders=0.25)),
    ("D=40, ten samples", dict(N=1, Lq=3, M=2, levels=((5, 3), (2, 4)), P=5, D=40, borders=0.25)),
    ("forty samples: two rounds of 32", dict(N=1, Lq=3, M=2, levels=((4, 5), (3, 2)), P=20, D=8, borders=0.25)),
]
_CASES_GPU = [
    ("three levels, D=32, edges", dict(N=2, Lq=700, M=8, levels=((20, 24), (10, 12), (5, 6)), P=3, D=32,
                                       borders=0.1)),
    ("a 1x1 level, D=128, uniform", dict(N=1, Lq=300, M=4, levels=((7, 9), (3, 2), (1, 1)), P=7, D=128,
                                         locations="uniform", borders=0.2)),
    ("D=8, many points", dict(N=3, Lq=257, M=3, levels=((16, 11), (8, 6)), P=9, D=8, borders=0.2)),
    ("D=40, odd sizes", dict(N=1, Lq=333, M=5, levels=((13, 17), (7, 9), (4, 5)), P=3, D=40, borders=0.2)),
    ("forty samples: two rounds of 32", dict(N=2, Lq=150, M=4, levels=((12, 10), (6, 5)), P=20, D=128,
                                             borders=0.2)),
]


def cases(simulator=None):
    """[(name, random_problem's keyword arguments)]: small in the simulator, larger on a GPU."""
    return list(_CASES_SIM if (SIMULATOR if simulator is None else simulator) else _CASES_GPU)


def label(N, Lq, M, levels, P, D, **_):
    return f"N={N}, Lq={Lq}, M={M}, levels={'/'.join(f'{h}x{w}' for h, w in levels)}, P={P}, D={D}"


def grading_cases(stage_name=None):
    """[(name, inputs, label)] on fresh random data: the grader's and the checker's cases."""
    return [(name, random_problem(**kw), label(**kw)) for name, kw in cases()]


# ----------------------------------------------------------------------------------------------------------
# Comparing
# ----------------------------------------------------------------------------------------------------------
def compare(got, ref, bound, *, D=None, show=5, inputs=None) -> Verdict:
    """Compare the output `got` (bf16 [N, Lq, M * D]) with the float64 reference and its arithmetic bound."""
    got = np.asarray(got)
    if got.dtype == np.uint16:
        got = got.view(BF16)                         # bf16 bits
    if got.shape != ref.shape:
        return Verdict(False, ref.size, ref.size, 0, ref.shape,
                       f"FAIL: the output has shape {got.shape}, expected [N, Lq, M * D] = {ref.shape}")
    g = got.astype(np.float64)
    bad = outside(g, ref, bound)
    nan = np.isnan(g)
    n_bad, n_nan = int(bad.sum()), int(nan.sum())
    N, Lq, MD = ref.shape
    D = D or MD
    if n_bad == 0:
        return Verdict(True, 0, ref.size, 0, ref.shape,
                       f"PASS: all {ref.size:,} outputs match (N={N}, Lq={Lq}, M*D={MD})")
    where = np.argwhere(bad)
    first = [(int(n), int(q), int(k), float(ref[n, q, k]), float(g[n, q, k])) for n, q, k in where[:show]]
    lines = [f"FAIL: {n_bad:,} of {ref.size:,} outputs are wrong (N={N}, Lq={Lq}, M*D={MD})"
             + (f"; {n_nan:,} are NaN (never written, or computed as NaN)" if n_nan else "")]
    for n, q, k, e, x in first:
        tol = float(tolerance(ref[n, q, k], bound[n, q, k], x))
        lines.append(f"  out[{n}, {q}, {k}] (head {k // D}, channel {k % D}): expected {e:.6g} "
                     f"(tolerance {tol:.2g}), got {x:.6g}")
    hint = diagnose(g, ref, bad, nan, D, inputs, bound)
    if hint:
        lines.append("Hint: " + hint)
    return Verdict(False, n_bad, ref.size, n_nan, ref.shape, "\n".join(lines), first)


def diagnose(got, ref, bad, nan, D, inputs=None, bound=None) -> str | None:
    """A guess at the kind of bug from where the wrong outputs are and what they hold, and from the mistakes
    that would explain them (with the inputs)."""
    N, Lq, MD = ref.shape
    if nan.all():
        return "no output was written at all: does the kernel store to `out`, and is it launched?"
    if not nan.any() and not got.any() and ref.any():
        return ("every output is zero: nothing was added (is the loop body still the TODO, or does every sample "
                "fail the bounds test?)")
    channel = np.arange(MD) % D
    chan_bad = np.zeros(D, bool)
    np.logical_or.at(chan_bad, channel, bad.any(axis=(0, 1)))
    if nan.any():
        chan_nan = np.zeros(D, bool)
        np.logical_or.at(chan_nan, channel, nan.any(axis=(0, 1)))
        if 0 < chan_nan.sum() < D:
            first = int(np.argmax(chan_nan))
            which = ", ".join(str(c) for c in np.nonzero(chan_nan)[0][:8]) + (" ..." if chan_nan.sum() > 8 else "")
            return (f"channel{'s' if chan_nan.sum() > 1 else ''} {which} of some heads never written (NaN): the loop "
                    f"over a head's channels (or the lanes' vectors) stops short, from channel {first} on")
        flat = nan.reshape(-1, MD).any(axis=1)             # per (n, q)
        if flat[-1] and not flat[0]:
            return ("the last queries were never written (NaN): the grid stops early (round the number of blocks "
                    "up, and guard the end instead)")
        return ("some outputs are NaN: never written (a guard too strict, a lane or group that never stores) or "
                "computed from NaN")
    mistake = explain(got, inputs) if inputs is not None else None
    if mistake:
        return mistake
    where = which_part(got, ref, bound, bad, D, inputs)
    if where:
        return where
    if small_errors_everywhere(got, ref, bad):
        return ("small errors on many outputs: rounding inside the loop, or bf16 made by dropping bits? Sum in "
                "float32 and round the output to bf16 (nearest even) once, at the end")
    return None


_EXPLAIN_LIMIT = 4e6          # samples x channels: larger problems get no mistake search (a grader's are small)
MISTAKES = [
    (dict(align_corners=True),
     "the output is what align_corners=True arithmetic gives (pixel position x * (W - 1)). Deformable DETR samples "
     "as grid_sample(align_corners=False): pixel centres sit at (i + 0.5) / W, so the position is x * W - 0.5"),
    (dict(padding="border"),
     "the output is what clamping the corners onto the map gives (padding_mode='border'). A corner pixel off the map "
     "must read as zero (padding_mode='zeros'): test each corner and leave it out when it is off the map"),
    (dict(swap_xy=True),
     "the output is what x and y swapped gives: sampling_locations[..., 0] is x, along W (the column), and "
     "[..., 1] is y, along H (the row); the pixel (x, y) is row y * W + x of the level"),
    (dict(weighted=False),
     "the output is the samples summed without their attention weights: multiply each sample by "
     "attention_weights[n, q, m, l, p]"),
    (dict(truncate=True),
     "the output is what (int)x gives where floorf(x) belongs: (int) rounds toward zero, so a position in (-1, 0), "
     "half a pixel or less off the map's left or top edge, lands on pixel 0 instead of -1 (and its fraction comes "
     "out negative). Take x0 = (int)floorf(x), y0 = (int)floorf(y)"),
    (dict(edge_le="x"),
     "the output is what testing the right neighbour with x0 + 1 <= W gives: the corner one past the row's last "
     "pixel is read (the next row's first pixel, as the offset row + 1 lands). The right corner is on the map when "
     "x0 + 1 < W (columns 0 .. W - 1)"),
    (dict(edge_le="y"),
     "the output is what testing the lower neighbour with y0 + 1 <= H gives: a row past the level's last is read "
     "(the next level's first pixels). The lower corners are on the map when y0 + 1 < H (rows 0 .. H - 1)"),
    (dict(edge_le="xy"),
     "the output is what testing the right and lower neighbours with <= gives (x0 + 1 <= W, y0 + 1 <= H): corners "
     "one past the map's last column and row are read. They are on the map when x0 + 1 < W and y0 + 1 < H"),
    (dict(use_starts=False),
     "the output is what reading every level from row 0 of value gives: level l starts at row "
     "level_start_index[l] of value"),
]


def _listed(ks) -> str:
    return ", ".join(str(int(k)) for k in ks)


def which_part(got, ref, bound, bad, D, inputs) -> str | None:
    """Which part of the sampling the wrong outputs point at (no NaN among them), from their pattern: a level, a
    point or a corner of every sample left out or counted twice (a fit of the error to the reference's parts:
    whole multiples that explain 99 % of the outputs), only some heads wrong, or only the items with a sample
    partly off one side of the map."""
    N, Lq, MD = ref.shape
    M = MD // D
    items = bad.reshape(N, Lq, M, D).any(axis=-1)                          # [N, Lq, M]: the wrong items
    usable = (inputs is not None and bound is not None and np.asarray(inputs[3]).size // 2 * D <= _EXPLAIN_LIMIT
              and not np.isnan(got).any())
    if usable:
        from .inputs import CORNERS, SIDES, parts
        families, sides = parts(*inputs)
        tol = tolerance(ref, bound, got)
        swapped = _weights_swapped(got, tol, families.pop("weights"), ~families.pop("knife"))
        if swapped:
            return swapped
        for name, fam in families.items():
            K = fam.shape[0]
            if K < 2:
                continue
            X = fam.reshape(K, -1).T
            coef = np.linalg.lstsq(X, (ref - got).reshape(-1), rcond=None)[0]
            whole = np.round(coef)
            times = 1 - whole                                              # how many times each part is counted
            if np.abs(coef - whole).max() > 0.2 or not whole.any() or times.min() < 0:
                continue
            if np.mean(np.abs(got - (ref - np.tensordot(whole, fam, 1))) <= tol) < 0.99:
                continue
            said = []
            for count, how in ((0, "left out"), (2, "counted twice"), (3, "counted three times or more")):
                ks = np.nonzero(times == count if count < 3 else times >= 3)[0]
                if not ks.size:
                    continue
                if name == "level":
                    said.append(f"the samples of level{'s' if ks.size > 1 else ''} {_listed(ks)} {how}")
                elif name == "point":
                    said.append(f"point{'s' if ks.size > 1 else ''} p = {_listed(ks)} of every level {how}")
                else:
                    said.append(f"the {' and '.join(CORNERS[k] for k in ks)} corner{'s' if ks.size > 1 else ''} "
                                f"of every sample {how}")
            advice = {"level": "check the loop over levels (its bounds, and each level's H, W, start and "
                               "samples)",
                      "point": "check the loop over a level's points: its bounds and step (p < P, every p "
                               "once)",
                      "corner": "check each corner's row (y0 or y0 + 1), column (x0 or x0 + 1) and weight: "
                                "(1 - fy)(1 - fx), (1 - fy) fx, fy (1 - fx), fy fx"}[name]
            return f"the outputs are what {' and '.join(said)} gives: {advice}"
    wrong_heads = np.nonzero(items.any(axis=(0, 1)))[0]
    if M > 1 and 0 < wrong_heads.size < M:
        right = [m for m in range(M) if m not in set(wrong_heads.tolist())]
        return (f"only head{'s' if wrong_heads.size > 1 else ''} {_listed(wrong_heads)} of {M} "
                f"{'are' if wrong_heads.size > 1 else 'is'} wrong (head{'s' if len(right) > 1 else ''} "
                f"{_listed(right)} right): check what depends on the head m: its place in the output row (m * D), "
                f"its column of value (value[n, row, m], D channels), its locations and weights ([n, q, m, ...])")
    if usable and items.any():
        rules = {"left": "x0 = -1: the corner left of the first pixel centre, tested x0 >= 0",
                 "right": "x0 + 1 = W: the corner right of the last column, tested x0 + 1 < W",
                 "top": "y0 = -1: the row above the first, tested y0 >= 0",
                 "bottom": "y0 + 1 = H: the row below the last, tested y0 + 1 < H"}
        telling = lambda flagged: (not (items & ~flagged).any() and (items & flagged).sum() >= 0.5 * flagged.sum()
                                   and flagged.sum() <= 0.7 * items.size)     # (most items flagged: it tells nothing)
        fits = [(int(sides[s].sum()), side) for s, side in enumerate(SIDES) if telling(sides[s])]
        if fits:
            side = min(fits)[1]
            return (f"only the items (n, q, m) with a sample partly off the map's {side} edge are wrong "
                    f"({int(items.sum())} of {items.size} items; {rules[side]}): a corner off the map must add "
                    f"nothing (weight 0, or not loaded), and the test for it must be right")
        partly = sides.any(axis=0)
        if telling(partly):
            return (f"only the items (n, q, m) with a sample partly off the map are wrong ({int(items.sum())} of "
                    f"{items.size} items): the border handling. A corner off the map must add nothing (weight 0, "
                    f"or not loaded): left x0 >= 0, right x0 + 1 < W, top y0 >= 0, bottom y0 + 1 < H")
    return None


def _weights_swapped(got, tol, weighed, known) -> str | None:
    """If the output is every corner blended with some corner's bilinear weight, not always its own (a fit of the
    output to corner c with weight k, c, k in 0..3: whole 0 or 1, one weight a corner), say which corners got
    whose weight: weights listed in the wrong order, fx and fy swapped, a weight copied from another line. Such
    an output jumps where a position crosses a whole pixel, and float32 may land either side: only the `known`
    outputs (their items have no sample there) are fitted and checked, at least a fifth of them and 32."""
    from .inputs import CORNERS
    if known.sum() < max(32, 0.2 * known.size):
        return None
    weighed, got, tol = weighed[:, known], got[known], tol[known]
    X = weighed.reshape(16, -1).T
    coef = np.linalg.lstsq(X, got.reshape(-1), rcond=None)[0]
    whole = np.round(coef)
    if np.abs(coef - whole).max() > 0.2 or set(np.unique(whole)) - {0.0, 1.0}:
        return None
    use = whole.reshape(4, 4)
    if (use.sum(axis=1) != 1).any() or np.array_equal(use, np.eye(4)):
        return None
    if np.mean(np.abs(got - np.tensordot(whole, weighed, 1)) <= tol) < 0.99:
        return None
    formula = ("(1 - fy)(1 - fx)", "(1 - fy) fx", "fy (1 - fx)", "fy fx")
    wrong = [f"the {CORNERS[c]} corner with the weight of the {CORNERS[k].split(' (')[0]} one, {formula[k]}"
             for c in range(4) for k in range(4) if use[c, k] and c != k]
    extra = ""
    if use[1, 2] and use[2, 1]:
        extra = " (fx and fy swapped gives exactly this)"
    return (f"the outputs are what blending {'; '.join(wrong)} gives{extra}. Corner (x0 + i, y0 + j) weighs "
            f"(i ? fx : 1 - fx) times (j ? fy : 1 - fy), times the attention weight")


def explain(got, inputs) -> str | None:
    """Which planted-style mistake, if any, explains `got` (float64 [N, Lq, M * D]): the one whose own sampling
    matches at least 99 % of the outputs within its tolerance (of the outputs it can tell: a mistake that reads
    past the end of value leaves those outputs NaN, unknown; at least a fifth of them, and 16, must be known)."""
    loc = inputs[3]
    if loc.size // 2 * inputs[0].shape[-1] > _EXPLAIN_LIMIT or np.isnan(got).any():
        return None
    for kw, words in MISTAKES:
        alt, bound = sample(*inputs, bound=True, **kw)
        known = ~np.isnan(alt)
        if known.mean() < 0.2 or known.sum() < 16:
            continue
        with np.errstate(invalid="ignore"):
            close = np.abs(got - alt) <= tolerance(alt, bound, got)
        if np.mean(close[known]) >= 0.99:
            return words
    return None


_references = References()   # the last reference of the benchmark's inputs and of a grading case's (refmemo)


def _reference(inputs):
    """reference_with_bound, remembered: the benchmark judges every stage and peer on the same large inputs, and
    the float64 sampling takes minutes there."""
    return _references.get(inputs, lambda: reference_with_bound(*inputs))


def judge(got, value, spatial_shapes, level_start_index, sampling_locations, attention_weights) -> Verdict:
    """Compare an output with the float64 reference of these inputs (value as bf16 or its uint16 bits)."""
    inputs = (value, spatial_shapes, level_start_index, sampling_locations, attention_weights)
    ref, bound = _reference(inputs)
    return compare(got, ref, bound, D=np.shape(value)[-1], inputs=inputs)
