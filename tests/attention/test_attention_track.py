"""The attention track: bad input is refused naming the argument and the rule; the reference agrees with a plain
softmax formula; the tolerance passes honest float32 arithmetic with bf16 P and nothing else (every usual mistake
is caught, and its hint names it); rung 01 is right in the simulator on the grading cases and bit for bit where
the arithmetic is exact; the benchmark module has the shape cudabook.results expects.
"""
import json
import math

import ml_dtypes
import numpy as np
import pytest

from cudabook import attention, results
from cudabook.attention import benchmark, checking, s01_naive
from cudabook.check import check_case
from ptxchild import PRELUDE, ptx_in_child

BF16 = ml_dtypes.bfloat16
F32 = np.float32


def problem(B=1, H=1, Nq=9, Nk=9, d=64, **kw):
    return attention.random_problem(B, H, Nq, Nk, d, **kw)


def check(stage, inputs_, kernel=None, **params):
    launch = attention.stage(stage).launch
    return check_case("attention", lambda p: launch(p, kernel=kernel, **params), inputs_)


# ------------------------------------------------------------------------------------ the public face
# (the face every track shares: tests/machinery/test_track_contract.py)


def test_run_returns_bf16_of_the_right_shape():
    q, k, v, causal = problem(B=2, H=1, Nq=3, Nk=5, d=64)
    out = attention.run("01_naive", q, k, v)
    assert out.shape == (2, 1, 3, 64) and out.dtype == BF16
    assert attention.judge(out, q, k, v, False).ok


# ------------------------------------------------------------------------------------ bad input

def _bad(edit):
    q, k, v, _ = problem(B=2, H=3, Nq=4, Nk=4, d=8)
    a = dict(q=q, k=k, v=v, causal=False)
    edit(a)
    return a["q"], a["k"], a["v"], a["causal"]


def _put(key, index, x):
    def edit(a):
        a[key] = a[key].copy()
        a[key][index] = x
    return edit


class FakeDeviceArray:
    def copy_to_host(self):
        return None


BAD = [
    ("q a list", lambda a: a.update(q=a["q"].tolist()), TypeError, "q must be a NumPy array of bfloat16, got list"),
    ("k on the device", lambda a: a.update(k=FakeDeviceArray()), TypeError, "k is a device array; pass a NumPy array"),
    ("q float32", lambda a: a.update(q=a["q"].astype(np.float32)), TypeError, "q must be bfloat16, got float32"),
    ("v float16", lambda a: a.update(v=a["v"].astype(np.float16)), TypeError, "v must be bfloat16, got float16"),
    ("k uint16 bits", lambda a: a.update(k=a["k"].view(np.uint16)), TypeError,
     r"k must be bfloat16, got uint16; .*view raw bits with `k.view\(ml_dtypes.bfloat16\)`"),
    ("q 3-D", lambda a: a.update(q=a["q"][0]), ValueError, r"q must be 4-D \[B, H, Nq, d\], got 3-D"),
    ("v 5-D", lambda a: a.update(v=a["v"][None]), ValueError, r"v must be 4-D \[B, H, Nk, d\], got 5-D"),
    ("k and v of different lengths", lambda a: a.update(v=a["v"][:, :, :3]), ValueError,
     r"k and v must have the same shape \[B, H, Nk, d\] .*k \(2, 3, 4, 8\) and v \(2, 3, 3, 8\)"),
    ("B disagrees", lambda a: a.update(k=a["k"][:1], v=a["v"][:1]), ValueError,
     r"q and k disagree on B \(batch, axis 0\): q has 2, k and v have 1"),
    ("H disagrees", lambda a: a.update(q=a["q"][:, :2]), ValueError, r"disagree on H \(heads, axis 1\): q has 2"),
    ("d disagrees", lambda a: a.update(k=a["k"][..., :4], v=a["v"][..., :4]), ValueError,
     r"disagree on d \(head dimension, axis 3\): q has 8, k and v have 4"),
    ("no queries", lambda a: a.update(q=a["q"][:, :, :0]), ValueError, r"Nq \(queries, q's axis 2\) is 0"),
    ("no keys", lambda a: a.update(k=a["k"][:, :, :0], v=a["v"][:, :, :0]), ValueError,
     r"Nk \(keys, k's and v's axis 2\) is 0"),
    ("causal an int", lambda a: a.update(causal=1), TypeError, r"causal must be True or False, got 1 \(int\)"),
    ("causal a string", lambda a: a.update(causal="yes"), TypeError, "causal must be True or False, got 'yes'"),
    ("causal with Nq != Nk", lambda a: a.update(causal=True, q=a["q"][:, :, :3]), ValueError,
     "causal=True needs Nq == Nk .query i sees keys 0 .. i., got Nq = 3 and Nk = 4"),
    ("NaN in q", _put("q", (1, 2, 3, 4), np.nan), ValueError, r"q\[1, 2, 3, 4\] is nan; values must be finite"),
    ("inf in k", _put("k", (0, 1, 0, 7), -np.inf), ValueError, r"k\[0, 1, 0, 7\] is -inf; values must be finite"),
    ("NaN in v", _put("v", (1, 0, 3, 0), np.nan), ValueError, r"v\[1, 0, 3, 0\] is nan"),
]


