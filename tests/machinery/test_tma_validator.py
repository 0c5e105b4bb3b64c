"""cudabook.tma: the tensor-map validator on CPU, and (on a Hopper GPU) against the driver."""

import ctypes
import pathlib

import numpy as np
import pytest

from cudabook.tma import (
    CASES,
    HOST_ONLY_RULES,
    PROBES,
    TensorMapError,
    check_tiled,
    driver_args,
    encode_tiled,
    tensor_map_bytes,
)


def _verdict(kwargs):
    try:
        check_tiled(**kwargs)
    except TensorMapError as exc:
        return exc.rule
    return None


def _message(**kwargs):
    with pytest.raises(TensorMapError) as excinfo:
        check_tiled(**kwargs)
    return str(excinfo.value)


# ---------------------------------------------------------------- CPU


@pytest.mark.parametrize("description, kwargs, expected", CASES, ids=[c[0] for c in CASES])
def test_case_verdict(description, kwargs, expected):
    if expected is None:
        assert check_tiled(**kwargs) is None
    else:
        with pytest.raises(TensorMapError) as excinfo:
            check_tiled(**kwargs)
        assert excinfo.value.rule == expected, str(excinfo.value)


def test_cases_cover_every_rule_and_pass_somewhere():
    rules = {expected for _, _, expected in CASES}
    assert {
        "unknown_option", "dtype_unsupported", "rank_mismatch", "rank_range", "interleave_rank",
        "address_alignment", "dim_range", "stride_negative", "inner_stride_dense", "stride_multiple_16",
        "stride_multiple_32", "stride_too_large", "box_range", "box_inner_multiple_16",
        "box_inner_swizzle_span", "box_total_bytes", "element_stride_range", "oob_nan_needs_float", None,
    } <= rules
    assert len({c[0] for c in CASES}) == len(CASES), "descriptions are test ids: keep them unique"


def test_probes_have_the_stated_validator_verdict():
    for description, kwargs, expected in PROBES:
        assert _verdict(kwargs) == expected, description


def test_error_is_a_value_error():
    assert issubclass(TensorMapError, ValueError)
    with pytest.raises(ValueError):
        check_tiled("float32", (256, 257), (1028, 4), (32, 32))


@pytest.mark.parametrize(
    "kwargs, numbers",
    [
        (dict(dtype="float32", shape=(256, 257), strides=(1028, 4), box=(32, 32)), ["1028", "1040", "16"]),
        (dict(dtype="float32", shape=(512, 512), strides=(2048, 4), box=(257, 32)), ["257", "256"]),
        (dict(dtype="float32", shape=(256, 256), strides=(1024, 4), box=(256, 256)), ["262144", "256 KiB", "227 KiB"]),
        (dict(dtype="float32", shape=(4, 2**32 + 1), strides=(2**34 + 16, 4), box=(4, 64)), ["4294967297"]),
        (dict(dtype="float32", shape=(256, 256), strides=(1024, 4), box=(32, 32), address=4), ["0x4", "16"]),
        (dict(dtype="float32", shape=(256, 256), strides=(1024, 4), box=(32, 2)), ["2 x 4 bytes = 8 bytes", "use an inner box of 4"]),
        (dict(dtype="float32", shape=(256, 256), strides=(1024, 4), box=(32, 64), swizzle="128B"), ["256 bytes", "128 bytes", "32 float32"]),
        (dict(dtype="float32", shape=(256, 256), strides=(1024, 4), box=(32, 32), element_strides=(9, 1)), ["= 9", "1..8"]),
        (dict(dtype="int32", shape=(64, 64), strides=(256, 4), box=(16, 16), oob_fill="nan"), ["int32", "nan"]),
        (dict(dtype="float32", shape=(256, 256), strides=(2048, 8), box=(32, 32)), ["8 bytes", "4 bytes"]),
        (dict(dtype="float32", shape=(2,) * 5 + (16,), strides=(2048, 1024, 512, 256, 64, 4), box=(1,) * 5 + (16,)), ["rank 6", "1..5"]),
        (dict(dtype="float16", shape=(64, 16), strides=(32, 2), box=(64, 16), interleave="16B"), ["rank 2", ">= 3"]),
        (dict(dtype="float16", shape=(4, 64, 16), strides=(3072, 48, 2), box=(1, 64, 16), interleave="32B", swizzle="32B"), ["48", "32", "64 bytes"]),
        (dict(dtype="int8", shape=(64, 64), strides=(64, 1), box=(16, 16)), ["int8", "uint8", "float32", "bfloat16"]),
    ],
)
def test_messages_name_the_numbers(kwargs, numbers):
    message = _message(**kwargs)
    for number in numbers:
        assert number in message, message


