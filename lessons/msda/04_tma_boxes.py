# %% [markdown]
# # Deformable attention 04 · TMA boxes: one 2 x 2 x D copy per sample, zero fill for the borders
#
# A sample needs four pixels of one head: `(y0, x0)`, its right neighbour, and the two below. Viewed the right
# way, those four are **one box** of a 5-D tensor, and Hopper's Tensor Memory Accelerator copies a box from
# global to shared memory when one thread asks. Better still, a box that hangs over the edge of the tensor
# arrives with **zeros** in the part outside: exactly what `grid_sample(padding_mode="zeros")` reads there. The
# border tests of rungs 01 and 02 become the copy engine's zero fill.
#
# ```
#   producer warp (32 lanes)                               consumer warps 1..NCW (item k: warp 1 + k % NCW)
#   wait empty[s]                                          wait full[s]          (parity = lap % 2)
#   lane i: sample i's position and 4 weights -> slot s    blend each sample's 2 x 2 x D box with its weights
#           one 2 x 2 x D box if it touches the map          (lanes over the head's channels)
#   lane 0:     arrive.expect_tx(full[s], boxes x 8D B)    write the head's D outputs
#   lanes 1-31: arrive(full[s]) after their copies         arrive empty[s]
# ```
#
# PTX ISA: [cp.async.bulk.tensor](https://docs.nvidia.com/cuda/parallel-thread-execution/index.html#data-movement-and-conversion-instructions-cp-async-bulk-tensor),
# [the tiled mode: boxes and out-of-bound fill](https://docs.nvidia.com/cuda/parallel-thread-execution/index.html#tensor-tiled-mode),
# [mbarrier](https://docs.nvidia.com/cuda/parallel-thread-execution/index.html#parallel-synchronization-and-communication-instructions-mbarrier);
# driver API: [cuTensorMapEncodeTiled](https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__TENSOR__MEMORY.html).

# %%
import cudabook
print(cudabook.where())

import inspect
import numpy as np
import matplotlib.pyplot as plt
from matplotlib.patches import Rectangle
from cudabook import SIMULATOR, emulate, lesson, msda, nvrtc, tma
from cudabook.msda import benchmark, inputs
from cudabook.msda import s04_tma_boxes as s04

# %% [markdown]
# ## A sample is a box
#
# `value` is `[N, S, M, D]`, and level l is the rows `start_l .. start_l + H_l W_l` of each image, pixel by
# pixel, row by row. So level l *is* a 5-D tensor `[N, H_l, W_l, M, D]`, with strides (in bytes, bf16):
#
# | axis | size | stride |
# |---|---|---|
# | image n | N | `S M D 2` (the whole pyramid: the other levels lie in between) |
# | pixel row y | H_l | `W_l M D 2` |
# | pixel column x | W_l | `M D 2` |
# | head m | M | `D 2` |
# | channel | D | 2 |
#
# and a sample's four corners are the box `(1, 2, 2, 1, D)` at `(n, y0, x0, m, 0)`. One tensor map per level,
# because each level has its own H and W. A welcome side effect: the map's bounds are the level's, so a box
# hanging over a level's bottom edge gets zeros, never the next level's first pixels (which follow in memory).
#
# ## The tensor maps, checked first
#
# The stage builds them like this (`s04.level_maps`, run on a GPU with the real device address):

# %%
print(inspect.getsource(s04.level_maps))

# %% [markdown]
# Every description goes through `tma.check_tiled` (the driver's documented rules and the limits measured on
# H100 and H200) before the driver sees it. At the benchmark's size, with an example base address (device
# allocations are 256-byte aligned):

# %%
size = benchmark.WORKLOADS[0]
N, Lq, M, P, D, levels = (size[k] for k in ("N", "Lq", "M", "P", "D", "levels"))
S, L = sum(h * w for h, w in levels), len(levels)
base = 0x7F0000000000
maps = []
for l, ((H, W), start) in enumerate(zip(levels, inputs.level_starts(levels).tolist())):
    desc = dict(dtype="bfloat16", shape=(N, H, W, M, D), strides=(S * M * D * 2, W * M * D * 2, M * D * 2, D * 2, 2),
                box=(1, 2, 2, 1, D), address=base + start * M * D * 2, l2_promotion="128B")
    tma.check_tiled(**desc)
    maps.append(desc)
    print(f"level {l}: shape {desc['shape']}, address base + {start * M * D * 2:>10,} B, box {desc['box']}: accepted")