@pytest.mark.parametrize("what,edit,error,message", BAD, ids=[b[0] for b in BAD])
def test_bad_input_names_the_argument_and_the_rule(what, edit, error, message):
    q, k, v, causal = _bad(edit)
    with pytest.raises(error, match=message):
        attention.validate(q, k, v, causal)
    with pytest.raises(error, match=message):        # run() validates before it launches anything
        attention.run("01_naive", q, k, v, causal=causal)


def test_validate_returns_contiguous_bits():
    q, k, v, _ = problem(B=1, H=2, Nq=3, Nk=4, d=8)
    bq, bk, bv, causal = attention.validate(np.asfortranarray(q), k, v, np.bool_(False))
    assert bq.dtype == bk.dtype == bv.dtype == np.uint16 and bq.flags.c_contiguous and causal is False
    assert np.array_equal(bq.view(BF16), q)


@pytest.mark.parametrize("d", [8, 32, 96, 256])
def test_head_dimensions_other_than_64_and_128_are_refused_by_the_rung(d):
    with pytest.raises(ValueError, match=f"01_naive: d .* must be one of 64, 128, got d = {d}"):
        attention.run("01_naive", *problem(Nq=2, Nk=2, d=d)[:3])


@pytest.mark.parametrize("params,error,rule", [
    (dict(block=64), TypeError, "unknown parameter 'block'"),
    (dict(threads=2048), ValueError, "threads must be an integer in 1..1024"),
    (dict(threads=0), ValueError, "threads must be an integer"),
    (dict(threads=48), ValueError, "and a multiple of 32"),
])
def test_bad_parameters_name_the_rule(params, error, rule):
    with pytest.raises(error, match=rule):
        attention.run("01_naive", *problem(Nq=2, Nk=2)[:3], **params)


# ------------------------------------------------------------------------------------ the reference

def plain_softmax(q, k, v, causal):
    """softmax(q k^T / sqrt(d)) v, written out row by row from the definition."""
    q, k, v = (np.asarray(x, np.float64) for x in (q, k, v))
    B, H, Nq, d = q.shape
    out = np.zeros(q.shape)
    for b, h, i in np.ndindex(B, H, Nq):
        keys = range(i + 1) if causal else range(k.shape[2])
        s = np.array([sum(q[b, h, i, c] * k[b, h, j, c] for c in range(d)) / math.sqrt(d) for j in keys])
        w = np.exp(s - s.max())
        out[b, h, i] = (w / w.sum()) @ v[b, h, :len(w)]
    return out


@pytest.mark.parametrize("kw", [dict(B=2, H=2, Nq=5, Nk=7, d=8), dict(B=1, H=3, Nq=6, Nk=6, d=16, causal=True),
                                dict(B=1, H=1, Nq=4, Nk=1, d=8), dict(B=1, H=1, Nq=5, Nk=5, d=8, spread=4.0)])
def test_reference_agrees_with_a_plain_softmax(kw, rng):
    q, k, v, causal = attention.random_problem(**kw, rng=rng)
    assert np.allclose(attention.reference(q, k, v, causal), plain_softmax(q, k, v, causal), rtol=1e-10, atol=1e-12)


