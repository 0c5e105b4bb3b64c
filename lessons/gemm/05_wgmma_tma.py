# %% [markdown]
# # GEMM 05 · TMA + WGMMA: the tensor cores read shared memory themselves
#
# Rung 04 made every warp do three jobs: copy (`cp.async`), shuffle tiles into registers (`ldmatrix`), and
# multiply (`mma.sync`, 16 x 8 x 16 at a time). Hopper takes the first two off the warps:
#
# - the **Tensor Memory Accelerator** copies a whole tile (a *box*) from global to shared memory when one
#   thread asks, and reports completion on an **mbarrier** by counting bytes (as in resampling stage 07);
# - **`wgmma.mma_async`** lets a *warpgroup* (4 consecutive warps, 128 threads) multiply a 64 x N x 16 block in
#   one instruction, reading A and B **straight from shared memory**. The accumulators stay in registers.
#
# ```
#   thread 0                          every warpgroup (64 rows of the tile each)
#   expect_tx(full[s], stage bytes)
#   TMA box of A  -> stage s          wait full[s] (parity = lap % 2)
#   TMA boxes of B -> stage s         wgmma.fence
#        ...                          4 x wgmma m64nBNk16 (descriptors of A and B in stage s)
#   (after the barrier)               wgmma.commit_group ; wgmma.wait_group 0
#   refill stage s with k-tile+STAGES __syncthreads
# ```
#
# Two new things to get exactly right: the **swizzled layout** TMA writes and WGMMA reads, and the
# **descriptor** that tells WGMMA where and how the tile lies. Get either wrong and the result is quietly wrong
# (or the instruction walks out of the tile). PTX ISA: [wgmma](https://docs.nvidia.com/cuda/parallel-thread-execution/index.html#asynchronous-warpgroup-level-matrix-instructions),
# [its descriptor](https://docs.nvidia.com/cuda/parallel-thread-execution/index.html#asynchronous-warpgroup-level-matrix-shared-memory-layout-matrix-descriptor),
# [cp.async.bulk.tensor](https://docs.nvidia.com/cuda/parallel-thread-execution/index.html#data-movement-and-conversion-instructions-cp-async-bulk-tensor),
# [mbarrier](https://docs.nvidia.com/cuda/parallel-thread-execution/index.html#parallel-synchronization-and-communication-instructions-mbarrier);
# driver API: [cuTensorMapEncodeTiled](https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__TENSOR__MEMORY.html).

# %%
import cudabook
print(cudabook.where())

import numpy as np
import matplotlib.pyplot as plt
from cudabook import SIMULATOR, gemm, lesson, nvrtc, tma
from cudabook.gemm import pictures, s05_wgmma_tma as s05, wgmma

# %% [markdown]
# ## The 128-byte swizzle, drawn
#
# A k-tile of A is `BM` rows of 64 bf16 = 128 bytes: eight 16-byte *chunks* a row. Stored plainly, the chunk
# `c` of eight consecutive rows would sit in the same four banks, and reading a column of chunks would be an
# 8-way bank conflict. With `CU_TENSOR_MAP_SWIZZLE_128B` TMA stores chunk `c` of row `r` at position
# `c XOR (r % 8)`: each group of 8 rows (an **atom**, 1024 bytes) is a Latin square, every column of chunks
# spread over all 32 banks. The tile must start at a 1024-byte boundary so that `r % 8` is the row inside an
# atom; the kernel rounds its shared-memory base up to 1024.

