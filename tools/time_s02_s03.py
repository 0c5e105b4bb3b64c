"""Time stages 02 and 03 at the benchmark size against stage 01 and the copy ceiling, all in one process.

    python3 tools/time_s02_s03.py            (on a GPU; source tools/gpu_env.sh first on the device machine)

Two clocks, both CUDA events, median of 25 runs:
- "launch": events around one launch, as cudabook.bench.measure_stage does. It includes the host's launch
  overhead (Numba's dispatch), while the GPU idles, and that is tens of microseconds.
- "device": events around 20 launches in a row, divided by 20. The launches queue up, so the GPU never idles
  and the host overhead hides behind the kernels: this is the kernel's own time.
GB/s counts the problem's minimum traffic; % is of a copy ceiling measured the same way in the same run.
"""
import os
import re
import sys
from collections import Counter

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import cudabook  # noqa: E402  (before numba)
import numpy as np  # noqa: E402
from numba import cuda  # noqa: E402

from cudabook import bench, device  # noqa: E402
from cudabook.resample import random_problem, s01_naive, upload  # noqa: E402
from cudabook.resample import s02_warp_shuffles as s02  # noqa: E402
from cudabook.resample import s03_coalesced as s03  # noqa: E402

REPEAT = 20


def device_ms(fn):
    def many():
        for _ in range(REPEAT):
            fn()
    return bench.time_ms(many, warmup=1) / REPEAT


@cuda.jit
def copy16(src, dst):
    """The copy ceiling as a kernel: 16-byte loads and stores, grid-stride (src, dst: uint32 [1, 1, n])."""
    n = src.shape[2]
    i = 4 * (cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x)
    step = 4 * cuda.gridDim.x * cuda.blockDim.x
    while i < n:
        a0, a1, a2, a3 = s03.load_u32x4(src, 0, 0, i)
        s03.store_u32x4(dst, 0, 0, i, a0, a1, a2, a3)
        i += step


