"""04 TMA boxes (Hopper, sm_90a): each sample's 2 x 2 x D corners as one TMA box, zero fill for the borders.

The kernel is CUDA C++ in kernels/tma_boxes.cu (read its header comment), compiled by NVRTC. The host describes
value to the copy engine level by level: a tensor map per level over value viewed as [N, H_l, W_l, M, D] (5-D,
the level's rows of value), box (1, 2, 2, 1, D), encoded by cudabook.tma.encode_tiled (its rules checked
first). A producer warp issues one box per sample into a ring of shared-memory slots; consumer warps blend the
corners. Without a GPU, the lab grader runs it in cudabook.emulate (boxes filled by cudabook.tma.load_box).
"""
from __future__ import annotations

import ctypes
import pathlib

from .. import device
from ..kit.params import check_settings
from ..kit.rung import CudaRung
from .problem import start_launch

NAME = "04_tma_boxes"
TITLE = "TMA: one 2x2xD box per sample"
PARAMS = {
    "consumer_warps": 2,   # NCW: consumer warps (plus one producer warp)
    "depth": 1,            # slots in flight per consumer warp (the ring has consumer_warps * depth slots); a small
                           # ring lets more blocks, so more producers, share an SM: what the lesson's sweeps show
    "blocks_per_sm": 0,    # 0: as many as fit
    "blocks": 0,           # 0: fill the GPU; else exactly this many
    "strided": False,      # False: every block walks a contiguous run of items, so the blocks in flight spread over
                           # all the images; True: block b takes items b, b + blocks, ..., so they work side by side
}
ADDED_PARAMS = {"strided": False}   # records older than this setting ran the contiguous runs (results.not_today)
MIN_CC = (9, 0)
EMULATED = True            # without a GPU the lab grader runs this kernel on the CPU (cudabook.emulate)
MAX_LEVELS = 8
KERNEL_DIR = pathlib.Path(__file__).parent / "kernels"
SOURCE = KERNEL_DIR / "tma_boxes.cu"          # on the kit's hopper.cuh: mbarriers, TMA
KERNEL = "msda_tma_boxes"
RUNG = CudaRung(NAME, SOURCE, min_cc=MIN_CC)
source, unavailable = RUNG.source, RUNG.unavailable


def config(D: int, L: int, P: int, consumer_warps=PARAMS["consumer_warps"], depth=PARAMS["depth"],
           strided=PARAMS["strided"]) -> dict:
    if not 1 <= L <= MAX_LEVELS:
        raise ValueError(f"{NAME}: at most {MAX_LEVELS} levels (one tensor map each, passed by value), got L = {L}")
    check_settings(NAME, threads=(consumer_warps + 1) * 32 if isinstance(consumer_warps, int) else consumer_warps,
                 depth=(depth, 1), consumer_warps=(consumer_warps, 1))
    if not isinstance(strided, bool):
        raise ValueError(f"{NAME}: strided is True or False, got {strided!r}")
    return dict(DV=int(D), LV=int(L), PV=int(P), NCW=int(consumer_warps), DEPTH=int(depth), STRIDED=int(strided))


def _round_up(x, m):
    return -(-x // m) * m


def smem_bytes(cfg: dict) -> int:
    """Dynamic shared memory per block; mirrors SMEM_BYTES in tma_boxes.cu (which checks it at compile time)."""
    lp = cfg["LV"] * cfg["PV"]
    slot = _round_up(lp * _round_up(8 * cfg["DV"], 128) + 16 * lp, 128)
    stages = cfg["NCW"] * cfg["DEPTH"]
    return stages * slot + 16 * stages + 128


def compile_cubin(arch: str | None = "sm_90a", D: int = 32, L: int = 4, P: int = 4, source_text: str | None = None,
                  **params) -> bytes:
    """The cubin for these sizes (needs no GPU: arch defaults to sm_90a)."""
    cfg = config(D, L, P, **{k: v for k, v in params.items() if k in ("consumer_warps", "depth", "strided")})
    return RUNG.compile({**cfg, "EXPECT_SMEM": smem_bytes(cfg)}, arch=arch, source_text=source_text)


class _MapArray:
    """The kernel's `Maps` parameter: MAX_LEVELS tensor maps of 128 bytes, passed by value (getPtr())."""

    def __init__(self, maps):
        from .. import tma
        raw = b"".join(tma.tensor_map_bytes(m) for m in maps)
        self.buffer = (ctypes.c_ubyte * (128 * MAX_LEVELS)).from_buffer_copy(raw.ljust(128 * MAX_LEVELS, b"\0"))
        self.maps = maps                               # (the driver's objects, kept alive)

    def getPtr(self):
        return ctypes.addressof(self.buffer)


def level_maps(p):
    """One tensor map per level over value viewed as [N, H_l, W_l, M, D] bf16, box (1, 2, 2, 1, D)."""
    from .. import tma
    N, S, M, D, Lq, L, P = p.shape
    base = device.address(p.value)
    maps = []
    from .inputs import level_starts
    levels = p.host_shapes.tolist()
    for (H, W), start in zip(levels, level_starts(levels).tolist()):
        maps.append(tma.encode_tiled("bfloat16", (N, H, W, M, D), (S * M * D * 2, W * M * D * 2, M * D * 2, D * 2, 2),
                                     (1, 2, 2, 1, D), base + start * M * D * 2, l2_promotion="128B"))
    return _MapArray(maps)


ARG_TYPES = (None,) + (ctypes.c_void_p,) * 4 + (ctypes.c_int,) * 3
def launch(p, kernel=None, **params):
    """Enqueue 04 on the legacy default stream. `kernel`: CUDA C++ source text to use instead of
    kernels/tma_boxes.cu (a learner's version with the same kernel name)."""
    params = start_launch(p, NAME, PARAMS, params, unavailable())
    if params is None:
        return
    N, S, M, D, Lq, L, P = p.shape
    items = N * Lq * M
    cfg = config(D, L, P, params["consumer_warps"], params["depth"], params["strided"])
    smem = smem_bytes(cfg)
    prep = RUNG.prepare(RUNG.text(kernel), {**cfg, "EXPECT_SMEM": smem}, KERNEL, smem=smem,
                        threads=(cfg["NCW"] + 1) * 32, advice="fewer consumer_warps or a smaller depth")
    grid = min(items, params["blocks"] or prep.slots(params["blocks_per_sm"]))
    args = [level_maps(p), device.address(p.shapes), device.address(p.loc), device.address(p.attn),
            device.address(p.out), N, Lq, M]
    prep.main.launch(grid, (cfg["NCW"] + 1) * 32, args, ARG_TYPES, shared=smem)
