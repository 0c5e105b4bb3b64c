# %% [markdown]
# # 08 · Fused gather: torch.compile's kernel, with the search folded in
#
# Lesson 07 ended on an uncomfortable fact: given a few lines of PyTorch (`cudabook.peers.resample_torch`),
# `torch.compile` beats every stage of this ladder. This lesson first reads the code it generates and finds
# out why it is fast. Then it writes a CUDA C++ kernel that keeps what makes that code fast and changes one
# thing: the search moves into the gather, so no index array goes out to memory and back.
#
# The compiler's gather does three things that stage 08 keeps:
#
# - **no shared memory and no barriers.** Each thread loads its pieces of the two source rows straight from
#   global memory, and a warp never waits for another;
# - **small, short-lived blocks in many waves.** When a block finishes, the next one starts in its place, so an
#   SM's loads never dry up while its warps wait at a barrier;
# - **the caches do the reuse.** Neighbouring targets share source rows, and L1 and L2 catch the second read.
#
# What stage 08 changes: a warp owns a few consecutive targets (`targets_per_warp`, 4 by default) and searches
# for their intervals itself. Each element then gets its target's interval and weight by a shuffle from the lane
# that found them.
#
# References: PTX ISA: [shfl.sync](https://docs.nvidia.com/cuda/parallel-thread-execution/index.html#data-movement-and-conversion-instructions-shfl-sync),
# [ld.global.nc](https://docs.nvidia.com/cuda/parallel-thread-execution/index.html#data-movement-and-conversion-instructions-ld-global-nc)
# (`__ldg`: loads through the read-only path, cached in L1),
# [griddepcontrol](https://docs.nvidia.com/cuda/parallel-thread-execution/index.html#parallel-synchronization-and-communication-instructions-griddepcontrol)
# (programmatic dependent launch); CUDA driver API:
# [cuLaunchKernelEx](https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__EXEC.html) with the launch attribute
# [CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION](https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__TYPES.html);
# CUDA: [programmatic dependent launch](https://docs.nvidia.com/cuda/cuda-programming-guide/04-special-topics/programmatic-dependent-launch.html),
# [launch bounds](https://docs.nvidia.com/cuda/cuda-c-programming-guide/index.html#launch-bounds);
# PyTorch: [torch.compile](https://pytorch.org/docs/stable/torch.compiler.html), which writes
# [Triton](https://triton-lang.org/) kernels for the GPU.

# %%
import cudabook
print(cudabook.where())

import re
import types
import numpy as np
from cudabook import SIMULATOR, check, emulate, labs, lesson, nvrtc, resample, results
from cudabook.resample import s08_fused_gather as s08

# %% [markdown]
# ## Where we are
#
# Stages 05 and 07 both run a search prepass and then stream the rows. `torch.compile` does the same, and it is
# still ahead. The records in `results/` give each one's time and two yardsticks. **% of copy** compares with
# the fastest plain copy of every input and the output. **% of needed** compares with the time that copy takes
# for only the bytes no kernel can avoid: the source rows some target uses, read once, and the output, written
# once. 100 % of needed is the wall.

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
from cudabook import peers
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
# - `tmp31`: `a + w * (c - a)`, stored as bf16.

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
# `torch.compile` and for stages 07 and 05 on one data set. Here is the median per kernel over its calls:

# %%
CUPTI = results.RESULTS / "inductor" / "H100_80GB_HBM3_resample_cupti.log"
durations = {}
for line in CUPTI.read_text().splitlines():
    m = re.match(r"\s+[\d.]+\s+([\d.]+) us\s+(\S+)", line)
    if m:
        kernel = re.sub(r"\[.*", "", m.group(2)).split("::")[-1]
        durations.setdefault(kernel, []).append(float(m.group(1)))
for kernel, us in durations.items():
    print(f"{kernel[:60]:>60}: {np.median(us):6.2f} µs  (calls: {', '.join(f'{u:.2f}' for u in us)})")

