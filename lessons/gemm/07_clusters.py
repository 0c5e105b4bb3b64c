# %% [markdown]
# # GEMM 07 · Clusters, multicast and a TMA store: near cuBLAS speed
#
# Rung 06 keeps the tensor cores busy most of the time. What is left is in the edges: bytes that cross from
# L2 more often than they need to, and an epilogue during which a warpgroup stores instead of multiplying.
# This rung changes three things, each measured:
#
# 1. **Thread-block clusters** (sm_90): blocks launched as a group of 2, scheduled together on SMs of one GPC
#    (graphics processing cluster), guaranteed to run at the same time, able to read and signal each other's shared memory (*distributed shared memory*).
#    The two blocks of a cluster take tiles one above the other, so they need **the same B tile**.
# 2. **TMA multicast**: each block's producer loads only its half of B's boxes and TMA delivers every box
#    into **both** blocks' shared memory (`.multicast::cluster` with a mask of the receiving blocks). B crosses
#    from L2 once per cluster instead of once per block.
# 3. **A TMA-store epilogue**: the consumers write their bf16 results into shared memory (with `stmatrix`, in
#    the swizzled layout TMA expects) and one thread stores each 64 x 64 box with `cp.async.bulk.tensor`
#    (global <- shared). TMA clips whatever lies outside C, so no masks, and the store runs in the background
#    while the consumers start the next tile.
#
# ```
#   cluster of 2 (same B columns, rows m0 and m0 + 128)
#   block 0 producer: A rows m0     -> own smem      block 1 producer: A rows m0+128 -> own smem
#                     B boxes 0, 1  -> both blocks                      B boxes 2, 3  -> both blocks
#   full[s] (each block) expects its whole stage: its A box + all 4 B boxes, whoever sent them
#   empty[s] (each block) counts 2 consumers x 2 blocks: a stage is refilled only when every block is done
# ```
#
# PTX ISA: [clusters](https://docs.nvidia.com/cuda/parallel-thread-execution/index.html#cluster-of-cooperative-thread-arrays),
# [cp.async.bulk.tensor with .multicast::cluster](https://docs.nvidia.com/cuda/parallel-thread-execution/index.html#data-movement-and-conversion-instructions-cp-async-bulk-tensor),
# [mapa](https://docs.nvidia.com/cuda/parallel-thread-execution/index.html#data-movement-and-conversion-instructions-mapa),
# [stmatrix](https://docs.nvidia.com/cuda/parallel-thread-execution/index.html#warp-level-matrix-instructions-stmatrix).

# %%
import cudabook
print(cudabook.where())

from cudabook import gemm, lesson, nvrtc, tma
from cudabook.gemm import s07_clusters as s07

# %% [markdown]
# ## The release that spans the cluster
#
# The new rule of the ring: block 1's producer multicasts into block 0's stage `s`, so it must not do that
# while block 0's consumers still read it. Each consumer warpgroup therefore arrives on `empty[s]` of **every**
# block of the cluster (an `mbarrier.arrive` on a shared address of the peer block, made with `mapa`), and
# `empty[s]` expects `CONSUMERS x CLUSTER` arrivals. Lab 07 is this loop body.
#
# One detail was costly the first time: the arrive on a peer's barrier was written with `.release.cluster`
# semantics, which compiles to a GPU-wide memory barrier (`MEMBAR.ALL.GPU`) before every arrive. When this
# rung was built on an H100 that halved its speed (a measurement not kept in `results/`; the cells below show
# the arrive, and the extra barriers in the SASS). The arrive orders nothing the producer needs: the consumer wrote
# nothing to the stage, and `wgmma.wait_group` has already said its reads are finished. So `.relaxed.cluster`
# is enough.

# %%
lesson.show_region(s07.source())                     # 07's region (08's, in the same file, is tag="08_fp8")
lesson.show_region((nvrtc.INCLUDE / "tma.cuh").read_text(), start="void mbar_arrive_cluster",
                   end=':: "r"(bar), "r"(cta)', context=1)

# %% [markdown]
# The same kernel compiled four ways (no GPU needed): count the memory barriers ptxas emits, and compare each
# build's SASS with the relaxed one. The last form, with no qualifier, is what CUTLASS's `ClusterBarrier::arrive`
# writes for a peer block's barrier; PTX reads it as `.release` at `.cta` scope.

# %%
hopper, copies = ((nvrtc.INCLUDE / name).read_text() for name in ("hopper.cuh", "tma.cuh"))
forms = ("mbarrier.arrive.relaxed.cluster", "mbarrier.arrive.release.cluster", "mbarrier.arrive.release.cta",
         "mbarrier.arrive")
texts = [s07.source().replace('#include "hopper.cuh"', hopper.replace(
    '#include "tma.cuh"', copies.replace("mbarrier.arrive.relaxed.cluster", form))) for form in forms]
