"""07 Clusters (Hopper, sm_90a): TMA multicast of the shared operand and a TMA-store epilogue.

06's persistent warp-specialised kernel, run in thread-block clusters of `cluster` blocks stacked along M: they
need the same B tile, so each block loads a 1/cluster share of B's boxes and TMA multicasts them into every
block of the cluster (B leaves L2 once per cluster). A stage may be refilled only when the consumers of every
block are done with it: each consumer warpgroup arrives on "empty" in every block of the cluster. The epilogue
stages the bf16 tile in shared memory, 128-byte swizzled, and stores it with TMA (tma_store=True), which clips
at C's edges; mma_depth=1 keeps one k-tile of wgmmas in flight while the next is issued. stream_k shares the
last, partial wave out by k-tiles (Stream-K) where that pays (stream_k_pays).

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
                            # 225 KiB of the 227 a block may have (one H100 run while this rung was built, not
                            # a record; below the H100 record at 4096^3, above it at 8192^3: 4 stages / 2 boxes
                            # 772 and 820 TFLOP/s at 4096^3 and 8192^3, 3 stages / whole-tile staging 765 and 819)
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
    "stream_k": "auto",     # the last, partial wave shared out by k-tiles (Stream-K): True, False, or "auto", on
                            # where stream_k_pays says it saves time (the problem's shape and the clusters that fit)
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
ARG_TYPES = (None, None, None, ctypes.c_void_p, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_float,
             ctypes.c_void_p, ctypes.c_void_p)   # ..., scale, Stream-K's workspace and flags
COMPILE_LOG_MISTAKES = hopper.COMPILE_LOG_MISTAKES   # the lab grader reads what ptxas says about the wgmmas
WATCHDOG_S = hopper.WATCHDOG_S
RUNG = CudaRung(NAME, SOURCE, sm90a=True)
EMULATED = True               # without a GPU the lab grader runs this kernel on the CPU (cudabook.emulate)
# The lab is graded at the defaults and with Stream-K forced on 3 clusters (6 blocks), so that the k-loop also
# runs pieces of a unit that start and end mid-K (the emulator fits one cluster, so "auto" never shares there).
GRADING_VARIANTS = [{}, {"stream_k": True, "blocks": 6}]
# A mistake read from the region's text before any launch, for its pointed hint: the slot computed from kt. After
# the first tile (and in a Stream-K piece that starts mid-K) kt % STAGES is not the slot the k-tile used, so the
# consumers arrive on the wrong stage's "empty" barrier; the fast ones' extra arrivals can complete a phase
# without a slow consumer's release, and the producer refills that stage while the slow one's wgmmas still read
# it. A GPU shows it only now and then; the emulator's eager landing, where consumers drift apart, fails it too
# (on the grading case of two tiles: "the stage was released too early", with the arrivals that stood in).
LAB_TEXT_MISTAKES = [
    (r"\bkt\s*%\s*STAGES\b",
     "the ring's slot is s, carried from k-tile to k-tile, from tile to tile and through Stream-K's pieces; "
     "kt % STAGES equals it only in a cluster's first tile. Released on a slot computed from kt, a stage the "
     "consumers have not read yet may be refilled under them: a race a GPU shows only now and then, so the grader "
     "looks for it here"),
]
source, unavailable = RUNG.source, RUNG.unavailable


def config(bn=256, consumers=2, stages=4, cluster=2, group_m=8, producer_regs=40, consumer_regs=232,
           tma_store=True, mma_depth=1, multicast=1, stmatrix=True, store_boxes=2, blocks=0,
           stream_k="auto") -> dict:
    """The kernel's compile-time constants. stream_k="auto" compiles without Stream-K here: the launch decides
    (stream_k_pays) once it knows the problem's shape and how many clusters fit."""
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
    if stream_k not in (True, False, "auto"):
        raise ValueError(f"{NAME}: stream_k must be True, False or 'auto', got {stream_k!r}")
    if stream_k is True and not ring_holds_sums(bn, consumers, stages):
        raise ValueError(f"{NAME}: stream_k=True adds the parked sums in the ring, which must hold "
                         f"consumers x 64 x bn float32 ({consumers * 64 * bn * 4 // 1024} KiB); "
                         f"{stages} stages hold {stages * stage_bytes(bn, consumers) // 1024} KiB")
    return dict(STREAM_K=int(stream_k is True), BN=int(bn), CONSUMERS=int(consumers), STAGES=int(stages), CLUSTER=int(cluster),
                GROUP_M=int(group_m), PRODUCER_REGS=int(producer_regs), CONSUMER_REGS=int(consumer_regs),
                TMA_STORE=int(bool(tma_store)), MMA_DEPTH=int(mma_depth), STORE_BOXES=int(store_boxes or bn // 64),
                MULTICAST=int(multicast),
                STMATRIX=int(bool(stmatrix)))


def stage_bytes(bn: int, consumers: int) -> int:
    """Mirrors STAGE_BYTES in clusters.cu (the same for bf16 and FP8: a 128-byte row of K either way)."""
    return (64 * consumers + bn) * 128


def ring_holds_sums(bn: int, consumers: int, stages: int) -> bool:
    """Stream-K's last piece of a unit adds the parked float32 sums from the ring (clusters.cu's static_assert)."""
    return stages * stage_bytes(bn, consumers) >= consumers * 64 * bn * 4


def smem_bytes(cfg: dict) -> int:
    """Mirrors SMEM_BYTES in clusters.cu."""
    stage = stage_bytes(cfg["BN"], cfg["CONSUMERS"])
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


def clusters_that_fit(kern, cfg, smem) -> int:
    """max_clusters, asked once per loaded kernel and shared-memory size."""
    key = (id(kern), smem)
    if key not in _clusters:
        _clusters[key] = max_clusters(kern, cfg, smem)
    return _clusters[key]


def launch(p, kernel=None, **params):
    """Enqueue 07 on the legacy default stream (no synchronisation). `kernel`: a whole clusters.cu."""
    hopper.enqueue(RUNG, PARAMS, _recent, p, kernel, params, _build)


# What Stream-K costs (parking the sums, the flags, adding them, and more that is not pinned down: lesson 07), in
# units of a unit's time: about a quarter, from the H200 readings results/readings/H200_gemm_07_clusters_
# stream_k_settings(_rerun).json (interleaved rounds, off and on against cuBLAS; lesson 07 prints the derivation):
# with W whole waves and a last wave R/clusters full, off takes W + 1 units' time and on W + R/clusters + the
# cost. 4096^3 forced on gives about a quarter in both runs; 8192^3 a quarter in one and more in the other (its
# rounds spread more than the gain, under the power cap). It pays where the last wave is at most
# 1 - FIXUP_UNITS full.
FIXUP_UNITS = 0.25


def stream_k_pays(units: int, clusters: int) -> bool:
    """Does sharing out the last wave save time? Where the last wave is at most 1 - FIXUP_UNITS full (so at
    least FIXUP_UNITS of a unit's time idle on average), and only after a whole wave (smaller problems are not
    what the cost was measured on)."""
    whole, left = divmod(units, clusters)
    return whole >= 1 and 0 < left <= (1 - FIXUP_UNITS) * clusters


def schedule(cfg, params, M, Np, fit) -> dict:
    """How the work is shared out: units (CLUSTER * BM x BN), the clusters that run at once (`fit`), whole
    waves, the units of the last, partial wave, and whether Stream-K shares that wave out."""
    units = math.ceil(M / (64 * cfg["CONSUMERS"] * cfg["CLUSTER"])) * math.ceil(Np / cfg["BN"])
    on = bool(cfg["STREAM_K"]) or (params["stream_k"] == "auto" and stream_k_pays(units, fit)
                                   and ring_holds_sums(cfg["BN"], cfg["CONSUMERS"], cfg["STAGES"]))
    return dict(units=units, clusters=fit, whole_waves=units // fit, last_wave=units % fit, stream_k=on)


def plan(cfg, smem, params, M, Np, Kp, compile_kernel):
    """How clusters.cu runs on a problem (07 and 08 alike): (kernel, blocks, workspace), workspace the arrays of
    Stream-K (workspace, flags) or none, and workspace_args(workspace) the kernel's last two arguments.
    Blocks: as many clusters as fit at once, or `blocks` when it is not 0, and no more than there is work for
    (units; with Stream-K, k-tiles). stream_k="auto" turns Stream-K on where stream_k_pays says so (and the ring
    holds the parked sums); compile_kernel(cfg) gives the loaded kernel for those constants."""
    from numba import cuda
    import numpy as np
    kern = compile_kernel(cfg)
    cl, most = cfg["CLUSTER"], clusters_that_fit(kern, cfg, smem)
    fit = params["blocks"] // cl or most
    if fit > most and (cfg["STREAM_K"] or params["stream_k"] is True) and not emulated():
        raise ValueError(f"{NAME}: stream_k=True with blocks={params['blocks']}: only {most} clusters "
                         f"of {cl} fit on this GPU at once, and a Stream-K piece waits for pieces of other "
                         f"clusters, which must all be running (blocks <= {most * cl})")
    how = schedule(cfg, params, M, Np, fit)
    if not how["stream_k"]:
        return kern, cl * min(how["units"], how["clusters"]), ()
    if not cfg["STREAM_K"]:
        cfg = {**cfg, "STREAM_K": 1}
        kern = compile_kernel(cfg)
    k_tiles = math.ceil(Kp / (128 if cfg.get("FP8") else 64))
    blocks = cl * min(how["units"] * k_tiles, how["clusters"])
    slots = blocks * cfg["CONSUMERS"]          # a consumer warpgroup's sums: 128 threads x bn / 2 floats
    return kern, blocks, (cuda.device_array(slots * 128 * cfg["BN"] // 2, dtype=np.float32),
                          cuda.to_device(np.zeros(slots, dtype=np.int32)))   # the last piece lowers each flag


def workspace_args(workspace) -> list:
    """The kernel's ws and flags arguments: Stream-K's arrays, or null pointers."""
    return [hopper.pointer(x) for x in workspace] or [0, 0]


def emulated() -> bool:
    """Launches go to the CPU emulator, which runs a launch's clusters one after another in order: a Stream-K
    piece waits only for lower-numbered clusters, which have finished, so any number of clusters is safe there."""
    from .. import emulate
    return emulate.active()


def how_it_runs(M, N, K, **params) -> dict:
    """schedule() for a problem of this shape on this GPU (the lesson prints it): the kernel is compiled and
    asked how many clusters fit."""
    params = RUNG.params(PARAMS, params)
    cfg = config(**params)
    smem = smem_bytes(cfg)
    RUNG.require()
    kern = RUNG.prepare(RUNG.text(None), cfg, KERNEL, smem=smem)[KERNEL]
    return schedule(cfg, params, M, hopper.padded(M, N, K)[1],
                    params["blocks"] // cfg["CLUSTER"] or clusters_that_fit(kern, cfg, smem))


def _build(p, kernel, params):
    cfg = config(**params)
    smem = smem_bytes(cfg)
    M, N, K = p.shape
    kern, c, Kp, Np, maps = hopper.prepare(RUNG, KERNEL, p, kernel, cfg, smem, bm=64 * cfg["CONSUMERS"],
                                           bn=cfg["BN"], store_box=(64, 64))   # (C's map unused without tma_store)
    kern, blocks, workspace = plan(cfg, smem, params, M, Np, Kp,
                                   lambda cf: RUNG.prepare(RUNG.text(kernel), cf, KERNEL, smem=smem)[KERNEL])
    args = [*maps, hopper.pointer(c), M, Np, Kp, 1.0,   # scale: rung 08's (FP8) alone uses it
            *workspace_args(workspace)]
    threads = 128 * (cfg["CONSUMERS"] + 1)
    return hopper.launcher(p, c, lambda: (kern.launch(blocks, threads, args, ARG_TYPES, shared=smem),
                                          workspace))   # (the closure keeps Stream-K's arrays alive)
