"""The deformable attention checker's hints from the pattern of the wrong outputs (cudabook/msda/checking.py:
which_part, explain): outputs made wrong in one known way, on the grader's own small cases, must get the hint that
names that way (a level, a point or a corner left out or counted twice, the heads that are wrong, the border side
that the wrong items share, (int)x for floorf, a right neighbour tested with <= W), and the right output none."""
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


def test_the_cases_run_every_path():
    """Rung 04's producer takes an item's samples in rounds of 32 lanes: a case with L * P > 32 in the simulator's
    cases and the GPU's; rung 05's region has two paths (branchless or not): the grader runs both."""
    from cudabook.msda import s05_lane_groups as s05
    for simulator in (True, False):
        assert any(len(kw["levels"]) * kw["P"] > 32 for _, kw in checking.cases(simulator)), simulator
    assert {v.get("branchless", True) for v in s05.GRADING_VARIANTS} == {True, False}
    assert s05.ASYNC_COPIES is False
