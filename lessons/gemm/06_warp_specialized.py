# %% [markdown]
# # GEMM 06 · Warp specialization: a warpgroup that only copies
#
# In rung 05 every warpgroup waited for its own wgmmas, met the others at a `__syncthreads`, and only then did
# thread 0 ask TMA for the next k-tile of that stage: once per k-tile the whole block stopped together, and
# the tensor cores ran dry. Here the block splits into **roles**:
#
# ```
#   warpgroup 0: producer (one thread)          warpgroups 1, 2: consumers (64 rows of the tile each)
#   for each tile, for each k-tile:             for each tile, for each k-tile:
#     wait empty[s]  (parity = phase ^ 1)         wait full[s]  (parity = phase)
#     expect_tx(full[s], stage bytes)             4 x wgmma on stage s ; wait for them
#     TMA A, B -> stage s                         arrive empty[s]
#     s++ (phase ^= 1 at the end of the ring)     s++ (phase ^= 1 at the end of the ring)
#                                               store the tile (the producer is already loading the next)
# ```
#
# Nobody waits for everybody any more: the producer runs up to `STAGES` k-tiles ahead, limited only by
# `empty` barriers, and the consumers wait only for data that is not there yet. Each consumer still waits for
# its own wgmmas every k-tile (`wait<0>`), but nothing holds the two consumers in step any more, so one may
# issue while the other waits (rung 07 also keeps one k-tile of wgmmas running while it issues the next).
#
# Three more ideas ride along:
#
# - **`setmaxnreg`**: registers are allotted per warp at launch, the same for all. The producer needs a few
#   dozen, a consumer with a 64 x 256 fp32 accumulator needs 128 for it alone. `setmaxnreg.dec` gives the
#   producer's back, `setmaxnreg.inc` hands them to the consumers ([PTX ISA](https://docs.nvidia.com/cuda/parallel-thread-execution/index.html#miscellaneous-instructions-setmaxnreg)).
#   Here it compiled as wanted only under a launch-bounds register cap, with each role one branch of an
#   if/else: what ptxas did with this kernel (NVRTC 13.0), not a rule the PTX ISA states.
# - **a bigger tile**, 128 x 256 with two consumer warpgroups: each byte brought from memory feeds more FLOPs.
# - **a persistent grid**: one block per SM walks many tiles, in a *grouped* order (`GROUP_M` tile rows at a
#   time) so that the tiles being worked on at once share rows of A and columns of B in L2.

# %%
import cudabook
print(cudabook.where())

import matplotlib.pyplot as plt
import numpy as np
from cudabook import device, gemm, lesson, nvrtc
from cudabook.gemm import pictures, s06_warp_specialized as s06, waves
from cudabook.gemm.benchmark import WORKLOADS

# %% [markdown]
# ## The phase bit
#
# An mbarrier completes a *phase* each time its expected arrivals (and bytes) are in; the phase's parity then
# flips. `mbarrier.try_wait.parity p` returns true once the phase with parity `p` has completed. A fresh
# barrier is in phase 0, and the phase before it (parity 1) counts as complete. So on the first lap:
#
# - the consumer waits `full[s]` with parity 0: blocks until the first copy lands;
# - the producer waits `empty[s]` with parity `0 ^ 1 = 1`: passes at once, every stage starts empty.
#
# Both sides flip `phase` whenever `s` wraps to 0. Off by one, and a side either reads a stage before it is
# full (wrong results) or waits for a phase that never comes (a hang: the kernel's watchdog traps instead).
# Here is the ring for 4 stages and 10 k-tiles, the parities each side waits with:

# %%
STAGES, K_TILES = 4, 10
print(" k-tile  stage  lap  consumer waits full[s] parity   producer waits empty[s] parity")
for kt in range(K_TILES):
    s, lap = kt % STAGES, kt // STAGES
    print(f" {kt:>6}  {s:>5}  {lap:>3}  {lap & 1:>29}   {(lap & 1) ^ 1:>30}")

