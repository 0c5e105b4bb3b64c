# %% [markdown]
# # GEMM 04 · mma.sync: the tensor cores, fed by ldmatrix from a swizzled cp.async ring
#
# Rungs 01–03 multiplied on the ordinary fp32 cores, one fused multiply-add per thread per instruction. An
# H100's **tensor cores** do far more per instruction: with `mma.sync.aligned.m16n8k16`, one *warp* multiplies
# a 16 x 16 piece of A by a 16 x 8 piece of B and adds the product into 16 x 8 float accumulators:
# 2,048 multiply-adds (4,096 FLOPs) in one instruction. The instruction exists since Ampere (sm_80); Hopper still runs it
# (rung 05 shows Hopper's own, larger one).
#
# The hard part is no longer the arithmetic but feeding it. Three instructions make the data path:
#
# ```
#   global --cp.async--> shared memory (a ring of STAGES k-slices) --ldmatrix--> registers --mma.sync--> C
# ```
#
# - **`cp.async`** (resampling stage 06): 16 bytes global -> shared without a register, STAGES-1 slices in flight;
# - **`ldmatrix`**: a warp reads four 8 x 8 bf16 matrices from shared memory and each lane receives exactly
#   the elements the mma wants from it (`.trans` transposes on the way, for B);
# - **`mma.sync`**: the multiply.
#
# and one layout trick, the **swizzle**, without which `ldmatrix` waits on shared-memory bank conflicts.
# The kernel is CUDA C++ (`cudabook/gemm/kernels/mma_sync.cu`), compiled at run time by NVRTC.
# PTX ISA: [mma.m16n8k16 fragments](https://docs.nvidia.com/cuda/parallel-thread-execution/index.html#warp-level-matrix-fragment-mma-16816-float),
# [ldmatrix](https://docs.nvidia.com/cuda/parallel-thread-execution/index.html#warp-level-matrix-instructions-ldmatrix),
# [cp.async](https://docs.nvidia.com/cuda/parallel-thread-execution/index.html#data-movement-and-conversion-instructions-cp-async).

# %%
import cudabook
print(cudabook.where())

import numpy as np
import matplotlib.pyplot as plt
from cudabook import SIMULATOR, emulate, gemm, lesson, nvrtc
from cudabook.gemm import s04_mma_sync as s04

# %% [markdown]
# ## One mma, 32 lanes: who holds what
#
# `mma.sync` is a *warp* instruction: the 16 x 16 A piece, the 16 x 8 B piece and the 16 x 8 accumulator are
# spread over the registers of the 32 lanes, in a fixed pattern, the **fragments**. With `g = lane / 4` and
# `t = lane % 4`, lane `l` holds of C the two neighbours `C[g][2t], C[g][2t+1]` and the same two 8 rows
# down; of A, four pairs of neighbours along k in rows `g` and `g+8`; of B, pairs along **k** in column `g`
# (B is "col" in `row.col`: a lane's two bf16 of a register are consecutive k, not consecutive n).
# Each number below is the lane that holds that element:

# %%
frag = s04.mma_fragments()
fig, axes = plt.subplots(1, 3, figsize=(13, 4.2), gridspec_kw={"width_ratios": [16, 8, 8]})
for ax, (name, title) in zip(axes, (("a", "A 16 x 16 (row-major): 4 registers a lane"),
                                    ("b", "B 16 x 8 (k x n): 2 registers a lane"),
                                    ("c", "C 16 x 8 (float): 4 values a lane"))):
    lane, reg = frag[name]
    ax.imshow(lane % 8, cmap="Pastel2", aspect="equal")
    for (r, c), l in np.ndenumerate(lane):
        ax.text(c, r, str(l), ha="center", va="center", fontsize=6)
    ax.set_title(title, fontsize=9)
    ax.set_xlabel("k" if name == "a" else "n")
    ax.set_ylabel("k" if name == "b" else "m")
plt.tight_layout()
plt.show()
print("lane 5 (g = 1, t = 1): C elements", [(int(r), int(c)) for r, c in zip(*np.nonzero(frag["c"][0] == 5))])

