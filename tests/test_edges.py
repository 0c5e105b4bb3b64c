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
