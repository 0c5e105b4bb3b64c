"""Is an attention output right? The float64 reference, the tolerance from the arithmetic (see inputs.py), and a
diagnosis that names the usual mistakes.

NaN never passes; an element nobody wrote is NaN (the output is poisoned before every launch). When the output
is wrong, the checker computes, in float64, what each usual mistake would give (a wrong scale, a causal mask off
by one, the accumulator not rescaled when the running max grew, no final division by the row sum, a stale K
tile, the softmax over the wrong axis, K read transposed) and says which one the output matches. Rows that
overflowed because the row max was not subtracted before exp are recognised too.

At the benchmark's size (4 x 16 heads of 4096 x 4096) the float64 reference of every element would take minutes:
there the checker compares a random sample of heads and rows, and checks every element for NaN and for staying
within the range of v (each output is an average of v's rows).
"""
from __future__ import annotations

import math

import numpy as np

from .. import SIMULATOR
from ..refmemo import References
from ..verdict import Verdict, all_nan_hint, bf16_half_ulp, outside, small_errors_everywhere, tolerance
from .inputs import BF16, POISON, attention, float64, random_problem

# The grader's and the tests' cases: (name, random_problem's keyword arguments). Sizes are ragged (not multiples
# of 16, 32 or 64), d is 64 and 128, causal and not, Nq != Nk, a single key, and one case with scores so large
# that exp overflows float32 unless the row max is subtracted. The simulator runs every thread in Python: its
# cases are tiny (and long enough for tiles of 16 and 32 keys to repeat).
_CASES_SIM = [
    ("causal, ragged, d=64", dict(B=1, H=2, Nq=37, Nk=37, d=64, causal=True)),   # H = 2: a query's row in the
    # flattened [B * H * Nq] numbering is not its place in the sequence (a causal mask taken from it fails)
    ("Nq != Nk, d=128", dict(B=1, H=1, Nq=19, Nk=35, d=128)),
    ("one key, d=64", dict(B=2, H=1, Nq=5, Nk=1, d=64)),
    ("large scores (spread 4), causal, d=128", dict(B=1, H=1, Nq=21, Nk=21, d=128, causal=True, spread=4.0)),
    ("more queries than keys, d=64", dict(B=1, H=2, Nq=24, Nk=17, d=64)),
    ("many key tiles, rising scores, d=64", dict(B=1, H=1, Nq=8, Nk=100, d=64, rise=0.5)),   # an unrescaled tile shows
    ("small scores (spread 1/4), ragged, d=64", dict(B=1, H=1, Nq=6, Nk=13, d=64, spread=0.25)),   # see below
]
# Why small scores: with q and k of mean 1 every real score is about sqrt(d), so a zero-filled key past Nk (score
# 0, v 0) that a mask off by one lets in weighs e^-8 of a real one and hides under the tolerance. At spread 1/4
# the scores are about sqrt(d) / 16: the extra key weighs as much as a real one and shrinks every output.
_CASES_GPU = [
    ("causal, ragged, d=128", dict(B=2, H=2, Nq=333, Nk=333, d=128, causal=True)),
    ("Nq != Nk, d=64", dict(B=1, H=3, Nq=517, Nk=300, d=64)),
    ("one key, d=128", dict(B=2, H=2, Nq=70, Nk=1, d=128)),
    ("large scores (spread 4), d=64", dict(B=1, H=2, Nq=300, Nk=451, d=64, spread=4.0)),
    ("causal, d=64", dict(B=1, H=4, Nq=700, Nk=700, d=64, causal=True)),
    ("more keys than queries, d=128", dict(B=3, H=1, Nq=129, Nk=650, d=128)),
    ("small scores (spread 1/4), ragged, d=128", dict(B=2, H=2, Nq=50, Nk=21, d=128, spread=0.25)),
]


# Rungs 01 and 02 take the keys one at a time (02 with five warp shuffles a key, each a rendezvous of 32 Python
# threads in the simulator, about 3 ms): in the simulator they get the same cases with at most 8 queries and 40
# keys (the sizes above are there for 03's tiles of 32 keys: ragged at 37, four tiles at 100). A third of the
# query-key pairs, so that grading 02 in the simulator stays short.
def _key_by_key(kw):
    Nq, Nk = min(kw["Nq"], 8), min(kw["Nk"], 40)
    if kw.get("causal"):
        Nk = Nq
    elif kw["Nq"] > kw["Nk"]:          # more queries than keys stays so
        Nk = min(Nk, Nq - 1)
    return {**kw, "Nq": Nq, "Nk": Nk}