# %% [markdown]
# A warp tile of C (64 x 64 here) is 4 x 8 such accumulator fragments: 128 floats in every lane's registers,
# where they stay for the whole K loop. Each k16 step, a warp needs 4 A fragments and 8 B fragments, and
# issues 4 x 8 = 32 mma instructions with them.
#
# ## ldmatrix: shared memory straight into fragments
#
# Loading fragments element by element would take many shared loads per lane. `ldmatrix.x4` does it in one:
# lanes 8j .. 8j+7 each give the address of one **16-byte row** (8 bf16) of matrix j, and the hardware hands
# every lane its two elements of each of the four 8 x 8 matrices. For A (16 x 16 at rows `r0`, k `k0`):
#
# | lanes | row address | becomes |
# |---|---|---|
# | 0–7 | rows r0 .. r0+7, k0 | a0 |
# | 8–15 | rows r0+8 .. r0+15, k0 | a1 |
# | 16–23 | rows r0 .. r0+7, k0+8 | a2 |
# | 24–31 | rows r0+8 .. r0+15, k0+8 | a3 |
#
# B sits in shared memory as it sits in global memory: k-row by k-row, n contiguous. A lane must receive two
# consecutive **k** of one column, which are in two different rows: `ldmatrix.x4.trans` transposes each 8 x 8
# matrix on the way. Lanes 0–15 point at k rows `k0 .. k0+15` of columns `n0 .. n0+7`, lanes 16–31 at the
# same rows of `n0+8 .. n0+15`: one instruction, two n8 fragments of B. In the kernel:

# %%
lesson.show_region(s04.source(), start="// Each lane's ldmatrix row address", end="base + b_lane[j / 2]")

# %% [markdown]
# ## Bank conflicts, and the swizzle
#
# Shared memory has 32 banks of 4 bytes; one 128-byte line is served per pass. `ldmatrix` reads each 8 x 8
# matrix in one pass: eight 16-byte rows. If two of them sit in the **same four banks**, the pass is repeated.
#
# In a plain row-major tile, row `r` starts at `r x (row bytes)`. A slice of A is `BK = 32` bf16 = 64 bytes a
# row: rows 0 and 2 (and 4, 6) start in the same banks: a **4-way** conflict. A slice of B is `BN = 256` bf16 =
# 512 bytes a row: all eight rows start in bank 0: **8-way**.
#
# The fix: keep every 16-byte chunk in its 128-byte line, but permute the chunks inside the line: the chunk's
# slot XOR the row's number (mod 8) when a row is 128 bytes or longer (B's rows), or XOR the 128-byte line's
# number (mod 8) when shorter rows share a line (A's: two rows a line). Eight consecutive rows at the same
# logical chunk then sit in eight different slots. (For B, XOR with the line's number would not do: a 512-byte
# row is four lines, so line numbers 4r, 4r + 4, ... take only two values mod 8.) The same function places the `cp.async` copies and computes the `ldmatrix` addresses, so
# nothing else changes:

# %%
lesson.show_region(s04.source(), start="// The fix permutes", end="#endif", context=1)

# %% [markdown]
# `s04.ldmatrix_banks` computes, in Python, the bank where each lane's 16-byte row starts (it covers four
# banks from there), for the first `ldmatrix.x4` of warp 0. One pass = 8 lanes:

# %%
fig, axes = plt.subplots(2, 2, figsize=(12, 4.6), sharex=True)
for row, op in enumerate("ab"):
    for col, swizzle in enumerate((False, True)):
        banks = s04.ldmatrix_banks(op, swizzle)
        grid = np.full((8, 32), np.nan)
        for lane in range(8):                      # the first pass: lanes 0..7, one 8 x 8 matrix
            grid[lane, banks[lane]:banks[lane] + 4] = lane
        ax = axes[row][col]
        ax.imshow(grid, cmap="tab10", aspect="auto", vmin=0, vmax=9)
        ax.set_yticks(range(8))
        ax.set_ylabel("lane")
        ways = s04.conflict_ways(banks)
        ax.set_title(f"{op.upper()}, {'swizzled' if swizzle else 'plain'}: "
                     f"{'conflict-free' if ways == 1 else f'{ways}-way conflict'}", fontsize=9)
for ax in axes[1]:
    ax.set_xlabel("bank")
plt.tight_layout()
plt.show()
for op in "ab":
    print(f"{op.upper()}: banks of lanes 0-7, plain    {s04.ldmatrix_banks(op, False)[:8]}  -> "
          f"{s04.conflict_ways(s04.ldmatrix_banks(op, False))}-way")
    print(f"{op.upper()}: banks of lanes 0-7, swizzled {s04.ldmatrix_banks(op, True)[:8]}  -> "
          f"{s04.conflict_ways(s04.ldmatrix_banks(op, True))}-way")

