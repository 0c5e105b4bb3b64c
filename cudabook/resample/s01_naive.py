"""01 naive: one thread per target.

Each thread binary-searches its target's interval in the source times, then loops over the D channels.
Correct, and slow for two reasons you can see in the code: the 32 threads of a warp run 32 separate searches
over the same row, and in the channel loop neighbouring threads read addresses about D * 2 bytes apart, so one
warp-wide load touches up to 32 different 32-byte sectors, to use 2 bytes of each.
"""
import numpy as np
from numba import cuda

from ..bits import bf16_to_f32, f32_to_bf16, lerp
from ..kit.numba_rung import twin
from ..kit.params import check_settings

NAME = "01_naive"
TITLE = "one thread per target"
PARAMS = {"threads": 128}


@cuda.jit(device=True)
def find_interval(times, b, x):
    """The index lo in [0, S-2] with times[b, lo] <= x < times[b, lo + 1] (clamped at both ends)."""
    lo = 0
    hi = times.shape[1] - 1
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if times[b, mid] <= x:
            lo = mid
        else:
            hi = mid
    return lo


@cuda.jit(device=True)
def weight(times, b, lo, x):
    """Where x sits between times[b, lo] and times[b, lo + 1], clamped to [0, 1] (np.interp holds the ends)."""
    t0 = times[b, lo]
    w = (x - t0) / (times[b, lo + 1] - t0)
    return min(max(w, np.float32(0.0)), np.float32(1.0))


@cuda.jit
def resample_naive(times, feats, targets, out):
    # >>> lab: one thread per target: find the interval, then interpolate every channel
    t = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    b = cuda.blockIdx.y
    if t >= targets.shape[1]:
        return
    x = targets[b, t]
    lo = find_interval(times, b, x)
    w = weight(times, b, lo, x)
    for d in range(feats.shape[2]):
        a = bf16_to_f32(feats[b, lo, d])
        c = bf16_to_f32(feats[b, lo + 1, d])
        out[b, t, d] = f32_to_bf16(lerp(a, c, w))
    # <<< lab


def launch(p, kernel=resample_naive, threads=PARAMS["threads"]):
    B, S, T, D = p.shape
    check_settings(NAME, threads=threads, grid_y=B)
    if T == 0:
        return
    grid = ((T + threads - 1) // threads, B)
    twin(kernel)[grid, threads](p.times, p.feats, p.targets, p.out)