_CASES_SIM_KEY_BY_KEY = [(name, _key_by_key(kw)) for name, kw in _CASES_SIM]
# The C++ rungs (the CPU emulator) also get a causal case of several query blocks and key tiles: in the cases
# above every causal problem has fewer than 64 keys, one key tile, so a mask that a tile wrongly skips (the
# causal half of the skip test left out, or tested against the wrong row) passes unseen; and at d = 128 every
# case has fewer than 64 keys, so O is never rescaled there (a rescale loop over S's width, not O's, passes).
_CASES_SIM_TILED = _CASES_SIM + [("causal, several query blocks and key tiles, d=64",
                                  dict(B=1, H=1, Nq=150, Nk=150, d=64, causal=True)),
                                 ("several key tiles, rising scores, d=128",
                                  dict(B=1, H=1, Nq=8, Nk=150, d=128, rise=0.5))]
_CASES_SIM_BY_STAGE = {"01_naive": _CASES_SIM_KEY_BY_KEY, "02_online_softmax": _CASES_SIM_KEY_BY_KEY,
                       "04_mma_cp_async": _CASES_SIM_TILED, "05_wgmma_tma": _CASES_SIM_TILED,
                       "06_warp_specialized": _CASES_SIM_TILED}


def cases(simulator=None, stage_name=None):
    """[(name, random_problem's keyword arguments)]: small in the simulator (smaller for the rungs that take one
    key at a time), larger on a GPU."""
    if not (SIMULATOR if simulator is None else simulator):
        return list(_CASES_GPU)
    return list(_CASES_SIM_BY_STAGE.get(stage_name, _CASES_SIM))


def label(B, H, Nq, Nk, d, causal=False, spread=1.0, rise=0.0, **_):
    return (f"B={B}, H={H}, Nq={Nq}, Nk={Nk}, d={d}{', causal' if causal else ''}"
            f"{f', spread={spread:g}' if spread != 1.0 else ''}{f', rise={rise:g}' if rise else ''}")


def grading_cases(stage_name=None):
    """[(name, (q, k, v, causal), label)] on fresh random data: the grader's and the checker's cases."""
    return [(name, random_problem(**kw), label(**kw)) for name, kw in cases(stage_name=stage_name)]


# ----------------------------------------------------------------------------------------------------------
# Comparing
# ----------------------------------------------------------------------------------------------------------
def _as_float(got):
    got = np.asarray(got)
    if got.dtype == np.uint16:
        got = got.view(BF16)                         # bf16 bits
    return got.astype(np.float64)


def _bits(got):
    """The bf16 bit patterns of `got`, or None when it is not bf16 (a float array a test built)."""
    got = np.asarray(got)
    if got.dtype == np.uint16 or (BF16 is not None and got.dtype == BF16):
        return got.view(np.uint16)
    return None


def compare(got, ref, bound, *, show=5, inputs=None) -> Verdict:
    """Compare the output `got` (bf16 [B, H, Nq, d]) with the float64 reference and its arithmetic bound."""
    got = np.asarray(got)
    if got.shape != ref.shape:
        return Verdict(False, ref.size, ref.size, 0, ref.shape,
                       f"FAIL: the output has shape {got.shape}, expected [B, H, Nq, d] = {ref.shape}")
    g = _as_float(got)
    nan = np.isnan(g)
    bad = outside(g, ref, bound)
    bits = _bits(got)
    unwritten = nan if bits is None else bits == POISON
    n_bad, n_nan = int(bad.sum()), int(nan.sum())
    B, H, Nq, d = ref.shape
    sizes = f"B={B}, H={H}, Nq={Nq}, d={d}"
    if n_bad == 0:
        return Verdict(True, 0, ref.size, 0, ref.shape, f"PASS: all {ref.size:,} outputs match ({sizes})")
    where = np.argwhere(bad)
    first = [(*(int(x) for x in w), float(ref[tuple(w)]), float(g[tuple(w)])) for w in where[:show]]
    lines = [f"FAIL: {n_bad:,} of {ref.size:,} outputs are wrong ({sizes})"
             + (f"; {n_nan:,} are NaN ({_nan_kinds(nan, unwritten, bits is not None)})" if n_nan else "")]
    for b, h, i, c, e, x in first:
        tol = float(tolerance(ref[b, h, i, c], bound[b, h, i, c], x))
        lines.append(f"  out[{b}, {h}, {i}, {c}]: expected {e:.6g} (tolerance {tol:.2g}), "
                     f"got {x:.6g}")
    hint = diagnose(g, ref, bad, nan, inputs, unwritten=unwritten)
    if hint:
        lines.append("Hint: " + hint)
    return Verdict(False, n_bad, ref.size, n_nan, ref.shape, "\n".join(lines), first)


