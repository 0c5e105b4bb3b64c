# %% [markdown]
# # Attention lab 05 · S = QKᵀ on wgmma, then the online-softmax rescale
#
# In stage 05 a warpgroup (128 threads) owns 64 query rows. TMA has put its Q rows and stage `s`'s K tile into
# shared memory as 128-byte-swizzled boxes of 64 channels: `q_rows` is the shared address of this warpgroup's
# rows in Q's first box (the next box, channels 64-127 when `D = 128`, is `Q_BOX` bytes further), `k` the
# address of the K tile's first box (the next `KV_BOX` bytes further). The loop has just waited for the stage.
# Write, for key tile `t`:
#
# 1. **S = Q Kᵀ**: declare `float sc[BKV / 2];` (the code after your lines uses it), call `wgmma_fence();`, then
#    for each k16 step `kk < D / 16` build two descriptors with `smem_desc(address, 16, 1024)` (both operands
#    K-major: LBO unused, 16 by convention; SBO 1024, the next 8 rows): Q's at
#    `q_rows + (kk / 4) * Q_BOX + off` and K's at `k + (kk / 4) * KV_BOX + off`, where `off` is how far step `kk`
#    lies along a 128-byte row (how many bytes are 16 bf16?), and issue `Wgmma<BKV>::mma<0>(sc, desc_q, desc_k,
#    kk > 0)` (the 0: K is not transposed; the last argument: add to `sc`, except at the first step). Then
#    `wgmma_commit(); wgmma_wait<0>(); wgmma_keep(sc);`.
# 2. **the mask**: entry `i` of `sc` is the score of row `row0 + 8 * ((i / 2) & 1)` and key
#    `j0 + 8 * (i / 4) + 2 * (lane % 4) + (i & 1)`, with `j0 = t * BKV`. Set it to `NEG_INF` when the key is past
#    `Nk`, or, when `CAUSAL`, after the row (`j > row`). Only tiles that reach past `Nk` or cross the diagonal
#    need the loop (the warp's first row is `q0 + wg * 64 + warp * 16`; it may skip the others).
# 3. **the online softmax** of the lane's two rows, `h = 0` (entries `4n`, `4n + 1`) and `h = 1` (`4n + 2`,
#    `4n + 3`), `n < NS`: the row's new max `m_new = fmaxf(m[h], quad_max(mx) * scale_log2)` (`mx`: the largest
#    of its entries; `quad_max` takes the max over the four lanes that share the row; `scale_log2` is
#    `log2(e) / sqrt(d)`, the softmax runs in base 2); `alpha = exp2f(m[h] - m_new)`, but with 0 in place of
#    `m_new` while it is still `-inf` (a row that has seen no key: nothing to rescale, and no `-inf - -inf`);
#    each entry becomes `p = exp2f(s * scale_log2 - m_new)` (same substitution), summed; `l[h] = l[h] * alpha +
#    sum`; and **O rescaled**: `o[4n + 2h]` and `o[4n + 2h + 1]` times `alpha` for every `n < NO`.
#
# After your lines the kernel packs `sc` into bf16 pairs (`pa`, still in registers) as P and runs `O += P V` on
# wgmma, with P as the A operand from registers.
#
# The grader compiles your region into `kernels/wgmma_tma.cu` for sm_90a and runs its ragged cases, d = 64 and
# 128, causal and not. On a Hopper GPU (H100, H200) it runs them there, then again in the workbook's CPU emulator,
# which runs `wgmma` as the PTX ISA defines it (the results land at the `wgmma_wait` that covers them) and TMA
# copies landing as late and as early as your waits allow. Without a Hopper GPU the emulator alone grades it:
# small cases, slower, and no timing. The lesson: [05 · TMA and wgmma](../../notebooks/attention/05_wgmma_tma.ipynb).

# %%
import cudabook
print(cudabook.where())
from cudabook import lesson
from cudabook.attention import s05_wgmma_tma as s05
from cudabook.gemm import wgmma
from cudabook.attention import grade
print(wgmma.explain(wgmma.descriptor(0x400, lbo=16, sbo=1024)))

# %% [markdown]
# The names your lines can use: the layout constants, then the loop around your region and what follows it.

# %%
lesson.show_region(s05.source(), start="constexpr int NT", end="constexpr int NO")
print()
lesson.show_region(s05.source(), start="float o[D / 2];", end=">>> lab")
print("    ... your lines ...")
lesson.show_region(s05.source(), start="<<< lab", end="wgmma_keep_a(pa[ps])")

# %%
#! region attention/kernels/wgmma_tma.cu QK_RESCALE

# %%
grade("05_wgmma_tma", QK_RESCALE)

# %% [markdown]
# Passed? Make the mistakes this step invites, one at a time, and read what the grader says:
#
# - **the scale 1/d**: use `scale_log2 * rsqrtf((float)D)` in place of `scale_log2`. The grader names it.
# - **no rescale of O when the max grows**: leave out the two `*= alpha` lines. The output matches attention
#   computed tile by tile without the rescale, and the grader says so.
# - **a k16 step of 16 bytes**: `off = 16 * (kk % 4)`. The four steps of a box then start at channels 0, 8, 16
#   and 24 instead of 0, 16, 32 and 48: some channels count twice, others never.
# - **the causal mask off by one**: `j >= row`. Each query loses its own key.
#
# The grader names three of them, on a GPU or in the emulator: the scale, the missing rescale and the
# diagonal. The 16-byte step it fails without naming it (most outputs are off, and no hint says why): that one
# you find by counting bytes. Then back to the lesson: why every step of this kernel still waits, and what rung
# 06 does about it.
