"""A checker's verdict, shared by every track: PASS or FAIL, how many elements are wrong, and a message."""
from __future__ import annotations

import dataclasses

import numpy as np


def bf16_half_ulp(x):
    """Half a bf16 unit in the last place of |x| (8 significant bits)."""
    _, e = np.frexp(np.maximum(np.abs(x), 2.0 ** -126))
    return np.ldexp(1.0, e - 9)


@dataclasses.dataclass
class Verdict:
    ok: bool
    wrong: int
    total: int
    nan: int
    shape: tuple
    message: str
    first: list = dataclasses.field(default_factory=list)   # the first wrong elements: (index..., expected, got)

    def __bool__(self):
        return self.ok

    def __str__(self):
        return self.message
