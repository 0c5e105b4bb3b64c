"""Run a CUDA C++ stage on a CPU, to grade a lab where there is no GPU.

    with emulate.emulating(landing="lazy"):      # or "eager"
        stage.launch(problem, kernel=source)     # the stage's own launch: compile, tensor maps, grid

Inside the block, the stage's calls to cudabook.nvrtc (compile, load, launch), cudabook.device (the GPU) and
cudabook.tma.encode_tiled reach this module instead (it registers itself with cudabook.device, which they ask
for it): the kernel's source is rewritten and compiled with the host's C++ compiler against runtime.h (each
CUDA thread a fiber, the asynchronous copies queued), tensor maps are checked by cudabook.tma.check_tiled (the
driver's rules) and encoded for the emulator, and TMA boxes are filled by cudabook.tma.load_box's arithmetic.
Arrays are the simulator's (host memory).

landing="lazy": copies land at the latest moment the program's waits allow, and the threads take turns in
round-robin passes (warps in step); "eager": copies land at once, and the threads run in an order of priority, each
as far ahead as the barriers let it before a later one moves (warps drift apart as far as a GPU's may: a stage
that fast consumers release while a slow one still reads it is refilled under the slow one, and named). A correct
kernel is right both ways (the grader runs both). landing="lazy" with ahead=True: late copies and threads run
ahead, the one order where a warp reads rows another warp copied before that warp waited for them (the grader
adds it for kernels with cp.async groups). The tensor cores: mma.sync.m16n8k16, ldmatrix and stmatrix as
warp operations; wgmma.mma_async (m64nNk16 bf16, A from shared memory or registers; m64nNk32 e4m3, both from
shared memory, with the H100's 13-bit alignment of each k32 step,
measured bit for bit) as a warpgroup operation whose results land at
the wgmma.wait_group that covers them, with either landing (runtime.cpp says what it checks).
TMA stores (cp.async.bulk.tensor global <- shared, bulk groups): the source is read any time until the
cp.async.bulk.wait_group(.read) that covers the store, which checks it did not change; the box is clipped at
the tensor's edges; a generic-proxy shared write (st.shared, stmatrix) that a TMA store or a wgmma reads with no
fence.proxy.async between is reported. Named barriers, setmaxnreg (checked, then ignored), griddepcontrol.
Thread-block clusters (__cluster_dims__, or launch(..., cluster=)): the blocks of a cluster run together,
interleaved; %cluster_ctarank and friends, mapa (distributed shared memory), remote mbarrier arrivals,
multicast TMA loads and the cluster barrier. What cannot be emulated (other tensor-core shapes and types,
im2col TMA, ...) raises CannotEmulate with the instruction's name.
"""
from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import hashlib
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile

import numpy as np

from .. import device
from ..errors import KernelTimeout
from .source import HERE, RewriteError, host_source  # noqa: F401

CACHE_DIR = pathlib.Path(os.environ.get("CUDABOOK_CACHE", pathlib.Path.home() / ".cache" / "cudabook")) / "emulated"
DEFAULT_TIMEOUT_S = 60.0
PREFIX = b"EMULATED:"


class EmulationError(RuntimeError):
    """The emulated kernel did something a GPU would fault, hang or trap on; the message says what."""


class CannotEmulate(EmulationError):
    """The kernel uses something the emulator does not model (it names it)."""


class EmulatedTimeout(EmulationError, KernelTimeout):
    """The emulated kernel did not finish within the time limit."""


class HostCompilerMissing(RuntimeError):
    """No host C++ compiler (g++ or clang++) to build the emulated kernel with."""


@dataclasses.dataclass
class _Settings:
    landing: str
    timeout_s: float
    ahead: bool = False          # landing "lazy" with the threads run ahead in order of priority ("eager" always is)


_active: _Settings | None = None
_buffers: dict[int, int] = {}   # host address -> bytes, of the arrays device.address handed out while emulating


def note_buffer(address: int, nbytes: int):
    """device.address saw this array while emulating: a launch that gets its address may fence it off."""
    if nbytes > 0:
        _buffers[int(address)] = int(nbytes)


def _address_of(value, kind) -> int | None:
    """The address a kernel argument hands the kernel: a pointer's, or the tensor a tensor map (kind None) names."""
    if kind is None:
        return value.address if isinstance(value, EmulatedTensorMap) else None
    if kind is not ctypes.c_void_p:
        return None
    raw = value.value if hasattr(value, "value") else value
    return int(raw) if raw else None


