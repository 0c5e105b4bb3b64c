from numba import cuda

from cudabook.bits import bf16_to_f32, f32_to_bf16, lerp
from cudabook.resample.s01_naive import find_interval, launch as _launch, weight

BUG = "bound check `t >= T - 1`: the last target of every row is never written"


@cuda.jit
def kernel(times, feats, targets, out):
    t = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    b = cuda.blockIdx.y
    if t >= targets.shape[1] - 1:    # the bug
        return
    x = targets[b, t]
    lo = find_interval(times, b, x)
    w = weight(times, b, lo, x)
    for d in range(feats.shape[2]):
        out[b, t, d] = f32_to_bf16(lerp(bf16_to_f32(feats[b, lo, d]), bf16_to_f32(feats[b, lo + 1, d]), w))


def launch(p):
    _launch(p, kernel=kernel)
