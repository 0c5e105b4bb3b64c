"""08 fused search and gather: what torch.compile generates, without its index array (sm_80 and newer).

torch.compile turns the reference's searchsorted + gather + lerp into two Triton kernels: a search that writes
every target's index to memory, and a gather that reads them back and streams the rows (the lesson reads the code
it generates, in results/inductor/). Its gather owes its speed to what it leaves out: no shared memory, no
windows, no barriers, blocks of a few rows that start and finish in many waves; every thread loads its 16-byte
pieces straight from global memory, and L1 and L2 catch the second read of a row that neighbouring targets share.

This stage is that gather with the search folded in. A warp owns `targets_per_warp` consecutive targets of one
batch row, one a lane (by default as many as make 128 output vectors: 4 at D = 256). search="window": the warp
copies 128 source times into shared memory and each lane searches its own target there. The window is first the one
around an interpolation guess (where the warp's smallest target would sit if the times were evenly spread from the
row's first to its last: one round of loads); if some target is not inside, the one that 64 probes of the row point
to; a target outside that too searches the whole row (any order of targets is right). Then the warp sweeps its
targets' elements, lanes fastest: an element is `vectors_per_lane` 16-byte pieces of a target's row, half a row
apart at 2, so in each load lanes side by side read pieces side by side, and each element gets its target's interval
and weight from the owning lane by a shuffle. search="lane" is a plain binary search per lane; search="prepass" is
torch.compile's arrangement (a first kernel writes every (interval, weight) pair), with programmatic dependent
launch so that the gather's blocks start while the search still runs.

Any D works (vectors of 8, 4, 2 or 1 channels, the largest that divides D) and any order of targets.
"""
from __future__ import annotations

import ctypes
import math
import numbers
import re

from .. import device, nvrtc
from ..kit.rung import CudaRung
from . import s06_cp_async as s06

NAME = "08_fused_gather"
TITLE = "fused search and gather"
PARAMS = {
    "search": "window",        # "window": each lane searches a window of source times in shared memory (the
                               # window around an interpolation guess, else where 64 probes point); "lane": each
                               # lane binary-searches the whole row; "prepass": a first kernel finds them all (as
                               # torch.compile does)
    "pdl": True,               # programmatic dependent launch (Hopper): a kernel is launched once every block of
                               # the kernel before it has triggered (run launch_dependents, or exited) and waits
                               # for it (griddepcontrol.wait) before it reads anything. The last call's gather
                               # never triggers, so this hides the gap after it, not its tail; the prepass
                               # triggers right after its own wait, so the gather's blocks may run beside the
                               # search
    "trigger": False,          # (pdl) the gather runs griddepcontrol.launch_dependents right after its wait, so
                               # the next call's blocks may be launched while this one's last wave still runs
    "targets_per_warp": "auto",  # TPW: consecutive targets a warp owns (1..32: one a lane). Few keep warps
                               # short-lived, so many waves of blocks stream through memory; the search is paid
                               # per TPW. "auto": 128 vectors a warp, 4 a lane (TPW 4 at D = 256, 16 at 64, 2 at 512)
    "vectors_per_lane": 2,     # PPL: vectors a lane loads from each of its two rows in one sweep, half a row
                               # apart at 2 (all from one address); fewer when a row's vector count is not a multiple
    "unroll": 1,               # UNROLL: elements a lane loads before it uses any (each 2 x PPL loads: PPL
                               # vectors of both rows)
    "threads": 128,            # threads per block (whole warps; each warp is independent)
    "min_blocks": 16,          # blocks per SM the compiler must make room for (__launch_bounds__' second
                               # argument: 16 blocks of 128 threads caps a thread at 32 registers); 0: no cap
    "streaming_stores": False, # st.global.cs (evict-first) for the stores
    "bf16_cvt": True,          # round with cvt.rn.bf16x2.f32; False: the integer recipe (same results)
}
# the grader runs each case twice: the lab region reads PPL and UNROLL, each at two values
GRADING_VARIANTS = [{}, {"vectors_per_lane": 1, "unroll": 2}]
ADDED_PARAMS = {"trigger": False}   # what records older than this setting ran (results.not_today)
MIN_CC = (8, 0)
EMULATED = True               # without a GPU the lab grader runs this kernel on the CPU (cudabook.emulate)
ASYNC_COPIES = False          # no cp.async or TMA: the grader need not emulate copies landing late and early
KERNEL_DIR = s06.KERNEL_DIR
SOURCE = KERNEL_DIR / "fused_gather.cu"


