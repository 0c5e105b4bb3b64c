# %% [markdown]
# # GEMM 03 · Register blocking: a block of C per thread
#
# Rung 02 stopped at shared memory: every multiply-add reads two values from it, and an SM serves one
# warp-wide shared load a clock, so the FMA units idle seven clocks in eight. The fix is to make each value
# read from shared memory feed **many** multiply-adds, from registers.
#
# Let each thread compute a `TM x TN` block of C (8 x 8 here). At step `k` it reads `TM` values of A (a
# column of the A tile) and `TN` values of B (a row of the B tile) into registers and multiplies every one
# with every other: an **outer product**, `TM x TN = 64` FMAs for `TM + TN = 16` values, read as four 16-byte
# shared loads. A block of 256 threads then covers a `BM x BN = 128 x 128` tile of C, stepping along K by
# `BK = 16`, and reads `(BM + BN)` values of global memory per step for `2 BM BN` FLOPs: 64 FLOPs per byte,
# well right of the fp32 ridge.

# %%
import cudabook
print(cudabook.where())

import numpy as np
import matplotlib.pyplot as plt
from matplotlib.patches import Rectangle
from cudabook import SIMULATOR, gemm
from cudabook.gemm import s01_naive, s03_register_blocking as s03

print({k: getattr(s03, k) for k in ("BM", "BN", "BK", "TM", "TN", "THREADS")},
      "(tiny in the simulator)" if SIMULATOR else "")

# %% [markdown]
# ## Who computes what
#
# The block's threads form a `(BM / TM) x (BN / TN)` = 16 x 16 grid. Thread `(ty, tx)` does **not** own a
# contiguous 8 x 8 square: its rows are two runs of four, `ty * 4 + 0..3` and 64 rows further, and its
# columns likewise. Why: at step `k` the eight threads of a quarter warp (consecutive `tx`) then read
# `Bs[k, tx * 4 .. tx * 4 + 3]`, 8 x 16 = 128 consecutive bytes, all 32 banks once. With contiguous
# 8-column blocks they would read 16 bytes every 32, two threads per bank: twice the time.

# %%
def draw_thread_blocks(BM=128, BN=128, TM=8, TN=8, threads=((1, 2), (5, 9))):
    fig, ax = plt.subplots(figsize=(4.6, 4.6))
    ax.set_xlim(0, BN); ax.set_ylim(BM, 0); ax.set_aspect("equal")
    ax.add_patch(Rectangle((0, 0), BN, BM, fill=False))
    for (ty, tx), color in zip(threads, ("C1", "C0")):
        for h in range(2):
            for w in range(2):
                ax.add_patch(Rectangle((w * BN // 2 + tx * TN // 2, h * BM // 2 + ty * TM // 2), TN // 2, TM // 2,
                                       color=color))
        ax.plot([], [], "s", color=color, label=f"thread (ty={ty}, tx={tx}): four 4 x 4 squares")
    ax.axhline(BM / 2, color="gray", lw=0.5); ax.axvline(BN / 2, color="gray", lw=0.5)
    ax.set_title(f"a {BM} x {BN} block tile of C: two threads' 8 x 8 elements", fontsize=9)
    ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.04))
    plt.show()


draw_thread_blocks()

# %% [markdown]
# ## The kernel
#
# One pass per K tile, plus one:
#
# 1. issue the 16-byte global loads of tile `t` into registers (A: 128 rows x 16, B: 16 rows x 128: one vector
#    of 8 bf16 per thread each);
# 2. compute on tile `t - 1` from shared memory, while those loads are in flight;
# 3. store tile `t` (widened to float32, A transposed so that each of a thread's two runs of 4 values of A is
#    consecutive) into the *other* of two shared buffers, and pass a barrier.
#
# One barrier per tile is enough: pass `t` writes the buffer that pass `t - 1` read (tile `t - 2`), and the
# barrier that ends pass `t - 1` lies between the last read and the first write. When K or N is not a multiple of 8 (rows not 16-byte aligned) the same kernel is compiled with
# `VEC = False`, and loads element by element; past the edges it loads zeros.

# %%
from numba import cuda, float32, uint32
from cudabook.gemm.s03_register_blocking import *   # the constants and device functions the kernel uses


#! kernel gemm.s03_register_blocking gemm_blocked

# %% [markdown]
# The 16-byte shared loads of a thread's run of values:

# %%
#! kernel gemm.s03_register_blocking load_run

# %% [markdown]
# `load_f32x4`, `store_f32x4`, `load_bf16x8` and `store_bf16x2` are small `numba.cuda.extending.intrinsic`s:
# each emits one wide access (`ld.shared.v4.f32`, `st.shared.v4.f32`, `ld.global.v4.u32`, `st.global.u32`)
# through a pointer it promises is aligned. Numba has no 128-bit type, and LLVM does not merge four neighbouring scalar loads when it
# cannot prove their alignment. In the simulator they are plain Python.
#
# ## Registers, not local memory
#
# `acc`, `af`, `bf` (and `ra`, `rb`, `cw`) are `cuda.local.array`s: in principle, per-thread memory in DRAM (cached in L1).
# They end up in registers only if every index into them is a compile-time constant, which happens when LLVM
# unrolls every loop that indexes them: loops of constant trip count (`range(TM)` with `TM` a global of the
# module) and a small enough body. Two places needed care:
#
# - rounding C to bf16 in the same loop as the stores made the loop too big to unroll, and `acc` spilled
#   to local memory (256 bytes a thread); two loops (round into words, then store) fixed it;
# - the loop over the 16 steps of a tile is too long to unroll; split into 8 x 2, the inner one unrolls,
#   which halves the loop overhead.
#
# The PTX says whether it worked: no `.local` declarations at all. Numba's compiler needs no GPU, only NVVM,
# so this cell works everywhere (without a GPU it compiles in a separate process, about ten seconds).

