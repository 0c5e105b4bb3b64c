# %% [markdown]
# # 07 · TMA: a copy engine that moves whole boxes
#
# In stage 06 every thread computed addresses and issued its share of 16-byte copies. Hopper (sm_90) has a
# **Tensor Memory Accelerator**: one thread hands it a *tensor map* (where a tensor lives and how it is laid
# out) plus the coordinates of a **box**, and the hardware copies the whole box into shared memory by itself.
# Completion is signalled on an **mbarrier** in shared memory, which counts the bytes that arrived.
#
# ```
#   producer warp                               consumer warps
#   wait "empty[s]"                             wait "full[s]"  (32 arrivals, and bytes arrived
#   lane 0: arrive.expect_tx(full[s], bytes)                     = bytes expected)
#           cp.async.bulk.tensor ... [stage s]  interpolate from stage s
#   lanes 1-31: arrive(full[s])                 arrive "empty[s]"
# ```
#
# Two things to learn here: making the tensor map (the call that an earlier attempt, in the optimisation log
# this track grew from, never got past), and the producer/consumer hand-off through mbarriers.
#
# One more change from stage 06: the search moves out of the hot loop. A small first kernel (the
# **prepass**) finds every target's interval and weight (2 MB for the benchmark), so the main kernel's
# producer knows each work item's window at once and the consumers never search: the main kernel becomes a
# pure stream of box copies in and 16-byte stores out. The two kernels overlap a little: the main one is
# launched with **programmatic dependent launch** (`pdl=True`, the default), and every block of the prepass runs
# `griddepcontrol.launch_dependents` right after its own `griddepcontrol.wait` (its first two instructions: see
# below), so the main kernel's blocks start and set up their
# barriers while the prepass still runs, and its producer waits (`griddepcontrol.wait`) only before it reads
# the first pair. Lesson 08 takes that mechanism apart; here it is a line or two in each kernel. The blocks
# that start early have nothing to do until the prepass ends, so the first wave of them
# (`self_search_blocks`) do not wait at all: their producer finds its own pairs (stage 08's interpolation
# guess first, a full search where it misses) and streams while the prepass still runs. The prepass is
# launched the same way: it waits (`griddepcontrol.wait`, its first instruction) for whatever kernel ran before
# it on the stream. That kernel (the last call's main kernel) never runs `launch_dependents`, so the prepass is
# launched only once its last block has exited: what overlaps is the prepass's launch with that kernel's
# completion, not that kernel's tail, and none of the prepass's reads.
#
# References: PTX ISA: [mbarrier](https://docs.nvidia.com/cuda/parallel-thread-execution/#parallel-synchronization-and-communication-instructions-mbarrier),
# [cp.async.bulk.tensor](https://docs.nvidia.com/cuda/parallel-thread-execution/#data-movement-and-conversion-instructions-cp-async-bulk-tensor),
# [the tiled mode: boxes and out-of-bound fill](https://docs.nvidia.com/cuda/parallel-thread-execution/index.html#tensor-tiled-mode),
# [fence.proxy.async](https://docs.nvidia.com/cuda/parallel-thread-execution/index.html#parallel-synchronization-and-communication-instructions-membar)
# (the consumers' stores made visible to the copy engine, for the TMA store); CUDA driver API:
# [cuTensorMapEncodeTiled](https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__TENSOR__MEMORY.html).

# %%
import cudabook
print(cudabook.where())

import numpy as np
import matplotlib.pyplot as plt
from cudabook import resample, lesson, nvrtc, tma
from cudabook.resample import s07_tma as s07

# %% [markdown]
# ## The tensor map, step by step
#
# The driver's `cuTensorMapEncodeTiled` takes the tensor's description **innermost dimension first**:
#
# | argument | for our features `[B, S, D]` bf16 |
# |---|---|
# | data type | `BFLOAT16` |
# | rank | 3 |
# | global address | the device pointer (16-byte aligned) |
# | global dims | `[D, S, B]`: innermost first |
# | global strides | `[D*2, S*D*2]` bytes, for all but the innermost (each a multiple of 16) |
# | box dims | `[D_chunk, rows, 1]`: what one copy brings |
# | element strides | `[1, 1, 1]` |
# | interleave, swizzle, L2 promotion, out-of-bounds fill | none, none, none, none (zeros) |
#
# `cudabook.tma` takes NumPy's order (`shape`, `strides` exactly as `ndarray.shape` / `.strides`) and does the
# reversal for you; `driver_args` shows what it will pass:

