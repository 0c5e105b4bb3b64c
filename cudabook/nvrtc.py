"""CUDA C++ compiled at run time: NVRTC through cuda.core, cubins, SASS, and launching.

    compile(source, arch=None, options=(), include_cccl=False, ...)  -> cubin bytes (cached)
    load(cubin, kernel_name)                                         -> Kernel (launch with cuLaunchKernel)
    sass(cubin, kernel=None) / sass_lines(cubin, pattern)            -> the machine code, via cuobjdump
    resource_usage(cubin)                                            -> registers, shared memory, spills

We always ship CUBIN (machine code for one architecture), never PTX: a PTX file from a newer NVRTC than the
driver is refused (CUDA_ERROR_UNSUPPORTED_PTX_VERSION), a cubin loads. Compiling needs no GPU: with none,
`arch` defaults to sm_90a (Hopper), so a laptop can still build the Hopper kernels and read their SASS.

A compile error raises CompileError, whose message has NVRTC's log and the offending source lines with
numbers and a marker, so a learner sees the mistake in their own text.
"""
from __future__ import annotations

import dataclasses
import functools
import hashlib
import os
import pathlib
import re
import shutil
import subprocess
import tempfile
import threading

DEFAULT_ARCH = "sm_90a"
INCLUDE = pathlib.Path(__file__).resolve().parent / "kit" / "include"   # shared device headers and kernels
CACHE_DIR = pathlib.Path(os.environ.get("CUDABOOK_CACHE", pathlib.Path.home() / ".cache" / "cudabook")) / "cubin"

_memory_cache: dict[str, bytes] = {}
_building: dict = {}        # cache key -> threading.Event, set when the thread building it is done
_lock = threading.Lock()
stats = {"compiled": 0, "memory_hits": 0, "disk_hits": 0}


class CompileError(RuntimeError):
    """NVRTC rejected the source. `log` is the compiler's log; `errors` lists (file, line, message)."""

    def __init__(self, message, log="", errors=()):
        super().__init__(message)
        self.log = log
        self.errors = list(errors)


class ToolMissing(RuntimeError):
    """A command-line tool (cuobjdump) is not installed; the message says how to get it."""


# ----------------------------------------------------------------------------------------------- arch


def default_arch() -> str:
    """The current GPU's architecture (sm_90a on Hopper, sm_XY otherwise), or sm_90a with no GPU."""
    from . import device
    cc = device.compute_capability()
    if cc is None:
        return DEFAULT_ARCH
    major, minor = cc
    return f"sm_{major}{minor}a" if (major, minor) == (9, 0) else f"sm_{major}{minor}"


def nvrtc_version() -> str:
    from cuda.bindings import nvrtc
    _, major, minor = nvrtc.nvrtcVersion()
    return f"{major}.{minor}"


def header_dirs() -> list[str]:
    """libcu++ (CCCL) and CUDA runtime header directories. Both are needed: in CUDA 13 cuda_fp16.h includes
    <nv/target> from CCCL, and <cuda/barrier> includes cuda_fp16.h."""
    from cuda.pathfinder import find_nvidia_header_directory
    dirs = []
    for lib in ("cccl", "cudart"):
        found = find_nvidia_header_directory(lib)
        if not found:
            raise CompileError(f"the {lib} headers were not found: pip install 'numba-cuda[cu13]' (it brings "
                               f"nvidia-cuda-cccl and nvidia-cuda-runtime), or install the CUDA toolkit")
        dirs.append(str(found))
    return dirs


# ----------------------------------------------------------------------------------------------- compile


_INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"', re.M)


def _local_includes(source: str, dirs, seen=None) -> list[tuple[str, str]]:
    """(name, text) of every "quoted" include found in `dirs`, recursively: part of the cache key."""
    seen = set() if seen is None else seen
    found = []
    for name in _INCLUDE.findall(source):
        if name in seen:
            continue
        for d in dirs:
            path = pathlib.Path(d) / name
            if path.is_file():
                seen.add(name)
                text = path.read_text()
                found.append((name, text))
                found.extend(_local_includes(text, dirs, seen))
                break
    return found


