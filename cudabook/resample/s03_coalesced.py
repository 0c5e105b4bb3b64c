"""03 coalesced: wide, aligned accesses.

Stage 02 already reads 64 contiguous bytes per warp-wide load, but each lane moves only 2 bytes per
instruction: for D = 256 a warp needs 8 load instructions per source row. Here each lane moves `vec_bytes`
bytes per instruction: 4 (a pair of bf16 as one uint32), 8 (four bf16 as one uint64) or 16 (eight bf16).
The warp structure, the 32-way search and the weight broadcast are stage 02's, imported from it.

How to load 16 bytes at once from Numba:
- 4 and 8 bytes need nothing special: view the uint16 device array as uint32 or uint64 on the host
  (`p.feats.view(np.uint32)`: same memory, last axis D / 2 long) and index it as usual. Both the simulator
  and the GPU support `.view()` on device arrays.
- 16 bytes: Numba has no 128-bit integer, and neither a pair of uint64 loads nor a complex128 array gives
  one instruction (NVVM emits two 8-byte loads, since it cannot know the pair is 16-byte aligned). A small
  `numba.cuda.extending.intrinsic` (from cudabook.vectors) does: it loads a `<4 x i32>` LLVM vector through a
  pointer it promises is 16-byte aligned, which becomes `ld.global.v4.u32` in PTX and LDG.E.128 in SASS
  (stores: STG.E.128). In the simulator the same functions are plain Python.

Alignment: a wide access must start at an address that is a multiple of its width. Row r of feats starts
r * D * 2 bytes into the buffer, so every row is aligned for a width only when D * 2 is a multiple of it.
For other D the launch falls back to the widest width that divides D * 2 (down to 2 bytes: stage 02's
kernel), so any D is correct; only D with D * 2 a multiple of 16 gets the full width. Within a row the lanes
stride whole vectors, so any number of vectors per row (the last sweep of a warp partly idle) works.
"""
import numpy as np
from numba import cuda

from .. import SIMULATOR
from ..bits import bf16_to_f32, f32_to_bf16, lerp
from ..kit.numba_rung import specialise, twin
from ..vectors import loader, storer
from . import s02_warp_shuffles as s02
from .s02_warp_shuffles import WARP, warp_find_interval, warp_target, warp_weight

NAME = "03_coalesced"
TITLE = "wide, aligned accesses"
PARAMS = {"warps_per_block": 4, "vec_bytes": 16}

WIDTHS = (16, 8, 4, 2)
LAB_D_MULTIPLE = 8            # the lab's kernel moves 16 bytes (8 channels) per access: the grader's D fit that

# ----------------------------------------------------------------------------------------------------------
# 16-byte loads and stores: four consecutive uint32 words as one access (the intrinsics of cudabook.vectors)
# ----------------------------------------------------------------------------------------------------------
load_u32x4 = loader(4, 3)      # load_u32x4(a, b, r, i): words a[b, r, i:i+4] (i a multiple of 4), one 16-byte load
store_u32x4 = storer(4, 3)     # store_u32x4(a, b, r, i, w0, w1, w2, w3): a[b, r, i:i+4] = w0..w3, one 16-byte store


# ----------------------------------------------------------------------------------------------------------
# Interpolating packed bf16: a uint32 holds two channels (the lower address in the low half)
# ----------------------------------------------------------------------------------------------------------
@cuda.jit(device=True, forceinline=True)
def lerp_pair(a, c, w):
    """Two packed bf16 channels of each source row -> two packed bf16 outputs."""
    lo = f32_to_bf16(lerp(bf16_to_f32(a & np.uint32(0xFFFF)), bf16_to_f32(c & np.uint32(0xFFFF)), w))
    hi = f32_to_bf16(lerp(bf16_to_f32(a >> np.uint32(16)), bf16_to_f32(c >> np.uint32(16)), w))
    return np.uint32(np.uint32(lo) | (np.uint32(hi) << np.uint32(16)))


@cuda.jit(device=True, forceinline=True)
def lerp_quad(a, c, w):
    """Four packed bf16 channels (a uint64) of each source row -> four packed outputs."""
    low = lerp_pair(np.uint32(a & np.uint64(0xFFFFFFFF)), np.uint32(c & np.uint64(0xFFFFFFFF)), w)
    high = lerp_pair(np.uint32(a >> np.uint64(32)), np.uint32(c >> np.uint64(32)), w)
    return np.uint64(np.uint64(low) | (np.uint64(high) << np.uint64(32)))


# ----------------------------------------------------------------------------------------------------------
# The kernels: stage 02's warp per target, each lane moving 16, 8 or 4 bytes per access
# ----------------------------------------------------------------------------------------------------------
@cuda.jit
def resample_vec16(times, feats, targets, out):
    """feats and out viewed as uint32 ([B, S, D/2] and [B, T, D/2]); D * 2 a multiple of 16."""
    b, t, x, lane = warp_target(targets)
    if b < 0:
        return                       # the whole warp is past the end: all 32 lanes leave together
    # >>> lab: stage 02's search and weight, then each lane moves 16 bytes (4 words = 8 channels) at a time
    lo = warp_find_interval(times, b, x, lane)
    w = warp_weight(times, b, lo, x, lane)
    for i in range(4 * lane, feats.shape[2], 4 * WARP):
        a0, a1, a2, a3 = load_u32x4(feats, b, lo, i)
        c0, c1, c2, c3 = load_u32x4(feats, b, lo + 1, i)
        store_u32x4(out, b, t, i, lerp_pair(a0, c0, w), lerp_pair(a1, c1, w), lerp_pair(a2, c2, w),
                    lerp_pair(a3, c3, w))
    # <<< lab