cubins = nvrtc.in_threads([lambda text=text: s07.compile_cubin(source_text=text) for text in texts])  # side by side
relaxed = None
for form, cubin in zip(forms, cubins):
    found = nvrtc.sass_lines(cubin, "MEMBAR", kernel=s07.KERNEL)
    code = nvrtc.sass_lines(cubin, "", kernel=s07.KERNEL)
    relaxed = relaxed or code
    print(f"{form:32s} {sum('MEMBAR.ALL.GPU' in x for x in found)} x MEMBAR.ALL.GPU, "
          f"{sum('MEMBAR.ALL.CTA' in x for x in found)} x MEMBAR.ALL.CTA, "
          + ("the same SASS as .relaxed.cluster" if code == relaxed else f"{len(code)} SASS lines, not the same"))

# %% [markdown]
# Only `.release.cluster` adds barriers; the CTA-scoped release and the relaxed arrive are the same machine code. So
# is the relaxed arrive *proven* safe? Not by the PTX memory model: there, neither a relaxed arrive nor a release at
# `.cta` scope (a scope the peer block is outside of) orders this consumer's reads before the producer's later
# writes into the stage. It would take a `.release.cluster` arrive matched by an `.acquire.cluster` wait (this
# kernel's `mbarrier.try_wait` is CTA-scoped), and even that speaks of the generic proxy, while the wgmmas read and
# TMA writes through the async proxy. The argument is about the hardware instead: the reads were made by the wgmmas,
# and `wgmma.wait_group` returns only once those have completed, their operands read; nothing is left in flight for
# a later write to overtake. The CUTLASS form rests on the same argument. (The CPU emulator cannot weigh it either
# way: it runs each instruction to completion, so it has no reordering to show.)

# %% [markdown]
# ## The maps: A, B, and now C
#
# The store needs a third tensor map, over C, with a 64 x 64 box (128 bytes wide: the swizzle span again).

# %%
for name, args in s07.tensor_maps(4096, 4096, 4096).items():
    a = dict(args)
    tma.check_tiled(a.pop("dtype"), a.pop("shape"), a.pop("strides"), a.pop("box"), **a)
    print(f"{name}: shape {args['shape']}, box {args['box']}, swizzle {args['swizzle']}: accepted")

# %% [markdown]
# ## In SASS
#
# `UTMALDG.2D.MULTICAST` is the multicast load, `UTMASTG.2D` the store, `STSM` the `stmatrix` staging,
# `UTMACMDFLUSH` the commit of the bulk store group.

# %%
cubin = s07.compile_cubin()
for pattern in ("UTMALDG.2D.MULTICAST", "UTMASTG", "UTMACMDFLUSH", "STSM", "HGMMA", "USETMAXREG"):
    found = nvrtc.sass_lines(cubin, pattern, kernel=s07.KERNEL)
    print(f"{pattern:22s} x{len(found):<3} e.g. {found[0] if found else '(none)'}")
print(nvrtc.resource_usage(cubin)[s07.KERNEL])

# %% [markdown]
# ## Right?

# %%
why = gemm.unavailable("07_clusters")
if why:
    print("Not run here:", why)
else:
    for M, N, K in ((1, 1, 1), (129, 257, 72), (100, 200, 7), (1000, 1000, 1000)):
        a, b = gemm.random_problem(M, N, K)
        print(f"M={M} N={N} K={K}:", gemm.judge(gemm.run("07_clusters", a, b), a, b).message.splitlines()[0])

# %% [markdown]
# ## The whole ladder against cuBLAS
#
# On a Hopper GPU, rungs 06 and 07 and cuBLAS are measured now, and rungs 01 to 05 come from this card's
# record (‡). Elsewhere, the records in `results/`, each with the GPU and commit it was measured on.

# %%
gemm.ladder_so_far("07_clusters", peers=True)

# %% [markdown]
# How near is near? The ladder sets each rung's median time against cuBLAS's median, each timed in its own turn
# of the same run. Two kernels this close can differ by less than the card drifts between those turns, so a
# record may also hold a **head-to-head**: 07 and cuBLAS timed again in interleaved rounds (each round times one,
# then the other, the next round the other way round), and the median of the rounds' ratios (cuBLAS's time over
# 07's: above 1, 07 is ahead). Both, from every
# record, with the spread of the rounds' times:

# %%
from cudabook import results

