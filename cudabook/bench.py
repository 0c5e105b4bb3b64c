"""Measure, against a ceiling taken in the same process.

Times come from CUDA events around the launches after a warm-up, the median of many runs. The ceiling is a
device-to-device copy of a buffer as large as the problem's traffic: GB/s counts bytes read plus bytes written.
A kernel's GB/s counts the fewest bytes the problem needs (`Problem.min_bytes`), so % of copy is honest:
extra traffic a kernel makes lowers its figure.

Two details that matter. Numba spends tens of microseconds of host time on every launch; timing a single
launch would count that, so a measurement times `batch` launches queued back to back and divides. And the
copy ceiling is the faster of the driver's own device-to-device copy and a 16-byte-per-thread copy kernel:
the one a streaming kernel can actually reach.
"""
from __future__ import annotations

import statistics

import numpy as np
from numba import cuda

from . import SIMULATOR


class NoTimingsInSimulator(RuntimeError):
    pass


def _require_gpu():
    if SIMULATOR:
        raise NoTimingsInSimulator("the simulator has no clock worth reading: timings need a GPU")


def time_ms(fn, *, warmup=3, repeats=25, batch=1, hold=True) -> float:
    """Median milliseconds of GPU time of one `fn()` (which only enqueues work on the default stream).

    CUDA events bracket `batch` calls queued back to back. With `hold`, a short sleeping kernel is queued
    first, long enough for the host to enqueue everything behind it: the GPU then runs the timed calls back
    to back, and the host's launch overhead (Numba's dispatch costs tens to hundreds of microseconds a
    launch) stays out of the number. Without `hold`, a kernel faster than its launch would be timed at the
    speed of Python."""
    _require_gpu()
    import time
    for _ in range(warmup):
        fn()
    cuda.synchronize()
    t0 = time.perf_counter()
    fn()
    host_s = time.perf_counter() - t0
    cuda.synchronize()
    hold_ns = int(2 * (batch + 2) * host_s * 1e9) + 200_000
    times = []
    for _ in range(repeats):
        start, stop = cuda.event(), cuda.event()
        if hold:
            _sleeper()[1, 1](hold_ns // 1000)
        start.record()
        for _ in range(batch):
            fn()
        stop.record()
        stop.synchronize()
        times.append(cuda.event_elapsed_time(start, stop) / batch)
    return statistics.median(times)


_SLEEPER = []


def _sleeper():
    """A one-thread kernel that sleeps about `us` microseconds (it keeps the GPU busy while the host queues)."""
    if not _SLEEPER:
        @cuda.jit
        def sleep_us(us):
            for _ in range(us):
                cuda.nanosleep(1000)
        _SLEEPER.append(sleep_us)
    return _SLEEPER[0]


# (threads a block, 16-byte vectors a thread, persistent): the shapes of stream_copy.cu the ceiling tries
STREAM_SHAPES = ((256, 4, False), (256, 8, False), (512, 8, False), (1024, 4, False), (512, 8, True))


def copy_ceilings(nbytes, *, repeats=25) -> dict:
    """GB/s (read + write counted) of copying nbytes / 2 from one buffer to another, every way we have:
    the driver's cuMemcpyDtoDAsync, a Numba copy kernel moving 4 x 16 bytes per thread per step, the C++
    streaming copies of kit/include/stream_copy.cu in STREAM_SHAPES (loads that skip L1, stores marked streaming:
    on an H100 the driver's copy is not the fastest copy), and PyTorch's `copy_` when torch is installed. The
    ceiling is the fastest: the one a streaming kernel can reach."""
    _require_gpu()
    from cuda.bindings import driver as drv

    words = max(int(nbytes) // 2 // 64, 1 << 14) * 16
    src = cuda.to_device(np.arange(words, dtype=np.uint32).reshape(1, 1, words))
    dst = cuda.device_array_like(src)
    moved = 2 * words * 4

    def driver_copy():
        err, = drv.cuMemcpyDtoDAsync(dst.device_ctypes_pointer.value, src.device_ctypes_pointer.value, words * 4, 0)
        if err != drv.CUresult.CUDA_SUCCESS:
            raise RuntimeError(f"cuMemcpyDtoDAsync failed: {err.name}")

    sms = cuda.get_current_device().MULTIPROCESSOR_COUNT
    kernel = _copy_kernel()
    out = {"memcpy": moved / (time_ms(driver_copy, repeats=repeats, batch=10) * 1e-3) / 1e9}
    for per_sm in (4, 8):
        blocks = sms * per_sm
        ms = time_ms(lambda: kernel[blocks, 256](src, dst), repeats=repeats, batch=10)
        out[f"kernel16x4_{per_sm}"] = moved / (ms * 1e-3) / 1e9
    if not np.array_equal(dst.copy_to_host(), src.copy_to_host()):
        raise RuntimeError("the copy ceiling's copy kernel copied wrongly")
    out.update(_stream_copies(src, dst, words // 4, sms, repeats))
    out.update(_torch_copy(words * 4, repeats))
    return {k: round(v, 1) for k, v in out.items()}


def _copy_kernel():
    from .vectors import loader, storer
    load_u32x4, store_u32x4 = loader(4, 3), storer(4, 3)     # a[n, r, i:i+4] as one 16-byte access

    @cuda.jit
    def copy16x4(a, b):
        """Grid-stride copy: each thread has four 16-byte loads in flight before it stores."""
        n = a.shape[2]
        step = 4 * cuda.gridDim.x * cuda.blockDim.x
        i = 4 * (cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x)
        while i + 3 * step < n:
            x0, x1, x2, x3 = load_u32x4(a, 0, 0, i)
            y0, y1, y2, y3 = load_u32x4(a, 0, 0, i + step)
            z0, z1, z2, z3 = load_u32x4(a, 0, 0, i + 2 * step)
            u0, u1, u2, u3 = load_u32x4(a, 0, 0, i + 3 * step)
            store_u32x4(b, 0, 0, i, x0, x1, x2, x3)
            store_u32x4(b, 0, 0, i + step, y0, y1, y2, y3)
            store_u32x4(b, 0, 0, i + 2 * step, z0, z1, z2, z3)
            store_u32x4(b, 0, 0, i + 3 * step, u0, u1, u2, u3)
            i += 4 * step
        while i < n:
            x0, x1, x2, x3 = load_u32x4(a, 0, 0, i)
            store_u32x4(b, 0, 0, i, x0, x1, x2, x3)
            i += step

    return copy16x4


def _stream_copies(src, dst, vectors, sms, repeats) -> dict:
    """GB/s of stream_copy.cu in each of STREAM_SHAPES, each checked (a wrong copy raises)."""
    import ctypes
    import pathlib

    from . import nvrtc
    text = (pathlib.Path(__file__).parent / "kit" / "include" / "stream_copy.cu").read_text()
    a, b = src.device_ctypes_pointer.value, dst.device_ctypes_pointer.value
    out = {}
    for threads, unroll, persistent in STREAM_SHAPES:
        kernel = nvrtc.load(nvrtc.compile(text, name="stream_copy.cu",
                                          defines=dict(NT=threads, UNROLL=unroll, PERSISTENT=int(persistent))),
                            "stream_copy")
        steps = -(-vectors // (threads * unroll))
        blocks = min(steps, sms * kernel.blocks_per_sm(threads)) if persistent else steps
        types = (ctypes.c_void_p, ctypes.c_void_p, ctypes.c_longlong)

        def run():
            kernel.launch((blocks, 1, 1), (threads, 1, 1), (a, b, vectors), types)
        dst.copy_to_device(np.zeros(dst.shape, dst.dtype))
        run()
        if not np.array_equal(dst.copy_to_host(), src.copy_to_host()):
            raise RuntimeError(f"stream_copy ({threads} x {unroll}, persistent={persistent}) copied wrongly")
        ms = time_ms(run, repeats=repeats, batch=10)
        out[f"stream{threads}x{unroll}{'_persistent' if persistent else ''}"] = 2 * vectors * 16 / (ms * 1e-3) / 1e9
    return out


def _torch_copy(nbytes, repeats) -> dict:
    try:
        import torch
        if not torch.cuda.is_available():
            return {}
    except ImportError:
        return {}
    a = torch.empty(nbytes, dtype=torch.uint8, device="cuda").random_(0, 255)
    b = torch.empty_like(a)
    times = []
    for i in range(repeats + 3):
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(10):
            b.copy_(a)
        stop.record()
        stop.synchronize()
        if i >= 3:
            times.append(start.elapsed_time(stop) / 10)
    return {"torch_copy": 2 * nbytes / (statistics.median(times) * 1e-3) / 1e9}


def copy_GBps(nbytes, *, repeats=25) -> float:
    """The copy ceiling: the faster of the driver's copy and a 16-byte copy kernel, GB/s read + write."""
    return max(copy_ceilings(nbytes, repeats=repeats).values())


def measure_stage(launch, problem, *, repeats=25, batch=10, **params) -> dict:
    """median_us and GBps of a stage's launch on an uploaded problem (batch launches back to back)."""
    ms = time_ms(lambda: launch(problem, **params), repeats=repeats, batch=batch)
    return {"median_us": round(ms * 1e3, 2), "GBps": round(problem.min_bytes / (ms * 1e-3) / 1e9, 1)}
