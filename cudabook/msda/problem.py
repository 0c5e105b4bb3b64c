"""Deformable attention on the device: the five inputs, the output, and the sizes.

Every stage's `launch(problem, **params)` reads
    value   uint16 [N, S, M, D] (bf16 bits)        shapes  int32 [L, 2] (H, W)     starts  int32 [L]
    loc     float32 [N, Lq, M, L, P, 2] (x, y)     attn    float32 [N, Lq, M, L, P]
and writes out, uint16 [N, Lq, M * D] (bf16 bits): Numba device arrays, C-contiguous. `words()` gives value and
out viewed as uint32 words (two bf16 channels each, the lower channel in the low half), for stages that move
4 or 16 bytes at a time: with D a multiple of 8 every head's row of D channels is 16-byte aligned.
"""
from __future__ import annotations

import dataclasses

import numpy as np
from numba import cuda

from ..kit.problem import POISON, DeviceProblem, start_launch as _start_launch  # noqa: F401  (problem.POISON)
from .inputs import validate

MAX_D = 128


@dataclasses.dataclass
class Problem(DeviceProblem):
    value: object
    shapes: object
    starts: object
    loc: object
    attn: object
    out: object
    host_shapes: np.ndarray
    dims: tuple                      # (N, S, M, D, Lq, L, P)
    _words: tuple = dataclasses.field(default=None, repr=False)

    @property
    def samples(self) -> int:
        """N * Lq * M * L * P: the bilinear samples, each of D channels."""
        N, S, M, D, Lq, L, P = self.dims
        return N * Lq * M * L * P

    @property
    def min_bytes(self) -> int:
        """The fewest bytes the problem moves: value, locations and weights read once, the output written once
        (and the two small tables)."""
        N, S, M, D, Lq, L, P = self.dims
        return 2 * N * S * M * D + 4 * 3 * N * Lq * M * L * P + 2 * N * Lq * M * D + 4 * 3 * L

    @property
    def gather_bytes(self) -> int:
        """Bytes of the corners every sample reads: 4 pixels of D bf16 channels (what the caches serve)."""
        return self.samples * 4 * self.dims[3] * 2

    def words(self):
        """(value as uint32 [N, S * M, D / 2], out as uint32 [N, Lq, M * D / 2]): the same memory, two channels a
        word. Needs D even."""
        if self._words is None:
            N, S, M, D, Lq, L, P = self.dims
            self._words = (self.value.reshape(N, S * M, D).view(np.uint32), self.out.view(np.uint32))
        return self._words

    def require_channels(self, stage: str):
        """ValueError naming the rule unless D is a multiple of 8 in 8..128: what every rung supports."""
        D = self.dims[3]
        if D % 8 or not 8 <= D <= MAX_D:
            raise ValueError(f"{stage}: D (channels per head, value's last axis) must be a multiple of 8 from 8 to "
                             f"{MAX_D}, got D = {D}; every rung of this track supports exactly those (a head's row "
                             f"is then a whole number of 16-byte pieces)")


def start_launch(p, stage: str, defaults: dict, params: dict, why_not: str | None) -> dict | None:
    """What a C++ rung's launch() checks first: parameters it knows (TypeError), a machine that runs it
    (StageUnavailable with `why_not`), channels the track supports (ValueError). Returns the parameters with
    their defaults, or None when there is no work (no image, query or head)."""
    N, S, M, D, Lq, L, P = p.shape
    return _start_launch(defaults, params, why_not, N * Lq * M, p.require_channels, stage)


def upload(value, spatial_shapes, level_start_index, sampling_locations, attention_weights) -> Problem:
    """Validate the inputs and put them on the device with an output (not yet poisoned)."""
    value, shapes, starts, loc, attn = validate(value, spatial_shapes, level_start_index, sampling_locations,
                                                attention_weights)
    N, S, M, D = value.shape
    Lq, L, P = loc.shape[1], loc.shape[3], loc.shape[4]
    return Problem(value=cuda.to_device(value), shapes=cuda.to_device(shapes), starts=cuda.to_device(starts),
                   loc=cuda.to_device(loc), attn=cuda.to_device(attn),
                   out=cuda.device_array((N, Lq, M * D), np.uint16), host_shapes=shapes,
                   dims=(N, S, M, D, Lq, L, P))