print()
for key, val in tma.driver_args(**maps[0]).items():     # what cuTensorMapEncodeTiled receives: innermost first
    print(f"{key:>16}: {val:#x}" if key == "globalAddress" else f"{key:>16}: {val}")

# %% [markdown]
# Why every rung of this track takes D as a multiple of 8: then a head's row is whole 16-byte pieces, so every
# stride above and every level's start address is a multiple of 16 bytes, as TMA requires, and the inner box
# (D bf16) is whole 16-byte chunks, as it also requires. At D = 4 the validator says what breaks:

# %%
try:
    tma.check_tiled("bfloat16", (N, 100, 116, M, 4), (S * M * 8, 116 * M * 8, M * 8, 8, 2), (1, 2, 2, 1, 4))
except tma.TensorMapError as e:
    print(f"[{e.rule}] {e}")

# %% [markdown]
# ## Zero fill standing in for the border test
#
# `tma.load_box` computes what a tiled load brings, from the same description (the CPU emulator fills every box
# with it). A level of 3 x 4 pixels, one head, D = 8, each pixel holding its number + 1; two boxes: one
# starting at `(y0, x0) = (-1, -1)` (a sample in the top-left corner, `px, py` in (-1, 0)) and one starting at
# the last column `x0 = 3` (a sample right of the last pixel centre).

# %%
H, W, D8 = 3, 4, 8
level = msda.to_bf16((np.arange(H * W, dtype=np.float32) + 1).reshape(1, H, W, 1, 1) * np.ones(D8))   # [1, H, W, 1, D]
boxes = {(-1, -1): "C3", (1, 3): "C0"}
fig, ax = plt.subplots(figsize=(6, 3.6))
for i in range(H):
    for j in range(W):
        ax.add_patch(Rectangle((j, i), 1, 1, fill=False, lw=0.8))
        ax.text(j + 0.5, i + 0.5, f"{i * W + j + 1}", ha="center", va="center", fontsize=9)
for (y0, x0), color in boxes.items():
    ax.add_patch(Rectangle((x0 + 0.08, y0 + 0.08), 1.84, 1.84, fill=False, lw=2, ec=color))
    got = tma.load_box(level, box=(1, 2, 2, 1, D8), coords=(0, y0, x0, 0, 0))[0, :, :, 0, 0].astype(np.float32)
    for dy in range(2):
        for dx in range(2):
            if not (0 <= y0 + dy < H and 0 <= x0 + dx < W):
                ax.text(x0 + dx + 0.5, y0 + dy + 0.5, "0", ha="center", va="center", color=color, fontsize=11)
    print(f"box at (y0, x0) = ({y0}, {x0}), channel 0 of its 2 x 2 pixels:\n{got}")
ax.set_xlim(-1.2, W + 1.2); ax.set_ylim(H + 0.2, -1.2); ax.set_aspect("equal")
ax.set_title("two 2 x 2 boxes: the part outside the level arrives as zeros", fontsize=9)
plt.show()

# %% [markdown]
# The bytes count the same either way: every box delivers all its `8 D` bytes (zeros included) to the mbarrier,
# so the producer's `expect_tx` is simply `boxes x 8 D`. Blending the zero-filled box with the four ordinary
# bilinear weights gives exactly what the reference computes with its corner tests:

# %%
x, y = 0.05, 0.1                                        # normalized: near the top-left corner
px, py = x * W - 0.5, y * H - 0.5
x0, y0 = int(np.floor(px)), int(np.floor(py))
fx, fy = px - x0, py - y0
box = tma.load_box(level, box=(1, 2, 2, 1, D8), coords=(0, y0, x0, 0, 0))[0, :, :, 0, :].astype(np.float64)
blend = (1 - fy) * (1 - fx) * box[0, 0] + (1 - fy) * fx * box[0, 1] + fy * (1 - fx) * box[1, 0] + fy * fx * box[1, 1]
one = (level.reshape(1, H * W, 1, D8), np.array([[H, W]]), np.array([0]),
       np.array([x, y], np.float32).reshape(1, 1, 1, 1, 1, 2), np.ones((1, 1, 1, 1, 1), np.float32))
print(f"(px, py) = ({px:.2f}, {py:.2f}): box at ({y0}, {x0}); blended box {blend[0]:.4f}, "
      f"reference {msda.reference(*one)[0, 0, 0]:.4f}")

