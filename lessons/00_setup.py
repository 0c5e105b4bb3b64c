# %% [markdown]
# # 00 · Setup and ceilings
#
# Before we make anything fast we need two things: to know **what machine we are on**, and to know **how fast is
# possible** on it. Every later stage reports its speed as a percentage of a ceiling measured the way this notebook
# measures it, in the lesson's own process, on the same GPU. A number without a ceiling tells you nothing.
#
# The first cell must always be `import cudabook`. With no GPU it switches Numba to its
# [CUDA simulator](https://nvidia.github.io/numba-cuda/user/simulator.html) (which must happen before numba is
# imported) and teaches the simulator the warp operations it lacks.

# %%
import cudabook
from cudabook import device, resample

print(cudabook.where())

# %% [markdown]
# ## What machine am I on?
#
# With a GPU you see its name, compute capability (9.0 is Hopper: H100, H200), number of streaming
# multiprocessors (SMs), memory, and the versions of everything that compiles and runs our kernels. Without
# one you see "simulator": every Numba stage still runs (slowly, on small sizes) and every C++ stage still
# compiles, but there are no timings.

# %%
info = device.describe()
for key in ("gpu", "compute_capability", "sms", "memory_bytes", "driver_version", "nvrtc", "why_simulator"):
    if info.get(key) is not None:
        print(f"{key:>20}: {info[key]}")
print(f"{'packages':>20}: " + ", ".join(f"{k} {v}" for k, v in info["packages"].items() if v))

# %% [markdown]
# ## The ceiling: how fast can bytes move?
#
# Our running example, trajectory resampling, does almost no arithmetic per byte: a search, one
# multiply-add per channel. It is **memory-bound**: a kernel that reads each input once and writes each output
# once, at the speed the memory allows, is as good as a streaming kernel gets. So the ceiling is a bandwidth.
# (One caveat: sorted random targets leave some source rows unused, so a kernel that skips those rows moves
# fewer bytes than "every input once" and can beat the copy ceiling; lesson 08's kernel does. The records'
# "% of needed" column therefore also compares each kernel with the time the copy takes for only the bytes the
# targets need: a tighter yardstick, which a kernel passes only by moving its bytes faster than the copy did.)
#
# Two numbers:
# - the **theoretical** bandwidth from the device attributes (memory clock x 2 for DDR x bus width), which no
#   real kernel reaches;
# - the **measured** device-to-device copy, counting bytes read plus bytes written: the fastest of the driver's
#   `cuMemcpyDtoDAsync`, a copy kernel with four 16-byte loads in flight a thread, and the C++ streaming copies
#   of `cudabook/kit/include/stream_copy.cu` (a few block shapes); PyTorch's `copy_` is the driver's copy
#   again. This is the fastest those bytes moved here, a streaming kernel's realistic best, and what we compare
#   every stage to.
#
# CUDA driver API: [device attributes](https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__DEVICE.html)
# (`cuDeviceGetAttribute`: memory clock, bus width, SM count),
# [memory copies](https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__MEM.html) (`cuMemcpyDtoDAsync`).
#
# ```
#   bytes that must move            time a kernel takes
#   ---------------------  = GB/s   ------------------- ... as a % of the copy's GB/s
#   (inputs once, output once)
# ```

# %%
from cudabook import bench, results
from cudabook.resample import Problem

B, S, T, D = resample.bench.BENCH_SIZE.values()
min_bytes = 4 * B * S + 2 * B * S * D + 4 * B * T + 2 * B * T * D
print(f"benchmark problem B={B}, S={S}, T={T}, D={D}: {min_bytes / 1e6:.1f} MB must move at least")

gpu = device.gpu()
if gpu:
    sizes_mb = [1, 4, 16, 64, 256, 1024]
    measured = [bench.copy_GBps(mb * 1e6) for mb in sizes_mb]
    at_size = bench.copy_GBps(min_bytes)   # the ceiling at the benchmark's own size, as the benchmark measures it
    print(f"theoretical: {gpu.theoretical_GBps:,.0f} GB/s   "
          f"measured copy of {min_bytes / 1e6:.0f} MB (the benchmark's size): {at_size:,.0f} GB/s")
    print(f"so a streaming kernel that reads every input once takes {min_bytes / at_size / 1e3:.1f} µs at that rate")
