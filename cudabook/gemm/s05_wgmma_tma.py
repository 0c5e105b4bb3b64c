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

This module also holds what 06 and 07 share: compiling, tensor maps, caching, the launch.
"""
from __future__ import annotations

import ctypes
import hashlib
import math
import pathlib
import weakref

from .. import device, nvrtc

NAME = "05_wgmma_tma"
TITLE = "TMA + WGMMA"
PARAMS = {
    "bn": 128,         # tile width BN (64, 128 or 256): each warpgroup runs m64nBNk16, BN/2 fp32 accumulators
                       # a thread
    "warpgroups": 2,   # warpgroups of 128 threads; the tile is BM = 64 * warpgroups rows
    "stages": 4,       # depth of the TMA ring (each stage BM*64*2 + 64*BN*2 bytes of shared memory)
}
MIN_CC = (9, 0)
KERNEL_DIR = pathlib.Path(__file__).resolve().parent / "kernels"
SOURCE = KERNEL_DIR / "wgmma_tma.cu"
KERNEL = "gemm_wgmma_tma"
BK = 64
ALIGN = 8              # TMA rows must be multiples of 16 bytes: K and N padded to multiples of 8 bf16
ARG_TYPES = (None, None, ctypes.c_void_p, ctypes.c_int, ctypes.c_int, ctypes.c_int)
WATCHDOG_S = 20        # hopper.cuh's WATCHDOG_NS: a wait that never ends traps after this long (the grader says so)
# Compiler messages that betray a mistake in a learner's wgmma code (read by the lab grader, cudabook.labs).
# Without wgmma.wait_group before the accumulators are read, ptxas inserts one itself (C7517) and the result
# may still come out right, so no test run would catch it; where ptxas puts its wait is not where the ring
# needs it (before the stage is released for refilling).
COMPILE_LOG_MISTAKES = [
    (r"C7517|wait(_group)? is injected",                  # NVRTC 13.0 says "warpgroup.wait", later "wgmma.wait_group"
     "ptxas inserted a wgmma.wait_group because your code uses the accumulators (or moves on) before waiting "
     "for the wgmmas: after wgmma_commit(), wait with wgmma_wait<0>() before the stage may be refilled"),
    (r"C75\d\d.*serializ",
     "ptxas serialized the wgmmas (each waits for the one before): the accumulators are touched between "
     "wgmma_fence() and wgmma_commit(), or the wgmmas are not all in one fence/commit group"),
]


# ------------------------------------------------------------------------------------------ shared helpers

def read_source(path: pathlib.Path) -> str:
    """A kernel file's text, re-read when it changes (an edited kernel is picked up)."""
    return nvrtc.source_text(path)


def source() -> str:
    return read_source(SOURCE)


def hopper_unavailable(name: str) -> str | None:
    """None on a compute capability 9.0 GPU; else why not. sm_90a ("a": architecture-specific) code, which
    wgmma, setmaxnreg and multicast need, runs on 9.0 only: not on Blackwell (10.x, 12.x) either."""
    why = device.requirement_unmet(MIN_CC, name)
    if why:
        return why
    g = device.gpu()
    if g.compute_capability != (9, 0):
        return (f"{name} is compiled for sm_90a (wgmma.mma_async, setmaxnreg, TMA multicast), which runs only on "
                f"compute capability 9.0 (H100, H200, GH200); this GPU ({g.name}) is {g.cc}, and sm_90a code "
                f"does not run on later architectures (Blackwell replaced wgmma by tcgen05)")
    return None


def unavailable() -> str | None:
    return hopper_unavailable(NAME)


def require(why: str | None):
    if why:
        from . import StageUnavailable
        raise StageUnavailable(why)


def merge_params(name: str, defaults: dict, params: dict) -> dict:
    unknown = set(params) - set(defaults)
    if unknown:
        raise TypeError(f"{name}: unknown parameter(s) {sorted(unknown)}; the parameters are {sorted(defaults)}")
    return {**defaults, **params}


