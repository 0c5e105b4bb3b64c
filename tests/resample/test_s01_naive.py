"""Stage 01 against the reference: random inputs and every edge case, in the simulator and on a GPU."""
import numpy as np
import pytest

from cudabook import resample
from cudabook.resample import checking as check
from cudabook.resample import s01_naive

CASES = [  # B, S, T, D, sorted
    (2, 13, 40, 5, True), (2, 13, 40, 5, False), (1, 2, 20, 1, True), (3, 7, 33, 3, False), (1, 9, 0, 4, True),
]


@pytest.mark.parametrize("B,S,T,D,is_sorted", CASES)
def test_random(B, S, T, D, is_sorted):
    v = check.check_launch(s01_naive.launch, B, S, T, D, sorted_targets=is_sorted)
    assert v.ok, str(v)


def test_targets_on_knots_and_outside_the_range():
    st, sf, _ = resample.random_problem(2, 8, 1, 3)
    tt = np.concatenate([st, st[:, :1] - 5, st[:, -1:] + 5, (st[:, :-1] + st[:, 1:]) / 2], axis=1).astype(np.float32)
    v = check.check_on(s01_naive.launch, st, sf, tt)
    assert v.ok, str(v)
    out = resample.run("01_naive", st, sf, tt)
    assert np.array_equal(out[:, :8].view(np.uint16), sf.view(np.uint16))          # exact knots: exact values


def test_run_returns_bf16_of_the_right_shape():
    st, sf, tt = resample.random_problem(2, 5, 7, 3)
    out = resample.run("01_naive", st, sf, tt)
    assert out.shape == (2, 7, 3) and out.dtype == resample.inputs.BF16


@pytest.mark.gpu
@pytest.mark.parametrize("B,S,T,D,is_sorted", [(3, 777, 1500, 1, True), (3, 777, 1500, 129, False),
                                               (2, 4096, 4096, 256, True), (64, 4096, 4096, 256, True)])
def test_gpu_sizes(B, S, T, D, is_sorted):
    v = check.check_launch(s01_naive.launch, B, S, T, D, sorted_targets=is_sorted)
    assert v.ok, str(v)