else:
    print("No GPU: no measurement. The copy ceilings recorded in results/, measured at the benchmark's size:")
    for r in results.load_all():
        for name, w in r["workloads"].items():
            copy = w.get("context", {}).get("copy_GBps") or r.get("copy_GBps")   # the ceiling measured with them
            if name.startswith("resample ") and copy:
                print(f"  {r['gpu']} · {name}: {copy:,.0f} GB/s, so a streaming kernel takes "
                      f"{min_bytes / copy / 1e3:.1f} µs at that rate")

# %% [markdown]
# Small copies are slower per byte: every launch pays a fixed cost whatever its size, and a small copy
# cannot keep every memory channel busy. A copy whose two buffers fit in the L2 cache (50 MiB on an H100,
# 60 MiB on an H200) can also be served from it when repeated, and then measures the cache rather than DRAM.
# That is why the benchmark problem is large (the size printed above), and why the ceiling, and the time it
# implies, are measured at the benchmark's own size rather than read off any point of the curve below.

# %%
import matplotlib.pyplot as plt
from cudabook import results

fig, ax = plt.subplots(figsize=(6, 3))
if gpu:
    ax.semilogx(sizes_mb, measured, "o-", label="measured copy")
    ax.axhline(gpu.theoretical_GBps, color="k", ls="--", lw=0.8, label="theoretical")
    ax.set_xlabel("bytes copied (MB, read + write counted)")
    ax.set_ylabel("GB/s")
    ax.set_title(gpu.name)
    ax.legend()
else:
    records = results.load_all()
    ax.bar([r["gpu"] for r in records], [r["copy_GBps"] for r in records])
    ax.set_ylabel("copy ceiling, GB/s")
    ax.set_title("copy ceilings recorded in results/")
fig.tight_layout()

# %% [markdown]
# ## How the workbook checks a kernel
#
# A kernel is correct when it computes `np.interp` for every (batch, channel), rounded once to bf16. The
# checker is built so that a wrong kernel cannot slip through:
#
# 1. **fresh random inputs** every time (a kernel that only works on one input is not correct);
# 2. the output is **poisoned** with NaN before each launch, so an element the kernel never writes fails;
# 3. **NaN never passes**;
# 4. the tolerance is **one bf16 rounding** of the float64 reference (half a bf16 unit in the last place),
#    plus a little float32 arithmetic slack. A kernel that truncates instead of rounding fails.
#
# Here is the checker catching a kernel that truncates (drops the low 16 bits instead of rounding):

# %%
import numpy as np
from numba import cuda
from cudabook.bits import bf16_to_f32, lerp
from cudabook.resample.s01_naive import find_interval, weight, launch as launch_naive
from cudabook.bits import _as_bits


@cuda.jit
def truncating(times, feats, targets, out):
    t = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    b = cuda.blockIdx.y
    if t < targets.shape[1]:
        x = targets[b, t]
        lo = find_interval(times, b, x)
        w = weight(times, b, lo, x)
        for d in range(feats.shape[2]):
            v = lerp(bf16_to_f32(feats[b, lo, d]), bf16_to_f32(feats[b, lo + 1, d]), w)
            out[b, t, d] = np.uint16(_as_bits(v) >> np.uint32(16))   # the bug: truncation


print(resample.check_launch(lambda p: launch_naive(p, kernel=truncating), 2, 16, 40, 4))

# %% [markdown]
# The tests in `tests/corpus/` hold a collection of such deliberately wrong kernels (a wrong search bound,
# a missing tail, an unwritten element, truncation, a race, a wrong shuffle mask...). A test fails if the
# checker lets any of them pass. Next: [01 · naive](resample/01_naive.ipynb).
