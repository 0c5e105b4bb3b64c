"""bfloat16 on the device, as bits.

Kernels see bf16 data as uint16: a bf16 value is the top half of a float32. Widening is a shift; narrowing
rounds to nearest, ties to even, by adding 0x7FFF plus the lowest kept bit before dropping the low half.

These are device functions, written once for both worlds: on a GPU the bit casts are libdevice's
`int_as_float` / `float_as_int` (free: a register is reinterpreted), in the simulator NumPy views.
"""
from __future__ import annotations

import numpy as np
from numba import cuda

from . import SIMULATOR

if SIMULATOR:
    def _as_float(bits):
        return np.uint32(bits).view(np.float32)

    def _as_bits(value):
        return np.float32(value).view(np.uint32)
else:  # pragma: no cover - GPU only
    from numba.cuda import libdevice

    @cuda.jit(device=True, forceinline=True)
    def _as_float(bits):
        return libdevice.int_as_float(np.int32(bits))

    @cuda.jit(device=True, forceinline=True)
    def _as_bits(value):
        return np.uint32(libdevice.float_as_int(value))


@cuda.jit(device=True, forceinline=True)
def bf16_to_f32(b):
    """uint16 bf16 bits -> float32."""
    return _as_float(np.uint32(b) << np.uint32(16))


@cuda.jit(device=True, forceinline=True)
def f32_to_bf16(x):
    """float32 -> uint16 bf16 bits, rounded to nearest even (NaN stays NaN)."""
    if x != x:
        return np.uint16(0x7FC0)
    bits = _as_bits(x)
    bits = bits + np.uint32(0x7FFF) + ((bits >> np.uint32(16)) & np.uint32(1))
    return np.uint16(bits >> np.uint32(16))


@cuda.jit(device=True, forceinline=True)
def lerp(a, b, w):
    """a + w (b - a) in float32: exact at w = 0 and, for bf16 inputs, at w = 1."""
    return a + w * (b - a)