# %% [markdown]
# The search is a small part for everyone. The difference is in the second kernel: the compiler's gather is
# faster than 07's TMA kernel and 05's kernel with eight loads in flight a lane.
#
# ### Why the compiler's gather runs near the ceiling
#
# Nothing in it is clever, and that is the point:
#
# 1. **No staging.** Stages 04, 06 and 07 copy a window of rows into shared memory and wait at a barrier (or an
#    mbarrier) before anyone computes. The compiler's gather has no window and no barrier: each warp issues its
#    loads, waits for its own data and stores.
# 2. **Many short-lived blocks.** One ncu run on an H100 showed its grid: 16,384 blocks of 256 threads with 32
#    registers a thread. At 32 registers, 8 such blocks fit on an SM (2,048 threads), so the grid runs in many
#    waves (computed below). A block lives only as long as its few rows take, and when it finishes the scheduler
#    starts the next one, so no SM sits idle with finished warps. The autotuner does not always pick the same
#    shape: in another run it chose 32,768 blocks of 256 threads, 24 registers, 88.3 µs under ncu.
# 3. **The caches do the reuse.** With sorted targets, the upper row of target t is often the lower row of target
#    t + 1, and the blocks that need a row run at about the same time. The same ncu run: L1 hit rate 40.8 %,
#    113.7 MB read from DRAM. The rows some target needs, the source times and the targets come to little less
#    than that (next cell), so DRAM read each needed row about once. Nobody staged anything.

# %%
SMS = int(re.search(r"multi_processor_count=(\d+)", inductor).group(1))          # the H100 inductor compiled for
rows, channels = map(int, re.search(r"size_hints=\{'y': (\d+), 'x': (\d+)\}", inductor).groups())
blocks, threads, per_sm = 16384, 256, 2048 // 256                                  # ncu's grid (one H100 run)
print(f"{rows:,} output rows x {channels} channels = {rows * channels:,} elements; {blocks:,} blocks of "
      f"{threads} threads: {rows * channels // blocks:,} elements a block ({rows // blocks} rows' worth)")
print(f"{per_sm} blocks an SM x {SMS} SMs = {per_sm * SMS:,} at a time: {blocks / (per_sm * SMS):.1f} waves")

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
# 2 MB read back) and, by default, no second kernel. A **warp owns `targets_per_warp` (TPW) consecutive
# targets** of one batch row, one per lane for the search:
#
# 1. **Search.** Each owning lane finds its target's interval `lo` and weight `wt` (below: how).
# 2. **Gather.** The warp sweeps its targets' **elements**, e = (target `e / VPR`, 16-byte vector `e % VPR`),
#    with the vector fastest (`VPR`: vectors a row, 32 at D = 256). So 32 lanes read 32 consecutive 16-byte
#    pieces, one whole 512-byte row. Each element gets `src`, `dst32` and `wt` from the lane that owns its target
#    with `__shfl_sync`, loads its two pieces with `__ldg`, lerps and stores 16 bytes.
#
# Who does what in each sweep, for a few D (TPW = 4):

# %%
def sweeps(D, tpw=4):
    """For each sweep of the gather loop: which lanes do which (target, vectors), as fused_gather.cu does."""
    vpr = D // s08.vector_width(D)
    E = tpw * vpr
    vec = s08.vector_width(D)
    print(f"D = {D}: {vec} channel{'s' if vec > 1 else ''} a vector, VPR = {vpr}, E = {E} elements")
    for base in range(0, E, 32):
        groups = []                      # [target or None, first lane, last lane, first vector, last vector]
        for lane in range(32):
            e = base + lane
            i = e // vpr if e < E else None
            if groups and groups[-1][0] == i:
                groups[-1][2], groups[-1][4] = lane, e % vpr
            else:
                groups.append([i, lane, lane, e % vpr, e % vpr])
        parts = [f"lanes {a}-{b}: target {i}, vectors {v0}-{v1}" if i is not None else
                 f"lanes {a}-{b}: past E (no load, no store; they still shuffle, from lane {tpw - 1})"
                 for i, a, b, v0, v1 in groups]
        print(f"  sweep {base // 32}: " + "; ".join(parts))


for D in (256, 64, 37):
    sweeps(D)

# %% [markdown]
# At D = 37 the last sweep has lanes with no element. They must still execute the shuffles, because
# `__shfl_sync(0xffffffff, ...)` needs all 32 lanes. Their target index is clamped so that it names a real
# lane, and only their loads and stores are skipped. Here is the kernel's head (a warp finds its targets and
# searches), then the gather loop:

# %%
lesson.show_region(s08.source(), start="__launch_bounds__(NT, MINB)", end="const int E = nt * VPR;")

