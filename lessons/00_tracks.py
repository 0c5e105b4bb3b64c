# %% [markdown]
# # Start here: the map of the workbook
#
# This workbook teaches GPU kernel optimisation by doing it. It climbs real problems from a naive kernel to
# Hopper's copy engines and tensor cores, one rung at a time, in **tracks**. A rung has up to three notebooks
# (most have all three; the tables below show which):
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
# but slow, and with no timings: the lessons show speeds recorded on real GPUs instead), and their labs are
# graded there. The CUDA C++ rungs compile for Hopper and show you their machine code. Their labs are graded in
# a CPU emulator where it has the instructions they use (`cp.async`, TMA copies and mbarriers, `mma.sync`,
# `ldmatrix`, `wgmma`, ...), and on a GPU too, after the GPU's own run, to catch the races the GPU happened to
# hide. A lab whose stage uses something the emulator has not is graded only on a GPU that runs the stage:
# elsewhere the grader compiles your code, reads what the compiler says and the mistakes it can see in your
# text, and tells you that it stops there. The cell below asks each lab's stage where it is graded on this
# machine, and what a GPU must have to run it.
#
# **An H100 or H200?** Everything runs at full size. A lesson measures its own rung and the rung before it
# against the GPU's own ceilings, in the same process; the other rungs come from this card's record in
# `results/`, marked ‡.
#
# Start with **00 · Setup and ceilings** (the first table below): it measures the ceilings every later lesson
# compares against. Then climb a track in order; each rung builds on the one below. The other three tracks
# (GEMM, deformable attention, attention) reuse what the first one, resampling, teaches (coalescing, shared
# memory, pipelines, TMA).
#
# %%
from cudabook import SIMULATOR, notebooks, track


def graded_where(t, stage):
    """Where this machine grades the lab of `stage`, and what its stage needs to run on a GPU."""
    m = t.stage(stage)
    if getattr(m, "SOURCE", None) is None:
        return "Numba: " + ("in Numba's CUDA simulator" if SIMULATOR else "on this GPU")
    rung = m.RUNG
    needs = ("compute capability 9.0 exactly (sm_90a)" if rung.sm90a
             else f"compute capability {rung.min_cc[0]}.{rung.min_cc[1]} or newer")
    emulated = getattr(m, "EMULATED", False)
    if not t.unavailable(stage):
        where = "on this GPU" + (", then again in the CPU emulator (races the GPU hid)" if emulated else "")
    elif emulated:
        where = "in the CPU emulator"
    else:
        where = "not here: compiled and read only"
    return f"C++, needs {needs}: {where}"


for name in track.TRACKS:
    t = track.get(name)
    labs = sorted((notebooks.SOURCES / getattr(t, "LESSONS", t.NAME)).glob("[0-9][0-9]_*_lab.py"))
    print(f"{t.TITLE}:")
    for lab in labs:
        print(f"  lab {lab.stem[:-4]:22s} {graded_where(t, lab.stem[:-4])}")

# %% [markdown]
# The tracks (this list is generated from the lesson files; `make notebooks` rebuilds it):
#
# #! tracks
