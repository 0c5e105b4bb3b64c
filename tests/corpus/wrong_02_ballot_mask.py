from numba import cuda

from cudabook.bits import bf16_to_f32, f32_to_bf16, lerp
from cudabook.resample.s02_warp_shuffles import WARP, launch as _launch, warp_and_lane, warp_weight

BUG = "ballot with mask 0x0000FFFF while all 32 lanes call it: lanes 16-31 are not in the mask"
SIZE = dict(B=1, S=23, T=2, D=5)
SIM_ONLY = ("a mask that leaves out lanes which execute the call is undefined behaviour on a GPU (it may hang); "
            "the simulator's warp operations are the ones that catch it")


@cuda.jit(device=True)
def half_mask_search(times, b, x, lane):
    lo = 0
    hi = times.shape[1] - 2
    while hi > lo:
        step = (hi - lo + WARP - 1) // WARP
        probe = lo + 1 + lane * step
        below = False
        if probe <= hi:
            below = times[b, probe] <= x
        c = cuda.popc(cuda.ballot_sync(0x0000FFFF, below))     # the bug: half the warp left out of the mask
        if c == 0:
            hi = lo
        else:
            lo = lo + 1 + (c - 1) * step
            hi = min(hi, lo + step - 1)
    return lo


@cuda.jit
def kernel(times, feats, targets, out):
    T = targets.shape[1]
    warp, lane = warp_and_lane()
    if warp >= targets.shape[0] * T:
        return
    b = warp // T
    t = warp - b * T
    x = targets[b, t]
    lo = half_mask_search(times, b, x, lane)
    w = warp_weight(times, b, lo, x, lane)
    for d in range(lane, feats.shape[2], WARP):
        out[b, t, d] = f32_to_bf16(lerp(bf16_to_f32(feats[b, lo, d]), bf16_to_f32(feats[b, lo + 1, d]), w))


def launch(p):
    _launch(p, kernel=kernel)