def _which_array(message: str, args, types, fenced: dict) -> str:
    """For a fault at an address in a fenced array's fences: which argument's array, and how far outside it."""
    import re
    at = re.search(r"at address (0x[0-9a-f]+)", message)
    if not at:
        return ""
    where = int(at.group(1), 16)
    for i, (value, kind) in enumerate(zip(args, types)):
        f = fenced.get(_address_of(value, kind))
        if f is None or not f.base <= where < f.base + f.size:
            continue
        what = (f"the tensor of the tensor map passed as argument {i}" if kind is None
                else f"the array passed as argument {i}")
        if where < f.address:
            return f" That address is {f.address - where:,} bytes before the start of {what}."
        return f" That address is {where - (f.address + f.nbytes):,} bytes past the end of {what} ({f.nbytes:,} bytes)."
    return ""


class _Fenced:
    """A copy of `nbytes` at `address` in memory of its own, its end within 256 bytes of FENCE bytes that may not
    be touched (and as many before it), for one emulated launch; release() copies it back and frees it. The fences
    cost address space only. Between the front fence and the array's start (less than a page) every byte is 0xFF:
    a read a little before the start gets NaN (bf16 and float) or -1, not zeros that a weight of 0 would hide
    (msda 05's lab: a sample off the map whose corner row, not clamped, is one pixel before the image)."""
    FENCE = 1 << 20

    def __init__(self, address: int, nbytes: int):
        import mmap
        page, fence = mmap.PAGESIZE, self.FENCE
        span = -(-nbytes // 256) * 256                 # the start stays 256-byte aligned, as a GPU allocation is
        body = -(-span // page) * page
        self.size = body + 2 * fence
        base = _libc.mmap(None, self.size, mmap.PROT_READ | mmap.PROT_WRITE, mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS,
                          -1, 0)
        if base in (None, ctypes.c_void_p(-1).value):
            raise MemoryError(f"could not map {self.size} bytes to fence an emulated buffer")
        self.base = base
        _libc.mprotect(base, fence, 0)
        _libc.mprotect(base + fence + body, fence, 0)
        self.address = base + fence + body - span
        self.source, self.nbytes = address, nbytes
        ctypes.memset(base + fence, 0xFF, body - span)
        ctypes.memmove(self.address, address, nbytes)

    def release(self):
        ctypes.memmove(self.source, self.address, self.nbytes)
        _libc.munmap(self.base, self.size)


def _load_libc():
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
    libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    return libc


_libc = _load_libc()

EMULATED_GPU = device.GPU(name="emulated GPU (CPU, sm_90a)", compute_capability=(9, 0), sms=2,
                          memory_bytes=1 << 30, driver_version="emulated", memory_clock_khz=0, memory_bus_bits=0,
                          l2_bytes=0, smem_per_block_optin=227 * 1024)


def active() -> bool:
    return _active is not None


@contextlib.contextmanager
def emulating(landing: str = "lazy", timeout_s: float = DEFAULT_TIMEOUT_S, *, ahead: bool = False):
    """C++ stages launched inside run on the CPU (see the module's docstring). ahead=True with landing "lazy": the
    copies still land as late as the waits allow, but the threads run as "eager" runs them, each as far ahead of
    the later ones as the barriers allow: a warp reads before another has waited for the copies it issued."""
    global _active
    if not device.SIMULATOR:
        raise EmulationError("the emulator runs kernels on host memory, so it works where Numba runs in its simulator "
                             "(no GPU, or CUDABOOK_SIMULATOR=1 set before `import cudabook`); here arrays live on "
                             "the GPU")
    if landing not in ("lazy", "eager"):
        raise ValueError(f"landing must be 'lazy' or 'eager', got {landing!r}")
    previous = _active
    _active = _Settings(landing, float(timeout_s), bool(ahead))
    device.EMULATED = EMULATED_GPU
    try:
        yield
    finally:
        _active = previous
        device.EMULATED = EMULATED_GPU if previous else None
        if previous is None:
            _buffers.clear()


def host_compiler() -> str:
    for cxx in (os.environ.get("CXX"), "g++", "clang++", "c++"):
        if cxx and shutil.which(cxx):
            return shutil.which(cxx)
    raise HostCompilerMissing("grading a CUDA C++ lab on a CPU needs a host C++ compiler (g++ or clang++); "
                              "install one (Debian/Ubuntu: apt install g++) or grade on a GPU")


def _runtime_digest() -> str:
    h = hashlib.sha256()
    for f in ("runtime.h", "runtime.cpp", "source.py"):
        h.update((HERE / f).read_bytes())
    return h.hexdigest()


_FLAGS = ["-std=c++17", "-fPIC", "-w", "-pthread"]


def _runtime_object() -> pathlib.Path:
    """runtime.cpp compiled once per runtime version (cached on disk); each emulated kernel links it."""
    obj = CACHE_DIR / f"runtime-{_runtime_digest()[:16]}.o"
    if not obj.is_file():
        CACHE_DIR.mkdir(parents=True, exist_ok=True)
        tmp = obj.with_suffix(f".{os.getpid()}.o")
        _run_compiler(_FLAGS + ["-O1", "-U_FORTIFY_SOURCE", "-c", f"-I{HERE}", "-o", str(tmp), str(HERE / "runtime.cpp")],
                      "the runtime")
        os.replace(tmp, obj)
    return obj


_KERNEL_FLAGS = _FLAGS + ["-O0"]


def _runtime_header_dir() -> list[str]:
    """["-I<folder>"] of runtime.h precompiled with the kernels' flags (built once per runtime version and compiler,
    cached on disk), or [] where it cannot be built. Searched before runtime.h's own folder, g++ reads the
    precompiled header where a kernel's source includes runtime.h: parsing the header and the C++ headers it
    includes was most of an emulated kernel's compile (0.36 -> 0.21 s a kernel, hundreds of kernels in a test
    run). A header g++ finds unusable it skips for the text, so the kernel is built the same either way."""
    tag = hashlib.sha256((_runtime_digest() + host_compiler()).encode()).hexdigest()[:16]
    folder = CACHE_DIR / f"pch-{tag}"
    pch = folder / "runtime.h.gch"
    if tag in _no_header:
        return []
    if not pch.is_file():
        tmp = folder / f"runtime.h.{os.getpid()}.tmp"
        try:
            folder.mkdir(parents=True, exist_ok=True)
            _run_compiler(_KERNEL_FLAGS + ["-x", "c++-header", "-o", str(tmp), str(HERE / "runtime.h")],
                          "the runtime's header")
            os.replace(tmp, pch)
        except Exception:            # (a compiler that builds no precompiled header: the kernels read the text)
            tmp.unlink(missing_ok=True)
            _no_header.add(tag)
            return []
    return [f"-I{folder}"]


_no_header: set = set()      # the tags of precompiled headers this process could not build (tried once)


def _run_compiler(args, what):
    run = subprocess.run([host_compiler()] + args, capture_output=True, text=True)
    if run.returncode:
        from ..nvrtc import CompileError
        raise CompileError(f"the host compiler (building {what} for the emulator) says:\n" + _first_errors(run.stderr),
                           log=run.stderr)


def compile(source: str, *, include_path=(), defines=None, name: str = "kernel.cu", **_ignored) -> bytes:
    """Build the host library for `source` (cached on disk); returns a token nvrtc.load understands. The kernel
    is compiled without optimisation (it runs small cases; compiling is what a grading waits for) and linked with
    the runtime's object."""
    text = host_source(source, name, [str(p) for p in include_path])
    defines = dict(sorted((defines or {}).items()))
    key = hashlib.sha256(repr((text, defines, _runtime_digest())).encode()).hexdigest()[:32]
    lib = CACHE_DIR / f"{key}.so"
    if not lib.is_file():
        runtime = _runtime_object()
        with tempfile.TemporaryDirectory() as tmp:
            src = pathlib.Path(tmp) / "emulated.cpp"
            src.write_text(text)
            out = pathlib.Path(tmp) / "emulated.so"
            _run_compiler(_KERNEL_FLAGS + ["-shared", *_runtime_header_dir(), f"-I{HERE}", "-o", str(out), str(src),
                                           str(runtime)]
                          + [f"-D{k}={v}" for k, v in defines.items()], "the emulated kernel")
            os.replace(out, lib)
    return PREFIX + str(lib).encode()


def _first_errors(log: str, n: int = 12) -> str:
    lines = [ln for ln in log.splitlines() if "error" in ln or ln.startswith(" ")]
    return "\n".join(lines[:n]) or log[-2000:]


def is_image(image) -> bool:
    return isinstance(image, (bytes, bytearray)) and bytes(image).startswith(PREFIX)


_libs: dict = {}


def _library(image: bytes):
    path = bytes(image)[len(PREFIX):].decode()
    if path not in _libs:
        lib = ctypes.CDLL(path)
        lib.emu_launch.restype = ctypes.c_int
        lib.emu_launch.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p)] + [ctypes.c_uint] * 6 + [
            ctypes.c_ulonglong, ctypes.c_int, ctypes.c_double, ctypes.c_char_p, ctypes.c_int] + [ctypes.c_uint] * 3 + [
            ctypes.c_int]
        lib.emu_set_tma_handler.argtypes = [ctypes.c_void_p]
        lib.emu_set_tma_handler(ctypes.cast(_TMA_CALLBACK, ctypes.c_void_p))
        _libs[path] = lib
    return _libs[path]


