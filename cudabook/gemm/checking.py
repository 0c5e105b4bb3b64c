"""Is a matrix product right? The float64 reference, the tolerance from the arithmetic, and a diagnosis.

See inputs.py for the tolerance. NaN never passes; an element nobody wrote is NaN (the output is poisoned).
"""
from __future__ import annotations

import numpy as np

from .. import SIMULATOR
from ..refmemo import References
from ..verdict import Verdict, index_ranges, outside, tolerance
from .inputs import BF16, reference_with_bound

# The grader's and the tests' cases: (name, M, N, K). Ragged on purpose: nothing is a multiple of a tile,
# K is not a multiple of 16 (one tensor-core step) nor of 8 (a 16-byte row), one case has a single column.
_CASES_SIM = [("square, ragged", 17, 33, 20), ("K not a multiple of 8", 9, 16, 13), ("1 x 1 x 1", 1, 1, 1),
              ("one long row", 3, 40, 37)]
_CASES_GPU = [("square, ragged", 333, 517, 200), ("K not a multiple of 8", 130, 250, 77),
              ("1 x 1 x 1", 1, 1, 1), ("tall, K long", 1000, 72, 1000), ("tile multiples", 256, 256, 256)]
# Cases one stage needs on top of those (in the simulator; the GPU's K = 1000 already is long). 04's ring holds
# `stages` slices of BK = 32: with K <= 40 the loop ends before any stage is refilled, so a mistake in the refill
# (the wrong stage, the wrong slice, a wait one group short) has nothing to break. K = 300 is 10 slices: the ring
# of 4 stages turns twice and more, each stage refilled at least twice (and K is not a multiple of 8 either).
# 05's to 07's TMA rings hold `stages` k-tiles of BK = 64: K = 600 is 10 of them, so a ring of 2 to 4 turns.
# Every C++ stage also gets a case past the first tile, last (the grader stops at the first failing case, so a wrong
# kernel rarely pays for it): the other cases stay within one block's first 64 rows, where a learner's wrong offset
# for a block's tile (m0 and n0 swapped), for the second warpgroup (rows 64..127) or for a consumer passes unseen;
# and 06's persistent blocks (the emulated GPU has 2 SMs) get one tile each, so a ring position that restarts at
# each tile, not carried over, passes too. 150 x 300 is two row tiles of 128 and two column tiles of 256 (four
# tiles: two a block), K = 320 five k-tiles of 64, the ring wrapping within each tile and between them. About a
# second each in the emulator. 04's blocks are not persistent and its own case already turns the ring: K = 70
# (three slices of 32) keeps the emulated mma.sync warps' time down (the grader runs its cases at three depths).
_PAST_THE_FIRST_TILE = ("past the first tile: its rows, columns and a second tile a block", 150, 300, 320)
_RING_TURNS = [("K long: the TMA ring turns", 20, 36, 600), _PAST_THE_FIRST_TILE]
_STAGE_CASES_SIM = {
    "04_mma_sync": [("K long: the copy ring turns", 20, 36, 300),
                    ("past the first tile: its rows and columns", 150, 300, 70)],
    "05_wgmma_tma": _RING_TURNS, "06_warp_specialized": _RING_TURNS,
    # 07's one emulated cluster gets two units instead (K = 320: five k-tiles a tile, so the ring turns in each,
    # every stage is refilled at least twice, and the second tile starts at slot 1): the tile loop runs twice,
    # and with the grader's Stream-K variant some clusters hold two pieces. (A slot computed from kt fails here in
    # the eager landing, where the second tile lets fast consumers' extra releases refill a stage under a slow one;
    # the grader reads it from the text first: s07_clusters.LAB_TEXT_MISTAKES.)
    "07_clusters": [("two tiles a cluster: the TMA ring turns", 20, 300, 320), _PAST_THE_FIRST_TILE],
    # 08's k-tiles hold BK = 128 of K: K = 300 is three, the last ragged, so the sums run across k-tiles. (Its
    # tolerance widens with K, s08_fp8.py: at a few hundred a missing k32 step still shows; at 600 it may not.)
    "08_fp8": [("K over three k-tiles", 20, 36, 300), _PAST_THE_FIRST_TILE],
}


