# %% [markdown]
# # Deformable attention 02 · Warp-cooperative: lanes over channels, samples shared by shuffles
#
# Rung 01 gives each channel its own thread, so a head's D threads all compute the same sample positions and
# weights, and each moves two bytes per load. This rung gives each `(image, query, head)` a **group of G lanes**
# of one warp and splits the work two ways:
#
# - **channels across lanes, in vectors.** A head's row of D bf16 is cut into vectors of 4, 8 or 16 bytes
#   (`vec_bytes`); lane g of the group owns vector g (and g + G, ... when a row has more vectors than the
#   group has lanes). When the group covers the row, one load instruction of the group moves all of it.
# - **samples across lanes, once each.** The head's L·P samples are dealt out to the group's lanes: lane g
#   computes sample `j0 + g` (position, the four corner weights with the attention weight folded in, the row of
#   its top-left pixel), and **warp shuffles** (`shfl.sync`) hand each sample's five numbers to the whole group.
#
# PTX ISA: [shfl.sync](https://docs.nvidia.com/cuda/parallel-thread-execution/index.html#data-movement-and-conversion-instructions-shfl-sync),
# [ld (vector loads)](https://docs.nvidia.com/cuda/parallel-thread-execution/index.html#data-movement-and-conversion-instructions-ld).

# %%
import cudabook
print(cudabook.where())

import numpy as np
import matplotlib.pyplot as plt
from matplotlib.patches import Rectangle
from cudabook import SIMULATOR, msda
from cudabook.msda import benchmark
from cudabook.msda import s02_warp_cooperative as s02

# %% [markdown]
# ## Who owns which channels
#
# `s02.plan(D, vec_bytes)` gives the 32-bit words per vector, the vectors in a head's row, and G, the lanes of
# a group: the vector count rounded up to a power of two, at most 32, so that groups tile a warp. With D a
# multiple of 8 a row is whole 16-byte pieces, so every width is aligned for every D.

# %%
print(" D  vec_bytes  words/vector  vectors/row  lanes G  heads/warp")
for D in (8, 32, 64, 128):
    for vb in (4, 8, 16):
        words, nvec, G = s02.plan(D, vb)
        print(f"{D:3d}  {vb:9d}  {words:12d}  {nvec:11d}  {G:7d}  {32 // G:10d}")

# %% [markdown]
# At the benchmark's D = 32 with 16-byte vectors a head is 4 lanes, and a warp serves 8 heads at once: lane g
# of each group holds channels `8g .. 8g+7`. Groups are numbered `(n, q, m)` with heads fastest, so with the
# benchmark's M = 8 the 8 groups of a warp are the 8 heads of one query.

# %%
fig, ax = plt.subplots(figsize=(11, 1.6))
G = 4
for lane in range(32):
    group, g = divmod(lane, G)
    ax.add_patch(Rectangle((lane, 0), 1, 1, color=f"C{group}", alpha=0.35 + 0.15 * g))
    ax.text(lane + 0.5, 0.5, f"{8 * g}-{8 * g + 7}", ha="center", va="center", fontsize=6, rotation=90)
for group in range(8):
    ax.text(group * G + G / 2, 1.25, f"head {group}", ha="center", fontsize=8)
ax.set_xlim(0, 32); ax.set_ylim(0, 1.6); ax.axis("off")
ax.set_title("one warp at D = 32, 16-byte vectors: 8 groups of 4 lanes; each lane's channels", fontsize=9)
plt.show()

# %% [markdown]
# ## Who computes which sample, and how the group gets it
#
# The group walks the head's samples in **rounds** of G. In round `j0`, lane g computes sample `j = j0 + g`
# (`sample_corners`: four weights and a row). Then for `t = 0 .. G-1` every lane of the group executes
# `shfl_sync(FULL_MASK, w, leader + t)`: the value lane `leader + t` holds arrives in every lane. That is five
# shuffles a sample (four weights and the row); after them each lane loads **its own vector** of the (up to)
# four corners. The last round is partial when G does not divide L·P: its spare lanes compute nothing, but
# still take part in the shuffles. Drawn for 10 samples and a group of 4:

# %%
G, samples, j0 = 4, 10, 4
fig, (a1, a2) = plt.subplots(1, 2, figsize=(11, 3.2), gridspec_kw={"width_ratios": [1, 1.4]})
rounds = list(range(0, samples, G))
for r, start in enumerate(rounds):
    for g in range(G):
        j = start + g
        a1.add_patch(Rectangle((g, r), 1, 1, color=f"C{j % 10}" if j < samples else "0.92", alpha=0.45))
        a1.text(g + 0.5, r + 0.5, f"sample {j}" if j < samples else "(none)", ha="center", va="center", fontsize=8)
a1.set_xlim(0, G); a1.set_ylim(len(rounds), 0)
a1.set_xticks([g + 0.5 for g in range(G)], [f"lane {g}" for g in range(G)], fontsize=8)
a1.set_yticks([r + 0.5 for r in range(len(rounds))], [f"round j0={s}" for s in rounds], fontsize=8)
a1.set_title("step 1: each lane computes one sample a round", fontsize=9)
for t in range(G):
    for g in range(G):
        a2.plot(t, g, "o", ms=16, color=f"C{(j0 + t) % 10}" if g == t else "white", mec="k", zorder=3)
        if g != t:
            a2.annotate("", xy=(t, g), xytext=(t, t), arrowprops=dict(
                arrowstyle="->", color=f"C{(j0 + t) % 10}", lw=1.2, shrinkA=9, shrinkB=9,
                connectionstyle=f"arc3,rad={0.35 if g > t else -0.35}"))
    a2.text(t, G - 0.35, f"t={t}: shfl from\nlane {t}: sample {j0 + t}", ha="center", fontsize=7)
a2.set_xlim(-0.6, G - 0.4); a2.set_ylim(G + 0.2, -0.6)
a2.set_yticks(range(G), [f"lane {g}" for g in range(G)], fontsize=8); a2.set_xticks([])
a2.set_title(f"step 2, round j0={j0}: five shuffles per sample hand it to every lane,\n"
             "then each lane loads its own 16 bytes of the four corners", fontsize=9)
plt.tight_layout()
plt.show()

# %% [markdown]
# ## The kernel
#
# First the per-sample work, written once, for the lane that computes it. A corner off the map gets weight
# zero, and a zero-weight corner is never loaded, so the border tests happen once a sample, not once a channel.

# %%
import math
from numba import cuda, float32, int32
from cudabook.bits import bf16_to_f32, f32_to_bf16
from cudabook.msda.s02_warp_cooperative import FULL_MASK, WARP, WORDS, add_corner, lane_group, store_vector


#! kernel msda.s02_warp_cooperative sample_corners

# %% [markdown]
# Then the kernel. `words` is `value` viewed as 32-bit words `[N, S*M, D/2]` (two bf16 channels a word): the
# row of pixel `top`, head `m` is `top * M + m`. `add_corner` does one 4-, 8- or 16-byte load (`WORDS` words,
# a compile-time constant: `launch` compiles one copy per width) and adds its channels, weighted, to the
# lane's float32 accumulators. `lane_group` says where a lane works: its place `g` in its group and the group's
# head `(n, q, m)`.

# %%
#! kernel msda.s02_warp_cooperative lane_group


#! kernel msda.s02_warp_cooperative msda_warp

# %% [markdown]
# Two rules keep the shuffles legal. **Every lane of the warp reaches every shuffle**: `FULL_MASK` promises
# that all 32 lanes take part, so no lane may have left. A warp wholly past the end of the problem leaves at
# once (all its lanes together); a group past the end (`live` false) or a lane past its row (`vec >= nvec`)
# stays, shuffles, and only skips its loads and its store. And the loop bound `min(lanes, samples - j0)` is the
# same in every lane of the warp (every head has L·P samples), so all 32 run the same number of shuffles.
#
# ## Is it right?
#
# The kernel defined in this notebook, through the stage's own launch, at every vector width:

# %%
from cudabook.check import check_case

for name, kw in msda.cases():
    args = msda.random_problem(**kw)
    for vb in (4, 8, 16):
        verdict = check_case("msda", lambda p: s02.launch(p, kernel=msda_warp, vec_bytes=vb), args)
        print(f"{name:28s} vec_bytes={vb:2d}:", verdict.message)

# %% [markdown]
# ## What changed, counted
#
# Per sample of one head at the benchmark's D = 32, what each rung executes (a lane-instruction is one lane
# doing one instruction):

# %%
D = benchmark.WORKLOADS[0]["D"]
words, nvec, G = s02.plan(D, 16)
rows = [("lanes that load x, y and the weight", D, 1),
        ("lanes that compute the position and corner weights", D, 1),
        ("shuffle lane-instructions", 0, 5 * G),
        ("corner load lane-instructions", 4 * D, 4 * nvec),
        ("bytes per corner load, per lane", 2, 4 * words)]
print(f"{'':52s} {'01 naive':>9s} {'02':>6s}")
for what, a, b in rows:
    print(f"{what:52s} {a:9d} {b:6d}")

# %% [markdown]
# The same 4 x 64 bytes of corners are read either way; rung 02 issues far fewer instructions to read them,
# and computes each sample once. The shuffles are the price.
#
# ## Locality: what the neighbouring warps read
#
# The corners of one sample are four scattered 64-byte pieces (the row of pixel `(y0, x0)` and of its right
# neighbour are `M D 2` bytes apart, the row below `W M D 2`). Whether such reads are fast depends on whether
# they hit L1 or L2, and that depends on what the **neighbouring** warps read at the same time. In the encoder
# query q sits at pixel q, so consecutive queries sample around consecutive pixels: the rows they read overlap.
# With locations drawn uniformly they do not. Here, for 512 consecutive queries, the value row each sample's
# top-left corner reads on level 0:

# %%
levels = benchmark.WORKLOADS[0]["levels"]
fig, axes = plt.subplots(1, 2, figsize=(11, 3), sharey=True)
for ax, kind in zip(axes, ("local", "uniform")):
    v, shapes, starts, loc, attn = msda.random_problem(1, 512, 1, levels, 8, 8, locations=kind,
                                                       rng=np.random.default_rng(0))
    H, W = levels[0]
    px = np.clip(np.floor(loc[0, :, 0, 0, :, 0] * W - 0.5), 0, W - 1)
    py = np.clip(np.floor(loc[0, :, 0, 0, :, 1] * H - 0.5), 0, H - 1)
    rows = py * W + px
    ax.plot(np.repeat(np.arange(512), rows.shape[1]), rows.ravel(), ".", ms=1.5)
    ax.set_title(f"locations '{kind}': {len(np.unique(rows)):,} distinct rows of {H * W:,}", fontsize=9)
    ax.set_xlabel("query")
axes[0].set_ylabel("row of level 0 read")
plt.tight_layout()
plt.show()

# %% [markdown]
# On the left a narrow band: a small part of the level serves all 512 queries, and can stay cached while it
# does. On the right every query reads anywhere in the level. The benchmark measures both workloads, and
# the reference gather of each (the corners loaded, no arithmetic), in the same process; the records say what
# locality is worth for the reference gather and for each rung (last line per card: each time on `uniform`
# over the same time on `local`):

# %%
from cudabook import results