# %%
B, S, D = 64, 4096, 256
feats = np.empty((B, S, D), np.uint16)
args = tma.driver_args("bfloat16", feats.shape, feats.strides, box=(1, 8, 256), address=0x7F0000000000,
                       l2_promotion="none")
for key, value in args.items():
    print(f"{key:>16}: {value}")

# %% [markdown]
# ## The rules, checked before the driver sees them
#
# The driver answers a bad map with a bare `CUDA_ERROR_INVALID_VALUE`. `tma.check_tiled` checks every rule
# first, the undocumented ones included, and says which one is broken, with the numbers:

# %%
bad = [
    dict(dtype="bfloat16", shape=(64, 4096, 514), strides=(4096 * 1028, 1028, 2), box=(1, 8, 256)),
    dict(dtype="bfloat16", shape=(64, 4096, 256), strides=(4096 * 512, 512, 2), box=(1, 8, 4)),
    dict(dtype="bfloat16", shape=(64, 4096, 256), strides=(4096 * 512, 512, 2), box=(1, 257, 256)),
    dict(dtype="float32", shape=(4096, 4096), strides=(16384, 4), box=(256, 256)),
    dict(dtype="bfloat16", shape=(64, 4096, 256), strides=(4096 * 512, 512, 2), box=(1, 8, 256), swizzle="128B"),
]
for kw in bad:
    try:
        tma.check_tiled(**kw)
        print("valid:", kw)
    except tma.TensorMapError as e:
        print(f"[{e.rule}] {e}\n")

# %% [markdown]
# ## Which rows does each box bring in?
#
# A work item is a run of consecutive sorted targets; they need a window of consecutive source rows. The
# producer covers the window with boxes of a few rows each (box rows x D channels). Each colour below is one
# TMA copy; the dots are the targets of three consecutive work items.

# %%
rng = np.random.default_rng(0)
times = np.cumsum(rng.uniform(0.5, 1.5, 200))
targets = np.sort(rng.uniform(times[0], times[-1], 200))
box_rows, tw = 8, 32
fig, ax = plt.subplots(figsize=(9, 2.8))
for item in range(3):
    run = targets[item * tw:(item + 1) * tw]
    lo, hi = np.searchsorted(times, run[0]) - 1, np.searchsorted(times, run[-1])
    for k, r0 in enumerate(range(lo, hi + 1, box_rows)):
        ax.add_patch(plt.Rectangle((r0, item - 0.35), box_rows, 0.7, alpha=0.35, color=f"C{(item * 3 + k) % 10}"))
    ax.plot(np.interp(run, times, np.arange(len(times))), np.full(len(run), item), "k.", ms=3)
ax.set_xlim(0, 110); ax.set_ylim(-0.6, 2.6); ax.set_yticks([0, 1, 2], ["item 0", "item 1", "item 2"])
ax.set_xlabel("source row"); ax.set_title(f"boxes of {box_rows} rows x D channels cover each item's window", fontsize=9)
plt.show()

# %% [markdown]
# ## What one box holds at the end of a row
#
# A window near the end of a batch row asks for rows past `S - 1`. The copy engine does not fault: the rows
# outside the tensor arrive as **zeros**, and the box still delivers (and counts, for `expect_tx`) all its bytes.
# `cudabook.tma.load_box` computes what a tiled load brings, from the same description as the tensor map; the
# grader's CPU emulator fills every box with it. Here a box of 8 rows x 8 channels starting at row 16 of a
# 20-row tensor:

# %%
demo = np.arange(1 * 20 * 8, dtype=np.float32).reshape(1, 20, 8)       # [B, S, D], values = their own index
box = tma.load_box(demo, box=(1, 8, 8), coords=(0, 16, 0))
print(box[0])
print(f"rows 16..19 are the tensor's last rows; rows 20..23 are outside it: zero-filled, {box.nbytes} bytes "
      f"delivered either way")