def _cache_key(source, arch, options, include_path, defines, std) -> str:
    h = hashlib.sha256()
    for part in (source, arch, repr(tuple(options)), repr(tuple(include_path)), repr(defines), std,
                 nvrtc_version(), "with its log"):   # cubins cached before logs were kept are not reused
        h.update(str(part).encode())
        h.update(b"\0")
    for name, text in _local_includes(source, include_path):
        h.update(name.encode() + b"\0" + text.encode() + b"\0")
    return h.hexdigest()[:32]


def _disk_cache_enabled(disk_cache) -> bool:
    if disk_cache is not None:
        return bool(disk_cache)
    return os.environ.get("CUDABOOK_NO_DISK_CACHE") != "1"


def compile(source: str, *, arch: str | None = None, options=(), include_cccl: bool = False,
            include_path=(), defines=None, name: str = "kernel.cu", std: str = "c++17",
            disk_cache: bool | None = None) -> bytes:
    """Compile CUDA C++ `source` to a cubin (bytes) with NVRTC.

    arch: "sm_90a", "sm_80", ... (default: this GPU's, or sm_90a with no GPU). options: extra NVRTC flags
    ("-lineinfo", "-maxrregcount=64", "-Xptxas=-v", "-DNAME=value", ...) or a dict of cuda.core
    ProgramOptions fields. include_cccl: add the libcu++ and runtime header directories.
    include_path: more directories for "quoted" includes (INCLUDE, the kit's headers, is always searched
    last). defines: {"NAME": value} macros (-DNAME=value).
    name: the file name NVRTC's messages use. Results are cached in memory and, unless disk_cache=False or
    CUDABOOK_NO_DISK_CACHE=1, on disk under ~/.cache/cudabook (keyed by source, headers, options, NVRTC).
    """
    include_path = [*include_path, INCLUDE]   # the kit's headers (hopper.cuh, mma_sync.cuh): every compile sees them
    from . import device
    emulator = device.emulator()
    if emulator is not None:            # grading on a CPU: the host compiler builds an emulated kernel instead
        return emulator.compile(source, include_path=include_path, defines=defines, name=name)
    arch = arch or default_arch()
    include_path = [str(p) for p in include_path]
    if include_cccl:
        include_path += header_dirs()
    defines = dict(sorted((defines or {}).items()))
    options = dict(options) if isinstance(options, dict) else tuple(options)
    key = _cache_key(source, arch, sorted(options.items()) if isinstance(options, dict) else options,
                     include_path, defines, std)
    while True:
        with _lock:
            if key in _memory_cache:
                stats["memory_hits"] += 1
                return _memory_cache[key]
            busy = _building.get(key)
            if busy is None:                    # this thread builds it; others asking meanwhile wait for it
                _building[key] = threading.Event()
                break
        busy.wait()                             # built by another thread (nvrtc.in_threads): from the cache now,
        #                                         or, if that build failed, built here again for its own error
    try:
        return _compile_new(key, source, arch, options, include_path, defines, name, std, disk_cache)
    finally:
        with _lock:
            _building.pop(key).set()


def _compile_new(key, source, arch, options, include_path, defines, name, std, disk_cache) -> bytes:
    use_disk = _disk_cache_enabled(disk_cache)
    path = CACHE_DIR / f"{key}.cubin"
    if use_disk and path.is_file():
        cubin = path.read_bytes()
        log_file = path.with_suffix(".log")
        with _lock:
            stats["disk_hits"] += 1
            _memory_cache[key] = cubin
            _logs[hashlib.sha256(cubin).hexdigest()] = log_file.read_text() if log_file.is_file() else ""
        return cubin
    cubin, log = _nvrtc(source, arch, options, include_path, defines, name, std)
    with _lock:
        stats["compiled"] += 1
        _memory_cache[key] = cubin
        _logs[hashlib.sha256(cubin).hexdigest()] = log
    if use_disk:
        try:
            CACHE_DIR.mkdir(parents=True, exist_ok=True)
            if log:
                _write_whole(path.with_suffix(".log"), log.encode())
            _write_whole(path, cubin)
        except OSError:
            pass   # a read-only home directory only costs a recompile
    return cubin