shown = False
for record in results.load_all():
    for name, w in record["workloads"].items():
        if name.startswith("msda ") and w.get("context", {}).get("gather_us"):
            shown = True
            times = ", ".join(f"{s} {w['stages'][s]['median_us']:,.0f} µs" for s in w["stages"]
                              if "median_us" in w["stages"][s])
            order = w["context"].get("gather_order", "heads fastest")
            print(f"{record['gpu']} · {name}: reference gather {w['context']['gather_us']:,.0f} µs ({order}); "
                  f"{times}")
    kinds = {name.rsplit(" ", 1)[-1]: w for name, w in record["workloads"].items()
             if name.startswith("msda ") and w.get("context", {}).get("gather_us")}
    if "local" in kinds and "uniform" in kinds:
        lo, un = kinds["local"], kinds["uniform"]
        ratios = [f"reference gather {un['context']['gather_us'] / lo['context']['gather_us']:.2f}x"]
        ratios += [f"{s} {un['stages'][s]['median_us'] / lo['stages'][s]['median_us']:.2f}x" for s in lo["stages"]
                   if "median_us" in lo["stages"][s] and "median_us" in un["stages"].get(s, {})]
        print(f"{record['gpu']}, uniform over local: " + ", ".join(ratios))
if not shown:
    print("No deformable attention record in results/ yet: run `make bench TRACKS=msda` on a GPU.")

# %% [markdown]
# Locality decides how fast the corners can be loaded: without it the reference gather takes longer. (The
# benchmark times the gather in two orders of its groups and keeps the faster, named in brackets, so where the two
# workloads' orders differ, the last line compares one order with the other; lesson 05 shows how much the order
# moves it.) Rung 02 hardly notices: loading its corners is not yet what limits it. Rung 04 feels the difference
# more (the last line per card), and so does rung 05 where its items go heads fastest (the H100's record); head by
# head (the H200's) it feels it about as much as the reference gather does.
#
# ## How fast?
#
# Rungs 01 and 02 against the copy ceiling, the reference gather and PyTorch's eager `grid_sample`
# implementation, in the same process (no GPU: the records in `results/`, or a note that there are none yet).

# %%
record = msda.ladder_so_far("02_warp_cooperative", peers=True)

# %% [markdown]
# ## Experiment: vector width and group size
#
# `vec_bytes` (4, 8 or 16) sets how many channels a lane moves per load, and so G; `lanes` overrides G (a
# smaller group walks the row in several passes, a larger one leaves lanes idle at the loads). Predictions to
# test: 16-byte vectors are fastest (fewest load instructions), and a group smaller than the row is slower,
# because every pass over the row computes and shuffles all the samples again. Without a GPU the sweeps check
# every setting is correct.

# %%
msda.sweep("02_warp_cooperative", "vec_bytes", [4, 8, 16])
msda.sweep("02_warp_cooperative", "lanes", [1, 2, 4] if SIMULATOR else [1, 2, 4, 8, 16], fixed={"vec_bytes": 4})

# %% [markdown]
# The recorded sweeps, read against 16-byte vectors and against a full group of 16 lanes:

# %%
from cudabook import lesson

lesson.recorded_against("msda", "02_warp_cooperative", "vec_bytes", 16)
lesson.recorded_against("msda", "02_warp_cooperative", "lanes", 16, fixed={"vec_bytes": 4})

# %% [markdown]
# Both predictions hold in the recorded sweeps. 16-byte vectors are the fastest, 4-byte ones take nearly three
# times as long. At 4 bytes the row needs 16 lanes, and each halving of the group costs more than the last: a few
# percent from 16 to 8 lanes, and most of all from 2 lanes to 1.

# %% [markdown]
# Write the rounds and the shuffles yourself: [lab 02](../../labs/msda/02_warp_cooperative.ipynb) (the
# completed version: [solution](../../solutions/msda/02_warp_cooperative_SOLUTION.ipynb)). Back:
# [01 · naive](01_naive.ipynb). Next: [03 · shared tiles](03_smem_tiles.ipynb), where the group stages each
# sample's four corners in shared memory before it blends them.