# %% [markdown]
# ## The mbarrier protocol: arrivals, bytes, phases, parity
#
# An **mbarrier** is a 64-bit object in shared memory. For its *current phase* it counts two things:
#
# - **pending arrivals**, set by `mbarrier.init`: 32 for a stage's "full" barrier (the producer warp's 32 lanes),
#   `NCT` for its "empty" barrier (every consumer thread: 128 with the default 4 consumer warps). Each
#   `mbarrier.arrive` takes one off.
# - the **transaction count** (tx-count), bytes still expected: `mbarrier.arrive.expect_tx(full, bytes)`, by the
#   producer's lane 0, adds the bytes the boxes will bring *and* counts as that lane's arrival; each TMA copy
#   that names the barrier (`.mbarrier::complete_tx::bytes`) takes its bytes off as they land.
#
# When both reach zero, the phase **completes**: the barrier flips its **phase bit** (0, 1, 0, ...), sets its
# pending arrivals back to the init count, and the next phase begins. Nobody resets it by hand.
#
# A waiter names the phase it waits for by its parity: `mbarrier.try_wait.parity(bar, p)` is true once the phase
# of parity `p` has completed, that is, once the barrier's phase bit is no longer `p`. On a fresh barrier (bit 0),
# waiting on parity 0 blocks until the first phase completes; waiting on parity 1 returns at once (the phase
# "before" the first counts as completed). `try_wait` may suspend the thread for a while before it answers
# false; `mbar_wait` asks again until it answers true.
#
# In a ring of `STAGES` stages, work item `k` uses stage `s = k % STAGES` on lap `j = k / STAGES`, and each of
# stage s's barriers completes one phase per lap. So, as `kernels/tma.cu` writes it:
#
# - the **consumers** wait on `full[s]` with parity `j & 1`: phase j, the producer's fill for this lap;
# - the **producer** waits on `empty[s]` with parity `(j & 1) ^ 1`: phase j - 1, the consumers' release of the
#   stage on the previous lap. On lap 0 that is parity 1 on a fresh barrier: it passes at once, so the first
#   pass through the ring needs no special case.
#
# One bit is enough because nobody falls two phases behind: the producer cannot start phase j + 1 of `full[s]`
# before the consumers complete phase j of `empty[s]`, and they do that only after waiting for phase j of
# `full[s]`. Each waiter is at most one phase behind the barrier it waits on, and the bit tells "this phase"
# from "the last one".
#
# The byte count must be exact. Announce more bytes than the copies bring and the phase never completes: the
# consumers spin for ever (the kit's `mbar_wait` traps after `WATCHDOG_NS` nanoseconds instead, and the
# launch fails). Announce fewer and the phase completes before the last box has landed: the consumers read a
# half-written stage, and the late bytes land in the next phase's count (outside anything the PTX ISA defines),
# where they can end that phase early too: one wrong count spreads. A box that reaches past the
# tensor still delivers all its bytes (zeros), so `nbox * BOX_BYTES` is always right. The end of the work is a
# phase with no bytes at all: the producer's 32 lanes arrive on `full[s]` of one more stage, whose header says
# "no item".
#
# With the default launch (one block per item, `stages=1`) the ring has a single stage: the item is lap 0 and the
# end marker lap 1, so both parities are used even there. The picture follows the protocol for a ring of 2 stages
# and 6 items (3 laps), as a persistent block walks it. The durations are made up (the producer's bookkeeping for
# an item 1 unit, a copy 4, the consumers' interpolation 3): only the order of the events is the kernel's. The
# shade of each row is the barrier's phase bit; hatched spans are waits, each labelled with the parity it names.

# %%
def ring_timeline(stages, items, prep=1.0, copy=4.0, work=3.0):
    """Event times of resample_tma's ring, item by item, and the times each barrier completes a phase."""
    flips = {(name, s): [] for name in ("full", "empty") for s in range(stages)}
    events, producer_free, consumer_free = [], 0.0, 0.0
    for k in range(items):
        s, lap = k % stages, k // stages
        released = flips["empty", s][lap - 1] if lap else 0.0   # empty[s] phase lap-1 (lap 0: a fresh barrier)
        issue = max(producer_free, released)                       # expect_tx + the box copies
        landed = issue + copy                                      # tx-count back to 0: full[s] completes phase `lap`
        start = max(consumer_free, landed)
        done = start + work                                        # the last consumer arrives: empty[s] completes
        flips["full", s].append(landed)
        flips["empty", s].append(done)
        events.append(dict(k=k, s=s, lap=lap, p_ready=producer_free, issue=issue, landed=landed,
                           c_ready=consumer_free, start=start, done=done))
        producer_free, consumer_free = issue + prep, done
    return events, flips


def phase_bit(flips, t):
    return sum(f <= t for f in flips) % 2


STAGES_DEMO = 2
events, flips = ring_timeline(STAGES_DEMO, 6)
end = max(e["done"] for e in events) + 1
rows = [(name, s) for s in range(STAGES_DEMO) for name in ("full", "empty")]
fig, ax = plt.subplots(figsize=(10, 4.2))
for y, key in enumerate(rows):
    edges = [0.0] + flips[key] + [end]
    for i, (a, b) in enumerate(zip(edges, edges[1:])):        # the phase bit: light = 0, dark = 1
        ax.add_patch(plt.Rectangle((a, y - 0.4), b - a, 0.8, color="0.93" if i % 2 == 0 else "0.78", lw=0))
        ax.text((a + b) / 2, y + 0.3, f"bit {i % 2}", ha="center", va="center", fontsize=7, color="0.35")