@cuda.jit
def no_search16(times, feats, targets, out):
    """Experiment, not a stage: 03's 16-byte kernel with the search replaced by a guess (lo from t / T).
    Wrong answers; its time says what the search costs."""
    T = targets.shape[1]
    warp, lane = s02.warp_and_lane()
    if warp >= targets.shape[0] * T:
        return
    b = warp // T
    t = warp - b * T
    x = targets[b, t]
    lo = min(t * (times.shape[1] - 1) // T, times.shape[1] - 2)
    w = s02.warp_weight(times, b, lo, x, lane)
    for i in range(4 * lane, feats.shape[2], 4 * s02.WARP):
        a0, a1, a2, a3 = s03.load_u32x4(feats, b, lo, i)
        c0, c1, c2, c3 = s03.load_u32x4(feats, b, lo + 1, i)
        s03.store_u32x4(out, b, t, i, s03.lerp_pair(a0, c0, w), s03.lerp_pair(a1, c1, w), s03.lerp_pair(a2, c2, w),
                        s03.lerp_pair(a3, c3, w))


def main():
    if cudabook.SIMULATOR:
        sys.exit(f"needs a GPU: {device.why_no_gpu()}")
    info = device.describe()
    print(f"GPU {info['gpu']} (cc {info['compute_capability']}, {info['sms']} SMs), driver {info['driver_version']}, "
          f"numba-cuda {info['packages']['numba-cuda']}, numpy {info['packages']['numpy']}")
    size = bench.BENCH_SIZE
    p = upload(*random_problem(size["B"], size["S"], size["T"], size["D"], rng=0))
    unsorted = upload(*random_problem(size["B"], size["S"], size["T"], size["D"], rng=0, sorted_targets=False))
    nbytes = p.min_bytes
    print(f"size {size}, minimum traffic {nbytes / 1e6:.1f} MB")

    # copy ceilings: the same number of bytes read + written as the problem's minimum traffic
    n = (nbytes // 2 // 16) * 4
    src = cuda.to_device(np.arange(n, dtype=np.uint32).reshape(1, 1, n))
    dst = cuda.device_array_like(src)
    memcpy = lambda: dst.copy_to_device(src)                         # noqa: E731
    kernel = lambda: copy16[4 * info["sms"] * 16, 256](src, dst)      # noqa: E731
    bench_copy = bench.copy_GBps(nbytes)
    memcpy_dev = 2 * 4 * n / (device_ms(memcpy) * 1e-3) / 1e9
    kernel_dev = 2 * 4 * n / (device_ms(kernel) * 1e-3) / 1e9
    ceiling = max(memcpy_dev, kernel_dev)
    print(f"copy ceiling: bench.copy_GBps {bench_copy:.0f} GB/s (launch clock); memcpy {memcpy_dev:.0f} GB/s and "
          f"16-byte copy kernel {kernel_dev:.0f} GB/s (device clock): % below is of {ceiling:.0f} GB/s\n")

    def row(label, launch, problem=p, **params):
        fn = lambda: launch(problem, **params)                      # noqa: E731
        one = bench.time_ms(fn)
        dev = device_ms(fn)
        gbps = nbytes / (dev * 1e-3) / 1e9
        print(f"{label:<40} launch {one * 1e3:7.1f} µs | device {dev * 1e3:7.1f} µs {gbps:6.0f} GB/s "
              f"{100 * gbps / ceiling:5.1f} %", flush=True)
        return dev

    print("-- the ladder (default parameters) --")
    row("01 naive", s01_naive.launch)
    row("02 warp, lane-0 search", s02.launch, search="lane0")
    row("02 warp, ballot search", s02.launch, search="ballot")
    for vb in (4, 8, 16):
        row(f"03 {vb}-byte accesses", s03.launch, vec_bytes=vb)

    print("\n-- warps_per_block sweep (device clock) --")
    for label, launch, params in [("02 lane0", s02.launch, dict(search="lane0")),
                                  ("02 ballot", s02.launch, dict(search="ballot")),
                                  ("03 8B", s03.launch, dict(vec_bytes=8)),
                                  ("03 16B", s03.launch, dict(vec_bytes=16))]:
        cells = []
        for wpb in (1, 2, 4, 8, 16, 32):
            dev = device_ms(lambda: launch(p, warps_per_block=wpb, **params))
            cells.append(f"{wpb}:{dev * 1e3:.1f}")
        print(f"{label:<10} µs by warps_per_block  " + "  ".join(cells), flush=True)

    print("\n-- unsorted targets (correct, not tuned for) --")
    row("01 naive, unsorted", s01_naive.launch, problem=unsorted)
    row("02 ballot, unsorted", s02.launch, problem=unsorted)
    row("03 16B, unsorted", s03.launch, problem=unsorted, vec_bytes=16)

    print("\n-- where the time goes (experiments, wrong answers) --")
    row("03 16B without the search", s03.launch, kernel=no_search16, vec_bytes=16)

    print("\n-- SASS (global memory and warp instructions) --")
    for name, kern in [("02 resample_warp", s02.resample_warp), ("02 resample_warp_lane0", s02.resample_warp_lane0),
                       ("03 resample_vec4", s03.resample_vec4), ("03 resample_vec8", s03.resample_vec8),
                       ("03 resample_vec16", s03.resample_vec16)]:
        try:
            sass = "\n".join(kern.inspect_sass().values())
        except Exception as e:
            print(f"{name}: no SASS ({type(e).__name__}: {e})")
            continue
        ops = Counter(re.findall(r"\b((?:LDG|STG)\.E[\w.]*|VOTE\.\w+|SHFL\.\w+)", sass))
        regs = kern.get_regs_per_thread() if hasattr(kern, "get_regs_per_thread") else "?"
        print(f"{name}: {dict(sorted(ops.items()))}, registers {regs}")


if __name__ == "__main__":
    main()