# %% [markdown]
# One test remains, in the producer: a sample at `x <= -1` or `x >= W` (likewise y), half a pixel or more past
# the map's edge, gets no box at all. Its box would add nothing (all zeros, or at `x = -1` exactly a column 0
# whose weight `fx` is 0), and far outside its corner would overflow an integer.
#
# ## The kernel: a ring of slots
#
# A block has one **producer** warp and `NCW` **consumer** warps sharing a ring of `NCW x depth` slots in
# shared memory; a slot holds one work item (one image, query, head): its L·P boxes, 128-byte aligned, and a
# float4 of weights per sample. Two mbarriers per slot: `full` (the producer's 32 lanes arrive, and lane 0's
# `expect_tx` makes it also wait for the bytes) and `empty` (one lane of the slot's consumer warp arrives when
# it is done). The phase parity a waiter passes is the lap around the ring, `(k / STAGES) & 1`. The producer
# waits on `empty` with the opposite parity (`^ 1`), which a fresh barrier passes at once: on its first lap
# every slot is free.

# %%
lesson.show_region(s04.source(), start="------ producer", end="if (lane != 0) mbar_arrive(full);")

# %% [markdown]
# The region between `>>> lab` and `<<< lab` markers in the file (here printed without them) is lab 04's: lane
# 0's expect_tx of the bytes all the boxes bring, the boxes themselves, and the other lanes' arrivals. The box's
# coordinates go to `tma_load_5d` **innermost first**: channel 0, head m, column x0, row y0, image n. The
# consumers:

# %%
lesson.show_region(s04.source(), start="------ consumers", end="if (lane == 0) mbar_arrive(empty0")

# %% [markdown]
# Each consumer lane reads the same 32-bit word (two channels) from the four corners of a box, which the box
# holds one after another: `box[j]`, `box[W2 + j]`, `box[2 W2 + j]`, `box[3 W2 + j]` with `W2 = D / 2` words
# a pixel. With D = 32 a head is 16 words, so a warp's 32 lanes split into two groups that take alternate
# samples, and a shuffle adds the two halves at the end.
#
# The shared memory a block needs, at the benchmark's size and the default parameters:

# %%
cfg = s04.config(D, L, P)
box_bytes = 8 * D
print(f"a box: 2 x 2 x {D} bf16 = {box_bytes} B; an item: L x P = {L * P} boxes = {L * P * box_bytes:,} B")
print(f"ring: {cfg['NCW']} consumer warps x depth {cfg['DEPTH']} = {cfg['NCW'] * cfg['DEPTH']} slots, "
      f"{s04.smem_bytes(cfg):,} B of shared memory a block")

# %% [markdown]
# ## In SASS
#
# No GPU needed: the cubin for sm_90a shows one `UTMALDG.5D` (the TMA load of a 5-D box) and the `SYNCS`
# mbarrier operations, and no local memory.

# %%
cubin = s04.compile_cubin(D=D, L=L, P=P)
for pattern in ("UTMALDG", "SYNCS"):
    found = nvrtc.sass_lines(cubin, pattern, kernel=s04.KERNEL)
    print(f"{pattern:8s} x{len(found):<3} e.g. {found[0] if found else '(none)'}")
print(nvrtc.resource_usage(cubin)[s04.KERNEL])

# %% [markdown]
# ## Is it right?
#
# On a Hopper GPU the stage runs for real. Without one, `cudabook.emulate` runs the same C++ on the CPU: every
# CUDA thread a small coroutine, every box filled by `tma.load_box`, the mbarriers' arrivals and bytes counted.
# It runs each case twice: with the copies landing as late as the waits allow, and as early as they could.

# %%
def emulated(args, landing):
    p = msda.upload(*args)
    p.poison()
    with emulate.emulating(landing):
        s04.launch(p)
    return msda.judge(p.result(), *args).message


why = msda.unavailable("04_tma_boxes")
if why and not SIMULATOR:
    print(f"Not run here: {why}. (The CPU emulator works on host memory, where Numba runs in its simulator: "
          f"set CUDABOOK_SIMULATOR=1 before `import cudabook` to use it.)")
else:
    try:
        for name, kw in msda.cases():
            args = msda.random_problem(**kw)
            if not why:
                print(f"{name:28s}", msda.judge(msda.run("04_tma_boxes", *args), *args).message)
                continue
            for landing in ("lazy", "eager"):
                print(f"{name:28s} emulated, copies {landing:5s}:", emulated(args, landing))
    except emulate.HostCompilerMissing as e:
        print("Not emulated:", e)

