"""The deformable attention track: the reference agrees with a plain loop over grid_sample's own formulas; bad
input is refused naming the argument and the rule; the tolerance passes honest float32 arithmetic and nothing
else; rungs 01 and 02 are right in the simulator on the grading cases and at D = 8, 24 and 128; planted mistakes
(align_corners=True, clamping, x/y swapped, weights or level starts left out, ...) are caught and named; the
benchmark module has the shape cudabook.results expects.
"""
import json
import math

import ml_dtypes
import numpy as np
import pytest

from cudabook import SIMULATOR, msda, results
from cudabook.msda import benchmark, inputs
from cudabook.msda.mistakes import MISTAKES
from cudabook.check import check_case
from ptxchild import PRELUDE, ptx_in_child

BF16 = ml_dtypes.bfloat16
RUNGS = ("01_naive", "02_warp_cooperative")


def problem(N=1, Lq=5, M=2, levels=((3, 4), (2, 2)), P=2, D=8, **kw):
    return msda.random_problem(N, Lq, M, levels, P, D, **kw)


def check(stage, inputs_, kernel=None, **params):
    launch = msda.stage(stage).launch
    return check_case("msda", lambda p: launch(p, kernel=kernel, **params), inputs_)


# ------------------------------------------------------------------------------------ the public face

def test_the_first_rungs():        # (the face every track shares: tests/machinery/test_track_contract.py)
    assert msda.STAGES[:2] == RUNGS                                                 # later rungs may follow
    assert msda.stage(2).NAME == "02_warp_cooperative"


def test_run_returns_bf16_of_the_right_shape():
    args = problem(N=2, Lq=3, M=2, D=16)
    out = msda.run("01_naive", *args)
    assert out.shape == (2, 3, 32) and out.dtype == BF16
    assert msda.judge(out, *args).ok


# ------------------------------------------------------------------------------------ the reference

def plain_loop(value, shapes, starts, loc, attn):
    """grid_sample(align_corners=False, padding_mode='zeros') written out from its own definitions: the grid in
    [-1, 1], unnormalized as ((g + 1) * size - 1) / 2, each of the four neighbours weighted by
    (1 - |distance|) along each axis and read only if it lies on the map."""
    v = np.asarray(value, np.float64)
    N, S, M, D = v.shape
    Lq, L, P = loc.shape[1], loc.shape[3], loc.shape[4]
    out = np.zeros((N, Lq, M * D))
    for n, q, m, l, p in np.ndindex(N, Lq, M, L, P):
        H, W = (int(s) for s in shapes[l])
        gx, gy = 2.0 * float(loc[n, q, m, l, p, 0]) - 1.0, 2.0 * float(loc[n, q, m, l, p, 1]) - 1.0
        ix, iy = ((gx + 1.0) * W - 1.0) / 2.0, ((gy + 1.0) * H - 1.0) / 2.0
        for yy in (math.floor(iy), math.floor(iy) + 1):
            for xx in (math.floor(ix), math.floor(ix) + 1):
                if 0 <= xx < W and 0 <= yy < H:
                    weight = (1.0 - abs(ix - xx)) * (1.0 - abs(iy - yy))
                    pixel = v[n, starts[l] + yy * W + xx, m]
                    out[n, q, m * D:(m + 1) * D] += float(attn[n, q, m, l, p]) * weight * pixel
    return out


def test_reference_agrees_with_a_plain_loop_at_the_edges(rng):
    """Random and edge locations (exact map edges, pixel centres, one pixel off, far outside), a 1 x 1 level."""
    for kw in (dict(levels=((3, 4), (2, 5), (1, 1)), P=3, borders=0.5),
               dict(levels=((4, 2), (1, 3)), P=2, locations="uniform", borders=0.3)):
        args = problem(N=2, Lq=4, M=2, D=8, rng=rng, **kw)
        assert np.allclose(msda.reference(*args), plain_loop(*args), rtol=1e-9, atol=1e-12)