def test_unknown_option_strings_list_the_allowed_values():
    base = dict(dtype="float32", shape=(256, 256), strides=(1024, 4), box=(32, 32))
    for keyword, bad, allowed in [
        ("swizzle", "256B", "'none', '32B', '64B', '128B'"),
        ("interleave", "8B", "'none', '16B', '32B'"),
        ("oob_fill", "zero", "'none', 'nan'"),
        ("l2_promotion", "512B", "'none', '64B', '128B', '256B'"),
    ]:
        with pytest.raises(TensorMapError) as excinfo:
            check_tiled(**base, **{keyword: bad})
        assert excinfo.value.rule == "unknown_option"
        assert keyword in str(excinfo.value) and allowed in str(excinfo.value)
    assert check_tiled(**base, swizzle="128b") is None  # spelling is forgiven


def test_driver_args_are_innermost_first():
    args = driver_args("float32", (4, 8, 16), (1024, 128, 4), (2, 4, 16), 256,
                       element_strides=(2, 1, 1), swizzle="64B", oob_fill="nan")
    assert list(args) == ["tensorDataType", "tensorRank", "globalAddress", "globalDim", "globalStrides",
                          "boxDim", "elementStrides", "interleave", "swizzle", "l2Promotion", "oobFill"]
    assert args["tensorDataType"] == "CU_TENSOR_MAP_DATA_TYPE_FLOAT32"
    assert args["tensorRank"] == 3
    assert args["globalAddress"] == 256
    assert args["globalDim"] == [16, 8, 4]
    assert args["globalStrides"] == [128, 1024]  # the innermost stride is implicit
    assert args["boxDim"] == [16, 4, 2]
    assert args["elementStrides"] == [1, 1, 2]
    assert args["swizzle"] == "CU_TENSOR_MAP_SWIZZLE_64B"
    assert args["interleave"] == "CU_TENSOR_MAP_INTERLEAVE_NONE"
    assert args["l2Promotion"] == "CU_TENSOR_MAP_L2_PROMOTION_L2_128B"
    assert args["oobFill"] == "CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA"


def test_rank1_gets_one_dummy_stride():
    assert check_tiled("float32", (1000,), (4,), (256,)) is None
    assert driver_args("float32", (1000,), (4,), (256,))["globalStrides"] == [4000]
    assert driver_args("float32", (1001,), (4,), (128,))["globalStrides"] == [4016]  # kept a multiple of 16


def test_bfloat16_by_name():
    assert check_tiled("bfloat16", (64, 64), (128, 2), (16, 16), oob_fill="nan") is None
    assert driver_args("bfloat16", (64, 64), (128, 2), (16, 16))["tensorDataType"] == "CU_TENSOR_MAP_DATA_TYPE_BFLOAT16"


def test_bfloat16_from_ml_dtypes():
    ml_dtypes = pytest.importorskip("ml_dtypes")
    a = np.zeros((64, 64), dtype=ml_dtypes.bfloat16)
    assert check_tiled(a.dtype, a.shape, a.strides, (16, 16), oob_fill="nan") is None
    assert driver_args(a.dtype, a.shape, a.strides, (16, 16))["tensorDataType"] == "CU_TENSOR_MAP_DATA_TYPE_BFLOAT16"
    with pytest.raises(TensorMapError) as excinfo:  # 4 bf16 = 8 bytes
        check_tiled(ml_dtypes.bfloat16, a.shape, a.strides, (16, 4))
    assert excinfo.value.rule == "box_inner_multiple_16"


