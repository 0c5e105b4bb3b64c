"""The float64 references, remembered for the inputs they were made from.

A benchmark judges every stage and peer on the same large inputs, and between two of those judgements the
grader's small cases are judged too. Keeping only the last reference would let each small case push the large
one out, and at full size a float64 reference takes seconds to minutes to make again. So one reference is kept
for the last large inputs and one for the last small ones. Inputs are matched by identity (`is`), and the memo
holds them, so their ids stay theirs while it does.
"""
from __future__ import annotations

LARGE = 1 << 22        # elements over all inputs from which a reference counts as large


class References:
    """memo.get(inputs, make): make() for these inputs, or what it gave the last time for these very objects."""

    def __init__(self, large=LARGE):
        self.large = large
        self._kept: dict[bool, tuple] = {}

    def _slot(self, inputs) -> bool:
        import numpy as np
        return sum(int(np.size(x)) for x in inputs if hasattr(x, "shape")) >= self.large

    def kept(self, inputs):
        """What is kept for these very inputs, or None."""
        inputs = tuple(inputs)
        kept = self._kept.get(self._slot(inputs))
        if kept is not None and len(kept[0]) == len(inputs) and all(a is b for a, b in zip(kept[0], inputs)):
            return kept[1]
        return None

    def get(self, inputs, make):
        inputs = tuple(inputs)
        value = self.kept(inputs)
        if value is None:
            value = make()
            self._kept[self._slot(inputs)] = (inputs, value)
        return value
