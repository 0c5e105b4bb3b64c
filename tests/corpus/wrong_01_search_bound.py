import numpy as np
from numba import cuda

from cudabook.bits import bf16_to_f32, f32_to_bf16, lerp
from cudabook.resample.s01_naive import launch as _launch, weight

BUG = "binary search upper bound S-2 instead of S-1: the last source interval is never found"


@cuda.jit
def kernel(times, feats, targets, out):
    t = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    b = cuda.blockIdx.y
    if t >= targets.shape[1]:
        return
    x = targets[b, t]
    lo = 0
    hi = times.shape[1] - 2          # the bug
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if times[b, mid] <= x:
            lo = mid
        else:
            hi = mid
    w = weight(times, b, lo, x)
    for d in range(feats.shape[2]):
        out[b, t, d] = f32_to_bf16(lerp(bf16_to_f32(feats[b, lo, d]), bf16_to_f32(feats[b, lo + 1, d]), w))


def launch(p):
    _launch(p, kernel=kernel)