for e in events:
    yf, ye = rows.index(("full", e["s"])), rows.index(("empty", e["s"]))
    pe, pf = (e["lap"] & 1) ^ 1, e["lap"] & 1                  # the parities the kernel names
    for y, ready, passed, par, who, colour, hatch in ((ye, e["p_ready"], e["issue"], pe, "P", "C3", "///"),
                                                      (yf, e["c_ready"], e["start"], pf, "C", "C2", "\\\\")):
        ax.add_patch(plt.Rectangle((ready, y - 0.38), max(passed - ready, 0.08), 0.24, fill=False, hatch=hatch,
                                   ec=colour, lw=0.8))
        ax.text(ready + 0.1, y - 0.26, f"{who} waits({par})", fontsize=7, color=colour, va="center")
    ax.add_patch(plt.Rectangle((e["issue"], yf - 0.08), e["landed"] - e["issue"], 0.24, color="C0", alpha=0.7))
    ax.plot([e["issue"]], [yf + 0.04], "^", color="C0", ms=7)
    ax.text((e["issue"] + e["landed"]) / 2, yf + 0.04, f"item {e['k']}", ha="center", va="center", fontsize=7,
            color="white")
    ax.plot([e["done"]], [ye + 0.04], "x", color="C2", ms=7, mew=2)
ax.set_yticks(range(len(rows)), [f"{name}[{s}]" for name, s in rows])
ax.set_ylim(len(rows) - 0.5, -0.5); ax.set_xlim(0, end); ax.set_xlabel("time (made-up units)")
ax.set_title("▲ producer: expect_tx + box copies;  blue: bytes landing (tx-count > 0);  x: last consumer arrives "
             "on empty;  hatched: a wait, with its parity", fontsize=8)
fig.tight_layout()
plt.show()

# %% [markdown]
# The same ring as a table, and a check of the rule on every wait: each wait passes only once the barrier's bit
# differs from the parity it names, and a waiter that had to wait found the bit equal to it when it started.

# %%
print(" item  stage  lap   producer waits empty[s] on   consumers wait full[s] on")
ok = True
for e in events:
    pe, pf = (e["lap"] & 1) ^ 1, e["lap"] & 1                  # ((k / STAGES) & 1) ^ 1  and  (k / STAGES) & 1
    print(f"{e['k']:5d}  {e['s']:5d}  {e['lap']:3d}   parity {pe}{'':21s} parity {pf}")
    for bar, par, ready, passed in (("empty", pe, e["p_ready"], e["issue"]), ("full", pf, e["c_ready"], e["start"])):
        f = flips[bar, e["s"]]
        ok &= phase_bit(f, passed) != par and (passed == ready or phase_bit(f, ready) == par)
print("the parity rule holds at every wait:", ok)

# %% [markdown]
# ## The kernel
#
# The tensor map reaches the kernel as a `const __grid_constant__` parameter: a 128-byte, 64-byte-aligned
# struct passed by value (NVRTC cannot include `cuda.h`, so the kernel declares its own). Its address is what
# `cp.async.bulk.tensor` takes. The producer and consumer parts of `kernels/tma.cu`:

# %%
lesson.show_region(s07.source(), start="---- producer", end="the window has landed in stage s")

# %% [markdown]
# The SASS shows the copy engine at work: **`UTMALDG`** (a TMA load of a 3-D box) and the `SYNCS` mbarrier
# instructions. No per-thread `LDGSTS` remains in the hot path.

# %%
cubin07 = s07.compile_cubin(arch="sm_90a")
for line in nvrtc.sass_lines(cubin07, r"UTMALDG|UTMASTG|SYNCS\.ARRIVE")[:8]:
    print(line)

# %% [markdown]
# ## Two ways to make the map
#
# `s07.launch(p, tensor_map="driver")` encodes with the real `cuTensorMapEncodeTiled` (through `tma.encode_tiled`,
# validator first) and launches both kernels with `cuLaunchKernelEx` (for programmatic dependent launch).
# `tensor_map="cuda_core"` builds the same map with cuda.core's `StridedMemoryView.as_tensor_map` and launches the
# main kernel with `cuda.core.launch`, without programmatic dependent launch (the prepass is launched as before).
# The tests check that both give bit-identical output.

# %%
why = resample.unavailable("07_tma")
if why:
    print(why)
