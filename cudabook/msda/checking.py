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
# off, far outside.
_CASES_SIM = [
    ("two levels, D=8, edges", dict(N=2, Lq=7, M=2, levels=((4, 5), (2, 3)), P=3, D=8, borders=0.25)),
    ("a 1x1 level, D=24, uniform", dict(N=1, Lq=5, M=3, levels=((3, 4), (2, 2), (1, 1)), P=2, D=24,
                                       locations="uniform", borders=0.25)),
    ("D=40, ten samples", dict(N=1, Lq=3, M=2, levels=((5, 3), (2, 4)), P=5, D=40, borders=0.25)),
]
_CASES_GPU = [
    ("three levels, D=32, edges", dict(N=2, Lq=700, M=8, levels=((20, 24), (10, 12), (5, 6)), P=3, D=32,
                                       borders=0.1)),
    ("a 1x1 level, D=128, uniform", dict(N=1, Lq=300, M=4, levels=((7, 9), (3, 2), (1, 1)), P=7, D=128,
                                         locations="uniform", borders=0.2)),
    ("D=8, many points", dict(N=3, Lq=257, M=3, levels=((16, 11), (8, 6)), P=9, D=8, borders=0.2)),
    ("D=40, odd sizes", dict(N=1, Lq=333, M=5, levels=((13, 17), (7, 9), (4, 5)), P=3, D=40, borders=0.2)),
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
    hint = diagnose(g, ref, bad, nan, D, inputs)
    if hint:
        lines.append("Hint: " + hint)
    return Verdict(False, n_bad, ref.size, n_nan, ref.shape, "\n".join(lines), first)


def diagnose(got, ref, bad, nan, D, inputs=None) -> str | None:
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
    (dict(use_starts=False),
     "the output is what reading every level from row 0 of value gives: level l starts at row "
     "level_start_index[l] of value"),
]


def explain(got, inputs) -> str | None:
    """Which planted-style mistake, if any, explains `got` (float64 [N, Lq, M * D]): the one whose own sampling
    matches at least 99 % of the outputs within its tolerance."""
    loc = inputs[3]
    if loc.size // 2 * inputs[0].shape[-1] > _EXPLAIN_LIMIT or np.isnan(got).any():
        return None
    for kw, words in MISTAKES:
        alt, bound = sample(*inputs, bound=True, **kw)
        if np.mean(np.abs(got - alt) <= tolerance(alt, bound, got)) >= 0.99:
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