def test_reference_by_hand():
    """One 2 x 3 level (H = 2, W = 3): pixel (row y, column x) holds 10 y + x + 1 in every channel."""
    value = np.repeat((10 * np.arange(2)[:, None] + np.arange(3) + 1).reshape(1, 6, 1, 1), 8, axis=3).astype(BF16)
    at = [((1.5 / 3, 0.25), 2.0),          # pixel (0, 1)'s centre: its value
          ((0.0, 0.25), 0.5),              # the left edge: half of pixel (0, 0), half of a pixel off the map
          ((-0.5 / 3, 0.25), 0.0),         # position -1: wholly off the map
          ((1.0, 0.75), 0.5 * 13),         # the right edge of row 1: half of pixel (1, 2)
          ((0.5, 1.0), 0.5 * 12),          # the bottom edge below pixel (1, 1)
          ((0.5, 0.5), (2 + 12) / 2),      # between rows 0 and 1 of column 1
          ((1.3, 0.5), 0.0), ((-7.0, 40.0), 0.0)]
    loc = np.array([xy for xy, _ in at], np.float32).reshape(1, len(at), 1, 1, 1, 2)     # a query per location
    attn = np.ones((1, len(at), 1, 1, 1), np.float32)
    ref = msda.reference(value, np.array([[2, 3]]), np.array([0]), loc, attn)
    assert np.allclose(ref[0, :, 0], [want for _, want in at], atol=1e-5)
    assert np.all(ref[0] == ref[0, :, :1])          # every channel alike


def test_reference_of_a_one_pixel_level():
    value = np.full((1, 1, 1, 8), 4.0, BF16)
    loc = np.array([0.5, 0.5, 0.75, 0.5, 1.5, 0.5, 0.5, -0.5], np.float32).reshape(1, 4, 1, 1, 1, 2)
    attn = np.ones((1, 4, 1, 1, 1), np.float32)
    ref = msda.reference(value, np.array([[1, 1]]), np.array([0]), loc, attn)
    assert ref[0, :, 0].tolist() == [4.0, 3.0, 0.0, 0.0]


def test_random_problems(rng):
    value, shapes, starts, loc, attn = problem(N=2, Lq=39, M=3, levels=((5, 6), (3, 3)), P=4, D=8, rng=rng)
    assert value.dtype == BF16 and loc.dtype == attn.dtype == np.float32 and starts.tolist() == [0, 30]
    assert np.allclose(attn.reshape(2, 39, 3, -1).sum(-1), 1, atol=1e-5)
    # local: query 31 is pixel 1 of level 1 (row 0, column 1 of a 3 x 3 map): its samples on level 1 sit near
    # ((1 + 0.5) / 3, 0.5 / 3), two pixels of spread
    near = loc[:, 31, :, 1].reshape(-1, 2) - [1.5 / 3, 0.5 / 3]
    assert np.abs(near).mean() < 1.0      # 48 half-normal offsets of sigma 2/3: mean 0.53 (2.5/3 failed 1 run in 860,000)
    edges = problem(N=1, Lq=50, M=2, levels=((4, 4),), P=4, D=8, borders=1.0, rng=rng)[3]
    assert set(np.unique(edges[..., 0])) <= set(inputs.border_positions(4).astype(np.float32))


# ------------------------------------------------------------------------------------ bad input

def _bad(what):
    value, shapes, starts, loc, attn = problem(N=2, Lq=3, M=2, levels=((3, 4), (2, 2)), P=2, D=8)
    a = dict(value=value, spatial_shapes=shapes, level_start_index=starts, sampling_locations=loc,
             attention_weights=attn)
    what(a)
    return tuple(a[k] for k in inputs.ARGS)


def _put(key, index, x):
    def edit(a):
        a[key] = a[key].copy()
        a[key][index] = x
    return edit


