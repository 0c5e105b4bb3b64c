"""The deformable attention checker's hints from the pattern of the wrong outputs (cudabook/msda/checking.py:
which_part, explain): outputs made wrong in one known way, on the grader's own small cases, must get the hint that
names that way (a level, a point, a corner or the last samples left out or counted twice, corners blended with each
other's weights or read from the wrong row, one corner's pixel alone with another's weight, items that took another
item's samples, one corner weighed wrong in each lane's vector, the heads that are wrong, the border side that the
wrong items share, (int)x for floorf, a right neighbour tested with <= W), no hint a mistake whose sampling cannot
tell the wrong outputs, and the right output none. (Whether the planted mistakes get the same hint whatever the
data: tools/hint_seeds.py.)"""
import numpy as np
import pytest

from cudabook import msda
from cudabook.msda import checking
from cudabook.msda.inputs import BF16, parts, random_problem, sample

CASE = dict(checking._CASES_SIM[0][1])          # two levels (4 x 5, 2 x 3), 3 points, D = 8, edges


def _bf16(x):
    return np.asarray(x, np.float32).astype(BF16)


def _problem(seed, **kw):
    return random_problem(**{**CASE, **kw}, rng=np.random.default_rng(seed))


def _hint(got, args):
    v = msda.judge(_bf16(got), *args)
    assert not v.ok
    lines = [line for line in v.message.split("\n") if line.startswith("Hint: ")]
    return lines[0] if lines else ""


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_right_output_passes(seed):
    args = _problem(seed)
    assert msda.judge(_bf16(sample(*args)), *args).ok


@pytest.mark.parametrize("family, k, times, words", [
    ("level", 1, 0, "the samples of level 1 left out"),
    ("level", 0, 2, "the samples of level 0 counted twice"),
    ("point", 2, 0, "point p = 2 of every level left out"),
    ("corner", 3, 0, "bottom-right (x0 + 1, y0 + 1) corner of every sample left out"),
    ("corner", 1, 2, "top-right (x0 + 1, y0) corner of every sample counted twice"),
])
def test_a_part_left_out_or_counted_twice_is_named(family, k, times, words):
    args = _problem(3)
    families, _ = parts(*args)
    assert np.allclose(families[family].sum(axis=0), sample(*args))       # the parts add up to the reference
    got = sample(*args) + (times - 1) * families[family][k]
    assert words in _hint(got, args)


def test_only_some_heads_wrong_names_them():
    args = _problem(4, M=3)
    got = sample(*args)
    D = CASE["D"]
    got[..., D:2 * D] = got[..., D:2 * D][:, ::-1]                         # head 1: the queries in reverse order
    hint = _hint(got, args)
    assert "only head 1 of 3 is wrong" in hint and "heads 0, 2 right" in hint


def test_items_wrong_only_at_the_right_edge_name_it():
    args = _problem(5, borders=0.1)
    _, sides = parts(*args)
    right = sides[1]
    assert 0 < right.sum() <= 0.7 * right.size           # (this draw: some items, not most, have one)
    got = sample(*args).reshape(*right.shape, -1)
    got[right] += 1.0                                                       # every item with such a sample wrong
    hint = _hint(got.reshape(sample(*args).shape), args)
    assert "partly off the map's right edge" in hint and "x0 + 1 < W" in hint


@pytest.mark.parametrize("seed", [6, 7, 8])
def test_int_for_floorf_is_named(seed):
    args = _problem(seed)
    got = np.nan_to_num(sample(*args, truncate=True), nan=0.0)   # (NaN: a sample on the touch test's edge)
    assert "floorf" in _hint(got, args)


def test_a_right_neighbour_tested_with_le_w_is_named():
    args = _problem(9)
    got = sample(*args, edge_le="x")
    got = np.where(np.isnan(got), 1e3, got)              # past the end of value: anything (here: far off)
    assert "x0 + 1 <= W" in _hint(got, args)


def test_corner_weights_swapped_are_named():
    args = _problem(10, borders=0.0)                       # (no sample at a whole pixel: every output can be told)
    families, _ = parts(*args)
    use = np.eye(4)[[0, 2, 1, 3]]                          # top-right and bottom-left with each other's weights
    got = np.tensordot(use.reshape(-1), families["weights"], 1)
    hint = _hint(got, args)
    assert "top-right (x0 + 1, y0) corner with the weight of the bottom-left one" in hint
    assert "fx and fy swapped" in hint