def test_reference_by_hand():
    """Two keys, d = 4: query 0 scores them 0 and 2 (so weights 1 / (1 + e^2) and e^2 / (1 + e^2)); causal,
    query 0 sees key 0 alone."""
    q = np.array([[1, 1, 1, 1], [0, 0, 0, 0]], BF16).reshape(1, 1, 2, 4)
    k = np.array([[0, 0, 0, 0], [1, 1, 1, 1]], BF16).reshape(1, 1, 2, 4)
    v = np.array([[2, 0, 0, 0], [0, 4, 0, 0]], BF16).reshape(1, 1, 2, 4)
    w = np.exp(2) / (1 + np.exp(2))
    ref = attention.reference(q, k, v)[0, 0]
    assert np.allclose(ref[0], [2 * (1 - w), 4 * w, 0, 0]) and np.allclose(ref[1], [1, 2, 0, 0])
    ref = attention.reference(q, k, v, True)[0, 0]
    assert np.allclose(ref[0], [2, 0, 0, 0]) and np.allclose(ref[1], [1, 2, 0, 0])


def test_random_problems(rng):
    q, k, v, causal = attention.random_problem(2, 3, 40, 50, 64, rng=rng)
    assert q.shape == (2, 3, 40, 64) and k.shape == v.shape == (2, 3, 50, 64) and causal is False
    assert q.dtype == k.dtype == v.dtype == BF16
    assert abs(float(q.astype(float).mean()) - 1) < 0.1 and abs(float(v.astype(float).mean())) < 0.1
    with pytest.raises(ValueError, match="causal=True needs Nq == Nk"):
        attention.random_problem(1, 1, 3, 4, 8, causal=True)


@pytest.mark.parametrize("d", [64, 128])
def test_spread_4_overflows_exp_without_the_max(d, rng):
    """spread = 4: float32's exp(s) overflows on the raw scores of nearly every row; spread = 1 stays far from it.
    Not every row: a row's scores centre on spread * sum(q)/sqrt(d), and a query whose channels happen to sum
    far below their mean can keep all its scores below 88.7 (seed 2523226769 drew one at d = 64, its channels
    summing four standard deviations low). It is rare: 1 row of 80,000 at d = 64, none of 80,000 at d = 128, in
    a trial with 30 keys a row. The checker's overflow hint works row by row for that reason."""
    for spread, over in ((1.0, False), (4.0, True)):
        q, k, v, _ = attention.random_problem(1, 2, 30, 30, d, spread=spread, rng=rng)
        s = np.einsum("bhid,bhjd->bhij", q.astype(F32), k.astype(F32)) * F32(1 / math.sqrt(d))
        with np.errstate(over="ignore"):
            l = np.exp(s).sum(axis=-1, dtype=F32)
        if over:
            assert np.isinf(l).mean() >= 0.9, (spread, np.isinf(l).mean())
        else:
            assert np.isfinite(l).all() and s.max() < 40, spread


# ------------------------------------------------------------------------------------ honest and wrong kernels

def bf16(x):
    return np.asarray(x, F32).astype(BF16).astype(F32)


def flash32(q, k, v, causal, *, tile=16, round_p=True, exp2=False, bug=None, arg=None):
    """An online-softmax kernel in float32 NumPy, as the tensor-core rungs compute: scores in float32, the row
    max and sum in float32, P rounded to bf16 before P @ V (round_p), the output rounded to bf16 once. `bug`
    plants one of the usual mistakes (arg: its parameter)."""
    q, k, v = (np.asarray(x).astype(F32) for x in (q, k, v))
    B, H, Nq, d = q.shape
    Nk = k.shape[2]
    scale = F32(1 / math.sqrt(d)) if bug != "scale" else F32(arg)
    log2e = F32(1 / math.log(2))
    if exp2 or bug == "exp2 without log2e":
        scale = scale * (log2e if bug != "exp2 without log2e" else F32(1))
        expf = np.exp2
    else:
        expf = np.exp
    m = np.full((B, H, Nq, 1), -np.inf, F32)
    l = np.zeros((B, H, Nq, 1), F32)
    acc = np.zeros((B, H, Nq, d), F32)
    rows = np.arange(Nq)[:, None]
    for t0 in range(0, Nk, tile):
        keys = np.arange(t0, min(t0 + tile, Nk))
        src = keys - tile if bug == "stale previous" and t0 else keys % tile if bug == "stale first" else keys
        kk = k.reshape(B, H, d, Nk)[..., src].transpose(0, 1, 3, 2) if bug == "kt" else k[:, :, src]
        s = (q @ kk.transpose(0, 1, 3, 2)) * scale
        if causal or bug == "mask":
            shift = arg if bug == "mask" else 0
            s = np.where(keys[None, :] <= rows + shift, s, F32(-np.inf))
        if bug == "no max":
            m_new = np.zeros_like(m)
        else:
            m_new = np.maximum(m, s.max(axis=-1, keepdims=True))
        with np.errstate(invalid="ignore", over="ignore"):
            alpha = expf(m - m_new)
            p = expf(s - m_new)
        alpha = np.where(np.isnan(alpha), F32(0), alpha) if bug != "no max" else F32(1)
        l = (l if bug in ("norescale both", "norescale l") else l * alpha) + p.sum(axis=-1, keepdims=True, dtype=F32)
        pb = bf16(p) if round_p else p
        with np.errstate(invalid="ignore", over="ignore"):
            acc = (acc if bug in ("norescale", "norescale both") else acc * alpha) + pb @ v[:, :, keys]
        m = m_new
    with np.errstate(invalid="ignore", divide="ignore"):
        out = acc if bug == "nodiv" else acc / l
    return out.astype(BF16)


