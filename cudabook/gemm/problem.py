"""A matrix product on the device: A, B, the output C, and the sizes.

Every stage's `launch(problem, **params)` reads `a` [M, K] and `b` [K, N] and writes `c` [M, N]: Numba device
arrays, C-contiguous, holding bf16 bits as uint16. Stages whose hardware needs row strides of a multiple of
16 bytes (TMA) ask for `aligned(8)`: copies whose K and N are padded with zeros to a multiple of 8, made once
and kept; `copy_back(c_padded)` then moves the [M, N] corner into `c`.
"""
from __future__ import annotations

import dataclasses

import numpy as np
from numba import cuda

from .inputs import BF16, validate

POISON = np.uint16(0xFFC1)   # a bf16 NaN: an element of C nobody wrote can never pass the check


@dataclasses.dataclass
class Problem:
    a: object          # uint16 [M, K] (bf16 bits), device
    b: object          # uint16 [K, N] (bf16 bits), device
    c: object          # uint16 [M, N] (bf16 bits), device
    host_a: np.ndarray
    host_b: np.ndarray
    _aligned: dict = dataclasses.field(default_factory=dict, repr=False)

    @property
    def shape(self):
        """(M, N, K)"""
        (M, K), N = self.host_a.shape, self.host_b.shape[1]
        return M, N, K

    @property
    def flops(self) -> int:
        M, N, K = self.shape
        return 2 * M * N * K

    @property
    def min_bytes(self) -> int:
        """Read A and B once, write C once."""
        M, N, K = self.shape
        return 2 * (M * K + K * N + M * N)

    def poison(self):
        """NaN into C, and into every padded C a stage writes first: a stage that leaves an element unwritten
        must fail, never show the result of an earlier launch."""
        self.c.copy_to_device(np.full(self.c.shape, POISON, np.uint16))
        for _, _, c, _, _ in self._aligned.values():
            c.copy_to_device(np.full(c.shape, POISON, np.uint16))

    def result(self):
        """C as a bfloat16 NumPy array [M, N]."""
        return self.c.copy_to_host().view(BF16)

    def aligned(self, multiple=8):
        """(a, b, c, Kp, Np): device copies with K and N padded with zeros to a multiple of `multiple`
        (16-byte rows for bf16 when multiple=8). The problem's own arrays when they already are."""
        M, N, K = self.shape
        Kp, Np = -(-K // multiple) * multiple, -(-N // multiple) * multiple
        if (Kp, Np) == (K, N):
            return self.a, self.b, self.c, K, N
        if multiple not in self._aligned:
            a = np.zeros((M, Kp), np.uint16)
            a[:, :K] = self.host_a
            b = np.zeros((Kp, Np), np.uint16)
            b[:K, :N] = self.host_b
            self._aligned[multiple] = (cuda.to_device(a), cuda.to_device(b),
                                       cuda.device_array((M, Np), np.uint16), Kp, Np)
        return self._aligned[multiple]

    def copy_back(self, c_padded):
        """Copy the [M, N] corner of a padded C (row length Np) into `c` (a 2-D device-to-device copy; the
        simulator's arrays, which the CPU emulator writes, are host memory: a plain copy)."""
        if c_padded is self.c:
            return
        if getattr(c_padded, "device_ctypes_pointer", None) is None:
            self.c.copy_to_device(np.ascontiguousarray(c_padded.copy_to_host()[:, :self.shape[1]]))
            return
        from cuda.bindings import driver as drv
        M, N, _ = self.shape
        copy = drv.CUDA_MEMCPY2D()
        copy.srcMemoryType = drv.CUmemorytype.CU_MEMORYTYPE_DEVICE
        copy.srcDevice = c_padded.device_ctypes_pointer.value
        copy.srcPitch = c_padded.shape[1] * 2
        copy.dstMemoryType = drv.CUmemorytype.CU_MEMORYTYPE_DEVICE
        copy.dstDevice = self.c.device_ctypes_pointer.value
        copy.dstPitch = N * 2
        copy.WidthInBytes = N * 2
        copy.Height = M
        err, = drv.cuMemcpy2DAsync(copy, 0)
        if err != drv.CUresult.CUDA_SUCCESS:
            raise RuntimeError(f"cuMemcpy2DAsync (C back from its padded copy) failed: {err.name}")


def upload(a, b) -> Problem:
    """Validate A and B and put them on the device with an output C (not yet poisoned)."""
    a_bits, b_bits = validate(a, b)
    M, N = a_bits.shape[0], b_bits.shape[1]
    return Problem(a=cuda.to_device(a_bits), b=cuda.to_device(b_bits), c=cuda.device_array((M, N), np.uint16),
                   host_a=a_bits, host_b=b_bits)