def _write_whole(path: pathlib.Path, data: bytes):
    """Write `data` to a temporary file beside `path`, then rename it: a reader never sees half a file."""
    with tempfile.NamedTemporaryFile(dir=path.parent, delete=False) as f:
        f.write(data)
    os.replace(f.name, path)


_logs: dict = {}


def compile_log(cubin: bytes) -> str:
    """What NVRTC and ptxas said while compiling this cubin (warnings and info lines; "" when nothing), e.g.
    ptxas's C7517 "wgmma.wait_group is injected ... by compiler" when code reads wgmma accumulators unwaited."""
    return _logs.get(hashlib.sha256(cubin).hexdigest(), "")


def in_threads(builds, workers: int | None = None) -> list:
    """Run `builds` (callables that compile, each returning its cubin) several at once, one a thread: NVRTC
    does not hold Python's lock while it compiles, so a cell that needs a dozen builds waits for the slowest few,
    not for their sum. The results land in the caches, where the launches that follow find them. Returns each
    build's cubin, or the exception it raised (a launch of the same build raises it again, in its own words)."""
    from concurrent.futures import ThreadPoolExecutor
    builds = list(builds)
    if not builds:
        return []

    def run(build):
        try:
            return build()
        except Exception as e:                  # noqa: BLE001 (kept for the caller; the launch reports it)
            return e
    with ThreadPoolExecutor(max_workers=workers or min(len(builds), os.cpu_count() or 1)) as pool:
        return list(pool.map(run, builds))


def clear_cache(disk: bool = False):
    """Forget compiled cubins (in memory; on disk too if disk=True)."""
    with _lock:
        _memory_cache.clear()
    if disk and CACHE_DIR.is_dir():
        for p in list(CACHE_DIR.glob("*.cubin")) + list(CACHE_DIR.glob("*.log")):
            p.unlink(missing_ok=True)


_FLAGS = {"-lineinfo": ("lineinfo", True), "--generate-line-info": ("lineinfo", True), "-G": ("debug", True),
          "--device-debug": ("debug", True), "-use_fast_math": ("use_fast_math", True),
          "--use_fast_math": ("use_fast_math", True), "-fmad=false": ("fma", False), "--fmad=false": ("fma", False),
          "-ftz=true": ("ftz", True), "-w": ("disable_warnings", True)}


def _option_fields(options) -> dict:
    """ProgramOptions fields from `options`: a dict of fields, or NVRTC-style flags ("-lineinfo",
    "-maxrregcount=64", "-Xptxas=-v", "-DNAME=value")."""
    if isinstance(options, dict):
        return dict(options)
    fields, defines, ptxas = {}, [], []
    for flag in options:
        if flag in _FLAGS:
            key, value = _FLAGS[flag]
            fields[key] = value
        elif flag.startswith(("-maxrregcount=", "--maxrregcount=")):
            fields["max_register_count"] = int(flag.split("=", 1)[1])
        elif flag.startswith(("-Xptxas=", "--ptxas-options=")):
            ptxas += flag.split("=", 1)[1].split(",")
        elif flag.startswith("-D"):
            name, _, value = flag[2:].partition("=")
            defines.append((name, value or "1"))
        else:
            raise ValueError(f"compile(): unknown option {flag!r}; use one of {sorted(_FLAGS)}, -maxrregcount=N, "
                             f"-Xptxas=..., -DNAME=value, or pass a dict of cuda.core ProgramOptions fields")
    if ptxas:
        fields["ptxas_options"] = ptxas
    if defines:
        fields["define_macro"] = defines
    return fields


