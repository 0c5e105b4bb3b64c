"""02 warp shuffles: a warp per target.

Stage 01 gave each thread its own target, so the 32 threads of a warp ran 32 separate searches and, in the
channel loop, read addresses D * 2 bytes apart. Here a whole warp works on one target:

1. Search. Two ways, picked by PARAMS["search"]:
   - "lane0" (seed 000's way): lane 0 runs the ordinary binary search while the other 31 lanes wait, then
     `cuda.shfl_sync` hands its answer to every lane. One search per warp instead of 32, but still log2(S)
     dependent loads one after the other.
   - "ballot" (the default): a 32-way search. Each round the 32 lanes test 32 evenly spaced probe points at
     once; `cuda.ballot_sync` gathers the 32 answers into one word that every lane receives, and its popcount
     says which gap holds the target. Each round shrinks the range 32 times, so S = 4096 takes 3 rounds
     instead of 12.
2. Weight. Lane 0 computes it and `cuda.shfl_sync` broadcasts it (one division per warp).
3. Channels. Lane i handles channels i, i + 32, i + 64, ...: one warp-wide load reads 32 neighbouring bf16,
   64 contiguous bytes. That is a coalesced access.

The grid covers B * T targets flattened, so a problem with few targets per row still fills the GPU. A warp
is either wholly inside the problem or wholly past its end, so the warps past the end leave together before
any warp operation: no lane ever waits at a shuffle for a lane that has gone.
"""
import numpy as np
from numba import cuda

from ..bits import bf16_to_f32, f32_to_bf16, lerp
from ..kit.numba_rung import twin
from .s01_naive import find_interval, weight

NAME = "02_warp_shuffles"
TITLE = "a warp per target"
PARAMS = {"warps_per_block": 4, "search": "ballot"}

WARP = 32
FULL_MASK = 0xFFFFFFFF   # every lane of the warp takes part


@cuda.jit(device=True)
def warp_find_interval(times, b, x, lane):
    """32-way search, called by all 32 lanes of a warp: every lane gets the same lo in [0, S-2] with
    times[b, lo] <= x < times[b, lo + 1] (clamped at both ends), the same answer as s01's find_interval.

    The answer lies in [lo, hi]. Each round lane k probes position lo + 1 + k * step; the lanes whose probe
    time is <= x form a prefix of the warp (times increase), so the popcount c of the ballot says the answer
    is at or after probe c - 1 and before probe c.
    """
    lo = 0
    hi = times.shape[1] - 2
    while hi > lo:                                  # the same on every lane: lo and hi come from the ballot
        step = (hi - lo + WARP - 1) // WARP
        probe = lo + 1 + lane * step
        below = False
        if probe <= hi:
            below = times[b, probe] <= x
        c = cuda.popc(cuda.ballot_sync(FULL_MASK, below))
        if c == 0:
            hi = lo
        else:
            lo = lo + 1 + (c - 1) * step
            hi = min(hi, lo + step - 1)
    return lo


@cuda.jit(device=True)
def lane0_find_interval(times, b, x, lane):
    """Seed 000's way: lane 0 binary-searches alone, then broadcasts the index to the whole warp."""
    lo = 0
    if lane == 0:
        lo = find_interval(times, b, x)
    return cuda.shfl_sync(FULL_MASK, lo, 0)


@cuda.jit(device=True)
def warp_weight(times, b, lo, x, lane):
    """Lane 0 computes the weight, every lane receives it."""
    w = np.float32(0.0)
    if lane == 0:
        w = weight(times, b, lo, x)
    return cuda.shfl_sync(FULL_MASK, w, 0)


@cuda.jit(device=True)
def warp_and_lane():
    """(warp id, lane) of this thread; the warp id counts targets over the flattened [B, T]."""
    lane = cuda.threadIdx.x % WARP
    warp = (cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x) // WARP
    return warp, lane


@cuda.jit(device=True, forceinline=True)
def warp_target(targets):
    """resample_warp's opening as one call, for the kernels that follow it: (b, t, x, lane), this warp's target
    (b, t) over the flattened [B, T], its time x, and this thread's lane. b = -1 for a warp past the end, on all
    32 of its lanes alike."""
    T = targets.shape[1]
    warp, lane = warp_and_lane()
    if warp >= targets.shape[0] * T:
        return -1, 0, np.float32(0.0), lane
    b = warp // T
    t = warp - b * T
    return b, t, targets[b, t], lane


@cuda.jit
def resample_warp(times, feats, targets, out):
    T = targets.shape[1]
    warp, lane = warp_and_lane()
    if warp >= targets.shape[0] * T:
        return                       # the whole warp is past the end: all 32 lanes leave together
    b = warp // T
    t = warp - b * T
    x = targets[b, t]
    # >>> lab: one warp per target: 32-way ballot search, broadcast the weight, lanes stride the channels
    lo = warp_find_interval(times, b, x, lane)
    w = warp_weight(times, b, lo, x, lane)
    for d in range(lane, feats.shape[2], WARP):
        a = bf16_to_f32(feats[b, lo, d])
        c = bf16_to_f32(feats[b, lo + 1, d])
        out[b, t, d] = f32_to_bf16(lerp(a, c, w))
    # <<< lab


@cuda.jit(device=True, forceinline=True)
def warp_lerp(times, feats, out, b, t, x, lo, lane):
    """What resample_warp does once lo is known: lane 0's weight for every lane, the lanes striding the channels."""
    w = warp_weight(times, b, lo, x, lane)
    for d in range(lane, feats.shape[2], WARP):
        a = bf16_to_f32(feats[b, lo, d])
        c = bf16_to_f32(feats[b, lo + 1, d])
        out[b, t, d] = f32_to_bf16(lerp(a, c, w))


@cuda.jit
def resample_warp_lane0(times, feats, targets, out):
    """resample_warp with seed 000's search."""
    b, t, x, lane = warp_target(targets)
    if b >= 0:
        warp_lerp(times, feats, out, b, t, x, lane0_find_interval(times, b, x, lane), lane)


KERNELS = {"ballot": resample_warp, "lane0": resample_warp_lane0}


def grid_for(p, warps_per_block):
    """(blocks, threads per block) for one warp per target over the flattened B * T targets."""
    B, S, T, D = p.shape
    return (B * T + warps_per_block - 1) // warps_per_block, WARP * warps_per_block


def launch(p, kernel=resample_warp, warps_per_block=PARAMS["warps_per_block"], search=PARAMS["search"]):
    if search not in KERNELS:
        raise ValueError(f"search must be one of {sorted(KERNELS)}, got {search!r}")
    if not 1 <= warps_per_block <= 32:
        raise ValueError(f"warps_per_block must be in 1..32 (at most 1024 threads a block), got {warps_per_block}")
    B, S, T, D = p.shape
    if B * T == 0:
        return
    if kernel is resample_warp:
        kernel = KERNELS[search]
    blocks, threads = grid_for(p, warps_per_block)
    twin(kernel)[blocks, threads](p.times, p.feats, p.targets, p.out)