def test_one_pixel_with_one_weight_alone_is_named():
    """Only the bottom-right corner's pixel, blended with the top-left corner's weight, and nothing else: what every
    corner staged into the top-left's slot of a tile gives (the last one staged stays; the other slots, never
    staged, hold zeros)."""
    args = _problem(10, borders=0.0)
    families, _ = parts(*args)
    hint = _hint(families["weights"][4 * 3 + 0], args)                 # corner 3's pixel with corner 0's weight
    assert "the bottom-right (x0 + 1, y0 + 1) corner's pixel alone" in hint and "top-left one" in hint
    assert checking.UNSTAGED in hint


def test_the_cases_run_every_path():
    """Rung 04's producer takes an item's samples in rounds of 32 lanes: a case with L * P > 32 in the simulator's
    cases and the GPU's; rung 05's region has two paths (branchless or not): the grader runs both."""
    from cudabook.msda import s05_lane_groups as s05
    for simulator in (True, False):
        assert any(len(kw["levels"]) * kw["P"] > 32 for _, kw in checking.cases(simulator)), simulator
    assert {v.get("branchless", True) for v in s05.GRADING_VARIANTS} == {True, False}
    assert s05.ASYNC_COPIES is False


def _corners(args):
    """Every sample that touches the map, as a float32 kernel would take it apart: [(n, q, m, j, weights, rows)],
    j = l * P + p, weights the four corners' (attention weight folded in, zero for a corner off the map) and rows
    the row of value each corner's pixel is in (top-left, top-right, bottom-left, bottom-right)."""
    value, shapes, starts, loc, attn = args
    L, P = attn.shape[3:]
    out = []
    for n, q, m, l, p in np.ndindex(attn.shape):
        H, W = (int(s) for s in shapes[l])
        x = np.float32(loc[n, q, m, l, p, 0]) * np.float32(W) - np.float32(0.5)
        y = np.float32(loc[n, q, m, l, p, 1]) * np.float32(H) - np.float32(0.5)
        if not (-1 < x < W and -1 < y < H):
            continue
        x0, y0 = int(np.floor(x)), int(np.floor(y))
        fx, fy = float(x) - x0, float(y) - y0
        a = float(attn[n, q, m, l, p])
        weights, rows = [], []
        for dy, dx in ((0, 0), (0, 1), (1, 0), (1, 1)):
            on = 0 <= x0 + dx < W and 0 <= y0 + dy < H
            weights.append(a * (fx if dx else 1 - fx) * (fy if dy else 1 - fy) if on else 0.0)
            rows.append(int(starts[l]) + (y0 + dy) * W + x0 + dx)
        out.append((n, q, m, l * P + p, weights, rows))
    return out


