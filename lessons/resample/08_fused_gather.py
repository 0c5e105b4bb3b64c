# %% [markdown]
# # 08 · Fused gather: torch.compile's kernel, with the search folded in
#
# Lesson 07 ended on an uncomfortable fact: given a few lines of PyTorch (`cudabook.resample.peers.resample_torch`),
# `torch.compile` beats every stage of this ladder. This lesson first reads the code it generates and finds
# out why it is fast. Then it writes a CUDA C++ kernel that keeps what makes that code fast and changes one
# thing: the search moves into the gather, so no index array goes out to memory and back.
#
# The compiler's gather does three things that stage 08 keeps:
#
# - **no rows staged in shared memory, and no barriers.** Each thread loads its pieces of the two source rows
#   straight from global memory, and a warp never waits for another;
# - **small, short-lived blocks in many waves.** When a block finishes, the next one starts in its place, so an
#   SM's loads never dry up while its warps wait at a barrier;
# - **the caches do the reuse.** Neighbouring targets share source rows, and L1 and L2 catch the second read.
#
# What stage 08 changes: a warp owns a few consecutive targets (`targets_per_warp`: by default as many as make
# 128 output vectors, 4 at D = 256) and searches for their intervals itself. Each element then gets its target's
# interval and weight by a shuffle from the lane that found them. And one thing it copies late in the lesson,
# after measuring it: each thread of the compiler's gather (in the tile its autotuner picked on the H100) has
# four 16-byte loads in flight, not one.
#
# References: PTX ISA: [shfl.sync](https://docs.nvidia.com/cuda/parallel-thread-execution/index.html#data-movement-and-conversion-instructions-shfl-sync),
# [vote.sync](https://docs.nvidia.com/cuda/parallel-thread-execution/index.html#parallel-synchronization-and-communication-instructions-vote-sync)
# (`__ballot_sync`, `__all_sync`: the window search's votes),
# [bar.warp.sync](https://docs.nvidia.com/cuda/parallel-thread-execution/index.html#parallel-synchronization-and-communication-instructions-bar-warp-sync)
# (`__syncwarp`: a warp's window of source times is written before its lanes read it),
# [ld.global.nc](https://docs.nvidia.com/cuda/parallel-thread-execution/index.html#data-movement-and-conversion-instructions-ld-global-nc)
# (`__ldg`: loads through the read-only path, cached in L1),
# [griddepcontrol](https://docs.nvidia.com/cuda/parallel-thread-execution/index.html#parallel-synchronization-and-communication-instructions-griddepcontrol)
# (programmatic dependent launch); CUDA driver API:
# [cuLaunchKernelEx](https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__EXEC.html) with the launch attribute
# [CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION](https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__TYPES.html);
# CUDA: [programmatic dependent launch](https://docs.nvidia.com/cuda/cuda-c-programming-guide/index.html#programmatic-dependent-launch-and-synchronization),
# [launch bounds](https://docs.nvidia.com/cuda/cuda-c-programming-guide/index.html#launch-bounds);
# PyTorch: [torch.compile](https://pytorch.org/docs/stable/torch.compiler.html), which writes
# [Triton](https://triton-lang.org/) kernels for the GPU.

# %%
import cudabook
print(cudabook.where())

import contextlib
import statistics
import re
import types
import numpy as np
from cudabook import SIMULATOR, emulate, lesson, nvrtc, resample, results
from cudabook.resample import s08_fused_gather as s08

# %% [markdown]
# ## Where we are
#
# Stages 05 and 07 both run a search prepass and then stream the rows. `torch.compile` does the same, and it is
# still ahead. The records in `results/` give each one's time and two yardsticks. **% of copy** compares with
# the fastest plain copy of every input and the output. **% of needed** compares with the time that copy takes
# for only the bytes no kernel can avoid: the source rows some target uses, read once, and the output, written
# once. % of needed should not pass 100: that is the wall (a measured copy rate, not a law: a run's write-back
# can spill into the next). % of copy can pass 100: sorted random targets leave some
# source rows unread, so a gather moves fewer bytes than the copy of every input does. % of needed is the fair
# yardstick.

# %%
for record in results.load_all():
    for name, w in record["workloads"].items():
        if not name.startswith("resample "):
            continue
        rows = {**w["stages"], **w.get("peers", {})}
        ceiling = w.get("context", {}).get("needed_ceiling_us")
        print(f"{record['gpu']} · {name}")
        print(f"  the needed bytes at the copy ceiling: {ceiling:.1f} µs" if ceiling else
              "  (this record has no needed-bytes ceiling)")
        for k in ("05_double_buffered", "07_tma", "08_fused_gather", "torch_compile"):
            r = rows.get(k, {})
            if "median_us" in r:
                needed = f"{r['pct_of_needed']:5.1f} % of needed" if "pct_of_needed" in r else ""
                print(f"  {k:>18}: {r['median_us']:7.1f} µs  {r['pct_of_copy']:5.1f} % of copy  {needed}")
            elif k == "08_fused_gather":
                print(f"  {k:>18}: not in this record yet (`make bench` on a GPU adds it)")

# %% [markdown]
# ## What torch.compile generates
#
# This is what the compiler was given:

# %%
import inspect
from cudabook.resample import peers
print(inspect.getsource(peers.resample_torch))

# %% [markdown]
# `results/inductor/` holds what TorchInductor, the compiler behind `torch.compile`, wrote for this function
# at the benchmark's size on an H100. Its README says how it was captured. The file is Python that holds two
# Triton kernels as strings, plus the code that launches them. The cells below read it from disk, so what you
# see is the saved file itself.

# %%
INDUCTOR = results.RESULTS / "inductor" / "H100_80GB_HBM3_resample_inductor.py.txt"
inductor = INDUCTOR.read_text()
kernels = re.findall(r"^def (triton_\w+)\(", inductor, re.M)
print(inductor.splitlines()[0])
print("its kernels:", *kernels, sep="\n  ")

# %% [markdown]
# ### Kernel 1: searchsorted
#
# One target per element of a 1-D block (`XBLOCK` of them), a binary search over its batch row of source
# times (`bucketize_binary_search`), and an **int64** index stored per target: 64 x 4096 x 8 bytes = 2 MB written
# here and read back by the next kernel.

# %%
lesson.show_region(inductor, start=f"def {kernels[0]}(", end="tl.store")

# %% [markdown]
# ### Kernel 2: gather and lerp, fused
#
# Everything else the PyTorch code does is fused into one kernel: the clamp of the index, the two gathers of
# source times, the weight, its clamp to [0, 1], the two gathers of feature rows, the lerp and the cast to
# bf16. None of the intermediate [B, T, D] tensors in the PyTorch code ever reaches memory. The kernel is a
# 2-D tile: `YBLOCK` output rows (`yindex`: b * T + t) by `XBLOCK` channels (`xindex`), sizes the autotuner
# picks at run time. Read it line by line:
#
# - `tmp0`: the target's index from kernel 1, `tmp13`: the target time; both loaded with
#   `eviction_policy='evict_last'`, a hint to keep them in cache: every channel of the row reads the same value;
# - `tmp4`, `tmp5`: the index clamped to [1, S - 1] and the row below it: the interval is `[tmp5, tmp4]`;
# - `tmp14`, `tmp20`: the two source times (`evict_last` again), then the weight `tmp26`, clamped;
# - `tmp11`, `tmp27`: the two feature rows, one bf16 per (row, channel): **straight from global memory**;
# - `tmp31`: `a + w * (c - a)`, computed in float32 (`tmp32` is still float32); the store converts it to bf16,
#   the type of the output buffer.

# %%
lesson.show_region(inductor, start=f"def {kernels[1]}(", end="tl.store")

# %% [markdown]
# And the host side: the two launches, one after the other on one stream, with the index buffer in between.
# Triton lets a kernel use programmatic dependent launch. Inductor did not turn it on here:

# %%
lesson.show_region(inductor, start="buf0 = empty_strided_cuda", end=f"{kernels[1]}.run(")
print("\nlaunch_pdl in the kernels' metadata:", sorted(set(re.findall(r"'launch_pdl': (\w+)", inductor))))

