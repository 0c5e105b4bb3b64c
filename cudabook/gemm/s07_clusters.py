"""07 Clusters (Hopper, sm_90a): TMA multicast of the shared operand and a TMA-store epilogue.

06's persistent warp-specialised kernel, run in thread-block clusters of `cluster` blocks stacked along M: they
need the same B tile, so each block loads a 1/cluster share of B's boxes and TMA multicasts them into every
block of the cluster (B leaves L2 once per cluster). A stage may be refilled only when the consumers of every
block are done with it: each consumer warpgroup arrives on "empty" in every block of the cluster. The epilogue
stages the bf16 tile in shared memory, 128-byte swizzled, and stores it with TMA (tma_store=True), which clips
at C's edges; mma_depth=1 keeps one k-tile of wgmmas in flight while the next is issued.

Tensor maps, padding and launching as in 05 (cudabook.gemm.hopper); 07 adds C's map (box 64 x 64).
"""
from __future__ import annotations

import ctypes
import math
import pathlib

from .. import device
from ..kit.rung import CudaRung
from ..kit.stamps import Point
from . import hopper

NAME = "07_clusters"
TITLE = "clusters, TMA multicast, TMA store"
PARAMS = {
    "bn": 256,              # tile width BN (128 or 256); BM = 64 * consumers
    "consumers": 2,         # consumer warpgroups (plus one producer warpgroup)
    "stages": 4,            # ring depth (48 KiB a stage at 128 x 256): 4 stages + 2 staging boxes a consumer fill
                            # 226 KiB of the 227 (one H100 run while this rung was built, not a record, and
                            # above what the records show: 4 stages / 2 boxes 772 and 820 TFLOP/s at 4096^3 and
                            # 8192^3, 3 stages / whole-tile staging 765 and 819)
    "cluster": 2,           # blocks per cluster, stacked along M, sharing (multicasting) B: 1, 2 or 4
                            # (H100, 3 stages, TFLOP/s at 4096^3 / 8192^3: 1 -> 712 / 684, 2 -> 750 / 797,
                            # 4 -> 620 / 726)
    "group_m": 8,           # cluster tile rows walked together by the grouped tile order
    "producer_regs": 40,    # setmaxnreg.dec for the producer warpgroup
    "consumer_regs": 232,   # setmaxnreg.inc for the consumers
    "tma_store": True,      # epilogue through shared memory and a TMA store (False: 06's register stores)
    "mma_depth": 1,         # k-tiles of wgmmas left running when the next is issued (0 or 1)
    "multicast": 1,         # B across the cluster: 1 each block multicasts its share of B's boxes, 2 block 0
                            # multicasts all of them, 0 no multicast (every block loads its own B)
                            # (H100, 8192^3: 1 -> 797, 2 -> 793, 0 -> 781 TFLOP/s)
    "stmatrix": True,       # stage C with stmatrix (four 8 x 8 matrices an instruction) instead of st.shared.u32
                            # (H100: no measurable difference, 765 vs 763 TFLOP/s at 4096^3)
    "store_boxes": 2,       # 64 x 64 staging buffers a consumer warpgroup for the TMA store (0: bn / 64, the
                            # whole tile; fewer leave room for another stage: the boxes take turns)
    "blocks": 0,            # 0: as many clusters as fit at once (no more than there is work for); else this
                            # many blocks (a multiple of cluster)
}
MIN_CC = (9, 0)
SOURCE = pathlib.Path(__file__).resolve().parent / "kernels" / "clusters.cu"
KERNEL = "gemm_clusters"
STAMPS = (   # cudabook.kit.stamps: where tools/probe_stamps.py stamps this kernel (a state begins at each; the
    # k-loop's release is stamped in both MMA_DEPTH branches, and the drain after the loop at depth 1)
    Point("wait empty", r"mbar_wait\(empty", before=True), Point("issue", r"mbar_wait\(empty"),
    Point("tile", r"d\[i\] = 0\.f;"), Point("wait full", r"mbar_wait\(full", before=True),
    Point("mma", r"mbar_wait\(full"), Point("release", r"wgmma_wait<[01]>\(\);", nth=0),
    Point("release", r"wgmma_wait<[01]>\(\);", nth=1), Point("drain", r"wgmma_wait<[01]>\(\);", nth=2, before=True),
    Point("epilogue", r"wgmma_keep\(d\);"))
ARG_TYPES = (None, None, None, ctypes.c_void_p, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_float)
COMPILE_LOG_MISTAKES = hopper.COMPILE_LOG_MISTAKES   # the lab grader reads what ptxas says about the wgmmas
WATCHDOG_S = hopper.WATCHDOG_S
RUNG = CudaRung(NAME, SOURCE, sm90a=True)
EMULATED = True               # without a GPU the lab grader runs this kernel on the CPU (cudabook.emulate)
source, unavailable = RUNG.source, RUNG.unavailable


