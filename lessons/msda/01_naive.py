# %% [markdown]
# # Deformable attention 01 · Naive: one thread per output channel
#
# **The problem.** Multi-scale deformable attention is the sampling core of Deformable DETR. An image has been
# turned into a pyramid of L feature maps (levels), each `H_l x W_l` pixels with M heads of D channels. Each
# query does not look at every pixel: for every head it looks at **P points on each level**, at fractional
# positions the network predicted, reads each point by bilinear interpolation, and sums the L·P samples with
# attention weights:
#
# ```
#   out[n, q, m*D + d] = sum over l, p of  a[n, q, m, l, p] * bilinear(level l of value[n, :, m, d], loc[n, q, m, l, p])
# ```
#
# | array | shape | dtype |
# |---|---|---|
# | `value` | `[N, S, M, D]`, the L maps flattened one after the other (`S = sum H_l W_l`) | bf16 |
# | `spatial_shapes` | `[L, 2]`: each level's `(H, W)` | int |
# | `level_start_index` | `[L]`: the row of `value` where each level starts | int |
# | `sampling_locations` | `[N, Lq, M, L, P, 2]`: normalized `(x, y)` | float32 |
# | `attention_weights` | `[N, Lq, M, L, P]` | float32 |
# | output | `[N, Lq, M*D]` | bf16, summed in float32, rounded once (nearest even) |
#
# It is a **gather**: no arithmetic to speak of, and reads at places the data chose. The resampling track was a
# gather along one axis; this one is two-dimensional, on four maps, with borders.

# %%
import cudabook
print(cudabook.where())

import numpy as np
import matplotlib.pyplot as plt
from matplotlib.patches import Rectangle
from cudabook import SIMULATOR, msda
from cudabook.msda import benchmark, inputs

size = benchmark.WORKLOADS[0]
L = len(size["levels"])
print("the benchmark's size:", benchmark.workload_name(**size))
print(f"levels (H, W): {size['levels']};  S = Lq = {size['Lq']:,} (every pixel of the pyramid is a query)")
print(f"each (image, query, head) takes L x P = {L * size['P']} samples of D = {size['D']} channels")

# %% [markdown]
# ## One query's samples, drawn
#
# In the encoder every pixel of the pyramid is a query, and its points fall around its own position on every
# level. `random_problem(locations="local")` draws them that way: each query's reference point is its own
# pixel's centre, and each point adds an offset of about 2 pixels of the level it samples. The dots are one
# query's `P` points for one head, sized by their attention weight; the cross is the query's own position. The
# same normalized position lands on fewer, coarser pixels on each level down.

# %%
levels = size["levels"]
q = 40 * levels[0][1] + 60                         # the query at pixel (row 40, column 60) of level 0
demo = msda.random_problem(1, q + 1, 1, levels, size["P"], 8, rng=np.random.default_rng(1))
value, shapes, starts, loc, attn = demo
ref_x, ref_y = (60 + 0.5) / levels[0][1], (40 + 0.5) / levels[0][0]
fig, axes = plt.subplots(1, L, figsize=(12, 3.2), gridspec_kw={"width_ratios": [w for _, w in levels]})
for l, ((H, W), ax) in enumerate(zip(levels, axes)):
    img = value[0, starts[l]:starts[l] + H * W, 0, 0].astype(np.float32).reshape(H, W)
    ax.imshow(img, cmap="Greys", alpha=0.35, extent=(0, W, H, 0))
    x, y = loc[0, q, 0, l, :, 0] * W, loc[0, q, 0, l, :, 1] * H        # normalized -> map units
    ax.scatter(x, y, s=2000 * attn[0, q, 0, l], color="C3", zorder=3)
    ax.plot(ref_x * W, ref_y * H, "k+", ms=10)
    ax.set_xlim(0, W); ax.set_ylim(H, 0); ax.set_title(f"level {l}: {H} x {W}", fontsize=9)
    ax.tick_params(labelsize=7)