def wrong_axis32(q, k, v, causal):
    q, k, v = (np.asarray(x).astype(F32) for x in (q, k, v))
    s = (q @ k.transpose(0, 1, 3, 2)) * F32(1 / math.sqrt(q.shape[-1]))
    if causal:
        s = np.where(np.tri(s.shape[2], s.shape[3], dtype=bool), s, F32(-np.inf))
    e = np.exp(s - s.max(axis=2, keepdims=True))
    return ((e / e.sum(axis=2, keepdims=True)) @ v).astype(BF16)


HONEST = [dict(tile=16), dict(tile=64), dict(tile=128, exp2=True), dict(tile=1), dict(tile=32, round_p=False)]


@pytest.mark.parametrize("kw", [dict(B=2, H=2, Nq=100, Nk=100, d=64, causal=True),
                                dict(B=1, H=3, Nq=70, Nk=150, d=128),
                                dict(B=1, H=2, Nq=60, Nk=60, d=128, causal=True, spread=4.0),
                                dict(B=2, H=1, Nq=9, Nk=1, d=64)])
def test_every_honest_kernel_passes(kw, rng):
    args = attention.random_problem(**kw, rng=rng)
    ref = attention.reference(*args)
    assert attention.judge(ref.astype(F32).astype(BF16), *args).ok
    for how in HONEST:
        v = attention.judge(flash32(*args, **how), *args)
        assert v.ok, f"{how}: {v}"


def test_the_tolerance_is_the_arithmetic_and_no_more(rng):
    args = attention.random_problem(1, 2, 40, 40, 64, causal=True, rng=rng)
    ref, bound = attention.reference_with_bound(*args)
    absv = np.abs(args[2].astype(np.float64))
    wv = checking.mistake(args, "mask", 0, v=absv.reshape(2, 40, 64))        # sum_j w_ij |v_j| (the causal weights)
    assert np.all(bound >= 2.0 ** -8 * wv) and np.all(bound <= 2.0 ** -7 * wv + 1e-6)   # bf16 P's cost, not more
    good = ref.astype(F32).astype(BF16)
    k = np.unravel_index(np.argmax(np.abs(ref)), ref.shape)
    worse = good.copy()
    worse.view(np.uint16)[k] += 4                                            # four bf16 steps off, at the largest
    v = attention.judge(worse, *args)
    assert not v.ok and v.wrong == 1 and f"out[{k[0]}, {k[1]}, {k[2]}, {k[3]}]" in v.message
    worse[k] = np.nan
    assert attention.judge(worse, *args).nan == 1
    assert "shape" in attention.judge(good[:, :, :-1], *args).message