# %% [markdown]
# ## The kernel
#
# The consumer's loop body (lab 06 asks you to write it), with the producer's loop above it:

# %%
lesson.show_region(s06.source(), start="if (wg == 0)", end="<<< lab", context=0)

# %% [markdown]
# In SASS, the register hand-over shows as `USETMAXREG`; the compiler's register report is the cap at entry.

# %%
cubin = s06.compile_cubin()
for pattern in ("USETMAXREG", "HGMMA", "UTMALDG", "SYNCS.ARRIVE"):
    found = nvrtc.sass_lines(cubin, pattern, kernel=s06.KERNEL)
    print(f"{pattern:12s} x{len(found):<3} e.g. {found[0] if found else '(none)'}")
print(nvrtc.resource_usage(cubin)[s06.KERNEL])

# %% [markdown]
# ## Right?

# %%
why = gemm.unavailable("06_warp_specialized")
if why:
    print("Not run here:", why)
else:
    for M, N, K in ((1, 1, 1), (129, 257, 72), (100, 200, 7), (1000, 1000, 1000)):
        a, b = gemm.random_problem(M, N, K)
        print(f"M={M} N={N} K={K}:", gemm.judge(gemm.run("06_warp_specialized", a, b), a, b).message.splitlines()[0])

# %% [markdown]
# ## How fast?

# %%
gemm.ladder_so_far("06_warp_specialized", peers=True)

# %% [markdown]
# ## The grouped tile order, drawn
#
# A persistent block `b` computes tiles `b`, `b + grid`, `b + 2 grid`, ... of an order, so the tiles in flight
# at once are about one **wave** of `grid` consecutive tiles. Each tile streams the k-slices of one row-panel
# of A (`BM` rows) and one column-panel of B (`BN` columns), and the blocks of a wave start together and walk K
# at the same pace. Blocks that share a panel ask for the same k-slice at about the same time, so it comes from
# DRAM once and from L2 for the others: a wave's DRAM traffic is then about its *distinct* panels times their
# bytes, and the order decides how many there are. Row-major order (`group_m = 1`) lays a wave along whole tile
# rows, one B panel per column; the grouped order (`grouped_tile` in hopper.cuh; rung 04's kernel walks its
# blocks the same way, rung 05 does not) goes down `group_m` tile rows before it moves right: a squarer patch,
# fewer panels for the same number of tiles. Here with this rung's tile, one block per SM of the card the
# `group_m` sweep was recorded on, and the track's larger workload:

# %%
BM, BN = waves.tile_of(s06.PARAMS)
group_ms = [1, 4, 8, 16]
recorded = lesson.recorded_sweeps("gemm", "06_warp_specialized", "group_m")
if recorded:
    card = recorded[0]["machine"]
else:
    g = device.gpu()
    card = dict(gpu=g.name, sms=g.sms, l2_bytes=g.l2_bytes)