# %% [markdown]
# ### How long each kernel takes
#
# `results/inductor/` also holds a CUPTI trace from the same H100: each kernel's duration on the GPU, for
# `torch.compile` and for stages 07 and 05 on one data set, three calls each. CUPTI times the kernels only.
# The records time whole calls back to back: both kernels and the gap between them (the second launch, and its
# blocks starting once the first kernel has finished). That is why the two kernels of `torch.compile` and of stage
# 05 add up to less than their records. Stage 07 is the exception: its record launches the two kernels with
# programmatic dependent launch, so they overlap (lesson 07), while the trace, another run, has them one after the
# other; its sum can come out above its record. Here is the median per kernel over its calls, and each owner's sum
# beside its record:

# %%
CUPTI = results.RESULTS / "inductor" / "H100_80GB_HBM3_resample_cupti.log"
S05, S07 = ("stage 05", "05_double_buffered"), ("stage 07", "07_tma")
OWNERS = {"triton_": ("torch.compile", "torch_compile"),                   # kernel name prefix -> (owner, record key)
          "resample_intervals": S07, "resample_tma": S07, "find_intervals": S05, "resample_in_flight": S05}
durations = {}
for line in CUPTI.read_text().splitlines():
    m = re.match(r"\s+[\d.]+\s+([\d.]+) us\s+(\S+)", line)
    if m:
        kernel = re.sub(r"\[.*", "", m.group(2)).split("::")[-1]
        durations.setdefault(kernel, []).append(float(m.group(1)))
owner_of = {k: next(v for p, v in OWNERS.items() if k.startswith(p)) for k in durations}
print(f"{'owner':>14}  {'kernel':48}  {'median':>9}  calls (µs)")
for kernel, us in durations.items():
    name = kernel if len(kernel) <= 48 else kernel[:45] + "..."
    print(f"{owner_of[kernel][0]:>14}  {name:48}  {np.median(us):6.2f} µs  {', '.join(f'{u:.2f}' for u in us)}")

h100 = next((r for r in results.load_all() if "H100" in r["gpu"]), None)
w = next((w for n, w in h100["workloads"].items() if n.startswith("resample ")), {}) if h100 else {}
recorded = {**w.get("stages", {}), **w.get("peers", {})}
print(f"\nkernel time a call (sum of the medians) against the record's time a call "
      f"({h100['gpu'] if h100 else 'no H100 record'}):")
for owner, key in dict(owner_of.values()).items():
    total = sum(np.median(us) for k, us in durations.items() if owner_of[k][0] == owner)
    rec = recorded.get(key, {}).get("median_us")
    print(f"  {owner:>14}: {total:6.2f} µs of kernels; the record: " + (f"{rec:.1f} µs" if rec else "none"))

# %% [markdown]
# The search is a small part for everyone. The difference is in the second kernel: the compiler's gather is
# faster than 07's TMA kernel and 05's kernel with eight loads in flight a lane. (The trace and the records are
# different runs, so compare the two columns loosely.)
#
# ### Why the compiler's gather runs near the ceiling
#
# Nothing in it is clever, and that is the point:
#
# 1. **No staging.** Stages 04, 06 and 07 copy a window of rows into shared memory and wait at a barrier (or an
#    mbarrier) before anyone computes. The compiler's gather has no window and no barrier: each warp issues its
#    loads, waits for its own data and stores.
# 2. **Many short-lived blocks.** A few `ncu` readings of this kernel on the H100 are written down in
#    `results/inductor/README.md` (one run each, not a record; the next cell prints them). The first gives its
#    grid: 16,384 blocks of 256 threads with 32 registers a thread. At 32 registers, 8 such blocks fit on an SM
#    (2,048 threads), so the grid runs in many waves (computed below). A block lives only as long as its few rows
#    take, and when it finishes the scheduler starts the next one, so no SM sits idle with finished warps. The
#    autotuner does not always pick the same shape: the second reading is another run, with another grid.
# 3. **The caches do the reuse.** With sorted targets, the upper row of target t is often the lower row of target
#    t + 1, and the blocks that need a row run at about the same time. The first reading also has the L1 hit
#    rate and the bytes read from DRAM. The rows some target needs, the source times and the targets come to
#    little less than those bytes (the cell's last line), so DRAM read each needed row about once. Nobody staged
#    anything. (The third reading is an earlier version of stage 08, below, with a prepass and 2 targets a
#    warp: its L1 hit rate is close.)
# 4. **Four loads in flight a thread**, in the first reading's tile. A block's elements spread over its
#    threads come to 16 channels a thread (the cell computes it from the first reading): four 16-byte pieces,
#    four loads in flight a thread. (How its tile splits them between rows and targets, the saved kernel does
#    not say.) Keep this one in mind; it comes back under "Two vectors a lane".