MISTAKES = [  # (planted bug, its argument, the case, words the hint must contain)
    ("scale", 1 / 64, dict(d=64), "scaled by 1/d"),
    ("scale", 1.0, dict(d=128), "were not scaled"),
    ("scale", 1 / (math.log(2) * math.sqrt(128)), dict(d=128), "fold log2(e) into the scale only when you use exp2"),
    ("exp2 without log2e", None, dict(d=64), "the scale must include log2(e)"),
    ("mask", -1, dict(causal=True), "hides the diagonal"),
    ("mask", 1, dict(causal=True), "lets query i see key i + 1"),
    ("mask", 10 ** 6, dict(causal=True), "the causal mask was not applied"),
    ("mask", 0, dict(causal=False), "this problem is not causal"),
    ("nodiv", None, dict(), "not divided by the row sum"),
    ("norescale", None, dict(tile=16), "the accumulator was not rescaled when the running max grew"),
    ("norescale", None, dict(tile=64, Nk=200, causal=False), "the accumulator was not rescaled"),
    ("norescale", None, dict(tile=1), "(the output matches one key at a time)"),
    ("norescale both", None, dict(tile=32), "neither the accumulator nor the row sum l was rescaled"),
    ("norescale l", None, dict(tile=16), "the row sum l was not rescaled (the accumulator was)"),
    ("stale previous", None, dict(tile=16), "the previous tile's K"),
    ("stale previous", None, dict(tile=64, Nq=150, Nk=150), "each tile of 64 keys was scored with the previous"),
    ("stale first", None, dict(tile=32), "the first tile's K"),
    ("kt", None, dict(), "K as if it were stored transposed"),
]


@pytest.mark.parametrize("bug, arg, case, words", MISTAKES, ids=[f"{m[0]} {m[1]} {m[2]}" for m in MISTAKES])
def test_every_usual_mistake_is_caught_and_named(bug, arg, case, words, rng):
    case = dict(case)
    tile = case.pop("tile", 16)
    kw = dict(B=1, H=2, Nq=100, Nk=100, d=64, causal=True)
    kw.update(case)
    if kw["Nq"] != kw["Nk"]:
        kw["causal"] = False
    args = attention.random_problem(**kw, rng=rng)
    got = flash32(*args, tile=tile, bug=bug, arg=arg)
    v = attention.judge(got, *args)
    assert not v.ok, f"{bug}: the checker let it pass"
    assert words in v.message, f"{bug}: the hint does not name it:\n{v}"


def test_the_softmax_over_the_wrong_axis_is_named(rng):
    args = attention.random_problem(1, 2, 50, 50, 64, causal=True, rng=rng)
    v = attention.judge(wrong_axis32(*args), *args)
    assert not v.ok and "the softmax ran over the queries" in v.message, str(v)


def test_forgetting_the_max_overflows_and_is_named(rng):
    args = attention.random_problem(1, 2, 40, 40, 128, spread=4.0, rng=rng)
    v = attention.judge(flash32(*args, bug="no max"), *args)
    assert not v.ok and "Subtract the row's max before exp" in v.message, str(v)
    ok = attention.random_problem(1, 2, 40, 40, 128, rng=rng)             # at spread 1 the same kernel is right
    assert attention.judge(flash32(*ok, bug="no max"), *ok).ok


def test_the_bad_outputs_of_the_checker_get_their_hints(rng):
    args = attention.random_problem(2, 2, 20, 20, 64, rng=rng)
    good = attention.reference(*args).astype(F32).astype(BF16)
    poison = attention.problem.POISON                      # what the output holds before a launch

    def unwritten(where):
        cut = good.copy()
        cut.view(np.uint16)[where] = poison
        return cut
    assert "the last queries (rows 13 .. 19) were never written" in \
        attention.judge(unwritten(np.s_[:, :, 13:]), *args).message
    assert "channels 48 .. 63 of some rows were never written" in \
        attention.judge(unwritten(np.s_[..., 48:]), *args).message
    assert "whole heads (b, h) = (1, 0) were never written" in attention.judge(unwritten(np.s_[1, 0]), *args).message
    assert "every output is zero" in attention.judge(np.zeros_like(good), *args).message


def test_a_nan_the_kernel_computed_is_told_from_the_poison(rng):
    """The poison (0xFFC1) means nobody wrote the output; any other NaN was computed: 0 / 0, inf - inf."""
    args = attention.random_problem(1, 2, 20, 20, 64, rng=rng)
    good = attention.reference(*args).astype(F32).astype(BF16)
    both = good.copy()
    both.view(np.uint16)[0, 0, :3] = attention.problem.POISON
    both[0, 1, 5:7] = np.nan                               # NumPy's NaN: bits 0x7FC0, as a computed 0 / 0 gives
    v = attention.judge(both, *args)
    assert "320 are NaN (192 never written (still the poison 0xFFC1), 128 computed as NaN by the kernel)" \
        in v.message, v.message
    computed = good.copy()
    computed[0, 1, 5:7] = np.nan
    v = attention.judge(computed, *args)
    assert "128 outputs were computed as NaN (the kernel wrote them; they are not the poison)" in v.message, v.message
    assert "never written" not in v.message, v.message


