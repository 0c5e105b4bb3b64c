import numpy as np
from numba import cuda

from cudabook.bits import _as_bits, bf16_to_f32, lerp
from cudabook.resample.s01_naive import find_interval, launch as _launch, weight

BUG = "float32 -> bf16 by truncation (drop the low 16 bits) instead of rounding to nearest even"


@cuda.jit
def kernel(times, feats, targets, out):
    t = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    b = cuda.blockIdx.y
    if t >= targets.shape[1]:
        return
    x = targets[b, t]
    lo = find_interval(times, b, x)
    w = weight(times, b, lo, x)
    for d in range(feats.shape[2]):
        v = lerp(bf16_to_f32(feats[b, lo, d]), bf16_to_f32(feats[b, lo + 1, d]), w)
        out[b, t, d] = np.uint16(_as_bits(v) >> np.uint32(16))      # the bug


def launch(p):
    _launch(p, kernel=kernel)