# %% [markdown]
# ## What a 256-byte box costs
#
# At D = 32 a box is 256 bytes, and in global memory it is not even contiguous: four pieces of 64 bytes (the
# pixel to the right is `M D 2` bytes further, the row below `W M D 2`). Every box is one
# `cp.async.bulk.tensor` instruction, and every one is handled by the **SM's TMA unit**: it reads the
# descriptor, works out the box's addresses, sends the requests for its pieces, writes them to shared memory
# and completes their bytes on the mbarrier. Part of that work is per box, whatever its size: in the GEMM track,
# at its default tiles, a box of B is 8 KiB (64 rows x 128 bytes) and a box of A 16 KiB (128 rows x 128 bytes),
# so the per-box part is spread over 32 to 64 times more data than here.
#
# So one question is a rate, not a bandwidth. If each SM's TMA unit can start one box every `t` nanoseconds,
# the kernel cannot take less than `boxes x t / SMs`, however fast memory is. Rung 02 reads the same corners
# with ordinary loads: one warp-wide 16-byte load fetches one corner for each of 8 heads (eight 64-byte pieces,
# each where its own head's sample lies: 512 bytes, twice a box), and the loads of all the warps on an SM are in
# flight side by side. The records give both sides at the
# benchmark's size: the time per sample that rung 04 achieved on each SM, against the reference gather (the
# corners loaded, no arithmetic) and rung 02. (Samples with all four corners off the map get no box, so the samples are an upper
# bound on the boxes.)

# %%
from cudabook import results

shown = False
for record in results.load_all():
    for name, w in record["workloads"].items():
        stages = w.get("stages", {})
        if not name.startswith("msda ") or "median_us" not in stages.get("04_tma_boxes", {}):
            continue
        shown = True
        sz, machine = w["size"], (w.get("machine") or record.get("machine") or {})
        sms = machine.get("sms")
        samples = sz["N"] * sz["Lq"] * sz["M"] * len(sz["levels"]) * sz["P"]
        print(f"{record['gpu']} · {name}: {samples:,} samples of {8 * sz['D']} B, {sms} SMs")
        rows = [("reference gather", w.get("context", {}).get("gather_us"))]
        rows += [(s, stages[s].get("median_us")) for s in ("02_warp_cooperative", "04_tma_boxes") if s in stages]
        for what, us in rows:
            if us and sms:
                ns = us * 1e3 * sms / samples
                print(f"  {what:20s} {us:10,.0f} µs   {ns:5.2f} ns per sample per SM   "
                      f"{8 * sz['D'] / ns:6.1f} B/ns per SM")
if not shown:
    print("No record of rung 04 in results/ yet: it is measured on a Hopper GPU (`make bench TRACKS=msda`).")

# %% [markdown]
# Is rung 04's time a box the TMA unit's own rate? Measured apart, with nothing else in the kernel:
# `tools/probe_tma_rate.py` (its kernel is `tools/probe_tma_rate.cu`) gives each block one warp whose lanes
# issue boxes at random places of a tensor that fits in the L2, each lane keeping a few in flight, and nothing
# reads them. It tries several box shapes: one like this track's, four 64-byte pieces from four places, 256
# bytes in all (`32x4`: 4 rows of 32 bf16), one piece alone (`32x1`), 256 bytes as two 128-byte rows (`64x2`) or
# one contiguous row (`128x1`), 512 bytes as two 256-byte rows (`128x2`), and the GEMM track's 8 KiB box; and for
# each, 1 to 32 issuing lanes a block and 1 to 32 blocks an SM (a setting whose blocks
# do not all fit on an SM at once is refused, not timed). Below, for each shape, its fastest setting, in
# nanoseconds a box an SM by the wall clock (and in SM cycles by the blocks' own `clock64`), and rung 04's time
# a sample an SM on the same card. Three outcomes were possible: the probe's `32x4` near rung 04 (the unit is
# rung 04's limit), far faster (the limit is elsewhere in rung 04), or slower (the probe never reached the
# unit's limit, and rung 04 shows a rate the probe could not).

