from numba import cuda

from cudabook.resample.s02_warp_shuffles import WARP, warp_and_lane, warp_find_interval, warp_weight
from cudabook.resample.s03_coalesced import launch as _launch, lerp_pair, load_u32x4, store_u32x4

BUG = ("16-byte loop runs only whole 32-lane sweeps (32 x 8 channels): with D = 264 the last 8 channels, "
       "the tail sweep, are never written")
SIZE = dict(B=1, S=9, T=3, D=264)
GPU_SIZE = dict(B=4, S=700, T=2000, D=264)


@cuda.jit
def kernel(times, feats, targets, out):
    T = targets.shape[1]
    warp, lane = warp_and_lane()
    if warp >= targets.shape[0] * T:
        return
    b = warp // T
    t = warp - b * T
    x = targets[b, t]
    lo = warp_find_interval(times, b, x, lane)
    w = warp_weight(times, b, lo, x, lane)
    sweep = 4 * WARP
    for i in range(4 * lane, feats.shape[2] // sweep * sweep, sweep):    # the bug: no partial last sweep
        a0, a1, a2, a3 = load_u32x4(feats, b, lo, i)
        c0, c1, c2, c3 = load_u32x4(feats, b, lo + 1, i)
        store_u32x4(out, b, t, i, lerp_pair(a0, c0, w), lerp_pair(a1, c1, w), lerp_pair(a2, c2, w),
                    lerp_pair(a3, c3, w))


def launch(p):
    _launch(p, kernel=kernel, vec_bytes=16)
