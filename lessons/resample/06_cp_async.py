# %% [markdown]
# # 06 · cp.async: copies that don't wait, in a pipeline
#
# Stage 05's shared-memory double buffer met a limit of synchronous code: a thread that loads a value must hold it
# in a **register** until it can store it to shared memory, and it cannot run ahead of its own loads for long.
# Ampere (sm_80) added `cp.async`: one instruction that copies 4, 8 or 16 bytes **from global memory straight into
# shared memory**, without a register and without making the thread wait. The thread issues copies for the next
# windows, then works on the current one; it waits only when it needs the data.
#
# ```
#   (drawn for STAGES = 3; the stage's default is 2: wait_group 1, item i+1 in flight)
#   cp.async ... ; cp.async ... ; commit_group        <- copies of item i+2 (group i+2)
#   cp.async.wait_group 2                             <- wait until at most 2 groups are still in flight:
#                                                        item i has landed
#   __syncthreads(); interpolate item i from shared memory
# ```
#
# With `STAGES` shared buffers, `STAGES - 1` items are always in flight while the block computes one. That
# is a **pipeline**. Numba has no `cp.async` (one could emit its PTX through an `@intrinsic`, as stage 04 does
# for one conversion instruction, but the pipeline's bookkeeping reads far better in C++), so this stage is
# **CUDA C++**, compiled at run time by **NVRTC** and launched from Python on the same device arrays as the
# Numba stages.
#
# References: PTX ISA: [cp.async](https://docs.nvidia.com/cuda/parallel-thread-execution/index.html#data-movement-and-conversion-instructions-cp-async),
# [cp.async.commit_group](https://docs.nvidia.com/cuda/parallel-thread-execution/index.html#data-movement-and-conversion-instructions-cp-async-commit-group),
# [cp.async.wait_group](https://docs.nvidia.com/cuda/parallel-thread-execution/index.html#data-movement-and-conversion-instructions-cp-async-wait-group);
# CUDA: [asynchronous data copies](https://docs.nvidia.com/cuda/cuda-c-programming-guide/index.html#asynchronous-data-copies),
# [NVRTC](https://docs.nvidia.com/cuda/nvrtc/index.html), driven through cuda-python's
# [cuda.core](https://nvidia.github.io/cuda-python/cuda-core/latest/) `Program`; CUDA driver API:
# [modules](https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__MODULE.html) (loading the cubin) and
# [execution control](https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__EXEC.html) (`cuLaunchKernel`).

# %%
import cudabook
print(cudabook.where())

import re
import numpy as np
import matplotlib.pyplot as plt
from cudabook import resample, lesson, nvrtc, results
from cudabook.resample import s06_cp_async as s06

# %% [markdown]
# ## Your first NVRTC kernel
#
# NVRTC is the CUDA C++ compiler as a library: source text in, machine code (a **cubin**) out, no `nvcc`,
# no build step. `cudabook.nvrtc.compile` wraps cuda.core's `Program`. With no GPU it compiles for a named
# architecture; `sm_90a` is Hopper.

# %%
saxpy = r'''
extern "C" __global__ void saxpy(float a, const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}
'''
cubin = nvrtc.compile(saxpy, arch="sm_90a")
print(f"{len(cubin):,} bytes of sm_90a machine code. Its SASS:")
print("\n".join(nvrtc.sass_lines(cubin, r"LDG|STG|FFMA")))

# %% [markdown]
# A compile error shows the compiler's message *and* the offending line of your source:

# %%
try:
    nvrtc.compile(saxpy.replace("y[i] = a * x[i] + y[i];", "y[i] = a * x[i] + z[i];"), arch="sm_90a")
except nvrtc.CompileError as e:
    print(e)

# %% [markdown]
# ## The stage's kernel
#
# A work item is a run of consecutive targets of one batch row. Warp 0 finds the window of source rows they
# need (a warp-wide ballot search like stage 02's, in C++: one round of 128 probes from the end of the block's
# last window, and where that misses, 64 probes a round: 2 rounds at S = 4096), then every thread issues
# `cp.async` copies of
# the window's rows into the stage's shared buffer. Here is the heart of it, the pipeline loop (the whole
# file is `cudabook/resample/kernels/cp_async.cu`):