def padded(M: int, N: int, K: int) -> tuple[int, int]:
    """(Kp, Np): K and N rounded up to a multiple of 8, as Problem.aligned(8) makes them."""
    return -(-K // ALIGN) * ALIGN, -(-N // ALIGN) * ALIGN


def map_args(M, N, K, *, bm, bn, padded_rows=True, store_box=None, l2_promotion="256B") -> dict:
    """The tensor maps of a GEMM rung as check_tiled keyword arguments: {"A": ..., "B": ... [, "C": ...]}.
    A [M, K] with box [bm x 64]; B [K, N] with box [64 x 64] (BN/64 of them per stage); C [M, N] with box
    store_box (07's TMA store). All bf16, 128-byte swizzle. padded_rows=False: the unpadded matrices."""
    Kp, Np = padded(M, N, K) if padded_rows else (K, N)
    maps = {
        "A": dict(dtype="bfloat16", shape=(M, Kp), strides=(Kp * 2, 2), box=(bm, BK), swizzle="128B",
                  l2_promotion=l2_promotion),
        "B": dict(dtype="bfloat16", shape=(Kp, Np), strides=(Np * 2, 2), box=(BK, 64), swizzle="128B",
                  l2_promotion=l2_promotion),
    }
    if store_box is not None:
        maps["C"] = dict(dtype="bfloat16", shape=(M, Np), strides=(Np * 2, 2), box=tuple(store_box),
                         swizzle="128B", l2_promotion="none")
    return maps


_maps: dict = {}


def encoded_map(args: dict, address: int):
    """cuTensorMapEncodeTiled through cudabook.tma.encode_tiled (which runs check_tiled first); cached per
    description and address."""
    from .. import tma
    key = (address, tuple(sorted((k, v) for k, v in args.items())))
    if key not in _maps:
        if len(_maps) > 256:
            _maps.clear()
        a = dict(args)
        _maps[key] = tma.encode_tiled(a.pop("dtype"), a.pop("shape"), a.pop("strides"), a.pop("box"), address, **a)
    return _maps[key]


def compile_text(text: str, name: str, defines: dict, arch="sm_90a", include_path=(KERNEL_DIR,)) -> bytes:
    return nvrtc.compile(text, arch=arch, name=name, include_path=list(include_path), defines=defines)


_prepared: dict = {}


def prepare(text: str, name: str, kernel_name: str, defines: dict, smem: int, include_path=(KERNEL_DIR,)):
    """(Kernel, smem bytes): compiled, loaded and allowed its dynamic shared memory; cached per source and
    constants."""
    key = (hashlib.sha256(text.encode()).hexdigest(), kernel_name, tuple(sorted(defines.items())),
           tuple(map(str, include_path)), id(device.gpu()))      # the GPU, or an emulator's session
    if key not in _prepared:
        g = device.gpu()
        if smem > g.smem_per_block_optin:
            raise ValueError(f"{name}: this configuration needs {smem} bytes of shared memory per block and this "
                             f"GPU allows {g.smem_per_block_optin}: fewer stages or a narrower tile")
        kern = nvrtc.load(compile_text(text, name, defines, include_path=include_path), kernel_name)
        kern.set_max_dynamic_shared(smem)
        _prepared[key] = kern
    return _prepared[key]


def cached_launch(cache: dict, p, kernel, params, build):
    """Run the launch closure for (problem, kernel text, params), building it once: a repeated launch costs a
    dict lookup and cuLaunchKernel. The closure is reused only for the very same device arrays."""
    key = (id(p), None if kernel is None else hashlib.sha256(kernel.encode()).hexdigest(),
           tuple(sorted(params.items())))
    arrays = (p, p.a, p.b, p.c)
    hit = cache.get(key)
    if hit is None or any(ref() is not a for ref, a in zip(hit[0], arrays)):
        hit = (tuple(weakref.ref(a) for a in arrays), build())
        if len(cache) >= 16:
            cache.pop(next(iter(cache)))
        cache[key] = hit
    hit[1]()


def pointer(array) -> int:
    return array.device_ctypes_pointer.value


# ------------------------------------------------------------------------------------------ this stage

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
    cfg = config(**merge_params(NAME, PARAMS, params))
    return map_args(M, N, K, bm=64 * cfg["WGS"], bn=cfg["BN"], padded_rows=padded_rows)


def compile_cubin(arch="sm_90a", source_text=None, **params) -> bytes:
    """The cubin (needs no GPU)."""
    cfg = config(**merge_params(NAME, PARAMS, params))
    return compile_text(source() if source_text is None else source_text, SOURCE.name, cfg, arch)


_recent: dict = {}


def launch(p, kernel=None, **params):
    """Enqueue 05 on the legacy default stream (no synchronisation). `kernel`: the CUDA C++ text of a whole
    wgmma_tma.cu to use instead (a learner's), compiled with this stage's constants."""
    params = merge_params(NAME, PARAMS, params)
    require(unavailable())
    cached_launch(_recent, p, kernel, params, lambda: _build(p, kernel, params))


def _build(p, kernel, params):
    M, N, K = p.shape
    cfg = config(**params)
    smem = smem_bytes(cfg)
    kern = prepare(source() if kernel is None else kernel, SOURCE.name, KERNEL, cfg, smem)
    a, b, c, Kp, Np = p.aligned(ALIGN)
    maps = map_args(M, N, K, bm=64 * cfg["WGS"], bn=cfg["BN"])
    ma, mb = encoded_map(maps["A"], pointer(a)), encoded_map(maps["B"], pointer(b))
    grid = (math.ceil(Np / cfg["BN"]), math.ceil(M / (64 * cfg["WGS"])))
    args = [ma, mb, pointer(c), M, Np, Kp]
    threads = 128 * cfg["WGS"]
    return launcher(p, c, lambda: kern.launch(grid, threads, args, ARG_TYPES, shared=smem))


def launcher(p, c_padded, launch_fn):
    """launch_fn, then (when C was padded) the copy of its [M, N] corner into p.c. Holds p only weakly."""
    if c_padded is p.c:
        return launch_fn
    pref = weakref.ref(p)

    def run():
        launch_fn()
        pref().copy_back(c_padded)
    return run
