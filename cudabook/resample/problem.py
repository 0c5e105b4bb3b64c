"""A resampling problem on the device: the inputs, the output buffer, and the sizes.

Every stage's `launch(problem, **params)` reads `times`, `feats`, `targets` and writes `out`; all four are
Numba device arrays (C-contiguous; feats and out hold bf16 bits as uint16).
"""
from __future__ import annotations

import dataclasses

import numpy as np
from numba import cuda

from .inputs import BF16, validate

POISON = np.uint16(0xFFC1)   # a bf16 NaN: an output element nobody wrote can never pass the check


@dataclasses.dataclass
class Problem:
    times: object      # float32 [B, S]
    feats: object      # uint16  [B, S, D]  (bf16 bits)
    targets: object    # float32 [B, T]
    out: object        # uint16  [B, T, D]  (bf16 bits)
    targets_sorted: bool

    @property
    def shape(self):
        B, S, D = self.feats.shape
        return B, S, self.targets.shape[1], D

    @property
    def min_bytes(self) -> int:
        """The fewest bytes any kernel must move: read every input once, write the output once."""
        B, S, T, D = self.shape
        return 4 * B * S + 2 * B * S * D + 4 * B * T + 2 * B * T * D

    def poison(self):
        host = np.full(self.out.shape, POISON, np.uint16)
        self.out.copy_to_device(host)

    def result(self):
        """The output as a bfloat16 NumPy array."""
        return self.out.copy_to_host().view(BF16)


def upload(src_times, src_feats, tgt_times) -> Problem:
    times, bits, targets = validate(src_times, src_feats, tgt_times)
    B, S, D = bits.shape
    T = targets.shape[1]
    is_sorted = bool(np.all(np.diff(targets, axis=1) >= 0)) if T > 1 else True
    return Problem(times=cuda.to_device(times), feats=cuda.to_device(bits), targets=cuda.to_device(targets),
                   out=cuda.device_array((B, T, D), np.uint16), targets_sorted=is_sorted)