for record in results.load_all():
    for wname, w in record["workloads"].items():
        if w.get("track") != "gemm" or "07_clusters" not in w.get("stages", {}) or "cublas" not in w.get("peers", {}):
            continue
        ours, theirs = w["stages"]["07_clusters"]["median_us"], w["peers"]["cublas"]["median_us"]
        print(f"{record['gpu']} at {w.get('commit') or record.get('commit')}, {wname}:")
        print(f"   medians of the ladder run   cuBLAS / 07 = {theirs / ours:.3f}x")
        for d in w.get("head_to_head", []):
            if d.get("stage") == "07_clusters" and d.get("peer") == "cublas" and "ratio" in d:
                each = [p / s for s, p in zip(d["stage_us"], d["peer_us"])]
                print(f"   interleaved, {d['rounds']} rounds      cuBLAS / 07 = {d['ratio']:.3f}x   (07 "
                      f"{min(d['stage_us']):,.1f}-{max(d['stage_us']):,.1f} µs, cuBLAS "
                      f"{min(d['peer_us']):,.1f}-{max(d['peer_us']):,.1f} µs over the rounds; the rounds' ratios "
                      f"{min(each):.3f}-{max(each):.3f})")
                held = d.get("sustained")
                if held:
                    print(f"   back to back, {held['seconds']:g} s each   cuBLAS / 07 = {held['ratio']:.3f}x   ("
                          f"{', '.join(held['order'])}: 07 {', '.join(f'{u:,.1f}' for u in held['stage_us'])} µs a "
                          f"call, cuBLAS {', '.join(f'{u:,.1f}' for u in held['peer_us'])})")

# %% [markdown]
# Read the head-to-head where there is one. At 4096 its rounds hardly spread, and 07 is a little behind cuBLAS.
# At 8192 the times spread much wider from round to round (lesson 09 shows the H200's clock held down by its
# power cap under this load), so look at the range of the rounds' ratios. The H200's record since Stream-K
# (`stream_k`, the last section) has 07 ahead in every round, by a few percent, while the ladder run's medians,
# each kernel timed in its own turn minutes apart, put it behind: the two measures differ by more than the gap,
# and why is not measured (how each kernel's power draw meets the cap is one candidate). The H100's record has
# no head-to-head and predates Stream-K: its ratios are those of the medians alone, and at 8192 they put 07
# clearly behind cuBLAS.
#
# A third measure is what a long job would see: each kernel run back to back for seconds, so that both meet the
# power cap and settle. Records since f44d140 hold it (the "back to back" line: cuBLAS, 07, 07, cuBLAS, two
# seconds each after half a second untimed), and it is the comparison to quote. A reading adds the SM clock and
# the power beside it, with runs of three seconds (`tools/probe_clocks.py --rung 07_clusters` on the
# benchmark's inputs; lesson 09 explains the clock):

# %%
print("\n".join(results.sustained_lines("gemm", "07_clusters")) or "no such reading in results/readings/ yet")

# %% [markdown]
# Run for seconds, 07 runs at a lower SM clock than cuBLAS for the same power. At 8192³ it does more work a
# clock; at 4096³ about the same, so the lower clock leaves it behind. At 8192³ its lead is smaller than in the
# rounds; at 4096³ it is a little further behind. Two seconds of a kernel is over a thousand of its calls, and
# the record's two back-to-back runs of each agree with each other to a fraction of a percent, where at 8192³
# the rounds' ratios spread by several: on the H200 those rounds are an upper end, not the lead a long job sees.

# %% [markdown]
# ## Which change paid?
#
# Switch each one off and measure: `cluster=1` (no cluster, no multicast), `multicast=0` (clusters, but every
# block loads its own B), `tma_store=False` (06's register stores), `stmatrix=False`, `mma_depth=0` (wait for
# each k-tile's wgmmas before issuing the next). When this rung was built on an H100 (measurements not kept in
# `results/`), clusters of 2 were the big step, multicast added a little at 8192, and `stmatrix` and
# `mma_depth` were within the noise. The sweeps below, recorded in results/sweeps/, measure three of the
# switches at 4096: on the H100 the TMA store is about as large a step as the cluster, on the H200 it is by far
# the larger. Check on your GPU.

# %%
gemm.sweep("07_clusters", "cluster", [1, 2, 4])
gemm.sweep("07_clusters", "multicast", [0, 1, 2])
gemm.sweep("07_clusters", "tma_store", [False, True])

# %% [markdown]
# ## What the profiles say
#
# Times alone say which switch pays, not why. Nsight Compute's counters of each switch, recorded on a card at the
# lesson's size (`python -m cudabook.profile --record gemm 07 --params '{"cluster": 1}'` and so on; the line of
# each command is printed where a setting is not recorded yet):

# %%
from cudabook import SIMULATOR, profile

found = profile.variants("gemm", "07_clusters", [{"multicast": 0}, {"cluster": 1}, {"tma_store": False},
                                                 {"cluster": 1, "tma_store": False}, {"cluster": 4},
                                                 {"cluster": 1, "group_m": 16}])
if not SIMULATOR and not gemm.unavailable("07_clusters"):
    from cudabook.gemm import s07_clusters as s07
    a, b = gemm.random_problem(4096, 4096, 4096)
    for c in (1, 2, 4):                    # how many clusters of each size this GPU holds at once
        s07._clusters.clear()
        gemm.run("07_clusters", a, b, cluster=c)
        print(f"cluster={c}: {list(s07._clusters.values())[0]} clusters at once "
              f"(cuOccupancyMaxActiveClusters), {c * list(s07._clusters.values())[0]} blocks on SMs")

