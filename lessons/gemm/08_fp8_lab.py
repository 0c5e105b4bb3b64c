# %% [markdown]
# # GEMM lab 08 · The FP8 k-tile
#
# Rung 08 is rung 07 on e4m3 inputs: one byte an element. A stage holds one k-tile of **BK = 128** values of K:
# `BM` rows of A and `BN` rows of **Bt** (B stored transposed, `[N, K]`: row `n` of Bt is column `n` of B), every
# row 128 bytes, written by TMA with the 128-byte swizzle. Both operands are **K-major**: along each row, k
# runs from 0 to 127. (For e4m3 the PTX ISA has no transpose flag, so B cannot stay MN-major as in 07.)
#
# Write the FP8 branch of `mma_k_tile`: the wgmmas of one k-tile, for one consumer warpgroup (64 rows of A, all
# `BN` rows of Bt); the `wgmma_fence()` before it and the `wgmma_commit()` after its `#endif` are written. `a`
# and `b` are the shared-memory addresses of its A rows and of Bt in the stage. Each
# `WgmmaFp8<BN>::mma(d, desc_a, desc_b, 1)` is one `wgmma ... m64nBNk32 .e4m3.e4m3`: it multiplies **32 values
# of k** and adds them to `d` (the last argument, 1: add, do not overwrite). `smem_desc(addr, lbo, sbo)`
# builds a 128B-swizzled descriptor. Decide before you write:
#
# 1. **How many k32 steps** in a k-tile of 128?
# 2. **How far does step `kk` move in A, in bytes?** k runs along A's 128-byte rows. How many bytes are 32
#    e4m3 values? (07 moved A 32 bytes a step for 16 bf16.)
# 3. **How far in Bt?** In 07, B was MN-major: k ran *down* the rows, and a k16 step moved 16 rows of 128 bytes
#    = 2048 bytes. Where does k run in Bt?
# 4. **Which descriptor for Bt?** 07's B had `LBO = B_BOX_BYTES` (the step from one 64-column box of N to the
#    next) and `SBO = 1024`. Bt is stored the way A is. So which kind of descriptor is it, and why?
#
# The picture below shows where k lies in each operand's rows. The answers can be read from it.
#
# ```
#  08: A (BM rows) and Bt (BN rows), the same layout: K-major, 128 bytes = 128 values of k a row
#            byte 0        32        64        96       128
#  row 0         | k 0..31 | k 32..63| k 64..95|k 96..127|
#  row 1         |         |         |         |         |     8 rows = one 1024-byte swizzle atom (SBO)
#  ...              step 0    step 1    step 2    step 3
#
#  07: B (bf16, MN-major): BN / 64 boxes of 64 rows of k x 64 columns of n (128 bytes a row), LBO apart
#  row k = 0..15    | n 0..63 |   k16 step 0
#  row k = 16..31   |         |   k16 step 1   (16 rows x 128 bytes further)
#  ...
# ```
#
# The grader compiles your lines into `clusters.cu` with `FP8=1` for sm_90a and runs rung 08 on ragged shapes.
# On an H100 or H200 it runs there first, then in the workbook's CPU emulator. Without a Hopper GPU the emulator
# alone grades it. The emulator runs e4m3 wgmma with the 13-bit sums measured on an H100. Lesson 08 explains the
# format and the kernel.

# %%
import cudabook
print(cudabook.where())
import matplotlib.pyplot as plt
import numpy as np
from cudabook import lesson, nvrtc
from cudabook.gemm import grade, wgmma
from cudabook.gemm import s08_fp8 as s08

# %% [markdown]
# The same picture, byte by byte: the first 8 rows of A (or Bt) in 08, and one whole 64-row box of 07's B (both
# before TMA's swizzle moves each row's 16-byte chunks around, which the hardware undoes when it reads).
# Colour: which value of k a byte holds.

# %%
fig, axes = plt.subplots(1, 2, figsize=(11, 3.4))
k_e4m3 = np.tile(np.arange(128), (8, 1))                    # K-major, 1 byte: byte j of every row is k = j
k_bf16 = np.repeat(np.arange(64)[:, None], 128, axis=1)     # MN-major: row r of a box is k = r, for 64 n
axes[0].imshow(k_e4m3, cmap="viridis", aspect="auto")
axes[0].set_title("08: the first 8 rows of A, or of Bt (e4m3, K-major)", fontsize=9)
for x in (32, 64, 96):
    axes[0].axvline(x - 0.5, color="w", lw=1)
for x in (0, 32, 64, 96):
    axes[0].text(x + 2, 1, f"k = {x}", color="w", fontsize=8)
axes[1].imshow(k_bf16, cmap="viridis", aspect="auto")
axes[1].set_title("07: one box of B (bf16, MN-major), 64 rows", fontsize=9)
for r in (16, 32, 48):
    axes[1].axhline(r - 0.5, color="w", lw=1)
for r in (0, 16, 32, 48):
    axes[1].text(2, r + 4, f"k = {r}: row {r}, all 64 columns of n", color="w", fontsize=8)
for ax in axes:
    ax.set_xlabel("byte in the 128-byte row")
    ax.set_ylabel("row")
    ax.set_xticks(range(0, 129, 16))
plt.tight_layout()
plt.show()

# %% [markdown]
# A's descriptor, for a tile at 1 KiB, field by field:

# %%
print(wgmma.explain(wgmma.descriptor(0x400, lbo=16, sbo=1024, swizzle="128B")))

# %% [markdown]
# The names your lines can use (the stage layout, the instruction, the descriptor), then the function around
# your region and where the consumer calls it:

# %%
lesson.show_region(s08.source(), start="constexpr int BM", end="constexpr int B_BOX_BYTES")
print()
hopper = (nvrtc.INCLUDE / "hopper.cuh").read_text()
lesson.show_region(hopper, start="template <> struct WgmmaFp8<256>", end="void mma(float (&d)[128]")
lesson.show_region(hopper, start="smem_desc(uint32_t", end="}")
print()
lesson.show_region(s08.source(), start="void mma_k_tile", end=">>> lab[08_fp8]")
print("      ... your lines ...")
lesson.show_region(s08.source(), start="<<< lab", end="#else")
print()
lesson.show_region(s08.source(), start="mma_k_tile(d, a + cw", end="mma_k_tile(d, a + cw")

# %%
#! region gemm/kernels/clusters.cu#08_fp8 FP8_STEP

# %%
grade("08_fp8", FP8_STEP)
