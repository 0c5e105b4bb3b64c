"""05 TMA + WGMMA (CUDA C++, sm_90a): Q, K and V tiles by TMA, QKᵀ and PV on wgmma.

The kernel is kernels/wgmma_tma.cu (read its header comment). q, k and v are each described to TMA by one 3-D
tensor map ([B*H, N, d], boxes of [rows x 64 channels], 128-byte swizzle) from cuTensorMapEncodeTiled. A block
holds 64 query rows per warpgroup; thread 0 keeps a ring of `stages` K/V tiles filled; each warpgroup runs
S = Q Kᵀ as wgmma m64n{bkv}k16 from shared memory, the online softmax in registers, and O += P V as wgmma
m64n{d}k16 with P (bf16) straight from registers. Every step waits for the one before: rung 06 overlaps them.

The wgmma, TMA and mbarrier pieces are the kit's (kit/include/hopper.cuh), one copy.
"""
from __future__ import annotations

import ctypes
import pathlib

from .. import device
from ..kit.rung import WGMMA_LOG_MISTAKES, CudaRung, tensor_map
from .problem import check_config, rule_broken, start_launch

NAME = "05_wgmma_tma"
TITLE = "TMA tiles and wgmma for both products (C++, sm_90a)"
PARAMS = {
    "warpgroups": 2,   # warpgroups a block; each owns 64 query rows
    "bkv": None,       # keys a tile: 64 or 128 (the N of the QKᵀ wgmma); None: 128 at d = 128, 64 at d = 64
                       # (B=4 H=16 N=4096 d=128, lesson 05's recorded sweep: 64 -> 472, 128 -> 519 TFLOP/s on
                       # the H100 at e91ef37, 467 and 519 on the H200 at 1f81ea4; d=64 has no recorded sweep:
                       # 397 and 363 on the H100 while the rung was built, with no commit)
    "stages": 2,       # K/V tiles in the TMA ring
}
HEAD_DIMS = (64, 128)
KERNEL_DIR = pathlib.Path(__file__).parent / "kernels"
SOURCE = KERNEL_DIR / "wgmma_tma.cu"
KERNEL = "attention_wgmma"
ARG_TYPES = (None, None, None, ctypes.c_void_p, ctypes.c_int, ctypes.c_int, ctypes.c_float)
COMPILE_LOG_MISTAKES = WGMMA_LOG_MISTAKES   # what ptxas says when wgmma accumulators are touched too early
RUNG = CudaRung(NAME, SOURCE, sm90a=True)
EMULATED = True               # without a GPU the lab grader runs this kernel on the CPU (cudabook.emulate: TMA, wgmma)
# The lab grader runs its cases at the default key tile (BKV = d: S and O have the same width) and with 64-key
# tiles, where at d = 128 S is half O's width: a loop over S's column blocks written over O's (or the other way)
# passes at the default and fails there.
GRADING_VARIANTS = [{}, {"bkv": 64}]
source, unavailable = RUNG.source, RUNG.unavailable


def config(d: int, causal: bool, warpgroups=PARAMS["warpgroups"], bkv=PARAMS["bkv"], stages=PARAMS["stages"]) -> dict:
    bkv = (128 if d == 128 else 64) if bkv is None else bkv
    check_config(NAME, d, HEAD_DIMS, rule_broken("warpgroups", warpgroups, (1, 2, 3), "1, 2 or 3"),
                 rule_broken("bkv", bkv, (64, 128), "64 or 128"),
                 rule_broken("stages", stages, range(1, 5), "1 to 4", whole=True))
    return dict(D=int(d), WGS=int(warpgroups), BKV=int(bkv), STAGES=int(stages), CAUSAL=int(bool(causal)))


def smem_bytes(cfg: dict) -> int:
    """Mirrors SMEM_BYTES in wgmma_tma.cu: 1024 to align, Q, the ring of K and V tiles, the mbarriers."""
    return 1024 + 64 * cfg["WGS"] * cfg["D"] * 2 + cfg["STAGES"] * 2 * cfg["BKV"] * cfg["D"] * 2 + 8 * (cfg["STAGES"] + 1)


def tensor_maps(B, H, Nq, Nk, d, **params) -> dict:
    """The check_tiled arguments of the three maps: [B*H, N, d] bf16, boxes of [1, rows, 64], 128B swizzle."""
    cfg = config(d, False, **params)
    def one(n, rows):
        return dict(dtype="bfloat16", shape=(B * H, n, d), strides=(n * d * 2, d * 2, 2), box=(1, rows, 64),
                    swizzle="128B", l2_promotion="256B")
    return {"q": one(Nq, 64 * cfg["WGS"]), "k": one(Nk, cfg["BKV"]), "v": one(Nk, cfg["BKV"])}


def compile_cubin(arch="sm_90a", d: int = 128, causal: bool = False, source_text=None, **params) -> bytes:
    return RUNG.compile(config(d, causal, **params), arch=arch, source_text=source_text)


def launch(p, kernel=None, **params):
    """Enqueue 05 on the legacy default stream. `kernel`: the CUDA C++ text of a whole wgmma_tma.cu to use
    instead (a learner's)."""
    params = start_launch(p, NAME, PARAMS, params, unavailable(), HEAD_DIMS)
    if params is None:
        return
    cfg = config(p.shape[-1], p.causal, **params)
    launch_tma(p, RUNG, RUNG.text(kernel), KERNEL, cfg, smem_bytes(cfg), tensor_maps(*p.shape, **params),
               rows=64 * cfg["WGS"], threads=128 * cfg["WGS"])


def launch_tma(p, rung, text, kernel_name, cfg, smem, maps, *, rows, threads, grid=None, more=()):
    """Compile (cached), encode the q, k, v tensor maps and launch one block per `rows` queries of each head:
    what rungs 05 and 06 launch the same way. `grid`: another grid (rung 06's persistent one); `more`: (value,
    ctypes type) of each argument after the common ones."""
    B, H, Nq, Nk, d = p.shape
    kern = rung.prepare(text, cfg, kernel_name, smem=smem)[kernel_name]
    args = [tensor_map(maps["q"], device.address(p.q)), tensor_map(maps["k"], device.address(p.k)),
            tensor_map(maps["v"], device.address(p.v)), device.address(p.out), Nq, Nk, p.scale_log2,
            *(value for value, _ in more)]
    kern.launch(grid or (-(-Nq // rows), B * H), threads, args, ARG_TYPES + tuple(kind for _, kind in more),
                shared=smem)