# %% [markdown]
# Read it column by column. The card is in the table's header and the commit on each line; the readings below
# are those of the card this lesson was written against (an H200; its variants recorded again at commit
# 175a57f), and the H100's sweeps above already differ: there the cluster is a much larger step than on the H200.
#
# - **DRAM is not the limit on the H200.** In every variant DRAM runs at a fraction of its peak. Clusters of 2
#   read about a fifth fewer bytes from DRAM than no cluster, but those bytes are not what the time is made of
#   there. The H100 has less L2 and less DRAM bandwidth, either of which may be why the cluster pays more on it:
#   open until these counters are recorded on an H100.
# - **That DRAM saving does not come from multicast.** With `multicast=0` DRAM reads stay at the defaults'. Two
#   things remain that could explain it: the two blocks of a cluster read the same B boxes at about the same
#   moment, so the second read finds them in L2; and the tile order changes with the cluster, because `group_m`
#   counts cluster rows (a group is 8 tile rows without a cluster, 16 with clusters of 2), and lesson 06's count
#   gives the taller group fewer distinct panels a wave. The last line separates the two: `cluster=1,
#   group_m=16`, no cluster but the clusters' tile order, reads as few bytes from DRAM as the defaults (H200,
#   commit 175a57f, as first found at 0113109). So the saving is the tile order's, and a cluster of 2 gets it
#   only because `group_m` counts cluster rows. What multicast saves is the second trip from L2 to the SMs (the
#   defaults' L2 hit rate is lower than `multicast=0`'s most likely because those second reads, all hits, are
#   gone). It is worth one to two percent on both cards' sweeps.
# - **The TMA store is the largest single step on the H200.** Without it, the cluster is worth almost nothing
#   there: the consumers' register stores hold up the next tile's MMAs, and with the epilogue on the critical
#   path, how B arrives matters little. Once the store runs in the background, the loads are what is left to
#   hide, and the cluster helps. (This is the likely reading of the 2 x 2 of `cluster` and `tma_store`; no
#   counter above shows the epilogue's share directly.)
# - **Clusters of 4 lose for two reasons, both in the launch and the tile order.** The lines printed on a GPU
#   above say how many clusters fit at once (on the H200 this lesson was read on, at commit d762ab7: 30 clusters
#   of 4, so 120 of its 132 SMs, the grid its `cluster=4` profile in results/profiles/variants/ was launched
#   with: a cluster must sit inside one GPC, and a GPC's SM count is not always a multiple of 4). At 4096³ there
#   are 128 cluster tiles of 4 for 30 clusters, so the busiest clusters do 5 where clusters of 2 do at most 4 of
#   theirs: up to a quarter more time, of which the idle SMs are a smaller part. And since
#   `group_m` counts cluster rows, a group of 8 clusters of 4 spans all 32 tile rows of M, so each wave reads all
#   of A: DRAM reads rise and the L2 hit rate falls, as the `cluster=4` line shows.

# %% [markdown]
# ## One block, measured
#
# The stamps of rung 06 in this kernel (`s07.STAMPS`), with one difference in what *mma* covers. The k-loop
# keeps one group of wgmmas in flight: *mma* is the k-tile's wgmmas issued and `wait<1>`, which waits for the
# group before them, so the newest group still runs through *release* (which now arrives on the empty barriers
# of both blocks of the cluster) and *wait full*. After the last k-tile comes *drain*: the tile's last
# `wait<0>` and the release of its last stage. Drawn as in rung 06, from a run at 4096³:

# %%
from cudabook import timeline

_ = timeline.show_stamps("gemm", "07_clusters", window_us=6)

# %% [markdown]
# Against rung 06's picture, the epilogue is the part that shrank: the results go to shared memory and one
# thread's TMA store takes them from there, so the consumers start the next tile sooner. The share of *mma*
# barely moved, and the time the epilogue gave back went to *wait full* and *release* (the shares printed here
# and in lesson 06). The two *mma* shares are not the same measure, though: here the tensor cores also work
# through the states after *mma*, so that share, and the line "at least one warpgroup in the state mma",
# undercount them. What the stripes cannot show is where the stages' bytes come from: with the cluster, fewer
# from DRAM, and with multicast, B's boxes cross from L2 once a cluster (the profiles above).

# %% [markdown]
# ## Past cuBLAS? What it runs, and three tries
#
# At 4096³ this rung is a little behind cuBLAS (the head-to-head above). First: what does cuBLAS run there?
# PyTorch's profiler names every kernel a call launches (a reading, `tools/probe_peer_kernels.py`):

# %%
_ = results.show_peer_kernels("gemm", "07_clusters")