# %%
lesson.show_region(s06.source(), start="float x[XPL];", end="cp_async_wait<0>();")

# %% [markdown]
# ## Proof that the copies are asynchronous
#
# In the machine code, `cp.async` becomes **`LDGSTS`** (load global, store shared, in one instruction),
# `cp.async.commit_group` becomes `LDGDEPBAR`, and `cp.async.wait_group N` becomes `DEPBAR.LE SB0, N`. A
# synchronous copy would show an `LDG` into a register followed by an `STS`.

# %%
cubin06 = s06.compile_cubin(arch="sm_90a")
for line in nvrtc.sass_lines(cubin06, r"LDGSTS|DEPBAR")[:8]:
    print(line)
print("registers, shared memory, spills:", nvrtc.resource_usage(cubin06))

# %% [markdown]
# ## Is it right?
#
# On a GPU of compute capability 8.0 or newer, the same checker as every stage. Without one, `run` says
# what the stage needs and what this machine has, instead of crashing.

# %%
why = resample.unavailable("06_cp_async")
if why:
    print(why)
else:
    size = resample.demo_size()
    print(resample.check_launch(s06.launch, **size))
    print(resample.check_launch(s06.launch, 3, 777, 1500, 37, sorted_targets=False))

# %% [markdown]
# ## How fast?
#
# Compare with both of stage 05's ways. The shared-memory double buffer, the one this stage improves on, was
# slower than stage 04 (lesson 05: on an H200 while it was built, and in the H100 `buffers` sweep in
# results/sweeps/). `cp.async` beats stage 04 on every card recorded in results/ (the ladder, and the
# comparison printed under it). A likely reason, from the H100 profile rather than a measurement of the cause:
# no registers hold the window (64 a thread against stage 04's 102), so its blocks can be twice as large at the
# same four blocks an SM, twice the warps. Against stage 05's
# default (no window: a search prepass, then eight register loads in flight a lane) it loses on every one: a
# windowed block still waits at barriers for its slowest copy and every item pays the searches inside its
# window, while the gather's warps never wait for each other. Honest reading: on this problem, the window in
# shared memory costs more than it saves, and the next stage shows how close a copy engine brings it back.

# %%
resample.ladder_so_far("06_cp_async")

# %%
for record in results.load_all():
    for name, w in record["workloads"].items():
        st = w.get("stages", {})
        times = [st.get(s, {}).get("median_us") for s in ("04_smem_windows", "05_double_buffered", "06_cp_async")]
        if w.get("track") != "resample" or None in times:
            continue
        t4, t5, t6 = times
        print(f"{record['gpu']} · {name} (commit {w.get('commit') or record.get('commit')}): 06 {t6:.1f} µs, "
              f"{'faster' if t6 < t4 else 'slower'} than 04 ({t4:.1f}), "
              f"{'faster' if t6 < t5 else 'slower'} than 05's default ({t5:.1f})")

# %% [markdown]
# ## Experiment: pipeline depth
#
# More stages means more bytes in flight per block, but each stage costs a window of shared memory, and
# fewer blocks then fit on an SM. Which wins? (Prediction to test: the total bytes in flight per SM is what
# matters, so a shallow pipeline with more blocks per SM does as well as a deep one with fewer.)

# %%
resample.sweep("06_cp_async", "stages", [2, 3, 4])

# %% [markdown]
# Every thread still spends instructions computing addresses for its share of the copies. Hopper's **Tensor
# Memory Accelerator** takes even that away: one thread describes a whole box of rows, and a copy engine
# moves it. Next: [07 · TMA](07_tma.ipynb).

# %% [markdown]
# Write this stage's kernel yourself: [lab 06](../../labs/resample/06_cp_async.ipynb) (the completed version:
# [solution](../../solutions/resample/06_cp_async_SOLUTION.ipynb)).
