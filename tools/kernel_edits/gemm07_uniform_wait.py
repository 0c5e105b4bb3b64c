"""Control for gemm07_deferred_stream_k_uniform.py: rung 07 with nothing changed but its consumers' wait for a
full stage, made warp-uniform (mbar_wait_warp: a vote on every poll, the watchdog decided by the warp), so that
the probe separates what that wait costs from what the deferred epilogue does. At the rung's settings
(stream_k "auto": on at 8192^3, off at 4096^3).
"""
from cudabook import edits as _edits

_base = _edits.load("gemm07_deferred_stream_k_uniform")
TRACK, STAGE = _base.TRACK, _base.STAGE


def edit(text: str) -> str:
    text = _base._swap(text, _base.ANCHOR, _base.WAIT + _base.ANCHOR)
    return _base._swap(text, "        mbar_wait(full + 8 * s, phase);", "        mbar_wait_warp(full + 8 * s, phase);")