def load(image: bytes, kernel_name: str) -> "EmulatedKernel":
    lib = _library(image)
    try:
        entry = getattr(lib, f"emu_entry_{kernel_name}")
    except AttributeError:
        raise EmulationError(f"no extern \"C\" __global__ kernel named {kernel_name!r} in the source") from None
    cluster = None
    dims_fn = getattr(lib, f"emu_cluster_{kernel_name}", None)
    if dims_fn is not None:                  # declared with __cluster_dims__(X, Y, Z)
        dims = (ctypes.c_uint * 3)()
        dims_fn.argtypes = [ctypes.c_void_p]
        dims_fn(dims)
        cluster = tuple(int(d) for d in dims)
    static_shared = ctypes.c_int.in_dll(lib, "emu_static_shared").value if hasattr(lib, "emu_static_shared") else 0
    return EmulatedKernel(kernel_name, lib, ctypes.cast(entry, ctypes.c_void_p).value, cluster, bool(static_shared))


@dataclasses.dataclass
class EmulatedKernel:
    """What nvrtc.load gives while emulating: the same launch() as nvrtc.Kernel, run on the CPU."""
    name: str
    lib: object
    entry: int
    cluster: tuple | None = None      # __cluster_dims__ of the kernel
    static_shared: bool = False       # the source declares static __shared__ variables

    def set_max_dynamic_shared(self, nbytes: int):
        pass

    def blocks_per_sm(self, threads: int, dynamic_shared: int = 0) -> int:
        return 1

    def attribute(self, name: str) -> int:
        return 0

    def launch(self, grid, block, args, types, *, shared: int = 0, stream: int = 0, pdl: bool = False,
               cluster=None):
        # (pdl: launches run one after another here, so programmatic dependent launch changes nothing)
        # cluster: the launch's cluster shape (cuLaunchKernelEx's attribute), for a kernel without __cluster_dims__
        settings = _active or _Settings("lazy", DEFAULT_TIMEOUT_S)
        if cluster is not None:
            cluster = (tuple(cluster) + (1, 1))[:3] if not isinstance(cluster, int) else (cluster, 1, 1)
            if self.cluster is not None and tuple(self.cluster) != cluster:
                raise EmulationError(f"launch of {self.name}: the kernel is declared with __cluster_dims__"
                                     f"{self.cluster}, and the launch asks for clusters of {cluster}")
        cluster = cluster or self.cluster
        if cluster is not None and cluster[0] * cluster[1] * cluster[2] > 1 and self.static_shared:
            raise CannotEmulate(f"{self.name}: static __shared__ variables in a kernel launched in clusters (the "
                                f"emulator gives each block of a cluster its own dynamic shared memory only; use "
                                f"extern __shared__)")
        gx, gy, gz = (tuple(grid) + (1, 1))[:3] if not isinstance(grid, int) else (grid, 1, 1)
        bx, by, bz = (tuple(block) + (1, 1))[:3] if not isinstance(block, int) else (block, 1, 1)
        if min(gx, gy, gz, bx, by, bz) < 1 or bx * by * bz > 1024:
            raise EmulationError(f"launch of {self.name}: grid {(gx, gy, gz)} and block {(bx, by, bz)} are not a "
                                 f"valid launch (at least 1 each, at most 1024 threads a block)")
        # Arrays the kernel gets by address, or through a tensor map, are copied into fenced memory (a page nobody
        # may touch after them, and one before), so that an access past either end faults and is reported instead
        # of corrupting this process's heap; the copies go back after the kernel. A tensor map is handed to the
        # kernel as a copy that names the fenced array (one copy an array, however many ways it is reached).
        fenced = {address: None for address in map(_address_of, args, types) if address in _buffers}
        try:
            for address in fenced:
                fenced[address] = _Fenced(address, _buffers[address])
            self._run(args, types, fenced, settings, (gx, gy, gz), (bx, by, bz), shared, cluster)
        finally:
            for f in fenced.values():
                if f is not None:
                    f.release()

    def _run(self, args, types, fenced, settings, grid, block, shared, cluster=None):
        gx, gy, gz = grid
        bx, by, bz = block
        keep, ptrs = [], []
        for value, kind in zip(args, types):
            if kind is None:                               # a tensor map passed by value
                copy = fenced.get(_address_of(value, kind))
                if copy is not None:
                    value = value.moved_to(copy.address)
                    keep.append(value)
                ptrs.append(ctypes.c_void_p(value.getPtr()))
                continue
            raw = value.value if hasattr(value, "value") else value
            if kind is ctypes.c_void_p and raw is not None and int(raw) in fenced:
                raw = fenced[int(raw)].address
            holder = kind(raw)
            keep.append(holder)
            ptrs.append(ctypes.cast(ctypes.pointer(holder), ctypes.c_void_p))
        argv = (ctypes.c_void_p * max(1, len(ptrs)))(*[p.value for p in ptrs])
        err = ctypes.create_string_buffer(8192)
        _errors.clear()
        import threading
        main = threading.current_thread() is threading.main_thread()   # only there may Interrupt stop it
        rc = self.lib.emu_launch(self.entry, argv, gx, gy, gz, bx, by, bz, int(shared),
                                 int(settings.landing == "lazy") | (2 if main else 0) | (4 if settings.ahead else 0),
                                 settings.timeout_s, err,
                                 len(err), *(cluster or (1, 1, 1)), int(cluster is not None))
        if rc:
            message = err.value.decode(errors="replace")
            if message == "INTERRUPTED":
                raise KeyboardInterrupt
            if message == "TIMEOUT":
                raise EmulatedTimeout(f"the kernel did not finish in {settings.timeout_s:.0f} s: a loop that never "
                                      f"ends, or a thread waiting for something that never comes?")
            if message.startswith("CANNOT EMULATE: "):
                raise CannotEmulate(message[len("CANNOT EMULATE: "):])
            raise EmulationError(message + _which_array(message, args, types, fenced))