# %% [markdown]
# NVIDIA does not document these names, but read as tile, k-step, stages and cluster they suggest this rung's
# own design. cuBLAS works on column-major matrices, and PyTorch hands it the row-major `A @ B` as `Bᵀ Aᵀ`, so
# the first tile dimension in the name runs along this lesson's N: `256x128` would be a 128 × 256 tile, `64x4`
# a k-step of 64 and 4 stages, `1x2` clusters of two along its N (this lesson's M, as here), and `coop` the
# cooperative schedule, two consumer warpgroups sharing each tile. At 8192 the name suggests a wider tile (128 ×
# 320, 320 along this lesson's N) and 3 stages. If that reading is right, cuBLAS shares this rung's tile, k-step,
# stages and cluster shape at 4096, and the gap lies in what a name cannot show (its schedule, tile order,
# epilogue).
#
# One detail the stamps above do show: once a tile, both consumer warpgroups stage and store their results at
# the same moment, and no wgmma runs meanwhile. Three edits of this kernel try to hide that, each in
# `tools/kernel_edits/` and each timed against the rung in the same interleaved rounds by
# `tools/probe_kernel_edit.py` (right against the float64 reference, both of them, every time):
#
# - **Ping-pong** (`gemm07_pingpong.py`, CUTLASS calls this schedule ping-pong): each warpgroup owns a 64-row half
#   of the tile, the producer loads the halves one after the other, and the warpgroups take turns, one running
#   its k-loop while the other stores and waits; a named barrier passes the turn. `_5stages` is the same with
#   five stages, which now fit.
# - **One fence a tile** (`gemm07_one_fence.py`): all four boxes staged (which leaves room for 3 stages), then
#   one fence, one barrier, four stores (the rung timed at the same 3 stages).
# - **Deferred epilogue** (`gemm07_deferred_epilogue.py`): the results rounded to bf16 pairs at once, the next
#   tile started, and box b stored after the new tile's k-tile b is issued. `gemm07_deferred_consumers_first`
#   is the same with the consumers' branch of the role split first in the source, and `gemm07_consumers_first`
#   that reordering alone, as a control (why it matters: below).
# - **Programmatic dependent launch** (`gemm07_pdl.py`, lower in the list; PTX ISA, `griddepcontrol`): each block
#   waits for the grid before it right after its barriers exist, then lets the next grid be launched, and the
#   host launches with PDL, so that back to back the next call's launch and set-up could run under this
#   call's last tiles.

# %%
_ = results.show_edits("gemm", "07_clusters")

# %% [markdown]
# Of the first three, one pays a little, one changes nothing, and ping-pong loses up to a fifth; each says
# something about this kernel. PDL changes nothing measurable at either size, most likely because between two
# calls queued back to back there is little left to hide: this kernel's set-up is a few barrier inits and one
# cluster barrier (not measured on its own).
#
# **Ping-pong loses most.** A half's stage holds a 64-row A box beside the whole 256-column B, so B's boxes
# cross from L2 once a half instead of once a tile; and a ring of four such stages holds about half the
# tensor-core time of four whole-tile stages, so the loads have less time to arrive. Five stages win back part
# of the loss. Nsight Compute, one launch of each at 4096³ (a reading; Nsight Compute holds the clock at the
# card's base clock):

# %%
def pingpong_counters():
    """The rung and the ping-pong edit side by side, from Nsight Compute's reading of one launch each."""
    for rd in results.readings("gemm", "07_clusters", "pingpong_ncu"):
        rung, edit = rd["launches"]["rung"], rd["launches"]["edited"]
        print(f"{rd['gpu']}, commit {rd['commit']}, {rd['workload']}:")
        for key, label in (("Duration [ns]", "time (µs)"), ("SM Frequency [hz]", "SM clock (GHz)"),
                           ("lts__t_bytes.sum [byte]", "bytes through L2 (GB)"),
                           ("L2 Cache Throughput [%]", "L2 throughput (% of peak)"),
                           ("Compute (SM) Throughput [%]", "SM throughput (% of peak)")):
            scale = {"Duration [ns]": 1e-3, "SM Frequency [hz]": 1e-9, "lts__t_bytes.sum [byte]": 1e-9}.get(key, 1)
            print(f"   {label:28s} rung {rung[key] * scale:8.2f}   ping-pong {edit[key] * scale:8.2f}"
                  f"   ({edit[key] / rung[key]:.2f}x)")


pingpong_counters()

# %% [markdown]
# At the base clock the ping-pong is much nearer the rung than in the probe at full clock above, and L2 is busy
# but not saturated. A loss that grows with the SM clock is what loads that come too late would cause: the
# tensor cores finish a stage sooner, the loads take as long in nanoseconds as before. That reading fits the
# counters and the five-stage result; it is not proved here.
#
# **One fence a tile changes nothing**: the epilogue's four fences and barriers are not what it costs.
#
# **The deferred epilogue spills, until the branches swap.** Its bf16 pairs need 64 registers beside the 128
# accumulators. `setmaxnreg` grants a consumer 232 at run time, but how many the consumer code may use is
# ptxas's decision when it compiles, and with the producer's branch first in the source it held that code to
# about 184 and spilled the rest to the stack. Attention 06 met the same on these compilers ("The register
# budget" there), and the same way out works here: with the consumers' branch first, ptxas lets the consumer
# code name registers up to about R212 and nothing spills. The highest register the consumer code names, and
# the stack, for each build:

