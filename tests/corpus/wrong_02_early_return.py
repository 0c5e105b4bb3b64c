from numba import cuda

from cudabook.bits import bf16_to_f32, f32_to_bf16, lerp
from cudabook.resample.s02_warp_shuffles import launch as _launch, warp_and_lane, warp_find_interval, warp_weight

BUG = ("lanes with no channel to do (lane >= D) return before the ballot search: the ballot counts only the "
       "lanes left, so targets past the first D probe points get the wrong interval")
SIZE = dict(B=2, S=40, T=4, D=3)
SIM_ONLY = ("a warp operation whose mask names lanes that have exited is undefined behaviour on a GPU; the "
            "simulator, like hardware, skips exited lanes, and the checker sees the wrong intervals")


@cuda.jit
def kernel(times, feats, targets, out):
    T = targets.shape[1]
    warp, lane = warp_and_lane()
    if warp >= targets.shape[0] * T or lane >= feats.shape[2]:     # the bug: lanes leave before the ballot
        return
    b = warp // T
    t = warp - b * T
    x = targets[b, t]
    lo = warp_find_interval(times, b, x, lane)
    w = warp_weight(times, b, lo, x, lane)
    d = lane
    out[b, t, d] = f32_to_bf16(lerp(bf16_to_f32(feats[b, lo, d]), bf16_to_f32(feats[b, lo + 1, d]), w))


def launch(p):
    _launch(p, kernel=kernel)
