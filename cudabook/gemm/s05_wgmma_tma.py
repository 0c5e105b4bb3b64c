"""05 TMA + WGMMA (Hopper, sm_90a): the tensor cores fed straight from shared memory.

One block per BM x BN tile of C (BM = 64 rows per warpgroup). Thread 0 asks the Tensor Memory Accelerator for
each k-tile's boxes of A ([BM x 64], K-major) and B (BN/64 boxes of [64 x 64], N contiguous: MN-major), 128-byte
swizzled, into a ring of `stages` shared-memory stages; they complete on the stage's mbarrier. Each warpgroup
then runs four `wgmma.mma_async m64nBNk16` on them, fp32 accumulators in registers, and a __syncthreads lets
thread 0 refill the stage. TMA zero-fills what lies outside A and B, so ragged M, N and K need no code in the
loop; K or N not a multiple of 8 cannot be described to TMA at all (a row stride must be a multiple of 16
bytes): the host pads them (Problem.aligned) and copies C's corner back. `tensor_maps(M, N, K)` lists the maps
(the arguments of cudabook.tma.check_tiled); `tensor_maps(..., padded=False)` the ones the host would need
without padding, which check_tiled refuses with its reason.

What 06 and 07 share with it (padding, tensor maps, the launch path) is in cudabook/gemm/hopper.py.
"""
from __future__ import annotations

import math
import pathlib

from ..kit.rung import CudaRung
from ..kit.stamps import Point
from .hopper import (ALIGN, ARG_TYPES, BK, COMPILE_LOG_MISTAKES, WATCHDOG_S, enqueue, launcher,  # noqa: F401
                     map_args, padded, pointer, prepare)

NAME = "05_wgmma_tma"
TITLE = "TMA + WGMMA"
PARAMS = {
    "bn": 128,         # tile width BN (64, 128 or 256): each warpgroup runs m64nBNk16, BN/2 fp32 accumulators
                       # a thread
    "warpgroups": 2,   # warpgroups of 128 threads; the tile is BM = 64 * warpgroups rows
    "stages": 4,       # depth of the TMA ring (each stage BM*64*2 + 64*BN*2 bytes of shared memory)
}
# the grader runs each case twice: the lab region reads the tile's sizes (BN, the warpgroup's rows, the stage's
# bytes), each at two values
GRADING_VARIANTS = [{}, {"bn": 64, "warpgroups": 1, "stages": 2}]
MIN_CC = (9, 0)
KERNEL_DIR = pathlib.Path(__file__).resolve().parent / "kernels"
SOURCE = KERNEL_DIR / "wgmma_tma.cu"
KERNEL = "gemm_wgmma_tma"
STAMPS = (   # cudabook.kit.stamps: where tools/probe_stamps.py stamps this kernel (a state begins at each)
    Point("wait full", r"mbar_wait\(full", before=True), Point("mma", r"mbar_wait\(full"),
    Point("release", r"wgmma_wait<0>\(\);"), Point("issue", r"if \(tid == 0 && kt \+ STAGES < k_tiles\)", before=True),
    Point("epilogue", r"wgmma_keep\(d\);"))
RUNG = CudaRung(NAME, SOURCE, sm90a=True)
EMULATED = True               # without a GPU the lab grader runs this kernel on the CPU (cudabook.emulate: TMA, wgmma)
source, unavailable = RUNG.source, RUNG.unavailable


def config(bn=PARAMS["bn"], warpgroups=PARAMS["warpgroups"], stages=PARAMS["stages"]) -> dict:
    """The kernel's compile-time constants."""
    if bn not in (64, 128, 256):
        raise ValueError(f"{NAME}: bn must be 64, 128 or 256, got {bn}")
    if not (1 <= warpgroups <= 4 and 1 <= stages <= 16):
        raise ValueError(f"{NAME}: need 1 <= warpgroups <= 4 and 1 <= stages <= 16")
    return dict(BN=int(bn), WGS=int(warpgroups), STAGES=int(stages))


def smem_bytes(cfg: dict) -> int:
    """Mirrors SMEM_BYTES in wgmma_tma.cu."""
    bm = 64 * cfg["WGS"]
    return 1024 + cfg["STAGES"] * (bm * BK * 2 + BK * cfg["BN"] * 2) + 8 * cfg["STAGES"]


def tensor_maps(M, N, K, padded_rows=True, **params) -> dict:
    """The check_tiled arguments of the maps this stage encodes for an M x N x K product."""
    cfg = config(**RUNG.params(PARAMS, params))
    return map_args(M, N, K, bm=64 * cfg["WGS"], bn=cfg["BN"], padded_rows=padded_rows)


def compile_cubin(arch="sm_90a", source_text=None, **params) -> bytes:
    """The cubin (needs no GPU)."""
    return RUNG.compile(config(**RUNG.params(PARAMS, params)), arch=arch, source_text=source_text)


_recent: dict = {}


def launch(p, kernel=None, **params):
    """Enqueue 05 on the legacy default stream (no synchronisation). `kernel`: the CUDA C++ text of a whole
    wgmma_tma.cu to use instead (a learner's), compiled with this stage's constants."""
    enqueue(RUNG, PARAMS, _recent, p, kernel, params, _build)


def _build(p, kernel, params):
    M, N, K = p.shape
    cfg = config(**params)
    smem = smem_bytes(cfg)
    kern, c, Kp, Np, (ma, mb) = prepare(RUNG, KERNEL, p, kernel, cfg, smem, bm=64 * cfg["WGS"], bn=cfg["BN"])
    grid = (math.ceil(Np / cfg["BN"]), math.ceil(M / (64 * cfg["WGS"])))
    args = [ma, mb, pointer(c), M, Np, Kp]
    threads = 128 * cfg["WGS"]
    return launcher(p, c, lambda: kern.launch(grid, threads, args, ARG_TYPES, shared=smem))