# %%
try:
    for vec in (True, False):
        text = s03.ptx(vec=vec)
        print(f"VEC={vec!s:5}: local memory: {'YES' if '.local' in text else 'none'};  "
              f"ld.shared.v4.f32: {text.count('ld.shared.v4.f32')},  fma.rn.f32: {text.count('fma.rn.f32')},  "
              f"ld.global.v4.u32: {text.count('ld.global.v4.u32')}")
except RuntimeError as e:
    print(e)

# %% [markdown]
# (The GPU's default constants, 128 x 128 x 16 with 8 x 8 per thread; 128 FMAs are the two unrolled steps.)
#
# ## Is it right?
#
# The cases whose K or N is not a multiple of 8 run the element-by-element path; the others take the 16-byte
# path (the last case among them, with several K tiles and a ragged M).

# %%
for name, M, N, K in gemm.cases() + [("16-byte path", *((20, 40, 32) if SIMULATOR else (1000, 520, 776)))]:
    a, b = gemm.random_problem(M, N, K)
    print(f"{name:24s} M={M:4d} N={N:4d} K={K:4d}:",
          gemm.judge(gemm.run("03_register_blocking", a, b), a, b).message)

# %% [markdown]
# ## How fast?
#
# Rungs 02 and 03 against cuBLAS SGEMM (fp32 on the CUDA cores, TF32 off: the same arithmetic as this kernel)
# and bf16 cuBLAS (tensor cores), measured in the same process; rung 01 from this card's record (‡). Without a
# GPU, the records in `results/`.

# %%
record = gemm.ladder_so_far("03_register_blocking", peers=True)

# %%
points = [(s, s01_naive.intensity(s), s01_naive.measured_TFLOPs(record, s))
          for s in ("01_naive", "02_smem_tiles", "03_register_blocking")]
fig, ax = plt.subplots(figsize=(7, 4))
s01_naive.draw_roofline(ax, points)
plt.show()

# %% [markdown]
# ## What limits it, and where Numba stops
#
# The inner loop is now almost all arithmetic: per two steps of k, 128 FFMA instructions and 8 shared loads
# in a loop of about 140 instructions (an sm_90 build read with cuobjdump when this lesson was written, not a
# record; the PTX cell above shows the part you can check here: 128 `fma.rn.f32` and 8 `ld.shared.v4.f32`).
# Is it latency, with only 16 warps an SM? A profile says no (Nsight Compute on an H200 at commit 21368d8, one
# launch, not a record): at 126 registers a thread an SM holds two blocks of 256, about 3.9 warps a
# scheduler, and each was issuing in 22 % of its cycles and ready but not picked in another 42 %. So a
# scheduler issued an instruction in about 86 % of its cycles, and ready warps were to spare: the limit is
# the issue slot itself. What the gap to SGEMM (the % of SGEMM printed above) is made of was not measured;
# the first suspects are the instructions that are not FFMA: the loop's own, and the loads, stores and
# barrier of each tile. cuBLAS's SGEMM is the same idea, tuned further.
#
# Numba stops here, for three reasons:
#
# - **No control of the code generator.** Unrolling, register allocation and instruction order are LLVM's
#   and ptxas's. We steered them by the shape of the code (constant globals, small loop bodies, split loops):
#   Numba has no `#pragma unroll`. Its knobs, `launch_bounds=` (a register budget for the whole kernel,
#   which `launch` sets to the block's 256 threads) and `max_registers=`, only cap registers: that is all we
#   can say to ptxas.
# - **No asynchronous copies.** Numba has no `cp.async` (global to shared without registers) or TMA of its own,
#   and no public inline-PTX API (only a hand-written `intrinsic` emitting inline assembly reaches `cp.async`,
#   and a Numba kernel cannot take a tensor map by value), so the double buffer goes through registers.
# - **No tensor cores.** Numba has no `mma`, `ldmatrix` or `wgmma`. An H100's fp32 CUDA cores peak at about
#   67 TFLOP/s; its bf16 tensor cores at about 989 (spec sheet, dense). Compare the % of bf16 cuBLAS above with
#   the % of SGEMM: the gap is the tensor cores, and closing it needs PTX. The next rung is CUDA C++, compiled
#   at run time with NVRTC: [04 · mma.sync + cp.async](04_mma_sync.ipynb).
#
# ## Experiment: the thread's block, TM x TN
#
# A bigger block per thread means more FMAs per shared load, but more registers (`TM x TN` accumulators), so
# fewer threads fit on an SM; a smaller one, the reverse. Prediction to test: 8 is the sweet spot for `tm`; 4
# reads 1.5 times as many shared values per FMA ((4 + 8) / 32 against (8 + 8) / 64) and its runs of 2 lose the
# 16-byte loads; 16 needs 128 accumulators a thread, and only 128 threads a block (check `s03.ptx(tm=16)` for
# `.local`). Change the values, or sweep `tn`
# (a multiple of 4) or `bk` (a multiple of 8) instead. Without a GPU the sweep checks each setting is correct.

# %%
gemm.sweep("03_register_blocking", "tm", [2, 4, 8, 16])

# %% [markdown]
# Check the prediction against the recorded sweeps: each `tm`'s time against 8.

# %%
from cudabook import lesson

lesson.recorded_against("gemm", "03_register_blocking", "tm", 8)

# %% [markdown]
# It holds on both cards: 8 is the fastest, 4 and 2 are slower in the order of their shared values per FMA,
# and 16 is slower too. Which of the reasons above costs 16 its time (registers, threads a block, or local
# memory) these sweeps do not separate.