# %%
import re

from cudabook import edits


def consumer_registers(cubin):
    """The highest register named from the consumers' USETMAXREG.TRY_ALLOC on (up to a DEALLOC, if any), and
    the spill instructions (STL/LDL) in the whole kernel."""
    sass = nvrtc.sass_lines(cubin, r".", kernel=s07.KERNEL)
    a = next(i for i, x in enumerate(sass) if "USETMAXREG.TRY_ALLOC" in x)
    b = next((i for i in range(a, len(sass)) if "USETMAXREG.DEALLOC" in sass[i]), len(sass))
    top = max(int(r) for x in sass[a:b] for r in re.findall(r"\bR(\d+)\b", x))
    return top, sum(bool(re.match(r"(@\S+ )?(STL|LDL)\b", x)) for x in sass)


for label, text in (("rung 07", None), ("deferred epilogue", edits.edited_source("gemm07_deferred_epilogue")),
                    ("deferred, consumers first", edits.edited_source("gemm07_deferred_consumers_first"))):
    cub = s07.compile_cubin(source_text=text)
    usage = nvrtc.resource_usage(cub)[s07.KERNEL]
    top, spills = consumer_registers(cub)
    print(f"{label:26s} consumer code up to R{top}, {spills} STL/LDL, {usage['stack']} bytes of stack")
    print(f"{'':26s} ptxas: {nvrtc.compile_log(cub).strip() or '(nothing)'}")

# %% [markdown]
# Without the spills the deferred epilogue is a little faster than the rung at 4096³, in every round; the
# reordering alone changes nothing (the probes above). At 8192³ the rung now shares out its last wave (Stream-K,
# the next section) and the same edit is far slower there: the compiler serializes its wgmmas, as the end of
# the next section shows. Hiding the epilogue won about a percent at 4096³, less than its share of the
# stamps (an upper bound: the stamps' own cost falls partly in it). Where the rest went was not measured; one
# candidate is in the log printed above, a `wgmma.wait_group` the compiler injected into that build. A
# percent is about the size of the gap to cuBLAS at 4096³, but it was measured in other runs than the
# head-to-head and gives no lead, so the rung keeps its simpler epilogue.

# %% [markdown]
# ## The last wave: Stream-K
#
# The other place a percent can hide is the tail. At 4096³ there are 256 cluster units (256 × 256) for 66
# clusters: three whole waves and a fourth of 58 units, so for one unit's time 8 clusters have nothing to do,
# about 3 % of the kernel (lesson 09 counts this for every size). At 8192³, 1,024 units make 15 whole waves and a
# 16th of 34: half the clusters idle for one unit's time. **Stream-K** (Osama et al., PPoPP 2023) shares work
# out by k-tiles instead of by units. This rung does it as the paper's "data-parallel + one-tile Stream-K"
# hybrid, its setting `stream_k` (the kernel's `#if STREAM_K`): every whole wave runs as before; the k-tiles of
# the units left over are laid end to end and cut into one equal range a cluster (to within a k-tile), so the
# clusters stop at about the same moment. At 8192³ that is 34 × 128 = 4,352 k-tiles over 66 clusters, about 66
# each, half a unit: a leftover unit is usually cut in three (one cluster's whole range inside it).
#
# A unit cut in pieces is summed in pieces. Every piece but the one holding the unit's last k-tile parks its
# float32 sums in a workspace (a slot a consumer warpgroup, each thread its own BN / 8 `float4`s) and raises a
# flag; the last piece waits for the flags of the clusters before it whose ranges reach into the unit, adds
# their sums and stores the tile (the mirror of the paper's fix-up, where the first piece's block waits). Order
# makes the waits short and safe: each cluster walks its range from the end back, so its first item is the only
# one that may park and its last the only one that may wait; a wait is only ever for a lower-numbered cluster's
# first item, which waits for nothing; and the grid holds no more clusters than fit at once, so that cluster is
# running. The last piece copies the parked sums into the ring, free by then, with `cp.async` (many in flight,
# no registers held) and adds them from there. The kernel's pieces:

# %%
text = s07.source()
for name in ("struct StreamK", "__device__ __forceinline__ void park", "__device__ __forceinline__ void add_parked"):
    at = text.index(name)
    print(text[at:text.index("\n}", at) + 2] if name != "struct StreamK" else text[at:text.index("\n};", at) + 3])
    print()

# %% [markdown]
# **When does it pay?** Stream-K can save at most the idle part of the last wave, and it costs time of its own
# (parking, waiting, adding, and more, below). `stream_k="auto"` turns it on where the last wave is at most
# 1 − `s07.FIXUP_UNITS` full, a cost of about a quarter of a unit's time measured on an H200 (the derivation is
# printed below), and only after a whole wave (the smaller problems were not measured). How it runs at the two
# sizes of the benchmark (on a Hopper GPU, asked of this card; elsewhere, the arithmetic for 66 clusters):