def config(bn=256, consumers=2, stages=4, cluster=2, group_m=8, producer_regs=40, consumer_regs=232,
           tma_store=True, mma_depth=1, multicast=1, stmatrix=True, store_boxes=2, blocks=0) -> dict:
    if bn not in (128, 256):
        raise ValueError(f"{NAME}: bn must be 128 or 256, got {bn}")
    if cluster not in (1, 2, 4) or (bn // 64) % cluster:
        raise ValueError(f"{NAME}: cluster must be 1, 2 or 4 and divide bn / 64 (the B boxes shared out)")
    if not (1 <= consumers <= 3 and 1 <= stages <= 16 and group_m >= 1 and mma_depth in (0, 1)):
        raise ValueError(f"{NAME}: need 1 <= consumers <= 3, 1 <= stages <= 16, group_m >= 1, mma_depth 0 or 1")
    store_boxes = min(store_boxes, bn // 64)
    if not 0 <= store_boxes <= bn // 64:
        raise ValueError(f"{NAME}: store_boxes must be 0 (all) or 1 .. bn / 64")
    if blocks < 0 or blocks % cluster:
        raise ValueError(f"{NAME}: blocks must be 0 or a multiple of cluster ({cluster})")
    hopper.check_registers(NAME, consumers, producer_regs, consumer_regs)
    return dict(BN=int(bn), CONSUMERS=int(consumers), STAGES=int(stages), CLUSTER=int(cluster),
                GROUP_M=int(group_m), PRODUCER_REGS=int(producer_regs), CONSUMER_REGS=int(consumer_regs),
                TMA_STORE=int(bool(tma_store)), MMA_DEPTH=int(mma_depth), STORE_BOXES=int(store_boxes or bn // 64),
                MULTICAST=int(multicast),
                STMATRIX=int(bool(stmatrix)))


def smem_bytes(cfg: dict) -> int:
    """Mirrors SMEM_BYTES in clusters.cu."""
    bm = 64 * cfg["CONSUMERS"]
    stage = bm * hopper.BK * 2 + hopper.BK * cfg["BN"] * 2
    store = cfg["CONSUMERS"] * cfg["STORE_BOXES"] * 64 * 64 * 2 if cfg["TMA_STORE"] else 0
    return 1024 + cfg["STAGES"] * stage + store + 16 * cfg["STAGES"]


def tensor_maps(M, N, K, padded_rows=True, **params) -> dict:
    """The check_tiled arguments of the maps this stage encodes (A, B and, with tma_store, C)."""
    cfg = config(**RUNG.params(PARAMS, params))
    return hopper.map_args(M, N, K, bm=64 * cfg["CONSUMERS"], bn=cfg["BN"], padded_rows=padded_rows,
                        store_box=(64, 64) if cfg["TMA_STORE"] else None)


def compile_cubin(arch="sm_90a", source_text=None, **params) -> bytes:
    cfg = config(**RUNG.params(PARAMS, params))
    return RUNG.compile(cfg, arch=arch, source_text=source_text)


def max_clusters(kern, cfg, smem) -> int:
    """How many clusters of this kernel the GPU holds at once (cuOccupancyMaxActiveClusters); with no answer,
    one block per SM."""
    sms = device.gpu().sms
    try:
        from cuda.bindings import driver as drv
        conf = drv.CUlaunchConfig()
        conf.gridDimX, conf.gridDimY, conf.gridDimZ = sms // cfg["CLUSTER"] * cfg["CLUSTER"], 1, 1
        conf.blockDimX, conf.blockDimY, conf.blockDimZ = 128 * (cfg["CONSUMERS"] + 1), 1, 1
        conf.sharedMemBytes = smem
        err, n = drv.cuOccupancyMaxActiveClusters(kern.function, conf)
        if err == drv.CUresult.CUDA_SUCCESS and n > 0:
            return min(int(n), max(1, sms // cfg["CLUSTER"]))
    except Exception:
        pass
    return max(1, sms // cfg["CLUSTER"])       # at least one (the CPU emulator's GPU has 2 SMs)


_recent: dict = {}
_clusters: dict = {}


def launch(p, kernel=None, **params):
    """Enqueue 07 on the legacy default stream (no synchronisation). `kernel`: a whole clusters.cu."""
    hopper.enqueue(RUNG, PARAMS, _recent, p, kernel, params, _build)


def cluster_grid(cfg, smem, blocks):
    """grid(kernel, M, Np), the blocks of a launch: as many clusters as fit at once (no more than there is work
    for), or `blocks` when it is not 0. (08 launches this kernel too.)"""
    bm, cl = 64 * cfg["CONSUMERS"], cfg["CLUSTER"]

    def grid(kern, M, Np):
        key = (id(kern), smem)
        if key not in _clusters:
            _clusters[key] = max_clusters(kern, cfg, smem)
        work = math.ceil(M / (bm * cl)) * math.ceil(Np / cfg["BN"])
        return cl * min(work, blocks // cl or _clusters[key])
    return grid


def _build(p, kernel, params):
    cfg = config(**params)
    smem = smem_bytes(cfg)
    grid = cluster_grid(cfg, smem, params["blocks"])
    return hopper.warp_specialized(RUNG, KERNEL, ARG_TYPES, p, kernel, cfg, smem, grid,
                                   store_box=(64, 64),   # (C's map unused when tma_store=False)
                                   extra_args=(1.0,))    # scale: rung 08's (FP8) alone uses it