# ------------------------------------------------------------------------------------------ tensor maps
MAGIC = 0x4D54454D
_DTYPES = ("uint8", "uint16", "uint32", "int32", "uint64", "int64", "float16", "bfloat16", "float32", "float64")


class EmulatedTensorMap:
    """The 128 bytes a kernel gets as its CUtensorMap while emulating: the description, for runtime.h and
    the TMA handler (not the driver's format, which is undocumented)."""

    def __init__(self, dtype, shape, strides, box, address, element_strides, swizzle, interleave, oob_fill):
        from .. import tma
        d = tma.tma_dtype(dtype)
        rank = len(shape)
        es = tuple(element_strides) if element_strides is not None else (1,) * rank
        raw = bytearray(128)
        swz = tma.SWIZZLES[swizzle][1] or 0
        ilv = tma.INTERLEAVES[interleave][1] or 0
        head = np.array([MAGIC, rank, d.itemsize, _DTYPES.index(d.name)], np.uint32).tobytes()
        raw[0:16] = head
        raw[16:24] = int(address).to_bytes(8, "little")
        raw[24:44] = np.array((list(reversed(shape)) + [1] * 5)[:5], np.uint32).tobytes()
        raw[44:56] = np.array([swz, int(oob_fill == "nan"), ilv], np.uint32).tobytes()
        raw[56:76] = np.array((list(reversed(box)) + [1] * 5)[:5], np.uint32).tobytes()
        raw[76:96] = np.array((list(reversed(es)) + [1] * 5)[:5], np.uint32).tobytes()
        raw[96:128] = np.array((list(reversed(strides[:-1])) + [0] * 4)[:4], np.int64).tobytes()
        self.buffer = (ctypes.c_ubyte * 128).from_buffer_copy(bytes(raw))

    def getPtr(self):
        return ctypes.addressof(self.buffer)

    @property
    def address(self) -> int:
        return int.from_bytes(bytes(self.buffer[16:24]), "little")

    def moved_to(self, address: int) -> "EmulatedTensorMap":
        """The same map over a copy of its tensor at `address` (a fenced copy, for one launch)."""
        moved = object.__new__(EmulatedTensorMap)
        moved.buffer = (ctypes.c_ubyte * 128).from_buffer_copy(bytes(self.buffer))
        moved.buffer[16:24] = list(int(address).to_bytes(8, "little"))
        return moved