# %%
for n in (4096, 8192):
    if s07.unavailable() is None:
        how = s07.how_it_runs(n, n, n)
    else:
        how = s07.schedule(s07.config(), s07.PARAMS, n, n, 66)
    print(f"{n}³: {how['units']} units on {how['clusters']} clusters = {how['whole_waves']} whole waves and "
          f"{how['last_wave']} units more; Stream-K {'on' if how['stream_k'] else 'off'}")

# %% [markdown]
# Measured against cuBLAS in the same interleaved rounds, off, on where it pays (the default) and forced on
# (readings of two runs on the same card, `tools/probe_head_to_head.py`); FP8, rung 08, runs the same kernel with
# the same setting:

# %%
def stream_k_settings():
    for stage in ("07_clusters", "08_fp8"):
        for rd in results.readings("gemm", stage, "stream_k_settings") + results.readings("gemm", stage, "stream_k_settings_rerun"):
            print(f"{rd['gpu']}, {stage} at commit {rd['commit']}, {rd['kind']}:")
            for case in rd["cases"]:
                size = "x".join(str(v) for v in case["size"].values())
                for key, ratio in case["ratios"].items():
                    peer, variant = key.split(" / ")
                    us = case["us"][f"{stage} {variant}"]
                    print(f"   {size:16s} {variant:20s} {peer} / {stage[:2]} = {ratio:.3f}x   "
                          f"({min(us):,.0f}-{max(us):,.0f} µs over the rounds)")


stream_k_settings()


