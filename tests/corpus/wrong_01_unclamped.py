from numba import cuda

from cudabook.bits import bf16_to_f32, f32_to_bf16, lerp
from cudabook.resample.s01_naive import find_interval, launch as _launch

BUG = "weight not clamped to [0, 1]: targets outside the source range are extrapolated, not held"


@cuda.jit
def kernel(times, feats, targets, out):
    t = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    b = cuda.blockIdx.y
    if t >= targets.shape[1]:
        return
    x = targets[b, t]
    lo = find_interval(times, b, x)
    w = (x - times[b, lo]) / (times[b, lo + 1] - times[b, lo])     # the bug: no clamp
    for d in range(feats.shape[2]):
        out[b, t, d] = f32_to_bf16(lerp(bf16_to_f32(feats[b, lo, d]), bf16_to_f32(feats[b, lo + 1, d]), w))


def launch(p):
    _launch(p, kernel=kernel)