def _blend(args, corners, read=lambda k, rows, W: rows[k]):
    """out [N, Lq, M * D]: each sample's corner weights on the pixels read(k, rows, W) picks (NaN past value)."""
    value, shapes = args[0], args[1]
    v = np.asarray(value, np.float64)
    N, S, M, D = v.shape
    P = args[4].shape[4]
    out = np.zeros((N, args[3].shape[1], M, D))
    for n, q, m, j, weights, rows in corners:
        for k in range(4):
            if weights[k]:
                r = read(k, rows, int(shapes[j // P][1]))
                out[n, q, m] += weights[k] * (v[n, r, m] if 0 <= r < S else np.nan)
    return out.reshape(N, out.shape[1], M * D)


def test_items_that_took_another_items_samples_are_named():
    """Every item (n, q, m) blended from its own value with item 0's locations and weights (a shuffle from the
    warp's lane t, not the group's): the hint says whose samples they took."""
    args = checking.every_item_on_the_map(_problem(11))
    value, shapes, starts, loc, attn = args
    borrowed = (value, shapes, starts, np.broadcast_to(loc[0, 0, 0], loc.shape).copy(),
                np.broadcast_to(attn[0, 0, 0], attn.shape).copy())
    hint = _hint(sample(*borrowed), args)
    assert checking.BORROWED in hint and "took item (0, 0, 0)'s" in hint


def test_the_last_samples_left_out_are_named():
    args = _problem(12)
    without = args[4].copy()
    without[..., -1, -1] = 0.0                                    # the last sample, j = L * P - 1: level 1, point 2
    hint = _hint(sample(*args[:4], without), args)
    assert "sample j = 5 (level 1, point 2) of every item left out" in hint and checking.LAST_SAMPLES in hint


def test_a_corner_read_from_the_wrong_row_is_named():
    """The bottom-left corner's weight on the pixel at row + 1 (the top-right's), not row + W."""
    args = _problem(13)
    corners = _corners(args)
    assert np.allclose(_blend(args, corners), sample(*args))            # (the blend of the right rows is right)
    got = _blend(args, corners, lambda k, rows, W: rows[1] if k == 2 else rows[k])
    got = np.where(np.isnan(got), 1e3, got)                             # past value: anything (here: far off)
    hint = _hint(got, args)
    assert checking.PIXEL_MISREAD in hint
    assert "bottom-left corner's weight fy (1 - fx) on the top-right (x0 + 1, y0) pixel (row + 1)" in hint


def test_one_corner_weighed_wrong_in_each_vector_is_named():
    """D = 24 in vectors of 8 channels: in vector b, every sample's top-left pixel weighed with the top-left weight
    of sample b (a lane's own sample's weight, not shuffled); the other corners right."""
    kw = dict(checking._CASES_SIM[1][1], borders=0.0)                 # uniform: every sample touches the map
    args = random_problem(**kw, rng=np.random.default_rng(14))
    corners = _corners(args)
    mine = {}
    for n, q, m, j, weights, rows in corners:
        mine[n, q, m, j] = weights[0]
    got = sample(*args)
    D = kw["D"]
    for b in range(D // 8):
        wrong = [(n, q, m, j, [mine.get((n, q, m, b), 0.0)] + weights[1:], rows)
                 for n, q, m, j, weights, rows in corners]
        got.reshape(*got.shape[:2], -1, D)[..., 8 * b:8 * b + 8] = \
            _blend(args, wrong).reshape(*got.shape[:2], -1, D)[..., 8 * b:8 * b + 8]
    hint = _hint(np.where(np.isnan(got), 1e3, got), args)              # past value: anything (here: far off)
    assert "only the top-left (x0, y0) corner's part is wrong" in hint and checking.ONE_CORNER in hint
    assert "vectors of 8 channels" in hint


def test_no_mistake_is_named_that_cannot_tell_the_wrong_outputs():
    """A known mistake whose own sampling is unknown (reads past value) on every wrong output explains nothing:
    one item wrong, one where testing the lower neighbour with <= H would read past the end of value, the rest
    right, and that mistake's sampling the same as the right one on them (a draw of the D = 40 case)."""
    kw = checking._CASES_SIM[2][1]
    for seed in range(9, 200):                                          # (seeds 9, 27, 53, 57 have it)
        args = random_problem(**kw, rng=np.random.default_rng(seed))
        ref = sample(*args).reshape(kw["N"], kw["Lq"], kw["M"], kw["D"])
        alt = sample(*args, edge_le="y").reshape(ref.shape)
        unknown = np.isnan(alt).any(axis=-1)                                 # [N, Lq, M]
        if unknown.any() and unknown.mean() <= 0.5 and np.mean(np.isclose(alt[~unknown], ref[~unknown])) >= 0.995:
            break
    else:
        pytest.fail("no draw had the pattern")
    got = ref.copy()
    got[tuple(np.argwhere(unknown)[0])] += 0.5
    got = got.reshape(kw["N"], kw["Lq"], -1)
    assert "y0 + 1 <= H" in checking.explain(got, args)                # (what the rule said before it asked)
    assert "y0 + 1 <= H" not in _hint(got, args)


@pytest.mark.parametrize("seed", [15, 16])
def test_every_grading_item_touches_the_map(seed):
    """The grader's cases give every item (n, q, m) a sample that touches the map, and change no other."""
    for _, kw in checking.cases():
        before = random_problem(**kw, rng=np.random.default_rng(seed))
        after = checking.every_item_on_the_map(before, np.random.default_rng(seed))
        shapes = np.asarray(before[1], np.float64)
        pixel = lambda loc: loc.astype(np.float64) * shapes[:, ::-1][:, None, :] - 0.5
        edge = shapes[:, ::-1][:, None, :]
        touches = lambda loc: ((pixel(loc) > -0.9) & (pixel(loc) < edge - 0.1)).all(-1).any((-2, -1))
        assert touches(after[3]).all()
        had = touches(before[3])
        assert np.array_equal(after[3][had], before[3][had])
        for x, y in zip(before[:3] + before[4:], after[:3] + after[4:]):
            assert x is y