def cases(simulator=None, stage_name=None):
    """[(name, M, N, K)]: small in the simulator, larger on a GPU; edge cases in both; with `stage_name`, also
    the cases that stage alone needs."""
    sim = SIMULATOR if simulator is None else simulator
    extra = _STAGE_CASES_SIM.get(stage_name, []) if sim else []
    return list(_CASES_SIM if sim else _CASES_GPU) + list(extra)


def grading_cases(stage_name=None):
    """[(name, (a, b), label)] on fresh random data: the grader's and the checker's cases."""
    from .inputs import random_problem
    return [(name, random_problem(M, N, K), f"M={M}, N={N}, K={K}") for name, M, N, K in cases(stage_name=stage_name)]


def compare(got, ref, bound, *, show=5, a=None, b=None, hint_bound=None, layout=None) -> Verdict:
    """Compare C `got` (bf16 [M, N]) with the float64 reference and the bound on its float32 sums (inputs.py).
    `hint_bound`: a tighter bound that only the hint's reading of the wrong elements' pattern uses (where the
    bound is so wide that a wrong kernel's elements pass or fail by chance, the pattern would change with the
    data); `layout`: how the operands are laid out, for the indexing hint (default: row-major a [M, K], b [K, N])."""
    got = np.asarray(got)
    if got.shape != ref.shape:
        return Verdict(False, ref.size, ref.size, 0, ref.shape, f"FAIL: C has shape {got.shape}, expected {ref.shape}")
    g = got.astype(np.float64)
    nan = np.isnan(g)
    bad = outside(g, ref, bound)
    n_bad, n_nan = int(bad.sum()), int(nan.sum())
    M, N = ref.shape
    if n_bad == 0:
        return Verdict(True, 0, ref.size, 0, ref.shape, f"PASS: all {ref.size:,} elements of C match (M={M}, N={N})")
    where = np.argwhere(bad)
    tol = tolerance(ref, bound, g)                   # whole, for the hints: only when something failed
    first = [(int(i), int(j), float(ref[i, j]), float(g[i, j])) for i, j in where[:show]]
    lines = [f"FAIL: {n_bad:,} of {ref.size:,} elements of C are wrong (M={M}, N={N})"
             + (f"; {n_nan:,} are NaN (never written, or computed as NaN)" if n_nan else "")]
    for i, j, e, x in first:
        lines.append(f"  C[{i}, {j}]: expected {e:.6g} (tolerance {float(tol[i, j]):.2g}), got {x:.6g}")
    seen = bad if hint_bound is None else (bad | outside(g, ref, hint_bound))
    hint = missing_k(g, ref, tol, seen, a, b) or diagnose(seen, nan, ref, g, layout)
    if hint:
        lines.append("Hint: " + hint)
    return Verdict(False, n_bad, ref.size, n_nan, ref.shape, "\n".join(lines), first)


def _edge(bad, axis_len, tile, axis):
    """True when every wrong element sits in the last partial tile along `axis` (rows 0 / columns 1)."""
    if axis_len % tile == 0 or axis_len < tile:
        return False
    start = axis_len - axis_len % tile
    idx = np.nonzero(bad.any(axis=1 - axis))[0]
    return idx.size > 0 and idx.min() >= start


def missing_k(got, ref, tol, bad, a, b) -> str | None:
    """If C is exactly the sum over K with a run of k left out (the first or last t values of k), say which:
    the mistake of a K loop that stops at the last whole tile, or starts one tile late."""
    if a is None or b is None or np.isnan(got).any() or got.size * np.shape(a)[1] > 3e8:
        return None                      # (the benchmark's sizes: too costly to search, and never a lab case)
    fa, fb = (np.asarray(x).view(np.uint16).view(BF16).astype(np.float64) if np.asarray(x).dtype == np.uint16
              else np.asarray(x, np.float64) for x in (a, b))
    K = fa.shape[1]
    for t in range(1, min(K - 1, 64) + 1):
        for ks, where in ((slice(K - t, K), f"the last {t} value(s) of k (k = {K - t} .. {K - 1})"),
                          (slice(0, t), f"the first {t} value(s) of k (k = 0 .. {t - 1})")):
            part = fa[:, ks] @ fb[ks]
            if np.mean(np.abs(got - (ref - part)) <= tol) > 0.99:
                return (f"C is the sum over K without {where}: the loop over K misses them. K = {K} need not be "
                        f"a multiple of the tile: round the number of K tiles up and load zeros past the end")
    return _k_terms(got, ref, tol, fa, fb)