# %%
lesson.show_region(s08.source())

# %% [markdown]
# ### The search, three ways
#
# A binary search is a chain of dependent loads. At S = 4096 that is twelve round trips to memory, one after
# another, before the first row can be loaded. `search` picks how stage 08 pays for it:
#
# - `"lane"`: each owning lane binary-searches its whole row: twelve dependent loads (`find_interval`).
# - `"window"` (the default): two rounds. (a) While `x` is loading, the warp loads 64 evenly spaced source times
#   of the row (they do not depend on `x`). A ballot of "probe <= the warp's smallest target" finds the stretch
#   (64 rows at S = 4096) where that target falls. (b) The warp copies 128 source times from the start of that
#   stretch into shared memory (four loads a lane, issued together: one round), and each lane binary-searches its
#   own target there: eight steps in shared memory instead of twelve loads from global memory. A target whose interval lies outside the
#   window searches the whole row instead: slower, still right, for targets in any order. Rows longer than 4096
#   narrow the stretch once more before the copy.
# - `"prepass"`: what `torch.compile` does. A first kernel, `resample_find`, writes every target's
#   (interval, weight) pair, and the gather reads them: one load.

# %%
lesson.show_region(s08.source(), start="void window_search(", end="__syncwarp();")

# %% [markdown]
# How often does the window miss? Here is the same search in NumPy, on the benchmark's kind of inputs (irregular
# source times, S = 4096), counting the targets that must fall back to the whole row:

# %%
def window_hits(row, xs, win=128):
    """For one warp's targets xs: True where the window holds the interval (window_search in fused_gather.cu)."""
    S = len(row)
    base, length, g = 0, S, (S + 63) // 64
    while True:                                        # the ballots: the stretch that holds min(xs)
        probes = base + np.arange(64) * g
        k = np.count_nonzero(row[probes[probes < base + length]] <= xs.min()) - 1
        nb = base + max(k, 0) * g
        length, base = min(g, base + length - nb), nb
        if length <= 64:
            break
        g = (length + 63) // 64
    base = min(base, S - 2)
    n = min(win, S - base)
    j = np.searchsorted(row[base:base + n], xs, side="right") - 1     # window_interval
    return np.where(j < 0, base == 0, np.where(j >= n - 1, base + n == S, True))


rng = np.random.default_rng(8)
kinds = {"sorted, T = S": resample.random_problem(4, 4096, 4096, 1, rng=rng),
         "sorted, T = S / 4": resample.random_problem(4, 4096, 1024, 1, rng=rng),
         "unsorted, T = S": resample.random_problem(4, 4096, 4096, 1, sorted_targets=False, rng=rng)}
print(f"{'TPW':>4}" + "".join(f"{k:>20}" for k in kinds) + "   (% of targets that search the whole row)")
for tpw in (1, 2, 4, 8, 16, 32):
    cells = []
    for times, _, targets in kinds.values():
        hits = [window_hits(times[b], targets[b, t:t + tpw]) for b in range(len(times))
                for t in range(0, targets.shape[1], tpw)]
        cells.append(f"{100 * (1 - np.concatenate(hits).mean()):19.1f}%")
    print(f"{tpw:4d}" + "".join(cells))

# %% [markdown]
# With sorted targets at the benchmark's density, the window always holds the answer. With sparser targets a
# warp's targets spread over more rows, and the largest TPW starts to miss. Unsorted targets miss most of the
# time once a warp owns more than one, and then the window costs more than it saves: use `search="lane"` or
# `"prepass"` there.
#
# ### Why only a few targets a warp
#
# Fewer targets a warp means more warps, each short-lived: the same "many blocks, many waves" as the compiler's
# gather. But each warp pays a search (two rounds of latency for the window) before its first row load, so
# the search costs less per target when a warp owns more targets. The launch at the benchmark's size, for each
# TPW (blocks of 256 threads, 8 an SM as `min_blocks` asks, on the SM count of the H100 above):

# %%
bench = types.SimpleNamespace(shape=(64, 4096, 4096, 256))       # plan() needs only the shape (B, S, T, D)
print(f"{'TPW':>4} {'warps':>8} {'blocks':>7} {'waves':>6} {'KB a warp moves':>16} {'search rounds a target':>23}")
for tpw in (1, 2, 4, 8, 16, 32):
    plan = s08.plan(bench, targets_per_warp=tpw)
    moves = tpw * 3 * 256 * 2 / 1024                             # two rows read, one written, 512 bytes each
    print(f"{tpw:4d} {plan['warps']:8,} {plan['blocks']:7,} {plan['blocks'] / (SMS * 8):6.1f} {moves:16.1f} "
          f"{2 / tpw:23.2f}")

