"""Control for gemm07_stream_k.py: the same edited kernel with its tail switched off (every unit whole, in the
rung's order), so that the probe separates what the Stream-K tail does from what the edit's code costs.
"""
from cudabook import edits as _edits

_base = _edits.load("gemm07_stream_k")
TRACK, STAGE, MARK, host = _base.TRACK, _base.STAGE, _base.MARK, _base.host


def edit(text: str) -> str:
    return _base._swap(_base.edit(text), "    if (R < clusters) {                        // fewer units than clusters: whole units only",
                       "    if (true) {                                // (control: whole units only)")
