"""Edges that must get a clear error, not a quiet wrong answer: stage names that are not stage names, and
tensor-map descriptions with the wrong kind of value, each naming its rule."""
import pytest

from cudabook import gemm, resample, tma


@pytest.mark.parametrize("track", [resample, gemm])
@pytest.mark.parametrize("name", [True, False, None, 3.0, "٣", "3x", ""])
def test_a_stage_name_must_be_a_stage_name(track, name):
    with pytest.raises(ValueError, match="stage"):
        track.stage(name)


@pytest.mark.parametrize("track", [resample, gemm])
def test_a_stage_by_number(track):
    assert track.stage(1) is track.stage("01") is track.stage(track.STAGES[0])


GOOD = dict(dtype="bfloat16", shape=(64, 64), strides=(128, 2), box=(8, 8))


@pytest.mark.parametrize("change, rule, error", [
    (dict(dtype=None), "dtype_unsupported", tma.TensorMapError),
    (dict(shape=(64.0, 64)), "integer_values", TypeError),
    (dict(shape=(True, 64)), "integer_values", TypeError),
    (dict(box=(8, False)), "integer_values", TypeError),
    (dict(address=-16), "address_range", ValueError),
    (dict(address=2**64), "address_range", ValueError),
    (dict(address=16.0), "integer_values", TypeError),
])
def test_check_tiled_names_the_rule(change, rule, error):
    args = {**GOOD, **change}
    with pytest.raises(error) as caught:
        tma.check_tiled(args.pop("dtype"), args.pop("shape"), args.pop("strides"), args.pop("box"), **args)
    assert caught.value.rule == rule


def test_a_misaligned_16_byte_access_fails_in_the_simulator_as_on_a_gpu():
    """A learner's vector load at a word index that is not a multiple of 4 (16 bytes) must fail, as it does on a
    GPU ("misaligned address"), not quietly read four words in the simulator."""
    import cudabook
    import numpy as np
    from numba import cuda

    from cudabook.resample.s03_coalesced import load_u32x4
    from cudabook.simalign import MisalignedAccess
    if not cudabook.SIMULATOR:
        pytest.skip("on a GPU the misaligned load is the hardware's error, which ends the process's context")

    @cuda.jit
    def read(a, out, i):
        x0, x1, x2, x3 = load_u32x4(a, 0, 0, i)
        out[0] = x0

    a = cuda.to_device(np.arange(16, dtype=np.uint32).reshape(1, 1, 16))
    out = cuda.device_array(1, np.uint32)
    read[1, 1](a, out, 4)
    assert out.copy_to_host()[0] == 4
    with pytest.raises(MisalignedAccess, match="misaligned address"):
        read[1, 1](a, out, 2)


@pytest.mark.parametrize("stage, params, message", [
    ("01_naive", {"threads": 0}, "threads must be an integer in 1..1024"),
    ("01_naive", {"threads": 2000}, "threads must be an integer in 1..1024"),
    ("05_double_buffered", {"blocks_per_sm": 0}, "05_double_buffered: blocks_per_sm must be an integer >= 1"),
    ("04_smem_windows", {"blocks": -1}, "blocks must be an integer >= 0"),
])
def test_launch_parameters_no_gpu_accepts_are_refused(stage, params, message):
    st, sf, tt = resample.random_problem(1, 10, 5, 4)
    with pytest.raises(ValueError, match=message):
        resample.run(stage, st, sf, tt, **params)


def test_a_batch_too_tall_for_the_grid_is_refused_before_launch():
    from cudabook.resample import s01_naive
    from cudabook.kit.params import check_settings
    with pytest.raises(ValueError, match="at most 65,535"):
        check_settings(s01_naive.NAME, threads=128, grid_y=70_000)


def test_times_whose_differences_overflow_float32_are_refused_not_answered_with_nan():
    import numpy as np
    feats = resample.to_bf16(np.ones((1, 2, 1)))
    with pytest.raises(resample.InputError, match="batch row 0 span 6e\\+38"):
        resample.validate(np.array([[-3e38, 3e38]], np.float32), feats, np.array([[1e38]], np.float32))
    out = resample.run("01_naive", np.array([[0, 3e38]], np.float32), feats, np.array([[1e38]], np.float32))
    assert float(out[0, 0, 0]) == 1.0          # a wide but representable span still works
