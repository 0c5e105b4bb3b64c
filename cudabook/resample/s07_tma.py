"""07 TMA bulk tensor copies (Hopper, sm_90).

The same work items as 06 (a run of consecutive targets of one batch row, and the window of source rows they
need), but the copies are made by the Tensor Memory Accelerator. The host describes feats to it once: a tensor
map built by the driver's `cuTensorMapEncodeTiled` (through cudabook.tma.encode_tiled, which checks the rules
first) over feats viewed as a [B, S, D] bf16 tensor, with a box of (1, BOXR rows, DC channels). In the kernel,
one thread of a producer warp asks for a whole box with one `cp.async.bulk.tensor` instruction; the bytes land
in a ring of shared-memory stages and complete on an mbarrier, which the consumer warps wait on. Consumers
interpolate, store, and arrive on the stage's "empty" mbarrier so the producer can refill it.

The tensor map reaches the kernel as a `const __grid_constant__` 128-byte parameter. Two ways to get it there:
    tensor_map="driver"     cuLaunchKernel, the CUtensorMap passed by value (its getPtr())
    tensor_map="cuda_core"  cuda.core's StridedMemoryView.as_tensor_map and cuda.core.launch
Both give the same output (tests/test_s06_s07.py checks).

TMA needs every row stride to be a multiple of 16 bytes: D % 8 == 0 for bf16. Other D take a plain fallback
kernel (correct, slower). The times map needs S % 4 == 0; otherwise the producer warp loads the window's
times itself. Unsorted targets are correct: a target whose interval is not in its window reads
its rows from global memory.
"""
from __future__ import annotations

import ctypes
import math
import pathlib

import numpy as np

from .. import device, nvrtc
from . import s06_cp_async as s06

NAME = "07_tma"
TITLE = "TMA bulk tensor copies"
PARAMS = {
    "targets_per_item": 32,    # TW (rounded up to a multiple of 8)
    "window_rows": 48,         # WMAX: rows a stage holds (rounded up to a multiple of box_rows)
    "box_rows": 8,             # BOXR: rows per TMA box
    "stages": 2,               # ring depth (2 lets 4 blocks share an SM at D = 256: on an H200 2 stages ran
                               # 88 us, 3 stages 92 us, 4 stages 100 us: more blocks beat a deeper ring)
    "consumer_warps": 8,       # NCW (plus one producer warp)
    "d_chunk": 256,            # DC: channels per item and box width (at most 256, the TMA box limit)
    "tma_store": False,        # write outputs with a TMA store of a shared-memory tile instead of 16-byte stores
    "streaming_stores": False, # st.global.cs (evict-first) for the 16-byte stores
    "l2_promotion": "256B",    # the tensor map's L2 promotion
    "schedule": "contiguous",  # each block takes a contiguous run of items ("contiguous") or every G-th ("strided")
    "times_tma": False,        # bring the window's source times with a second tensor map (needs S % 4 == 0);
                               # False: the producer warp loads them
    "blocks_per_sm": 0,        # 0: as many as fit
    "blocks": 0,               # 0: fill the GPU (persistent grid); else exactly this many blocks
    "tensor_map": "driver",    # "driver" (cuTensorMapEncodeTiled + cuLaunchKernel) or "cuda_core"
}
MIN_CC = (9, 0)
KERNEL_DIR = s06.KERNEL_DIR
SOURCE = KERNEL_DIR / "tma.cu"
KERNEL = "resample_tma"
FALLBACK = "resample_generic"
_CONFIG_KEYS = ("targets_per_item", "window_rows", "box_rows", "stages", "consumer_warps", "d_chunk",
                "tma_store", "streaming_stores", "schedule", "times_tma")


_source_cache: dict = {}


def source() -> str:
    """The kernel's CUDA C++ source (the lesson shows it; labs are cut from its `// >>> lab` regions).
    Re-read when the file changes, so an edited kernel is picked up."""
    mtime = SOURCE.stat().st_mtime_ns
    if _source_cache.get("mtime") != mtime:
        _source_cache.update(mtime=mtime, text=SOURCE.read_text())
    return _source_cache["text"]


def unavailable() -> str | None:
    return device.requirement_unmet(MIN_CC, NAME)


def _source_of(kernel) -> str:
    return source() if kernel is None else s06._source_of(kernel)


def require_gpu():
    why = unavailable()
    if why:
        from . import StageUnavailable
        raise StageUnavailable(why)