def _own_values_used(code: str) -> bool:
    """Does the lab code use this lane's `src`, `dst32` or `wt` other than as the value a shuffle passes on?"""
    passed_on = re.sub(r"__shfl_sync\s*\([^,]*,\s*(src|dst32|wt)\s*,", "", code)
    return re.search(r"\b(src|dst32|wt)\b", passed_on) is not None


def _shuffles_from_own_lane(code: str) -> bool:
    """Does the lab code shuffle from `lane`, this lane's own index (so every lane reads back its own value)?"""
    return re.search(r"__shfl_sync\s*\([^,]*,[^,]*,\s*lane\s*\)", code) is not None


LAB_TEXT_HINTS = [(_shuffles_from_own_lane,
                   "your code shuffles from `lane`, this lane's own index, so each lane reads back its own value. "
                   "Ask the lane that owns the element's target: __shfl_sync(0xffffffffu, value, i), i = e / EPR"),
                  (_own_values_used,
                   "your code uses this lane's own `src`, `dst32` or `wt` outside a shuffle. Lane i holds target "
                   "i's values; an element of target i must get them from lane i: __shfl_sync(0xffffffffu, value, i)")]
KERNEL = "resample_fused"
FIND = "resample_find"        # the prepass kernel (search="prepass")
RUNG = CudaRung(NAME, SOURCE, min_cc=MIN_CC)
source, unavailable = RUNG.source, RUNG.unavailable


def vector_width(D: int) -> int:
    """Channels per load: 8 (16 bytes) when rows are whole 16-byte pieces, else 4, 2 or 1."""
    return next(v for v in (8, 4, 2, 1) if D % v == 0)


def vectors_per_row(D: int) -> int:
    """VPR: the vectors (of vector_width(D) channels) in a row."""
    return D // vector_width(D)


SEARCHES = {"lane": 0, "window": 1, "prepass": 2}                # the kernel's SEARCH


def _whole(n) -> bool:
    """An integer (a bool is not a count)."""
    return isinstance(n, numbers.Integral) and not isinstance(n, bool)


VECTORS_A_WARP = 128            # targets_per_warp="auto": a warp's targets make about this many output vectors