def _nan_kinds(nan, unwritten, known) -> str:
    if not known:
        return "never written, or computed as NaN"
    n_unwritten, n_computed = int((nan & unwritten).sum()), int((nan & ~unwritten).sum())
    parts = ([f"{n_unwritten:,} never written (still the poison 0x{int(POISON):04X})"] if n_unwritten else []) + \
            ([f"{n_computed:,} computed as NaN by the kernel"] if n_computed else [])
    return ", ".join(parts)


def diagnose(got, ref, bad, nan, inputs=None, unwritten=None) -> str | None:
    """A guess at the kind of bug: from the mistakes that would explain the output (with the inputs), and from
    where the wrong outputs are and what they hold. got, ref float64 [B, H, Nq, d]. unwritten: the outputs that
    still hold the poison (None: any NaN may be either)."""
    B, H, Nq, d = ref.shape
    known = unwritten is not None
    computed = nan & ~unwritten if known else np.zeros_like(nan)
    nan = unwritten if known else nan                  # below, `nan` means: possibly never written
    searchable = inputs is not None and got.size * np.shape(inputs[1])[2] <= _EXPLAIN_LIMIT
    hint = overflowed(got, bad, inputs) if searchable else None       # NaN everywhere can be overflow too
    if hint:
        return hint
    if nan.all():
        return all_nan_hint(True if known else None)
    if not nan.any() and not got.any() and ref.any():
        return "every output is zero: nothing was accumulated (is the loop over the keys still the TODO?)"
    hint = explain(got, bad, inputs) if searchable else None
    if hint:
        return hint
    if computed.any():
        return (f"{int(computed.sum()):,} outputs were computed as NaN (the kernel wrote them; they are not the "
                f"poison): 0 / 0 when a row's sum l stays 0, or exp(-inf - (-inf)) when the running max is still "
                f"-inf (a tile with every key masked before any key was seen), an inf from exp of an unscaled "
                f"score (is the max subtracted before exp?), or a read of shared memory that nothing was copied "
                f"into (in the emulator it starts as NaN): a barrier missing after the tile loads, a wait too "
                f"shallow, or a slot index that is not the one the tile was loaded into (a slot computed as "
                f"(t - 1) % STAGES is -1 at t = 0 in C++)")
    if nan.any():
        rows = nan.any(axis=(0, 1, 3))
        chans = nan.any(axis=(0, 1, 2))
        heads = nan.any(axis=(2, 3)).reshape(-1)
        if 0 < chans.sum() < d and chans[-1]:
            c0 = int(np.argmax(chans))
            return (f"channels {c0} .. {d - 1} of some rows were never written (NaN): the loop over the head "
                    f"dimension stops short")
        if 0 < rows.sum() < Nq and rows[-1] and rows[int(np.argmax(rows)):].all():
            i0 = int(np.argmax(rows))
            return (f"the last queries (rows {i0} .. {Nq - 1}) were never written (NaN): the grid stops early "
                    f"(round the number of blocks up, and guard the end instead)")
        if 0 < heads.sum() < B * H and nan.reshape(B * H, -1)[heads].all():
            which = ", ".join(f"({b}, {h})" for b, h in np.argwhere(nan.all(axis=(2, 3)))[:6])
            return (f"whole heads (b, h) = {which} were never written (NaN): the grid does not cover every batch "
                    f"and head, or the head's offset into q, k, v and out is wrong")
        if known:
            return ("some outputs were never written (they still hold the poison): a guard too strict, or a store "
                    "that skips part of a row")
        return ("some outputs are NaN: never written (a guard too strict), or computed as NaN (0 / 0 when a row "
                "sees no key, exp(-inf - (-inf)) when the running max starts at -inf and is never raised)")
    if small_errors_everywhere(got, ref, bad):
        return ("small errors on many outputs: rounding inside the loop? Keep m, l and the accumulator in "
                "float32 and round the output to bf16 (nearest even) once, at the end")
    return None


