"""Measure, against a ceiling taken in the same process.

Times come from CUDA events around the launches after a warm-up, the median of many runs. The ceiling is a
device-to-device copy that moves as many bytes as the problem's traffic (it reads half of them and writes the
other half): GB/s counts bytes read plus bytes written.
A kernel's GB/s counts the fewest bytes the problem needs (`Problem.min_bytes`), so % of copy is honest:
extra traffic a kernel makes lowers its figure.

Two details that matter. Numba spends tens of microseconds of host time on every launch; timing a single
launch would count that, so a measurement times `batch` launches queued back to back and divides. And the
copy ceiling is the fastest of several copies (the driver's own device-to-device copy, 16-byte-per-thread copy
kernels: copy_ceilings): a rate a streaming kernel can actually reach, measured, not the memory's peak.
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
    the driver's cuMemcpyDtoDAsync, a Numba copy kernel moving 4 x 16 bytes per thread per step, and the C++
    streaming copies of kit/include/stream_copy.cu in STREAM_SHAPES (loads that skip L1, stores marked streaming:
    on an H100 the driver's copy is not the fastest copy). The ceiling is the fastest: the one a streaming kernel
    can reach. Each copy is checked once before it is timed (a wrong copy raises); the buffers are filled and
    compared on the GPU, so gigabytes cost the host nothing. PyTorch's `copy_` is not among them: for contiguous
    tensors of one type it is cudaMemcpyAsync, the driver's copy again (the records until 7a00c85 timed both:
    torch's at 0.97-1.001x the driver's), and importing torch for it cost a lesson without peers seconds."""
    _require_gpu()
    from cuda.bindings import driver as drv

    words = max(int(nbytes) // 2 // 64, 1 << 14) * 16
    src = cuda.device_array((1, 1, words), dtype=np.uint32)
    dst = cuda.device_array_like(src)
    moved = 2 * words * 4
    sms = cuda.get_current_device().MULTIPROCESSOR_COUNT
    ledger = _CopyLedger(src, dst, words, sms)

    def driver_copy():
        err, = drv.cuMemcpyDtoDAsync(dst.device_ctypes_pointer.value, src.device_ctypes_pointer.value, words * 4, 0)
        if err != drv.CUresult.CUDA_SUCCESS:
            raise RuntimeError(f"cuMemcpyDtoDAsync failed: {err.name}")

    ledger.check(driver_copy, "the driver's cuMemcpyDtoDAsync")
    out = {"memcpy": moved / (time_ms(driver_copy, repeats=repeats, batch=10) * 1e-3) / 1e9}
    kernel = _copy_kernel()
    for per_sm in (4, 8):
        blocks = sms * per_sm

        def numba_copy():
            kernel[blocks, 256](src, dst)
        ledger.check(numba_copy, f"the copy ceiling's Numba copy kernel ({blocks} blocks)")
        out[f"kernel16x4_{per_sm}"] = moved / (time_ms(numba_copy, repeats=repeats, batch=10) * 1e-3) / 1e9
    out.update(_stream_copies(ledger, repeats))
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


def _stream_copy_text() -> str:
    import pathlib
    return (pathlib.Path(__file__).parent / "kit" / "include" / "stream_copy.cu").read_text()


class _CopyLedger:
    """The copy ceiling's source (filled once, on the GPU, with a pattern of each word's index) and destination,
    and `check`: clear the destination, copy once, and count the 16-byte vectors that differ, all on the GPU."""

    def __init__(self, src, dst, words, sms):
        import ctypes

        from . import nvrtc
        self.words, self.sms = words, sms
        self.a, self.b = src.device_ctypes_pointer.value, dst.device_ctypes_pointer.value
        cubin = nvrtc.compile(_stream_copy_text(), name="stream_copy.cu")
        self.count = cuda.to_device(np.zeros(1, dtype=np.uint64))
        self._unequal = nvrtc.load(cubin, "count_unequal")
        self._types = (ctypes.c_void_p, ctypes.c_void_p, ctypes.c_longlong, ctypes.c_void_p)
        nvrtc.load(cubin, "fill_words").launch((sms * 8, 1, 1), (256, 1, 1), (self.a, words),
                                                (ctypes.c_void_p, ctypes.c_longlong))

    def check(self, copy, what):
        from cuda.bindings import driver as drv
        err, = drv.cuMemsetD32Async(self.b, 0, self.words, 0)
        if err != drv.CUresult.CUDA_SUCCESS:
            raise RuntimeError(f"cuMemsetD32Async failed: {err.name}")
        copy()
        self.count.copy_to_device(np.zeros(1, dtype=np.uint64))
        self._unequal.launch((self.sms * 8, 1, 1), (256, 1, 1),
                             (self.a, self.b, self.words // 4, self.count.device_ctypes_pointer.value), self._types)
        unequal = int(self.count.copy_to_host()[0])
        if unequal:
            raise RuntimeError(f"{what} copied wrongly: {unequal:,} of {self.words // 4:,} 16-byte vectors differ")


def _stream_copies(ledger, repeats) -> dict:
    """GB/s of stream_copy.cu in each of STREAM_SHAPES, each checked (a wrong copy raises)."""
    import ctypes

    from . import nvrtc
    text = _stream_copy_text()
    vectors, sms = ledger.words // 4, ledger.sms
    out = {}
    for threads, unroll, persistent in STREAM_SHAPES:
        kernel = nvrtc.load(nvrtc.compile(text, name="stream_copy.cu",
                                          defines=dict(NT=threads, UNROLL=unroll, PERSISTENT=int(persistent))),
                            "stream_copy")
        steps = -(-vectors // (threads * unroll))
        blocks = min(steps, sms * kernel.blocks_per_sm(threads)) if persistent else steps
        types = (ctypes.c_void_p, ctypes.c_void_p, ctypes.c_longlong)

        def run():
            kernel.launch((blocks, 1, 1), (threads, 1, 1), (ledger.a, ledger.b, vectors), types)
        ledger.check(run, f"stream_copy ({threads} x {unroll}, persistent={persistent})")
        ms = time_ms(run, repeats=repeats, batch=10)
        out[f"stream{threads}x{unroll}{'_persistent' if persistent else ''}"] = 2 * vectors * 16 / (ms * 1e-3) / 1e9
    return out


def copy_GBps(nbytes, *, repeats=25) -> float:
    """The copy ceiling: the fastest of copy_ceilings' copies (the driver's and the copy kernels), GB/s
    read + write."""
    return max(copy_ceilings(nbytes, repeats=repeats).values())


def measure_stage(launch, problem, *, repeats=25, batch=10, **params) -> dict:
    """median_us and GBps of a stage's launch on an uploaded problem (batch launches back to back)."""
    ms = time_ms(lambda: launch(problem, **params), repeats=repeats, batch=batch)
    return {"median_us": round(ms * 1e3, 2), "GBps": round(problem.min_bytes / (ms * 1e-3) / 1e9, 1)}


def run_for(fn, seconds: float, *, settle: float = 0.5, chunk: int = 10) -> float:
    """Milliseconds of GPU time a call of `fn()` when it runs back to back for `seconds`: the first `settle`
    seconds untimed (the clock comes down to where the load holds it), then CUDA events around the rest, the host
    waiting every `chunk` calls so that it never queues far ahead (the short gap after each wait, while the host
    queues the next call, is inside the events and counted)."""
    _require_gpu()
    import time
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < settle:
        for _ in range(chunk):
            fn()
        cuda.synchronize()
    start, stop = cuda.event(), cuda.event()
    calls, t0 = 0, time.perf_counter()
    start.record()
    while time.perf_counter() - t0 < seconds:
        for _ in range(chunk):
            fn()
        calls += chunk
        cuda.synchronize()
    stop.record()
    stop.synchronize()
    return cuda.event_elapsed_time(start, stop) / calls


def sustained(calls: dict, *, seconds: float = 2.0, run=None) -> dict:
    """{name: [ms a call in each of its runs]} for callables each run back to back for `seconds` (run_for), in
    the order of `calls` and then reversed (a, b, b, a): a load long enough to meet the card's power cap, as a
    long job does, where head_to_head's rounds time a few milliseconds after a pause. `run(fn, seconds)`: the
    timer (run_for by default; a test passes its own)."""
    run = run or run_for
    names = list(calls)
    out = {n: [] for n in names}
    for n in names + names[::-1]:
        out[n].append(run(calls[n], seconds))
    return out


def head_to_head(calls: dict, *, rounds: int = 6, repeats: int = 3, batch: int = 5, time=None) -> dict:
    """{name: [ms of each round]} for callables timed in interleaved rounds: each round times every one once
    (time_ms), in order, and the next round in reverse. Two kernels compared so share whatever the card's clock
    does while they run (under a long tensor-core load the power cap lowers it: a kernel timed minutes after
    another may meet a slower card). `time`: the timer (time_ms by default; a test passes its own)."""
    time = time or (lambda fn: time_ms(fn, repeats=repeats, batch=batch))
    names = list(calls)
    out = {n: [] for n in names}
    for r in range(rounds):
        for n in (names if r % 2 == 0 else names[::-1]):
            out[n].append(time(calls[n]))
    return out