BAD = [
    ("value a list", lambda a: a.update(value=a["value"].tolist()), TypeError, "value must be a NumPy array, got list"),
    ("value float32", lambda a: a.update(value=a["value"].astype(np.float32)), TypeError,
     "value must be bfloat16, got float32"),
    ("shapes float", lambda a: a.update(spatial_shapes=a["spatial_shapes"].astype(float)), TypeError,
     "spatial_shapes must hold integers, got float64"),
    ("starts float", lambda a: a.update(level_start_index=a["level_start_index"].astype(np.float32)), TypeError,
     "level_start_index must hold integers"),
    ("locations float64", lambda a: a.update(sampling_locations=a["sampling_locations"].astype(np.float64)),
     TypeError, "sampling_locations must be float32, got float64"),
    ("weights float16", lambda a: a.update(attention_weights=a["attention_weights"].astype(np.float16)), TypeError,
     "attention_weights must be float32, got float16"),
    ("value 3-D", lambda a: a.update(value=a["value"][0]), ValueError, r"value must be 4-D \[N, S, M, D\]"),
    ("shapes 1-D", lambda a: a.update(spatial_shapes=a["spatial_shapes"].ravel()), ValueError,
     r"spatial_shapes must be 2-D \[L, 2\]"),
    ("locations without (x, y)", lambda a: a.update(sampling_locations=a["sampling_locations"][..., 0]), ValueError,
     r"sampling_locations must be 6-D \[N, Lq, M, L, P, 2\]"),
    ("locations for 3 heads", lambda a: a.update(sampling_locations=np.concatenate(
        [a["sampling_locations"]] * 2, axis=2)[:, :, :3]), ValueError, r"its axis 2, M \(heads\), must agree"),
    ("locations for another N", lambda a: a.update(sampling_locations=a["sampling_locations"][:1]), ValueError,
     r"axis 0, N \(images\)"),
    ("weights one point short", lambda a: a.update(attention_weights=a["attention_weights"][..., :1]), ValueError,
     r"attention_weights has shape \(2, 3, 2, 2, 1\), expected \[N, Lq, M, L, P\] = \(2, 3, 2, 2, 2\)"),
    ("three starts for two levels", lambda a: a.update(level_start_index=np.array([0, 12, 16])), ValueError,
     "level_start_index has 3 entries but spatial_shapes has 2 levels"),
    ("starts not the prefix sums", lambda a: a.update(level_start_index=np.array([0, 11])), ValueError,
     r"level_start_index\[1\] is 11, expected 12: level_start_index must be the prefix sums of H \* W"),
    ("S too large", lambda a: a.update(value=np.concatenate([a["value"]] * 2, axis=1)), ValueError,
     r"value has S = 32 rows per image, but the levels of spatial_shapes cover sum\(H \* W\) = 16"),
    ("a level of width 0", lambda a: a.update(spatial_shapes=np.array([[3, 4], [4, 0]]),
                                              level_start_index=np.array([0, 12])), ValueError,
     r"spatial_shapes\[1\] is \(4, 0\): every level's H and W must be at least 1"),
    ("no queries", lambda a: a.update(sampling_locations=a["sampling_locations"][:, :0],
                                      attention_weights=a["attention_weights"][:, :0]), ValueError,
     r"Lq \(queries, sampling_locations' axis 1\) is 0"),
    ("NaN location", _put("sampling_locations", (1, 2, 0, 1, 0, 1), np.nan), ValueError,
     r"sampling_locations\[1, 2, 0, 1, 0, 1\] is nan; locations must be finite"),
    ("infinite location", _put("sampling_locations", (0, 0, 1, 0, 1, 0), -np.inf), ValueError,
     r"sampling_locations\[0, 0, 1, 0, 1, 0\] is -inf"),
    ("NaN weight", _put("attention_weights", (0, 1, 1, 1, 1), np.nan), ValueError,
     r"attention_weights\[0, 1, 1, 1, 1\] is nan; weights must be finite"),
    ("infinite value", _put("value", (1, 5, 0, 3), np.inf), ValueError,
     r"value\[1, 5, 0, 3\] is inf; values must be finite"),
]


@pytest.mark.parametrize("what,edit,error,message", BAD, ids=[b[0] for b in BAD])
def test_bad_input_names_the_argument_and_the_rule(what, edit, error, message):
    args = _bad(edit)
    with pytest.raises(error, match=message):
        msda.validate(*args)
    with pytest.raises(error, match=message):        # run() validates before it launches anything
        msda.run("01_naive", *args)


def test_validate_returns_contiguous_bits():
    args = problem()
    value, shapes, starts, loc, attn = msda.validate(args[0], args[1], args[2].astype(np.uint8),
                                                     np.asfortranarray(args[3]), args[4])
    assert value.dtype == np.uint16 and shapes.dtype == starts.dtype == np.int32 and loc.flags.c_contiguous
    assert np.array_equal(value.view(BF16), args[0]) and np.array_equal(loc, args[3])


@pytest.mark.parametrize("stage", RUNGS)
@pytest.mark.parametrize("D", [4, 12, 136])
def test_channels_not_a_multiple_of_8_up_to_128_are_refused(stage, D):
    with pytest.raises(ValueError, match=f"{stage}: D .* must be a multiple of 8 from 8 to 128, got D = {D}"):
        msda.run(stage, *problem(D=D))


