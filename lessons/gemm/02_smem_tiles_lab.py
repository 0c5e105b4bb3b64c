# %% [markdown]
# # GEMM lab 02 · The tile loop
#
# The kernel below computes one `TILE x TILE` tile of C per block, one element per thread, but the body of
# its loop over K is missing. For each step `k0` (a multiple of `TILE`), write:
#
# 1. **Load the tiles.** Thread `(ty, tx)` stores one element of each tile into shared memory, widened to
#    float32 with `bf16_to_f32`:
#    - `As[ty, tx] = A[m, k0 + tx]`, or `0.0` when `m >= M` or `k0 + tx >= K`;
#    - `Bs[ty, tx] = B[k0 + ty, n]`, or `0.0` when `k0 + ty >= K` or `n >= N`.
#
#    The zeros matter: the last step is partial when K is not a multiple of `TILE`, and a zero adds nothing
#    to the sum, so the loop below needs no test of its own. Write them in both tiles: shared memory is not
#    zero to begin with (on a GPU it holds whatever was there, NaN included; here it starts as NaN), and a
#    zero in one tile does not cancel a NaN in the other.
# 2. **Barrier** (`cuda.syncthreads()`): nobody reads the tiles before everybody has written them.
# 3. **Multiply-add:** `acc += As[ty, k] * Bs[k, tx]` for `k` in `range(TILE)`.
# 4. **Barrier** again: nobody overwrites the tiles (next step) while somebody still reads them.
#
# Every thread must reach every barrier, so don't `return` early; the final store is already guarded.
#
# Run the kernel cell, then the grading cell. The grader launches your kernel on fresh random matrices with
# mostly ragged shapes (most sizes not a multiple of `TILE`, some K not a multiple of 8, 1 x 1 x 1) and tells
# you what is wrong. It runs them at two tile sizes, `TILE` and a second one (8 in the simulator, where `TILE`
# is 16; 16 on a GPU, where it is 32): write `TILE` wherever the tile's size belongs, never the number.
# Without a GPU it runs in Numba's simulator, which checks every index: reading past the end of a row
# raises an `IndexError` there (on a GPU it would silently read the next row).
#
# Graded as handed out, the loop body is empty and every element of C is 0: the grader then says C is the sum
# over K "without the term(s) k = 0 .. K-1", every term. That is the missing body, not a wrong loop bound.

# %%
import cudabook
print(cudabook.where())
import numpy as np
from numba import cuda, float32
from cudabook.bits import bf16_to_f32, f32_to_bf16
from cudabook.gemm.s02_smem_tiles import TILE
from cudabook.gemm import grade

print("TILE =", TILE)

# %%
#! kernel gemm.s02_smem_tiles gemm_tiled

# %%
grade("02_smem_tiles", gemm_tiled)

# %% [markdown]
# Passed? It passed at two tile sizes; try a third: `grade("02_smem_tiles", gemm_tiled, tile=4)` compiles your
# kernel again with `TILE = 4`. Then read the lesson (`notebooks/gemm/02_smem_tiles.ipynb`) for why this
# kernel, whatever the tile size, cannot pass about 1/8 of the GPU's fp32 peak.