def _k_terms(got, ref, tol, fa, fb) -> str | None:
    """If C is the sum over K with some values of k left out, counted twice, or both (a tile loaded from the
    wrong k, or a stage read while it still holds an older tile), anywhere in K, say which: a least-squares fit
    of C's error to the K terms a[:, k] b[k, :] (a few thousand elements of C suffice). Each k's fitted
    coefficient is 1 - (how many times C counts it)."""
    M, K = fa.shape
    N = fb.shape[1]
    if K < 2 or K > 512 or M * N < 2 * K:
        return None
    pick = np.random.default_rng(12345).permutation(M * N)[:max(8 * K, 2000)]
    i, j = np.divmod(pick, N)
    terms = fa[i, :] * fb[:, j].T                                   # [elements, K]
    coef = np.linalg.lstsq(terms, (ref - got).reshape(-1)[pick], rcond=None)[0]
    whole = np.round(coef)
    if np.abs(coef - whole).max() > 0.2 or not whole.any() or (1 - whole).min() < 0:
        return None
    explained = ref - terms_sum(fa, fb, whole)
    if np.mean(np.abs(got - explained) <= tol) <= 0.99:
        return None
    times = (1 - whole).astype(int)                                  # how many times C counts each k
    missing, extra = np.nonzero(times == 0)[0], np.nonzero(times > 1)[0]
    if missing.size and extra.size:
        return (f"C is a sum over the wrong values of k: k = {index_ranges(missing)} left out, and "
                f"k = {index_ranges(extra)} counted {'twice' if times.max() == 2 else 'twice or more'}. So whole "
                f"K tiles are loaded from the wrong k, or a tile is read from shared memory while it still holds an "
                f"older tile's values: check the k each tile is loaded from (tile t starts at k = t times the "
                f"tile's depth), and that every K tile is loaded before it is used")
    if extra.size:
        return (f"C is the sum over K with the term(s) k = {index_ranges(extra)} counted "
                f"{'twice' if times.max() == 2 else 'twice or more'}: a tile's values used "
                f"again. Check that every K tile is loaded in full, with zeros past the end of K (an element "
                f"left unwritten keeps the previous tile's value), and that no loop over K visits them twice")
    ks = missing
    hint = f"C is the sum over K without the term(s) k = {index_ranges(ks)}"
    for tile in (8, 16, 32, 64):
        for r, what in ((tile - 1, "last"), (0, "first")):
            cls = np.arange(r, K, tile)
            if cls.size and np.array_equal(ks, cls) and tile < K:
                return (hint + f": the {what} k of every {tile}-wide tile of K. Does the loop over a tile's "
                        f"k run over all {tile} of them (range(TILE), not range(TILE - 1) or range(1, TILE))?")
    for tile in (16, 32, 64):
        for h in range(1, tile - 1):
            if K > tile + h and np.array_equal(ks, np.nonzero(np.arange(K) % tile >= h)[0]):
                return (hint + f": k = {h} .. {tile - 1} of every {tile}-wide tile of K, as if the loop over a "
                        f"tile's k stopped at {h}. Does it run over all of them, range(TILE), with the tile's size "
                        f"nowhere written as a number ({h} is right for one tile size only)?")
    return hint + ": check the bounds and the step of the loops over K (the tiles and the k within one)"


def terms_sum(fa, fb, coef):
    """sum over k of coef[k] a[:, k] b[k, :] (the k with coef 0 skipped)."""
    ks = np.nonzero(coef)[0]
    return (fa[:, ks] * coef[ks]) @ fb[ks]


ROW_MAJOR = "a is [M, K], b is [K, N], row-major: a[i, k] is a[i * K + k], b[k, j] is b[k * N + j]"