def _nvrtc(source, arch, options, include_path, defines, name, std) -> bytes:
    from cuda.core import Program, ProgramOptions
    fields = _option_fields(options)
    macros = [(k, str(v)) for k, v in defines.items()] + list(fields.pop("define_macro", []) or [])
    opts = ProgramOptions(name=name, arch=arch, std=std, include_path=include_path or None,
                          define_macro=macros or None, **fields)
    try:
        import io
        program = Program(source, code_type="c++", options=opts)
        log = io.StringIO()
        cubin = bytes(program.compile("cubin", logs=log).code)
        return cubin, log.getvalue().replace("\x00", "").strip()
    except Exception as e:   # cuda.core raises NVRTCError (a CUDAError) with the log in its message
        text = str(e)
        if "NVRTC_ERROR_COMPILATION" not in text:
            raise
    # raised out here, without the Program: an error kept for later (nvrtc.in_threads) would otherwise hold it
    # through its frames and cuda.core's, and cuda.core fails noisily freeing it at the interpreter's exit
    program = None                              # noqa: F841
    raise _compile_error(text, source, name)


_DIAG = re.compile(r"^(?P<file>[^\n(]+)\((?P<line>\d+)\): (?P<kind>error|catastrophic error|warning)[^:]*: "
                   r"(?P<msg>.*)$", re.M)


def _compile_error(text: str, source: str, name: str) -> CompileError:
    log = text.split("compilation log:", 1)[-1].strip().rstrip("\x00").strip()
    errors = [(m["file"], int(m["line"]), m["msg"]) for m in _DIAG.finditer(log) if "error" in m["kind"]]
    lines = source.splitlines()
    parts = [f"NVRTC could not compile {name} ({len(errors)} error{'s' if len(errors) != 1 else ''})"]
    for file, line, msg in errors[:5]:
        parts.append(f"\n{file}:{line}: error: {msg}")
        text_lines = lines if pathlib.PurePath(file).name == pathlib.PurePath(name).name else _read_lines(file)
        parts.append(source_excerpt(text_lines, line))
    parts.append("\nCompiler log:\n" + log)
    return CompileError("\n".join(parts), log=log, errors=errors)


def _read_lines(file):
    try:
        return pathlib.Path(file).read_text().splitlines()
    except OSError:
        return []


def source_excerpt(lines, line: int, context: int = 2) -> str:
    """The lines around `line` (1-based), numbered, the offending one marked with '>>' and a caret row."""
    if not lines or not 1 <= line <= len(lines):
        return f"    (line {line} is not in the source text)"
    out = []
    for n in range(max(1, line - context), min(len(lines), line + context) + 1):
        text = lines[n - 1]
        out.append(f"{'>>' if n == line else '  '} {n:4d} | {text}")
        if n == line:
            indent = len(text) - len(text.lstrip())
            out.append(f"   {'':4s} | {' ' * indent}{'^' * max(1, len(text.strip()))}")
    return "\n".join(out)


# ----------------------------------------------------------------------------------------------- SASS


def _tool_path(tool: str) -> str | None:
    """A CUDA command-line tool: from the pip wheels (nvidia/cu13/bin), PATH, or the CUDA toolkit."""
    try:
        import nvidia
        for root in getattr(nvidia, "__path__", []):
            for sub in ("cu13", "cu12"):
                c = pathlib.Path(root) / sub / "bin" / tool
                if c.is_file() and os.access(c, os.X_OK):
                    return str(c)
    except ImportError:
        pass
    found = shutil.which(tool)
    if found:
        return found
    c = f"/usr/local/cuda/bin/{tool}"
    return c if os.access(c, os.X_OK) else None


def cuobjdump_path() -> str:
    """Where cuobjdump is (it needs nvdisasm beside it, or on PATH, to print SASS)."""
    found = _tool_path("cuobjdump")
    if found is None:
        raise ToolMissing("cuobjdump is not installed, so the SASS cannot be shown: "
                          "pip install nvidia-cuda-cuobjdump nvidia-cuda-nvdisasm "
                          "(or install the CUDA toolkit and put its bin/ on PATH)")
    return found


_dumps: dict = {}        # (the cubin's digest, cuobjdump's arguments) -> its output: the last _DUMPS_KEPT
_DUMPS_KEPT = 16


