"""The resampling checker's readings that must not change with the draw (issue 27): the grader's cases always hold
targets past the end of every row, and a target blended with the wrong weight gets the same hint whether it is
wrong in every channel or, by chance, right in one."""
import numpy as np

from cudabook import resample
from cudabook.resample import checking, inputs


def test_every_grading_case_has_targets_past_the_end():
    is_sorted = {name: flag for name, flag, *_ in resample._CASES}
    for name, (times, feats, targets), _ in resample.grading_cases():
        past = (targets > times[:, -1:]).sum(axis=1)
        assert (past >= min(2, targets.shape[1])).all(), name
        if is_sorted[name]:
            assert (np.diff(targets, axis=1) >= 0).all(), name


def test_past_the_end_moves_only_what_it_must():
    times, feats, targets = resample.random_problem(3, 40, 25, 4, rng=np.random.default_rng(1), outside=0.0)
    after = checking.past_the_end((times, feats, targets), rng=np.random.default_rng(2))
    assert after[0] is times and after[1] is feats
    moved = after[2] != targets
    assert (moved.sum(axis=1) == 2).all()                              # (no target was past the end before)
    assert np.array_equal(after[2][:, :-2], targets[:, :-2])           # sorted: the two largest moved
    assert (after[2][:, -2:] > times[:, -1:]).all()


def test_a_wrong_weight_gets_one_hint_whether_or_not_a_channel_passes():
    """Two channels, one near zero: targets blended with other targets' weights. The least-squares weight of such a
    target is off by the bf16 rounding of its large channel, which moves the small channel's fit by more than its
    own rounding; it is still read as a blend of two neighbouring rows, and said as the wrong-in-every-channel
    reading is."""
    times = np.array([[0.0, 1.0]], np.float32)
    feats = inputs.to_bf16(np.array([[[-1.625, -4.71875], [0.5078125, 0.44335938]]]))
    targets = np.linspace(0.05, 0.95, 12, dtype=np.float32)[None]
    ref, scale = inputs.reference_with_scale(times, feats, targets)
    f = feats.astype(np.float64)
    w = targets.astype(np.float64)[0].copy()
    w[6:] = 0.7575                                                     # the last six: another target's weight
    got = inputs.to_bf16(f[0, 0] + w[:, None] * (f[0, 1] - f[0, 0]))[None]
    verdict = resample.compare(got, ref, scale, targets=targets, times=times, feats=feats)
    assert not verdict.ok
    assert "6 of the 12 targets are wrong" in verdict.message and "w = 0 gives row lo" in verdict.message
    rows_t = (np.abs(got.astype(np.float64) - ref) > 1e-2).any(axis=2)
    assert checking._other_blends(got.astype(np.float64), rows_t, targets, times, feats)