# %% [markdown]
# On a GPU, Nsight Compute can show the difference: its shared-memory bank-conflict counters for `ldmatrix`
# (the `..._op_ldsm` breakdown of `sm__sass_l1tex_data_bank_conflicts_pipe_lsu_mem_shared`) should fall to
# about zero for the swizzled kernel and be large for the plain one (`swizzle=False`), with the same number of
# `ldmatrix` instructions (expected from the layout; not a record of this workbook). The sweep at the end of
# this lesson measures what it costs in time. One XOR.
#
# ## The cp.async ring
#
# The block's shared memory holds `STAGES` k-slices of A (`BM x BK`) and B (`BK x BN`). Before the loop,
# slices `0 .. STAGES-2` are started, one **commit group** each. Then every slice `kt`:
#
# ```
#   k16 step 0 of slice kt:   read step 1's fragments (ldmatrix)
#                             start slice kt+STAGES-1 into the stage slice kt-1 used; commit
#                             wait_group STAGES-2: slice kt+1 has landed (this thread's copies)
#                             __syncthreads(): everyone's copies of slice kt+1 have landed, and everyone
#                                              has read step 1 of slice kt (its stage is refilled next slice)
#                             32 mma on step 0's fragments
#   k16 step 1 (the last):    read slice kt+1's first fragments; 32 mma on step 1's
# ```
#
# The next step's fragments are read while this step's mma instructions run (two fragment buffers), even
# across the slice boundary: that is why the wait is for slice `kt + 1`, one step early. Why `STAGES-2`? By
# then `STAGES-1 + kt + 1` groups were committed, and slices `0 .. kt+1` must be complete: at most
# `STAGES - 2` may still be in flight. And why may the copies into slice `kt-1`'s stage start *before* this
# barrier? Its last fragments were read at step 0 of slice `kt-1`, before the barrier of that slice.
# This is the lab's region:

# %%
lesson.show_region(s04.source(), start="int rs = 0, ws", end="rs = rs + 1 == STAGES")

# %% [markdown]
# The edges: rows past M, columns past N and k past K are copied with `src-size 0`, which writes 16 zero bytes
# and reads nothing; zeros add nothing to the sums, and the epilogue stores only inside C. A 16-byte copy
# needs 16-byte rows, so when K or N is not a multiple of 8 the host pads A and B with zeros once
# (`Problem.aligned(8)`) and copies C's corner back. The epilogue rounds each pair of floats to bf16 with one
# `cvt.rn.bf16x2.f32`.
#
# ## The machine code
#
# `mma.sync` becomes **`HMMA.16816.F32.BF16`**, `ldmatrix` **`LDSM.16.M88.4`** (and `LDSM.16.MT88.4` for the
# transposed B), `cp.async` **`LDGSTS`**. No GPU needed: NVRTC compiles for sm_90a here and cuobjdump reads it.

# %%
cubin = s04.compile_cubin(arch="sm_90a")
for pattern in ("HMMA", "LDSM", "LDGSTS", "F2FP"):
    found = nvrtc.sass_lines(cubin, pattern, kernel=s04.KERNEL)
    print(f"{pattern:7s} x {len(found):3d}   e.g. {found[0]}")
use = nvrtc.resource_usage(cubin)[s04.KERNEL]
spilled = use["stack"] or use["local"]
print(f"registers {use['registers']} a thread, stack frame {use['stack']} bytes, local memory {use['local']} bytes "
      f"({'spills' if spilled else 'no spills'})")
print(f"default tiles: {s04.PARAMS}; shared memory {s04.smem_bytes(s04.config()):,} bytes a block")

# %% [markdown]
# 128 accumulators, two buffers of fragments (2 x (16 + 16) registers) and the addresses: the kernel lives
# just under the 255-register limit. A 64 x 64 warp tile with `bk=64` crosses it and spills (into the stack
# frame, in a build with NVRTC 13.5: 255 registers and 56 bytes of stack); the tests check
# the shipped settings never do.
#
# ## Is it right?
#
# On a GPU of compute capability 8.0 or newer (sm_80: `cp.async`, `ldmatrix`, `mma.sync`): the checker's ragged
# shapes, and a plain layout too. Without one, `cudabook.emulate` runs the same C++ on the CPU (every CUDA
# thread a small coroutine; `ldmatrix` and `mma.sync` as warp operations), on the grader's smaller shapes,
# one of them with K long enough that the ring turns more than twice:

# %%
why = gemm.unavailable("04_mma_sync")
if why and not SIMULATOR:
    print(f"Not run here: {why}. (The CPU emulator works on host memory, where Numba runs in its simulator: "
          f"set CUDABOOK_SIMULATOR=1 before `import cudabook` to use it.)")
