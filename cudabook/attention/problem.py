"""Attention on the device: q, k, v, the output, and the sizes.

Every stage's `launch(problem, **params)` reads
    q  uint16 [B, H, Nq, d] (bf16 bits)      k, v  uint16 [B, H, Nk, d] (bf16 bits)
and writes out, uint16 [B, H, Nq, d] (bf16 bits): Numba device arrays, C-contiguous (rows of d channels, 16-byte
aligned since d is a multiple of 8). `causal` (query i sees keys j <= i, Nq == Nk) and `scale` (1 / sqrt(d)) are
part of the problem, not parameters of a stage.
"""
from __future__ import annotations

import dataclasses
import math

import numpy as np
from numba import cuda

from ..kit.problem import DeviceProblem, start_launch as _start_launch
from .inputs import BF16, POISON, validate  # noqa: F401  (POISON: problem.POISON, as before)


@dataclasses.dataclass
class Problem(DeviceProblem):
    q: object
    k: object
    v: object
    out: object
    dims: tuple                      # (B, H, Nq, Nk, d)
    causal: bool = False
    _scratch: dict = dataclasses.field(default_factory=dict, repr=False)

    @property
    def scale(self) -> float:
        """1 / sqrt(d): what every score q . k is multiplied by before the softmax."""
        return 1.0 / math.sqrt(self.dims[4])

    @property
    def scale_log2(self) -> float:
        """scale * log2(e): what the C++ rungs multiply q . k by, so that their softmax runs in base 2 (exp2)."""
        return self.scale / math.log(2.0)

    @property
    def flops(self) -> int:
        """4 B H Nq Nk d (two matrix products of 2 Nq Nk d each per head), half of that when causal: the count
        the benchmark divides by the time (masked work does not count)."""
        B, H, Nq, Nk, d = self.dims
        total = 4 * B * H * Nq * Nk * d
        return total // 2 if self.causal else total

    @property
    def min_bytes(self) -> int:
        """q, k, v read once and the output written once."""
        B, H, Nq, Nk, d = self.dims
        return 2 * B * H * d * (2 * Nq + 2 * Nk)

    def scratch(self, name: str, shape, dtype, make=None):
        """A device buffer a stage keeps between launches on this problem (made on first use, by `make()` if
        given): rung 01's scores S, for one, are gigabytes at the benchmark's size."""
        shape, dtype = tuple(shape), np.dtype(dtype)
        kept = self._scratch.get(name)
        if kept is None or kept.shape != shape or kept.dtype != dtype:
            self._scratch.pop(name, None)
            kept = self._scratch[name] = make() if make else cuda.device_array(shape, dtype)
        return kept

    def require_head_dim(self, stage: str, supported=(64, 128)):
        """ValueError naming the rule unless d is one the stage supports."""
        d = self.dims[4]
        if d not in supported:
            raise ValueError(f"{stage}: d (the head dimension, the last axis of q, k and v) must be one of "
                             f"{', '.join(map(str, supported))}, got d = {d}")


def start_launch(p, stage: str, defaults: dict, params: dict, why_not: str | None, supported=(64, 128)) -> dict | None:
    """What a rung's launch() checks first: parameters it knows (TypeError), a machine that runs it
    (StageUnavailable with `why_not`), a head dimension it supports (ValueError). Returns the parameters with
    their defaults, or None when there is no work (no batch, head or query)."""
    B, H, Nq, Nk, d = p.shape
    return _start_launch(defaults, params, why_not, B * H * Nq, p.require_head_dim, stage, supported)


def rule_broken(name: str, value, allowed, said: str, *, whole: bool = False) -> str | None:
    """None, or "<name> must be <said>, got <value>" when `value` is not in `allowed`. A bool never passes (True
    is not 1 here); with whole=True nothing but an int does."""
    if isinstance(value, bool) or (whole and not isinstance(value, int)) or value not in allowed:
        return f"{name} must be {said}, got {value!r}"
    return None


def check_config(stage: str, d: int, head_dims, *problems):
    """What a C++ rung's config() checks: a ValueError naming every problem found (the messages among
    `problems`, None where a rule holds), a head dimension d not in head_dims first; nothing when all hold."""
    found = [f"d must be one of {', '.join(map(str, head_dims))}, got {d}"] if d not in head_dims else []
    found += [problem for problem in problems if problem]
    if found:
        raise ValueError(f"{stage}: " + "; ".join(found))


def upload(q, k, v, causal=False) -> Problem:
    """Validate the inputs and put them on the device with an output (not yet poisoned)."""
    q, k, v, causal = validate(q, k, v, causal)
    B, H, Nq, d = q.shape
    Nk = k.shape[2]
    return Problem(q=cuda.to_device(q), k=cuda.to_device(k), v=cuda.to_device(v),
                   out=cuda.device_array((B, H, Nq, d), np.uint16), dims=(B, H, Nq, Nk, d), causal=causal)