else:
    st, sf, tt = resample.random_problem(4, 1000, 3000, 256)
    outs = {}
    for path in ("driver", "cuda_core"):
        p = resample.upload(st, sf, tt)
        p.poison()
        s07.launch(p, tensor_map=path)
        outs[path] = p.result().view(np.uint16)
    print("identical outputs from both tensor-map paths:", np.array_equal(outs["driver"], outs["cuda_core"]))
    print(resample.check_launch(s07.launch, 3, 777, 1500, 256, sorted_targets=False))

# %% [markdown]
# ## How fast? The whole ladder, and what a user would write instead
#
# With a GPU this measures stages 06 and 07, the copy ceiling, and PyTorch (eager and `torch.compile`) on the
# same data in this process. Stages 01 to 05 come from this card's record in `results/` (‡).

# %%
resample.ladder_so_far("07_tma", peers=True)

# %% [markdown]
# The three that matter here, as the benchmark records in `results/` have them, and `torch.compile`'s fastest
# mode in each record (where it timed more than the default):

# %%
from cudabook import results

for record in results.load_all():
    for name, w in record["workloads"].items():
        if name.startswith("resample "):
            rows = {**w["stages"], **w.get("peers", {})}
            print(f"{record['gpu']} · {name}")
            modes = [k for k in rows if k.startswith("torch_compile") and "median_us" in rows[k]]
            fastest = min(modes, key=lambda k: rows[k]["median_us"]) if modes else None
            for k in ("05_double_buffered", "07_tma", "torch_compile") + ((fastest,) if fastest not in
                                                                          (None, "torch_compile") else ()):
                if "median_us" in rows.get(k, {}):
                    older = k == "07_tma" and "pdl" not in rows[k].get("params", {"pdl": True})
                    print(f"  {k:>30}: {rows[k]['median_us']:7.1f} µs  {rows[k]['pct_of_copy']:5.1f} % of copy"
                          + ("  (before pdl: the two kernels one after the other)" if older else ""))
            a, b = (rows.get(k, {}).get("median_us") for k in ("05_double_buffered", "07_tma"))
            if a and b:
                print(f"  {'07 against 05':>30}: {100 * (a - b) / a:+.1f} % of 05's time "
                      f"({'07' if b < a else '05'} ahead)")