# %%
from cudabook import tma
rows, chunks = 16, 8
where = tma.swizzle_offsets(rows * 128, "128B")          # where TMA puts each byte (the emulator uses it too)
placed = np.zeros((rows, chunks), int)
for r in range(rows):
    for c in range(chunks):
        dest = where[r * 128 + c * 16]
        placed[dest // 128, dest % 128 // 16] = c
fig, axes = plt.subplots(1, 2, figsize=(9, 3.4))
for ax, grid, title in ((axes[0], np.tile(np.arange(chunks), (rows, 1)), "plain: chunk c at position c"),
                        (axes[1], placed, "128B swizzle: chunk c at position c ^ (row % 8)")):
    ax.imshow(grid, cmap="tab10", aspect="auto")
    for r in range(rows):
        for p in range(chunks):
            ax.text(p, r, str(grid[r][p]), ha="center", va="center", fontsize=7, color="white")
    ax.set_title(title, fontsize=9)
    ax.set_xlabel("16-byte position in the 128-byte row (4 banks each)")
    ax.set_ylabel("row")
axes[1].axhline(7.5, color="k", lw=2)
plt.tight_layout()
plt.show()
print("Colour = which 16-byte chunk of the row (k = 8c .. 8c+7) sits there. On the right each column of")
print("positions holds all 8 chunks of an atom: eight rows' chunk c land in eight different bank groups.")

# %% [markdown]
# ## The tensor maps, checked first
#
# Each operand is described to TMA once, on the host, by the driver's `cuTensorMapEncodeTiled`. The workbook
# checks the description with `cudabook.tma.check_tiled` (the documented rules, plus limits measured on H100
# and H200) before the driver sees it, so a mistake gets a sentence instead of `CUDA_ERROR_INVALID_VALUE`.
#
# - **A** `[M, K]` row-major, box `[BM rows x 64 columns]`: 64 bf16 = 128 bytes, exactly the swizzle span.
# - **B** `[K, N]` row-major, box `[64 rows x 64 columns]`: N is the contiguous direction, and a box may be at
#   most 128 bytes wide with this swizzle, so a `BN`-wide stage takes `BN / 64` boxes, placed one after another.
#
# What lies outside the matrix (the ragged edges of M, N and K) TMA fills with zeros: zeros add nothing to a
# sum, so the K loop needs no tail code at all.

# %%
for name, args in s05.tensor_maps(4096, 4096, 4096).items():
    a = dict(args)
    tma.check_tiled(a.pop("dtype"), a.pop("shape"), a.pop("strides"), a.pop("box"), **a)
    print(f"{name}: shape {args['shape']}, row stride {args['strides'][0]} B, box {args['box']}, "
          f"swizzle {args['swizzle']}: accepted")

# %% [markdown]
# One rule no zero fill can fix: every row stride must be a multiple of 16 bytes. With `K = 77` a row of A is
# 154 bytes. The validator says so, and says what to do; the stage does it (the host pads K and N to
# multiples of 8 with zeros, once, and copies C's `[M, N]` corner back after the kernel).

# %%
for name, args in s05.tensor_maps(100, 77, 77, padded_rows=False).items():
    a = dict(args)
    try:
        tma.check_tiled(a.pop("dtype"), a.pop("shape"), a.pop("strides"), a.pop("box"), **a)
    except tma.TensorMapError as e:
        print(f"{name} unpadded: [{e.rule}] {e}")
print("padded:", {name: args["shape"] for name, args in s05.tensor_maps(100, 77, 77).items()})

# %% [markdown]
# ## The descriptor, field by field
#
# `wgmma` does not take a pointer. It takes a 64-bit **matrix descriptor** per operand:
#
# ```
#  63 62 | 61 .. 52 | 51 49 | 48 46 | 45 ........ 32 | 31 30 | 29 ........ 16 | 15 14 | 13 ......... 0
#  swizzle|          | base  |       |   SBO >> 4     |       |   LBO >> 4     |       | start addr >> 4
# ```
#
# - **start address**: where this k16 slice begins (shared-memory byte address, in 16-byte units);
# - **SBO** (stride byte offset): from one 8-row group to the next;
# - **LBO** (leading byte offset): for A (K-major) unused, since a k16 slice (32 bytes) lies inside one
#   128-byte row; for B (MN-major) the step from one 64-wide group of N columns to the next;
# - **swizzle** 1 = 128-byte.
#
# Both offsets are distances between *core matrices* (below): they are not chosen, they are read off the
# layout TMA wrote, and the section after the picture derives them.
#
# Python builds the same word as the C++ below (a CPU test checks the two agree on the kernels' values).

# %%
a_addr, b_addr = 0x400, 0x400 + 128 * 128     # a stage at 1 KiB: A (128 rows x 128 B), then B
print(wgmma.explain(wgmma.descriptor(a_addr, **wgmma.A_K_MAJOR)))
print()
print(wgmma.explain(wgmma.descriptor(b_addr, **wgmma.B_MN_MAJOR)))

# %%
lesson.show_region((nvrtc.INCLUDE / "hopper.cuh").read_text(), start="smem_desc(uint32_t", end="}")

# %% [markdown]
# A k-tile (64 values of k) is four k16 steps. Where does step `kk` start? In A, k runs **along** the 128-byte
# row: 16 bf16 further is **+32 bytes** (the swizzle is applied by the hardware to the address it computes, so
# the plain offset is right). In B, k runs **down** the rows: 16 rows further is **+2048 bytes**.

# %%
print(" kk   desc_a              start A   desc_b              start B")
for kk, (da, db) in enumerate(wgmma.k_tile_descriptors(a_addr, b_addr)):
    print(f" {kk}   0x{da:016x}  {wgmma.fields(da)['address']:#7x}   0x{db:016x}  {wgmma.fields(db)['address']:#7x}")

# %% [markdown]
# ## The operands in shared memory, drawn from their descriptors
#
# The PTX ISA describes a wgmma operand in **core matrices** of 8 rows x 16 bytes (8 bf16). In A (K-major) a
# core matrix row is 8 consecutive k of one row m; in B (MN-major) it is 8 consecutive n of one k. A 64 x 16
# slice of A is 8 x 2 core matrices, a 16 x 128 slice of B is 2 x 16. The descriptor places them: the next
# 8 rows are SBO bytes on, the next group in the other direction either the next 16-byte chunk (fixed by the
# layout) or LBO bytes on, and the swizzle then XORs the chunk's position with the line's number, as TMA did
# when it wrote the tile ([the canonical layouts](https://docs.nvidia.com/cuda/parallel-thread-execution/index.html#asynchronous-warpgroup-level-matrix-shared-memory-layout)).
#
# Below, `pictures.stage_image` fills one stage the way the kernel's thread 0 does (the TMA model of
# `cudabook.tma` on this rung's own tensor maps: A's box, then B's boxes one after another), and
# `pictures.operand_addresses` follows the descriptors of step `kk = 0` to the byte of every element. Each
# 16-byte chunk is coloured by the core matrix read there and labelled with its first element:

# %%
stage = pictures.stage_image(64 * s05.PARAMS["warpgroups"], s05.PARAMS["bn"])
derived = pictures.derive_strides(stage)
pictures.draw_operands(stage, derived)
plt.show()

# %% [markdown]
# In A (left) a line is one row m. Row `r`'s chunk of k 0-7 sits at position `0 XOR (r % 8)`, its chunk of
# k 8-15 at `1 XOR (r % 8)`: the staircase is the swizzle. The second k half is always the next chunk before
# the swizzle, so a swizzled K-major operand needs no LBO. In B (right) a line is one k and 64 n; a core
# matrix is one chunk in 8 consecutive lines, and its 8 lines again sit at XORed positions. Columns 64-127
# are in the second box: that jump is LBO. In both, the next 8 rows are 8 lines (SBO) down, and step `kk = 1`
# reads the grey chunks marked 1: 32 bytes along A's lines, 16 lines down B's.
#
# ## LBO and SBO, derived
#
# Measured on the TMA image, from the first element of core matrix (0, 0) to the first element of the next
# one in each direction (rows 0, 8 and 16 are lines the swizzle leaves in place, so these are plain
# distances):
#
# - SBO: from row 0 to row 8 (A: m, B: k) = 8 lines of 128 bytes;
# - B's LBO: from column 0 to column 64. A 128-byte swizzle span holds 64 bf16, so a box of B is 64 n wide and
#   `BK` k-rows deep, a separate swizzled block of `BK` lines; the kernel places the next box right after it,
#   so column 64 starts `BK` x 128 bytes on;
# - the k16 steps: from k 0 to k 16, along A's line and down B's lines.
#
# The kernel's values, read from its source (`smem_desc(...)` and its `constexpr`s), must be these, and every
# element of every k16 step of both warpgroups must come out where the wgmma needs it:

# %%
kernel = pictures.kernel_strides(s05.source(), **s05.config())
for op in "AB":
    print(f"{op}: derived from the TMA layout {derived[op]}")
    print(f"   passed to smem_desc by the kernel {kernel[op]}")
assert all(derived["B"][f] == kernel["B"][f] for f in ("lbo", "sbo", "k16_step"))
assert all(derived["A"][f] == kernel["A"][f] for f in ("sbo", "k16_step"))
assert derived["B"]["lbo"] == stage.b_box_bytes == kernel["constants"]["B_BOX_BYTES"]
assert (wgmma.B_MN_MAJOR["lbo"], wgmma.B_MN_MAJOR["sbo"], wgmma.K16_STEP_B) == \
    (derived["B"]["lbo"], derived["B"]["sbo"], derived["B"]["k16_step"])
assert (wgmma.A_K_MAJOR["sbo"], wgmma.K16_STEP_A) == (derived["A"]["sbo"], derived["A"]["k16_step"])
def verdict(stage, strides):
    r = pictures.check_descriptors(stage, strides)
    return f"{r['read']} elements read, {r['A']} wrong in A, {r['B']} wrong in B"
print("through the kernel's descriptors:", verdict(stage, kernel))

# %% [markdown]
# And wrong values? With A's LBO (16) in B's descriptor, columns 64-127 are read from the wrong place. With a
# tile only 64 wide (`bn=64`, one box) nothing reads past column 63, and B's LBO goes unused: any value works
# there, which is why a one-box test cannot catch a wrong LBO.

# %%
wrong = {**kernel, "B": {**kernel["B"], "lbo": kernel["A"]["lbo"]}}
print(f"bn = {stage.bn}, B's LBO = {wrong['B']['lbo']}:", verdict(stage, wrong))
narrow = pictures.stage_image(64 * s05.PARAMS["warpgroups"], 64)
print(f"bn = {narrow.bn},  B's LBO = {wrong['B']['lbo']}:", verdict(narrow, wrong))

# %% [markdown]
# ## The k-tile in the kernel
#
# This is the heart of the stage (and of lab 05): a warpgroup's four wgmmas on stage `s`. `wgmma_fence()`
# orders the accumulator registers with the asynchronous tensor cores; `commit` closes the group; `wait<0>`
# blocks until it has finished, after which the stage may be refilled. The `1` in `mma<1>` is the transpose
# flag of B (MN-major).

# %%
lesson.show_region(s05.source(), context=3)

# %% [markdown]
# ## In SASS
#
# No GPU needed: the cubin for sm_90a shows the Hopper instructions. `HGMMA.64x128x16.F32.BF16 ... gdesc ...
# tnspB` is the wgmma (descriptor operands, B transposed), `UTMALDG.2D` the TMA loads, `SYNCS` the mbarrier
# operations, `WARPGROUP.ARRIVE`/`DEPBAR` the fence and the wait.

# %%
cubin = s05.compile_cubin()
for pattern in ("HGMMA", "UTMALDG", "SYNCS", "WARPGROUP"):
    found = nvrtc.sass_lines(cubin, pattern, kernel=s05.KERNEL)
    print(f"{pattern:10s} x{len(found):<3} e.g. {found[0] if found else '(none)'}")
print(nvrtc.resource_usage(cubin)[s05.KERNEL])

# %% [markdown]
# ## Right?

# %%
why = gemm.unavailable("05_wgmma_tma")
if why:
    print("Not run here:", why)
else:
    for M, N, K in ((1, 1, 1), (129, 257, 72), (100, 200, 7), (1000, 1000, 1000)):
        a, b = gemm.random_problem(M, N, K)
        print(f"M={M} N={N} K={K}:", gemm.judge(gemm.run("05_wgmma_tma", a, b), a, b).message.splitlines()[0])

# %% [markdown]
# ## How fast?
#
# Rungs 04 and 05 measured against cuBLAS in the same process, the earlier rungs from this card's record (‡);
# without a Hopper GPU, the records in `results/`. Look at
# what this version still does badly. The copies are not the problem: `STAGES - 1` k-tiles are in flight
# while one is multiplied. The tensor cores are: at every k-tile each warpgroup stops at `wait<0>` until its
# wgmmas are done, then at `__syncthreads` until the *other* warpgroup's are done too, and only then do both
# issue the next four. Every k-tile the tensor cores run dry, and both warpgroups refill them at the same
# moment; thread 0, a consumer like the others, also issues the refill in between. Rung 06 gives the copies
# to a warpgroup of their own and replaces the block-wide barrier with per-stage mbarriers.

# %%
gemm.ladder_so_far("05_wgmma_tma", peers=True)

# %% [markdown]
# ## One block, measured
#
# The paragraph above reasons about the schedule; here it is measured. `tools/probe_stamps.py` compiles a copy
# of this kernel with a stamp at each point `s05.STAMPS` names (`cudabook.kit.stamps`; the file itself is not
# changed, and the copy's result is checked). In one block, the first thread of each warpgroup writes the SM's
# cycle counter at each point, and a warpgroup is in a state from the stamp that names it to its next stamp:
# *start* (from the block's first instruction: the mbarriers' set-up and, in warpgroup 0, thread 0 issuing the
# first stages), *wait full* (the wait for the stage's bytes), *mma* (its four wgmmas issued and waited for),
# *release* (the block-wide barrier), *issue* (from the barrier to the next k-tile's wait: thread 0 refills the
# stage, and the loop steps on) and *epilogue* (from the last k-tile to the end: the stores). The first thread
# of warpgroup 0 is thread 0 itself, so its stamps include the refill; those of warpgroup 1 do not. The cell
# prints each warpgroup's share of its time in each state and draws the whole block, then its first
# microseconds.
#
# *mma* is under half of each warpgroup's time. At the start both wait for the first stages, which come from
# memory with nothing to overlap them; after that, every k-tile has the same stripes, the barrier's among them.
# One caution in reading it: *issue* is about as long in warpgroup 1, whose stamping thread issues nothing, as
# in warpgroup 0. So most of that stretch is not the refill. Part of it may be the stamps' own cost (the first
# line: the stamped kernel is slower than the plain one); after the picture, a second stamp measures that cost
# where it matters.

# %%
from cudabook import timeline

_ = timeline.show_stamps("gemm", "05_wgmma_tma", window_us=6)

# %% [markdown]
# **What *issue* is in warpgroup 1.** A stamp has a cost, and it can be measured: put a second stamp right
# before a point's own, with nothing between them, and the state from one to the other, *a stamp*, is what a
# stamp costs there (`tools/probe_stamps.py --twice issue`, a reading; `--thread` picks another thread of each
# warpgroup to stamp). Each state's median length over the k-tiles, in ns, without and with the twin stamp:

# %%
import json
import statistics

from cudabook import results


def state_medians(path):
    rd = json.loads(path.read_text())
    print(f"{rd['gpu']}, commit {rd['commit']}" + (f", a second stamp before '{rd['twice']}'" if rd.get("twice") else "")
          + f", thread {rd.get('thread', 0)} of each warpgroup stamping (warp {rd.get('thread', 0) // 32} of it)")
    for wg in rd["warpgroups"]:
        spans = {}
        for (label, t0), (_, t1) in zip(wg["events"], wg["events"][1:]):
            spans.setdefault(label, []).append(t1 - t0)
        print(f"   warpgroup {wg['warpgroup']}: " + ", ".join(f"{label} {statistics.median(v):,.0f}"
                                                           for label, v in spans.items() if label != "start"))


for pattern in ("stamps", "stamps_twice", "stamps_twice_thread*"):
    for path in sorted((results.RESULTS / "readings").glob(f"*_gemm_05_wgmma_tma_{pattern}.json")):
        state_medians(path)

# %% [markdown]
# In warpgroup 0 two stamps in a row cost a few tens of ns. In warpgroup 1, right after the block's barrier,
# the same two back-to-back stamps are several times as far apart, and what is left of *issue* after them
# (the loop's own instructions) is short. So most of warpgroup 1's *issue* is spent between two stamps with no
# kernel code between them: the stamping thread, just released from the barrier, waits before its next
# instruction completes. It is not the refill holding up a warp that shares warp 0's scheduler (on the common
# reading, which NVIDIA does not document, that an SM's four schedulers take warps by their number mod 4):
# other warps of warpgroup 1, which share a scheduler with warps that issue nothing, wait as long, and other
# warps of warpgroup 0 do not (the last two readings; there, with
# thread 0 no longer the one stamping, warpgroup 0's *issue* shrinks to the loop's own instructions, so its
# longer *issue* above was the refill). What warpgroup 1 waits for after the barrier is open. Either way, the
# stretch is not its own code.

# %% [markdown]
# ## Experiment
#
# The tile width `bn` (64, 128, 256) sets how many accumulators a thread holds (`bn / 2`) and how often A is
# reused; `stages` sets how many k-tiles are in flight. Try both.

# %%
gemm.sweep("05_wgmma_tma", "bn", [64, 128, 256])
gemm.sweep("05_wgmma_tma", "stages", [2, 3, 4])

# %% [markdown]
# The recorded sweeps hold two surprises: the default (`bn=128`, 4 stages) is not the best setting of either
# knob. Two stages run faster than four on both cards, and the widest tile beats the default by about ten points
# of cuBLAS. Count what each setting leaves room for on an SM (no GPU needed: the registers from the compiled
# cubin, the shared memory from the ring, the blocks by the occupancy rules in `cudabook.kit.occupancy`). The
# shared column is a block's whole claim on the SM: the ring, the 1 KiB the kernel keeps to align it to 1024
# bytes, its barriers, and the 1 KiB the system reserves for every block. The sm_90 cubin's own count of shared
# memory already holds that reserved KiB, so `occupancy.for_kernel` takes the cubin's count and the dynamic size
# and does not add it twice:

# %%
from cudabook.kit import occupancy

print(f"{'setting':12s} {'registers':>9s} {'shared KiB':>10s} {'blocks an SM':>12s}  limited by")
for setting in ({}, {"stages": 3}, {"stages": 2}, {"bn": 64}, {"bn": 256}):
    cfg = s05.config(**{**s05.PARAMS, **setting})
    usage = nvrtc.resource_usage(s05.compile_cubin(**setting))[s05.KERNEL]
    shared = s05.smem_bytes(cfg) + usage["shared"]     # the cubin's count holds the 1 KiB reserved a block
    o = occupancy.for_kernel(usage, 128 * cfg["WGS"], s05.smem_bytes(cfg))
    label = ", ".join(f"{k}={v}" for k, v in setting.items()) or "defaults"
    print(f"{label:12s} {usage['registers']:9d} {shared / 1024:10.1f} {o.blocks:12d}  {o.limit}")

# %% [markdown]
# The default's four stages of 32 KiB leave room for one block an SM. With three stages, shared memory and
# registers both allow two; with two stages, registers alone hold it at two. The H200's stage sweep fits that:
# two and three stages (two blocks) run about equally fast and well ahead of four (one block). With one block,
# every k-tile's drain (both warpgroups waiting at `wait<0>` and `__syncthreads`, as above) leaves the tensor
# cores idle; with two, the other block's wgmmas most likely fill that gap. The H100's sweep does not fit it:
# there only two stages gain, and three (also two blocks) take as long as four. Why is open. The wide tile keeps one block an SM, but each k-tile's
# wgmmas are twice as long (n = 256) for the same drain, and each k-slice of A read from shared memory feeds
# twice the columns. The narrow tile (`bn=64`) fits two blocks and is still the slowest: its wgmmas are short,
# and the drain weighs most. Rung 06 takes away what makes the drain so costly, the block-wide barrier: each
# consumer warpgroup still waits for its own wgmmas every k-tile, but no longer for the other's, so one can issue
# while the other drains. It uses `bn=256`.

# %% [markdown]
# ## Why wide tiles: shared-memory bytes against tensor time
#
# A wgmma reads both operands from shared memory. One `m64nNk16` reads A's 64 × 16 (2 KiB) and B's 16 × N
# (32·N bytes) and does 64·N·16 multiply-adds; shared memory hands out 128 bytes a cycle on each SM (one
# *wavefront*), and the tensor cores of an SM do 2,048 bf16 multiply-adds a cycle at their peak (4 tensor cores
# × 512: the H100 SXM's dense spec-sheet peak of 989 TFLOP/s is that on 132 SMs at 1.83 GHz). So at the tensor cores'
# full rate, the share of the
# shared-memory pipe the wgmmas need is
#
# wavefronts ÷ tensor cycles  =  ((2048 + 32·N) / 128) ÷ (64·N·16 / 2048)  =  (16 + N/4) / (N/2):
#
# 100 % at N = 64, 75 % at N = 128, 62.5 % at N = 256. A narrow tile's wgmmas would keep the shared-memory pipe
# as busy as the tensor cores, with nothing left for anything else that uses it (the epilogue's `stmatrix`
# does; whether TMA's writes into the stages do is not shown by these counters). Nsight
# Compute counts both sides (a reading: one launch each at 4096³, rung 05 at three widths and rung 07 at two):
# the wavefronts the wgmmas took, the bytes per wgmma, and each pipe's busy share of the elapsed cycles:

# %%
from cudabook import results


def smem_against_tensor():
    for stage in ("05_wgmma_tma", "07_clusters"):
        for rd in results.readings("gemm", stage, "smem"):
            print(f"{rd['gpu']}, commit {rd['commit']}, {rd['workload']}, rung {stage[:2]}:")
            for run in sorted(rd["runs"], key=lambda r: r["params"].get("bn", 256)):
                m, p = run["metrics"], run["params"]
                wgmmas = m["sm__inst_executed_pipe_tensor_op_gmma.sum"] / 4     # a wgmma is 4 warps' instruction
                shared = m["l1tex__data_pipe_lsu_wavefronts_mem_shared.avg.pct_of_peak_sustained_elapsed"]
                tensor = m["sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_elapsed"]
                label = ", ".join(f"{k}={v}" for k, v in p.items()) or "defaults"
                print(f"   {label:20s} {m['sm__sass_data_bytes_mem_shared_op_gmma.sum'] / wgmmas:7,.0f} B a wgmma;"
                      f" shared-memory pipe {shared:5.1f} % busy, tensor pipe {tensor:5.1f} %:"
                      f" {shared / tensor:.2f} wavefronts a tensor cycle")


smem_against_tensor()

# %% [markdown]
# The bytes a wgmma reads are exactly 2048 + 32·N, and the wavefronts per busy tensor cycle land on the
# arithmetic's ratios: about 1.0 at N = 64, 0.75 at N = 128, 0.63 at N = 256 (rung 07's a little above, its
# epilogue's `stmatrix` writes share the pipe). So the count holds, and it says why every later rung uses
# N = 256: rung 07 keeps its tensor cores busy about nine cycles in ten with the shared-memory pipe little more
# than half busy, while at N = 64 the same tensor share would need nine tenths of it. It is not the only reason a wide
# tile wins (it also reads fewer bytes from L2 per multiply-add, and rung 07 at N = 128 is held well below that
# share by more than shared memory), but it is the one that rules the narrow tile out.
