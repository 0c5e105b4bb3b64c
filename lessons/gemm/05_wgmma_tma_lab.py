# %% [markdown]
# # GEMM lab 05 · Describe the tiles to the tensor cores
#
# In stage 05 a TMA copy has put one k-tile of A (`BM x 64`, K-major: 64 bf16 = 128 bytes a row) and of B
# (`64 x BN`, stored as `BN / 64` boxes of 64 rows x 64 columns: N is the contiguous direction, *MN-major*)
# into shared memory, both with the 128-byte swizzle. A warpgroup (128 threads) multiplies its 64 rows of A by
# the whole of B with `wgmma.mma_async ... m64nBNk16`: four instructions, one per 16 values of k.
#
# The tensor cores do not see pointers, they see **descriptors**: 64-bit words that give the start address
# (>> 4), the leading- and stride-byte offsets (LBO, SBO, >> 4) and the swizzle mode. `smem_desc(addr, lbo,
# sbo)` in `hopper.cuh` packs them (128-byte swizzle); `cudabook.gemm.wgmma` builds the same word in Python.
# Write, for k-tile stage `s`:
#
# 1. the addresses (shared-memory byte addresses, `uint32_t`): stage `s` starts at `base + s * STAGE_BYTES`;
#    this warpgroup (`wg`) has its rows of A `wg * 64` rows (of 128 bytes) into the stage; B starts after A
#    (`A_BYTES`);
# 2. `wgmma_fence()` before the first wgmma (it orders earlier accesses to the accumulator registers before
#    the asynchronous wgmmas);
# 3. for each k16 step `kk`: a descriptor for A (SBO = 1024: eight 128-byte rows form one swizzle atom; LBO
#    is not used for a swizzled K-major operand, pass 16 as printed below; a k16 step moves **along** the
#    128-byte row: how many bytes is 16 bf16?) and one for B (SBO = 1024 again, LBO = the distance between two
#    64-column boxes, `B_BOX_BYTES`; a k16 step moves **down** 16 rows of 128 bytes), then
#    `Wgmma<BN>::mma<1>(d, desc_a, desc_b, 1)` (the template's 1: B is MN-major, transposed; the last 1:
#    add to `d` rather than overwrite it);
# 4. `wgmma_commit()` and `wgmma_wait<0>()`: the stage may be refilled only once the wgmmas have read it.
#
# The grader compiles your region into `kernels/wgmma_tma.cu` for sm_90a and runs it on ragged shapes: on an
# H100/H200, and in the workbook's CPU emulator (which runs `wgmma` and TMA as the PTX ISA defines them); without
# a Hopper GPU, in the emulator alone. It runs every case at two tile shapes, the default (`BN = 128`, two
# warpgroups, 4 stages) and `BN = 64` with one warpgroup and 2 stages: write `BN`, `wg`, `STAGE_BYTES`,
# `A_BYTES` and `B_BOX_BYTES` where they belong, not their values. Read GEMM lesson 05 if you are stuck.

# %%
import cudabook
print(cudabook.where())
from cudabook import lesson
from cudabook.gemm import grade
from cudabook.gemm import s05_wgmma_tma as s05, wgmma
print(wgmma.explain(wgmma.descriptor(0x400, lbo=16, sbo=1024, swizzle="128B")))

# %% [markdown]
# The names your lines can use: the stage layout, then the loop around your region.

# %%
lesson.show_region(s05.source(), start="constexpr int BM", end="constexpr int SMEM_BYTES")
print()
lesson.show_region(s05.source(), start="for (int kt = 0; kt < k_tiles", end=">>> lab")
print("      ... your lines ...")
lesson.show_region(s05.source(), start="<<< lab", end="load(kt + STAGES, s)")

# %%
#! region gemm/kernels/wgmma_tma.cu WGMMA_STEP

# %%
grade("05_wgmma_tma", WGMMA_STEP)