@pytest.mark.parametrize("stage,params,error,rule", [
    ("01_naive", dict(block=64), TypeError, "unknown parameter 'block'"),
    ("01_naive", dict(threads=2048), ValueError, "threads must be an integer in 1..1024"),
    ("02_warp_cooperative", dict(vec_bytes=2), ValueError, r"vec_bytes must be one of \[4, 8, 16\]"),
    ("02_warp_cooperative", dict(lanes=3), ValueError, "lanes .* must be a power of two from 1 to 32"),
    ("02_warp_cooperative", dict(lanes=64), ValueError, "lanes .* must be a power of two from 1 to 32"),
    ("02_warp_cooperative", dict(warps_per_block=0), ValueError, "warps_per_block must be an integer from 1 to 32"),
])
def test_bad_parameters_name_the_rule(stage, params, error, rule):
    with pytest.raises(error, match=rule):
        msda.run(stage, *problem(), **params)


# ------------------------------------------------------------------------------------ the tolerance

def float32_kernel(value, shapes, starts, loc, attn, *, order="forward", pytorch=False):
    """An honest float32 computation, as a kernel might do it: positions, weights and sums in float32, the sum
    over samples in `order`; pytorch=True takes grid_sample's longer way to the position."""
    f = np.float32
    v = np.asarray(value).astype(f)
    N, S, M, D = v.shape
    Lq, L, P = loc.shape[1], loc.shape[3], loc.shape[4]
    terms = []
    heads = np.arange(M)[None, None, :]
    images = np.arange(N)[:, None, None]
    for l in range(L):
        H, W = f(shapes[l][0]), f(shapes[l][1])
        x, y = loc[:, :, :, l, :, 0], loc[:, :, :, l, :, 1]
        if pytorch:
            px = (((f(2) * x - f(1)) + f(1)) * W - f(1)) / f(2)
            py = (((f(2) * y - f(1)) + f(1)) * H - f(1)) / f(2)
        else:
            px, py = x * W - f(0.5), y * H - f(0.5)
        x0, y0 = np.floor(px), np.floor(py)
        fx, fy = px - x0, py - y0
        x0, y0 = x0.astype(np.int64), y0.astype(np.int64)
        a = attn[:, :, :, l]
        for dy, wy in ((0, f(1) - fy), (1, fy)):
            for dx, wx in ((0, f(1) - fx), (1, fx)):
                cx, cy = x0 + dx, y0 + dy
                inside = (cx >= 0) & (cx < int(W)) & (cy >= 0) & (cy < int(H))
                rows = starts[l] + np.clip(cy, 0, int(H) - 1) * int(W) + np.clip(cx, 0, int(W) - 1)
                w = np.where(inside, a * (wy * wx), f(0))                      # [N, Lq, M, P]
                for p in range(P):
                    terms.append(w[..., p, None] * v[images, rows[..., p], heads])   # [N, Lq, M, D] float32
    if order == "reversed":
        terms = terms[::-1]
    acc = np.zeros(terms[0].shape, f)
    if order == "pairwise":
        while len(terms) > 1:
            terms = [terms[i] + terms[i + 1] if i + 1 < len(terms) else terms[i] for i in range(0, len(terms), 2)]
        acc = terms[0]
    else:
        for t in terms:
            acc = acc + t
    return acc.reshape(N, Lq, M * D).astype(BF16)


@pytest.mark.parametrize("kw", [dict(N=2, Lq=150, M=2, levels=((20, 24), (10, 12), (5, 6), (3, 3)), P=8, D=16),
                                dict(N=1, Lq=200, M=3, levels=((9, 7), (1, 1)), P=6, D=8, borders=0.3)])
def test_every_honest_float32_order_passes(kw, rng):
    args = msda.random_problem(**kw, rng=rng)
    for order in ("forward", "reversed", "pairwise"):
        for pytorch in (False, True):
            v = msda.judge(float32_kernel(*args, order=order, pytorch=pytorch), *args)
            assert v.ok, f"{order}, pytorch={pytorch}: {v}"


