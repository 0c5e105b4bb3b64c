# %% [markdown]
# # Deformable attention 05 · Lane groups: unrolled rounds, no branches, more loads in flight
#
# Rung 02's layout was right: a group of G lanes per `(image, query, head)`, each lane one 16-byte vector of the
# head's channels, every corner one 16-byte load a lane, each sample worked out by one lane and handed to its
# group by warp shuffles. What held it back is **when** the loads can start. This rung keeps the layout and
# changes three things, then a fourth that the measurements below led to:
#
# - **Sizes compiled in.** D, L and P are compile-time constants (CUDA C++ through NVRTC, `-D`), so the loops
#   over levels and points are unrolled: a level's P samples, 4 P corner loads, are one straight line of code,
#   and the compiler can issue loads of later samples before the first ones are used.
# - **Branch-free corners.** Every corner is loaded; a corner off the map is loaded from a pixel on the map and
#   gets weight 0. No branch separates one sample's loads from the next sample's.
# - **Rounds with no waiting between them.** As in rung 02, each sample is worked out by one lane of its group and
#   handed on in five shuffles (here lane g takes two samples of a round of 2G), but the rounds are unrolled too,
#   so the shuffles of the next round need not wait for this round's corners to arrive. (The rung first went
#   further: every lane worked out every sample itself, with no shuffles at all. `branchless=False` still does
#   that, with branches; the measurements below show why the shuffles came back.)
# - **Two heads at a time.** Rung 02 took its items heads fastest: a warp served the 8 heads of one query. Here
#   a warp serves 4 neighbouring queries of two heads, and the blocks an SM holds read one or two pairs of heads'
#   maps, not all eight, so the L1 already holds more of the corners they ask for, and a warp's loads touch both
#   halves of their lines (measured below).
#
# PTX ISA: [ld.global.nc](https://docs.nvidia.com/cuda/parallel-thread-execution/index.html#data-movement-and-conversion-instructions-ld-global-nc)
# (`__ldg`), [cvt (bf16x2 packing)](https://docs.nvidia.com/cuda/parallel-thread-execution/index.html#data-movement-and-conversion-instructions-cvt);
# registers and occupancy: [Hopper tuning guide](https://docs.nvidia.com/cuda/hopper-tuning-guide/index.html).

# %%
import cudabook
print(cudabook.where())

import json
import re
import numpy as np
import matplotlib.pyplot as plt
from cudabook import SIMULATOR, emulate, lesson, msda, nvrtc, results
from cudabook.msda import benchmark
from cudabook.msda import s05_lane_groups as s05

size = benchmark.WORKLOADS[0]
N, Lq, M, P, D, levels = (size[k] for k in ("N", "Lq", "M", "P", "D", "levels"))
L = len(levels)

# %% [markdown]
# ## The kernel
#
# One thread per `(item, lane g)`. The items are numbered `(n, m / 2, q, m mod 2)`: two heads at a time, queries
# between them (head by head, `(n, m, q)`, when M is odd). Each still reads its own locations and weights and writes
# its own row of `out`, both laid out `(n, q, m)`. `base` is the byte address of channels `8g .. 8g+7` (one 16-byte
# `uint4`) of head m of pixel 0 of image n (row 0 of `value[n]`), and pixel `r` is at `base + r * pitch`, `pitch`
# being the bytes from one pixel to the next. `pitch` is a 64-bit variable that holds a 32-bit product, so the
# compiler makes each corner's address one 32 x 32 → 64-bit multiply-add (`IMAD.WIDE`); computed as a 64-bit product
# it cost the rung of then 531 more instructions a lane (one H200 record timed that build: slower than the rung before
# on `local`, faster on `uniform`). The item's L·P locations and weights are contiguous; the item numbers are 32-bit
# (`launch` refuses 2**31 threads or more), as 64-bit divisions cost hundreds of instructions.

# %%
source = s05.source()
lesson.show_region(source, start='extern "C" __global__', end="float acc[8 * VPL];")

# %% [markdown]
# Which items a warp serves, in the two orders (the benchmark's D = 32: G = 4 lanes an item, 8 items a warp; the
# first 32 queries of an image and its 8 heads, each cell one item, coloured by the warp that serves it):