# %% [markdown]
# Honest reading of these records: `torch.compile`'s fused gather reaches the copy ceiling on this problem, or
# nearly (the L2 cache absorbs its re-reads of neighbouring rows; each record above gives its % of copy). Stage 07
# is a few percent ahead of stage 05's Numba gather, which pays the same kind of prepass: the last line of each
# record gives the gap and which is ahead (a 07 line marked "before pdl" comes from a record taken before stage 07
# launched its main kernel with programmatic dependent launch).
#
# The prepass is not what separates 07 from `torch.compile`. Timed apart on an H100 at the benchmark size (one run
# at commit 9eff4c2, not a results/ record): the prepass alone 4.9 µs, the main kernel alone 94.9 µs, both 101.3 µs
# one after the other, and 99.5 µs with programmatic dependent launch, which hides the launch and the barriers'
# set-up but cannot start a block's copies before its pairs exist. `torch.compile`'s whole call, in the H100 record
# above, takes less than 07's main kernel alone: the difference is in the streaming kernel, and lesson 08 finds it.
# An H200 tells the same story (one run at commit 98b206c, not a results/ record): prepass 5.0 µs, main kernel 69.6,
# both 77.5, with programmatic dependent launch 75.6 (readings taken before the fourth try below). In the H200
# record above, `torch.compile`'s default mode takes about as long as 07's main kernel alone, and its fastest mode
# (printed above: max-autotune-no-cudagraphs with inductor's PDL option) clearly less. Two tries at hiding more of
# the prepass on that H200, one run each at commit e88ad0a: a prepass in which each warp searches a window of source
# times around an interpolation guess (stage 08's search) took 6.6 µs against this stage's 4.8; and having the first
# wave of the streaming kernel's blocks prefetch their guessed window into L2 before they wait for the pairs
# (`cp.async.bulk.prefetch.tensor`) took 74.6 µs in all against 75.2, and more time than without it once every block
# did it. A third, one run on the same H200 at commit d33347d: per-chunk ready flags, so that each streaming block
# waits only for the prepass block that writes its pairs (`st.release` there, `ld.acquire` here) instead of the
# whole prepass grid: 76.0 µs against 75.2. The prepass's blocks all run at once and finish at about the same
# moment, so there is little to win, and the polling costs more. None of the three is in the code.
#
# The fourth try is in the code: give the early blocks work that does not need the prepass. A block whose
# index is below `self_search_blocks` skips `griddepcontrol.wait`, and its producer finds its own item's pairs
# (`own_pairs` in the kernel); the other blocks read the prepass's pairs as before. The own search has to be
# short, or the block would have done better to wait: it borrows stage 08's guess. The row's first and last
# source times come with the targets; where the smallest target would sit if the times were evenly spread
# gives a guess, and 128 source times starting 46 before it (the item's larger targets lie after it), one
# round of loads, are both the probes (a ballot counts how many are at or below the smallest and the largest
# target) and the window each target's binary search runs in. Where the 128 do not hold every interval
# (times far from evenly spread, or unsorted targets), the full search takes over. Two dependent rounds of
# global loads instead of the full search's four (targets, two rounds of probes, the window).
#
# The search is not free even where it does not run: its code takes registers (56 a thread in the build the H100
# profile in results/profiles/ measured, 40 before), and the H200's occupancy query gave 7 blocks an SM at
# `window_rows=40`: 56 registers allow 7 blocks of 160 threads, where the old kernel's 40 would allow 9. In a
# reading at the old window size, capping the blocks at 7 an SM instead of 8 changed nothing, so it costs little
# here. Asking for more blocks with `__launch_bounds__` (a minimum of 8, 9 or 10 an SM, so the compiler must fit
# 48, 40 or 32 registers, the last two with a stack) made it slower on the H100, one run at commit 1a5cd0a: 98.4,
# 102.7 and 116.1 µs against 97.7; on an H200, 8 an SM: 71.1 against 71.0. More blocks on an SM are not what this
# kernel lacks.
#
# Which blocks: those that would otherwise sit idle, the first wave. The default, `"auto"`, is as many blocks
# as fit on the GPU at once. Readings at the benchmark size, each column one process on one card, written down
# at commit e609b82 (the fifth try's row at 1a5cd0a; not records):
#
# | | H100 | H200 |
# |---|---:|---:|
# | every block waits (`self_search_blocks=0`) | 99.2 µs | 75.0 µs |
# | half the first wave searches, the full search | 98.3 | 73.6 |
# | the first wave searches, with the guess | 97.7 | 73.1 |
# | ... and the stage's new `l2_promotion="none"`, `window_rows=40` | 97.6 | 72.1 |
# | ... and the prepass launched with PDL too (the fifth try, below; another process) | 96.3 | 70.8 |
# | every block searches (the prepass still runs, unread) | 99.9 | 78.9 |
# | the main kernel alone, pairs ready | 93.3 | 69.1 |
#
# The last two lines are the limits. A search in every block loses to waiting: the search has to pay for
# itself out of idle time, and only the first wave has any. The main kernel alone is the floor that no way of
# handling the prepass can beat. The `self_search_blocks` sweep at the end shows the flat top: from 264 to 1584
# blocks the recorded times hardly move (the lines printed after the sweeps).
#
# A block that never waits may finish before the prepass does. Nothing breaks: the grid's last block always
# waits, so the kernel as a whole does not end before the prepass, and the pairs buffer is written again only by
# the next call's prepass (why that matters: the fifth try, below).
#
# ### Where the rest went, and the fifth try
#
# What was left between the stage and its floor (97.6 against 93.3 µs in the H100 readings above, commit e609b82)
# had an obvious suspect: the second wave's blocks, waiting for a prepass not yet done. Measured, the suspect is
# innocent. Part of the gap is the first wave's own searches: in the H100 readings the main kernel alone takes
# 1.3 µs more with them than without (94.6 at commit 1a5cd0a against 93.3 at e609b82, pairs ready in both). The
# rest, in readings on one H100, one process at commit 1a5cd0a, the first wave searching for itself in each (not
# records):
#
# | | H100 |
# |---|---:|
# | the main kernel alone, pairs ready | 94.6 µs |
# | a prepass that does nothing (it only lets the main kernel start), then the main kernel | 96.8 |
# | the real prepass, then a main kernel that never waits for it (pairs left from an earlier call) | 97.6 |
# | the stage (every block past the first wave waits) | 97.6 |
#
# Waiting costs nothing: by the time the second wave starts, the prepass has long finished. In these H100 readings
# (commit 1a5cd0a) the prepass's work beside the stream costs 0.8 µs (97.6 against 96.8), and the largest part,
# 2.2 µs (96.8 against 94.6), is a second kernel being there at all: a kernel launched the ordinary way starts
# only once everything before it on the stream has completed, so between two calls the GPU lets the last main
# kernel drain and complete, then launches the prepass and brings up its blocks, and only then (by PDL) the main
# kernel's.
#
# The timeline below is measured, not drawn by hand: `tools/probe_timeline.py` queues several calls behind a
# sleeping kernel and records, through CUPTI, when each kernel started and ended, with the stage as it is now
# (the prepass launched with PDL too, the fifth try below) and with `pdl=False`. That setting launches both
# kernels the ordinary way and also turns the first wave's own searches off (there is no early start for them
# to use), so the two panels differ in both. Under the plot, the gap from each kernel's end to the next one's
# start (negative: they overlap) and the time from one call to the next.