# %%
README = (results.RESULTS / "inductor" / "README.md").read_text()
readings = README[README.index("## ncu readings"):]
print(readings)
SMS = int(re.search(r"multi_processor_count=(\d+)", inductor).group(1))          # the H100 inductor compiled for
rows, channels = map(int, re.search(r"size_hints=\{'y': (\d+), 'x': (\d+)\}", inductor).groups())
grid = re.search(r"([\d,]+) blocks x (\d+) threads, (\d+) registers", readings)   # the first reading
blocks, threads, regs = int(grid.group(1).replace(",", "")), int(grid.group(2)), int(grid.group(3))
per_sm = min(2048 // threads, 65536 // (regs * threads))           # an SM: 2,048 threads, 65,536 registers
print(f"{rows:,} output rows x {channels} channels = {rows * channels:,} elements; {blocks:,} blocks of "
      f"{threads} threads: {rows * channels // blocks:,} elements a block ({rows // blocks} rows' worth)")
print(f"{per_sm} blocks an SM x {SMS} SMs = {per_sm * SMS:,} at a time: {blocks / (per_sm * SMS):.1f} waves")
per_thread = rows * channels // blocks // threads
print(f"{per_thread} channels a thread, each read from two source rows: {per_thread * 2 * 2 // 16} loads of 16 bytes")

for record in results.load_all():
    for name, w in record["workloads"].items():
        ctx = w.get("context", {})
        if name.startswith("resample ") and ctx.get("needed_bytes"):
            B, S, T, D = (int(re.search(rf"{k}=(\d+)", name).group(1)) for k in "BSTD")
            read = ctx["needed_bytes"] - B * T * D * 2                  # the needed bytes less the output
            print(f"{record['gpu']}: the needed reads come to {read / 1e6:.1f} MB (of {ctx['needed_bytes'] / 1e6:.1f} "
                  f"MB needed in all)")

# %% [markdown]
# ## Stage 08: the compiler's gather, with the search folded in
#
# Stage 08 keeps points 1 to 3. What it changes is the search. There is no int64 index array (2 MB written,
# 2 MB read back) and, by default, no second kernel. (Its only shared memory is each warp's own window of
# source times for the search, synchronized with `__syncwarp`, never with a block barrier.) A **warp owns
# `targets_per_warp` (TPW) consecutive targets** of one batch row, one per lane for the search:
#
# 1. **Search.** Each owning lane finds its target's interval `lo` and weight `wt` (below: how).
# 2. **Gather.** The warp sweeps its targets' **elements**. A row's `VPR` vectors (a vector is 16 bytes when D
#    is a multiple of 8; `VPR` is 32 at D = 256) are cut into `EPR` **slots** of `PPL` vectors each
#    (`vectors_per_lane`, 2 by default): slot `v` holds vectors `v` and `v + EPR`. Element e is slot `e % EPR`
#    of target `e / EPR`, with the slot fastest. Each element gets `src`, `dst32` and `wt` from the lane that
#    owns its target with `__shfl_sync`, loads its `PPL` vectors of each row with `__ldg`, lerps and stores
#    `PPL` vectors. At D = 256 with `PPL` = 2, `EPR` = 16: in a lane's first load, lanes 0-15 read the first 256
#    bytes of one target's row and lanes 16-31 those of the next target's; its second load reads the last 256
#    bytes of each. With `vectors_per_lane=1` a slot is one vector and 32 lanes read one whole 512-byte row.
#
# Who does what in each sweep, for a few D, with the defaults (`targets_per_warp="auto"`,
# `vectors_per_lane=2`; the kernel falls back to one vector a lane when a row's vector count is odd, as at
# D = 37):

# %%
def sweeps(D, **params):
    """For each sweep of the gather loop: which lanes do which (target, slots), as fused_gather.cu does."""
    cfg = s08.config(D, **params)
    tpw, ppl, vec = cfg["TPW"], cfg["PPL"], cfg["VEC"]
    vpr = s08.vectors_per_row(D)
    epr = vpr // ppl
    E = tpw * epr
    print(f"D = {D}: {vec} channel{'s' if vec > 1 else ''} a vector, VPR = {vpr}, TPW = {tpw}, PPL = {ppl}, "
          f"EPR = {epr} slots a row, E = {E} elements")
    for base in range(0, E, 32):
        groups = []                      # [target or None, first lane, last lane, first slot, last slot]
        for lane in range(32):
            e = base + lane
            i = e // epr if e < E else None
            if groups and groups[-1][0] == i:
                groups[-1][2], groups[-1][4] = lane, e % epr
            else:
                groups.append([i, lane, lane, e % epr, e % epr])
        parts = [(f"lanes {a}-{b}: target {i}, vectors {v0}-{v1}" if ppl == 1 else
                  f"lanes {a}-{b}: target {i}, vectors {v0}-{v1} and " +
                  ", ".join(f"{v0 + q * epr}-{v1 + q * epr}" for q in range(1, ppl)))
                 if i is not None else
                 f"lanes {a}-{b}: past E (no load, no store; they still shuffle, from lane {tpw - 1})"
                 for i, a, b, v0, v1 in groups]
        print(f"  sweep {base // 32}: " + "; ".join(parts))


for D in (256, 64, 37):
    sweeps(D)

# %% [markdown]
# At D = 37 the last sweep has lanes with no element. They must still execute the shuffles, because
# `__shfl_sync(0xffffffff, ...)` needs all 32 lanes; only their loads and stores are skipped. Their target index
# is clamped to `nt - 1`, so every shuffle reads from a lane that owns a target. The output would be right
# without the clamp: lanes `nt` and up hold the last target's values (the kernel gives lane `i` target
# `min(i, nt - 1)`), and a lane past `E` never uses what it got. The clamp keeps the shuffles tidy, and safe if
# the code before the gather changes. Here is the kernel (a warp finds its targets, searches, and calls
# `gather`), then the gather:

# %%
lesson.show_region(s08.source(), start="__launch_bounds__(NT, MINB)", end="gather(reinterpret_cast")

# %%
lesson.show_region(s08.source(), start="// The warp gathers its nt targets' rows.", end="// <<< lab")

# %% [markdown]
# ### The search, three ways
#
# A binary search is a chain of dependent loads. At S = 4096 that is twelve round trips to memory, one after
# another, before the first row can be loaded. `search` picks how stage 08 pays for it:
#
# - `"lane"`: each owning lane binary-searches its whole row: twelve dependent loads (`find_interval`).
# - `"window"` (the default): the warp copies 128 consecutive source times into shared memory (four loads a
#   lane, issued together: one round) and each lane binary-searches its own target there, at most eight steps
#   in shared memory instead of twelve loads from global memory (`window_try`). Which 128, in this order:
#   1. **The interpolation guess.** The row's first and last times load together with `x` (they do not depend
#      on it). If the times were evenly spread between those two, the warp's smallest target `xmin` would sit
#      at row (xmin - first) / (last - first) x (S - 1). The window starts 56 rows below that guess, so it
#      reaches 71 rows above it, room for the warp's other targets. A vote (`__all_sync`) asks whether every
#      lane's target lies inside. If so, the search is done.
#   2. **The probes.** Otherwise the warp loads 64 evenly spaced source times of the row, two a lane. A ballot
#      of "probe <= xmin" finds the stretch (64 rows at S = 4096) where `xmin` falls, and the window starts
#      there. Rows longer than 4096 narrow the stretch again first.
#   3. **The whole row.** A target outside that window too searches the whole row: slower, still right, for
#      targets in any order.
# - `"prepass"`: what `torch.compile` does. A first kernel, `resample_find`, writes every target's
#   (interval, weight) pair, and the gather reads them: one load.
#
# In the common case, then, one round of loads waits for `x`: the guess's window. When the guess misses, two
# more follow (the probes, then their window). An earlier version of this stage started with the probes, and
# loaded them alongside `x` too (in its SASS they issue with `x`'s load), so its common path was no deeper.
# What the guess saves is 64 scattered loads a warp, replaced by two that every warp of a batch row shares, and
# the ballots. The gain is small: a scratch run that timed it with and without found little between them (its
# timings are with the other readings, linked under "How fast?").

# %%
lesson.show_region(s08.source(), start="// Copy WIN source times", end="return j >= 0;")
lesson.show_region(s08.source(), start='// SEARCH 1 ("window")',
                   end="w = weight(__ldg(row + lo), __ldg(row + lo + 1), x);")

# %% [markdown]
# How often does each path run? Here is the same search in NumPy, guess first, then probes. It counts the warps
# whose guess's window holds all their targets, and the targets that fall back to the whole row. It runs on the
# benchmark's kind of inputs (source times with steps drawn evenly from 0.1 to 1.0, S = 4096) and on **uneven**
# times, whose steps are log-normal (as `uneven_problem` in `tests/resample/test_s08.py` makes them):

# %%
WIN = 128                                              # fused_gather.cu's WIN: source times in a warp's window


def inside(row, start, xs):
    """window_interval in the .cu: True where a target's interval lies in the WIN times from row `start`."""
    S = len(row)
    n = min(WIN, S - start)
    j = np.searchsorted(row[start:start + n], xs, side="right") - 1
    return np.where(j < 0, start == 0, np.where(j >= n - 1, start + n == S, True))


def window_path(row, xs):
    """window_search in the .cu for one warp's targets xs: "guess" or "probes", and where a target searches the
    whole row. float32 arithmetic, as on the GPU."""
    S = len(row)
    xmin = xs.min()
    at = min(max((xmin - row[0]) / (row[-1] - row[0]) * np.float32(S - 1), np.float32(0)), np.float32(S - 1))
    start = min(max(int(at) - (WIN // 2 - 8), 0), S - 2)        # 56 rows below the guess
    if inside(row, start, xs).all():                            # __all_sync: every lane's target is inside
        return "guess", np.zeros(len(xs), bool)
    base, length, g = 0, S, (S + 63) // 64
    while True:                                                 # the ballots: the stretch that holds xmin
        probes = base + np.arange(64) * g
        k = np.count_nonzero(row[probes[probes < base + length]] <= xmin) - 1
        nb = base + max(k, 0) * g
        length, base = min(g, base + length - nb), nb
        if length <= 64:
            break
        g = (length + 63) // 64
    return "probes", ~inside(row, min(base, S - 2), xs)


def uneven_problem(B, S, T, D, rng):
    """Source times far from evenly spread (log-normal steps, as in tests/resample/test_s08.py), sorted targets."""
    _, feats, _ = resample.random_problem(B, S, T, D, rng=rng)
    times = (np.cumsum(np.exp(rng.normal(0, 1.5, (B, S))) + 0.05, axis=1) / 8).astype(np.float32)
    targets = np.sort(rng.uniform(times[:, :1] - 1, times[:, -1:] + 1, (B, T)), axis=1).astype(np.float32)
    return times, feats, targets


rng = np.random.default_rng(8)
kinds = {"sorted, T = S": resample.random_problem(4, 4096, 4096, 1, rng=rng),
         "sorted, T = S / 4": resample.random_problem(4, 4096, 1024, 1, rng=rng),
         "unsorted, T = S": resample.random_problem(4, 4096, 4096, 1, sorted_targets=False, rng=rng),
         "uneven, sorted, T = S": uneven_problem(4, 4096, 4096, 1, rng)}
print("guess: % of warps whose guess's window holds all their targets (the rest go on to the probes);\n"
      "whole row: % of targets that search the whole row")
print(f"{'':4}" + "".join(f"{k:>24}" for k in kinds))
print(f"{'TPW':>4}" + f"{'guess':>12}{'whole row':>12}" * len(kinds))
for tpw in (1, 2, 4, 8, 16, 32):
    cells = []
    for times, _, targets in kinds.values():
        runs = [window_path(times[b], targets[b, t:t + tpw]) for b in range(len(times))
                for t in range(0, targets.shape[1], tpw)]
        guess = np.mean([path == "guess" for path, _ in runs])
        whole = np.concatenate([w for _, w in runs]).mean()
        cells.append(f"{100 * guess:11.1f}%{100 * whole:11.1f}%")
    print(f"{tpw:4d}" + "".join(cells))

for kind in ("sorted, T = S", "uneven, sorted, T = S"):          # how far a row strays from the straight line
    times = kinds[kind][0].astype(np.float64)
    S = times.shape[1]
    even = (times - times[:, :1]) / (times[:, -1:] - times[:, :1]) * (S - 1)
    off = np.abs(even - np.arange(S))
    print(f"{kind}: the even-spread guess is off by {np.median(off):.0f} rows at the median, "
          f"{np.percentile(off, 99):.0f} at the 99th percentile, {off.max():.0f} at most")

# %% [markdown]
# On the benchmark's kind of inputs (sorted, T = S) the guess is off by fewer rows than the 56 that the window
# reaches below it, even at its worst (the last lines above), so nearly every warp stops after one window. Sparser
# targets spread a warp's targets over more rows: at T = S / 4 the larger TPW outgrow the 128-row window, and some
# targets outgrow the probes' window too. Unsorted targets spread a warp over the whole row once it owns more than
# one. Then the guess almost never holds, and about half the targets (at two a warp) to most of them (at four or
# more) search the whole row after three rounds of loads that did not find them, and `search="lane"` or `"prepass"`
# is the better choice. On uneven times the guess misses for about half the warps, at every TPW: it is often off by
# more rows than the window reaches. The probes' window catches all of those, so they pay three rounds of loads
# instead of one, and no target pays a whole-row search.
#
# ### Why only a few targets a warp
#
# Fewer targets a warp means more warps, each short-lived: the same "many blocks, many waves" as the compiler's
# gather. But each warp pays a search before its first row load (two rounds of loads when the guess holds: `x`
# with the row's first and last times, then the window), so the search costs less per target when a warp owns
# more targets. The launch at the benchmark's size, for each TPW (the default blocks of 128 threads, 16 an SM as
# `min_blocks` asks, on the SM count of the H100 above):

# %%
bench = types.SimpleNamespace(shape=(64, 4096, 4096, 256))       # plan() needs only the shape (B, S, T, D)
per_sm = s08.PARAMS["min_blocks"]                                 # blocks an SM at the same time (16)
print(f"{'TPW':>4} {'warps':>8} {'blocks':>7} {'waves':>6} {'KB a warp moves':>16} {'search rounds a target':>23}")
for tpw in (1, 2, 4, 8, 16, 32):
    plan = s08.plan(bench, targets_per_warp=tpw)
    moves = tpw * 3 * 256 * 2 / 1024                             # two rows read, one written, 512 bytes each
    print(f"{tpw:4d} {plan['warps']:8,} {plan['blocks']:7,} {plan['blocks'] / (SMS * per_sm):6.1f} {moves:16.1f} "
          f"{2 / tpw:23.2f}")

# %% [markdown]
# At TPW = 32 the whole grid fits in one wave. The warps all start together, so they search at about the same
# moment, with few row loads in flight, and then they all stream at once and finish together. At TPW = 1 the
# search is paid for every target. 4 sits between the two. The sweep at the end measures all six (read against 4
# after it): in the recorded sweeps the minimum is at 4, TPW = 1 is far slower, and the time climbs again from 8 to
# 32.
#
# What matters is less the number of targets than how long a warp lives: how many vectors it moves. At D = 64
# four targets are a quarter of the work of four at D = 256, and at D = 512 twice as much. So the default,
# `targets_per_warp="auto"`, holds a warp's work constant instead: as many targets as make 128 output vectors
# (16-byte vectors where D is a multiple of 8), 4 a lane. That is 4 targets at D = 256, 16 at D = 64 and 2 at
# D = 512. "Across problem sizes" below shows what this was worth.
#
# ### min_blocks: registers decide how many lanes load at once
#
# `__launch_bounds__(NT, MINB)` tells the compiler that `MINB` blocks of `NT` threads must fit on an SM. With
# 16 blocks of 128 threads (the defaults), 2,048 threads share 65,536 registers, so the compiler must make do
# with 32 registers a thread. More threads means more loads in flight. By Little's law (lesson 05), DRAM runs at
# full speed only with bandwidth x latency bytes in flight. With lesson 05's round figures (3.35 TB/s, 700 ns,
# 132 SMs) that is about 17.8 KB an SM:

# %%
need = 3.35e12 * 700e-9 / 132                      # bytes in flight an SM needs (lesson 05's round figures)
try:
    block = s08.PARAMS["threads"] // 32                               # warps a block (4)
    for mb in (0, 16):
        use = nvrtc.resource_usage(s08.compile_cubin(D=256, min_blocks=mb))[s08.KERNEL]
        per_warp = -(-use["registers"] * 32 // 256) * 256             # registers are allocated 256 a warp
        warps = min(64, 65536 // per_warp // block * block)           # whole blocks, at most 64 warps an SM
        flight = warps * 32 * 2 * s08.PARAMS["vectors_per_lane"] * 16  # 2 x PPL 16-byte loads a lane
        print(f"min_blocks={mb}: {use['registers']} registers a thread -> {warps * 32:,} threads an SM -> up to "
              f"{flight / 1e3:.0f} KB in flight, {flight / need:.1f}x the {need / 1e3:.1f} KB needed")
except nvrtc.ToolMissing as e:
    print(e)

# %% [markdown]
# Both settings are above the need on paper. But a lane has its loads in flight only from the load to the
# lerp. While it searches, shuffles or stores, it has none. The headroom is what keeps the average above the
# need, so more resident threads is the safer side. `min_blocks=0` lets the compiler use more registers, and
# then fewer blocks fit. The sweep at the end measures it: in the recorded sweeps `min_blocks=0` is slower on
# both cards, by a few percent on the H100 and by about a tenth on the H200 (read after the sweeps).
#
# ### Two vectors a lane: twice the loads in flight, for no more registers
#
# Point 4 of the compiler's gather: each of its threads has four 16-byte loads in flight. Stage 08 can have
# more in flight two ways. `unroll=2` gives a lane two elements of a sweep, and they may belong to two different
# targets: two shuffled source offsets, two addresses. `vectors_per_lane=2` (the default) gives a lane one
# element of two vectors, half a row apart, from one shuffled offset: the second vector of each row is the
# first one's address plus a constant, which the load instruction carries for free. Prediction: both put four
# 16-byte loads in flight a lane, but only the second fits the 32 registers that 16 blocks an SM allow.
# `stack` above zero below means registers spilled to memory:

# %%
try:
    print(f"{'setting (D = 256)':54s} {'registers':>9} {'stack':>6}  16-byte loads a lane in flight")
    for kw in ({"vectors_per_lane": 1}, {"vectors_per_lane": 2}, {"vectors_per_lane": 1, "unroll": 2},
               {"vectors_per_lane": 1, "unroll": 2, "min_blocks": 12}, {"vectors_per_lane": 4}):
        use = nvrtc.resource_usage(s08.compile_cubin(D=256, **kw))[s08.KERNEL]
        loads = 2 * kw["vectors_per_lane"] * kw.get("unroll", 1)
        print(f"{str(kw):54s} {use['registers']:9d} {use['stack']:6d}  {loads}")
except nvrtc.ToolMissing as e:
    print(e)

# %% [markdown]
# `unroll=2` spills under the cap and needs 40 registers, so 12 blocks an SM, to keep its values in registers.
# `vectors_per_lane=2` fits the 32 registers with nothing spilled. Four vectors a lane (eight loads) spill again.
# The sweep at the end measures all three: in the recorded sweeps at D = 256, two vectors a lane take a little less
# time than one, and four take more. In scratch runs the gain was larger on the H200 and at the other D, where a
# warp's loads are fewer or longer-lived.
#
# ### Programmatic dependent launch
#
# Every kernel of this stage is launched with **programmatic dependent launch** (sm_90): the host calls
# `cuLaunchKernelEx` with the attribute `CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION`
# (`cudabook.nvrtc.Kernel.launch(..., pdl=True)`). Such a kernel may be launched before the kernel before it on
# the stream has completed: as soon as every block of that one has run `griddepcontrol.launch_dependents` or has
# exited. A block that never runs it triggers when it exits (the CUDA programming guide's implicit trigger). Each
# block's first instruction is `griddepcontrol.wait`, which returns once the kernel before has completed and its
# writes are visible, so nothing is read early. On sm_80 the kernels leave both instructions out and the launch
# is an ordinary one. What is gained depends on when the kernel before triggers:
#
# - With the default search there is one kernel a call, and the kernel before it is whatever ran last: back to
#   back, the last call's gather. The gather never runs `launch_dependents`, so the next gather is launched only
#   when the last block of this one has exited. Its tail, the last blocks running while SMs go idle, is not
#   overlapped. What is hidden is the gap after it: launched the ordinary way, the next kernel starts only after
#   this one has completed (its writes flushed, its completion seen), and then its blocks still have to be
#   launched and dispatched. With PDL that launch runs while the kernel before completes, and
#   `griddepcontrol.wait` waits out what is left. The `pdl` sweep at the end measures the difference (read after
#   the sweeps: a microsecond or two). `torch.compile`'s code could do the same (Triton has the switch), and
#   inductor left it off here (the metadata printed above), so part of this stage's lead over the compiler is
#   this launch. How large a part: in one process on an H200 at commit 1e13fe4 (a reading, not a record),
#   `torch.compile`'s default mode took 68.1 µs a call with the option off and 64.6 µs with
#   `torch._inductor.config.triton.enable_pdl` on, twice each, the same both times. That is most of the lead the
#   records then gave this stage over the compiler on that card. `make bench` therefore also times max-autotune
#   with the option on (`torch_compile_max_autotune_pdl`, where the installed torch has it). The H200 record
#   has it, and there it is the compiler's fastest mode; the H100 record predates it. A gather that runs
#   `launch_dependents` early (the `trigger=True` setting: right after its wait) lets the next call be launched
#   once every block of this one has started, so the next call's blocks can be placed on the SMs this one's tail
#   leaves idle. They do no work there: their first instruction is the wait, which returns only once this gather
#   has completed. So all the early trigger can add is that those blocks are placed sooner, and with PDL alone
#   the next gather already starts as this one ends (the timeline below). Tried on an H200 against the
#   compiler's fastest mode in interleaved rounds (the cell after the timeline prints the reading), it did not
#   pay: a little slower at every D. Why was not measured.
# - With `search="prepass"` there are two kernels, as in `torch.compile`'s code. The search kernel,
#   `resample_find`, waits for the kernel before it and then runs `griddepcontrol.launch_dependents`: once every
#   one of its blocks has done that, the gather may be launched while the search still runs, and its blocks wait
#   at their start for the search to complete. That overlap is real. The search kernel itself follows the last
#   call's gather, which never triggers, so for it only the gap is hidden. Stage 07 launches its prepass and its
#   streaming kernel the same way.
#
# Measured on a card (`tools/probe_timeline.py`: several calls queued behind a sleeping kernel, each kernel's
# start and end as CUPTI saw them), with the default search, with PDL and without:

# %%
from cudabook import timeline

_ = timeline.show("resample", "08_fused_gather")

# %%
def head_to_head_reading(kind):
    """Settings of this stage against the compiler's fastest mode, interleaved (tools/probe_head_to_head.py),
    from every card's reading of this kind."""
    found = results.readings("resample", "08_fused_gather", kind)
    if not found:
        print(f"no reading '{kind}' in results/readings/ (tools/probe_head_to_head.py on a Hopper GPU)")
    for reading in found:
        print(f"{reading['gpu']}, commit {reading['commit']}: {reading['kind']}")
        for case in reading["cases"]:
            us = {k: statistics.median(v) for k, v in case["us"].items()}
            print(f"  D = {case['size']['D']:3d}:")
            for k, v in us.items():
                print(f"     {k.split(' ', 1)[1] if ' ' in k else k:32s} {v:7.1f} µs")
            for k, v in case["ratios"].items():
                print(f"     {k:60s} {v:.3f}x")


head_to_head_reading("trigger")

# %% [markdown]
# Without PDL each gather starts about a microsecond after the last one's recorded end; with it, a fraction of a
# microsecond before (most likely: its blocks start as the last block of the one before exits, and CUPTI stamps
# the end a little later, when the completion is seen). That microsecond a call is all PDL hides here: the
# kernels do not overlap beyond it.
#
# The host launches a kernel this way only if its own source waits (a learner's copy without the wait would
# race the kernel before it: it runs the ordinary way), and the search kernel only if it waits before it lets
# the gather start (`cudabook.nvrtc.waits_for_prerequisite` and `waits_before_trigger` read the source). The
# search kernel:

# %%
lesson.show_region(s08.source(), start='extern "C" __global__ void __launch_bounds__(256)',
                   end="pairs[k] = make_int2")

# %% [markdown]
# In the machine code each `griddepcontrol` instruction is one SASS instruction (in the builds this workbook was
# written with: `PREEXIT` for `launch_dependents`, `ACQBULK` for `wait`). The compiler may move plain arithmetic
# across the wait, but no load from global memory: the cell prints where each one landed, and each kernel's first
# global load, which must come after the wait:

# %%
try:
    cubin_prepass = s08.compile_cubin(D=256, search="prepass")
    for kernel in (s08.FIND, s08.KERNEL):
        body = nvrtc.sass_lines(cubin_prepass, r".", kernel=kernel)              # every instruction
        marks = [(i, line.split()[0]) for i, line in enumerate(body) if line.split()[0] in ("PREEXIT", "ACQBULK")]
        load = next((i for i, line in enumerate(body) if "LDG" in line), None)
        print(f"{kernel} ({len(body)} instructions): "
              + (", ".join(f"{op} at {i}" for i, op in marks) or "neither PREEXIT nor ACQBULK")
              + (f"; the first global load at {load}: {body[load]}" if load is not None else ""))
except nvrtc.ToolMissing as e:
    print(e)

# %% [markdown]
# ## What the machine code says
#
# Everything here needs no GPU: the stage compiles for sm_90a on any machine. The cell prints the registers a
# thread uses (the 32 that `min_blocks=16` allows, with nothing spilled to `local`), the static shared memory
# (the window search's 128 source times per warp, plus 1 KB that this build reports for every kernel with shared
# memory: the fallback kernel `resample_generic`, in the same cubin, shows it too), and the gather's loads. The
# four 16-byte loads of the gather are `LDG.E.128.CONSTANT` (`.CONSTANT`: the read-only path of `__ldg`), all from
# one address register: the lane's second vector is at +256 bytes (`q * EPR` vectors: half a row), the upper row at
# +512 (`VPR` vectors: one row) and its second vector at +768. The compiler also writes a second copy of each
# shuffle, for a warp whose lanes arrive diverged (`BRA.DIV` jumps to it; it runs between `WARPSYNC.COLLECTIVE` and
# `ENDCOLLECTIVE`). In the gather all 32 lanes reach the shuffles together, so the cell leaves that copy out:

# %%
try:
    cubin08 = s08.compile_cubin(D=256)
    usage = nvrtc.resource_usage(cubin08)
    print("resources:", usage[s08.KERNEL])
    windows = s08.PARAMS["threads"] // 32 * 128 * 4                    # 4 warps x 128 source times x 4 bytes
    print(f"the windows: {windows:,} bytes of the {usage[s08.KERNEL]['shared']:,}; resample_generic's two arrays of "
          f"64 take 512 bytes and it reports {usage['resample_generic']['shared']:,}")
    loads = nvrtc.sass_lines(cubin08, r"LDG", kernel=s08.KERNEL)
    wide = [line for line in loads if ".128" in line]
    print(f"{len(loads)} LDG instructions in {s08.KERNEL}, {len(wide)} of them 16 bytes wide (the gather's rows); "
          f"the rest load 4 bytes: the target and the search's source times")
    collective, fallback = False, 0                              # inside WARPSYNC.COLLECTIVE .. ENDCOLLECTIVE
    for line in nvrtc.sass_lines(cubin08, r".", kernel=s08.KERNEL):
        collective = (collective or line.startswith("WARPSYNC.COLLECTIVE")) and not line.startswith("ENDCOLLECTIVE")
        if re.search(r"LDG\.E\.128|SHFL\.IDX|STG\.E\.128", line):
            if collective:
                fallback += 1
            else:
                print("   ", line)
    print(f"(and {fallback} SHFL.IDX in the diverged-warp fallback, left out)")
    row_bytes = 256 * 2
    offsets = sorted(int(m.group(1), 16) for line in wide for m in [re.search(r"\+0x([0-9a-f]+)\]", line)] if m)
    bases = {m.group(1) for line in wide for m in [re.search(r"\[(R\d+)\.64", line)] if m}
    print(f"the 16-byte loads' offsets from their address register ({', '.join(sorted(bases))}): "
          f"{[hex(o) for o in offsets]}; {row_bytes} bytes = one row of 256 bf16 = VPR vectors: `+ VPR`"
          if row_bytes in offsets else "(no +0x200 offset in this build's SASS)")
except nvrtc.ToolMissing as e:
    print(e)

# %% [markdown]
# ## Is it right?
#
# On a GPU of compute capability 8.0 or newer the stage runs for real. Without one, `cudabook.emulate` runs the
# same C++ on the CPU, every CUDA thread a small coroutine, and the checker judges the result against the
# float64 reference. Every search, some TPW, `min_blocks`, `threads`, `unroll` and `vectors_per_lane`, on small
# sorted and unsorted cases (D = 37: one channel a vector, so one vector a lane), on a row longer than 4096
# (where the probes, once the guess misses, narrow twice) and on uneven times (where the guess often misses and
# the probes' window runs), both at D = 48 (six vectors a row: two a lane by default, in slots three vectors
# apart):

# %%
settings = [{"search": "window"}, {"search": "lane"}, {"search": "prepass"}, {"search": "prepass", "pdl": False},
            {"targets_per_warp": 1}, {"targets_per_warp": 32}, {"min_blocks": 0}, {"threads": 64, "min_blocks": 0},
            {"unroll": 2}, {"vectors_per_lane": 1}]
rng = np.random.default_rng(9)
cases = [("sorted", lambda: resample.random_problem(2, 200, 21, 37, rng=rng)),
         ("unsorted", lambda: resample.random_problem(2, 200, 21, 37, sorted_targets=False, rng=rng)),
         ("S = 5000", lambda: resample.random_problem(1, 5000, 40, 48, rng=rng)),
         ("uneven times", lambda: uneven_problem(2, 2000, 64, 48, rng))]
why = resample.unavailable("08_fused_gather")
if why and not SIMULATOR:
    print(f"Not run here: {why}. (The CPU emulator works on host memory, where Numba runs in its simulator: "
          f"set CUDABOOK_SIMULATOR=1 before `import cudabook` to use it.)")
else:
    try:
        if not why:                     # the benchmark's rows once, with the defaults (its float64 reference is slow)
            big = resample.demo_size()
            verdict = resample.check_on(s08.launch, *resample.random_problem(**big, rng=rng))
            print(f"defaults, {', '.join(f'{k}={v}' for k, v in big.items())}, on the GPU: "
                  f"{str(verdict).splitlines()[0]}\n")
        sizes, failed = {}, []
        print(f"{'emulated on the CPU' if why else 'on the GPU':36s}" + "".join(f"{name:>14}" for name, _ in cases))
        for kw in settings:
            cells = []
            for name, problem in cases:
                times, feats, targets = problem()
                sizes[name] = f"B={times.shape[0]}, S={times.shape[1]}, T={targets.shape[1]}, D={feats.shape[2]}"
                with emulate.emulating() if why else contextlib.nullcontext():
                    verdict = resample.check_on(s08.launch, times, feats, targets, **kw)
                cells.append("PASS" if verdict.ok else "FAIL")
                if not verdict.ok:
                    failed.append(f"{kw} {name}: {str(verdict).splitlines()[0]}")
            print(f"{str(kw):36s}" + "".join(f"{c:>14}" for c in cells))
        print("cases: " + "; ".join(f"{name} ({size})" for name, size in sizes.items()))
        for line in failed:
            print(line)
    except emulate.HostCompilerMissing as e:
        print("Not emulated:", e)

# %% [markdown]
# ## How fast?
#
# With a GPU this measures stage 08 and the one before it (07 on Hopper, 06 elsewhere), the copy ceiling and
# PyTorch (eager and `torch.compile`) on the same data, in this process. The earlier stages come from this
# card's record in `results/` (‡). Without a GPU it shows the records.

# %%
resample.ladder_so_far("08_fused_gather", peers=True)

# %% [markdown]
# Stage 08 against 07 and `torch.compile`, as the records in `results/` have them, and against this workbook's
# aim for the stage: 5 % less time than `torch.compile`:

# %%
AIM = 5.0                                                  # % less time than torch.compile
for record in results.load_all():
    for name, w in record["workloads"].items():
        if not name.startswith("resample "):
            continue
        rows = {**w["stages"], **w.get("peers", {})}
        us = {k: rows.get(k, {}).get("median_us")
              for k in ("07_tma", "08_fused_gather", "torch_compile", "torch_compile_max_autotune",
                        "torch_compile_max_autotune_pdl")}
        compilers = [v for k, v in us.items() if k.startswith("torch_compile") and v]
        best = min(compilers) if compilers else None           # the compiler: its faster mode in this record
        print(f"{record['gpu']} · {name}")
        if not us["08_fused_gather"]:
            print("  no 08 in this record yet")
            continue
        for k, v in us.items():
            if v:
                print(f"  {k:>30}: {v:7.1f} µs")
        for peer in ("07_tma", "torch_compile", "torch_compile_max_autotune", "torch_compile_max_autotune_pdl"):
            if us[peer]:
                d = 100 * (us["08_fused_gather"] - us[peer]) / us[peer]
                print(f"  08 against {peer}: {d:+.1f} % of its time ({'08' if d < 0 else peer} ahead)")
        ceiling = w.get("context", {}).get("needed_ceiling_us")
        if best:
            aim = (1 - AIM / 100) * best
            at = f", {100 * ceiling / aim:.1f} % of needed" if ceiling else ""
            there = "there" if us["08_fused_gather"] <= aim else "not there yet"
            print(f"  the aim: {aim:.1f} µs{at}; 08 is {there} ({us['08_fused_gather'] - aim:+.1f} µs)")

# %% [markdown]
# In both records stage 08 is the fastest resampler of this workbook, and the only rung of the ladder that takes
# less time than `torch.compile` in the same run. Both records also have `max-autotune-no-cudagraphs`, which tried
# its Triton configurations: in the H100 record it came out a little faster than the default mode, in the H200
# record a little slower (both printed above). The H200 record also has max-autotune-no-cudagraphs with inductor's
# PDL option on, its fastest mode. The lead holds against every mode. Against the fastest mode of each record, the
# strongest peer in that run (max-autotune-no-cudagraphs with PDL on the H200; max-autotune-no-cudagraphs on the
# H100, whose record predates the PDL option), the ladder's medians fall short of the 5 % this workbook aims for in
# both records (the lines "the aim" above). These are medians of one benchmark run, each kernel timed in its own
# turn, so a margin this size is one draw of the card's state as well as of the compiler's. The H200 record also
# times stage 08 and that mode again, side by side in interleaved rounds that share the card's clock (the comparison
# to quote; the README's lead block prints it), and there stage 08 does reach the aim; the H100 record has no such
# rounds. The last step toward the aim was not in the kernel at all: launching the gather with programmatic
# dependent launch (above; the `pdl` sweep at the end gives its gain). The compiler's draw counts too: earlier H100
# records caught other draws of its time, about a microsecond apart (the readings linked below), several times stage
# 08's distance from the aim in the H100 record (the line "the aim" above). The aim is close to the wall: the line
# "the aim" above gives 5 % under the compiler's time as a share of the needed-bytes ceiling (printed above), and
# the profile below shows that stage 08 moves within a few percent of the bytes it must.
#
# How far ahead also depends on the compiler's run. Inductor's autotuner times a few tile shapes for the gather
# when it first compiles and keeps the fastest, and which one wins changes from process to process: in fresh
# processes with an empty inductor cache, `torch.compile`'s time moved by a few percent while stage 08's stayed
# put. A single record catches one draw of the compiler's tiles, so a margin of a few percent needs several runs
# before it means anything. A draw may also stick to a machine: the generated code above carries
# `'autotune_local_cache': True`, so inductor keeps its pick in an on-disk cache for later processes there (two
# processes one after the other on one machine drew the same slow time, which machines started separately did
# not). Those scratch runs, and the others this lesson mentions, are written down with their cards and
# conditions as [readings, not records](../../results/readings/08_fused_gather.md). The H200 record above comes
# from a later machine (its figures are printed above).
#
# Around the defaults, the sweeps at the end of this lesson show each parameter on its own, recorded on that
# H100 and on an H200 (`results/sweeps/*_lessons.json`; on a machine without a GPU `resample.sweep` prints them,
# each with its card and commit).
#
# Three other ways to pay for the search were written, measured and dropped; they are not in the code (their
# timings are in the readings linked above):
#
# - **A block-shared search**: the block's first warp searches for all the block's warps and hands them the
#   intervals through shared memory. Before the interpolation guess existed it helped. Once the guess made each
#   warp's own search cheap, it no longer did: it was a little slower than the per-warp window.
# - **A persistent search-ahead**: long-lived blocks in which one warp searches the next chunk of targets while
#   the others gather the current one: clearly slower. Long-lived blocks give up the many short waves of point 2,
#   which is the most likely reason.
# - **Persistent warps that search ahead**: only as many warps as fit on the GPU at once, each taking every
#   W-th group of targets (W warps in all, so the warps still advance together through memory). While a warp
#   gathers one group, the loads for its next search are already in flight: the window around the next group's
#   guess into registers, and the targets of the group after. Its search is then shared-memory work only. At its
#   best setting it was still slower than stage 08, and much slower with more blocks an SM, where the extra
#   registers spill. Hiding the search did not pay for giving up short-lived warps.
#
# ## What the profiler says
#
# With a GPU and ncu this profiles now. Otherwise it shows the profiles recorded in `results/profiles/`, when
# stage 08 has one.

# %%
from cudabook import profile
p = profile.show("resample", "07_tma", "08_fused_gather")
for stage in ("07_tma", "08_fused_gather"):
    k = p.kernel(stage) if p else None
    if k:
        print(f"{stage} ({k['kernel']}): {k['duration_us']:.1f} µs, {k['dram_read_MB']:.1f} MB read from DRAM, "
              f"L2 hit {k['l2_hit_pct']:.0f} %, {k['registers']:.0f} registers a thread")
    elif p is not None:
        print(f"{stage}: no profile of it recorded yet")
k = p.kernel("08_fused_gather") if p else None
if k:
    B, S, T, D = 64, 4096, 4096, 256                            # the benchmark's size, which the profile ran
    out_MB = B * T * D * 2 / 1e6
    needed = next((w["context"].get("needed_bytes") for r in results.load_all() for n, w in r["workloads"].items()
                   if n == "resample B=64 S=4096 T=4096 D=256 sorted" and r["gpu"] == p.gpu), None)
    if needed:                                     # (the needed bytes count the source times and targets too)
        reads = needed / 1e6 - out_MB
        print(f"08 read {k['dram_read_MB']:.1f} MB from DRAM; the needed reads are {reads:.1f} MB "
              f"({100 * (k['dram_read_MB'] / reads - 1):+.1f} %)")
    print(f"08 wrote {k['dram_write_MB']:.1f} MB to DRAM during the kernel; the output is {out_MB:.1f} MB")

# %% [markdown]
# Two things in stage 08's profile are worth a second look. Its DRAM reads are a few percent above the needed
# reads (the rows some target uses, the source times and the targets; the margin is printed above): some bytes
# come from DRAM twice, but few, so there is little left to save in bytes; what is left is time. And it writes less
# than its output: L2 holds written lines and writes them back to DRAM later, so at the end of the kernel part of
# the output (the gap between the two figures printed above; L2 holds 50 MiB on the H100, 60 MiB on the H200) is
# still only in L2. In the
# benchmark's runs back to back, that write-back falls into the next run. ncu also empties the caches before it
# measures a kernel, which is one reason its time differs from the record's. (The profile cell says which card
# and commit.)
#
# ## Experiments
#
# - `targets_per_warp`: predict from the table of waves above. Too few and the search is paid per target, too
#   many and the grid is one wave that searches, then streams. (At D = 256 "auto" is 4.)
# - `vectors_per_lane`: predict from the registers and spills in "Two vectors a lane".
# - `search`: the three ways. `"lane"` pays twelve dependent loads a warp before its first row; `"prepass"`
#   pays a second kernel and a round trip of the (interval, weight) pairs through memory. Prediction: both lose
#   to `"window"`. In the recorded sweeps both do.
# - `min_blocks`: 16 caps a thread at 32 registers; 0 lets the compiler take more, and fewer blocks then fit.
# - `threads`, with `min_blocks=0` (16 blocks of 256 or 512 threads are more than an SM holds): a small block
#   finishes and makes room sooner. In the recorded sweeps 64 and 128 threads are about level, 256 a little
#   slower, and 512 slower still. All four run with `min_blocks=0`, so all four are slower than the default
#   (128 threads with `min_blocks=16`, in the `min_blocks` sweep): 64 threads is the best of this sweep only.
# - `pdl`: each kernel launched once the kernel before it has triggered (every block has run
#   `launch_dependents` or exited), or only once that kernel has completed. Twice: with the default search (one
#   kernel a call: the next gather's launch overlaps the completion of the last one, after its last block has
#   exited) and with the prepass (also the gather's launch during the search). In the recorded sweeps PDL gains
#   more with the prepass than without it, and not enough to bring the prepass near `"window"`.
#
# Without a GPU these show the sweeps recorded on one (or say how to record them). The correctness check above
# ran each of these parameters in the emulator (`threads` at 64, with `min_blocks=0`).

# %%
resample.sweep("08_fused_gather", "targets_per_warp", [1, 2, 4, 8, 16, 32])
resample.sweep("08_fused_gather", "vectors_per_lane", [1, 2, 4])
resample.sweep("08_fused_gather", "search", ["window", "lane", "prepass"])
resample.sweep("08_fused_gather", "min_blocks", [0, 16])
resample.sweep("08_fused_gather", "threads", [64, 128, 256, 512], fixed={"min_blocks": 0})
resample.sweep("08_fused_gather", "pdl", [False, True])
resample.sweep("08_fused_gather", "pdl", [False, True], fixed={"search": "prepass"})

# %% [markdown]
# The recorded sweeps, each read against its default (the `threads` sweep against 64, its fastest):

# %%
for param, default, fixed in (("targets_per_warp", 4, None), ("vectors_per_lane", 2, None), ("search", "window", None),
                              ("min_blocks", 16, None), ("threads", 64, {"min_blocks": 0}), ("pdl", True, None),
                              ("pdl", True, {"search": "prepass"})):
    lesson.recorded_against("resample", "08_fused_gather", param, default, fixed=fixed)

# %% [markdown]
# ## Across problem sizes
#
# Every record above is at the benchmark's D = 256, where stage 08 was tuned. Across the channel count D (B, S and T
# as the benchmark's), recorded on a GPU with `tools/sweep_sizes.py`: three of the later stages (the panels name
# them: 05, 07 and 08 on the H100, 06, 07 and 08 on the H200) and PyTorch, each point checked against the reference.
# The H100's sweep times `torch.compile` in its default mode only; the H200's times each mode the benchmark times,
# max-autotune-no-cudagraphs with inductor's PDL option among them. Prediction to test: a kernel tuned at one size
# keeps its lead at the others.

# %%
from cudabook import sizes

sizes.show("resample")

# %% [markdown]
# With today's defaults stage 08 takes less time than `torch.compile` at every D in both records, and on the H200
# than each mode of it the sweep times; against the fastest mode, max-autotune-no-cudagraphs with PDL, the margin is
# widest at D = 64 and a few percent at D = 256 and 512 (the panels' points, one timing each). It did not always,
# and how it got there is the point of this section. The first version of this stage gave every warp 4 targets and
# every lane one vector, at every D. Its H100 size sweep (commit b18f03b) refuted the prediction: level with the
# compiler at D = 128, and behind it (and behind stage 07) at D = 64 and 512. The machine code ruled out spills at D
# = 512. What changes with D is how long a warp lives. Four targets of D = 512 are eight load-then-store rounds a
# lane where D = 256 is four, and four targets of D = 64 are a single round, so the search weighs four times as
# much. A run of `targets_per_warp` at each D found the best count was the one that keeps a warp's work at 128
# output vectors at every D (fewer targets at D = 512, more at D = 64), and that is the rule
# `targets_per_warp="auto"` follows now. Two vectors a lane then took a little more off, more at the other D than at
# D = 256. (That first sweep's and these runs' timings are in the readings.)
#
# A lesson for any kernel: a parameter tuned at one size is a guess at the others. The rule behind the best
# value (here, a warp's work held constant) is what carries over.
#
# ## What is left
#
# Stage 08 is within a microsecond of the aim on the H100 (the cell under "How fast?" prints on which side):
# within the spread of the compiler's time from run to run, which over fresh processes and machines was several
# times that. So the lead is real in the records and thin against the compiler's luck. What was in the way
# before the launch with PDL took the stage near the aim, from scratch runs (their timings are in the readings
# linked under "How fast?"):
#
# - **The search is no longer the problem.** Time the gather alone: every (interval, weight) pair found
#   beforehand, and only `resample_fused` timed, reading them. The search turned out to be a small fraction of
#   the stage's time, and even a free search would not have reached the aim on the H100: the gather alone was
#   still short of it. What took it near the aim is outside the kernel: the launch with PDL, which hides the gap
#   between one call's gather and the next (not the last gather's tail).
# - **L1 earns its keep.** The same loads with `ld.global.nc.L1::no_allocate` (not kept in L1) were much slower:
#   neighbouring targets in one warp share rows, and L1 serves the second read. Hints for a larger L2 fetch
#   (`.L2::128B`, `.L2::256B`) changed nothing (not written down with timings).
# - **Tried and dropped: an L2 prefetch of the guessed rows** (on an H200, the earlier version). Each lane
#   computes where its own target's guess falls and prefetches that row pair into L2
#   (`cp.async.bulk.prefetch.L2`, or `prefetch.global.L2` line by line) before the window search, so that the
#   gather's first loads find L2. It was slower than without: the prefetches cost more than the latency they hid.
# - **Evict-first stores at small D.** At D = 64 on the H200, 32 targets a warp with `streaming_stores=True` took
#   clearly less time than ordinary stores. On the H100 the same change barely moves D = 64 and costs a little at
#   D = 256, so the default leaves them off. When they help, and why on one card only, is the next experiment.
# - **A better guess.** A per-row index of a few probes, computed once for each batch row instead of once for
#   each warp, would put the first window in the right place on uneven times too, where the NumPy model above
#   has about half the warps paying three rounds. On the benchmark's times the guess already holds nearly
#   always, so this matters more for other data than for the benchmark.
#
# Each is a measured experiment away. If one wins, it becomes the next rung, and if none does, that is a result
# as well.
#
# How much room is there at all? The bytes no kernel can avoid (`% of needed`: only the source rows some target
# uses, read once, and the output written once), moved at the speed of the fastest copy measured in the same
# run, give the time a gather would take if it moved its bytes as fast as a plain copy does. That is a yardstick,
# not a law: nothing stops a gather from moving its bytes faster than those copies did (the memory's peak is
# higher), but to get below it a gather would have to outrun them. The cell puts stage 08 and the compiler's
# fastest mode against it, in each record at the benchmark's size, and where the aim (`AIM` under "How fast?")
# would sit.

# %%
for rec in results.load_all():
    for name, w in rec["workloads"].items():
        if not name.startswith("resample "):
            continue
        yardstick = w.get("context", {}).get("needed_ceiling_us")
        stage = w["stages"].get("08_fused_gather", {})
        peers_timed = {k: v for k, v in w.get("peers", {}).items() if k.startswith("torch_compile") and "median_us" in v}
        if not yardstick or "median_us" not in stage or not peers_timed:
            continue
        best = min(peers_timed, key=lambda k: peers_timed[k]["median_us"])
        peer_us = peers_timed[best]["median_us"]
        aim = (1 - AIM / 100) * peer_us
        print(f"{rec['gpu']} ({w.get('commit')}): the needed bytes at copy speed {yardstick:.1f} µs; stage 08 "
              f"{stage['median_us']:.1f} µs ({100 * yardstick / stage['median_us']:.1f} % of needed), {best} "
              f"{peer_us:.1f} µs ({100 * yardstick / peer_us:.1f} %); the aim {aim:.1f} µs "
              f"({100 * yardstick / aim:.1f} %)")

# %% [markdown]
# Stage 08 and the compiler both sit close to the yardstick at D = 256 (the shares above), so unless a gather
# can outrun the copies, what is left to gain is small: the lead over the compiler there is a question of the
# last few percent of bandwidth. A faster copy would move the yardstick down and show more room.

# %% [markdown]
# ## Against the compiler's fastest mode at D = 512
#
# Across the sizes above, the lead over max-autotune-no-cudagraphs with PDL is thin at D = 256 and 512 alike. Can a
# setting widen it at D = 512? Every lever this stage has, moved one at a time at D = 512 and timed in the same
# interleaved rounds as that mode of the compiler (a reading on the H200):

# %%
head_to_head_reading("d512_settings")

# %% [markdown]
# The defaults stay ahead, by about a percent here, and no lever adds to it: three of them (256 threads, the early
# trigger, streaming stores) come within a percent of the defaults, a shade slower, and every other one is clearly
# slower, `unroll=2` by far. That one is most likely the compiler's doing: with two pieces of loads in flight a lane
# no longer fits the 32 registers that `min_blocks=16` leaves a thread at D = 512, and it spills (the stack the
# compiler reports):

# %%
for unroll in (1, 2):
    usage = nvrtc.resource_usage(s08.compile_cubin(D=512, unroll=unroll))["resample_fused"]
    print(f"D = 512, unroll={unroll}: {usage['registers']} registers, {usage['stack']} bytes of stack a thread")

# %% [markdown]
# The yardstick above says why there is little left to win. At D = 512 both kernels are at least as close to it as at
# D = 256, and a clear lead (5 %, say) would take a gather moving its bytes nearly as fast as the copies do. The
# size record holds the yardstick at D = 512; the times are the reading's:

# %%
def against_the_copy_rate(D=512):
    """Stage 08 and the compiler's fastest mode at this D, each as a share of the copy rate on the needed bytes,
    and what a 5 % lead over the compiler would have to reach (results/sizes/, results/readings/)."""
    for reading in results.readings("resample", "08_fused_gather", "d512_settings"):
        case = next(c for c in reading["cases"] if c["size"]["D"] == D)
        ceiling = made = None
        for record in sizes.load("resample"):
            for point in record["sizes"] if record["gpu"] == reading["gpu"] else []:
                if point["size"].get("D") == D:
                    ceiling, made = point["context"]["needed_ceiling_us"], record["commit"]
        if ceiling is None:
            print(f"{reading['gpu']}: no size record with D = {D} to set them against")
            continue
        ours = statistics.median(case["us"]["08_fused_gather {}"])
        peer_name = next(k for k in case["us"] if not k.startswith("08_fused_gather"))
        theirs = statistics.median(case["us"][peer_name])
        print(f"{reading['gpu']}, D = {D}: the needed bytes at the copy rate take {ceiling:.1f} µs (the size record's "
              f"copy kernels, commit {made}; the times below, commit {reading['commit']}: two runs on this card model)")
        print(f"   stage 08 {ours:.1f} µs = {100 * ceiling / ours:.1f} % of that rate; {peer_name} {theirs:.1f} µs = "
              f"{100 * ceiling / theirs:.1f} %")
        print(f"   5 % ahead of {peer_name} would be {theirs / 1.05:.1f} µs = {100 * ceiling * 1.05 / theirs:.1f} % of it")


against_the_copy_rate()

# %% [markdown]
# Write this stage's gather yourself: [lab 08](../../labs/resample/08_fused_gather.ipynb) (the completed version:
# [solution](../../solutions/resample/08_fused_gather_SOLUTION.ipynb)). The previous lesson: [07 ·
# TMA](07_tma.ipynb).