def test_the_tolerance_is_the_arithmetic_and_no_more(rng):
    args = problem(N=1, Lq=20, M=2, levels=((6, 5), (3, 2)), P=3, D=8, rng=rng)
    ref, bound = msda.reference_with_bound(*args)
    good = ref.astype(np.float32).astype(BF16)
    assert msda.judge(good, *args).ok
    assert np.all(bound < 1e-4 * np.abs(args[0].astype(float)).max())      # far below a bf16 step of the data
    k = np.unravel_index(np.argmax(np.abs(ref)), ref.shape)
    worse = good.copy()
    worse.view(np.uint16)[k] += 2                                           # two bf16 steps off, at the largest
    v = msda.judge(worse, *args)
    assert not v.ok and v.wrong == 1 and f"out[{k[0]}, {k[1]}, {k[2]}]" in v.message
    worse[k] = np.nan
    assert msda.judge(worse, *args).nan == 1
    assert "shape" in msda.judge(good[:, :-1], *args).message


def test_grading_cases_are_fresh_and_make_every_loop_repeat():
    c1, c2 = msda.grading_cases(), msda.grading_cases()
    assert not np.array_equal(c1[0][1][3], c2[0][1][3])                     # fresh locations each call
    from cudabook.msda.s02_warp_cooperative import plan
    for name, (value, shapes, starts, loc, attn), label in c1:
        N, S, M, D = value.shape
        L, P = loc.shape[3], loc.shape[4]
        assert L >= 2 and P >= 2, name
        words, nvec, lanes = plan(D)
        if lanes > 1:
            assert L * P > lanes and (L * P) % lanes, f"{name}: rung 02's rounds of samples must repeat, ragged"
    assert {v.shape[-1] for _, (v, *_), _ in c1} >= {8, 40}
    assert any(((np.asarray(s) == 1).all(axis=1)).any() for _, (_, s, *_), _ in c1)      # a 1 x 1 level


# ------------------------------------------------------------------------------------ the rungs

@pytest.mark.parametrize("stage", RUNGS)
def test_right_on_the_grading_cases(stage):
    for name, args, label in msda.grading_cases(stage):
        v = check(stage, args)
        assert v.ok, f"{stage}, {name} ({label}):\n{v}"


@pytest.mark.parametrize("stage", RUNGS)
@pytest.mark.parametrize("D", [8, 24, 128])
def test_right_at_these_channel_counts(stage, D):
    Lq = 2 if D == 128 and SIMULATOR else 6
    args = problem(N=1, Lq=Lq, M=2, levels=((3, 5), (2, 2)), P=3, D=D, borders=0.3)
    v = check(stage, args)
    assert v.ok, f"{stage}, D={D}:\n{v}"


@pytest.mark.parametrize("params", [dict(vec_bytes=4), dict(vec_bytes=8), dict(vec_bytes=4, lanes=8),
                                    dict(lanes=2, warps_per_block=1), dict(lanes=32)])
def test_rung_02_other_widths_and_groups(params):
    """4 bytes at D = 72: 36 vectors, two passes of 32 lanes (or five of 8); lanes=2 at D = 40: five vectors, three
    passes, and a sample round of two."""
    D = 72 if params.get("vec_bytes") == 4 else 40
    args = problem(N=1, Lq=2, M=2, levels=((3, 3), (2, 1)), P=2, D=D, borders=0.3)
    v = check("02_warp_cooperative", args, **params)
    assert v.ok, f"{params}:\n{v}"


def exact_case():
    """Pixel centres and edges of power-of-two maps, eighths as values and weights: every product and sum is
    exact in float32. Returns (inputs, the reference rounded to bf16 as uint16 bits)."""
    rng = np.random.default_rng(7)
    levels = ((4, 8), (2, 2))
    value = msda.to_bf16(rng.integers(-16, 17, size=(1, 36, 2, 8)) / 8)
    k = rng.integers(0, 4, size=(1, 5, 2, 2, 4, 2))
    size = np.array([[8, 4], [2, 2]])[None, None, None, :, None, :]           # (W, H) of each level
    loc = ((k % size + rng.choice([0.5, 0.0], size=k.shape)) / size).astype(np.float32)
    attn = np.full((1, 5, 2, 2, 4), 1 / 8, np.float32)
    args = (value, np.array(levels), msda.level_starts(levels), loc, attn)
    return args, msda.to_bf16(msda.reference(*args)).view(np.uint16)