def encode_tiled(dtype, shape, strides, box, address, *, element_strides=None, swizzle="none", interleave="none",
                 oob_fill="none", l2_promotion="128B", validate=True):
    """cudabook.tma.encode_tiled while emulating: check_tiled stands for the driver (it always runs)."""
    from .. import tma
    tma.check_tiled(dtype, shape, strides, box, address=address, element_strides=element_strides, swizzle=swizzle,
                    interleave=interleave, oob_fill=oob_fill, l2_promotion=l2_promotion)
    if interleave != "none":
        raise CannotEmulate("interleaved tensor maps are not emulated")
    return EmulatedTensorMap(dtype, tuple(shape), tuple(strides), tuple(box), address, element_strides, swizzle,
                             interleave, oob_fill)


def describe_map(raw: bytes) -> dict:
    """The emulated map's fields, outermost first (NumPy order)."""
    u32 = np.frombuffer(raw[:16], np.uint32)
    rank, itemsize, code = int(u32[1]), int(u32[2]), int(u32[3])
    dims = np.frombuffer(raw[24:44], np.uint32)[:rank][::-1]
    swz, nan, _ = np.frombuffer(raw[44:56], np.uint32)
    box = np.frombuffer(raw[56:76], np.uint32)[:rank][::-1]
    es = np.frombuffer(raw[76:96], np.uint32)[:rank][::-1]
    outer = np.frombuffer(raw[96:128], np.int64)[:rank - 1][::-1]
    return dict(dtype=_DTYPES[code], itemsize=itemsize, address=int.from_bytes(raw[16:24], "little"),
                shape=tuple(int(v) for v in dims), strides=tuple(int(v) for v in outer) + (itemsize,),
                box=tuple(int(v) for v in box), element_strides=tuple(int(v) for v in es),
                swizzle={0: "none", 32: "32B", 64: "64B", 128: "128B"}[int(swz)], nan_fill=bool(nan))