def stream_k_cost():
    """Stream-K's cost in units of a unit's time, from the rounds: off takes W + 1 units' time, on takes
    W + R / clusters + the cost (W whole waves, R units left over), and on / off is the ratio of the medians'
    ratios to the peer (the same peer's rounds)."""
    for rd in (results.readings("gemm", "07_clusters", "stream_k_settings")
               + results.readings("gemm", "07_clusters", "stream_k_settings_rerun")):
        print(f"{rd['gpu']} at commit {rd['commit']}:")
        for case in rd["cases"]:
            n, fit = case["size"]["M"], 66
            units = (n // 256) ** 2
            whole, left = divmod(units, fit)
            on = '{"stream_k": true}' if left / fit > 1 - s07.FIXUP_UNITS else "{}"
            ratio = case["ratios"][f'cublas / {on}'] / case["ratios"]['cublas / {"stream_k": false}']
            cost = (whole + 1) / ratio - whole - left / fit
            print(f"   {n}³ ({whole} whole waves + {left}/{fit}), on {'(forced)' if on != '{}' else '(auto)'} / off = "
                  f"{ratio:.3f}: the cost is {cost:.2f} of a unit's time")


stream_k_cost()

# %% [markdown]
# At 4096³, forced on, Stream-K loses in every round of both bf16 runs and of the one FP8 run that measured it, and
# the cost it implies is about the same in both bf16 runs: there is only an eighth of a unit to win, and the cost is
# larger. At 8192³ both runs put "auto" ahead of "off" by the medians, bf16 and FP8, but by different amounts, so
# the cost they imply differs too: the rounds there spread by more than the gain (the power cap), so read it as a
# small gain whose size these runs do not pin down. On this card and these two sizes "auto" picks the faster side by
# the medians. The threshold is one measured cost on one card, not a model of every shape. (At 8192³ "auto" and
# forced on run the same kernel: the difference between their two lines is the rounds' own spread.)
#
# **Two forms measured before this one.** The paper's "two-tile Stream-K + data-parallel" hybrid shares out
# more than the last wave: all but one whole wave run as usual and the remaining one to two waves are cut into
# ranges of at least a unit (`gemm07_stream_k`, an edit of this kernel, timed against the rung with Stream-K
# on, printed with the other edits above: within half a percent, a hair behind in every round at 4096³). Its
# first version, measured against the rung without Stream-K, read a third more from DRAM (Nsight Compute, one
# launch each; the first line), since its clusters work on twice as many units at a time as a wave holds;
# sharing the last wave alone (the second line, an earlier version of this rung's form) nearly restores the
# rung's DRAM bytes:

# %%
def stream_k_counters():
    for rd in results.readings("gemm", "07_clusters", "stream_k_ncu"):
        print(f"{rd['gpu']}, {rd['workload']}, one launch each:")
        for edit, got in rd["launches"].items():
            r, e = got["rung"], got["edited"]
            print(f"   {edit:28s} (commit {got['commit']}): DRAM read rung {r['dram__bytes_read.sum [byte]'] / 1e6:6.1f} MB,"
                  f" edit {e['dram__bytes_read.sum [byte]'] / 1e6:6.1f} MB; L2 hit rate {r['lts__t_sector_hit_rate.pct [%]']:.1f} %"
                  f" / {e['lts__t_sector_hit_rate.pct [%]']:.1f} %; an SM's active cycles (average) "
                  f"{e['SM Active Cycles [cycle]'] / r['SM Active Cycles [cycle]']:.3f}x the rung's")


stream_k_counters()

# %% [markdown]
# DRAM is far from its limit on the H200 (above), and the two forms now time within half a percent of each other, so
# those bytes were most likely not what it cost (the rewritten two-wave edit's bytes were not measured). The fix-up
# is one part of the cost. The stamps of a block whose last item is a last piece (a reading, block 64, with extra
# stamps in the fix-up) show it: after its last wgmma the block waits for the flag, adds the parked sums and stores.
# Reading the sums straight into registers (`__ldcg`, the first two lines) took several times as long as the whole
# epilogue, most likely because with 128 accumulators live the consumer code has few registers left for loads in
# flight (not measured). Copying them into the ring with `cp.async` and adding from there (the last two lines, the
# form this rung keeps) cut that by more than half.
#
# That leaves a gap this lesson does not close. What is left of the fix-up in the stamps is a small part of a
# unit's time (the kernel at 4096³ takes four units' time, so a unit is a quarter of its duration), yet
# Stream-K costs about a quarter of a unit, and Nsight Compute's last column above (of the earlier, `__ldcg`
# version) shows where it goes: the SMs are active longer on average than in the rung, for the same
# multiply-adds, and that column's excess over 1, times the rung's average active time (just under four units),
# is about the quarter unit again. Active cycles count warps that spin, too. Whether those cycles go to slower
# k-loops in the pieces, to the spin on the flags, or to the pieces' extra starts and stops is not measured.

# %%
def fixup_stamps():
    for kind in ("stream_k_stamps_ldcg", "stream_k_stamps_cp_async"):
        for rd in results.readings("gemm", "07_clusters", kind):
            for wg in rd["warpgroups"][1:]:
                ev = wg["events"]
                last = max(i for i, (n, _) in enumerate(ev) if n == "epilogue")
                steps = ", ".join(f"{n} {(t2 - t) / 1e3:.1f}" for (n, t), (_, t2) in zip(ev[last:], ev[last + 1:]))
                print(f"{rd['gpu']} {rd['commit']} block {rd['block']} warpgroup {wg['warpgroup']} (µs): {steps}")


fixup_stamps()

# %% [markdown]
# **Stream-K and the deferred epilogue do not add up.** At 4096³, where Stream-K is off, the deferred epilogue
# (consumers first) is a little ahead of the rung; at 8192³, where it is on, the same edit is far behind (the
# edits' table above). The compiler's log for that build says why: a "potential performance loss", its wgmmas
# *serialized* (each waited for before the next is issued), because of a wait it inserted on a divergent path:

# %%
cub = s07.compile_cubin(source_text=edits.edited_source("gemm07_deferred_consumers_first"), stream_k=True)
print("ptxas:", nvrtc.compile_log(cub).strip() or "(nothing)")

# %% [markdown]
# The line it names is a line of the PTX, and there it is not the Stream-K code at all but the `trap;` of the
# watchdog in `mbar_wait` (`tma.cuh`), which a consumer runs with a k-tile of wgmmas in flight: a thread whose
# wait timed out stops the kernel. Most likely ptxas treats the trap as an exit, and a thread may not leave
# while its wgmmas run, so it puts a wgmma wait on the trap's path; each thread decides its own timeout, so that
# path is divergent. Removing the trap alone removes the message; removing the park, the adds or the `continue`
# one at a time does not, and without Stream-K the same trap gets an injected wait (C7517, in the log printed
# earlier) but nothing is serialized. `gemm07_deferred_stream_k_uniform` keeps the watchdog but makes the
# consumers' wait a warp's decision: the warp leaves the spin when the phase is complete on all its lanes
# (`__all_sync`), votes on the timeout (`__any_sync`), and waits for its own wgmmas before the trap. Its log is
# empty and its k-loop's wgmmas are issued back to back again (SASS):

# %%
for name in ("gemm07_deferred_stream_k_uniform", "gemm07_uniform_wait"):
    cub = s07.compile_cubin(source_text=edits.edited_source(name), stream_k=True)
    print(f"{name:34s} ptxas: {nvrtc.compile_log(cub).strip() or '(nothing)'}")

# %% [markdown]
# Timed (the edits' table above, both under `stream_k="auto"`): the warp-wide wait alone
# (`gemm07_uniform_wait`) costs nothing measurable, and with it the pair is no longer far behind at 8192³ but
# still not ahead, while at 4096³ it keeps the deferred epilogue's small gain. Two changes that each pay make a
# new kernel for the compiler, not the sum of two gains: read the log of every build. The rung keeps Stream-K
# (a gain in the medians and in most rounds where the last wave is half empty) and its simpler epilogue.