def test_exact_inputs_come_out_exact():
    """On exact inputs every rung must give the reference rounded to bf16, bit for bit."""
    args, want = exact_case()
    for stage in RUNGS:
        assert np.array_equal(msda.run(stage, *args).view(np.uint16), want), stage


def test_a_replacement_kernel_really_runs():
    from numba import cuda

    @cuda.jit
    def writes_nothing_01(value, shapes, starts, loc, attn, out):
        pass

    @cuda.jit
    def writes_nothing_02(words, shapes, starts, loc, attn, out, lanes):
        pass

    for stage, kernel in zip(RUNGS, (writes_nothing_01, writes_nothing_02)):
        v = check(stage, problem(Lq=2), kernel=kernel)
        assert not v.ok and v.nan == v.total and "no output was written" in v.message, stage


# ------------------------------------------------------------------------------------ planted mistakes

# the checker's planted mistakes (align_corners=True, clamping, x/y swapped, ...): cudabook/msda/mistakes.py
CHECKER_MISTAKES = [m for m in MISTAKES if m.where == "checker"]


@pytest.mark.parametrize("m", CHECKER_MISTAKES, ids=[m.what for m in CHECKER_MISTAKES])
def test_the_checker_catches_the_planted_mistake(m):
    from corpus.mutate import mutant
    name, stage, expect = m.what, m.stage, m.says[0] if m.says else None
    kernel = mutant(msda.stage(stage).__name__, m.kernel, m.edits)
    args = problem(N=1, Lq=4, M=2, levels=((4, 5), (3, 2)), P=3, D=16, borders=0.3)
    v = check(stage, args, kernel=kernel)
    assert not v.ok, f"the checker let a wrong kernel pass: {name}"
    print(f"{name}:\n{v}")
    if expect:
        assert expect in v.message, f"{name}: the message does not point at the mistake:\n{v}"


def test_an_unedited_copy_passes():
    from corpus.mutate import mutant
    for stage, fn in zip(RUNGS, ("msda_naive", "msda_warp")):
        assert check(stage, problem(Lq=3), kernel=mutant(msda.stage(stage).__name__, fn)).ok, stage


# ------------------------------------------------------------------------------------ the benchmark

def test_the_bench_module_has_the_shape_results_expects():
    spec = msda.bench
    assert [spec.workload_name(**w) for w in spec.WORKLOADS] == [
        "msda N=48 Lq=15420 M=8 L=4 P=8 D=32 local", "msda N=48 Lq=15420 M=8 L=4 P=8 D=32 uniform"]
    assert spec.PEERS_FIRST                     # (the shape every track's has: tests/machinery/test_track_contract.py)
    args, p = spec.prepare(dict(N=1, Lq=4, M=2, levels=((3, 3), (2, 2)), P=2, D=8, locations="uniform"))
    assert p.shape == (1, 13, 2, 8, 4, 2, 2) and len(args) == 5
    assert p.min_bytes == 2 * 13 * 2 * 8 + 12 * 4 * 2 * 2 * 2 + 2 * 4 * 2 * 8 + 24
    assert p.gather_bytes == 4 * 2 * 2 * 2 * 4 * 8 * 2
    seed = spec.prepare.__globals__["_SEED"]
    big = msda.Problem(*[None] * 6, host_shapes=None, dims=(48, 15420, 8, 32, 15420, 4, 8))
    assert seed["Lq"] == sum(h * w for h, w in seed["levels"]) == 15420
    assert round(big.gather_bytes / 1e9, 1) == 48.5                       # the 48.5 GB of corners


def _record(**change):
    ctx = {"copy_GBps": 3000.0, "min_bytes": 3_000_000_000, "gather_bytes": 48_500_000_000, "gather_us": 20000.0,
           "ceiling_GBps": 2425.0, "torch_eager_us": 134500.0}
    row = {"median_us": 40000.0, "GBps": 75.0, "pct_of_copy": 2.5, "pct_of_ceiling": 50.0, "speedup_vs_torch": 3.36,
           "correct": True}
    row.update(change)
    name = "msda N=48 Lq=15420 M=8 L=4 P=8 D=32 local"
    return {"gpu": "NVIDIA Testcard", "commit": "abc1234", "date": "2026-12-01T00:00:00+00:00", "workloads": {name: {
        "track": "msda", "size": dict(benchmark.WORKLOADS[0], levels=[list(x) for x in inputs.SEED_LEVELS]),
        "context": ctx, "stages": {"01_naive": row, "02_warp_cooperative": {"skipped": "no reason"}},
        "peers": {"torch_eager": {"median_us": 134500.0, "GBps": 22.3, "pct_of_copy": 0.7, "pct_of_ceiling": 14.9,
                                  "speedup_vs_torch": 1.0, "correct": True}}}}}


