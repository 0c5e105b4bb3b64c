"""What a track's Problem (its inputs and output on the device) shares with every other track's: the output as
bf16 bits, poisoned before a launch and read back as bfloat16, its sizes as `shape`, and the checks a rung's
launch() makes first. A track's Problem is a dataclass with `out` (a uint16 device array) and `dims` (its sizes,
in the order its track names them); it adds what only that track needs."""
from __future__ import annotations

import numpy as np

from ..errors import StageUnavailable
from .host_arrays import BF16
from .params import check_params

POISON = np.uint16(0xFFC1)   # a bf16 NaN: an output nobody wrote can never pass the check


class DeviceProblem:
    """The part of a track's Problem dataclass that every track's has alike."""

    @property
    def shape(self):
        """The problem's sizes, `dims`: the track's Problem names their order."""
        return self.dims

    def poison(self):
        """NaN into every output: an element the stage leaves unwritten must fail, never show an earlier
        launch's result."""
        self.out.copy_to_device(np.full(self.out.shape, POISON, np.uint16))

    def result(self):
        """The output as a bfloat16 NumPy array, in the output's shape."""
        return self.out.copy_to_host().view(BF16)


def start_launch(defaults: dict, params: dict, why_not: str | None, work: int, require, *args) -> dict | None:
    """What a rung's launch() checks first: parameters it knows (TypeError), a machine that runs it
    (StageUnavailable with `why_not`), then `require(*args)`, the track's rule on the problem's sizes (a
    ValueError). Returns the parameters with their defaults, or None when there is no work (`work` is 0)."""
    check_params(params, defaults)
    if why_not:
        raise StageUnavailable(why_not)
    require(*args)
    return {**defaults, **params} if work else None