def diagnose(bad, nan, ref, got, layout=None) -> str | None:
    """A guess at the kind of bug from where the wrong elements are and what they hold."""
    M, N = bad.shape
    if nan.all():
        return ("every element of C is NaN: none was written, or each was computed from NaN. Does the kernel store "
                "to `c`, and is it launched? Shared memory starts as NaN in the emulator and in the simulator (on "
                "a GPU it holds whatever was there): a kernel reads NaN where nothing was stored, a tile's elements "
                "past the edge of a or b left unwritten (write zeros there, in both tiles), a stage nothing was "
                "copied into, or one read before the wait for its copies")
    if not nan.any() and not got.any() and ref.any():
        return "C is all zeros: nothing was added to the sums (is the loop body still the TODO?)"
    if not nan.any() and bad.mean() > 0.3:
        rel = np.median(np.abs(got[bad] - ref[bad]) / np.maximum(np.abs(ref[bad]), 1e-30))
        if rel < 0.05 and np.corrcoef(got[bad], ref[bad])[0, 1] > 0.99:
            return ("small errors on many elements: rounding inside the loop? Sum in float32 and round C to bf16 "
                    "once, at the end")
    if bad.mean() > 0.9 and not nan.any():
        # C short of part of its sum over K: the rest, independent terms, is uncorrelated with what is there, so the
        # energy kept, |got|^2 / |ref|^2, is the squared cosine of got and ref. Terms summed with the wrong k (an
        # indexing mistake) keep the energy (about 1) and lose the cosine: the two then differ, whatever the draw.
        # Those two ratios are estimates: on a few rows or columns (the grader's 3 x 40 case, whose 3 rows of a weigh
        # on every element) they move with the draw by more than the margins below, and the hint would flip between
        # seeds (Bt read 16 rows down per k32 step, 08: kept 0.59 to 0.99 over five seeds). Judged on 8 rows and
        # columns and 256 wrong elements or more.
        g, r = got[bad], ref[bad]
        kept = (g @ g) / max(r @ r, 1e-300)
        cosine = (g @ r) / max(np.sqrt((g @ g) * (r @ r)), 1e-300)
        if (min(M, N) >= 8 and g.size >= 256 and 0.04 < kept < 0.9 and cosine > 0.5
                and kept - cosine ** 2 < 0.1):
            return ("every element is too small in magnitude, as if part of the sum over K were missing: check "
                    "the loop over K, including the last partial tile (K need not be a multiple of the tile)")
        return (f"(nearly) every element is wrong: check the indexing of a and b ({layout or ROW_MAJOR}), and that "
                f"every K tile is loaded before it is used (a tile never loaded leaves an older tile's values in "
                f"shared memory). In a tensor-core lab, where TMA copies the tiles and the wgmmas read them, the "
                f"indexing is in the shared-memory addresses and descriptors your lines hand the wgmmas: each k "
                f"step's offset, the rows of this warpgroup (or consumer), LBO and SBO, and the scale-d flag (0 "
                f"starts the sums afresh, 1 adds to them)")
    rows, cols = np.nonzero(bad.any(axis=1))[0], np.nonzero(bad.any(axis=0))[0]
    if nan.any() and (rows.min() > 0 and rows.min() >= M // 2 or cols.min() > 0 and cols.min() >= N // 2):
        return ("the last rows or columns of C were never written: the grid or the tile loop stops early "
                "(round the number of tiles up, and guard the edges instead)")
    if nan.any():
        return "some elements are NaN: unwritten (a guard too strict, or a tile never stored)"
    if bad.any() and not bad.all():
        return ("some elements are wrong and others right: a race (a tile overwritten before every thread has "
                "used it: a missing barrier?) or an edge case (rows, columns or K past a tile boundary)")
    return None


_references = References()   # the last reference of the benchmark's inputs and of a grading case's (refmemo)


def _reference(a, b):
    """reference_with_bound, remembered: the benchmark judges every stage and peer on the same 8192 x 8192
    inputs, and each float64 product takes seconds."""
    return _references.get((a, b), lambda: reference_with_bound(a, b))


def judge(got, a, b) -> Verdict:
    """Compare C with the float64 reference of a @ b (a, b: bf16 or their uint16 bits)."""
    ref, bound = _reference(a, b)
    return compare(got, ref, bound, a=a, b=b)