# %% [markdown]
# At TPW = 32 the whole grid fits in about one wave. The warps all start together, so they search at about the
# same moment, with few row loads in flight, and then they all stream at once and finish together. At TPW = 1 the search is paid
# for every target. The default, 4, sits between the two. The sweep at the end measures all six.
#
# ### min_blocks: registers decide how many lanes load at once
#
# `__launch_bounds__(NT, MINB)` tells the compiler that `MINB` blocks of `NT` threads must fit on an SM. With
# 8 blocks of 256 threads, 2,048 threads share 65,536 registers, so the compiler must make do with 32
# registers a thread. More threads means more loads in flight. By Little's law (lesson 05), DRAM runs at full
# speed only with bandwidth x latency bytes in flight. With lesson 05's round figures (3.35 TB/s, 700 ns,
# 132 SMs) that is about 17.8 KB an SM:

# %%
need = 3.35e12 * 700e-9 / 132                      # bytes in flight an SM needs (lesson 05's round figures)
try:
    for mb in (0, 8):
        use = nvrtc.resource_usage(s08.compile_cubin(D=256, min_blocks=mb))[s08.KERNEL]
        per_warp = -(-use["registers"] * 32 // 256) * 256             # registers are allocated 256 a warp
        warps = min(64, 65536 // per_warp // 8 * 8)                   # whole blocks of 8 warps, at most 64 warps
        flight = warps * 32 * 2 * 16                                  # two 16-byte loads a lane (unroll=1)
        print(f"min_blocks={mb}: {use['registers']} registers a thread -> {warps * 32:,} threads an SM -> up to "
              f"{flight / 1e3:.0f} KB in flight, {flight / need:.1f}x the {need / 1e3:.1f} KB needed")
except nvrtc.ToolMissing as e:
    print(e)

# %% [markdown]
# Both settings are above the need on paper. But a lane has its two loads in flight only from the load to the
# lerp. While it searches, shuffles or stores, it has none. The headroom is what keeps the average above the
# need, so more resident threads is the safer side. `min_blocks=0` lets the compiler use more registers;
# the sweep below measures whether that costs anything.
#
# ### The prepass, with programmatic dependent launch
#
# With `search="prepass"` there are two kernels, as in `torch.compile`'s code. Normally the second kernel
# launches only when the first has finished, and its blocks then have to be scheduled and started. With
# **programmatic dependent launch** (sm_90), the host launches the gather with `cuLaunchKernelEx` and the
# attribute `CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION`. Each block of the search kernel runs
# `griddepcontrol.launch_dependents` first thing. Once every block has run it (or finished), the gather's blocks
# may be scheduled while the search still runs. The gather runs `griddepcontrol.wait` before it reads a pair:
# that waits until the search grid has finished and its writes are visible. On sm_80 the kernels leave both
# instructions out and the launch is an ordinary one. (`cudabook.nvrtc.Kernel.launch(..., pdl=True)` does the
# host side.)

# %%
lesson.show_region(s08.source(), start='extern "C" __global__ void __launch_bounds__(256)',
                   end="pairs[k] = make_int2")

# %% [markdown]
# In the machine code each `griddepcontrol` instruction is one SASS instruction near its kernel's start (in the
# builds this workbook was written with: `PREEXIT` for `launch_dependents`, `ACQBULK` for `wait`):

# %%
try:
    cubin_prepass = s08.compile_cubin(D=256, search="prepass")
    for kernel, ptx in ((s08.FIND, "launch_dependents"), (s08.KERNEL, "wait")):
        body = nvrtc.sass_lines(cubin_prepass, r".", kernel=kernel)              # every instruction
        at = next((i for i, line in enumerate(body) if line.split()[0] in ("PREEXIT", "ACQBULK")), None)
        print(f"{kernel}: griddepcontrol.{ptx} -> " + (f"{body[at]}, instruction {at} of {len(body)}"
                                                      if at is not None else "neither PREEXIT nor ACQBULK here"))
except nvrtc.ToolMissing as e:
    print(e)

# %% [markdown]
# ## What the machine code says
#
# Everything here needs no GPU: the stage compiles for sm_90a on any machine. The registers a thread (the 32
# that `min_blocks=8` asks for), the static shared memory (the window search's 128 source times per warp), and
# the gather's loads. The two 16-byte loads of the gather are `LDG.E.128.CONSTANT` (`.CONSTANT`: the read-only
# path of `__ldg`), and the second one's address is the first one's plus one row of bytes:

# %%
try:
    cubin08 = s08.compile_cubin(D=256)
    print("resources:", nvrtc.resource_usage(cubin08)[s08.KERNEL])
    loads = nvrtc.sass_lines(cubin08, r"LDG", kernel=s08.KERNEL)
    wide = [line for line in loads if ".128" in line]
    print(f"{len(loads)} LDG instructions in {s08.KERNEL}, {len(wide)} of them 16 bytes wide (the gather's rows); "
          f"the rest load 4 bytes: the target and the search's source times")
    for line in nvrtc.sass_lines(cubin08, r"LDG\.E\.128|SHFL\.IDX|STG\.E\.128", kernel=s08.KERNEL):
        print("   ", line)
    row_bytes = 256 * 2
    offsets = [int(m.group(1), 16) for line in wide for m in [re.search(r"\+0x([0-9a-f]+)\]", line)] if m]
    print(f"the upper row's load is offset by {[hex(o) for o in offsets]}: {row_bytes} bytes = one row of 256 bf16 "
          f"= VPR vectors: `from + VPR`" if row_bytes in offsets else "(no +0x200 offset in this build's SASS)")
except nvrtc.ToolMissing as e:
    print(e)

# %% [markdown]
# ## Is it right?
#
# On a GPU of compute capability 8.0 or newer the stage runs for real. Without one, `cudabook.emulate` runs the
# same C++ on the CPU, every CUDA thread a small coroutine, and the checker judges the result against the
# float64 reference. Every search, some TPW, `min_blocks` and `unroll`, on small sorted and unsorted cases and on
# a row longer than 4096, where the window search narrows twice:

# %%
settings = [{"search": "window"}, {"search": "lane"}, {"search": "prepass"}, {"search": "prepass", "pdl": False},
            {"targets_per_warp": 1}, {"targets_per_warp": 32}, {"min_blocks": 0}, {"unroll": 2}]
cases = [("sorted", dict(B=2, S=200, T=21, D=37)), ("unsorted", dict(B=2, S=200, T=21, D=37, sorted_targets=False)),
         ("S = 5000", dict(B=1, S=5000, T=40, D=8))]
why = resample.unavailable("08_fused_gather")
if why and not SIMULATOR:
    print(f"Not run here: {why}. (The CPU emulator works on host memory, where Numba runs in its simulator: "
          f"set CUDABOOK_SIMULATOR=1 before `import cudabook` to use it.)")
else:
    if not why:
        cases.append(("benchmark size", labs.demo_size()))
    try:
        for kw in settings:
            for name, size in cases:
                if why:
                    with emulate.emulating():
                        verdict = check.check_launch(s08.launch, **size, **kw)
                else:
                    verdict = check.check_launch(s08.launch, **size, **kw)
                print(f"{str(kw):40s} {name:15s} {'emulated' if why else 'GPU'}: {str(verdict).splitlines()[0]}")
    except emulate.HostCompilerMissing as e:
        print("Not emulated:", e)

# %% [markdown]
# ## How fast?
#
# With a GPU this measures every stage, the copy ceiling and PyTorch (eager and `torch.compile`) on the same
# data, in this process. Without one it shows the records.

# %%
lesson.ladder_so_far("08_fused_gather", peers=True)

# %% [markdown]
# Stage 08 against 07 and `torch.compile`, as the records in `results/` have them:

# %%
for record in results.load_all():
    for name, w in record["workloads"].items():
        if not name.startswith("resample "):
            continue
        rows = {**w["stages"], **w.get("peers", {})}
        us = {k: rows.get(k, {}).get("median_us") for k in ("07_tma", "08_fused_gather", "torch_compile")}
        print(f"{record['gpu']} · {name}")
        if not us["08_fused_gather"]:
            print("  no 08 in this record yet")
            continue
        for k, v in us.items():
            if v:
                print(f"  {k:>16}: {v:7.1f} µs")
        for peer in ("07_tma", "torch_compile"):
            if us[peer]:
                d = 100 * (us["08_fused_gather"] - us[peer]) / us[peer]
                print(f"  08 against {peer}: {d:+.1f} % of its time ({'08' if d < 0 else peer} ahead)")

# %% [markdown]
# **An honest ladder: a rung that is not faster than the peer is shown, measured and explained.** In one H100
# run, timed back to back with CUDA events at the benchmark's size (B = 64, S = T = 4096, D = 256; not a
# results/ record):
#
# - `torch.compile` 90.2 µs; stage 07 101.5; stage 05 103.3;
# - stage 08 with the defaults (`search="window"`, TPW = 4, `min_blocks=8`): **92.9 µs**;
# - `search="prepass"`, TPW = 4: 93.8 µs with programmatic dependent launch, 95.5 without;
# - `search="window"` with TPW = 8: 95.3 µs; with TPW = 32: 98.8;
# - `search="lane"`, TPW = 4: 113.9 µs: twelve dependent loads before the first row;
# - one variant whose row loads skipped L1 (`ld.global.L1::no_allocate`): about 123 µs. L1's reuse of the rows
#   neighbouring targets share is worth that much.
#
# So in that run stage 08 is the fastest of our stages, 8.5 % less time than stage 07, and it is still 3 %
# slower than `torch.compile`. The gathers themselves are close. Under ncu (one run on an H100, caches flushed)
# the gather kernel of `search="prepass"` with TPW = 2 took 82.9 µs, with an L1 hit rate of 37.8 %. The
# compiler's gather took 88.3 µs under ncu in a run where its autotuner chose 32,768 blocks, and 81.4 µs in the
# CUPTI trace above. So what is left is most likely the search. The compiler pays about 5 µs for its separate
# search, and folding the window search into the gather has not made it any cheaper than that.
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

# %% [markdown]
# ## Experiments
#
# - `targets_per_warp`: predict from the table of waves above. Too few and the search is paid per target, too
#   many and the grid is one wave that searches, then streams.
# - `search`: the three ways. Prediction: `"lane"` loses by its twelve dependent loads; `"window"` and
#   `"prepass"` are close, and which one wins depends on whether the gather can start before the search is done.
# - `min_blocks`: 8 caps a thread at 32 registers; 0 lets the compiler take more, and fewer blocks then fit.
# - `pdl`, for the prepass: the gather's blocks scheduled during the search, or only after it.
#
# Without a GPU these show the sweeps recorded on one (or say how to record them). The correctness check above
# ran each of these parameters in the emulator.

# %%
lesson.sweep("08_fused_gather", "targets_per_warp", [1, 2, 4, 8, 16, 32])
lesson.sweep("08_fused_gather", "search", ["window", "lane", "prepass"])
lesson.sweep("08_fused_gather", "min_blocks", [0, 16])
lesson.sweep("08_fused_gather", "threads", [64, 128, 256, 512], fixed={"min_blocks": 0})
lesson.sweep("08_fused_gather", "pdl", [False, True], fixed={"search": "prepass"})

# %% [markdown]
# ## What is left
#
# The gather already runs about as fast as the compiler's. What keeps stage 08 behind `torch.compile` is the
# search, which sits in front of every warp's first row load. Ideas this workbook has not tried yet:
#
# - **A producer warp that searches ahead.** One warp of a block finds the intervals of the next targets and
#   writes them to shared memory, while the other warps gather the targets already found. This is the warp
#   specialization of the GEMM track, used for a search instead of a copy.
# - **Hiding the search entirely.** A persistent warp could issue the probes for its next group of targets
#   before it stores the current one, so that no warp ever waits on a search with no loads in flight.
# - **Cache hints.** The compiler marks the index and times loads `evict_last`. Stage 08 gives none, and
#   L1 reuse clearly matters here: the variant whose loads skipped L1 was a third slower.
#
# Each is a measured experiment away. If one wins, it becomes the next rung, and if none does, that is a result
# as well.

# %% [markdown]
# Write this stage's gather yourself: [lab 08](../labs/08_fused_gather.ipynb) (the completed version:
# [solution](../solutions/08_fused_gather_SOLUTION.ipynb)). The previous lesson: [07 · TMA](07_tma.ipynb).