def _cuobjdump(cubin: bytes, *args) -> str:
    """cuobjdump's output for this cubin, remembered: a test or lesson asks several questions of one cubin's SASS
    (sass_lines once for each instruction it looks for), and each dump runs cuobjdump and nvdisasm again (about
    a second for a Hopper kernel on a CPU; 209 dumps of 95 different ones in the SASS tests)."""
    key = (hashlib.sha256(cubin).hexdigest(), args)
    with _lock:
        if key in _dumps:
            _dumps[key] = _dumps.pop(key)      # the most recently used last
            return _dumps[key]
    out = _run_cuobjdump(cubin, *args)
    with _lock:
        _dumps[key] = out
        while len(_dumps) > _DUMPS_KEPT:
            del _dumps[next(iter(_dumps))]
    return out


def _run_cuobjdump(cubin: bytes, *args) -> str:
    exe = cuobjdump_path()
    env = dict(os.environ)
    if "--dump-sass" in args:
        nvdisasm = _tool_path("nvdisasm")
        if nvdisasm is None:
            raise ToolMissing("cuobjdump needs nvdisasm to print SASS, and it is not installed: "
                              "pip install nvidia-cuda-nvdisasm (or put the CUDA toolkit's bin/ on PATH)")
        env["PATH"] = os.path.dirname(nvdisasm) + os.pathsep + env.get("PATH", "")
        env.setdefault("NVDISASM_PATH", os.path.dirname(nvdisasm))
    with tempfile.TemporaryDirectory() as d:
        path = pathlib.Path(d) / "code.cubin"
        path.write_bytes(cubin)
        run = subprocess.run([exe, *args, str(path)], capture_output=True, text=True, env=env)
    if run.returncode != 0:
        raise RuntimeError(f"cuobjdump {' '.join(args)} failed: {run.stderr.strip()}")
    return run.stdout


def sass(cubin: bytes, kernel: str | None = None) -> str:
    """The SASS (machine code) of a cubin, or of one kernel in it."""
    args = ["--dump-sass"] + (["--function", kernel] if kernel else [])
    return _cuobjdump(cubin, *args)


def sass_lines(cubin: bytes, pattern: str, kernel: str | None = None) -> list[str]:
    """The SASS instructions that match a regular expression, e.g. "LDGSTS" or "UTMALDG"."""
    rx = re.compile(pattern)
    out = []
    for line in sass(cubin, kernel).splitlines():
        m = re.search(r"/\*[0-9a-f]{4,}\*/\s*(.*?)\s*;", line)
        if m and rx.search(m.group(1)):
            out.append(m.group(1))
    return out


def waits_first_in_sass(cubin: bytes, kernel: str) -> bool:
    """In this kernel's machine code, does griddepcontrol.wait (ACQBULK, in the sm_90 builds this workbook was
    written with) come before every access to global memory and before griddepcontrol.launch_dependents
    (PREEXIT)? What launching a kernel with PDL relies on when it reads what the kernel before it wrote."""
    ops = [line.split()[1] if line.startswith("@") else line.split()[0] for line in sass_lines(cubin, r".", kernel)]
    if "ACQBULK" not in ops:
        return False
    wait = ops.index("ACQBULK")
    touches = ("LDG", "STG", "ATOMG", "RED", "UTMA", "UBLKCP", "PREEXIT")
    return all(i > wait for i, op in enumerate(ops) if op.startswith(touches))


_RES = re.compile(r"Function (\S+):\s*\n\s*REG:(\d+)\s+STACK:(\d+)\s+SHARED:(\d+)\s+LOCAL:(\d+)"
                  r"(?:\s+CONSTANT\[\d+\]:\d+)*(?:\s+TEXTURE:\d+)?(?:\s+SURFACE:\d+)?(?:\s+SAMPLER:\d+)?", re.M)