def test_numpy_arrays_describe_themselves():
    a = np.zeros((256, 256), np.float32)
    assert check_tiled(a.dtype, a.shape, a.strides, (32, 32)) is None
    b = np.zeros((4, 64, 64), np.float16)
    assert check_tiled(b.dtype, b.shape, b.strides, (1, 32, 64), swizzle="128B") is None


def test_sliced_views():
    padded = np.zeros((256, 260), np.float32)[:, :257]  # 257 columns in rows padded to 1040 bytes
    assert padded.strides == (1040, 4)
    assert check_tiled(padded.dtype, padded.shape, padded.strides, (32, 32)) is None
    tight = np.zeros((256, 257), np.float32)
    assert _verdict(dict(dtype=tight.dtype, shape=tight.shape, strides=tight.strides, box=(32, 32))) == "stride_multiple_16"
    every_other = np.zeros((256, 256), np.float32)[:, ::2]
    assert _verdict(dict(dtype=every_other.dtype, shape=every_other.shape, strides=every_other.strides, box=(32, 32))) == "inner_stride_dense"
    transposed = np.zeros((256, 256), np.float32).T
    assert _verdict(dict(dtype=transposed.dtype, shape=transposed.shape, strides=transposed.strides, box=(32, 32))) == "inner_stride_dense"
    reversed_rows = np.zeros((256, 256), np.float32)[::-1]
    assert _verdict(dict(dtype=reversed_rows.dtype, shape=reversed_rows.shape, strides=reversed_rows.strides, box=(32, 32))) == "stride_negative"


def test_encode_validates_before_touching_the_driver():
    # No driver is needed to be told what is wrong.
    with pytest.raises(TensorMapError) as excinfo:
        encode_tiled("float32", (256, 257), (1028, 4), (32, 32), 0)
    assert excinfo.value.rule == "stride_multiple_16"


def test_driver_refusal_shows_the_whole_call(monkeypatch):
    from cuda.bindings import driver as drv

    seen = []

    def fake_encode(*args):
        seen.append(args)
        return drv.CUresult.CUDA_ERROR_INVALID_VALUE, None

    monkeypatch.setattr(drv, "cuTensorMapEncodeTiled", fake_encode)
    with pytest.raises(TensorMapError) as excinfo:
        encode_tiled("float32", (256, 257), (1028, 4), (32, 32), 0x1000, validate=False)
    error = excinfo.value
    assert error.rule == "driver" and error.driver_error == "CUDA_ERROR_INVALID_VALUE"
    message = str(error)
    assert "CUDA_ERROR_INVALID_VALUE" in message
    assert "globalDim=[257, 256], globalStrides=[1028], boxDim=[32, 32]" in message
    assert "globalAddress=0x1000" in message
    assert "stride 1028" in message  # check_tiled's opinion is appended
    (args,) = seen
    assert isinstance(args[1], drv.cuuint32_t)
    assert all(isinstance(v, drv.cuuint64_t) for v in args[3] + args[4])
    assert all(isinstance(v, drv.cuuint32_t) for v in args[5] + args[6])


def test_tensor_map_bytes_reads_128_bytes():
    raw = (ctypes.c_ubyte * 128)(*range(128))

    class FakeMap:
        def getPtr(self):
            return ctypes.addressof(raw)

    assert tensor_map_bytes(FakeMap()) == bytes(range(128))


# ---------------------------------------------------------------- GPU