def test_a_sample_of_heads_and_rows_at_large_sizes(rng, monkeypatch):
    """Above FULL_LIMIT the checker compares a sample of heads and rows with float64, and every element for NaN
    and for staying within v's range."""
    monkeypatch.setattr(checking, "FULL_LIMIT", 1000)
    monkeypatch.setattr(checking, "SAMPLE_HEADS", 2)
    monkeypatch.setattr(checking, "SAMPLE_ROWS", 16)
    args = attention.random_problem(2, 2, 40, 40, 64, causal=True, rng=rng)
    good = attention.reference(*args).astype(F32).astype(BF16)
    v = attention.judge(good, *args)
    assert v.ok and "2 heads x 16 rows compared with float64" in v.message, str(v)
    heads, rows = checking._samples.kept(args)[:2]
    unseen = next((b, h) for b, h in np.ndindex(2, 2) if b * 2 + h not in heads)
    bad = good.copy()
    bad[unseen][5, 7] = np.nan
    v = attention.judge(bad, *args)
    assert not v.ok and "NaN in 1 outputs" in v.message
    bad = good.copy()
    bad[unseen][30, 1] = 100.0                                                # beyond any |v|
    v = attention.judge(bad, *args)
    assert not v.ok and "outside the range of v" in v.message
    bad = good.copy()
    b, h = divmod(int(heads[0]), 2)
    bad[b, h, rows[0, 3], 2] += 1.0
    v = attention.judge(bad, *args)
    assert not v.ok and f"out[{b}, {h}, {rows[0, 3]}, 2]" in v.message


def test_grading_cases_are_fresh_and_cover_the_edges():
    c1, c2 = attention.grading_cases(), attention.grading_cases()
    assert not np.array_equal(c1[0][1][0], c2[0][1][0])                      # fresh inputs each call
    shapes = [(q.shape, k.shape, causal) for _, (q, k, v, causal), _ in c1]
    assert {q[3] for q, _, _ in shapes} == {64, 128}
    assert any(c for _, _, c in shapes) and any(not c for _, _, c in shapes)
    assert any(k[2] == 1 for _, k, _ in shapes) and any(q[2] != k[2] for q, k, _ in shapes)
    assert any(q[2] % 16 and q[2] > 32 for q, _, _ in shapes)                # ragged, more than two tiles of 16
    assert any(np.abs(q.astype(F32)).max() > 8 for _, (q, *_), _ in c1)     # a case that needs the max
    for sim in (True, False):
        for name, kw in checking.cases(sim):
            assert kw["B"] * kw["H"] <= (2 if sim else 6) and (kw["Nq"] * kw["Nk"] <= 40 * 40 or not sim), name
    assert any(kw["Nk"] > 3 * 32 for _, kw in checking.cases(True))        # tiles of 32 keys: more than three


# ------------------------------------------------------------------------------------ rung 01

def test_rung_01_is_right_on_the_grading_cases():
    for name, args, label in attention.grading_cases("01_naive"):
        v = check("01_naive", args)
        assert v.ok, f"{name} ({label}):\n{v}"


def test_rung_01_bit_for_bit_where_the_arithmetic_is_exact():
    """q = 0: every score is 0, the weights 1/Nk (Nk a power of two), v in eighths: the output is v's mean,
    exactly. One key: the output is v's row. Both must come out as the reference rounded to bf16, bit for bit."""
    rng = np.random.default_rng(3)
    for Nq, Nk, d in ((5, 32, 64), (3, 1, 128)):
        q = np.zeros((1, 2, Nq, d), BF16)
        k = attention.to_bf16(rng.standard_normal((1, 2, Nk, d)))
        v = attention.to_bf16(rng.integers(-16, 17, size=(1, 2, Nk, d)) / 8)
        got = attention.run("01_naive", q, k, v).view(np.uint16)
        want = attention.to_bf16(attention.reference(q, k, v)).view(np.uint16)
        assert np.array_equal(got, want), (Nq, Nk, d)


def test_an_output_nobody_writes_fails():
    args = problem(Nq=3, Nk=3)
    v = check_case("attention", lambda p: None, args)
    assert not v.ok and v.nan == v.total and "no output was written" in v.message

    from numba import cuda

    @cuda.jit
    def softmax_does_nothing(s):
        pass
    assert not check("01_naive", args, kernel=softmax_does_nothing).ok