def resource_usage(cubin: bytes) -> dict:
    """{kernel: {"registers", "stack", "shared", "local"}} from cuobjdump --dump-resource-usage.
    "shared" is static shared memory only; a nonzero "local" or "stack" means register spills."""
    text = _cuobjdump(cubin, "--dump-resource-usage")
    out = {}
    for m in _RES.finditer(text):
        out[m.group(1)] = {"registers": int(m.group(2)), "stack": int(m.group(3)), "shared": int(m.group(4)),
                           "local": int(m.group(5))}
    return out


_texts: dict = {}


def cxx_code(text: str) -> str:
    """CUDA C++ without its comments (// and /* */, not inside string or character literals), trailing blanks
    and empty lines: what a digest of the code should see."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if c in "\"'":                                   # a literal: copied to its closing quote
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            out.append(text[i:j + 1])
            i = j + 1
        elif text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            out.append(" ")
            i = n if j < 0 else j + 2
        else:
            out.append(c)
            i += 1
    return "\n".join(line.rstrip() for line in "".join(out).splitlines() if line.strip())


def source_text(path) -> str:
    """A kernel file's text, re-read when the file changes (an edited kernel is picked up at the next launch)."""
    path = pathlib.Path(path)
    mtime = path.stat().st_mtime_ns
    if _texts.get(path, (None,))[0] != mtime:
        _texts[path] = (mtime, path.read_text())
    return _texts[path][1]


def kernel_text(kernel, default, stage: str) -> str:
    """The CUDA C++ a stage compiles: its own file `default` (kernel=None), a learner's whole source text, or a
    pathlib.Path to one; a TypeError naming the stage otherwise."""
    if kernel is None:
        return source_text(default)
    if isinstance(kernel, pathlib.Path):
        return kernel.read_text()
    if isinstance(kernel, str):
        return kernel
    raise TypeError(f"{stage}: kernel= takes CUDA C++ source text (or a pathlib.Path), got {type(kernel).__name__}")


# ----------------------------------------------------------------------------------------------- load and launch


def ensure_context():
    """Make Numba's context (the device's primary context) current for cuda.core and the driver API too."""
    from numba import cuda
    cuda.current_context()
    from cuda.core import Device
    dev = Device(0)
    dev.set_current()
    return dev


def _check(result, what):
    from cuda.bindings import driver as drv
    err = result[0] if isinstance(result, tuple) else result
    if err != drv.CUresult.CUDA_SUCCESS:
        name = getattr(err, "name", str(err))
        raise RuntimeError(f"{what} failed: {name}")
    return result[1] if isinstance(result, tuple) and len(result) == 2 else result