def auto_targets_per_warp(D: int) -> int:
    """targets_per_warp="auto": as many targets as make 128 output vectors (4 a lane), at least 1 and at most 32."""
    return max(1, min(32, VECTORS_A_WARP // vectors_per_row(D)))


def lane_vectors(D: int, wanted: int) -> int:
    """The PPL the kernel uses: the largest count up to `wanted` that divides a row's vectors (1 for odd rows)."""
    return next(n for n in range(wanted, 0, -1) if vectors_per_row(D) % n == 0)


def config(D: int, search=PARAMS["search"], targets_per_warp=PARAMS["targets_per_warp"], unroll=PARAMS["unroll"], threads=PARAMS["threads"],
           min_blocks=PARAMS["min_blocks"], streaming_stores=PARAMS["streaming_stores"],
           bf16_cvt=PARAMS["bf16_cvt"], vectors_per_lane=PARAMS["vectors_per_lane"],
           trigger=PARAMS["trigger"]) -> dict:
    """The kernel's compile-time constants for D channels and these parameters."""
    if not (1 <= unroll <= 16) or threads < 32 or threads % 32 or threads > 1024:
        raise ValueError(f"{NAME}: need 1 <= unroll <= 16 and threads a multiple of 32 in 32..1024; "
                         f"got unroll={unroll}, threads={threads}")
    if targets_per_warp == "auto":
        targets_per_warp = auto_targets_per_warp(D)
    if not (_whole(targets_per_warp) and 1 <= targets_per_warp <= 32):
        raise ValueError(f"{NAME}: targets_per_warp must be 1..32 (one a lane) or \"auto\", got {targets_per_warp!r}")
    if not (_whole(vectors_per_lane) and 1 <= vectors_per_lane <= 8):
        raise ValueError(f"{NAME}: vectors_per_lane must be 1..8, got {vectors_per_lane!r}")
    if search not in SEARCHES:
        raise ValueError(f"{NAME}: search must be one of {sorted(SEARCHES)}, got {search!r}")
    return dict(DCH=int(D), VEC=vector_width(D), NT=int(threads), UNROLL=int(unroll), SEARCH=SEARCHES[search],
                TPW=int(targets_per_warp), PPL=lane_vectors(D, int(vectors_per_lane)), MINB=max(1, int(min_blocks)),
                STREAM=int(bool(streaming_stores)), BF16_CVT=int(bool(bf16_cvt)), TRIGGER=int(bool(trigger)))


_CONFIG_KEYS = ("search", "targets_per_warp", "unroll", "threads", "min_blocks", "streaming_stores", "bf16_cvt",
                "vectors_per_lane", "trigger")


def compile_cubin(arch: str | None = "sm_90a", D: int = 256, source_text: str | None = None, **params) -> bytes:
    """The cubin for D channels (needs no GPU: arch defaults to sm_90a; None means this GPU's)."""
    cfg = config(D, **{k: v for k, v in params.items() if k in _CONFIG_KEYS})
    return RUNG.compile(cfg, arch=arch, source_text=source_text)


ARG_TYPES = (ctypes.c_void_p,) * 4 + (ctypes.c_int,) * 3 + (ctypes.c_void_p,)
FIND_TYPES = (ctypes.c_void_p,) * 3 + (ctypes.c_int,) * 3


def warps(B: int, T: int, cfg: dict) -> int:
    """Warps with work: one per TPW consecutive targets of a batch row."""
    return B * math.ceil(T / cfg["TPW"])


def blocks(B: int, T: int, cfg: dict) -> int:
    """The grid: enough blocks for every warp."""
    return math.ceil(warps(B, T, cfg) / (cfg["NT"] // 32))


def plan(p, **params) -> dict:
    """What launch() would do for this problem: the constants and the grid."""
    B, S, T, D = p.shape
    params = {**PARAMS, **params}
    cfg = config(D, **{k: params[k] for k in _CONFIG_KEYS})
    n = warps(B, T, cfg)
    return dict(config=cfg, warps=n, blocks=blocks(B, T, cfg))


def launch(p, kernel=None, **params):
    """Enqueue 08 on the legacy default stream. `kernel`: CUDA C++ source text to use instead of
    kernels/fused_gather.cu (a learner's version with the same kernel name), compiled with this stage's
    constants."""
    B, S, T, D = p.shape
    params = RUNG.params(PARAMS, params)
    vectors = B * max(S, T) * vectors_per_row(D)
    if vectors >= 2 ** 31:
        raise ValueError(f"{NAME}: feats or out holds B * max(S, T) * D = {B * max(S, T) * D:,} elements, "
                         f"{vectors:,} vectors of {vector_width(D)}; this kernel's offsets are 32-bit, so that many "
                         f"vectors must stay below 2**31")
    if T == 0:
        return
    RUNG.require()
    cfg = config(D, **{k: params[k] for k in _CONFIG_KEYS})
    text = RUNG.text(kernel)
    prep = RUNG.prepare(text, cfg, (KERNEL, FIND))
    kern, find = prep[KERNEL], prep[FIND]
    grid = blocks(B, T, cfg)
    # programmatic dependent launch needs Hopper (sm_90): griddepcontrol.wait exists only there. A kernel is
    # launched with it only when its source waits (a learner's copy without griddepcontrol.wait would race the
    # kernel before it: launched the ordinary way); resample_find only when it waits before it triggers
    hopper = bool(params["pdl"]) and device.gpu().compute_capability >= (9, 0)
    pairs = 0
    if cfg["SEARCH"] == SEARCHES["prepass"]:
        pairs = device.address(_pairs(p))
        find.launch(math.ceil(B * T / 256), 256, [device.address(p.times), device.address(p.targets), pairs, B, S, T],
                    FIND_TYPES, pdl=hopper and nvrtc.waits_before_trigger(text, FIND))
    args = [device.address(p.times), device.address(p.feats), device.address(p.targets), device.address(p.out),
            B, S, T, pairs]
    kern.launch(grid, cfg["NT"], args, ARG_TYPES, pdl=hopper and nvrtc.waits_for_prerequisite(text, KERNEL))


def _pairs(p):
    """The prepass's (interval, weight) pairs for this problem: one int2 per target, allocated once."""
    B, S, T, D = p.shape
    if getattr(p, "_pairs08", None) is None or p._pairs08.size != 2 * B * T:
        from numba import cuda
        import numpy as np
        p._pairs08 = cuda.device_array(2 * B * T, np.int32)
    return p._pairs08
