import numpy as np
from numba import cuda

from cudabook.bits import bf16_to_f32, f32_to_bf16, lerp
from cudabook.resample.s02_warp_shuffles import WARP, warp_and_lane, warp_find_interval, warp_weight
from cudabook.resample.s03_coalesced import launch as _launch

BUG = ("a packed pair unpacked big-endian: the high half of the uint32 taken as channel d, the low half as d + 1 "
       "(the GPU is little-endian: the lower address is the low half), so neighbouring channels swap")
SIZE = dict(B=1, S=9, T=3, D=6)
GPU_SIZE = dict(B=4, S=700, T=2000, D=66)


@cuda.jit(device=True, inline=True)
def lerp_pair_swapped(a, c, w):
    first = f32_to_bf16(lerp(bf16_to_f32(a >> np.uint32(16)), bf16_to_f32(c >> np.uint32(16)), w))
    second = f32_to_bf16(lerp(bf16_to_f32(a & np.uint32(0xFFFF)), bf16_to_f32(c & np.uint32(0xFFFF)), w))
    return np.uint32(np.uint32(first) | (np.uint32(second) << np.uint32(16)))   # the bug: halves swapped


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
    for i in range(lane, feats.shape[2], WARP):
        out[b, t, i] = lerp_pair_swapped(feats[b, lo, i], feats[b, lo + 1, i], w)


def launch(p):
    _launch(p, kernel=kernel, vec_bytes=4)