def test_a_msda_record_round_trips_and_tabulates(tmp_path):
    record = _record()
    path = results.save(record, tmp_path)
    assert results.load(path) == json.loads(json.dumps(record))
    text = results.table(record)
    assert ("| stage | µs | GB/s | % of copy | % of reference gather | × torch eager | speed-up vs 01 | correct |"
            in text)
    assert "| 01_naive | 40,000.0 | 75 | 2.5 | 50.0 | 3.4 | 1.0× | ✓ |" in text
    assert "reference gather 2,425 GB/s of corners" in text and "torch eager 134,500 µs" in text


@pytest.mark.parametrize("change, message", [
    (dict(GBps=80.0), "GBps 80.0 but 3,000,000,000 bytes in 40000.0 µs is 75.0 GB/s"),
    (dict(pct_of_copy=5.0), "pct_of_copy 5.0 but 75.0 GB/s of a 3000.0 GB/s ceiling is 2.5 %"),
    (dict(pct_of_ceiling=70.0), r"pct_of_ceiling \(% of reference gather\) 70.0 but the reference gather took "
                                "20000.0 µs"),
    (dict(speedup_vs_torch=30.0), "speedup_vs_torch 30.0 but torch eager took 134500.0 µs"),
])
def test_a_record_whose_figures_disagree_is_refused(tmp_path, change, message):
    (tmp_path / "bad.json").write_text(json.dumps(_record(**change)))
    with pytest.raises(results.RecordError, match=message):
        results.load(tmp_path / "bad.json")


@pytest.mark.parametrize("heads_outer", [False, True])
def test_the_reference_gather_reads_exactly_the_corners(rng, heads_outer):
    """The reference gather's kernel, in the simulator, in both orders of its groups: its XOR of every corner
    vector equals NumPy's, group by group."""
    args = problem(N=1, Lq=3, M=2, levels=((3, 4), (1, 2)), P=2, D=16, borders=0.4, rng=rng)
    p = msda.upload(*args)
    got = benchmark.gather_fold(p, heads_outer)
    value, shapes, starts, loc, attn = msda.validate(*args)
    words = value.reshape(1, -1, 16).view(np.uint32)                         # [N, S * M, D / 2]
    f = np.float32
    want = np.zeros((1, 3, 2, 2), np.uint32)                                  # [n, q, m, lane]: 2 vectors of D = 16
    for n, q, m, l, p_ in np.ndindex(1, 3, 2, 2, 2):
        H, W = int(shapes[l, 0]), int(shapes[l, 1])
        x = min(max(loc[n, q, m, l, p_, 0] * f(W) - f(0.5), f(0)), f(W - 1))
        y = min(max(loc[n, q, m, l, p_, 1] * f(H) - f(0.5), f(0)), f(H - 1))
        top = starts[l] + min(math.floor(y), max(H - 2, 0)) * W + min(math.floor(x), max(W - 2, 0))
        for r in (top, top + (W > 1), top + W * (H > 1), top + W * (H > 1) + (W > 1)):
            for g in range(2):
                want[n, q, m, g] ^= np.bitwise_xor.reduce(words[n, r * 2 + m, 4 * g:4 * g + 4])
    assert np.array_equal(got, want.ravel())