SMS = card["sms"]
print(f"tile {BM} x {BN}; a wave = {SMS} blocks, one per SM of the {card['gpu']}")
size = WORKLOADS[-1]
tiles_m, tiles_n = -(-size["M"] // BM), -(-size["N"] // BN)
rows = pictures.drawn_rows(tiles_m, tiles_n, (1, s06.PARAMS["group_m"]), SMS)
fig, axes = plt.subplots(1, 2, figsize=(12, 4))
for ax, g in zip(axes, (1, s06.PARAMS["group_m"])):
    pictures.draw_tile_order(ax, tiles_m, tiles_n, g, SMS, rows=rows)
fig.suptitle(f"M = N = {size['M']}: the tiles of the first two waves, the first of each numbered by its place in "
             f"the order", fontsize=9)
plt.tight_layout()
plt.show()
print(f"{'M x N x K':>20}  group_m   wave 0: A panels  B panels   MiB of panels a wave (mean over the waves)")
for w in WORKLOADS:
    for g in group_ms:
        t = pictures.wave_traffic(w["M"], w["N"], w["K"], BM, BN, g, SMS)
        print(f"{w['M']:>6} x {w['N']} x {w['K']}  {g:>7}   {t['a_panels']:>16}  {t['b_panels']:>8}   "
              f"{t['bytes_per_wave'] / 2**20:>8.1f}")
    whole = (w["M"] + w["N"]) * w["K"] * 2
    print(f"{'':>20}  A and B together: {whole / 2**20:.0f} MiB, the {card['gpu']}'s L2 "
          f"{card['l2_bytes'] / 2**20:.0f} MiB")
if recorded:
    print(f"the group_m sweep below was recorded at {recorded[0]['size_used']}")

# %% [markdown]
# At the larger size a tile row is long, a row-major wave touches every B panel, and the grouped order reads
# far fewer bytes a wave. At the smaller one, the size of the `group_m` sweep, a tile row is short: a row-major
# wave is already compact, this count does not favour `group_m = 8` over 1, and A and B together are not much
# larger than L2. Yet the H100's sweep (below) records a gain for grouping at that size, which this count does
# not explain. Nsight Compute's counters at `group_m` 1 and 8, where recorded:

# %%
from cudabook import profile

_ = profile.variants("gemm", "06_warp_specialized", [{"group_m": 1}])

# %% [markdown]
# On the H200 they recorded, row-major order reads a little less from DRAM than the grouped one and takes about
# a percent longer, in the profile and in that card's sweep below alike: there the order matters little, and
# not through DRAM bytes. The large gain is in the H100's sweep. The H100 has less L2 than the H200 (the L2
# sizes are in each card's record; A and B together at this size are a little larger than the H200's L2 and
# about a quarter larger than the H100's) and less DRAM bandwidth. Either may make bytes that cost the H200
# nothing cost the H100 time; which one, if either, is open until the same counters are recorded on an H100.


# %% [markdown]
# ## One block, measured
#
# Stamps as in rung 05, placed in this kernel (`s06.STAMPS`), each state again lasting from its stamp to the
# warpgroup's next. The producer is in *wait empty* while it waits for a free stage and in *issue* from then
# until its next wait: the stage's `expect_tx`, its TMA copies issued (they run on after), the step of the
# ring. Each consumer is in *tile* from just after its accumulators are zeroed to its first wait, *wait full*,
# *mma* (the k-tile's wgmmas issued and `wait<0>`), *release* (its arrive on the empty barrier and the step of
# the ring) and *epilogue* (its stores, and the next tile's set-up). The cell draws one block of a run at 4096³
# (`tools/probe_stamps.py`), whole and its first microseconds.
#
# Read it tile by tile. Within a tile the consumers' *mma* stripes run side by side, sharing the tensor cores,
# and no barrier holds one back for the other at every k-tile: they are tied only through the ring, where a
# stage is refilled once both have read it. At each tile's end both consumers are in their epilogue at once, so
# for that stretch no wgmma of this block runs (each `wait<0>` has drained its own), and the producer, which has
# already filled every stage with the next tile's first k-tiles, waits for an empty one. That is the part rung
# 07's TMA store shortens; a schedule that ran one consumer's epilogue under the other's next tile could hide
# it.

# %%
from cudabook import timeline

_ = timeline.show_stamps("gemm", "06_warp_specialized", window_us=6)

# %% [markdown]
# ## Experiments
#
# The ring depth (`stages`), the grouped order (`group_m`: 1 is plain row-major order) and the register split
# (`consumer_regs`). The split must fit the registers the block was launched with, not the whole register file:
# `setmaxnreg.inc` takes only from its own block's pool. Launched with `__launch_bounds__(384, 1)`, each thread
# starts with 168 (65,536 / 384, rounded down to a multiple of 8), so producer + 2 x consumer <= 3 x 168 = 504:
# 40 + 2 x 232 fits exactly; 32 + 2 x 240 = 512 would leave a consumer waiting in `setmaxnreg.inc` for ever, and
# the launch refuses it.

# %%
gemm.sweep("06_warp_specialized", "stages", [2, 3, 4])
gemm.sweep("06_warp_specialized", "group_m", [1, 4, 8, 16])