# %%
rates = results.readings("msda", "04_tma_boxes", "tma_rate")
for rd in rates:
    where = "in the L2" if rd["span"] == "l2" else "in DRAM"
    print(f"{rd['gpu']} · commit {rd['commit']} · NVRTC {rd['nvrtc']} · a tensor of {rd['tensor'][0]} x "
          f"{rd['tensor'][1]} bf16 ({where}) · {len(rd['runs'])} settings, "
          f"{sum('error' in run for run in rd['runs'])} refused")
    fastest = {}
    for run in rd["runs"]:
        if "ns_per_box_per_sm" in run and run["ns_per_box_per_sm"] < fastest.get(run["box"], {}).get(
                "ns_per_box_per_sm", float("inf")):
            fastest[run["box"]] = run
    for box, run in fastest.items():
        print(f"  box {box:>6s} ({run['box_bytes']:5,d} B): {run['ns_per_box_per_sm']:7.2f} ns a box an SM "
              f"({run['block_cycles_per_box_per_sm']:6.1f} cycles), {run['issuers']:2d} lanes x {run['ring']} in "
              f"flight, {run['per_sm']:2d} blocks an SM")
    for record in results.load_all():
        if record["gpu"] != rd["gpu"]:
            continue
        for name, w in record["workloads"].items():
            us = w.get("stages", {}).get("04_tma_boxes", {}).get("median_us")
            sms = (w.get("machine") or record.get("machine") or {}).get("sms")
            if name.startswith("msda ") and us and sms:
                sz = w["size"]
                samples = sz["N"] * sz["Lq"] * sz["M"] * len(sz["levels"]) * sz["P"]
                print(f"  rung 04, {sz['locations']} locations: {us * 1e3 * sms / samples:6.2f} ns a sample an SM "
                      f"(at most one box a sample)")
if not rates:
    print("No reading yet: on a Hopper GPU, `python tools/probe_tma_rate.py` measures it.")

# %% [markdown]
# On the H200 it came out the third way: no setting of the probe moved a `32x4` box as fast as rung 04 moves a
# sample, though both boxes bring the same bytes as four 64-byte pieces (rung 04's through a 5-D map, its pieces
# one pixel (`M D 2` bytes) or one pixel row (`W M D 2` bytes) apart; the probe's through a 2-D map, its four rows
# one tensor row, 4 KiB, apart). So the probe does not show
# rung 04 at the unit's limit, and what holds the probe's own boxes back is not settled by it (candidates: the
# round trip, which grows as more boxes queue; places spread over the whole L2, where rung 04's neighbouring
# samples share lines; fewer boxes in flight an SM than rung 04 keeps, each of its slots asking for the boxes of
# all of an item's samples at once). Two things it does show. Beyond a single
# 64-byte piece, the cost is per box, not per byte: 256 and 512 bytes cost about the same, and only the 8 KiB
# box is slowed by its bytes. And a box is dear: rung 04's own rate, whatever unit sets it, is the price of
# every sample a one-box-a-sample kernel loads; rung 05 goes further by loading corners with plain 16-byte
# loads, spread over lanes, with no boxes at all.

# %% [markdown]
# ## The original plan's tensor map, through the validator
#
# The plan this track grew from wanted exactly these boxes: 2 x 2 x 32 tiles of a `[Batch][Height][Width]
# [Channels]` tensor (100 x 100 x 32 in its example), loaded by TMA. It never got past the first call:
# `cuTensorMapEncodeTiled` answered `CUDA_ERROR_INVALID_VALUE` on an SM 12.0 GPU, "even for simple 1-D cases",
# and the notes it left do not include the host code. We cannot know which rule it broke; we can walk the
# plausible descriptions through `check_tiled` and see which ones the driver refuses, and why.

# %%
B, Hs, Ws, C = 48, 100, 100, 32


def verdict(**kw):
    try:
        tma.check_tiled(**kw)
        return "accepted"
    except tma.TensorMapError as e:
        return f"[{e.rule}] {e}"


attempts = [
    ("as planned, fp32 [B, H, W, C], box (1, 2, 2, 32)",
     dict(dtype="float32", shape=(B, Hs, Ws, C), strides=(Hs * Ws * C * 4, Ws * C * 4, C * 4, 4), box=(1, 2, 2, C))),
    ("the lists handed over outermost first (the driver reads innermost first)",
     dict(dtype="float32", shape=(C, Ws, Hs, B), strides=(C * 4, Ws * C * 4, Hs * Ws * C * 4, 4), box=(C, 2, 2, 1))),
    ("all four strides given, the innermost too (the driver takes the first three)",
     dict(dtype="float32", shape=(B, Hs, Ws, C), strides=(Ws * C * 4, C * 4, 4, 4), box=(1, 2, 2, C))),
    ("one map for everything: [B, H, W, heads, groups of 8 channels, 8]",
     dict(dtype="bfloat16", shape=(B, Hs, Ws, 8, 4, 8), strides=(Hs * Ws * 512, Ws * 512, 512, 64, 16, 2),
          box=(1, 2, 2, 1, 4, 8))),
    ("a map starting 8 bytes into the allocation (a sub-tensor)",
     dict(dtype="float32", shape=(B, Hs, Ws, C), strides=(Hs * Ws * C * 4, Ws * C * 4, C * 4, 4), box=(1, 2, 2, C),
          address=base + 8)),
    ("4 channels per box: a 2 x 2 x 4 bf16 tile",
     dict(dtype="bfloat16", shape=(B, Hs, Ws, C), strides=(Hs * Ws * C * 2, Ws * C * 2, C * 2, 2), box=(1, 2, 2, 4))),
]
for what, kw in attempts:
    print(f"{what}:\n  {verdict(**kw)}\n")