def tma_ok(D: int) -> bool:
    """Can TMA take rows of D bf16 channels? Every stride must be a multiple of 16 bytes."""
    return D * 2 % 16 == 0


def _round_up(x, m):
    return -(-x // m) * m


def config(D: int, targets_per_item=PARAMS["targets_per_item"], window_rows=PARAMS["window_rows"],
           box_rows=PARAMS["box_rows"], stages=PARAMS["stages"], consumer_warps=PARAMS["consumer_warps"],
           d_chunk=PARAMS["d_chunk"], tma_store=PARAMS["tma_store"], streaming_stores=PARAMS["streaming_stores"],
           schedule=PARAMS["schedule"], times_tma=PARAMS["times_tma"], S=None) -> dict:
    """The kernel's compile-time constants for D channels (and S source times) and these parameters."""
    if not (1 <= targets_per_item <= 256 and window_rows >= 2 and 1 <= box_rows <= 256 and stages >= 2
            and 1 <= consumer_warps <= 31):
        raise ValueError(f"{NAME}: need 1 <= targets_per_item <= 256, window_rows >= 2, 1 <= box_rows <= 256, "
                         f"stages >= 2, 1 <= consumer_warps <= 31")
    if schedule not in ("contiguous", "strided"):
        raise ValueError(f"{NAME}: schedule must be 'contiguous' or 'strided', got {schedule!r}")
    dc = min(_round_up(D, 8), max(8, min(d_chunk, 256) // 8 * 8))
    # each box must start 128-byte aligned in shared memory: BOXR * DC * 2 a multiple of 128
    step = 128 // math.gcd(128, dc * 2)
    boxr = _round_up(box_rows, step)
    if boxr > 256:
        raise ValueError(f"{NAME}: box_rows {box_rows} rounds up to {boxr} > 256 (the TMA box limit)")
    wmax = max(_round_up(window_rows, boxr * 4 // math.gcd(boxr, 4)), boxr)   # a multiple of BOXR and of 4
    if wmax > 252:
        raise ValueError(f"{NAME}: window_rows {window_rows} rounds up to {wmax} > 252 (the times box, 4 rows "
                         f"longer, must stay within the TMA box limit of 256)")
    return dict(TW=_round_up(targets_per_item, 8), WMAX=wmax, BOXR=boxr, STAGES=int(stages),
                NCW=int(consumer_warps), DC=dc, OUT_TMA=int(bool(tma_store)), ST_CS=int(bool(streaming_stores)),
                CONTIG=int(schedule == "contiguous"), TIMES_TMA=int(bool(times_tma) and (S is None or S % 4 == 0)))


def threads(cfg) -> int:
    return (cfg["NCW"] + 1) * 32


def smem_bytes(cfg: dict) -> int:
    """Dynamic shared memory per block; mirrors SMEM_BYTES in tma.cu (the kernel traps if it disagrees)."""
    r16 = lambda x: _round_up(x, 16)  # noqa: E731
    fs = cfg["WMAX"] * cfg["DC"] * 2
    ot = cfg["TW"] * cfg["DC"] * 2 if cfg["OUT_TMA"] else 0
    wt = _round_up((cfg["WMAX"] + 4) * 4, 128)
    xs = r16(cfg["TW"] * 4)
    return (cfg["STAGES"] * (fs + wt + xs) + 2 * ot + 4 * xs + r16(cfg["STAGES"] * 8) + 16 * cfg["STAGES"] + 128)


def compile_cubin(arch: str | None = "sm_90a", D: int = 256, source_text: str | None = None, **params) -> bytes:
    """The cubin for D channels (needs no GPU: arch defaults to sm_90a; None means this GPU's)."""
    cfg = config(D, **{k: v for k, v in params.items() if k in _CONFIG_KEYS})
    return nvrtc.compile(source_text if source_text is not None else source(), arch=arch, name="tma.cu",
                         include_path=[KERNEL_DIR], defines=cfg)


# ------------------------------------------------------------------------------------------ tensor maps

_maps: dict = {}


def feature_map(p, cfg, l2_promotion="256B"):
    """The driver's CUtensorMap over feats as [B, S, D] bf16, box (1, BOXR, DC); cached per address and shape."""
    from .. import tma
    B, S, T, D = p.shape
    ptr = p.feats.device_ctypes_pointer.value
    key = ("feats", ptr, B, S, D, cfg["BOXR"], cfg["DC"], l2_promotion)
    if key not in _maps:
        _maps[key] = tma.encode_tiled("bfloat16", (B, S, D), (S * D * 2, D * 2, 2), (1, cfg["BOXR"], cfg["DC"]),
                                      ptr, l2_promotion=l2_promotion)
    return _maps[key]


def times_map(p, cfg, l2_promotion="256B"):
    """The CUtensorMap over times as [B, S] float32, box (1, WMAX + 4): a window's source times in one copy.

    A TMA read must START at a 16-byte aligned address (the hardware faults with "illegal instruction"
    otherwise; neither the encoder nor a validator can see it, the start is a run-time coordinate). So the
    kernel starts the box at row L rounded down to a multiple of 4, and the box is 4 rows longer."""
    from .. import tma
    B, S, T, D = p.shape
    ptr = p.times.device_ctypes_pointer.value
    key = ("times", ptr, B, S, cfg["WMAX"], l2_promotion)
    if key not in _maps:
        _maps[key] = tma.encode_tiled("float32", (B, S), (S * 4, 4), (1, cfg["WMAX"] + 4), ptr,
                                      l2_promotion=l2_promotion)
    return _maps[key]


def output_map(p, cfg):
    """The CUtensorMap over out as [B, T, D] bf16, box (1, TW, DC), for the TMA-store variant."""
    from .. import tma
    B, S, T, D = p.shape
    ptr = p.out.device_ctypes_pointer.value
    key = ("out", ptr, B, T, D, cfg["TW"], cfg["DC"])
    if key not in _maps:
        _maps[key] = tma.encode_tiled("bfloat16", (B, T, D), (T * D * 2, D * 2, 2), (1, cfg["TW"], cfg["DC"]),
                                      ptr, l2_promotion="none")
    return _maps[key]


def _core_enum(name, member):
    import cuda.core as core
    holder = getattr(core, name, None)
    if holder is None:
        from cuda.core import _tensor_map
        holder = getattr(_tensor_map, name)
    return getattr(holder, member)


_L2_CORE = {"none": "NONE", "64B": "L2_64B", "128B": "L2_128B", "256B": "L2_256B"}


def core_map(array, box, l2_promotion="256B", bf16=True):
    """The same kind of map made by cuda.core: StridedMemoryView.as_tensor_map (a TensorMapDescriptor).
    bf16: describe uint16 bf16 bits as BFLOAT16 (otherwise the array's own dtype)."""
    from cuda.core.utils import StridedMemoryView
    ptr = array.device_ctypes_pointer.value
    key = ("core", ptr, tuple(array.shape), tuple(box), l2_promotion, bf16)
    if key in _maps:
        return _maps[key]
    view = StridedMemoryView.from_any_interface(array, stream_ptr=-1)
    l2 = _core_enum("TensorMapL2Promotion", _L2_CORE[l2_promotion])
    if not bf16:
        tm = view.as_tensor_map(box_dim=tuple(box), l2_promotion=l2)
    else:
        try:
            from .inputs import BF16
            tm = view.as_tensor_map(box_dim=tuple(box), data_type=BF16, l2_promotion=l2)
        except Exception:   # older cuda.core: only its own enum names the type
            tm = view.as_tensor_map(box_dim=tuple(box), data_type=_core_enum("TensorMapDataType", "BFLOAT16"),
                                    l2_promotion=l2)
    _maps[key] = tm
    return tm


# ------------------------------------------------------------------------------------------ launching

_prepared: dict = {}


def _prepare(text, cfg, blocks_per_sm):
    key = (hash(text), tuple(sorted(cfg.items())), blocks_per_sm)
    if key in _prepared:
        return _prepared[key]
    gpu = device.gpu()
    smem = smem_bytes(cfg)
    if smem > gpu.smem_per_block_optin:
        raise ValueError(f"{NAME}: this configuration needs {smem} bytes of shared memory per block, and this GPU "
                         f"allows {gpu.smem_per_block_optin}: lower stages, window_rows or d_chunk")
    cubin = nvrtc.compile(text, name="tma.cu", include_path=[KERNEL_DIR], defines=cfg)
    kern = nvrtc.load(cubin, KERNEL)
    kern.set_max_dynamic_shared(smem)
    fits = kern.blocks_per_sm(threads(cfg), smem)
    if fits < 1:
        raise ValueError(f"{NAME}: not even one block fits on an SM with {smem} bytes of shared memory")
    bps = min(fits, blocks_per_sm) if blocks_per_sm else fits
    prepared = dict(kernel=kern, fallback=nvrtc.load(cubin, FALLBACK), smem=smem, slots=bps * gpu.sms,
                    blocks_per_sm=bps, cubin=cubin, core=None)
    _prepared[key] = prepared
    return prepared


ARG_TYPES = (None, None, None) + (ctypes.c_void_p,) * 4 + (ctypes.c_int,) * 4


def plan(p, **params) -> dict:
    """What launch() would do for this problem: the path, the constants, the grid, shared memory."""
    B, S, T, D = p.shape
    params = {**PARAMS, **params}
    cfg = config(D, S=S, **{k: params[k] for k in _CONFIG_KEYS})
    items = B * math.ceil(T / cfg["TW"]) * math.ceil(D / cfg["DC"])
    return dict(path="tma" if tma_ok(D) else "fallback (D * 2 bytes is not a multiple of 16)", config=cfg,
                items=items, smem=smem_bytes(cfg), threads=threads(cfg))


def launch(p, kernel=None, **params):
    """Enqueue 07 on the legacy default stream. `kernel`: CUDA C++ source text to use instead of
    kernels/tma.cu (a learner's version with the same kernel names), compiled with this stage's constants."""
    B, S, T, D = p.shape
    if T == 0:
        return
    require_gpu()
    unknown = set(params) - set(PARAMS)
    if unknown:
        raise TypeError(f"{NAME}: unknown parameter(s) {sorted(unknown)}; the parameters are {sorted(PARAMS)}")
    params = {**PARAMS, **params}
    if params["tensor_map"] not in ("driver", "cuda_core"):
        raise ValueError(f"{NAME}: tensor_map must be 'driver' or 'cuda_core', got {params['tensor_map']!r}")
    cfg = config(D, S=S, **{k: params[k] for k in _CONFIG_KEYS})
    prep = _prepare(_source_of(kernel), cfg, params["blocks_per_sm"])
    if not tma_ok(D):
        s06.launch_fallback(p, prep["fallback"])
        return
    items = B * math.ceil(T / cfg["TW"]) * math.ceil(D / cfg["DC"])
    grid = min(items, params["blocks"] or prep["slots"])
    ptrs = s06._pointers(p)
    if params["tensor_map"] == "driver":
        fmap = feature_map(p, cfg, params["l2_promotion"])
        tmap = times_map(p, cfg, params["l2_promotion"]) if cfg["TIMES_TMA"] else fmap
        omap = output_map(p, cfg) if cfg["OUT_TMA"] else fmap
        prep["kernel"].launch(grid, threads(cfg), [fmap, tmap, omap] + ptrs + [B, S, T, D], ARG_TYPES,
                              shared=prep["smem"])
    else:
        _launch_cuda_core(p, cfg, prep, grid, ptrs, params["l2_promotion"])


def _launch_cuda_core(p, cfg, prep, grid, ptrs, l2_promotion):
    from cuda.core import LaunchConfig
    from cuda.core import launch as core_launch
    B, S, T, D = p.shape
    if prep["core"] is None:
        prep["core"] = nvrtc.core_kernel(prep["cubin"], KERNEL, prep["smem"])
    fmap = core_map(p.feats, (1, cfg["BOXR"], cfg["DC"]), l2_promotion)
    tmap = core_map(p.times, (1, cfg["WMAX"] + 4), l2_promotion, bf16=False) if cfg["TIMES_TMA"] else fmap
    omap = core_map(p.out, (1, cfg["TW"], cfg["DC"]), "none") if cfg["OUT_TMA"] else fmap
    config_ = LaunchConfig(grid=grid, block=threads(cfg), shmem_size=prep["smem"])
    core_launch(_legacy_stream(), config_, prep["core"], fmap, tmap, omap, *ptrs,
                np.int32(B), np.int32(S), np.int32(T), np.int32(D))


def _legacy_stream():
    """cuda.core's handle on the legacy default stream (stream 0), which CUDA-event timings bracket."""
    import cuda.core as core
    stream = getattr(core, "LEGACY_DEFAULT_STREAM", None)
    if stream is None:
        from cuda.core._stream import LEGACY_DEFAULT_STREAM as stream
    return stream