def test_the_kernels_compile_for_a_gpu():
    """The simulator runs Python; a GPU needs Numba's compiler to accept the kernels (NVVM, no GPU needed):
    compiled for sm_90, with 16- and 8-byte accesses where asked, no float64 and no local memory."""
    if not SIMULATOR:
        pytest.skip("on a GPU the other tests compile and run the kernels")
    child = PRELUDE + r"""
from cudabook.msda import s01_naive, s02_warp_cooperative as s02, benchmark
from cudabook.kit.numba_rung import specialise
A = lambda t, n: types.Array(t, n, "C")
u16, u32, i32, f32 = types.uint16, types.uint32, types.int32, types.float32
common = (A(i32, 2), A(i32, 1), A(f32, 6), A(f32, 5))
out = {"01": cuda.compile_ptx(s01_naive.msda_naive.py_func, (A(u16, 4),) + common + (A(u16, 3),), cc=(9, 0))[0]}
for words in (1, 2, 4):
    k = specialise(s02.msda_warp, WORDS=words)
    out[f"02/{words}"] = cuda.compile_ptx(k.py_func, (A(u32, 3),) + common + (A(u32, 3), i32), cc=(9, 0))[0]
out["gather"] = cuda.compile_ptx(benchmark.gather_corners.py_func, (A(u32, 3), A(i32, 2), A(i32, 5), A(u32, 1),
                                 i32, i32), cc=(9, 0))[0]
print(json.dumps(out))
"""
    ptx = ptx_in_child(child)
    for name, text in ptx.items():
        assert ".f64" not in text and ".local" not in text, name
    assert "ld.global.v4.u32" in ptx["02/4"] and "st.global.v4.u32" in ptx["02/4"] and "shfl.sync" in ptx["02/4"]
    assert "ld.global.v2.u32" in ptx["02/2"] and "ld.global.v4.u32" in ptx["gather"]


# ------------------------------------------------------------------------------------ GPU only

@pytest.mark.gpu
def test_the_peer_is_right():
    pytest.importorskip("torch")
    from cudabook import peers
    if peers.available():
        pytest.skip(peers.available())
    import torch
    args = msda.random_problem(2, 300, 4, ((10, 12), (5, 6), (1, 1)), 4, 32, borders=0.2)
    v, levels, loc, attn = benchmark._torch_inputs(args, slice(None))
    got = benchmark.msda_torch(v, levels, loc, attn).to(torch.bfloat16).view(torch.int16).cpu().numpy()
    verdict = msda.judge(got.view(np.uint16), *args)
    assert verdict.ok, str(verdict)
    row = benchmark._measure_peer(benchmark.msda_torch, args, 3, at_once=1)    # a chunk at a time: the same
    assert row["correct"] and row["images_at_once"] == 1 and row["median_us"] > 0


# ------------------------------------------------------------------------------------ the grader takes the track

def test_lab_02_has_its_own_hint():        # (lab 01's, and the grader by name: test_track_contract.py)
    from cudabook import labs
    assert labs.hint("02_warp_cooperative", track="msda") != "write the kernel body"      # the stage's own region


def test_large_draws_run_on_threads_and_give_the_same_inputs_on_any_machine(monkeypatch):
    """Above THREADED_FROM values, random_problem draws each image from its own child of the generator on threads:
    the same seed gives the same bits whatever the machine's core count; below it, one generator draws in order."""
    import os

    import numpy as np

    from cudabook.msda import inputs
    size = dict(N=3, Lq=40, M=2, levels=((6, 7), (3, 4)), P=2, D=8)
    small = inputs.random_problem(**size, rng=np.random.default_rng(11))
    monkeypatch.setattr(inputs, "THREADED_FROM", 1)
    draws = []
    for cores in (1, 2, 5):
        monkeypatch.setattr(os, "cpu_count", lambda cores=cores: cores)
        for locations in ("local", "uniform"):
            draws.append((cores, locations, inputs.random_problem(**size, locations=locations,
                                                                  rng=np.random.default_rng(11))))
    for cores, locations, got in draws:
        same = next(d for c, w, d in draws if w == locations)
        assert all(np.array_equal(np.asarray(a).view(np.uint8), np.asarray(b).view(np.uint8))
                   for a, b in zip(got, same)), (cores, locations)
    threaded = next(d for c, w, d in draws if w == "local")
    assert not np.array_equal(np.asarray(threaded[0]).view(np.uint16), np.asarray(small[0]).view(np.uint16))
    w = np.asarray(threaded[4]).reshape(3, 40, 2, -1).sum(-1)
    assert np.allclose(w, 1, atol=1e-5) and np.abs(np.asarray(threaded[0]).astype(np.float32)).max() <= 1


def test_an_unknown_kind_of_sampling_locations_is_named():
    import numpy as np
    import pytest

    from cudabook.msda import inputs
    with pytest.raises(ValueError, match="locations must be 'local' or 'uniform', got 'grid'"):
        inputs.random_problem(N=1, Lq=4, M=1, levels=((3, 3),), P=1, D=4, locations="grid",
                              rng=np.random.default_rng(0))