# %% [markdown]
# The second and third are the classic slips: `cuTensorMapEncodeTiled` wants every list **innermost first**
# and only `rank - 1` strides, while C++ arrays run outermost first. The plan's copy had the same trap: it
# wrote the box coordinates `{y, x, c}`, where PTX wants them innermost first too, `{c, x, y}` (that would not
# have failed the encode; it would have loaded the wrong box). And "even 1-D failed" has a candidate of its
# own: a rank-1 map has no stride to give, but the driver rejected an empty (NULL) stride list on an H100; the
# workbook's `driver_args` passes one dummy stride, which the driver ignores, for exactly that reason:

# %%
print(tma.driver_args("float32", (1000,), (4,), (256,))["globalStrides"], "<- one stride for a rank-1 map")

# %% [markdown]
# **Which rules depend on the GPU?** The documented ones (rank 1 to 5, a 16-byte aligned address, strides
# multiples of 16 bytes and below 2^40, box sides 1 to 256, the inner box whole 16-byte chunks, the swizzle
# span, element strides 1 to 8, NaN fill only for floats) are the driver API's contract for every GPU of compute
# capability 9.0 and up, SM 12.0 included, with no exception by architecture. What the validator adds from
# measurement is narrower, and some of it may differ on another GPU or driver (see `cudabook/tma/` (`validator.py`, `cases.py`), its
# `CASES`, `PROBES` and comments):
#
# - the **total box size**: the driver on H100 and H200 rejected a 256 KiB box and accepted 228 KiB; the
#   validator stops at 227 KiB, the most shared memory a Hopper block can have. A GPU with less shared memory
#   may draw that line elsewhere.
# - **documented, not enforced**: 32-byte interleave without the 32-byte swizzle is forbidden by the
#   documentation and was accepted by the H100's driver; the validator accepts it too, but another driver may
#   not.
# - the **probes**: descriptions on which the documentation is silent or which the validator only guesses.
#   `tools/record_tma_verdicts.py` asks a GPU's driver about each and records the answers in `results/`; a
#   CPU test then checks `check_tiled` against those recorded verdicts. Where the two disagree below, the
#   validator is stricter than that driver (for the 228 KiB box: on purpose).

# %%
import json

recorded = results.RESULTS / "tma" / "driver_verdicts.json"
verdicts = json.loads(recorded.read_text()) if recorded.exists() else {"probes": {}}
if "gpu" in verdicts:
    print(f"the driver's verdicts recorded on: {verdicts['gpu']} (CUDA {verdicts['driver']})\n")
print(f"{'probe':64s} {'check_tiled':32s} the driver")
for description, kw, guess in tma.PROBES:
    ours = f"rejects ({guess})" if guess else "accepts"
    print(f"{description:64s} {ours:32s} {verdicts['probes'].get(description, 'not recorded')}")

# %% [markdown]
# None of the documented rules changes between Hopper and SM 12.0, and every description the plan tried was
# refused, 1-D included: that points at something all its calls shared (the order of the lists, the stride
# list, the address) more than at one box shape or at the architecture. Whatever it was, in front of the
# driver a validator turns it into a sentence.
#
# ## How fast?
#
# The ladder so far against the copy ceiling, the reference gather and PyTorch. On a Hopper GPU, rungs 03 and
# 04, the copy ceiling, the reference gather and PyTorch eager are measured now; rungs 01 and 02 and
# `torch.compile` come from this card's record (‡). Otherwise: the records in `results/`, or a note that there
# are none yet. Read rung 04 against rung 02 with the box-rate numbers above in mind, then with the profile
# after it, which counts the bytes.

# %%
record = msda.ladder_so_far("04_tma_boxes", peers=True)