@cuda.jit
def resample_vec4(times, feats, targets, out):
    """feats and out viewed as uint32 ([B, S, D/2] and [B, T, D/2]); D even."""
    b, t, x, lane = warp_target(targets)
    if b >= 0:
        lo = warp_find_interval(times, b, x, lane)
        w = warp_weight(times, b, lo, x, lane)
        for i in range(lane, feats.shape[2], WARP):
            out[b, t, i] = lerp_pair(feats[b, lo, i], feats[b, lo + 1, i], w)


# 8 bytes a lane: resample_vec4 compiled again with lerp_quad for lerp_pair, for feats and out viewed as uint64
# ([B, S, D/4] and [B, T, D/4]; D * 2 a multiple of 8), four channels a word
resample_vec8 = specialise(resample_vec4, lerp_pair=lerp_quad)


# width in bytes -> (kernel, dtype the uint16 arrays are viewed as)
KERNELS = {16: (resample_vec16, np.uint32), 8: (resample_vec8, np.uint64), 4: (resample_vec4, np.uint32),
           2: (s02.resample_warp, np.uint16)}


def vector_width(vec_bytes, D):
    """The widest access of at most vec_bytes that keeps every row of D bf16 channels aligned."""
    if vec_bytes not in WIDTHS:
        raise ValueError(f"vec_bytes must be one of {WIDTHS}, got {vec_bytes!r}")
    w = vec_bytes
    while (2 * D) % w:
        w //= 2
    return w


def _aligned(array, width):
    if SIMULATOR:
        return True
    return array.device_ctypes_pointer.value % width == 0


def prepare(p, vec_bytes):
    """(width, feats, out): the width this problem allows and the arrays viewed for it. Made once per problem
    and kept on it: a `.view()` costs tens of microseconds of host time, which a timed launch would pay."""
    cache = p.__dict__.setdefault("_s03_views", {})
    hit = cache.get(vec_bytes)
    if hit is None or hit[0] is not p.feats or hit[1] is not p.out:
        width = vector_width(vec_bytes, p.shape[3])
        while width > 2 and not (_aligned(p.feats, width) and _aligned(p.out, width)):
            width //= 2              # a device array that starts mid-allocation: be safe, go narrower
        view = KERNELS[width][1]
        hit = cache[vec_bytes] = (p.feats, p.out, width, p.feats.view(view), p.out.view(view))
    return hit[2:]


def launch(p, kernel=resample_vec16, warps_per_block=PARAMS["warps_per_block"], vec_bytes=PARAMS["vec_bytes"]):
    if not 1 <= warps_per_block <= 32:
        raise ValueError(f"warps_per_block must be in 1..32 (at most 1024 threads a block), got {warps_per_block}")
    B, S, T, D = p.shape
    width, feats, out = prepare(p, vec_bytes)
    if kernel is resample_vec16:     # the stage's own kernels: pick the one for this width
        kernel = KERNELS[width][0]
    elif width != vec_bytes:
        raise ValueError(f"this kernel moves {vec_bytes} bytes per access, which needs every row aligned: "
                         f"D * 2 = {2 * D} bytes must be a multiple of {vec_bytes} (and the arrays aligned)")
    if B * T == 0:
        return
    blocks, threads = s02.grid_for(p, warps_per_block)
    twin(kernel)[blocks, threads](p.times, feats, p.targets, out)


# ----------------------------------------------------------------------------------------------------------
# Pictures for the lesson: which bytes one warp-wide load touches
# ----------------------------------------------------------------------------------------------------------
SECTOR = 32   # bytes: the unit in which the memory system moves data


def lane_addresses(vec_bytes, D, row_base=0):
    """One warp-wide load of one feature row in this stage: [(lane, first_byte, last_byte)] of the lanes
    that load (the first sweep; a row of fewer than 32 vectors leaves lanes idle). The width is the one the
    launch would use for this D (narrower when D * 2 is not a multiple of vec_bytes)."""
    w = vector_width(vec_bytes, D)
    vectors = 2 * D // w
    return [(lane, row_base + lane * w, row_base + lane * w + w - 1) for lane in range(min(WARP, vectors))]


def naive_lane_addresses(D, row_base=0, d=0):
    """Stage 01's pattern for comparison: lane i serves target i and reads channel d of its own row; with
    sorted targets neighbouring rows sit D * 2 bytes apart (drawn here as rows row_base, +1, +2, ...)."""
    return [(lane, row_base + (lane * D + d) * 2, row_base + (lane * D + d) * 2 + 1) for lane in range(WARP)]


def transactions(addresses):
    """Distinct 32-byte sectors touched by a list of (lane, first_byte, last_byte)."""
    sectors = set()
    for _, first, last in addresses:
        sectors.update(range(first // SECTOR, last // SECTOR + 1))
    return len(sectors)