fig.suptitle(f"query {q}: its {size['P']} points on each level (one head)", fontsize=9)
plt.show()

# %% [markdown]
# ## The convention: grid_sample with align_corners=False
#
# A location `(x, y)` is **normalized**: `x = 0` is the left edge of the map and `x = 1` its right edge, so the
# centre of pixel `i` sits at `(i + 0.5) / W`. In pixel units the sample is at
#
# ```
#   px = x * W - 0.5,   py = y * H - 0.5        (pixel i's centre is px = i)
#   x0 = floor(px), y0 = floor(py),   fx = px - x0, fy = py - y0
#   sample = (1-fy)(1-fx) v[y0, x0] + (1-fy) fx v[y0, x0+1] + fy (1-fx) v[y0+1, x0] + fy fx v[y0+1, x0+1]
# ```
#
# This is PyTorch's `grid_sample(align_corners=False, padding_mode="zeros")`: a corner pixel **off the map
# reads as zero**. Near a border some of the four corners are off the map and simply drop out of the sum, so a
# sample fades to zero between the first pixel's centre (`px = 0`) and half a pixel outside the map's edge
# (`px = -1`), where all its weight is on corners off the map and it reads nothing. Below, a 3 x 4 map: sample
# A sits between four pixels; sample B is near the left edge, and its two left corners (pixel column -1) read
# zero.

# %%
def draw_map(ax, H=3, W=4):
    for i in range(H):
        for j in range(W):
            ax.add_patch(Rectangle((j, i), 1, 1, fill=False, lw=0.8))
            ax.plot(j + 0.5, i + 0.5, ".", color="0.5")
    ax.add_patch(Rectangle((-1, 0), 1, H, color="C3", alpha=0.08))       # the column just off the map
    ax.text(-0.5, H + 0.35, "off the map", ha="center", fontsize=7, color="C3")


def draw_sample(ax, x, y, H, W, name):
    px, py = x * W - 0.5, y * H - 0.5
    x0, y0 = int(np.floor(px)), int(np.floor(py))
    fx, fy = px - x0, py - y0
    ax.plot(x * W, y * H, "*", color="C0", ms=12, zorder=4)
    ax.text(x * W + 0.08, y * H - 0.12, name, color="C0", fontsize=9)
    for dy, wy in ((0, 1 - fy), (1, fy)):
        for dx, wx in ((0, 1 - fx), (1, fx)):
            cx, cy = x0 + dx, y0 + dy
            on = 0 <= cx < W and 0 <= cy < H
            ax.plot([x * W, cx + 0.5], [y * H, cy + 0.5], "-", color="C0" if on else "C3", lw=0.8)
            ax.plot(cx + 0.5, cy + 0.5, "o", ms=7, mfc="C0" if on else "none", mec="C0" if on else "C3")
            label = f"{wx * wy:.2f}" if on else f"{wx * wy:.2f} x 0"
            ax.text(cx + 0.55, cy + 0.72, label, fontsize=7, color="C0" if on else "C3")
    return px, py


H, W = 3, 4
fig, ax = plt.subplots(figsize=(6, 4))
draw_map(ax, H, W)
for name, x, y in (("A", 0.575, 0.45), ("B", 0.05, 0.6)):
    px, py = draw_sample(ax, x, y, H, W, name)
    print(f"sample {name}: (x, y) = ({x}, {y}) -> (px, py) = ({px:.2f}, {py:.2f})")
ax.set_xlim(-1.2, W + 0.2); ax.set_ylim(H + 0.6, -0.3); ax.set_aspect("equal")
ax.set_xticks(range(-1, W + 1)); ax.set_yticks(range(H + 1))
ax.set_title("pixel squares and centres; numbers: each corner's bilinear weight", fontsize=9)
plt.show()

# %% [markdown]
# The same convention in numbers. A 2 x 3 map whose pixels hold 1 to 6, sampled at a few telling places, by the
# float64 reference (`msda.reference`) and by this lesson's kernel:

# %%
H, W, D = 2, 3, 8
value = msda.to_bf16(np.repeat((np.arange(H * W) + 1.0)[None, :, None, None], D, axis=3))    # pixel k holds k + 1
places = [("centre of pixel (0, 0)", 0.5 / W, 0.5 / H), ("the left edge, at row 0", 0.0, 0.5 / H),
          ("the map's top-left corner", 0.0, 0.0), ("half a pixel past the edge", -0.5 / W, 0.5 / H),
          ("far outside", -0.3, 0.5), ("between four pixels", 0.5, 0.5)]
where = np.array([[x, y] for _, x, y in places], np.float32).reshape(1, len(places), 1, 1, 1, 2)
small = (value, np.array([[H, W]]), np.array([0]), where, np.ones((1, len(places), 1, 1, 1), np.float32))
ref, got = msda.reference(*small), msda.run("01_naive", *small)
print(f"{'':28s} {'x':>7s} {'y':>6s}   {'px':>5s} {'py':>5s}   reference  01_naive")
for (what, x, y), r, g in zip(places, ref[0, :, 0], got[0, :, 0]):
    print(f"{what:28s} {x:7.4f} {y:6.3f}   {x * W - 0.5:5.2f} {y * H - 0.5:5.2f}   {r:9.3f}  {float(g):8.3f}")

# %% [markdown]
# At the left edge `px = -0.5`: half the weight is on pixel column -1, which reads zero, so the sample is half
# the edge pixel. At the map's corner three of the four corners are off: a quarter. At `px = -1` the corners
# on the map (column 0) have weight `fx = 0`: all the weight is on column -1, which reads zero.
#
# ## The reference
#
# `msda.reference(...)` computes the same sum in float64 with NumPy (`sample` in `cudabook/msda/inputs.py`),
# vectorised over queries, heads and points. Every stage is judged against it: an element passes when it is
# within one bf16 rounding of the reference, plus the float32 error the arithmetic can make (derived in that
# file's docstring). The output is poisoned with NaN before every launch, so an element nobody writes fails.
#
# ## The kernel
#
# This is the algorithm of Deformable DETR's own CUDA kernel: **one thread per output element**
# `(n, q, m, channel c)`. The thread walks its query's L levels and P points; per sample it computes the pixel
# position, skips the sample if no corner on the map has weight (`px <= -1` or `px >= W`, likewise y), and
# otherwise adds the corners that are on the map, weighted. Channels run fastest, so the D threads of a head
# are neighbours in the grid.

# %%
import math
from numba import cuda, float32, int32
from cudabook.bits import bf16_to_f32, f32_to_bf16


#! kernel msda.s01_naive msda_naive

# %% [markdown]
# - `value[n, top, m, c]` with `top = start + y0 W + x0`: row `top` of value is pixel `(y0, x0)` of level l,
#   because each level is stored row by row from `level_start_index[l]` on. Its right neighbour is `top + 1`,
#   the pixel below `top + W`.
# - The skip test `x > -1 and x < W` (and the same for y) is not only a shortcut: a location far outside would
#   make `floor(x)` overflow a 32-bit integer. Everything between `-1` and `W` is handled by the four corner
#   tests.
# - `bf16_to_f32` widens the bf16 bits (a shift), `f32_to_bf16` rounds to nearest even, once, at the end
#   (`cudabook/bits.py`).
#
# ## Is it right?
#
# The checker's cases are small in the simulator and ragged on purpose: two and three levels, a 1 x 1 level,
# D = 8, 24 and 40, and up to a quarter of the coordinates on edge cases (exact edges, exact pixel centres, one
# pixel off, far outside).

# %%
for name, kw in msda.cases():
    args = msda.random_problem(**kw)
    print(f"{name:28s}", msda.judge(msda.run("01_naive", *args), *args).message)

# %% [markdown]
# When an output is wrong the judge also tries the usual mistakes and says when one of them explains it.
# Here it is handed what `align_corners=True` arithmetic (`px = x (W - 1)`) gives, a common slip when porting
# from another framework:

# %%
args = msda.random_problem(**msda.cases()[0][1])
print(msda.judge(msda.to_bf16(inputs.sample(*args, align_corners=True)), *args))

# %% [markdown]
# ## How many bytes? Two very different answers
#
# **The minimum traffic** (`problem.min_bytes`): value, locations and weights read once, the output written
# once. **The corners every sample reads** (`problem.gather_bytes`): four pixels of D bf16 per sample. At the
# benchmark's size:

# %%
N, Lq, M, P, D = (size[k] for k in ("N", "Lq", "M", "P", "D"))
S = sum(h * w for h, w in levels)
big = msda.Problem(None, None, None, None, None, None, np.array(levels), dims=(N, S, M, D, Lq, L, P))   # sizes only
parts = {"value, once": 2 * N * S * M * D, "locations + weights": 12 * big.samples, "output": 2 * N * Lq * M * D}
print(f"samples: {big.samples:,}")
for k, v in parts.items():
    print(f"  {k:22s} {v / 1e9:6.2f} GB")
print(f"minimum traffic          {big.min_bytes / 1e9:6.2f} GB   (problem.min_bytes)")
print(f"corners the samples read {big.gather_bytes / 1e9:6.2f} GB   (problem.gather_bytes), "
      f"{big.gather_bytes / big.min_bytes:.0f} x the minimum")
print(f"each head's pixel row is read {4 * big.samples / (N * S * M):.0f} times on average")

fig, ax = plt.subplots(figsize=(8, 1.9))
left = 0
for (k, v), c in zip(parts.items(), ("C0", "C1", "C2")):
    ax.barh(1, v / 1e9, left=left, color=c, label=k)
    left += v / 1e9
ax.barh(0, big.gather_bytes / 1e9, color="C3", label="corners read (4 x D bf16 per sample)")
ax.set_yticks([0, 1], ["gathered", "minimum"]); ax.set_xlabel("GB")
ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.01, 0.5))
plt.tight_layout()
plt.show()

# %% [markdown]
# The locations and weights, not the feature maps, are most of the minimum traffic, and the corners read are
# many times all of it. Each pixel row is read over and over (the count above); the re-reads come from L2 and
# L1, not DRAM. The benchmark measures two yardsticks in the same process as the stages:
#
# - **the copy ceiling** ("% of copy"): the minimum traffic at the rate a device-to-device copy reaches. Every
#   stage must move those bytes through DRAM, so this is a floor on its time (approximately: a copy's rate is
#   not quite the memory's peak). Here it is a loose one, because it does not count the re-reads.
# - **the reference gather** ("% of reference gather"): a kernel that loads **these corners, at nearly these
#   addresses** (a sample that hangs over the border, or lies wholly off the map where the rungs skip it, is
#   moved onto the map and loaded), with 16-byte loads and nothing else: no
#   weights, no arithmetic (`benchmark.reference_gather_us`). A group of lanes loads one query's and head's
#   corners; the groups can go heads fastest or head by head, and the benchmark times both orders and keeps the
#   faster (lesson 05 shows why the order matters). It is a reference, not a bound. It is a kernel
#   like the rungs, with limits of its own (how many loads each lane keeps in flight), so a stage that does all
#   the arithmetic can still match or beat it, over 100 %. It tells how a stage compares with loading its
#   corners plainly, not how close it is to the hardware.
#
# Lesson 05 derives a bound for every kernel that loads the corners from global memory (a probe measures that the L1
# hands an SM at most 128 bytes a cycle, two corners' worth when they sit in different halves of their lines, one
# when they sit at the same bytes, and each corner sits in a line of its own) and how near rung 05 comes. A bound
# for every way of moving the corners, through shared memory too, is **not measured**: what really bounds this
# problem is open there. With poor locality the reference gather slows down; the benchmark's `uniform` workload
# (locations anywhere on the map) measures by how much.

# %%
from cudabook import results

