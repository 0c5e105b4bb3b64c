"""The checker itself: tolerance, NaN, poison, diagnostics."""
import numpy as np
import pytest

from cudabook import resample
from cudabook.resample import checking as check
from cudabook.resample.inputs import BF16, reference_with_scale


def problem():
    st, sf, tt = resample.random_problem(2, 11, 25, 6)
    ref, scale = reference_with_scale(st, sf, tt)
    return ref, scale


def test_the_correctly_rounded_answer_passes():
    ref, scale = problem()
    assert check.compare(ref.astype(np.float32).astype(BF16), ref, scale).ok


def test_a_nan_never_passes():
    ref, scale = problem()
    got = ref.astype(np.float32).astype(BF16)
    got[1, 3, 2] = np.nan
    v = check.compare(got, ref, scale)
    assert not v.ok and v.wrong == 1 and v.nan == 1 and "out[1, 3, 2]" in v.message


def test_one_bf16_step_off_fails():
    ref, scale = problem()
    bits = ref.astype(np.float32).astype(BF16).view(np.uint16).copy()
    # the largest |ref| (where one bf16 step dwarfs the 8 fp32 eps x scale slack) whose bf16 value is not at
    # the edge of its binade, so that both neighbours are one full step away (next to a power of two, the step
    # is half the size on one side, and the tolerance takes the ulp of the larger value)
    inner = ((bits & 0x7F) >= 2) & ((bits & 0x7F) <= 125)
    at = np.unravel_index(np.argmax(np.where(inner, np.abs(ref), -1.0)), ref.shape)
    r = float(bits.view(BF16)[at])
    up = (r >= ref[at]) == (r > 0)                  # step away from ref (+1 in the bits moves a positive value up)
    bits[at] = bits[at] + np.uint16(1) if up else bits[at] - np.uint16(1)
    v = check.compare(bits.view(BF16), ref, scale)
    assert not v.ok and v.wrong == 1


def test_wrong_shape_fails():
    ref, scale = problem()
    assert not check.compare(np.zeros((1, 1, 1), BF16), ref, scale).ok


def test_unwritten_output_is_caught_by_the_poison():
    def writes_nothing(p):
        pass
    v = check.check_launch(writes_nothing, 1, 5, 9, 2)
    assert not v.ok and v.nan == v.total and "no output was written" in v.message


def test_bf16_half_ulp():
    assert check.bf16_half_ulp(1.0) == 2.0 ** -8
    assert check.bf16_half_ulp(1.5) == 2.0 ** -8
    assert check.bf16_half_ulp(2.0) == 2.0 ** -7


def test_rows_wrong_only_at_their_start_point_at_a_store_past_the_end():
    ref, scale = problem()
    got = ref.astype(np.float32).astype(BF16)
    got[0, 4, :2] = 9.0                       # the first channels of two targets overwritten, the rest right
    got[1, 17, :3] = -9.0
    v = check.compare(got, ref, scale)
    assert not v.ok and "only the first channels of 2 target(s) are wrong" in v.message
    got[1, 17, :] = -9.0                      # a whole row wrong: not this pattern any more
    assert "first channels" not in check.compare(got, ref, scale).message


@pytest.mark.parametrize("shape", [(3, 5), (2, 700, 513), (1, 1, 300000), (4, 3, 2, 70000), (0, 4)])
def test_outside_works_in_blocks_and_agrees_with_the_whole_array_formula(shape):
    from cudabook import verdict
    rng = np.random.default_rng()
    ref = rng.normal(size=shape) * 10.0 ** rng.integers(-3, 3, size=shape)
    slack = np.abs(rng.normal(size=shape[-1:])) * 1e-3           # broadcasts along the last axis
    got = ref + rng.normal(size=shape) * np.abs(ref) * 2.0 ** -8
    got[rng.random(shape) < 0.01] = np.nan
    got[rng.random(shape) < 0.01] = np.inf
    if ref.size:                                                 # one surely right, one surely wrong
        got.flat[0], got.flat[-1] = ref.flat[0], ref.flat[-1] + 1 + 10 * abs(ref.flat[-1])
    whole = ~(np.abs(got - ref) <= verdict.tolerance(ref, slack, got))
    bad = verdict.outside(got, ref, slack, chunk=1000)
    assert bad.shape == ref.shape and bad.dtype == bool
    assert np.array_equal(bad, whole)
    assert bad[np.isnan(got)].all() and bad[np.isinf(got)].all()
    assert ref.size == 0 or (not bad.flat[0] and bad.flat[-1])


def test_outside_worked_in_blocks_on_threads_is_the_tolerance_itself():
    """verdict.outside's fast path (the tolerance from |ref| first, from |got| only where that fails; blocks on
    threads) marks exactly what the plain formula marks: NaN, infinities, zeros, bf16-rounded values, values far
    off, and magnitudes from subnormal to huge, with an array slack, none, and a scalar one."""
    from cudabook import verdict
    rng = np.random.default_rng(7)
    n = 120_000
    ref = rng.standard_normal(n) * 10.0 ** rng.integers(-40, 40, n)
    ref[rng.random(n) < 0.05] = 0
    got = ref * (1 + rng.standard_normal(n) * 10.0 ** rng.integers(-9, -1, n))
    for value, share in ((np.nan, 0.01), (np.inf, 0.01), (-np.inf, 0.01), (0.0, 0.02)):
        got[rng.random(n) < share] = value
    near = rng.random(n) < 0.1
    with np.errstate(over="ignore"):                       # huge values become float32 infinities: fine
        got[near] = (ref[near] * 1.001).astype(np.float32)
    slack = np.abs(rng.standard_normal(n)) * 10.0 ** rng.integers(-12, -2, n)
    for s in (slack, 0.0, 1e-3):
        plain = ~(np.abs(got - ref) <= verdict.tolerance(ref, s, got))
        blocked = verdict.outside(got.reshape(300, 400), ref.reshape(300, 400),
                                  s if np.ndim(s) == 0 else s.reshape(300, 400), chunk=1 << 12)
        assert np.array_equal(blocked.ravel(), plain)


def test_an_output_of_zeros_is_named_as_zeros_not_as_integers():
    """Zeros where every reference is negative: saturating int(reference) into uint16 gives 0 too, and the
    integer-bits hint used to take it (a review's wrong kernel); the hint says zeros were stored."""
    ref, scale = problem()
    ref = -np.abs(ref) - 1.0
    v = check.compare(np.zeros(ref.shape, BF16), ref, scale)
    assert not v.ok and "every output is zero" in v.message and "converted to integers" not in v.message