# %% [markdown]
# ## What the profile counts
#
# Nsight Compute's DRAM bytes and L2 hit rate for rungs 02 and 04 (the profile recorded for this card in
# `results/profiles/`, the `local` workload; on a GPU with ncu and no record for today's code, measured now):

# %%
from cudabook import profile

prof = profile.show("msda", "02_warp_cooperative", "04_tma_boxes")
copy = next((w["context"]["copy_GBps"] for r in results.load_all() if prof and r.get("gpu") == prof.gpu
             for name, w in r["workloads"].items()
             if name.startswith("msda ") and name.endswith(" local") and w.get("context", {}).get("copy_GBps")),
            None)                   # this card's copy ceiling for the `local` workload, from its benchmark record
for stage in ("02_warp_cooperative", "04_tma_boxes"):
    k = prof.kernel(stage) if prof else None
    if k and k["dram_read_MB"] and k["dram_MB"]:
        print(f"{stage}: {k['dram_read_MB'] / 1e3:.1f} GB read from DRAM, L2 hit rate {k['l2_hit_pct']:.0f} %"
              + (f"; its DRAM bytes at the card's copy ceiling ({copy:,.0f} GB/s) take "
                 f"{k['dram_MB'] / copy * 1e3:,.0f} µs of its {k['duration_us']:,.0f} µs" if copy else ""))

# %% [markdown]
# Read the two lines. The corners are the same for both rungs, yet rung 04 reads about ten times the bytes from
# DRAM that rung 02 reads, and its L2 hit rate is far lower. A likely cause: each block takes one contiguous run
# of the items (`first` and `last` in the kernel), so the blocks resident at one moment work at places far apart
# in the problem, spread over all the images, and the reuse the `local` workload offers in L2 (neighbouring
# queries sampling the same pixels) is lost. Rung 02's warps take the items in order, side by side.
#
# Do not conclude yet that these bytes are what makes rung 04 slow. The last number on each line is the time its
# DRAM traffic would take at the copy ceiling: a large share of rung 04's run, but a share is not a cause. A
# kernel can move many bytes and still wait mostly on something else. Only an experiment that removes the bytes
# and times the kernel answers it: `strided=True` (the last sweep below) gives block b the items b, b + blocks,
# b + 2 blocks, ..., so the blocks resident at one moment work on neighbouring items, as rung 02's warps do.

# %% [markdown]
# ## Experiments: consumers, ring depth, blocks an SM and the item order
#
# `consumer_warps` sets how many warps blend while one produces; `depth` how many items each consumer warp has
# in flight; `blocks_per_sm` limits how many blocks share an SM (0: as many as fit); `strided` is the item
# order of the profile's question. Prediction to test: if the SM's TMA unit is the bottleneck, none of the
# first three changes much, because the boxes arrive no faster. (Without a Hopper GPU there is nothing to time:
# the sweeps show the records.)

# %%
msda.sweep("04_tma_boxes", "consumer_warps", [1, 2, 4, 8])
msda.sweep("04_tma_boxes", "depth", [1, 2, 4])
msda.sweep("04_tma_boxes", "blocks_per_sm", [1, 2, 4, 8, 0])
msda.sweep("04_tma_boxes", "strided", [False, True])

# %% [markdown]
# ## The item order: the bytes go, the time stays
#
# The profile of `strided=True`, as recorded on a card (a variant's profiles are kept in
# `results/profiles/variants/`), then the two side by side:

# %%
strided = profile.show("msda", "04_tma_boxes", strided=True, live=False)
base = profile.recorded("msda", "04_tma_boxes", gpu=strided.gpu) if strided else None
if strided and base and base.gpu == strided.gpu:
    a, b = base.kernel("04_tma_boxes"), strided.kernel("04_tma_boxes")
    print(f"{strided.gpu}, rung 04 under ncu: contiguous runs {a['dram_read_MB'] / 1e3:.1f} GB read from DRAM, "
          f"L2 hit rate {a['l2_hit_pct']:.0f} %, {a['duration_us']:,.0f} µs; strided {b['dram_read_MB'] / 1e3:.1f} GB, "
          f"{b['l2_hit_pct']:.0f} %, {b['duration_us']:,.0f} µs ({(1 - b['duration_us'] / a['duration_us']) * 100:.0f} % "
          f"less time for {(1 - b['dram_read_MB'] / a['dram_read_MB']) * 100:.0f} % fewer DRAM bytes)")
