# %% [markdown]
# # GEMM lab 04 · Keep the copy ring turning
#
# Stage 04's kernel is written, but for the lines that make its `cp.async` ring turn. The block's shared
# memory holds `STAGES` slices of A and B (each `BK` deep along K). Before the loop, slices `0 .. STAGES-2`
# were started, one *commit group* each. Inside the loop, at the second-to-last k16 step of slice `kt` (the
# next step's fragments have just been requested with `ldmatrix`; this step's `mma` instructions come right
# after your lines), write the pipeline step:
#
# 1. start the copies of slice `kt + STAGES - 1` into stage `ws` with `load_slice(...)`: the same arguments
#    as in the prologue (printed below), with `stage_a(ws)`, `stage_b(ws)` and the slice's first k,
#    `(kt + STAGES - 1) * BK`; only while that slice exists (`< KT`);
# 2. `cp_async_commit()`, always, even when nothing was issued: then commit group *g* is always slice *g*,
#    and the wait below counts right at the end of K;
# 3. `cp_async_wait<N>()` so that slice `kt + 1` has landed while later ones may still be flying. Work out
#    `N`: how many groups are committed by now, and how many of them must be complete?
# 4. a barrier: every thread copied a share of the slice, so *everyone's* copies must have landed.
#
# Write C++ in the string below; the grader puts it into `kernels/mma_sync.cu` in place of the lab region,
# compiles the file with NVRTC and runs it on ragged shapes (K not a multiple of the slice, 1 x 1 x 1, and one
# K long enough that the ring turns more than twice, so every stage is refilled), at 3 stages and again at 2
# and 4. It needs a GPU of compute capability 8.0 or newer (sm_80: `cp.async`, `ldmatrix`, `mma.sync`); without
# one it runs your code **on the CPU, in an emulator** (`cudabook.emulate`), which knows these instructions:
# once with every copy landing as late as your waits allow (and shared memory starting as NaN), once with every
# copy landing at once, and once with late copies and each warp running as far ahead of the others as your
# barriers allow. It cannot time anything: speed needs the GPU. The lesson (GEMM 04) draws the ring.
#
# A race passes a test run more often than not: a wait that is one group short, or a commit that is skipped
# at the end of K, can give right answers on a GPU and wrong ones elsewhere. The emulator's late copies catch
# a wait that is too shallow; some races no run shows reliably (a commit under an `if` or before the copies, no
# barrier after the wait), so the grader reads those from your text before it runs anything. Check your count
# by hand, not only by the grader.

# %%
import cudabook
print(cudabook.where())
from cudabook import lesson
from cudabook.gemm import s04_mma_sync as s04
from cudabook.gemm import grade

# %% [markdown]
# The code around your lines: the prologue and the top of the loop, then what follows your region.

# %%
lesson.show_region(s04.source(), start="const int KT", end=">>> lab")
print("        ... your lines ...")
lesson.show_region(s04.source(), start="<<< lab", end="rs = rs + 1 == STAGES")

# %%
#! region gemm/kernels/mma_sync.cu PIPELINE

# %%
grade("04_mma_sync", PIPELINE)
