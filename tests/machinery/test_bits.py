"""bf16 conversions on the device, bit for bit: round to nearest with ties to EVEN (not up), NaN stays NaN,
infinities and overflow as IEEE says, and widening exact. Runs in the simulator and on a GPU (same kernel)."""
import ml_dtypes
import numpy as np
import pytest
from numba import cuda

from cudabook.bits import bf16_to_f32, f32_to_bf16


@cuda.jit
def _narrow(x, out):
    i = cuda.grid(1)
    while i < x.shape[0]:
        out[i] = f32_to_bf16(x[i])
        i += cuda.gridsize(1)


@cuda.jit
def _widen(b, out):
    i = cuda.grid(1)
    while i < b.shape[0]:
        out[i] = bf16_to_f32(b[i])
        i += cuda.gridsize(1)


def narrow(values):
    x = np.asarray(values, np.float32)
    out = cuda.device_array(x.shape, np.uint16)
    _narrow[1, 128](cuda.to_device(x), out)
    return out.copy_to_host()


def f32(bits):
    return np.array([bits], np.uint32).view(np.float32)[0]


@pytest.mark.parametrize("value, bits, why", [
    (f32(0x3F808000), 0x3F80, "1 + 2^-8: a tie between 1 (even) and 1 + 2^-7: down to the even one"),
    (f32(0x3F818000), 0x3F82, "1 + 3 * 2^-8: a tie between 1 + 2^-7 (odd) and 1 + 2^-6 (even): up"),
    (f32(0xBF808000), 0xBF80, "the same tie, negative: to even"),
    (f32(0x3F808001), 0x3F81, "just above the tie: up"),
    (f32(0x3F807FFF), 0x3F80, "just below the tie: down"),
    (np.inf, 0x7F80, "+inf stays +inf"),
    (-np.inf, 0xFF80, "-inf stays -inf"),
    (f32(0x7F7FFFFF), 0x7F80, "float32's largest value is past bf16's largest + half an ulp: +inf"),
    (f32(0x7F7F7FFF), 0x7F7F, "bf16's largest value, from just below its rounding boundary: stays finite"),
    (-0.0, 0x8000, "the sign of zero is kept"),
    (f32(0x00010000), 0x0001, "a subnormal, exact"),
])
def test_narrowing_rounds_to_nearest_even(value, bits, why):
    got = int(narrow([value])[0])
    assert got == bits, f"{why}: got {got:#06x}, expected {bits:#06x}"


def test_nan_stays_nan():
    got = narrow([np.nan, -np.nan, f32(0x7F800001), f32(0xFFC00001)])
    assert np.isnan(got.view(ml_dtypes.bfloat16).astype(np.float32)).all(), [hex(g) for g in got]


def test_agrees_with_ml_dtypes_on_every_kind_of_value():
    rng = np.random.default_rng()
    ties = (rng.integers(0, 2**15, 64, dtype=np.uint32) << 16 | 0x8000).view(np.float32)
    mixed = np.concatenate([ties, -ties, rng.standard_normal(64, np.float32) * 1e3,
                            rng.integers(0, 2**32, 64, dtype=np.uint64).astype(np.uint32).view(np.float32)])
    mixed = mixed[~np.isnan(mixed)]
    assert np.array_equal(narrow(mixed), mixed.astype(ml_dtypes.bfloat16).view(np.uint16))


def test_widening_is_exact():
    b = np.arange(0, 2**16, 97, dtype=np.uint16)
    out = cuda.device_array(b.shape, np.float32)
    _widen[1, 128](cuda.to_device(b), out)
    want = b.view(ml_dtypes.bfloat16).astype(np.float32)
    got = out.copy_to_host()
    same = (got.view(np.uint32) == want.view(np.uint32)) | (np.isnan(got) & np.isnan(want))
    assert same.all()