for e in lesson.recorded_sweeps("msda", "04_tma_boxes", "strided"):
    t = {r["value"]: r["median_us"] for r in e["rows"] if "median_us" in r}
    if False in t and True in t:
        print(f"{e['gpu']}, the `strided` sweep (commit {e.get('commit')}): {t[False]:,.0f} µs in contiguous runs, "
              f"{t[True]:,.0f} µs strided")

# %% [markdown]
# The guess about the cause was right: in the strided order the DRAM bytes fall several-fold (still above rung
# 02's) and the L2 hit rate comes back to rung 02's. The guess that they cost the time was wrong: on the card
# recorded, the run is only a few percent shorter. DRAM was busy, not the bottleneck. The stall column still says
# the warps wait mostly in `long_scoreboard` (global loads, here the producer's; perhaps also the consumers' waits on their
# slots' barriers, which this workbook has not checked), but not which warps matter; the `blocks_per_sm` sweep
# below says which.
#
# The recorded `blocks_per_sm` sweeps, read against one block an SM, and that one block's time shared out over
# the items each SM's producer works through:

# %%
lesson.recorded_against("msda", "04_tma_boxes", "blocks_per_sm", 1)
for e in lesson.recorded_sweeps("msda", "04_tma_boxes", "blocks_per_sm"):
    one = next((r["median_us"] for r in e["rows"] if r["value"] == 1 and "median_us" in r), None)
    sz, sms = e.get("size_used") or {}, (e.get("machine") or {}).get("sms")
    if one and sms and sz:
        items = sz["N"] * sz["Lq"] * sz["M"]
        print(f"{e['gpu']}: {one:,.0f} µs at 1 block an SM, {items / 1e6:.1f} M items over {sms} SMs = "
              f"{items / sms:,.0f} a producer: {one / (items / sms):.1f} µs an item")

# %% [markdown]
# The recorded sweep refutes the prediction. With the blocks an SM capped, the time about halves from 1 block
# to 2 and from 2 to 4, and falls again from 4 to 8: **the limit is in each block**, not in the SM's TMA unit,
# which would not care how many blocks ask. Which part of a block? At 3 blocks an SM, 2 consumer warps 4 deep
# and 8 consumer warps 1 deep take the same time, so not the consumers: the producer. Shared out over the items
# each SM's producer works through, the 1-block time comes to the couple of microseconds an item printed above.
# A producer does one item at a time: it waits for the item's positions and weights to come from memory,
# computes, and only then do its lanes issue the boxes. Nothing of the next item overlaps that wait.
#
# Read the other two sweeps through shared memory. More consumer warps or a deeper ring add slots, and slots
# are what a block's shared memory holds (the ring printed above), so fewer blocks fit on an SM, and there are
# fewer producers. On an H100 or an H200 alike, 2 slots a block let 12 blocks share an SM, 4 slots 6, and 8
# slots 3. That is why this rung's first setting, 4 consumers x 2 deep (8 slots, as in the 8-consumer row), was
# slower on `local` than the default it has now, 2 consumers 1 deep: 33.3 ms on the H100 in one `make bench` run
# at commit 7525d0a (a reading: that record has been replaced, and is not in results/ now), more than twice what
# rung 04 takes today. One consumer warp 1 deep is slower again (only slightly on the H200) for another reason: a
# ring of one slot, so the producer waits for every item's blend before it starts the next.
#
# Even so, rung 04 at its defaults does not beat rung 02's plain loads (the box-rate cell above prints both):
# level with them on `local` on the H200, behind on the H100, and behind on `uniform` on both cards, far behind
# on the H100. (In the strided order it edges a few percent ahead of rung 02 in the H200's sweeps, which were run
# minutes apart; the H100 has no strided sweep.) A producer that loads the next item's positions before it waits
# was tried on an H100 while this rung was tuned (scratch runs, not in results/): it ran faster where few blocks
# share an SM and no faster at the default, for a reason not measured.
# (The DRAM traffic, once the suspect, is ruled out on the H200 by the strided order above; on the H100, where
# this rung's DRAM runs far closer to its peak in the profile, the strided order has not been measured.) Rung 05
# takes another road and drops the copy engine altogether.

# %% [markdown]
# Announce the bytes and ask for the boxes yourself: [lab 04](../../labs/msda/04_tma_boxes.ipynb) (the
# completed version: [solution](../../solutions/msda/04_tma_boxes_SOLUTION.ipynb)). Back:
# [03 · shared tiles](03_smem_tiles.ipynb). Next: [05 · lane groups](05_lane_groups.ipynb), where plain loads,
# more of them in flight, beat every rung so far.