S01_MISTAKES = [  # (edits of rung 01's softmax or scores kernel, the case, words the hint must contain)
    ("attention_softmax", [("math.exp(s[b, h, i, j] - m)", "math.exp(s[b, h, i, j])")], dict(d=128, spread=4.0),
     "Subtract the row's max before exp"),
    ("attention_softmax", [("s[b, h, i, j] = s[b, h, i, j] / l", "s[b, h, i, j] = s[b, h, i, j]")], dict(),
     "not divided by the row sum"),
    ("attention_scores", [("if causal and j > i:", "if causal and j >= i:")], dict(causal=True),
     "hides the diagonal"),
    ("attention_scores", [("s[b, h, i, j] = acc * scale", "s[b, h, i, j] = acc * scale * scale")], dict(),
     "scaled by 1/d"),
]


@pytest.mark.filterwarnings("ignore::RuntimeWarning")    # the planted overflow and 0 / 0 in the simulator
@pytest.mark.parametrize("function, edits, case, words", S01_MISTAKES, ids=[m[3] for m in S01_MISTAKES])
def test_rung_01_mistakes_are_caught_and_named(function, edits, case, words, monkeypatch):
    from corpus.mutate import mutant
    wrong = mutant("cudabook.attention.s01_naive", function, edits)
    kw = dict(B=1, H=1, Nq=12, Nk=12, d=64)
    kw.update(case)
    args = attention.random_problem(**kw)
    if function == "attention_softmax":
        v = check("01_naive", args, kernel=wrong)
    else:
        monkeypatch.setattr(s01_naive, function, wrong)
        v = check("01_naive", args)
    assert not v.ok and words in v.message, str(v)


def test_where_memory_runs_out():
    assert s01_naive.score_bytes(4, 16, 4096, 4096) == 4 * 4 * 16 * 4096 ** 2                  # 4.3 GB
    need = s01_naive.score_bytes(4, 16, 32768, 32768)
    with pytest.raises(MemoryError, match=r"274.9 GB here, and this GPU has 79.0 GB free of 80 GB"):
        s01_naive.require_memory(need, free=79e9, total=80e9)
    s01_naive.require_memory(s01_naive.score_bytes(4, 16, 4096, 4096), free=79e9, total=80e9)


def test_the_scores_buffer_is_kept_between_launches():
    p = attention.upload(*problem(Nq=2, Nk=3))
    s = s01_naive.scores_buffer(p)
    assert s.shape == (1, 1, 2, 3) and s01_naive.scores_buffer(p) is s


def test_the_kernels_compile_for_a_gpu():
    """The simulator runs Python; a GPU needs Numba's compiler to accept the kernels (NVVM, no GPU needed):
    compiled for sm_90, in float32 (no float64) and without local memory."""
    from cudabook import SIMULATOR
    if not SIMULATOR:
        pytest.skip("on a GPU the other tests compile and run the kernels")
    child = PRELUDE + r"""
from cudabook.attention import s01_naive as s
A = lambda t, n: types.Array(t, n, "C")
u16, f32 = types.uint16, types.float32
out = {"scores": cuda.compile_ptx(s.attention_scores.py_func, (A(u16, 4), A(u16, 4), A(f32, 4), types.boolean, f32),
                                  cc=(9, 0))[0],
       "softmax": cuda.compile_ptx(s.attention_softmax.py_func, (A(f32, 4),), cc=(9, 0))[0],
       "pv": cuda.compile_ptx(s.attention_pv.py_func, (A(f32, 4), A(u16, 4), A(u16, 4)), cc=(9, 0))[0]}
print(json.dumps(out))
"""
    ptx = ptx_in_child(child)
    for name, text in ptx.items():
        assert ".f64" not in text and ".local" not in text, name


# ------------------------------------------------------------------------------------ the benchmark

def test_the_bench_module_has_the_shape_results_expects():
    spec = attention.bench
    assert [spec.workload_name(**w) for w in spec.WORKLOADS] == [
        "attention B=4 H=16 N=4096 d=128 causal=False", "attention B=4 H=16 N=4096 d=128 causal=True",
        "attention B=4 H=16 N=4096 d=64 causal=False", "attention B=4 H=16 N=4096 d=64 causal=True"]
    assert spec.PEERS_FIRST                     # (the shape every track's has: tests/machinery/test_track_contract.py)
    args, p = spec.prepare(dict(B=1, H=2, N=5, d=64, causal=True))
    assert p.shape == (1, 2, 5, 5, 64) and p.causal and len(args) == 4 and args[3] is True
    assert p.flops == spec.flops(1, 2, 5, 64, True) == 4 * 2 * 25 * 64 // 2
    assert spec.context(p) == {"flops": p.flops}


