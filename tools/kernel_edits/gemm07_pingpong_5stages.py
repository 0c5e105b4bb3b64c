"""GEMM 07 ping-pong (gemm07_pingpong.py) with five stages and one staging box a warpgroup.

A ping-pong stage holds a 64-row A box (40 KiB a stage against the rung's 48), so the shared memory the rung
allocates for 4 stages and 2 staging boxes a consumer holds 5 stages and 1 box: one more k-tile of loads in
flight, the epilogue's boxes taking turns in one buffer (the ping-pong hides the epilogue behind the other
warpgroup's k-loop anyway).
"""
import importlib.util
import pathlib

_spec = importlib.util.spec_from_file_location("gemm07_pingpong", pathlib.Path(__file__).with_name("gemm07_pingpong.py"))
_base = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_base)
TRACK, STAGE, MARK, PARAMS, host = _base.TRACK, _base.STAGE, _base.MARK, _base.PARAMS, _base.host


def edit(text: str) -> str:
    text = _base.edit(text)
    return _base._swap(text, "constexpr int BM = 64 * CONSUMERS;",
                       "#undef STAGES\n#define STAGES 5\n#undef STORE_BOXES\n#define STORE_BOXES 1\n"
                       "constexpr int BM = 64 * CONSUMERS;")
