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
# The kernel copies two things: the window's feature rows in 16-byte pieces (`cp.async.cg`, which skips L1)
# and its source times in 4-byte pieces (`cp.async.ca`, through L1: only 16-byte copies may skip it). In the
# machine code both become **`LDGSTS`** (load global, store shared, in one instruction): `LDGSTS.E.BYPASS.128`
# for the 16-byte copies, plain `LDGSTS.E` for the 4-byte ones. `cp.async.commit_group` becomes `LDGDEPBAR`,
# and `cp.async.wait_group N` becomes `DEPBAR.LE SB0, N`: N = 1 in the loop (the default depth, 2 stages), 0
# after it. A synchronous copy would show an `LDG` into a register followed by an `STS`. The cell counts each
# form in the kernel, with one example:

# %%
cubin06 = s06.compile_cubin(arch="sm_90a")
forms = {}
for line in nvrtc.sass_lines(cubin06, r"LDGSTS|DEPBAR", kernel=s06.KERNEL):
    instruction = re.sub(r"^@!?P\d\s+", "", line)                     # without its predicate
    form = instruction if instruction.startswith("DEPBAR") else instruction.split()[0]
    forms.setdefault(form, []).append(line)
for form, lines in forms.items():
    print(f"{len(lines):3d} x {form:22s} e.g. {lines[0]}")
print("registers, shared memory, spills:", nvrtc.resource_usage(cubin06))

# %% [markdown]
# The 4-byte copies are many because the compiler unrolled the loop over the times, not knowing how short a
# window is; at run time a thread issues at most one a window, since a window has fewer rows than the block has
# threads.

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
# slower than stage 04 (lesson 05, from the `buffers` sweeps recorded on both cards). `cp.async` beats stage 04
# on every card recorded in results/ (the ladder, and the comparison printed under it). A likely reason, read
# from the H100 and H200 profiles rather than measured as a cause: no registers hold the window (64 a thread
# against stage 04's 102), so its blocks can be twice as large at the same four blocks an SM, twice the warps.
# Against stage 05's default (no window: a search prepass, then eight register loads in flight a lane) it loses
# on every one: a windowed block still waits at barriers for its slowest copy and every item pays the searches
# inside its window, while the gather's warps never wait for each other; and like stage 04 it loads every row
# of its window, also those no target uses (lesson 04). Honest reading: on this problem, the window in shared
# memory costs more than it saves, and the next stage shows how close a copy engine brings it back.

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
# What each depth gets on an SM, by the occupancy rules (`cudabook.kit.occupancy`, for this machine's compile),
# and what the recorded profile of the default says the warps waited for:

# %%
from cudabook import profile
from cudabook.kit import occupancy

print("stages  shared memory a block  blocks an SM (set by)    windows in flight an SM")
for stages in (2, 3, 4):
    cfg = s06.config(256, stages=stages)
    usage = nvrtc.resource_usage(s06.compile_cubin(arch="sm_90a", stages=stages))[s06.KERNEL]
    o = occupancy.for_kernel(usage, cfg["NT"], s06.smem_bytes(cfg))
    print(f"{stages:6d}  {s06.smem_bytes(cfg):>15,} bytes  {o.blocks:>3d} {'(' + o.limit + ')':17s}  "
          f"{o.blocks * (stages - 1):>3d}, up to {cfg['WMAX'] * cfg['DC'] * 2 // 1024} KiB each")
for rec in profile.load_records("resample"):
    k = profile.from_record(rec, ["06_cp_async"]).kernel("06_cp_async")
    if k:
        stalls = ", ".join(f"{r} {v:.0f}" for r, v in list(k["stalls"].items())[:3])
        print(f"{rec['gpu']} · Nsight Compute · commit {rec['commit']} · stages=2: stalls ({k['stall_unit']}) "
              f"{stalls}")

# %% [markdown]
# The sweep refutes the prediction on both cards: the shallowest pipeline is the fastest, and stages = 3 and 4
# keep as many windows in flight an SM (above), yet 4 is clearly slower than 3. So the bytes in flight are not
# what limits this kernel here. What falls with depth is the number of blocks an SM holds, and with it the
# warps. A likely reason, not measured: the largest stall of this kernel's warps is the barrier (the profile
# above), and with fewer blocks an SM there are fewer other warps to run while one block waits for its slowest
# copy or its search. That stays open until stages = 3 and 4 are profiled too
# (`profile.show("resample", "06_cp_async", stages=4)` on a GPU).

# %% [markdown]
# Every thread still spends instructions computing addresses for its share of the copies. Hopper's **Tensor
# Memory Accelerator** takes even that away: one thread describes a whole box of rows, and a copy engine
# moves it. Next: [07 · TMA](07_tma.ipynb).

# %% [markdown]
# Write this stage's kernel yourself: [lab 06](../../labs/resample/06_cp_async.ipynb) (the completed version:
# [solution](../../solutions/resample/06_cp_async_SOLUTION.ipynb)).
