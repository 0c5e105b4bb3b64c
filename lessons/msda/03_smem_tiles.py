# %% [markdown]
# # Deformable attention 03 · Shared tiles: each sample's 2 x 2 x D corners staged in shared memory
#
# The plan this track grew from had an "optimized" kernel: load each sample's whole 2 x 2 x 32 tile of corners
# into shared memory cooperatively, then blend it from there. This rung builds that kernel, for every D, on rung
# 02's layout (a group of G lanes per `(image, query, head)`, each lane one vector of the head's channels), and
# measures it against rung 02.
#
# Each group owns a slice of the block's shared memory: a **tile** (4 corners x D channels) and a **table** (G
# samples). For every round of G samples:
#
# 1. **table**: lane g computes sample `j0 + g` (position, four weights with the attention weight folded in,
#    the value row of each corner or -1 off the map) and writes it to the table; the warp synchronises (all
#    its groups: `cuda.syncwarp` with the full mask);
# 2. for each sample of the round: **stage** its 4 corners x D channels into the tile, the vectors dealt out to
#    the group's lanes, zeros for a corner off the map; **synchronise**; **blend** (each lane its own vector of
#    the four corners); **synchronise** again before the next sample overwrites the tile.
#
# Before you read on, a prediction: will it beat rung 02?
#
# PTX ISA: [the shared state space](https://docs.nvidia.com/cuda/parallel-thread-execution/index.html#shared-state-space),
# [bar.warp.sync](https://docs.nvidia.com/cuda/parallel-thread-execution/index.html#parallel-synchronization-and-communication-instructions-bar-warp-sync)
# (`cuda.syncwarp`), [ld / st (vectors)](https://docs.nvidia.com/cuda/parallel-thread-execution/index.html#data-movement-and-conversion-instructions-ld).

# %%
import cudabook
print(cudabook.where())

import numpy as np
import matplotlib.pyplot as plt
from matplotlib.patches import Rectangle
from cudabook import SIMULATOR, msda, results
from cudabook.msda import benchmark
from cudabook.msda import s03_smem_tiles as s03

# %% [markdown]
# ## A group's slice of shared memory
#
# `s03.plan(D, vec_bytes)` gives the words a vector, the vectors a head's row, the lanes G of a group (as in rung
# 02) and the vectors each lane blends. A group's slice is its tile, `4 x D/2` words, then its table, G entries
# of 8 words (four float32 weights, four int32 rows); `s03.shared_bytes` adds them up for a block:

# %%
threads = 32 * s03.PARAMS["warps_per_block"]
print(f"16-byte vectors, {threads} threads a block")
print("  D  words/vector  vectors/row  lanes G  tile+table a group  shared memory a block")
for D in (8, 24, 32, 40, 128):
    words, nvec, G, per = s03.plan(D, 16)
    group = 4 * (4 * D // 2 + s03.TABLE_WORDS * G)
    print(f"{D:3d}  {words:12d}  {nvec:11d}  {G:7d}  {group:15,d} B  {s03.shared_bytes(D, G, threads):17,d} B")

# %% [markdown]
# ## Who stages which vector, and who reads it
#
# Staging deals the `4 x nvec` vectors of a sample's tile to the group's lanes in turn (lane g copies vectors
# g, g + G, ...); blending gives lane g vector g of each corner. Below, each square is one vector of the tile,
# coloured by the lane that **stages** it and labelled with the lane that **blends** it:

# %%
def draw_tile(ax, D):
    words, nvec, G, per = s03.plan(D, 16)
    own = 0
    for e in range(4 * nvec):                      # the kernel's staging loop, for every lane at once
        c, v = divmod(e, nvec)
        stager, blender = e % G, v % G
        own += stager == blender
        ax.add_patch(Rectangle((v, c), 1, 1, color=f"C{stager}", alpha=0.45, ec="w"))
        ax.text(v + 0.5, c + 0.5, f"lane {blender}", ha="center", va="center", fontsize=8)
    ax.set_xlim(0, nvec); ax.set_ylim(4, 0)
    ax.set_xticks([v + 0.5 for v in range(nvec)], [f"ch {8 * v}-{8 * v + 7}" for v in range(nvec)], fontsize=7)
    ax.set_yticks([c + 0.5 for c in range(4)], ["(y0, x0)", "(y0, x0+1)", "(y0+1, x0)", "(y0+1, x0+1)"], fontsize=7)
    ax.set_title(f"D = {D}: G = {G} lanes; {own} of {4 * nvec} vectors\nblended by the lane that staged them",
                 fontsize=9)


fig, axes = plt.subplots(1, 2, figsize=(10, 2.8), gridspec_kw={"width_ratios": [4, 3]})
draw_tile(axes[0], 32)
draw_tile(axes[1], 24)
fig.suptitle("a sample's tile: colour = the lane that stages a vector, label = the lane that blends it", fontsize=9)
fig.legend(handles=[Rectangle((0, 0), 1, 1, color=f"C{g}", alpha=0.45, label=f"staged by lane {g}") for g in range(4)],
           fontsize=7, loc="lower center", ncol=4, bbox_to_anchor=(0.5, -0.06))
plt.tight_layout()
plt.show()

# %% [markdown]
# At the benchmark's D = 32 (a row of 4 vectors, a group of 4 lanes) every lane stages exactly the four
# vectors it will blend: the tile is a round trip through shared memory **from a lane back to itself**. Only
# when the row does not fill the group (D = 24: 3 vectors, 4 lanes) do lanes copy for each other, and the lane
# that rung 02 leaves idle at the loads helps.
#
# ## The kernel
#
# Three views of the same dynamic shared memory (`tile` as uint32 words, `weights` as float32, `rows` as
# int32), and the group's offsets `TILE` and `TABLE` into it. `copy_vector` is one 4-, 8- or 16-byte global
# load and one shared store; `zero_vector` one shared store of zeros; `add_staged` one shared load and the
# multiply-adds. `lane_group` is rung 02's: a lane's place in its group and the group's head.

# %%
import math
from numba import cuda, float32, int32, uint32
from cudabook.msda.s03_smem_tiles import (ACC, FULL_MASK, PER_LANE, TABLE_WORDS, WARP, WORDS, add_staged,
                                          copy_vector, lane_group, store_sums, zero_vector)


#! kernel msda.s03_smem_tiles msda_tiles

# %% [markdown]
# - **The border test moved.** A corner off the map still gets its bilinear weight; its row in the table is
#   -1, and staging writes zeros for it. The blend has no branch (as with TMA's zero fill in rung 04).
# - **Three barriers.** After the table (every lane reads every entry), after staging (a lane blends vectors
#   other lanes may have staged) and after the blend (the next sample overwrites the tile). Every lane of the
#   warp must reach each one, so a group past the end of the problem does group 0's work and stores nothing.
# - `WORDS`, `PER_LANE` and `ACC` are compile-time constants: `launch` compiles a copy for each vector width.
#
# ## Is it right?
#
# The kernel defined in this notebook, through the stage's own launch, at every vector width:

# %%
from cudabook.check import check_case

for name, kw in msda.cases():
    args = msda.random_problem(**kw)
    for vb in (4, 8, 16):
        verdict = check_case("msda", lambda p: s03.launch(p, kernel=msda_tiles, vec_bytes=vb), args)
        print(f"{name:28s} vec_bytes={vb:2d}:", verdict.message)

# %% [markdown]
# ## What staging adds, counted
#
# Per sample of one head at the benchmark's D = 32 with 16-byte vectors, what each rung executes
# (lane-instructions: one lane doing one instruction; rung 02 skips the load of a zero-weight corner, so its
# loads are an upper bound):

# %%
D = benchmark.WORKLOADS[0]["D"]
words, nvec, G, per = s03.plan(D, 16)
rows = [("shuffle lane-instructions", 5 * G, 0),
        ("global loads of 16 B (the corners)", 4 * nvec, 4 * nvec),
        ("shared stores: table entry (4 B each)", 0, s03.TABLE_WORDS),
        ("shared stores: tile (16 B)", 0, 4 * nvec),
        ("shared loads: table (a row to stage, a weight to blend)", 0, 4 * nvec + 4 * nvec),
        ("shared loads: tile (16 B)", 0, 4 * nvec)]
print(f"{'':58s} {'02':>4s} {'03':>4s}")
for what, a, b in rows:
    print(f"{what:58s} {a:4d} {b:4d}")
print(f"{'warp barriers (every lane of the warp waits)':58s} {0:4d}  2 + 1/{G} (two a sample, one a round of {G})")
stores, loads = sum(b for w, _, b in rows if "stores" in w), sum(b for w, _, b in rows if "loads: t" in w)
print(f"\n03 in place of 02's {5 * G} shuffles: {stores} shared stores, {loads} shared loads and the barriers")

# %% [markdown]
# The corner loads are the same, 64 bytes a lane either way, from the same L1 and L2. Staging trades the
# shuffles for more shared-memory traffic than there are corner loads, and puts a barrier between a sample's
# loads and its blend: a lane cannot start blending until the whole group's loads have landed, and the next
# sample's loads wait until everyone has blended.
#
# ## When shared memory pays
#
# Shared memory is a place where threads **hand data to each other**. It pays when a value is fetched once and
# then read many times, by many threads: in the GEMM track's rung 02 each element of an A or B tile is read by
# a whole row or column of the tile's threads (`tile` of them, the record's parameter), where rung 01 fetched
# it that many times from L1 or L2. Here each staged vector is read **once**, by one lane, for one sample:

# %%
for D in (8, 24, 32, 40, 64, 128):
    words, nvec, G, per = s03.plan(D, 16)
    readers = np.zeros((4, nvec), int)
    for g in range(G):                             # the blend: lane g reads vector g (+ G, ...) of each corner
        for k in range(per):
            if g + k * G < nvec:
                readers[:, g + k * G] += 1
    times = " or ".join(str(k) for k in sorted(set(readers.ravel().tolist())))
    print(f"D = {D:3d}: {4 * nvec:2d} vectors staged a sample; each is read {times} time(s)")

# %% [markdown]
# And nobody else wants a sample's corners: another head of the same query reads other channels, another query other
# positions, and what neighbouring queries do share (the overlapping rows that make the reference gather, and rungs
# 04 and 05, faster on `local`) L1 and L2 already keep, for every warp on the SM, without a barrier. Reuse is the
# whole argument for shared memory, and this staging captures none: each group stages its own sample's tile. (A
# block whose queries share pixels could stage each distinct one once for all of them and save the L1 a hit for
# every repeat, though each sample reading its corners back from shared memory would cost the banks as many bytes as
# the hit did; lesson 05 counts how many repeat, and no rung does it.) Both tracks' records, side by side:

# %%
shown = False
for record in results.load_all():
    for name, w in record["workloads"].items():
        st = w.get("stages", {})
        pairs = {"gemm ": ("01_naive", "02_smem_tiles"), "msda ": ("02_warp_cooperative", "03_smem_tiles")}
        for prefix, (before, after) in pairs.items():
            if name.startswith(prefix) and "median_us" in st.get(before, {}) and "median_us" in st.get(after, {}):
                shown = True
                b, a = st[before]["median_us"], st[after]["median_us"]
                tile = st[after].get("params", {}).get("tile")
                reuse = f"a staged value read by {tile} threads" if tile else "a staged vector read once"
                print(f"{record['gpu']} · {name}\n  {before} {b:10,.0f} µs -> {after} {a:10,.0f} µs: "
                      f"speed-up {b / a:.2f}x ({reuse})")
if not shown:
    print("No records of these rungs in results/ yet: run `make bench` on a GPU.")

# %% [markdown]
# ## How fast?
#
# Rungs 02 and 03 against the copy ceiling, the reference gather and PyTorch's eager `grid_sample`
# implementation, in the same process; rung 01 from this card's record (‡). No GPU: the records in
# `results/`, or a note that there are none yet.

# %%
record = msda.ladder_so_far("03_smem_tiles", peers=True)

# %% [markdown]
# In the records rung 03 is slower than rung 02, on both workloads, by the factor printed above. It does every
# load rung 02 does, and then a store, a load back and barriers for every vector. Waiting for a load is not
# what changed: in both rungs a warp waits for a load at its first use, and for the whole warp (the hardware
# tracks a load instruction per warp, so the warp stalls until every lane's data has arrived). What changed:
#
# - **the barriers put the samples in single file.** Each sample's copies feed shared-memory stores, a barrier
#   follows, then the blend, then another barrier, and only after it come the next sample's loads: the
#   compiler does not move memory accesses across a barrier. That costs less than it sounds, because rung 02
#   keeps no more loads out: each of its corner loads sits in its own branch and is used by the next
#   instruction. Counted in the SASS the way lesson 05 counts (compiled with CUDA 13.5 on a machine without a
#   GPU, so a reading, not a record), both rungs have one 16-byte load in flight a lane;
# - **more shared-memory traffic than there are corner loads** (the table of counts above), and with it more
#   time waiting for shared memory;
# - **more registers a thread**, so fewer warps an SM.
#
# The last two are in the H100 and H200 profiles recorded in `results/profiles/` (the `local` workload; the cell
# shows the latest, or on a GPU with ncu this card's own):

# %%
from cudabook import profile

prof = profile.show("msda", "02_warp_cooperative", "03_smem_tiles")
for stage in ("02_warp_cooperative", "03_smem_tiles"):
    k = prof.kernel(stage) if prof else None
    if k:
        print(f"{stage}: {k['registers']:.0f} registers a thread, at most {k['theoretical_occupancy_pct']:.1f} % of "
              f"an SM's warp slots; waiting for shared memory or shuffles (short scoreboard) "
              f"{k['stalls'].get('short_scoreboard', 0):.1f} % of warp cycles, for global memory (long scoreboard) "
              f"{k['stalls'].get('long_scoreboard', 0):.1f} %")

# %% [markdown]
# What staging buys is small: a blend with no branches, and idle lanes that help copy, of which D = 32 has
# none.
#
# So the plan's "optimized" kernel was a pessimisation, and the honest ladder keeps it, measured. Staging in
# shared memory is worth its cost when data is reused across threads; for data used once it can only add
# work. The lesson of this rung for the next two: a gather goes faster when **more loads are in flight**, not
# when the same loads take a detour.
#
# ## Experiments: vector width and warps a block
#
# `vec_bytes` (4, 8 or 16) sets the vector and so G; `warps_per_block` how many groups share a block's shared
# memory. Predictions to test: 16-byte vectors are fastest, as in rung 02, and the warps a block change little,
# because each warp synchronises only itself. Without a GPU the sweeps check that every setting is correct.

# %%
msda.sweep("03_smem_tiles", "vec_bytes", [4, 8, 16])
msda.sweep("03_smem_tiles", "warps_per_block", [1, 2] if SIMULATOR else [1, 2, 4, 8])

# %% [markdown]
# The recorded sweeps, read against 16-byte vectors and against one warp a block:

# %%
from cudabook import lesson

lesson.recorded_against("msda", "03_smem_tiles", "vec_bytes", 16)
lesson.recorded_against("msda", "03_smem_tiles", "warps_per_block", 1)

# %% [markdown]
# In the recorded sweeps 16-byte vectors win again, by more than in rung 02. 1, 2 and 4 warps a block take the
# same time, as predicted; 8 warps take longer.

# %% [markdown]
# Write the table, the staging and the barriers yourself: [lab 03](../../labs/msda/03_smem_tiles.ipynb) (the
# completed version: [solution](../../solutions/msda/03_smem_tiles_SOLUTION.ipynb)). Back:
# [02 · warp-cooperative](02_warp_cooperative.ipynb). Next: [04 · TMA boxes](04_tma_boxes.ipynb), where the
# copy engine stages the same 2 x 2 x D tiles instead of the lanes, and fills the borders with zeros itself.