# %%
from cudabook import timeline

_ = timeline.show("resample", "07_tma")

# %% [markdown]
# Read the two panels. Launched the ordinary way, each kernel starts one to a little over two microseconds after the
# one before it has ended, twice a call, and the prepass runs alone in between. With PDL, the prepass starts a
# fraction of a microsecond before the last main kernel's recorded end, and this call's main kernel starts within a
# microsecond after it, long before the prepass ends: the two run side by side (the prepass takes longer so, sharing
# the SMs with the first wave). The negative gap is the likely sign that CUPTI's end of a kernel comes a little
# after its last block exits, once its completion is seen, and that the prepass's blocks start in between and wait
# (an inference: CUPTI does not say at what granularity it stamps a kernel's end). Neither panel overlaps a main
# kernel's tail: the main kernel never runs `launch_dependents`, so the next prepass is launched only when its last
# block exits.
#
# So the fifth try, now in the code, launches the prepass with programmatic dependent launch too. It is launched
# as soon as the last block of the kernel before it (the previous call's main kernel, when calls follow each
# other) has exited, instead of once that kernel has completed; its launch and the set-up of its blocks run
# while that kernel completes, and its blocks wait there: `griddepcontrol.wait` is their first instruction, so
# they read nothing early. What this hides is the gap between the two kernels, not the main kernel's tail.
# Only after the wait do they run `griddepcontrol.launch_dependents` and let this call's main kernel start,
# because that kernel's first wave reads the inputs without waiting for anything. Readings, one process on each
# card at commit 1a5cd0a:
#
# | | H100 | H200 |
# |---|---:|---:|
# | the stage before: the prepass launched the ordinary way | 97.8 µs | 72.2 µs |
# | the prepass launched with PDL | 96.3 | 70.8 |
# | an empty prepass launched with PDL (the floor for two kernels) | 95.4 | 70.0 |
# | the main kernel alone | 94.6 | 69.2 |
#
# Letting the prepass trigger before it waits, or wait only before its stores, gained nothing more (96.3 on the
# H100, 70.8 on the H200). The records at the top of this lesson are taken with this version.
#
# Two rules keep it right, and the host enforces both. The next call's prepass waits only for the kernel just
# before it, this call's main kernel, and nothing documented makes that wait reach further back. So some block
# of the main kernel must wait for this call's prepass, or the main kernel could end first and the next prepass
# would write pairs while this one still does. Without PDL nothing is early; with it the host keeps the grid's
# last block out of the own searches, whatever `self_search_blocks` asks (on a problem of one wave, `"auto"`
# would otherwise take every block). And a kernel is launched with PDL only if its own source waits, the
# prepass only if it waits before it triggers (`cudabook.nvrtc.waits_for_prerequisite(text, kernel)` and
# `waits_before_trigger` read the source; the tests check the workbook's kernels on their machine code,
# `nvrtc.waits_first_in_sass`): a learner's copy without them runs the ordinary way, slower and right.
#
# The honest lesson: on this problem a window in shared memory, even one brought by the copy engine, buys
# nothing that L2 does not already give a plain gather. What decides is bytes in flight. The TMA's strengths
# (no address arithmetic per thread, no registers, large boxes) pay off where each byte brought into shared
# memory is used many times, as in a matrix multiply; here each is used about twice.

# %% [markdown]
# ## What the profiler says: where the bytes go
#
# A TMA copy is not a load instruction: the copy engine moves each box from L2 to shared memory past the
# load/store pipeline, so the count of global load requests does not see it. DRAM does: below, the bytes it
# moved for each stage's kernels against the fewest the problem needs (inputs read once, output written once).
# Both come in under that: stage 05 never reads the rows no target uses, and when a kernel ends part of its
# output is still only in L2, not yet written to DRAM (lesson 08's profile).

