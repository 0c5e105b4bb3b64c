"""Measure, against a ceiling taken in the same process.

Times come from CUDA events around the launches after a warm-up, the median of many runs. The ceiling is a
device-to-device copy of a buffer as large as the problem's traffic: GB/s counts bytes read plus bytes written.
A kernel's GB/s counts the fewest bytes the problem needs (`Problem.min_bytes`), so % of copy is honest:
extra traffic a kernel makes lowers its figure.
"""
from __future__ import annotations

import statistics

import numpy as np
from numba import cuda

from . import SIMULATOR

BENCH_SIZE = dict(B=64, S=4096, T=4096, D=256)


class NoTimingsInSimulator(RuntimeError):
    pass


def _require_gpu():
    if SIMULATOR:
        raise NoTimingsInSimulator("the simulator has no clock worth reading: timings need a GPU")


def time_ms(fn, *, warmup=3, repeats=25, flush=None) -> float:
    """Median milliseconds of `fn()` (which only enqueues GPU work), timed with CUDA events."""
    _require_gpu()
    for _ in range(warmup):
        fn()
    cuda.synchronize()
    times = []
    for _ in range(repeats):
        if flush is not None:
            flush()
        start, stop = cuda.event(), cuda.event()
        start.record()
        fn()
        stop.record()
        stop.synchronize()
        times.append(cuda.event_elapsed_time(start, stop))
    return statistics.median(times)


class L2Flush:
    """Writing a buffer larger than L2 between runs, so that no run finds its inputs in the cache."""

    def __init__(self, nbytes=256 << 20):
        self.buf = cuda.device_array(nbytes // 4, np.int32)

    def __call__(self):
        self.buf[:] = 0


def copy_GBps(nbytes, *, repeats=25) -> float:
    """The device-to-device copy ceiling: GB/s (read + write) of a cudaMemcpy of nbytes / 2 each way."""
    _require_gpu()
    n = max(int(nbytes) // 2 // 4, 1 << 20)
    src = cuda.to_device(np.arange(n, dtype=np.int32))
    dst = cuda.device_array_like(src)
    ms = time_ms(lambda: dst.copy_to_device(src), repeats=repeats)
    return 2 * n * 4 / (ms * 1e-3) / 1e9


def measure_stage(launch, problem, *, repeats=25, **params) -> dict:
    """median_us, GBps and the raw ms of one stage's launch on an uploaded problem."""
    ms = time_ms(lambda: launch(problem, **params), repeats=repeats)
    return {"median_us": round(ms * 1e3, 2), "GBps": round(problem.min_bytes / (ms * 1e-3) / 1e9, 1)}