# ----------------------------------------------------------------------------------------------------------
# The usual mistakes, computed in float64
# ----------------------------------------------------------------------------------------------------------
_EXPLAIN_LIMIT = 4e8          # outputs x keys: larger problems get no mistake search (a grader's are far smaller)
LOG2E = 1.0 / math.log(2.0)
_TILES = (1, 16, 32, 64, 128)


def _heads(inputs):
    q, k, v, causal = inputs
    qf, kf, vf = (float64(x) for x in (q, k, v))
    B, H, Nq, d = qf.shape
    Nk = kf.shape[2]
    return qf.reshape(B * H, Nq, d), kf.reshape(B * H, Nk, d), vf.reshape(B * H, Nk, d), bool(causal)


def _keys_seen(Nq, Nk, causal, shift=0):
    i, j = np.arange(Nq)[:, None], np.arange(Nk)[None, :]
    return j <= i + shift if causal else np.ones((Nq, Nk), bool)


def _weights(s, seen, axis=-1):
    """Softmax weights of scores s [G, Nq, Nk] over `axis` among the keys seen (NaN where none is seen)."""
    s = np.where(seen, s, -np.inf)
    with np.errstate(invalid="ignore"):
        e = np.exp(s - s.max(axis=axis, keepdims=True))
        return e / e.sum(axis=axis, keepdims=True)


