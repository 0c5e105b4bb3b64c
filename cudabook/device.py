"""What machine are we on? A GPU (and which), or Numba's simulator; and, while grading on a CPU, the emulator.

This module must not import numba: it decides (SIMULATOR) whether Numba has to start in simulator mode, and
`cudabook/__init__.py` makes that switch before numba is imported.

The CPU emulator (cudabook.emulate) registers itself here when it is imported, and nvrtc, tma and address() ask
`emulator()` for it: while it runs a C++ stage (EMULATED is the GPU it stands for) they hand it their work. This
is the one place where the emulator is chosen; nothing in the kit imports it.
"""
from __future__ import annotations

import dataclasses
import functools
import os


@dataclasses.dataclass(frozen=True)
class GPU:
    name: str
    compute_capability: tuple[int, int]
    sms: int
    memory_bytes: int
    driver_version: str            # e.g. "13.0" (the CUDA version the driver supports)
    memory_clock_khz: int
    memory_bus_bits: int
    l2_bytes: int
    smem_per_block_optin: int

    @property
    def cc(self) -> str:
        return f"{self.compute_capability[0]}.{self.compute_capability[1]}"

    @property
    def theoretical_GBps(self) -> float:
        """DRAM bandwidth from the device attributes: 2 transfers a clock (DDR) x bus width."""
        return 2 * self.memory_clock_khz * 1e3 * self.memory_bus_bits / 8 / 1e9


def _probe_gpu() -> GPU | str:
    """The first GPU, or a sentence that says why there is none."""
    try:
        from cuda.bindings import driver as drv
    except Exception as e:  # pragma: no cover - cuda-bindings is a dependency
        return f"cuda-bindings is not importable ({e})"
    try:
        err, = drv.cuInit(0)
    except Exception as e:
        return f"no NVIDIA driver on this machine ({type(e).__name__})"
    if err != drv.CUresult.CUDA_SUCCESS:
        return f"the NVIDIA driver did not start: {err.name}"
    err, count = drv.cuDeviceGetCount()
    if err != drv.CUresult.CUDA_SUCCESS or count == 0:
        return "the NVIDIA driver sees no GPU"
    _, dev = drv.cuDeviceGet(0)
    _, raw_name = drv.cuDeviceGetName(64, dev)
    name = raw_name.split(b"\0", 1)[0].decode()
    attr = drv.CUdevice_attribute

    def get(a):
        return drv.cuDeviceGetAttribute(a, dev)[1]

    _, mem = drv.cuDeviceTotalMem(dev)
    _, ver = drv.cuDriverGetVersion()
    return GPU(
        name=name,
        compute_capability=(get(attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR),
                            get(attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)),
        sms=get(attr.CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT),
        memory_bytes=int(mem),
        driver_version=f"{ver // 1000}.{ver % 1000 // 10}",
        memory_clock_khz=get(attr.CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE),
        memory_bus_bits=get(attr.CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH),
        l2_bytes=get(attr.CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE),
        smem_per_block_optin=get(attr.CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN),
    )


@functools.lru_cache(maxsize=1)
def probe() -> GPU | str:
    return _probe_gpu()


# While cudabook.emulate runs a C++ stage on the CPU (grading a lab without a GPU), the GPU it stands for.
EMULATED: GPU | None = None
_emulator = None            # the cudabook.emulate module, once imported (it calls register_emulator)


def register_emulator(module):
    """cudabook.emulate, on being imported: the backend that emulator() hands out."""
    global _emulator
    _emulator = module


def emulator(*, any_time: bool = False):
    """The CPU emulator while it stands for the GPU (EMULATED is set), else None. any_time=True: the emulator
    whenever it has been imported (its compiled images are loaded by it even after the emulating block)."""
    return _emulator if any_time or EMULATED is not None else None


def gpu() -> GPU | None:
    """The GPU this workbook runs on, or None (simulator)."""
    if EMULATED is not None:
        return EMULATED
    found = probe()
    return found if isinstance(found, GPU) and not simulator_forced() else None


def why_no_gpu() -> str | None:
    found = probe()
    if simulator_forced():
        return "the simulator was asked for (NUMBA_ENABLE_CUDASIM=1 or CUDABOOK_SIMULATOR=1)"
    return None if isinstance(found, GPU) else found


@functools.lru_cache(maxsize=1)
def simulator_forced() -> bool:
    """Did the user ask for the simulator? Read once, before cudabook itself sets the variable."""
    set_by_us = os.environ.get("CUDABOOK_SET_CUDASIM") == "1"     # inherited from a parent `import cudabook`
    return os.environ.get("CUDABOOK_SIMULATOR") == "1" or (
        os.environ.get("NUMBA_ENABLE_CUDASIM") == "1" and not set_by_us)


def address(array) -> int:
    """The device address of a Numba device array; while emulating, the host address of a simulator array."""
    pointer = getattr(array, "device_ctypes_pointer", None)
    if pointer is not None:
        return pointer.value
    inner = getattr(array, "_ary", array)
    where = inner.__array_interface__["data"][0]
    emulating = emulator()
    if emulating is not None:                # an emulated launch may fence this buffer off (cudabook.emulate)
        emulating.note_buffer(where, inner.nbytes)
    return where


def has_gpu() -> bool:
    return gpu() is not None


def compute_capability() -> tuple[int, int] | None:
    g = gpu()
    return g.compute_capability if g else None


def requirement_unmet(min_cc: tuple[int, int], stage: str) -> str | None:
    """None if this machine can run `stage`, else a sentence that says what it needs and what we have."""
    g = gpu()
    need = f"{stage} needs an NVIDIA GPU of compute capability {min_cc[0]}.{min_cc[1]} or newer"
    if g is None:
        return f"{need}; this machine has none ({why_no_gpu()}). It still compiles: see the lesson's SASS."
    if g.compute_capability < min_cc:
        return f"{need}; this GPU ({g.name}) is {g.cc}."
    return None


def describe() -> dict:
    """Everything a results record or the setup lesson says about the machine."""
    import platform
    from importlib import metadata

    def version(pkg):
        try:
            return metadata.version(pkg)
        except metadata.PackageNotFoundError:
            return None

    g = gpu()
    info = {
        "gpu": g.name if g else "simulator",
        "why_simulator": None if g else why_no_gpu(),
        "python": platform.python_version(),
        "packages": {p: version(p) for p in (
            "numba", "numba-cuda", "numpy", "cuda-bindings", "cuda-core", "nvidia-cuda-nvrtc", "ml_dtypes",
            "torch")},
    }
    if g:
        info.update(dataclasses.asdict(g))
        info["compute_capability"] = g.cc
        info["theoretical_GBps"] = round(g.theoretical_GBps, 1)
    try:
        from cuda.bindings import nvrtc
        _, major, minor = nvrtc.nvrtcVersion()
        info["nvrtc"] = f"{major}.{minor}"
    except Exception:
        info["nvrtc"] = None
    return info


simulator_forced()  # read the user's wish now, before `import cudabook` sets NUMBA_ENABLE_CUDASIM itself

# CUDABOOK_COMPILE_ONLY=1: Numba's real compiler even without a GPU, to compile (never launch) kernels for a GPU
# target; the graders use it in a child process to check that a kernel right in the simulator also compiles.
COMPILE_ONLY = os.environ.get("CUDABOOK_COMPILE_ONLY") == "1"
# Numba runs in its simulator (decided here, once, before numba is imported; cudabook.SIMULATOR is this value).
SIMULATOR = not has_gpu() and not COMPILE_ONLY