def test_metrics_from_a_fake_time():
    spec = attention.bench
    p = attention.Problem(*[None] * 4, dims=(4, 16, 4096, 4096, 128), causal=False)
    assert p.flops == 4 * 4 * 16 * 4096 ** 2 * 128
    ctx = {"flops": p.flops, "sdpa_us": 1100.0}
    m = spec.metrics(p, 2200.0, ctx)
    assert m == {"TFLOPs": round(p.flops / 2200e-6 / 1e12, 2), "pct_of_sdpa": 50.0}
    assert "pct_of_sdpa" not in spec.metrics(p, 2200.0, {"flops": p.flops})
    assert spec.summary({}) == "SDPA not measured"
    assert spec.summary({"sdpa_us": 1100.0, "sdpa_best": "sdpa_flash", "sdpa_TFLOPs": 499.8}) == \
        "SDPA (sdpa_flash) 500 TFLOP/s"
    rows = {"sdpa_flash": {"median_us": 1200.0, "correct": True}, "sdpa_cudnn": {"median_us": 900.0, "correct": False},
            "sdpa_efficient": {"skipped": "not run: RuntimeError: No available kernel"}}
    assert spec.fastest(rows) == ("sdpa_flash", 1200.0)                         # the fastest that is right
    assert spec.fastest({"sdpa_x": {"skipped": "no"}}) is None


def test_without_torch_there_are_no_peers_and_it_says_so(monkeypatch):
    from cudabook import peers
    monkeypatch.setattr(peers, "available", lambda: "torch is not installed")
    said = []
    assert attention.bench.peers(None, None, {}, progress=said.append) == {}
    assert said == ["SDPA peers skipped: torch is not installed; the table will have no % of SDPA"]


def _record(**change):
    flops = benchmark.flops(4, 16, 4096, 128, False)
    us = 2000.0
    row = {"median_us": us, "TFLOPs": round(flops / (us * 1e-6) / 1e12, 2), "pct_of_sdpa": 50.0, "correct": True}
    row.update(change)
    name = "attention B=4 H=16 N=4096 d=128 causal=False"
    sdpa = {"median_us": 1000.0, "TFLOPs": round(flops / 1e-3 / 1e12, 2), "pct_of_sdpa": 100.0, "correct": True}
    return {"gpu": "NVIDIA Testcard", "commit": "abc1234", "date": "2026-12-01T00:00:00+00:00", "workloads": {name: {
        "track": "attention", "size": dict(benchmark.WORKLOADS[0]),
        "context": {"flops": flops, "sdpa_us": 1000.0, "sdpa_best": "sdpa_flash", "sdpa_TFLOPs": 549.8},
        "stages": {"01_naive": row, "02_online_softmax": {"skipped": "no reason"}},
        "peers": {"sdpa_flash": sdpa, "sdpa_cudnn": {"skipped": "not run: RuntimeError: No available kernel"}}}}}


def test_an_attention_record_round_trips_and_tabulates(tmp_path):
    record = _record()
    path = results.save(record, tmp_path)
    assert results.load(path) == json.loads(json.dumps(record))
    text = results.table(record)
    assert "| stage | µs | TFLOP/s | % of SDPA | speed-up vs 01 | correct |" in text
    assert "| 01_naive | 2,000.0 | 274.9 | 50.0 | 1.0× | ✓ |" in text
    assert "SDPA (sdpa_flash) 550 TFLOP/s" in text and "No available kernel" in text


@pytest.mark.parametrize("change, message", [
    (dict(TFLOPs=300.0), "TFLOPs 300.0 but 549,755,813,888 FLOPs in 2000.0 µs is 274.88 TFLOP/s"),
    (dict(pct_of_sdpa=70.0), "pct_of_sdpa 70.0 but sdpa_flash took 1000.0 µs against 2000.0 µs: 50.0 %"),
])
def test_a_record_whose_figures_disagree_is_refused(tmp_path, change, message):
    (tmp_path / "bad.json").write_text(json.dumps(_record(**change)))
    with pytest.raises(results.RecordError, match=message):
        results.load(tmp_path / "bad.json")