@dataclasses.dataclass
class Kernel:
    """A kernel loaded from a cubin with the driver API (cuModuleLoadData + cuModuleGetFunction)."""
    name: str
    cubin: bytes
    module: object
    function: object

    def set_max_dynamic_shared(self, nbytes: int):
        """Allow more than 48 KiB of dynamic shared memory (the default ceiling)."""
        from cuda.bindings import driver as drv
        attr = drv.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
        _check(drv.cuFuncSetAttribute(self.function, attr, int(nbytes)), "cuFuncSetAttribute")

    def blocks_per_sm(self, threads: int, dynamic_shared: int = 0) -> int:
        from cuda.bindings import driver as drv
        return _check(drv.cuOccupancyMaxActiveBlocksPerMultiprocessor(self.function, threads, dynamic_shared),
                      "cuOccupancyMaxActiveBlocksPerMultiprocessor")

    def attribute(self, name: str) -> int:
        """A function attribute by its short name: "num_regs", "local_size_bytes", "shared_size_bytes"..."""
        from cuda.bindings import driver as drv
        attr = getattr(drv.CUfunction_attribute, "CU_FUNC_ATTRIBUTE_" + name.upper())
        return _check(drv.cuFuncGetAttribute(attr, self.function), "cuFuncGetAttribute")

    def launch(self, grid, block, args, types, *, shared: int = 0, stream: int = 0, pdl: bool = False):
        """cuLaunchKernel on `stream` (0: the legacy default stream, which CUDA events bracket).

        args/types follow cuda-bindings: a ctypes type per argument (ctypes.c_void_p for a device address,
        ctypes.c_int for an int), or None for an object passed by value through its getPtr() (a CUtensorMap).
        pdl=True launches with programmatic dependent launch (cuLaunchKernelEx with the programmatic stream
        serialization attribute): the kernel may be launched before the previous one on the stream has
        completed, once every block of that one has run `griddepcontrol.launch_dependents` or exited (a block
        that never runs it triggers when it exits). The kernel must run `griddepcontrol.wait` before it reads
        what the previous kernel writes. Of the workbook's own kernels only the resampling prepasses
        (resample_find, resample_intervals) run launch_dependents; after any other kernel a pdl launch begins
        once that kernel's last block has exited, so what it saves is the gap between that kernel's completion
        and this launch, not that kernel's tail.
        """
        from cuda.bindings import driver as drv
        gx, gy, gz = (tuple(grid) + (1, 1))[:3] if not isinstance(grid, int) else (grid, 1, 1)
        bx, by, bz = (tuple(block) + (1, 1))[:3] if not isinstance(block, int) else (block, 1, 1)
        if not pdl:
            _check(drv.cuLaunchKernel(self.function, gx, gy, gz, bx, by, bz, shared, stream,
                                      (tuple(args), tuple(types)), 0), f"cuLaunchKernel({self.name})")
            return
        conf = drv.CUlaunchConfig()
        conf.gridDimX, conf.gridDimY, conf.gridDimZ = gx, gy, gz
        conf.blockDimX, conf.blockDimY, conf.blockDimZ = bx, by, bz
        conf.sharedMemBytes, conf.hStream = shared, stream
        attr = drv.CUlaunchAttribute()
        attr.id = drv.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION
        attr.value.programmaticStreamSerializationAllowed = 1
        conf.attrs, conf.numAttrs = [attr], 1
        _check(drv.cuLaunchKernelEx(conf, self.function, (tuple(args), tuple(types)), 0),
               f"cuLaunchKernelEx({self.name}, programmatic dependent launch)")


_WAIT = re.compile(r'\basm\s*(?:volatile\s*|__volatile__\s*)?\(\s*"\s*griddepcontrol\.wait\s*;'
                   r'|\bcudaGridDependencySynchronize\s*\(')
_TRIGGER = re.compile(r'launch_dependents|cudaTriggerProgrammaticLaunchCompletion')


@functools.lru_cache(maxsize=64)         # (asked on every launch: reading the source takes a millisecond)
def waits_for_prerequisite(source: str, kernel: str | None = None) -> bool:
    """Does this source run `griddepcontrol.wait` (an asm statement, or cudaGridDependencySynchronize(); not in a
    comment, a string or an `#if 0` block), in the body of the function named `kernel` when one is named? Only
    such a kernel may be launched with pdl=True after one that writes what it reads: without the wait it would
    race. This reads text, not what the compiler made of it: a wait inside a helper is not seen (the kernel is
    launched the ordinary way, slower and right), and a wait the code never reaches is taken at its word. The
    workbook's own kernels are checked on their machine code by the tests."""
    text = _without_comments(source)
    if kernel is not None:
        text = _function_body(text, kernel)
    return bool(_WAIT.search(text))


@functools.lru_cache(maxsize=64)         # (asked on every launch: reading the source takes a millisecond)
def waits_before_trigger(source: str, kernel: str) -> bool:
    """Does `kernel` wait for the kernel before it (as waits_for_prerequisite sees a wait) before anything in its
    body that lets the next one start (griddepcontrol.launch_dependents, or
    cudaTriggerProgrammaticLaunchCompletion, wherever the words appear)? A kernel launched with pdl=True whose
    dependent reads, without waiting, what the kernel before both of them wrote needs exactly this."""
    body = _function_body(_without_comments(source), kernel)
    wait, trigger = _WAIT.search(body), _TRIGGER.search(body)
    return wait is not None and (trigger is None or wait.start() < trigger.start())