# %%
from cudabook import profile
p = profile.show("resample", "05_double_buffered", "07_tma")
for stage in ("05_double_buffered", "07_tma"):
    rows = [r for r in p if r["stage"] == stage] if p else []
    if rows and p.min_bytes(stage):
        moved, k = sum(r["dram_MB"] for r in rows), p.kernel(stage)
        print(f"{stage}: {moved:,.0f} MB through DRAM, {moved * 1e6 / p.min_bytes(stage):.2f}x the minimum; "
              f"its main kernel, {k['kernel']}, made {k['load_requests']:,.0f} global load requests")

# %% [markdown]
# ## Experiments: where to search, how to hand out work, box shape
#
# - `search`: `"prepass"` (a first kernel), `"producer"` (the producer warp searches for each item before
#   issuing its copies), `"inline"` (consumers search per target, as stage 06 does). Prediction: a search in
#   the producer puts a chain of dependent loads in front of every copy, and the copy engine starves.
# - `persistent`: one block per work item (`False`: the hardware scheduler hands out work, in memory order)
#   against a persistent grid walking a ring of `stages` buffers. Measured on an H200 while this stage was
#   built (not a results/ record): more blocks per SM beat a deeper ring, and no ring at all was fastest.
#   Try `stages` with `persistent=True` to see it.
# - `box_rows`: bigger boxes mean fewer copies, but a box past the window's end moves rows nobody needs.
# - `pdl`: both kernels launched with programmatic dependent launch (the prepass once the kernel before it has
#   exited its last block, while that kernel completes; the main kernel while the prepass runs), or each after
#   the one before has completed. With
#   `pdl=False` the first wave's own searches are off too (nothing to hide), so this sweep measures all three.
# - `self_search_blocks`: how many of the first blocks find their own pairs instead of waiting for the
#   prepass (0: none; `"auto"`: the first wave, only with `pdl` and one block per item; with `pdl` the last
#   block always waits).
# - `l2_promotion`: how much L2 fetches around each box's rows (the tensor map's `CU_TENSOR_MAP_L2_PROMOTION`).
#   The boxes are whole 4 KB stretches of contiguous rows, so a larger fetch adds nothing the next box would not
#   bring anyway. On an H200 "256B" was 0.9 % slower than "none" in one run at commit 2a8bb33. In the recorded
#   sweeps at the end (read after them) the H100's three are level, and the H200's "256B" is about a percent
#   slower than "none".
# - `window_rows`: a stage holds this many rows. An item's 32 sorted targets span about 35 rows (the median)
#   at the benchmark's density, so rows past what an item needs are copied for nothing; fewer, and more targets
#   fall outside the window and read global memory (about 2.5 % of them at 40, 0.3 % at 48). The recorded
#   sweeps (read after them) have 48 a hair faster than 40 on the H100 and 40 a hair faster than 48 on the
#   H200. The default is 40.

# %%
resample.sweep("07_tma", "search", ["prepass", "producer", "inline"])
resample.sweep("07_tma", "persistent", [False, True])
resample.sweep("07_tma", "stages", [2, 3, 4], fixed={"persistent": True})
resample.sweep("07_tma", "box_rows", [4, 8, 16])
resample.sweep("07_tma", "pdl", [False, True])
resample.sweep("07_tma", "self_search_blocks", [0, 264, 528, 1056, 1320, 1584])
resample.sweep("07_tma", "l2_promotion", ["none", "128B", "256B"])
resample.sweep("07_tma", "window_rows", [32, 40, 48])

# %% [markdown]
# The last three recorded sweeps, read against every block waiting, against no promotion and against the
# default window:

# %%
lesson.recorded_against("resample", "07_tma", "self_search_blocks", 0)
lesson.recorded_against("resample", "07_tma", "l2_promotion", "none")
lesson.recorded_against("resample", "07_tma", "window_rows", 40)

# %% [markdown]
# ## Across problem sizes
#
# The ladder above is one size. Across the channel count D (B, S and T as the benchmark's), recorded on a GPU with
# `tools/sweep_sizes.py`: three of the fast stages, 07 and 08 (the next lesson's) among them (the panels name them:
# 05 beside them on the H100, 06 on the H200), and PyTorch (on the H200 `torch.compile` in each mode the benchmark
# times), each point checked against the reference. Where the lines cross says more than one size does: a fixed cost
# (the prepass, a launch) weighs most on the smallest D.

# %%
from cudabook import sizes

sizes.show("resample")

# %% [markdown]
# Write this stage's kernel yourself: [lab 07](../../labs/resample/07_tma.ipynb) (the completed version:
# [solution](../../solutions/resample/07_tma_SOLUTION.ipynb)).