def _no_gpu_reason():
    """None if a CUDA driver and a GPU are usable, else why not."""
    try:
        from cuda.bindings import driver as drv
    except ImportError as exc:
        return f"cuda.bindings is not importable: {exc}"
    try:
        (err,) = drv.cuInit(0)
    except Exception as exc:  # no libcuda.so: the bindings raise on first use
        return f"no CUDA driver: {type(exc).__name__}: {exc}"
    if err != drv.CUresult.CUDA_SUCCESS:
        return f"cuInit(0) returned {err.name}"
    err, count = drv.cuDeviceGetCount()
    if err != drv.CUresult.CUDA_SUCCESS or count == 0:
        return f"no CUDA device (cuDeviceGetCount: {getattr(err, 'name', err)}, {count})"
    return None


def _driver_verdict(kwargs, base):
    """'accepts' or 'rejects'; any other failure (no context, ...) is raised."""
    args = dict(kwargs, address=base + kwargs.get("address", 0))
    try:
        encode_tiled(**args, validate=False)
    except TensorMapError as exc:
        if exc.rule == "driver" and exc.driver_error == "CUDA_ERROR_INVALID_VALUE":
            return "rejects"
        raise
    except (ValueError, TypeError):  # the bindings refuse, e.g. a 6th axis
        return "rejects"
    return "accepts"


@pytest.mark.gpu
@pytest.mark.hopper
def test_validator_agrees_with_the_driver():
    reason = _no_gpu_reason()
    if reason:
        pytest.skip(reason)
    from cuda.bindings import driver as drv
    from cuda.core import Device

    device = Device(0)
    device.set_current()
    if device.compute_capability.major < 9:
        pytest.skip(f"tensor maps need compute capability 9.0+, this GPU is {device.compute_capability}")

    err, base = drv.cuMemAlloc(1 << 20)
    assert err == drv.CUresult.CUDA_SUCCESS, err
    try:
        base = int(base)
        sent = [c for c in CASES if c[2] not in HOST_ONLY_RULES]
        disagreements = []
        for description, kwargs, expected in sent:
            validator = "accepts" if expected is None else "rejects"
            driver = _driver_verdict(kwargs, base)
            if driver != validator:
                disagreements.append(f"{description}: validator {validator} ({expected}), driver {driver}")
        print(f"validator agrees with driver on {len(sent) - len(disagreements)}/{len(sent)} cases "
              f"({len(CASES) - len(sent)} host-only cases not sent)")
        for description, kwargs, expected in PROBES:
            print(f"probe: {description}: validator {expected or 'accepts'}, driver {_driver_verdict(kwargs, base)}")

        first_valid = next(kw for _, kw, expected in CASES if expected is None)
        tmap = encode_tiled(**dict(first_valid, address=base + first_valid.get("address", 0)))
        assert len(tensor_map_bytes(tmap)) == 128
    finally:
        drv.cuMemFree(base)
    assert not disagreements, "\n".join(disagreements)


# ---------------------------------------------------------------- recorded driver verdicts
RECORDED = pathlib.Path(__file__).resolve().parents[2] / "results" / "tma" / "driver_verdicts.json"


def test_validator_agrees_with_the_recorded_driver_verdicts():
    """check_tiled against what the driver said on a GPU (tools/record_tma_verdicts.py), not against the
    expectations written beside the cases: every case the driver sees has a recorded verdict, and agrees."""
    import json
    record = json.loads(RECORDED.read_text())
    disagreements, missing = [], []
    for description, kwargs, expected in CASES:
        if expected in HOST_ONLY_RULES:
            continue
        driver = record["cases"].get(description)
        if driver is None:
            missing.append(description)
            continue
        try:
            check_tiled(**kwargs)
            ours = "accepts"
        except TensorMapError:
            ours = "rejects"
        if ours != driver:
            disagreements.append(f"{description}: check_tiled {ours}, the driver {driver}")
    assert not missing, (f"no recorded driver verdict for {missing}: run tools/record_tma_verdicts.py on a "
                         f"Hopper GPU")
    assert not disagreements, f"({record['gpu']}, driver {record['driver']}):\n" + "\n".join(disagreements)