def _without_comments(source: str) -> str:
    """C++ source without its comments and its `#if 0` blocks (string and character literals kept: an asm
    statement is one)."""
    text = re.sub(r'''("(?:\\.|[^"\\\n])*")|('(?:\\.|[^'\\\n])*')|//[^\n]*|/\*.*?\*/''',
                  lambda m: m.group(1) or m.group(2) or " ", source, flags=re.S)
    out, depth = [], 0                   # depth > 0: inside an `#if 0` (and the conditionals nested in it)
    for line in text.split("\n"):
        directive = re.match(r"\s*#\s*(\w+)\s*(\S*)", line)
        word = directive.group(1) if directive else ""
        if depth:
            if word.startswith("if"):
                depth += 1
            elif word == "endif" or (depth == 1 and word in ("else", "elif")):
                depth -= 1
            out.append("")
            continue
        if word == "if" and directive.group(2) == "0":
            depth = 1
            out.append("")
            continue
        out.append(line)
    return "\n".join(out)


def _function_body(source: str, name: str) -> str:
    """The text between the braces of the function `name` ("" when the source defines none)."""
    for m in re.finditer(rf"\b{re.escape(name)}\s*\(", source):
        i = m.end()
        depth = 1
        while i < len(source) and depth:                 # the parameter list
            depth += {"(": 1, ")": -1}.get(source[i], 0)
            i += 1
        j = i
        while j < len(source) and source[j] in " \t\r\n":
            j += 1
        if j >= len(source) or source[j] != "{":          # a call or a declaration, not the definition
            continue
        depth, k = 1, j + 1
        while k < len(source) and depth:
            depth += {"{": 1, "}": -1}.get(source[k], 0)
            k += 1
        return source[j + 1:k - 1]
    return ""


_loaded: dict[tuple, Kernel] = {}


def load(cubin: bytes, kernel_name: str) -> Kernel:
    """Load `kernel_name` from a cubin into the current context (Numba's primary context); cached."""
    from . import device
    emulator = device.emulator(any_time=True)
    if emulator is not None and emulator.is_image(cubin):
        return emulator.load(cubin, kernel_name)
    key = (hashlib.sha256(cubin).hexdigest(), kernel_name)
    if key in _loaded:
        return _loaded[key]
    from cuda.bindings import driver as drv
    ensure_context()
    module = _check(drv.cuModuleLoadData(cubin), "cuModuleLoadData")
    function = _check(drv.cuModuleGetFunction(module, kernel_name.encode()),
                      f"cuModuleGetFunction({kernel_name!r})")
    k = Kernel(kernel_name, cubin, module, function)
    _loaded[key] = k
    return k


@functools.lru_cache(maxsize=64)
def _core_object(cubin: bytes):
    from cuda.core import ObjectCode
    return ObjectCode.from_cubin(cubin)


def core_kernel(cubin: bytes, kernel_name: str, max_dynamic_shared: int = 0):
    """The same kernel as a cuda.core Kernel (for cuda.core.launch), with its dynamic shared memory limit."""
    ensure_context()
    kernel = _core_object(cubin).get_kernel(kernel_name)
    if max_dynamic_shared > 48 * 1024:
        from cuda.bindings import driver as drv
        from cuda.core import Device
        attr = drv.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
        handle = kernel.handle
        if not isinstance(handle, drv.CUkernel):
            handle = drv.CUkernel(int(handle))
        _, dev = drv.cuDeviceGet(Device().device_id)
        _check(drv.cuKernelSetAttribute(attr, int(max_dynamic_shared), handle, dev), "cuKernelSetAttribute")
    return kernel


__all__ = ["source_text", "kernel_text", "compile_log", "CompileError", "ToolMissing", "compile", "clear_cache",
           "default_arch", "nvrtc_version",
           "header_dirs", "source_excerpt", "sass", "sass_lines", "waits_first_in_sass", "resource_usage", "cuobjdump_path",
           "ensure_context", "load", "core_kernel", "Kernel", "stats", "DEFAULT_ARCH"]