found = False
for record in results.load_all():
    for name, w in record["workloads"].items():
        ctx = w.get("context", {})
        if name.startswith("msda ") and ctx.get("gather_us"):
            found = True
            print(f"{record['gpu']} · {name}\n"
                  f"  floor from the minimum traffic at the copy bandwidth ({ctx['copy_GBps']:,.0f} GB/s): "
                  f"{ctx['min_bytes'] / ctx['copy_GBps'] / 1e3:8,.0f} µs\n"
                  f"  the reference gather, corners only (not a floor; {ctx['ceiling_GBps']:,.0f} GB/s of corner "
                  f"bytes): {ctx['gather_us']:8,.0f} µs, "
                  + ctx.get("gather_order", "heads fastest, the only order timed then"))
if not found:
    print("No deformable attention record in results/ yet: the copy ceiling and the reference gather are measured "
          "with the stages, on a GPU.")

# %% [markdown]
# ## What the naive kernel repeats
#
# A head's D threads run the same sample loop. For every sample each of them loads the same `x`, `y` and
# weight, computes the same position, fractions, four tests and four weights, and differs only in the one
# bf16 channel it reads from each corner: **the work of one sample done D times**, and each corner read two
# bytes per thread. At D = 32 a warp is one head: its 32 lanes do identical position and weight arithmetic (their
# addresses differ only in the channel), and every corner load instruction moves 64 bytes where a warp can move
# 512 (16 bytes a lane).

# %%
print(f"samples: {big.samples:,}; sample computations in 01: {big.samples * D:,} ({D} per sample)")
print(f"corner loads in 01: {4 * big.samples * D:,} of 2 bytes; the same bytes in 16-byte loads: "
      f"{4 * big.samples * D * 2 // 16:,}")

# %% [markdown]
# Rung 02 gives each head a small group of lanes that split the channels in 16-byte pieces, computes each
# sample's weights **once**, in one lane, and hands them to the group by warp shuffles.
#
# ## How fast?
#
# On a GPU the next cell times the rung at the benchmark's size (CUDA events, median of many runs), with the
# copy ceiling, the reference gather and PyTorch's `grid_sample` implementation (Deformable DETR's reference
# code, eager) measured in the same process on the same data. Without a GPU it shows the records in
# `results/`, measured on real GPUs, or says there are none yet.
#
# From lesson 02 on, this cell measures only the lesson's rung and the one before it, with the copy ceiling,
# the reference gather and PyTorch eager. The earlier rungs, and PyTorch under `torch.compile`, come from this
# card's record in `results/`, marked ‡ with its card, commit and date, and drawn lighter. With no record for
# this card it says so and shows just what it measured. To measure everything now, pass `full=True`
# (`msda.ladder_so_far("03_smem_tiles", peers=True, full=True)`) or set `CUDABOOK_FULL_LADDER=1` before
# starting Jupyter; it takes longer.

# %%
record = msda.ladder_so_far("01_naive", peers=True)

# %% [markdown]
# ## Experiment: threads a block
#
# The kernel has one knob, the block size. Prediction to test: it hardly matters; what limits this kernel is
# the repeated work above. Without a GPU the sweep checks that every setting is correct.

# %%
msda.sweep("01_naive", "threads", [32, 64, 128] if SIMULATOR else [64, 128, 256, 512, 1024])

# %% [markdown]
# The recorded sweeps, read against 64 threads (whatever this machine measured above):

# %%
from cudabook import lesson

lesson.recorded_against("msda", "01_naive", "threads", 64)

# %% [markdown]
# In the recorded sweeps the prediction holds: 64 to 256 threads take about the same time, and 512 or 1024 about
# a tenth longer. That is small beside what removing the repeated work gains in rung 02.

# %% [markdown]
# Write the corner loop yourself: [lab 01](../../labs/msda/01_naive.ipynb) (the completed version:
# [solution](../../solutions/msda/01_naive_SOLUTION.ipynb)). Next:
# [02 · warp-cooperative](02_warp_cooperative.ipynb).
