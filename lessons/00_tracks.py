# %% [markdown]
# # Start here: the map of the workbook
#
# This workbook teaches GPU kernel optimisation by doing it. It climbs real problems from a naive kernel to
# Hopper's copy engines and tensor cores, one rung at a time, in **tracks**. Every rung has three notebooks:
#
# - the **lesson**: the idea, a picture, the kernel, proof that it is right, and its speed against a ceiling;
# - the **lab**: the same kernel with its heart removed. You write it; the cell that calls `grade(...)` runs it
#   on fresh random inputs and tells you what is wrong;
# - the **solution**: the lab filled in, for when you are stuck or want to compare.
#
# Run the cell below first: it says what this machine will run the kernels on.

# %%
import cudabook
print(cudabook.where())

# %% [markdown]
# **No GPU?** Everything still runs. The Numba rungs run in Numba's CUDA simulator at small sizes (correct,
# but slow, and with no timings: the lessons show speeds recorded on real GPUs instead). The CUDA C++ rungs
# compile for Hopper and show you their machine code; their labs are graded in a CPU emulator.
#
# **An H100 or H200?** Everything runs at full size, and every speed is measured against the GPU's own
# ceilings, in the same process.
#
# Start with **00 · Setup and ceilings** (the first table below): it measures the ceilings every later lesson
# compares against. Then climb a track in order; each rung builds on the one below. The GEMM and
# deformable-attention tracks reuse what the first track teaches (coalescing, shared memory, pipelines, TMA).
#
# The tracks (this list is generated from the lesson files; `make notebooks` rebuilds it):
#
# #! tracks
