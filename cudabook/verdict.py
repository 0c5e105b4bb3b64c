"""A checker's verdict, shared by every track: PASS or FAIL, how many elements are wrong, and a message."""
from __future__ import annotations

import dataclasses

import numpy as np


def bf16_half_ulp(x):
    """Half a bf16 unit in the last place of |x| (8 significant bits)."""
    _, e = np.frexp(np.maximum(np.abs(x), 2.0 ** -126))
    return np.ldexp(1.0, e - 9)


def index_ranges(idx, most=6) -> str:
    """[3, 4, 5, 9] -> '3 .. 5, 9' (at most `most` pieces)."""
    idx = [int(i) for i in idx]
    pieces, start = [], idx[0]
    for prev, cur in zip(idx, idx[1:] + [None]):
        if cur != prev + 1:
            pieces.append(f"{start}" if start == prev else f"{start} .. {prev}")
            start = cur
    return ", ".join(pieces[:most]) + (", ..." if len(pieces) > most else "")


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