else:
    try:
        extra = [] if why else [("K = 7", 129, 257, 7)]
        for name, M, N, K in gemm.cases(stage_name="04_mma_sync") + extra:
            a, b = gemm.random_problem(M, N, K)
            for swizzle in (True, False):
                if why:
                    p = gemm.upload(a, b)
                    p.poison()
                    with emulate.emulating():
                        s04.launch(p, swizzle=swizzle)
                    verdict, how = gemm.judge(p.result(), a, b), "emulated"
                else:
                    verdict, how = gemm.judge(gemm.run("04_mma_sync", a, b, swizzle=swizzle), a, b), ""
                print(f"{name:28s} {how:8s} swizzle={swizzle!s:5s} {verdict.message.splitlines()[0]}")
    except emulate.HostCompilerMissing as e:
        print("Not emulated:", e)

# %% [markdown]
# ## How fast?
#
# On a GPU the next cell measures rungs 03 and 04, with cuBLAS (`torch.matmul`, bf16) in the same process on
# the same data; rungs 01 and 02 come from this card's record (‡). Without a GPU it shows the records in
# `results/`. In the records this kernel reaches about half of cuBLAS (the % of cuBLAS column). The next rungs
# close most of the rest with TMA copies and `wgmma`, which reads shared memory itself; that cuBLAS's own
# kernels use the same tools is likely, but nothing in `results/` records it.

# %%
gemm.ladder_so_far("04_mma_sync", peers=True)

# %% [markdown]
# ## Where the time goes
#
# The profile recorded for this card (or, on a GPU whose code differs from the record's, one taken now), and
# every stall reason that takes at least 1 % of the warps' cycles:

# %%
from cudabook import profile

prof = profile.show("gemm", "04_mma_sync")
row = prof.kernel("04_mma_sync") if prof else None
if row and row.get("stalls"):
    print(f"stalls ({row.get('stall_unit')}): "
          + ", ".join(f"{k} {v:.1f}" for k, v in row["stalls"].items() if v >= 1))

# %% [markdown]
# Waiting for memory (`long_scoreboard`) and at the barrier (`barrier`) take a small share: at the default 3
# stages the copies are hidden. The largest share is `wait`, a warp held for the fixed number of cycles ptxas
# put after an instruction before the next may issue; then `math_pipe_throttle`, a warp whose next
# instruction's pipe (in this loop, most likely the tensor cores') is busy. One block of 8 warps an SM (the
# occupancy column: 254 registers a thread) leaves two warps a scheduler to fill those cycles. That too few
# warps is what keeps this rung at half of cuBLAS is a hypothesis: the profile does not say which
# instructions the `wait` cycles follow.

# %% [markdown]
# ## Experiments
#
# The swizzle off: the same products, now with 4- and 8-way conflicts on every `ldmatrix`. Then the pipeline
# depth. This kernel waits early, in the same step that starts the copies (the ring above): it starts slice
# `kt+STAGES-1`, then waits until at most `STAGES-2` groups are in flight. With 2 stages that is
# `wait_group 0`, right after the copies of slice `kt+1` are started: they are waited for as soon as they are
# issued, and none of the block's own work hides them. Nor does another block's: at 254 registers a thread
# (printed above) an SM holds one block of 256 threads. With 3 stages each slice's copies were started one
# whole slice earlier, with 4 two slices. (Prediction to test: the swizzle costs more than a factor of two;
# 2 stages are far slower than 3, and 4 adds little to 3.)

# %%
gemm.sweep("04_mma_sync", "swizzle", [True, False])

# %%
gemm.sweep("04_mma_sync", "stages", [2, 3, 4])

# %% [markdown]
# The recorded sweeps (`results/sweeps/<card>_lessons.json`), read back whatever this machine measured above:

# %%
for rec in lesson.recorded_sweeps("gemm", "04_mma_sync", "stages"):
    pct = ", ".join(f"{row['value']} stages {row['pct_of_cublas']:.1f} %" for row in rec["rows"]
                    if "pct_of_cublas" in row)
    print(f"{rec['gpu']} at {rec['commit']}: {pct} of cuBLAS")
lesson.recorded_against("gemm", "04_mma_sync", "swizzle", True)

# %% [markdown]
# Both predictions hold on both cards. Without the swizzle a product takes about three times as long. 2 stages
# fall far behind 3, and 4 adds little to 3: at 2 stages every slice's copies are waited for in full, and one
# slice of work ahead already hides nearly all of them, as the small memory and barrier stalls of the profile
# above (3 stages) say too.

# %% [markdown]
# Every warp here still does three jobs: compute addresses and issue copies, shuffle tiles into registers
# with `ldmatrix`, and multiply. Hopper takes the first two off the warps: next,
# [GEMM 05 · TMA + WGMMA](05_wgmma_tma.ipynb).