# %%
G, Q = s05.group_lanes(D), 32
per_warp = 32 // G
fig, axes = plt.subplots(1, 2, figsize=(11, 2.6), sharey=True)
for ax, (title, warp_of) in zip(axes, (
        ("heads fastest (rung 02, and rung 05 at first):\na warp = the 8 heads of one query",
         lambda q, m: (q * M + m) // per_warp),
        ("two heads at a time (rung 05): a warp = 4 neighbouring\nqueries of heads 2k and 2k + 1",
         lambda q, m: ((m // 2) * Lq * 2 + q * 2 + m % 2) // per_warp))):
    grid = np.array([[warp_of(q, m) for q in range(Q)] for m in range(M)])
    ax.imshow(grid % 10, cmap="tab10", aspect="auto", interpolation="nearest")
    ax.set_title(title, fontsize=9)
    ax.set_xlabel("query q")
ax0 = axes[0]
ax0.set_ylabel("head m")
plt.tight_layout()
plt.show()

# %% [markdown]
# Heads fastest, the 16 queries of a 512-thread block and the blocks an SM holds at once read all 8 heads' maps;
# two heads at a time, a block's 64 queries read two heads' maps, and an SM's blocks one or two pairs. On
# `uniform` locations that is the difference between an L1 that holds about a fifth of what is asked and one that
# holds the small levels (measured further down; the rung went head by head first, one head a warp, and took the
# pairs later, for the L1's data pipe).

# %% [markdown]
# A level's P samples, branch-free (the part between the markers in `kernels/lane_groups.cu` is lab 05's):

# %%
lesson.show_region(source, end="#else")

# %% [markdown]
# - Round r: lane g works out samples `2(rG + g)` and the one after (`work_out`, a lambda, once for each). At even P
#   their two locations come in one 16-byte load and their two weights in one 8-byte load: a warp's load of them
#   touches one line an item, a wavefront of the L1's data pipe each, so loading two samples' worth at once halves
#   those wavefronts (measured under "Head by head" below). A lane with no samples in the round loads the level's last
#   two locations again (no predicate needed), sets its weights to 0 without loading them, and hands nothing on: the
#   loop over `j` stops at P, a compile-time bound. At odd P the pair's locations and weights each come in two loads.
# - `x0, y0` are forced to 0 for a sample wholly off the map (`on` false): `floorf` of a location far outside
#   would overflow an `int`, even if its four weights are zero.
# - `left`, `right`, `top`, `bottom` say which corners are on the map; an off-map corner's column or row is
#   clamped onto the map (`xl`, `xr`, `yt`, `yb`), so its address is always valid, and its weight is 0.
# - One int carries the top-left corner's row and the steps to the others: `row << 2`, bit 1 for a step down
#   (to `row + W`), bit 0 for a step right (to `row + 1`), a step of 0 where the right column or bottom row is
#   clamped. With the four weights that is five shuffles a sample (`launch` refuses a pyramid of 2**29 pixels or
#   more, whose rows would not fit).
# - `add_corner` widens each 32-bit word's two bf16 channels to float32 with one shift or one mask (bf16 is the
#   top half of a float32) and adds them, weighted: 8 FMAs a corner.
#
# The end: one rounding of the eight sums to bf16 (`pack_bf16x2`, `cvt.rn.bf16x2.f32`) and one 16-byte store.

# %%
lesson.show_region(source, start="for (int i = 0; i < VPL; ++i)", end="pack_bf16x2(acc[8 * i + 6]")

# %% [markdown]
# ## Who waits for whom
#
# In rung 02 a lane's corner loads for a sample need that sample's weights and row, which arrive by five
# shuffles from the lane that computed them, which first had to load the sample's location: a chain of
# dependencies, then a branch per corner, and, the loop not unrolled, the loads of the next sample only after the
# blend of this one. Here the same chain is one straight line for the whole level: position, shuffles, four
# loads; shuffles, four loads; ... and the blends later, as the loads land. A schematic (one lane, four samples; a
# load's latency drawn 8 units long, where the real one is hundreds of cycles):

# %%
LAT = 8.0


def timeline(ax, y, overlapped):
    t, issued = 0.0, []
    for s in range(4):
        ax.broken_barh([(t, 1.0)], (y, 0.8), color="C1")                                # position, shuffles
        t += 1.0
        for c in range(4):
            ax.plot([t + 0.1 * c, t + 0.1 * c + LAT], [y - 0.25 - 0.12 * (4 * s + c)] * 2, color="C7", lw=1)
        issued.append(t)
        t += 0.4
        if not overlapped:                                                              # wait, blend, next
            t = issued[-1] + LAT
            ax.broken_barh([(t, 0.6)], (y, 0.8), color="C2")
            t += 0.6
    if overlapped:
        for s in range(4):                                                              # blends as loads land
            t = max(t, issued[s] + LAT)
            ax.broken_barh([(t, 0.6)], (y, 0.8), color="C2")
            t += 0.6
    return t


fig, ax = plt.subplots(figsize=(11, 3.6))
end02 = timeline(ax, 3.0, overlapped=False)
end05 = timeline(ax, 0.0, overlapped=True)
ax.set_yticks([3.4, 0.4], ["02: shuffles, then\nwait for the loads", "05: unrolled rounds,\nloads keep coming"])
ax.set_xlabel("time (schematic)")
for c, what in (("C1", "a sample's position (one lane), 5 shuffles"), ("C2", "blend"),
                ("C7", "a 16-byte load in flight")):
    ax.plot([], [], color=c, lw=6 if c != "C7" else 1, label=what)
ax.legend(fontsize=7, loc="lower right")
ax.set_title(f"one lane, four samples: 02 ends at {end02:.0f}, 05 at {end05:.0f} (schematic units)", fontsize=9)
plt.tight_layout()
plt.show()

# %% [markdown]
# Counted per sample of one head at the benchmark's D = 32 (lane-instructions; rung 02 skips the load of a
# zero-weight corner). The work is the same; what differs is the branches, and the unrolling that lets the
# compiler move a later sample's loads ahead:

# %%
G, nvec = s05.group_lanes(D), D // 8
rows = [("lanes that compute the position and corner weights", 1, 1),
        ("shuffle lane-instructions", 5 * G, 5 * G),
        ("corner loads of 16 B, lane-instructions", 4 * nvec, 4 * nvec),
        ("branches before a lane's corner loads", 4, 0)]
print(f"{'':52s} {'02':>4s} {'05':>4s}")
for what, a, b in rows:
    print(f"{what:52s} {a:4d} {b:4d}")

# %% [markdown]
# ## In SASS: the loads, and how many are in flight
#
# No GPU needed: NVRTC compiles the kernel for sm_90a at the benchmark's sizes, with and without branches. Both have
# one `LDG.E.128` (a 16-byte load) per corner of each of the L·P samples (at L = 4, P = 8: 128). With branches every
# lane loads each level's locations and weights 16 bytes at a time too (`load_floats`: P/2 and P/4 loads a level, 24
# in all); branch-free, a lane loads only its own two samples' locations (16 bytes) and weights (8) a round (the
# table's column counts 16-byte loads only: branch-free, that is the locations; the weights' 8-byte loads are not in
# it). The difference is what lies between the corner loads. `loads_in_flight` tells the two kinds apart by what first
# reads a load's registers (integer instructions widen a corner's bf16 channels; float ones use a location or a
# weight), then walks the SASS in program order and, at each corner load, counts the corner loads issued whose
# registers no instruction has touched since: requested and not yet needed. A warp issues in order, so that is how
# many of a lane's corner loads the memory system can be working on at that moment.

# %%
def corner_loads(lines):
    """{index of a 16-byte load: True if it loads corners, False if locations or weights}, by the first
    instruction that reads its four registers."""
    kinds = {}
    for i, ins in enumerate(lines):
        if "LDG" in ins and ".128" in ins:
            first = int(re.findall(r"\bR(\d+)\b", ins)[0])
            mine = {f"R{first + k}" for k in range(4)}
            for later in lines[i + 1:]:
                op = re.sub(r"^@!?U?P\w+\s+", "", later).split()[0]
                if mine & set(re.findall(r"\bR\d+\b", later)[1:]):
                    kinds[i] = not op.startswith("F")
                    break
    return kinds


def loads_in_flight(cubin):
    lines = nvrtc.sass_lines(cubin, ".", kernel=s05.KERNEL)
    corner = corner_loads(lines)
    pending, counts = {}, []                       # register -> the corner load that writes it
    for i, ins in enumerate(lines):
        regs = [int(r) for r in re.findall(r"\bR(\d+)\b", ins)]
        load = corner.get(i, False)
        for r in regs[1:] if load else regs:       # a register read or overwritten: its load is needed now
            if r in pending:
                done = pending[r]
                pending = {k: v for k, v in pending.items() if v != done}
        if load:
            pending.update({regs[0] + k: len(counts) for k in range(4)})
            counts.append(len(set(pending.values())))
    return counts


cubins = {}
print(f"NVRTC {nvrtc.nvrtc_version()}, sm_90a, D={D} L={L} P={P}, {s05.PARAMS['threads']} threads a block")
print(f"{'':12s} {'16-B loads of corners':>21s} {'of locations, weights':>21s} {'branches':>9s} {'instructions':>13s} "
      f"{'registers':>10s}   corner loads in flight a lane")
for branchless in (True, False):
    cubin = cubins[branchless] = s05.compile_cubin(D=D, L=L, P=P, branchless=branchless)
    ins = [i for i in nvrtc.sass_lines(cubin, ".", kernel=s05.KERNEL) if not i.startswith("NOP")]
    kinds = corner_loads(nvrtc.sass_lines(cubin, ".", kernel=s05.KERNEL))
    flight = loads_in_flight(cubin)
    regs = nvrtc.resource_usage(cubin)[s05.KERNEL]["registers"]
    corners = sum(kinds.values())
    print(f"{'branchless' if branchless else 'branches':12s} {corners:21d} {len(kinds) - corners:21d} "
          f"{sum('BRA' in i for i in ins):9d} {len(ins):13,d} {regs:10d}   at most {max(flight)}, "
          f"on average {np.mean(flight):.1f}")
print("e.g.", nvrtc.sass_lines(cubins[True], r"LDG.*\.128", kernel=s05.KERNEL)[0])

# %% [markdown]
# With branches each sample is a branch (`@P0 BRA` jumps over it when it is off the map) and its four loads are
# predicated: the compiler keeps at most one sample's loads in flight. Branch-free, the loads of neighbouring
# samples overlap: about twice as many in flight on average (the counts above), though far from a level's 4 P.
# (The branch-free build also has far fewer instructions: it works out each sample in one lane of the group, not
# in all G; the measurements below come back to that.)
# Unrolled does not mean all 4 P loads at once: the compiler weighs loads in flight against registers (each
# 16-byte load needs four), and more registers a thread means fewer threads an SM. Here it is told how many:
# `__launch_bounds__(NT, 1024 / NT)` asks for 1,024 threads an SM, so at most 64 registers a thread. Without
# that bound NVRTC 13.0 gave the one-multiply-add addresses 72 registers (the kernel edit `msda05_wide_addresses`,
# profiled on the H200: `msda05_wide_addresses_two_blocks`'s docstring has the profile), so an SM held one block
# of 512 threads, not two, and the edit was slower than the rung it edited on `local` (its reading is printed
# further down).
#
# ## Is it right?
#
# On a GPU of compute capability 8.0 or newer the stage runs for real. Without one, `cudabook.emulate` runs the
# same C++ on the CPU, every CUDA thread a small coroutine, both ways (branch-free and with branches):

# %%
why = msda.unavailable("05_lane_groups")
if why and not SIMULATOR:
    print(f"Not run here: {why}. (The CPU emulator works on host memory, where Numba runs in its simulator: "
          f"set CUDABOOK_SIMULATOR=1 before `import cudabook` to use it.)")
else:
    try:
        for name, kw in msda.cases():
            args = msda.random_problem(**kw)
            for branchless in (True, False):
                if why:
                    p = msda.upload(*args)
                    p.poison()
                    with emulate.emulating():
                        s05.launch(p, branchless=branchless)
                    verdict, how = msda.judge(p.result(), *args), "emulated"
                else:
                    verdict, how = msda.judge(msda.run("05_lane_groups", *args, branchless=branchless), *args), ""
                print(f"{name:28s} {how} branchless={branchless!s:5s}:", verdict.message)
    except emulate.HostCompilerMissing as e:
        print("Not emulated:", e)

# %% [markdown]
# ## How fast?
#
# The whole ladder against the copy ceiling, the reference gather and PyTorch. On a GPU of compute capability
# 8.0 or newer, rung 05 and the rung before it that the GPU can run (04 on Hopper, 03 elsewhere), the copy
# ceiling, the reference gather and PyTorch eager are measured now; the other rungs and `torch.compile` come
# from this card's record (‡). Otherwise: the records in `results/`, or a note that there are none yet:

# %%
record = msda.ladder_so_far("05_lane_groups", peers=True)

# %% [markdown]
# The records, rung 05 against the copy ceiling, the reference gather, PyTorch's eager implementation, and the
# rungs before it:

# %%
shown = False
for rec in results.load_all():
    for name, w in rec["workloads"].items():
        st = w.get("stages", {})
        if not name.startswith("msda ") or "median_us" not in st.get("05_lane_groups", {}):
            continue
        shown = True
        s5 = st["05_lane_groups"]
        ref = s5["pct_of_ceiling"]                   # the first records' key for "% of reference gather"
        print(f"{rec['gpu']} · {name} (commit {w.get('commit') or rec.get('commit')}):\n"
              f"  05: {s5['median_us']:,.0f} µs, {s5['pct_of_copy']:.1f} % of copy (the bound), {ref:.1f} % of the "
              f"reference gather ({w['context']['gather_us']:,.0f} µs, "
              f"{w['context'].get('gather_order', 'heads fastest, the only order timed then')}: "
              + ("05 is faster" if ref >= 100 else "level, within 5 %" if ref >= 95 else "05 is slower")
              + f"), {s5['speedup_vs_torch']:.1f}x torch eager;\n"
              f"  faster than " + ", ".join(f"{s[:2]} {st[s]['median_us'] / s5['median_us']:.1f}x" for s in st
                                            if s < "05" and "median_us" in st[s]))
if not shown:
    print("No record of rung 05 in results/ yet: run `make bench TRACKS=msda` on a GPU.")

# %% [markdown]
# ## Bytes in flight, and what sets rung 02's pace
#
# **Little's law**: a memory system that takes a time T to answer a request delivers, on average, the bytes in
# flight divided by T. A kernel has little say over T (the same addresses, the same caches; only the order of its
# accesses moves the hit rates, as the block size does below); what it controls directly is how many bytes it has
# requested and not yet needed. The records give each SM's rate, in corner bytes a nanosecond; the SASS of the
# rung 05 each record ran (its commit's kernel, compiled here as above) gives its loads in flight a lane, and its
# registers how many threads an SM holds (a Hopper SM has 65,536 registers and at most 2,048 threads; registers
# go out 256 a warp at a time). Together: the bytes rung 05 keeps in flight on each SM, and the time T they imply,
# from issue to use.

# %%
REGS_PER_SM, THREADS_PER_SM = 65536, 2048           # compute capability 9.0 (the Hopper tuning guide)


def kernel_ran(rec, w):
    """(cubin, params, which) of the rung 05 a record ran: the kernel file at the record's commit where git can show
    it (a clone of the project), else today's, and which of the two it is."""
    commit = w.get("commit") or rec.get("commit")
    text = results.file_at(commit, "cudabook/msda/kernels/lane_groups.cu") if commit else None
    params = {**s05.PARAMS, **w["stages"]["05_lane_groups"].get("params", {})}
    sz = w["size"]
    cubin = s05.compile_cubin(D=sz["D"], L=len(sz["levels"]), P=sz["P"], source_text=text, **params)
    return cubin, params, (f"its kernel, at {commit}" if text is not None else
                           "today's kernel: git cannot show the record's here")


for rec in results.load_all():
    for name, w in rec["workloads"].items():
        st = w.get("stages", {})
        if not name.startswith("msda ") or "median_us" not in st.get("05_lane_groups", {}):
            continue
        sms = (w.get("machine") or rec.get("machine") or {}).get("sms")
        corner = w["context"]["gather_bytes"]
        rate = {k: corner / (us * 1e3) / sms for k, us in (("reference gather", w["context"]["gather_us"]),
                ("02", st["02_warp_cooperative"]["median_us"]), ("05", st["05_lane_groups"]["median_us"]))}
        cubin, params, which = kernel_ran(rec, w)
        regs = -(-nvrtc.resource_usage(cubin)[s05.KERNEL]["registers"] // 8) * 8
        threads = params["threads"] * min(THREADS_PER_SM // params["threads"], REGS_PER_SM // (regs * params["threads"]))
        flight = np.mean(loads_in_flight(cubin))
        in_flight = threads * flight * 16
        print(f"{rec['gpu']} · {name}, {sms} SMs\n  corner bytes a ns per SM: "
              + ", ".join(f"{k} {v:.1f}" for k, v in rate.items()))
        print(f"  05 ({which}): {threads:,} threads an SM ({regs} registers a thread) x {flight:.1f} loads x 16 B "
              f"= {in_flight / 1e3:.0f} KB in flight; T = {in_flight / rate['05']:.0f} ns")

# %% [markdown]
# T is an estimate (the loads in flight are counted at issue, in program order), and it is some hundreds of
# nanoseconds: longer than an idle cache hit. Queueing in the L1s and L2 would explain that, or the static count
# may overstate what is really in flight; neither was measured. At
# that latency a rate like rung 05's needs tens of kilobytes in flight on every SM. Rung 02 cannot keep
# that much: each lane has one load out at a time (each corner's load sits in its own branch, skipped for a
# zero weight, and is used by the next instruction: one in flight, counted in its SASS as above, compiled with
# CUDA 13.5 without a GPU), and before each sample it waits for shuffles that wait for another lane's
# arithmetic. On the `uniform` workload the reference gather slows down, and so does rung 04; rungs 02 and 03
# hardly move (the records above, card by card). Had rung 02 been held by its bytes in flight over the same T,
# it would have slowed as much as the gather. Something else sets its pace, which fits its dependency chain
# (location load, arithmetic, shuffles, corner load) better than its bytes in flight. Rung 05 has the same chain
# (its shuffles came back, under "Head by head" below), but unrolled and branch-free, so the chains of a level's
# samples overlap.
#
# Why does the gather slow on `uniform`? Most likely because fewer of its corners are found in L1, and those that
# are not come from the L2, which hands an SM far fewer lines a cycle (the probe under "A bound from the L1"). The
# reference gather itself was not profiled, but Nsight Compute measured rung 05 while its items were still taken
# heads fastest (the gather's only order in the older records): L1 held about two thirds of the sectors its global
# loads asked for (corners are nine tenths of them) on `local`, and about a fifth on `uniform`. The blocks an SM
# holds then read all 8 heads' maps of an image (7.9 MB at this size, against an L1 of at most 256 KB). Head by
# head, they read one or two (987 KB a head, of which levels 1 to 3 are 244 KB): about four fifths and half; two
# heads at a time, as now, one or two pairs, with hit rates not far below those (the profiles further down), and
# on the H200 rung 05 slows only a little on `uniform` (the edit's profiles and timings, printed further down;
# the H100's record is of the rung before, which slowed with the gather). Taken head by head, the gather slows
# less on `uniform` too (the order probe under "Against the reference gather"), and the benchmark now times it
# both ways.
#
# ## An older sweep, and what it still shows
#
# `tools/sweep_params.py --track msda` timed rung 05's two knobs on the benchmark's `local` workload, with rung
# 02's vector width beside them, every variant checked against the float64 reference. From the file it wrote,
# with the record's time of each rung at its defaults under it:

# %%
sweeps = sorted((results.RESULTS / "sweeps").glob("*_msda_*.json"))
for path in sweeps:
    sweep = json.loads(path.read_text())
    labels = [f"{r['stage'][:2]} " + (", ".join(f"{k}={v}" for k, v in r["params"].items()) or "defaults")
              for r in sweep["rows"]]
    recorded = {w.get("source_digest") for rec in results.load_all() for k, w in rec["workloads"].items()
                if k == sweep["workload"]}
    same = "the same kernel sources as the record" if sweep.get("source_digest") in recorded else "other sources"
    print(f"{sweep['gpu']} · {sweep['workload']} · commit {sweep['commit']}, {same} ({path.name})")
    for label, r in zip(labels, sweep["rows"]):
        print(f"  {label:32s} {r['median_us']:10,.1f} µs   max |error| on image 0: {r['max_abs_err_image0']:.4f}")
    for rec in results.load_all():
        w = rec["workloads"].get(sweep["workload"])
        if w and rec["gpu"] == sweep["gpu"]:
            print(f"  the record (commit {w.get('commit') or rec.get('commit')}): " + ", ".join(
                f"{s[:2]} {w['stages'][s]['median_us']:,.1f} µs" for s in sorted({r['stage'] for r in sweep["rows"]})
                if "median_us" in w["stages"].get(s, {})))
    fig, ax = plt.subplots(figsize=(8, 2.8))
    ax.barh(labels, [r["median_us"] / 1e3 for r in sweep["rows"]],
            color=["C0" if r["stage"].startswith("05") else "0.7" for r in sweep["rows"]])
    ax.invert_yaxis()
    ax.set_xlabel("ms (median of CUDA-event timings)")
    ax.set_title(f"{sweep['gpu']}: {sweep['workload']}", fontsize=9)
    ax.tick_params(labelsize=8)
    plt.tight_layout()
    plt.show()
if not sweeps:
    print("No sweep recorded in results/sweeps/ yet: run `python tools/sweep_params.py --track msda` on a GPU.")

# %% [markdown]
# Read the first line before the bars: the file comes from older kernel sources than the record's ("other sources").
# Its rung 02 rows agree with the record, and they show what the vector width is worth there: 8-byte vectors take far
# longer than 16-byte ones. Its rung 05 rows are of an earlier rung 05: its 512-thread row, today's default, is well
# off the record's time printed under it. So this file says nothing about today's rung 05; its two knobs were swept
# again with a later source (each sweep names its commit), under "Experiments" below.
#
# ## Against the reference gather
#
# The reference gather only loads: its rows are precomputed, and it does no arithmetic beyond its addresses and
# an XOR that keeps each load alive. Rung 05 works out each sample's position and weights in one lane of its
# group, hands them on in five shuffles, and in every lane unpacks the row, forms four addresses and blends. Count
# it: each warp runs the kernel's whole straight
# line once (the SASS instructions above), and an SM's four schedulers issue at most one warp-instruction each
# a cycle.

# %%
ins = [i for i in nvrtc.sass_lines(cubins[True], ".", kernel=s05.KERNEL) if not i.startswith("NOP")]


def kind(instruction):
    op = re.sub(r"^@!?U?P\w+\s+", "", instruction)          # without its predicate
    if re.match(r"LDG|STG", op):
        return "memory: LDG, STG"
    if re.match(r"F|HFMA|I2F", op):
        return "float: the blend, weights, floor, conversions"
    return "integer and other: addresses, shuffles, selects, bf16 widening"


counts = {}
for i in ins:
    counts[kind(i)] = counts.get(kind(i), 0) + 1
print(f"per sample, in each lane ({len(ins):,} instructions, {L * P} samples):")
for what, n in sorted(counts.items(), key=lambda kv: -kv[1]):
    print(f"  {what:56s} {n / (L * P):6.1f}")
for rec in results.load_all():
    for name, w in rec["workloads"].items():
        st = w.get("stages", {})
        if name.startswith("msda ") and "median_us" in st.get("05_lane_groups", {}):
            sms = (w.get("machine") or rec.get("machine") or {}).get("sms")
            sz = w["size"]
            cubin, params, which = kernel_ran(rec, w)
            n_ins = sum(not i.startswith("NOP") for i in nvrtc.sass_lines(cubin, ".", kernel=s05.KERNEL))
            warps = sz["N"] * sz["Lq"] * sz["M"] * s05.group_lanes(sz["D"]) // 32
            cycles = warps * n_ins / (4 * sms)
            us = st["05_lane_groups"]["median_us"]
            print(f"{rec['gpu']} · {name} ({which}): {warps:,} warps x {n_ins:,} instructions / ({sms} SMs x 4) = "
                  f"{cycles / 1e6:.2f} M issue cycles; in {us:,.0f} µs that needs an SM clock of at least "
                  f"{cycles / us / 1e3:.2f} GHz (the reference gather: {w['context']['gather_us']:,.0f} µs)")

# %% [markdown]
# An H100's SMs run at up to about 2 GHz (the clock of these runs was not recorded; GEMM 09's probe saw an H200's
# SM clock fall well below that under a long tensor-core load), and each instruction count is this machine's NVRTC
# build of the kernel the record ran, not the record's own build. So on the `local` workload issuing instructions
# fills most (at a lower clock, nearly all) of rung 05's time, about as long as the reference gather's loads take:
# the two overlap, imperfectly.
#
# Which gather, though? Its groups can be taken in either of two orders rung 05 has used: heads fastest (a warp's
# groups the heads of one query, as rung 02 and rung 05 at first took them) or head by head (neighbouring queries of
# one head, as rung 05 took them before it went two heads at a time). The same loads of the same corners, in another
# order. Both, with rung 05 beside them, in the same interleaved rounds (`tools/probe_reference_gather.py`, a
# reading):

# %%
for rd in results.readings("msda", "05_lane_groups", "reference_order"):
    print(f"{rd['gpu']} · tools/probe_reference_gather.py · commit {rd['commit']}")
    for case in rd["cases"]:
        med = {k: float(np.median(v)) for k, v in case["us"].items()}
        print(f"  {case['workload']}: " + ", ".join(f"{k} {v:,.0f} µs" for k, v in med.items())
              + ("" if case["same_folds"] else " (the two orders' folds DISAGREE)"))
if not results.readings("msda", "05_lane_groups", "reference_order"):
    print("no reading of tools/probe_reference_gather.py in results/readings/ yet (it needs a GPU)")

# %% [markdown]
# Order alone moves the gather a long way, and not the same way on both workloads: head by head it is slower on
# `local` and much faster on `uniform`, where each of its blocks then reads one head's map in place of all eight and
# most likely finds more of its corners in the L1 (the gather was not profiled; rung 05's profiles below show this
# for rung 05). So the benchmark times the gather both ways on every workload and keeps the faster, the reference at
# its strongest; each record's context says which order won (records without one timed heads fastest only). Against
# the heads-fastest gather, the rung 05 of that reading matched or beat it on `uniform` (the reading says by how
# much); the H200's record puts rung 05 level with the gather at its strongest, or a little faster, on both
# workloads (under "How fast?" above; the H100's is of an older rung). The reference gather is **not a bound**: it
# is one plain way to load the corners (a group of lanes per query and head, with no more loads in flight than its
# simple loop gives), and a kernel that keeps more bytes in flight, or takes them in a better order, loads them
# faster. Read "% of reference gather" as a comparison, not as a distance to a limit.
#
# ## A bound from the L1
#
# The copy ceiling ("% of copy") is a bound (approximately: a copy's rate is not quite the memory's peak), and a loose
# one: it counts each byte once, and the corners cross L2 and L1 many times. A tighter one comes from the unit every
# corner passes. A load from global memory goes through the L1's data pipe. A corner here is one head's 64 bytes of
# one pixel, and two pixels are a whole row of heads apart (M x D bf16, 512 bytes), so every corner sits in a 128-byte
# line of its own (heads 2k and 2k + 1 of a pixel share one), and head m's 64 bytes start at byte 64 (m mod 2) of
# theirs. The 8 items of a warp's corner load are 4 neighbouring queries of heads 2k and 2k + 1: up to 8 lines (fewer
# where two of them sample the same pixel), head 2k's pieces first halves of their lines, head 2k + 1's second halves.
# (Head by head they were 8 queries of one head, every piece at the same place of its line; heads fastest, the 8 heads
# of one query, half their pieces first halves and half second halves.) How many lines can the L1 hand out a cycle,
# and does it matter how much of each line a load reads, and where in it? `tools/probe_l1_gather.py` measures it:
# lanes load 16 bytes each, a group of lanes reads one piece of a line (16 to 128 bytes), every piece at a random line
# of a region that sits in the L1 (each block its own, read once first) or of one only the L2 holds, and the same from
# shared memory (`LDS.128`, for comparison). By default every piece starts at its line's first byte: the same place in
# every line, as rung 05's pieces were head by head. `16s`, `32s` and `64s` put each group's piece at another place of
# its line (`64s` is rung 05's layout now, two heads at a time, as it was heads fastest: first and second halves of
# different lines), and `64p` has two groups read the two halves of one line. One block of 1024 threads an SM, timed
# by its own clock and by the wall clock, each thread's loads checked first against a replay on the host. Its reading
# on each card, and what it implies for these corners:

# %%
for rd in results.readings("msda", "05_lane_groups", "l1_gather"):
    print(f"{rd['gpu']} · tools/probe_l1_gather.py · commit {rd['commit']} · NVRTC {rd['nvrtc']}")
    for run in rd["runs"]:
        if "error" in run:
            print(f"  piece {run['piece']:>4} from {run['span']}: {run['error']}")
            continue
        label = ("2 x 64 B of one line" if run["paired"] else f"{run['piece_bytes']} B, spread" if run.get("spread")
                 else f"{run['piece_bytes']} B at byte 0")
        print(f"  {label:>18} from the {run['span'].upper()}: {run['bytes_per_ns_per_sm']:6.1f} B/ns an SM, "
              f"{run['lines_per_cycle_per_sm']:.2f} lines a cycle, {run['bytes_per_cycle_per_sm']:6.1f} B a cycle")
    corner = next((r for r in rd["runs"] if r["piece"] == "64s" and r["span"] == "l1" and "ms" in r), None)  # fastest
    corners = benchmark.WORKLOADS[0]
    n_corners = corners["N"] * corners["Lq"] * corners["M"] * len(corners["levels"]) * corners["P"] * 4
    for rec in results.load_all():
        w = rec["workloads"].get(benchmark.workload_name(**corners))
        row = w and w["stages"].get("05_lane_groups", {})
        if corner and rec["gpu"] == rd["gpu"] and row and "speedup_vs_torch" in row:
            floor_us = n_corners * 64 / rd["sms"] / corner["bytes_per_ns_per_sm"] / 1e3
            most = row["median_us"] / floor_us
            print(f"  every corner from the L1 at the 64 B spread rate (the probe's fastest): {floor_us:,.0f} µs for the "
                  f"{n_corners / 1e6:,.0f} M corners of `local`; rung 05 takes {row['median_us']:,.0f} µs (record, commit "
                  f"{w.get('commit') or rec.get('commit')}), so no kernel that loads each corner with ld.global is more "
                  f"than {most:.2f}x faster than rung 05: {row['speedup_vs_torch'] * most:.0f}x torch eager at most, "
                  f"against rung 05's {row['speedup_vs_torch']:.1f}x")
if not results.readings("msda", "05_lane_groups", "l1_gather"):
    print("no reading of tools/probe_l1_gather.py in results/readings/ yet (it needs a GPU)")

# %% [markdown]
# **A line a cycle, or 128 bytes a cycle: the first where the pieces share banks, the second at most.** From the
# L1, pieces that all start at their lines' first byte arrive at about one line a cycle, whether a load reads 16
# bytes of each line or all 128: they fall in the same banks of the L1's data array, and the banks serve one of
# them a cycle. Spread over their lines' places, more lines arrive a cycle: `64s` brings two 64-byte halves of
# different lines a cycle, as many bytes as whole lines do, the 128 bytes a cycle of the data array. Spread 16-
# and 32-byte pieces arrive at about three lines a cycle, short of those bytes and of what the banks allow (a
# warp's pieces sit four to a set of banks): something else caps the lines a cycle there, which this probe does
# not name. (From the L2 an SM receives fewer lines a cycle, wherever the pieces sit, and a 64-byte piece brings
# as many bytes a nanosecond as a whole line: there the bytes limit it. Shared memory behaves like the L1's data
# array: 128 bytes a cycle when the pieces are spread over its banks, a piece a cycle when they all start at the
# same byte; its spread 16- and 32-byte pieces do reach the 128 bytes, which the L1's do not.) Rung 05's own
# count, printed next (taken while its items went heads fastest, before it loaded its locations and weights 16
# bytes at a time), fits this without singling it out: its locations and weights are the same-bank case (a line a
# cycle each), its corners the spread case (two a cycle), and at those rates the two come to fewer wavefronts than
# it counts, where a wavefront a corner would come to more. So each corner costs at least half a cycle of its SM's
# L1 even when it hits: half a cycle for each of the N x Lq x M x L x P x 4 corners, spread over the SMs, is a
# floor for every kernel that loads each corner with `ld.global`, whether it keeps the corners in registers or
# stores them on into shared memory, as rung 03 does. The probe does not cover a kernel whose corners reach shared
# memory by the copy engine (TMA; lesson 04's probe moved its fastest four-corner box more slowly than the L1
# hands out four corners here), but such a kernel then reads every sample's corners out of shared memory, at half
# a cycle a corner at best. What escapes the floor is a kernel in which one read of a corner serves every sample
# that shares it. Head by head, rung 05's pieces sat at the same place of their lines, the one-line-a-cycle case,
# except where a warp's queries share a pixel, as neighbouring ones sometimes do on `local` (fewer sectors a load
# request there than heads fastest, and than on `uniform`: the profiles further down); two heads at a time, as
# now, they sit in both halves. The profiles under "Head by head" below read the head-by-head rung's data pipe
# ("L1 pipe %"): nearly saturated, about as busy as in this older Nsight
# Compute reading of rung 05 on an H200 (in results/readings/, with the commit it ran), taken while its items went
# heads fastest, which counted the pipe's wavefronts and how busy each unit was (a different kernel and clock, so
# not a like-for-like comparison):

# %%
for rd in results.readings("msda", "05_lane_groups", "l1"):
    wf = rd["wavefronts"]
    print(f"{rd['gpu']} · commit {rd['commit']} · ncu {rd['ncu']} (SMs at {wf['sm__cycles_elapsed.avg.per_second'] / 1e9:.2f} GHz, "
          f"ncu's fixed clock)")
    for run in rd["runs"]:
        print(f"  vectors {run['vectors']}, {run['locations']:7s}: L1 {run['l1_pct_of_peak']:5.1f} % of its peak, "
              f"L2 {run['l2_pct_of_peak']:5.1f} %, DRAM {run['dram_pct_of_peak']:5.1f} %, issue slots "
              f"{run['issue_slots_busy_pct']:5.1f} % busy, {run['elapsed_cycles'] / 1e6:.2f} M cycles")
    corners = benchmark.WORKLOADS[0]
    n_corners = (corners["N"] * corners["Lq"] * corners["M"] * len(corners["levels"]) * corners["P"] * 4)
    total = wf["l1tex__data_pipe_lsu_wavefronts.sum"]
    print(f"  local, vectors 1: {total / 1e6:,.1f} M wavefronts counted, for {n_corners / 1e6:,.1f} M corners and the "
          f"samples' locations and weights, which every lane of a group loaded then")

# %% [markdown]
# When this reading was taken (its commit is printed: the items heads fastest), rung 05 kept the L1's data pipe
# busy most of its cycles, on both workloads, and its issue slots too: it was near two throughput limits at once.
# What is left above the floor is
#
# - **the locations and weights**, the wavefronts that are not corners: the G lanes of an item read the same locations
#   and weights then, and the warp's 8 items were 256 bytes apart in the locations and 128 in the weights, a line
#   each, all at the same place of their lines: the probe's same-bank case, a cycle a line. When this reading was
#   taken, each was a load of its own (8 bytes or 4): a warp issued 64 of them beside its 128 corner loads, so they
#   cost the L1 about as many cycles as the corners (which take half a cycle each). Two ways to cut them were tried,
#   each a kernel edit timed by `tools/probe_kernel_edit.py` on the H200 in interleaved rounds (readings, printed
#   below). Loading a level's locations two a load and its weights four a load
#   (`tools/kernel_edits/msda05_vector_locations.py`: 24 such loads a lane an item in place of 64) was right and a few
#   percent faster on `local`, level on `uniform`: the L1 is not the only limit (the other is most likely the issue
#   slots; the edit was not profiled). The rung took it (`load_floats`), and its `branchless=False` path still loads
#   them so; today's default path has each lane load only its own two samples' locations (one 16-byte load) and
#   weights (one 8-byte load), once a round of 2G at even P (`msda05_sample_pairs`, below). Copying a block's
#   locations and weights into shared memory first, coalesced, with the columns swizzled so that 8 items' words sit in
#   distinct banks (`tools/kernel_edits/msda05_shared_locations.py`) is right, but the copy, its barrier and the
#   shared-memory reads cost about what they save (slower on `local`, a little faster on `uniform`: timed against the
#   rung before `load_floats`). A third way keeps the loads and moves their pieces apart: each item of a warp takes
#   its level's chunks in an order of its own, so a load's 8 pieces sit at several places of their lines, the spread
#   case (`tools/kernel_edits/msda05_rotated_chunks.py`, timed against the head-by-head rung and profiled, below). The
#   L1's data pipe is less busy, but the extra loads and chunk arithmetic keep the issue slots busier, and it is a
#   little slower on both workloads;
# - **the instructions**: when this reading was taken every lane of a group computed every sample's position and
#   weights (G times the arithmetic, no shuffles), and every lane still forms each corner's address, selects the
#   corners and blends in float32 (8 FFMAs and 8 integer widenings a corner; `bf16x2` math would do two channels an
#   instruction but accumulate in bf16, outside the track's float32 contract). The `vectors` knob below gives a lane
#   more of the row and an item fewer lanes, and shows what that costs. Both costs at once were tried on the tensor
#   cores (`tools/kernel_edits/msda05_tensor_core_blend.py`, a reading printed below): a warp serves one item at a
#   time, lane s computes sample s once and writes its pixel and weights to a table in shared memory, and the
#   blend is `mma.sync` m16n8k16, the item's 128 corners as K (A = the corners' channels, shuffled into place
#   with byte permutes; B = the weights in bf16 in one column and what that rounding left in the next, so the
#   float32 contract holds). Right, and about three fifths of rung 05's instructions an item (counted in the
#   SASS of both), but much slower: most likely because a warp works on one item at a time, with few loads in
#   flight, and its 8-byte corner loads take twice rung 05's corner-load instructions an item. Fewer instructions
#   alone do not make this gather faster. Working out each sample's position once a group and handing it on
#   through shared memory (`msda05_shared_positions`) says the same: a third fewer instructions, the issue slots
#   half busy, and slower on `local`, its warps waiting on their corner loads (the edit's docstring has its
#   profile). What did pay: one multiply-add an address, with the registers held to 64 a thread, and later each
#   sample worked out once and shuffled, once the head pairs had freed L1 cycles to pay for the shuffles (below);
# - the idle remainder of the L1's cycles.
#
# On `uniform` the L2 is busy as well, because far fewer loads hit in L1 (about a fifth heads fastest, about half head
# by head and two heads at a time: the profiles below); the floor above, set by the L1 alone, is the looser bound
# there. A kernel that beats the floor has to load fewer corners than the samples ask for: a pixel that several
# samples of a block share, loaded once (from the L1 or from shared memory) and used for all of them; the copy engine
# alone does not do that, as its corners are still read out of shared memory sample by sample. How much sharing is
# there? Rung 05's block of 512 threads serves 64 neighbouring queries of two heads (head by head it served 128 of
# one; heads fastest, 16 queries of all 8 heads); here are the distinct corners (one pixel of one head) among all the
# corners a run of queries reads, pooled over the heads (a pixel of one head is never a corner of another, so this is
# the average share of one head's run), on the first 3,200 queries of one image of each workload, all of them pixels
# of the finest level (arithmetic on the inputs, `cudabook.msda.reuse`; no GPU needed):

# %%
from cudabook.msda import reuse
from cudabook.msda.inputs import random_problem

for where in ("local", "uniform"):
    size = dict(benchmark.WORKLOADS[0], N=1, Lq=128 * 25, locations=where)     # the first 25 runs of 128 queries
    value, shapes, starts, loc, attn = random_problem(**size, rng=np.random.default_rng(0))
    shares = {q: reuse.distinct_share(shapes, starts, loc, q) for q in (1, 16, 128)}
    print(f"{where:8s}: " + ", ".join(f"{q:3d} queries a run: {100 * v:4.1f} % distinct" for q, v in shares.items()))

# %% [markdown]
# On `local` most of a block's corners repeat: a kernel that read each distinct corner of a block once and used
# it for every query of the block that samples it (held in registers, or as one operand of a matrix product over
# the block's queries) would cost the L1 a fraction of rung 05's cycles, under the floor above, which counts every
# corner a sample asks for. Staging the distinct corners in shared memory is not enough by itself: a sample that
# then reads its corners from there pays the banks half a cycle a corner again. On `uniform` far less repeats.
# Such a kernel has to find the repeats first (sort or hash a block's corners), and whether that pays here is
# **open**: no rung does it yet.
#
# The simplest way to share would skip finding the repeats: copy, level by level, the rectangle of the map that
# holds all of a block's corners for its head into shared memory once, and let every sample read its corners from
# there. How large are those rectangles? For runs of 32 and 128 queries of one head (48 runs of each length,
# spread over all the queries of one image, so over every level's queries), the rectangles' median and 90th
# percentile, beside the distinct pixels a run reads (what a kernel that found the repeats would stage) and the
# corners it reads, at D bf16 a pixel (`reuse.window_pixels`; arithmetic on the inputs, no GPU needed):

# %%
SMEM_PER_SM_KB = 228       # shared memory an SM at most, compute capability 9.0 (a block: at most 227 KB)
for where in ("local", "uniform"):
    size = dict(benchmark.WORKLOADS[0], N=1, locations=where)                 # one image, all its queries
    value, shapes, starts, loc, attn = random_problem(**size, rng=np.random.default_rng(1))
    kb = size["D"] * 2 / 1024                                                   # KB a pixel of one head
    for q in (32, 128):
        picks = np.linspace(0, size["Lq"] // q - 1, 48).astype(int)             # 48 runs, spread over the image
        some = np.concatenate([loc[:, r * q:(r + 1) * q] for r in picks], axis=1)
        rect = reuse.window_pixels(shapes, starts, some, q) * kb
        distinct = reuse.distinct_per_block_head(shapes, starts, some, q) * kb
        print(f"{where:8s} {q:3d} queries of a head: rectangles {np.median(rect):4.0f} KB (median; 90th percentile "
              f"{np.percentile(rect, 90):4.0f}), distinct pixels {np.median(distinct):4.0f} KB, corners read "
              f"{q * len(size['levels']) * size['P'] * 4 * kb:5.0f} KB")
print(f"an SM's shared memory: at most {SMEM_PER_SM_KB} KB")

# %% [markdown]
# On `local` the rectangles of 32 queries already take a large part of an SM's shared memory, and those of 128
# nearly all of it: a sample's offsets have a normal's tails, and a run of a coarse level's queries spans whole rows
# of the finer levels, so the rectangles reach far past the pixels the samples use. A block that staged them would
# leave room for one or two blocks an SM, far fewer loads in flight than rung 05 keeps, and on `uniform` no
# rectangle fits at all. So copying rectangles is not the way: a shared-corner kernel has to stage only the
# distinct pixels it finds (fewer; on `uniform` still a large part of an SM's shared memory for 32 queries, and
# more than all of it for 128), and whether that pays is the open question above.

# %%
_ = results.show_edits("msda", "05_lane_groups")

# %% [markdown]
# ## Head by head, one multiply-add an address, then two heads a warp: the edits the rung took
#
# The reading of `msda05_heads_outer_wide` above is three edits at once, and rung 05 took that kernel first (a
# test compiled both and compared their SASS, opcode for opcode; it does so now for the last edit the rung took):
#
# - **the items head by head** (`msda05_heads_outer` alone: a little slower on `local`, much faster on `uniform`);
# - **one multiply-add an address**: `base` a byte address and `pitch` a 64-bit variable holding a 32-bit product,
#   so each corner's address is one `IMAD.WIDE` in place of six instructions (`msda05_wide_addresses` alone:
#   slower on `local`, at 72 registers a thread under NVRTC 13.0, one block of 512 threads an SM);
# - **the registers held to 64** a thread, two such blocks an SM (`msda05_wide_addresses_two_blocks`, with the
#   addresses: faster on `local`, level on `uniform`).
#
# Together, in the reading's interleaved rounds, the rung got faster on both workloads, most of all on `uniform`; the
# same two kernels run back to back for seconds each (what a long job sees, once the card's power cap holds its clock)
# agree. What changed inside, in Nsight Compute's counters: the kernel the edit changed (the rung at the edit's BASE)
# and the edited one, on the same card and workload (`python -m cudabook.profile --edit msda05_heads_outer_wide msda`,
# for each workload), then the same for seven later edits, `msda05_head_pairs`, `msda05_shuffled_positions`,
# `msda05_rotated_chunks`, `msda05_head_pairs_shuffled`, `msda05_head_pairs_packed` (`local` only) and
# `msda05_head_pairs_packed32`, each against the rung that took heads_outer_wide (the edits' BASE), and
# `msda05_sample_pairs`, against the rung that took packed32:

# %%
from cudabook import profile as ncu_profile

_ = ncu_profile.show_edits("msda", "05_lane_groups")

# %% [markdown]
# On `uniform` the L1's hit rate doubles and the time falls with it; the warps wait on their loads
# (`long_scoreboard`) far less. On `local` the L1 hits rise too, a warp's load touches fewer sectors (its 8
# queries sometimes share a pixel), and the issue slots and the ALU pipe, the busiest units before, are a little
# less busy: the addresses' instructions are gone. Both workloads then ran with their issue slots about three
# quarters busy and the ALU the busiest arithmetic pipe (about 120 SASS instructions a sample in every lane of a
# group, half of them integer work).
#
# Which held that rung 05, the issue slots or the L1's data pipe? The second reading, `msda05_head_pairs`, begins
# to answer it. Its rows of the rung read the data pipe ("L1 pipe %"): nearly saturated on both workloads, with
# every piece of a warp's load at the same place of its line, the probe's one-line-a-cycle case. The edit takes a
# warp's items two heads at a time (4 queries of heads 2k and 2k + 1), so half its pieces are first halves of
# their lines and half second halves, the probe's spread case, and the pipe's load falls by about a quarter, the
# direction the probe predicts (how much of the pipe's work is corners these counts do not split). The time hardly
# moves. On `local` it is a little faster and the issue slots are now the busier unit (`not_selected` and
# `math_pipe_throttle`, warps ready but not issued, take most of the warps' cycles); on `uniform` it is slower in
# the interleaved rounds, though not back to back, and its L1 hit rate falls, most likely because an SM's blocks
# now read two heads' maps each (the edit's timings are printed with the others before these profiles). So rung 05
# sits against two limits at once, the L1's data pipe and the issue slots: this edit, relieving only one of them,
# gained a few percent on `local` and lost on `uniform`. It was not adopted.
#
# The third reading, `msda05_shuffled_positions`, comes at it from the other side: lane g of a group works out
# only every G-th sample's corner rows and weights and hands them to the group's other lanes in six shuffles, so
# the group no longer repeats that work G times. The issue slots and the ALU pipe are far less busy, as meant, and
# yet it is slower on both workloads in the interleaved rounds (about level back to back): the L1's data pipe got
# busier, though the edit issues fewer global loads, and the load/store pipe's share doubled. Do shuffles take the
# same unit as the loads? `tools/probe_l1_gather.py --shuffles` times it on its own: each lane's 16-byte loads
# from the L1 (or from shared memory) as before, then the same with 2 or 8 warp shuffles of each loaded vector,
# and the shuffles alone without the loads, each as the cycles one warp-wide load (with its shuffles) costs an SM:

# %%
for rd in results.readings("msda", "05_lane_groups", "l1_shuffles"):
    print(f"{rd['gpu']} · tools/probe_l1_gather.py --shuffles · commit {rd['commit']} · NVRTC {rd['nvrtc']}")
    timed = [r for r in rd["runs"] if "ms" in r]
    alone = {(r["span"], r["piece"]): r["cycles_per_warp_load"] for r in timed if r["shuffles"] == 0}
    shuffles_alone = {r["shuffles"]: r["cycles_per_warp_load"] for r in timed if r["span"] == "regs"}
    for r in timed:
        if r["span"] == "regs":
            continue
        where = ("the L1" if r["span"] == "l1" else "shared memory") + (", spread" if r["spread"] else ", same place")
        line = f"  loads from {where:27s} {r['shuffles']} shuffles a load: {r['cycles_per_warp_load']:6.2f} cycles"
        if r["shuffles"]:
            a, b = alone[(r["span"], r["piece"])], shuffles_alone[r["shuffles"]]
            line += f"   (loads alone {a:.2f} + shuffles alone {b:.2f} = {a + b:.2f})"
        print(line)
    print("  shuffles alone: " + ", ".join(f"{k} a load {v:.2f} cycles" for k, v in sorted(shuffles_alone.items())))
if not results.readings("msda", "05_lane_groups", "l1_shuffles"):
    print("no reading of tools/probe_l1_gather.py --shuffles in results/readings/ yet (it needs a GPU)")

# %% [markdown]
# They add up: a warp-wide shuffle costs an SM one cycle of a unit that the L1's and shared memory's loads need
# too (most likely the L1's data pipe itself, whose count rose in the edit's profile), and the time of loads and
# shuffles together is the sum of each alone, on both placements and from both memories. So the six shuffles a
# sample cost `msda05_shuffled_positions` six cycles of rung 05's busiest unit, a warp at a time, for instructions
# that cost that unit nothing, and shared memory is no way round (`msda05_shared_positions`, which handed the
# positions on through shared memory, was slower on `local` too and only a little faster on `uniform`, timed
# against the heads-fastest rung). Each of the two edits relieves one limit and loads the other.
#
# Together, then? `msda05_head_pairs_shuffled` applies both: the head pairs spread a warp's corner pieces over both
# halves of their lines, which frees cycles of the data pipe, and the shuffles spend some of them to take the
# repeated position work off the issue slots. Its profiles (above) show both limits falling at once, and it is
# faster on both workloads, in the interleaved rounds and back to back (its timings, among the readings before the
# profiles). `msda05_head_pairs_packed` is the same with a sample's corner row and its steps to the other corners
# packed into one int, five shuffles a sample in place of six and no register spilled; it is about as fast.
# `msda05_head_pairs_packed32` trims two more things the SASS showed: the items numbered in 32-bit arithmetic (a
# 64-bit division by Lq costs far more instructions than a 32-bit one) and a lane without a sample in its round
# loading the level's last one, unpredicated, in place of a predicated load. It gained the most over the rung of the
# three, on both workloads, timed in the same session as `msda05_head_pairs_packed` (both readings above), and rung
# 05 took it. Its profiles show the L1's data pipe and the issue slots both below where the rung before held them.
# Three edits of that rung were timed since (their readings are among those above): four shuffles a sample in place
# of five (`msda05_four_shuffles`: a column clamped onto its neighbour needs no weight of its own, so three floats
# carry the four weights) is level, its extra multiplies most likely paying back the shuffle it saves; the locations
# and weights loaded past the L1 (`msda05_streamed_locations`, so that they do not take lines the corners could use)
# is slower. One gained a little on both workloads: each lane working out two samples at a time
# (`msda05_sample_pairs`), so that their locations come in one 16-byte load and their weights in one 8-byte load,
# half the location and weight loads, each of which costs the L1's data pipe a line an item; its profiles show the
# pipe less busy and the issue slots about as busy. Rung 05 has been that kernel since (the SASS test now compares
# it, at even P): the region lab 05 asks you to write. Going much further still takes fewer wavefronts and fewer
# instructions together: the shared corners above (each distinct corner read once for all the queries of a block
# that sample them).

# %% [markdown]
# ## Experiments: block size and branches
#
# `threads` sets the block size; `branchless=False` takes the other path of the lab region: every lane works out
# every sample itself, with no shuffles, and skips off-map corners and samples by branches (every lane working out
# every sample is how the rung went before it took the head pairs; the branches were already only its
# `branchless=False` option). Predictions to test: the block size hardly matters, and the branchy path is
# slower, by more than branches alone would cost. (Without a GPU of compute capability 8.0 or newer there is
# nothing to time: the sweeps say so.)

# %%
msda.sweep("05_lane_groups", "threads", [128, 256, 512])
msda.sweep("05_lane_groups", "branchless", [True, False])

# %% [markdown]
# The recorded sweeps, read against the defaults (512 threads, branch-free corners):

# %%
lesson.recorded_against("msda", "05_lane_groups", "threads", 512)
lesson.recorded_against("msda", "05_lane_groups", "branchless", True)

# %% [markdown]
# The sweeps of both cards (`results/sweeps/*_lessons.json`, each with its commit: the H200's of this rung, the H100's
# of the rung before it went head by head, so the two cards' rows are of different kernels).
# On the H100, branches cost a few percent, both paths then working out every sample in every lane. On the H200, the
# branchy path is far slower: it has the branches and the G-fold position work both (the SASS counts above), where the
# branch-free path has neither. The block size matters less than it did: on the H100's record 128 threads took clearly
# longer than 512; on the H200's, 128, 256 and 512 threads are within a few percent of each other (a single sweep, not
# interleaved rounds; 512 stays the default).
#
# Why did the smaller blocks take longer, where they did? Not by threads or by loads in flight: every build asks for
# 1,024 threads an SM (`__launch_bounds__(NT, 1024 / NT)`), so each gets at most 64 registers a thread, and each keeps
# as many loads in flight a lane (counted as above, for each build):

# %%
print(f"{'threads a block':>15s} {'registers':>9s} {'threads an SM':>13s}   loads in flight a lane (mean)   per SM")
nvrtc.in_threads([lambda nt=nt: s05.compile_cubin(D=D, L=L, P=P, threads=nt) for nt in (128, 256, 512)])  # at once
for nt in (128, 256, 512):
    cubin = s05.compile_cubin(D=D, L=L, P=P, threads=nt)
    regs = -(-nvrtc.resource_usage(cubin)[s05.KERNEL]["registers"] // 8) * 8
    threads = nt * min(THREADS_PER_SM // nt, REGS_PER_SM // (regs * nt))
    flight = np.mean(loads_in_flight(cubin))
    print(f"{nt:15d} {regs:9d} {threads:13,d}   {flight:30.2f}   {threads * flight:6,.0f}")

# %% [markdown]
# By this count the three builds are alike on an SM, yet on the H100's record the smaller blocks were slower: what the
# 512-thread build did better is not in the count (loads counted at issue, in program order, say nothing of when the
# warps issue them). Nsight Compute, three builds side by side on the `local` workload (an H200 reading, in
# results/readings/ with its commit: of the rung before it went head by head, whose smaller builds also had fewer
# registers and so more threads an SM):

# %%
for rd in results.readings("msda", "05_lane_groups", "threads"):
    print(f"{rd['gpu']} · commit {rd['commit']} · {rd['workload']} (SMs at ncu's fixed clock)")
    print(f"{'threads a block':>15s} {'µs':>8s} {'L1 wavefronts':>14s} {'L1 busy %':>9s} {'L1 hit %':>8s} "
          f"{'occupancy %':>11s} {'issue busy %':>12s}")
    for r in rd["runs"]:
        print(f"{r['threads']:15d} {r['duration_ns'] / 1e3:8,.0f} {r['l1_wavefronts'] / 1e6:13,.1f}M "
              f"{r['l1_pct_of_peak']:9.1f} {r['l1_hit_pct']:8.1f} {r['achieved_occupancy_pct']:11.1f} "
              f"{r['issue_slots_busy_pct']:12.1f}")

# %% [markdown]
# The L1's data pipe is as busy in all three builds, so the time follows the number of wavefronts, and that
# number falls as the block grows, with the L1's hit rate rising. The occupancy does not explain it: the 128-
# and 256-thread builds hold the same share of warps, and the 256-thread one still has fewer wavefronts. The
# items of a block are consecutive (then heads fastest, then queries), and on `local` neighbouring queries sample
# neighbouring pixels. A block of 512 threads kept 16 queries' samples on one SM, where the L1 serves their
# shared corners; smaller blocks spread those queries over more SMs, each of which fetches the same lines
# again, and the extra misses show up as extra wavefronts. The bigger block won by locality in the L1, not by
# occupancy or by loads in flight. Head by head, and now two heads at a time, a block's queries are neighbours
# whatever its size (a block of 512 threads holds 64 queries of two heads, one of 128 threads 16), and the
# blocks an SM holds at once still cover runs of neighbouring queries: most likely why the block size hardly
# matters on the H200's sweep of the packed32 rung (its builds were not profiled side by side).
#
# A third knob, `vectors`, gives each lane 1 (the default), 2 or 4 of the row's 16-byte vectors: fewer lanes an
# item, so fewer copies of each corner's address arithmetic and fewer lanes to hand each sample to, and more
# registers a thread. The compiler's side needs no GPU (counted as above, for each build: the instructions of one
# lane, and of the G lanes of an item). Prediction from the L1's side: with G lanes an item, one load instruction
# of the warp covers 32 / G items, so a corner costs as many accesses of its line as the lane has vectors. Fewer
# instructions, more wavefronts:

# %%
print(f"{'vectors a lane':>14s} {'lanes G':>7s} {'instructions':>12s} {'x G (an item)':>13s} {'registers':>9s}"
      f"   loads in flight a lane (mean)")
nvrtc.in_threads([lambda v=v: s05.compile_cubin(D=D, L=L, P=P, vectors=v) for v in (1, 2, 4)])   # all three at once
for vpl in (1, 2, 4):
    cubin = s05.compile_cubin(D=D, L=L, P=P, vectors=vpl)
    ins = [i for i in nvrtc.sass_lines(cubin, ".", kernel=s05.KERNEL) if not i.startswith("NOP")]
    regs = nvrtc.resource_usage(cubin)[s05.KERNEL]["registers"]
    lanes = s05.group_lanes(D, vpl)
    print(f"{vpl:14d} {lanes:7d} {len(ins):12,d} {lanes * len(ins):13,d} {regs:9d}"
          f"   {np.mean(loads_in_flight(cubin)):30.2f}")

# %% [markdown]
# Timed (on a GPU; without one, the sweep recorded on a GPU), and read against the default:

# %%
msda.sweep("05_lane_groups", "vectors", [1, 2, 4])
lesson.recorded_against("msda", "05_lane_groups", "vectors", 1)

# %% [markdown]
# The H200's sweep above (of this rung; 2 and 4 vectors a lane at up to 128 registers) makes each vector more a lane
# slower, though the item's instructions fall. Heads fastest, the Nsight Compute reading under "A bound from the L1"
# showed 2 vectors a lane slower too, the L1 near its peak and the issue slots far from full. Most likely the reason is the same now (no vector build of today's kernel was profiled): at one
# vector a lane the L1's data pipe is already busy most of its cycles (the profiles above), and each vector more a
# lane adds line accesses. One vector a lane, the default, stays. (Held to 64 registers, as one vector a lane is, 2
# and 4 vectors a lane spilled in an earlier build, so the kernel lets them have 128; each sweep names its commit.)
#
# ## Across problem sizes
#
# The ladder above is one size. Across the number of queries Lq (the other sizes as the benchmark's), recorded on
# a GPU with `tools/sweep_sizes.py`: rungs 03 to 05 and PyTorch, each point checked against the reference.

# %%
from cudabook import sizes

sizes.show("msda")

# %% [markdown]
# Write a level's samples yourself: [lab 05](../../labs/msda/05_lane_groups.ipynb) (the completed version:
# [solution](../../solutions/msda/05_lane_groups_SOLUTION.ipynb)). Back: [04 · TMA boxes](04_tma_boxes.ipynb).