_errors: list = []


def _memory(m: dict) -> np.ndarray:
    extent = sum((n - 1) * s for n, s in zip(m["shape"], m["strides"])) + m["itemsize"]
    return np.ctypeslib.as_array((ctypes.c_ubyte * extent).from_address(m["address"]))


def _tma(store, raw_map, coords, rank, smem, nbytes, smem_address, err, errlen):
    """The TMA unit, for runtime.h: fill (or store) one box. Returns 0, or -1 with a sentence in err."""
    from .. import tma
    try:
        m = describe_map(ctypes.string_at(raw_map, 128))
        at = tuple(coords[i] for i in range(rank))[::-1]           # the kernel's are innermost first
        offsets, inside = tma.box_elements(m["shape"], m["strides"], m["box"], at, m["element_strides"])
        memory = _memory(m)
        place = tma.swizzle_offsets(nbytes, m["swizzle"], smem_address)
        shared = np.ctypeslib.as_array((ctypes.c_ubyte * nbytes).from_address(smem))
        if not store:
            nan = m["nan_fill"] and m["dtype"].startswith("f")
            data = tma.boxes.gather(memory, offsets, inside, m["itemsize"], nan)
            shared[place] = data.reshape(-1)
        else:
            data = shared[place].reshape(offsets.shape + (m["itemsize"],))
            idx = offsets[inside][:, None] + np.arange(m["itemsize"])
            memory[idx] = data[inside]
        return 0
    except Exception as e:  # reported by the kernel's launch, as the emulator's own error
        msg = f"the TMA emulation failed: {type(e).__name__}: {e}".encode()[:errlen - 1]
        ctypes.memmove(err, msg + b"\0", len(msg) + 1)
        return -1


_TMA_TYPE = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_int, ctypes.c_void_p, ctypes.POINTER(ctypes.c_int), ctypes.c_int,
                             ctypes.c_void_p, ctypes.c_ulonglong, ctypes.c_uint, ctypes.c_void_p, ctypes.c_int)
_TMA_CALLBACK = _TMA_TYPE(_tma)


def address(array) -> int:
    """The host address of a simulator device array (or any NumPy-backed array)."""
    inner = getattr(array, "_ary", array)
    return np.asarray(inner).__array_interface__["data"][0]


device.register_emulator(sys.modules[__name__])   # nvrtc, tma and device.address reach it through device.emulator()
