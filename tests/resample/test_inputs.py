"""Bad input gets a ValueError that names the array, the rule and the place."""
import numpy as np
import pytest

from cudabook import resample
from cudabook.resample import InputError


def good(B=2, S=5, T=7, D=3):
    return resample.random_problem(B, S, T, D, rng=0)


def test_input_error_is_a_value_error():
    assert issubclass(InputError, ValueError)


@pytest.mark.parametrize("change, pattern", [
    (lambda st, sf, tt: (st.astype(np.float64), sf, tt), r"src_times must be float32, got float64.*astype\(np.float32\)"),
    (lambda st, sf, tt: (st, sf, tt.astype(np.int32)), r"tgt_times must be float32, got int32"),
    (lambda st, sf, tt: (st, sf.astype(np.float32), tt), r"src_feats must be bfloat16, got float32.*ml_dtypes.bfloat16"),
    (lambda st, sf, tt: (st[0], sf, tt), r"src_times must be 2-D \[B, S\], got shape \(5,\)"),
    (lambda st, sf, tt: (st, sf[0], tt), r"src_feats must be 3-D \[B, S, D\]"),
    (lambda st, sf, tt: (st, sf[:, :4], tt), r"src_feats has shape \(2, 4, 3\) but src_times is \(2, 5\)"),
    (lambda st, sf, tt: (st, sf, tt[:1]), r"tgt_times has 1 batch rows but src_times has 2"),
    (lambda st, sf, tt: (st[:, :1], sf[:, :1], tt), r"S = 1 .* needs S >= 2"),
    (lambda st, sf, tt: (st, sf[:, :, :0], tt), r"D = 0 channels"),
])
def test_bad_shapes_and_dtypes(change, pattern):
    with pytest.raises(InputError, match=pattern):
        resample.validate(*change(*good()))


def test_not_increasing_names_row_and_index():
    st, sf, tt = good()
    st[1, 3] = st[1, 2]
    with pytest.raises(InputError, match=r"row 1 has src_times\[1, 2\] = .* followed by src_times\[1, 3\]"):
        resample.run("01_naive", st, sf, tt)


@pytest.mark.parametrize("name", ["src_times", "tgt_times"])
@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_nan_and_inf_times_name_the_place(name, bad):
    st, sf, tt = good()
    arr = st if name == "src_times" else tt
    arr[1, 2] = bad
    with pytest.raises(InputError, match=rf"{name}\[1, 2\] is .*finite"):
        resample.run("01_naive", st, sf, tt)


def test_unknown_stage_lists_the_stages():
    with pytest.raises(ValueError, match=r"unknown stage '99_magic'; the stages are: 01_naive"):
        resample.run("99_magic", *good())


def test_reference_is_np_interp():
    st, sf, tt = resample.random_problem(3, 9, 30, 4, sorted_targets=False)
    ref = resample.reference(st, sf, tt)
    f = sf.astype(np.float64)
    for b in range(3):
        for d in range(4):
            expected = np.interp(tt[b].astype(np.float64), st[b].astype(np.float64), f[b, :, d])
            np.testing.assert_allclose(ref[b, :, d], expected, rtol=1e-12, atol=1e-12)

