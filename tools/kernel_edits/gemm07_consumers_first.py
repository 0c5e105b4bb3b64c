"""Control for gemm07_deferred_consumers_first.py: rung 07 with nothing changed but the order of its role split
(the consumers' branch first in the source), so that the probe separates what the order does from what the
deferred epilogue does.
"""
from cudabook import edits as _edits

_base = _edits.load("gemm07_deferred_consumers_first")
TRACK, STAGE = _base.TRACK, _base.STAGE


def edit(text: str) -> str:
    return _base.consumers_first(text)
