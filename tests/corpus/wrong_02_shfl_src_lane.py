from numba import cuda

from cudabook.bits import bf16_to_f32, f32_to_bf16, lerp
from cudabook.resample.s01_naive import find_interval
from cudabook.resample.s02_warp_shuffles import FULL_MASK, WARP, launch as _launch, warp_and_lane, warp_weight

BUG = "lane 0 searches, but the index is broadcast from lane 1 (which never searched): every target uses interval 0"
SIZE = dict(B=2, S=23, T=4, D=5)
GPU_SIZE = dict(B=4, S=700, T=2000, D=67)


@cuda.jit
def kernel(times, feats, targets, out):
    T = targets.shape[1]
    warp, lane = warp_and_lane()
    if warp >= targets.shape[0] * T:
        return
    b = warp // T
    t = warp - b * T
    x = targets[b, t]
    lo = 0
    if lane == 0:
        lo = find_interval(times, b, x)
    lo = cuda.shfl_sync(FULL_MASK, lo, 1)        # the bug: the source lane is 1, not 0
    w = warp_weight(times, b, lo, x, lane)
    for d in range(lane, feats.shape[2], WARP):
        out[b, t, d] = f32_to_bf16(lerp(bf16_to_f32(feats[b, lo, d]), bf16_to_f32(feats[b, lo + 1, d]), w))


def launch(p):
    _launch(p, kernel=kernel)