def mistake(inputs, kind, arg=None, *, v=None):
    """What the mistake `kind` gives, in float64 [B, H, Nq, d] (v replaced by `v` when given, float64
    [B * H, Nk, d]): every mistake weighs v's rows with weights >= 0, so passing |v| gives sum_j weight |v_j|.

        scale     s = arg * q . k (arg: 1 / d, 1, log2(e) / sqrt(d), ln(2) / sqrt(d))
        mask      causal mask shifted: key j seen when j <= i + arg (arg -1 or 1); arg None: no mask at all;
                  arg 0 on a problem that is not causal: a causal mask where none belongs
        nodiv     no final division by the row sum
        norescale online softmax over key tiles of arg[0] keys whose accumulator is not rescaled when the max
                  grows (arg[1] == "both": nor is the row sum l; "l": the row sum only, the accumulator is)
        stale     key tile t (tiles of arg[0]) scores K's rows of tile t - 1 (arg[1] == "previous") or of
                  tile 0 ("first")
        axis      the softmax over the queries (each column of S) instead of the keys
        kt        K's memory read as [d, Nk] (K transposed)
        ragged    arg more keys past Nk let in, as a kernel that loads zero-filled tiles sees them: k = 0 (score 0)
                  and v = 0
    """
    q, k, vv, causal = _heads(inputs)
    v = vv if v is None else v
    if kind == "ragged":
        pad = np.zeros((k.shape[0], arg, k.shape[2]))
        k, v = np.concatenate([k, pad], axis=1), np.concatenate([v, pad], axis=1)
    G, Nq, d = q.shape
    Nk = k.shape[1]
    scale = 1.0 / math.sqrt(d)
    seen = _keys_seen(Nq, Nk, causal)
    if kind == "kt":
        s = scale * q @ k.reshape(G, d, Nk)
    elif kind == "stale":
        tile, which = arg
        j = np.arange(Nk)
        src = np.where(j >= tile, j - tile, j) if which == "previous" else j % tile
        s = scale * q @ k[:, src].transpose(0, 2, 1)
    else:
        s = (arg if kind == "scale" else scale) * q @ k.transpose(0, 2, 1)
    if kind == "mask":
        seen = _keys_seen(Nq, Nk, True, arg) if arg is not None else np.ones((Nq, Nk), bool)
    if kind == "axis":
        w = _weights(s, seen, axis=-2)
    elif kind in ("nodiv", "norescale"):
        s = np.where(seen, s, -np.inf)
        if kind == "nodiv":
            w = np.exp(s - s.max(axis=-1, keepdims=True))
        else:
            tile, which = arg
            best = np.maximum.accumulate(s, axis=-1)             # the running max after each key
            ends = np.minimum((np.arange(Nk) // tile + 1) * tile, Nk) - 1
            with np.errstate(invalid="ignore"):
                stale = np.nan_to_num(np.exp(s - best[..., ends]), nan=0.0)   # each key against its tile's max
                right = np.exp(s - best[..., -1:])                            # against the final max
                if which == "l":                                              # o right, l stale
                    w = right / stale.sum(axis=-1, keepdims=True)
                else:
                    w = stale / (stale if which == "both" else right).sum(axis=-1, keepdims=True)
    else:
        w = _weights(s, seen)
    B, H = np.shape(inputs[0])[:2]
    return (w @ v).reshape(B, H, Nq, d)


def _variants(inputs):
    """[(kind, arg, message)] of the mistakes worth trying on these inputs."""
    q, k, v, causal = inputs
    d, Nq, Nk = np.shape(q)[3], np.shape(q)[2], np.shape(k)[2]
    out = [("scale", 1.0 / d, "the scores were scaled by 1/d; attention scales them by 1/sqrt(d) "
                              "(scale = 1 / math.sqrt(d))"),
           ("scale", 1.0, "the scores were not scaled: multiply q . k by 1/sqrt(d) before the softmax"),
           ("scale", LOG2E / math.sqrt(d),
            "the scores were scaled by log2(e)/sqrt(d) and then went through exp: fold log2(e) into the scale only "
            "when you use exp2 (exp(x) = exp2(x * log2(e)))"),
           ("scale", 1.0 / (LOG2E * math.sqrt(d)),
            "exp2 was applied to scores scaled by 1/sqrt(d) alone: with exp2 the scale must include log2(e) = "
            "1.4427 (exp(x) = exp2(x * log2(e)))")]
    if causal:
        out += [("mask", -1, "the causal mask hides the diagonal too: query i must see keys 0 .. i, itself "
                             "included (mask the keys j > i, not j >= i)"),
                ("mask", 1, "the causal mask lets query i see key i + 1: mask every key j > i"),
                ("mask", None, "the causal mask was not applied: with causal=True query i sees only the keys "
                               "j <= i (give the others a score of -inf)")]
    elif Nq == Nk:
        out.append(("mask", 0, "a causal mask was applied, but this problem is not causal: every query sees "
                               "every key"))
    if not causal:
        for extra in sorted({1} | {-Nk % t for t in _TILES if -Nk % t > 1}):
            out.append(("ragged", extra, "key Nk was let in (keys past Nk arrive as zeros: score 0, v 0): mask every "
                                         "key j >= Nk, not only j > Nk" if extra == 1 else
                        f"the {extra} keys past Nk in the last tile were let in (they arrive as zeros: score 0, "
                        f"v 0): mask every key j >= Nk in the ragged last tile"))
    out.append(("nodiv", None, "the output was not divided by the row sum: out = (sum_j p_j v_j) / l, with "
                               "p_j = exp(s_j - m) and l = sum_j p_j"))
    for which, what in (("acc", "the accumulator was not rescaled"),
                        ("both", "neither the accumulator nor the row sum l was rescaled"),
                        ("l", "the row sum l was not rescaled (the accumulator was)")):
        for tile in _TILES:
            if tile < Nk:
                tiles = "one key at a time" if tile == 1 else f"key tiles of {tile}"
                out.append(("norescale", (tile, which),
                            f"{what} when the running max grew (the output matches {tiles}): when m_new > m_old, "
                            f"multiply o and l by alpha = exp(m_old - m_new) before adding the new keys (and "
                            f"set m to m_new only after alpha: worked out from a max already set to m_new, alpha "
                            f"is always 1)"))
    for which in ("previous", "first"):
        for tile in _TILES[1:]:
            if which == "previous" and tile < Nk:
                both = " (with two tiles, the same as every tile using the first tile's K)" if Nk <= 2 * tile else ""
                out.append(("stale", (tile, which),
                            f"each tile of {tile} keys was scored with the previous tile's K{both}: tile t used K's "
                            f"rows of tile t - 1. Wait until the tile you are about to use has arrived (the copy's "
                            f"wait, or the barrier after it), and read the buffer it went into"))
            elif which == "first" and 2 * tile < Nk:
                out.append(("stale", (tile, which),
                            f"every tile of {tile} keys was scored with the first tile's K: tile t's K rows start "
                            f"at row t * {tile}; load K again for each tile (is the tile's offset into K missing?)"))
    if Nq > 1:
        out.append(("axis", None, "the softmax ran over the queries (down each column of S) instead of over the "
                                  "keys: each query's weights over its keys must sum to 1 (max and sum along a "
                                  "row of S)"))
    if d > 1 and Nk > 1:
        out.append(("kt", None, "the scores read K as if it were stored transposed ([d, Nk]): k is [Nk, d], so "
                                "the score of query i and key j is the sum over c of q[i, c] * k[j, c]"))
    return out


def explain(got, bad, inputs) -> str | None:
    """Which usual mistake, if any, explains `got` (float64 [B, H, Nq, d]): the one whose float64 output
    matches at least 99 % of all outputs and 98 % of the wrong ones (its NaNs, rows that see no key, match
    anything), most of the wrong ones with a number."""
    absv = np.abs(_heads(inputs)[2])
    best, best_fit = None, 0.0
    for kind, arg, words in _variants(inputs):
        with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
            alt = mistake(inputs, kind, arg)
            size = mistake(inputs, kind, arg, v=absv)
            tol = bf16_half_ulp(np.maximum(np.abs(np.nan_to_num(alt)), np.abs(np.nan_to_num(got))))
            err = np.abs(got - alt)
            close = err <= tol + 2.0 ** -6 * np.nan_to_num(size) + 1e-30
        wild = np.isnan(alt)
        match = close | wild
        if match.mean() >= 0.99 and match[bad].mean() >= 0.98 and (close & ~wild)[bad].mean() >= 0.5:
            # several may fit when the scores are small (every softmax looks alike): the closest one wins
            fit = 1.0 / (1.0 + float(np.nanmean(np.where(wild, np.nan, err)[bad]) if (~wild & bad).any() else 0.0))
            if fit > best_fit:
                best, best_fit = words, fit
    return best


def overflowed(got, bad, inputs) -> str | None:
    """If exactly the rows whose scores overflow float32's exp (or underflow in every key) went wrong: the row
    max was not subtracted before exp."""
    q, k, v, causal = _heads(inputs)
    G, Nq, d = q.shape
    s = np.where(_keys_seen(Nq, k.shape[1], causal), q @ k.transpose(0, 2, 1) / math.sqrt(d), -np.inf)
    top = s.max(axis=-1)                                                   # [G, Nq]
    with np.errstate(over="ignore"):
        lse = top + np.log(np.exp(s - top[..., None]).sum(axis=-1))
    broken = (lse > 88.0) | (top < -87.0)
    rows = bad.reshape(G, Nq, d).any(axis=-1)
    if not broken.any() or not rows.any():
        return None
    g = got.reshape(G, Nq, d)
    blown = (~np.isfinite(g) | (g == 0))[bad.reshape(G, Nq, d)]          # what overflow gives: inf/inf, x/inf
    if ((rows & ~broken).sum() <= 0.01 * rows.sum() and (rows & broken).sum() >= 0.9 * broken.sum()
            and blown.mean() >= 0.9):
        reach = float(np.abs(top[broken]).max())
        if np.isnan(g).all():
            return (f"every output is NaN. Either nothing was written (does the kernel store to `out`?), or exp "
                    f"overflowed: every row here has scores up to {reach:.0f}, and exp(s) overflows float32 above "
                    f"s = 88.7. Subtract the row's max before exp: p_j = exp(s_j - m) with m = max_j s_j (or the "
                    f"running max)")
        return (f"the rows whose scores reach {reach:.0f} came out wrong: exp(s) overflows float32 above s = 88.7 "
                f"(and is 0 below about -87). Subtract the row's max before exp: p_j = exp(s_j - m) with m = "
                f"max_j s_j (or the running max); the softmax is the same, and no p_j exceeds 1")
    return None


# ----------------------------------------------------------------------------------------------------------
# Judging: every element, or at the benchmark's size a sample of heads and rows
# ----------------------------------------------------------------------------------------------------------
FULL_LIMIT = 2 ** 31           # B H Nq Nk d above this: the reference of a sample of heads and rows only
SAMPLE_HEADS, SAMPLE_ROWS = 8, 192

# Remembered for their inputs (refmemo): the benchmark judges every stage and peer on the same large inputs,
# with the grading cases' small ones in between.
_references = References()     # full references and bounds
_samples = References()        # the sample of heads and rows, its reference and bound


def _full(inputs):
    B, H, Nq, d = np.shape(inputs[0])
    out, err = attention(*inputs, bound=True)
    return out.reshape(B, H, Nq, d), err.reshape(B, H, Nq, d)


def _sample(inputs):
    """(heads [G], rows [G, n], ref [G, n, d], bound [G, n, d], vmax): a fixed random sample of heads and rows
    (the first and last row always among them), and per head the running max of |v| over keys."""
    q, k, v, causal = inputs
    B, H, Nq, d = np.shape(q)
    rng = np.random.default_rng(20261126)
    heads = np.sort(rng.choice(B * H, min(SAMPLE_HEADS, B * H), replace=False))
    if Nq <= SAMPLE_ROWS:
        rows = np.tile(np.arange(Nq), (len(heads), 1))
    else:
        rows = np.array([np.sort(np.concatenate([[0, Nq - 1], 1 + rng.choice(Nq - 2, SAMPLE_ROWS - 2, replace=False)]))
                         for _ in heads])
    ref, bound = attention(q, k, v, causal, bound=True, heads=heads, rows=rows)
    v = np.asarray(v)
    av = np.abs((v.view(BF16) if v.dtype == np.uint16 else v).astype(np.float32))
    vmax = np.maximum.accumulate(av, axis=2) if causal else av.max(axis=2, keepdims=True)
    return heads, rows, ref, bound, vmax


def judge(got, q, k, v, causal=False) -> Verdict:
    """Compare an output with the float64 reference of these inputs (q, k, v as bf16 or their uint16 bits)."""
    inputs = (q, k, v, causal)
    B, H, Nq, d = np.shape(q)
    Nk = np.shape(k)[2]
    if B * H * Nq * Nk * d <= FULL_LIMIT:
        ref, bound = _references.get(inputs, lambda: _full(inputs))
        return compare(got, ref, bound, inputs=inputs)
    return _judge_sample(got, inputs, _samples.get(inputs, lambda: _sample(inputs)))


def _judge_sample(got, inputs, sample) -> Verdict:
    heads, rows, ref, bound, vmax = sample
    B, H, Nq, d = np.shape(inputs[0])
    shape = (B, H, Nq, d)
    got = np.asarray(got)
    if got.shape != shape:
        return Verdict(False, int(np.prod(shape)), int(np.prod(shape)), 0, shape,
                       f"FAIL: the output has shape {got.shape}, expected [B, H, Nq, d] = {shape}")
    bits = np.ascontiguousarray(got).view(np.uint16)
    nan = (bits & 0x7FFF) > 0x7F80
    n_nan = int(nan.sum())
    g32 = bits.view(BF16).astype(np.float32)
    bigger = ~(np.abs(g32) <= vmax * np.float32(1 + 2.0 ** -7))              # an average of v cannot leave v's range
    g = g32.reshape(B * H, Nq, d)[heads[:, None], rows].astype(np.float64)  # [G, n, d]
    bad = outside(g, ref, bound)
    what = (f"B={B}, H={H}, Nq={Nq}, d={d}: {bad.size:,} outputs of {len(heads)} heads x {rows.shape[1]} rows "
            f"compared with float64, all {g32.size:,} checked for NaN and for staying within the range of v")
    n_bad = int(bad.sum())
    n_out = int((bigger & ~nan).sum())
    if n_bad == 0 and n_nan == 0 and n_out == 0:
        return Verdict(True, 0, g32.size, 0, shape, f"PASS ({what})")
    lines = [f"FAIL ({what}): {n_bad:,} of the outputs compared are wrong"
             + (f"; NaN in {n_nan:,} outputs (never written, or computed as NaN)" if n_nan else "")
             + (f"; {n_out:,} outputs outside the range of v (an average of v's rows cannot leave it)"
                if n_out else "")]
    first = []
    for gi, r, c in np.argwhere(bad)[:5]:
        b, h = divmod(int(heads[gi]), H)
        i = int(rows[gi, r])
        first.append((b, h, i, int(c), float(ref[gi, r, c]), float(g[gi, r, c])))
        tol = float(tolerance(ref[gi, r, c], bound[gi, r, c], g[gi, r, c]))
        lines.append(f"  out[{b}, {h}, {i}, {int(c)}]: expected {ref[gi, r, c]:.6g} (tolerance "
                     f"{tol:.2g}), got {g[gi, r, c]:.6g}")
    if not first:
        for w in np.argwhere(nan | bigger)[:5]:
            lines.append(f"  out[{', '.join(str(int(x)) for x in w)}] is {float(g32[tuple(w)]):.6g}")
    return Verdict(False, n_bad + n_nan + n_out, g32.size, n_nan, shape, "\n".join(lines), first)
