# %% [markdown]
# # GEMM lab 07 · Release a stage to the whole cluster
#
# In stage 07 the two blocks of a cluster share B: each producer multicasts its half of B's boxes into the
# stage `s` of **both** blocks. So a stage may be refilled only when the consumers of both blocks are done with
# it, and `empty[s]` counts `CONSUMERS x CLUSTER` arrivals. `release(empty + 8 * s)` arrives on `empty[s]` of
# every block of the cluster.
#
# The kernel also keeps one k-tile of wgmmas running while it issues the next (`MMA_DEPTH 1`): after issuing
# k-tile `kt`, `wgmma_wait<1>()` returns once every group **but the newest** is done, so the stage of the
# previous k-tile (`prev`) can be released, not the current one. Write the consumer's loop body:
#
# 1. wait for stage `s` to be full (which parity? the picture below says what each one waits for);
# 2. issue its k-tile: `mma_k_tile(d, a + cw * 64 * 128, a + A_BYTES)`, `a` the stage's address;
# 3. `wgmma_wait<1>()`; then the warpgroup's `leader` releases stage `prev` (if there is one, `prev >= 0`)
#    and `prev = s`;
# 4. step `s`, flipping `phase` when it wraps.
#
# (The `#if MMA_DEPTH` branches of the solution keep the simpler `MMA_DEPTH 0` path too; you may write only
# the depth-1 path.) A stage released too early (with `wgmma_wait<2>()`, say) may be refilled while the tensor
# cores still read it: on a GPU wrong results now and then; the CPU emulator stops at that refill and names
# the wgmma it overwrites. A stage never released hangs the producer: on a GPU the watchdog traps after about
# 20 seconds; the CPU emulator names the deadlock at once.
#
# The grader runs every case twice: at the defaults, and with Stream-K forced on three clusters
# (`stream_k=True, blocks=6`, lesson 07's last section). There your loop also runs pieces of a unit, whose
# k-tiles start and end mid-K (`k0` and `k1` in the code around it): the same body must be right for them.
#
# `phase` starts at 0 and flips each time `s` wraps. What `mbar_wait(bar, p)` does, for a barrier that one fill
# completes:
#
# ```
#                     fresh    after fill 1   after fill 2   after fill 3
# current phase bit     0           1              0              1
# mbar_wait(bar, 0)   blocks     returns         blocks        returns
# mbar_wait(bar, 1)   returns    blocks          returns       blocks
# ```

# %%
import cudabook
print(cudabook.where())
from cudabook import lesson
from cudabook.gemm import s07_clusters as s07
from cudabook.gemm import grade

# %% [markdown]
# `release`, then the code around your lines (after the loop, the last `prev` is released once the final
# wgmmas are done):

# %%
lesson.show_region(s07.source(), start="void release(", end="}")
print()
lesson.show_region(s07.source(), start="const bool leader", end=">>> lab")
print("        ... your lines ...")
lesson.show_region(s07.source(), start="        // <<< lab", end="release(empty + 8 * prev)")   # 07's, not 08's

# %%
#! region gemm/kernels/clusters.cu CLUSTER_STEP

# %%
grade("07_clusters", CLUSTER_STEP)
