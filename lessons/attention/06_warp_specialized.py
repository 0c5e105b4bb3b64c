# %% [markdown]
# # Attention 06 · Warp specialization: a producer, and consumers taking turns at the tensor cores
#
# Rung 05 put both products on `wgmma` and the copies on TMA, and still every warpgroup does one thing at a
# time: wait for K, issue S = Q Kᵀ, **wait**, softmax, issue O += P V, **wait**, `__syncthreads`, refill. This
# rung keeps rung 05's tensor maps, wgmma shapes and online softmax, and rearranges the block so that nobody
# waits for what it does not need yet:
#
# ```
#   warpgroup 0, the producer (one thread; setmaxnreg.dec 24), for each work tile:
#     K_0, then Q (once the consumers are done with the last tile's Q), then for t = 1, 2, ...: K_t, V_{t-1}
#     into two rings (K and V), each slot with a "full" and an "empty" mbarrier
#   warpgroups 1 .. C, the consumers (64 query rows each), iteration t of a work tile:
#       d = 128: C = 2 (warpgroups 1 and 2), setmaxnreg.inc 240
#       d =  64: C = 3 (warpgroups 1 to 3),  setmaxnreg.inc 160
#     wait full K_t, full V_{t-1}; wait for my turn (bar.sync)
#     issue S_t = Q K_tᵀ; rescale O by α_{t-1}   <- while S_t runs
#     issue O += P_{t-1} V_{t-1}; the next consumer's turn (bar.arrive)
#     wait<1>  (S_t is in)            release K_t
#     softmax of S_t -> α_t           <- meant to run while P_{t-1} V_{t-1} is on the tensor cores
#     wait<0>  (P V is in)            release V_{t-1}
#     pack P_t = bf16(S_t)
# ```
#
# A work tile is 64 query rows per consumer of one head: BQ = 128 at d = 128, 192 at d = 64. By default a block
# does not stop at one: one block an SM walks work tile after work tile, claiming each as it frees up (the
# persistent grid, near the end of the lesson). Why the two head dimensions get different numbers of consumers
# is worked out below ("Three consumers at d = 64"); `s06.PARAMS` holds the defaults by head dimension.
#
# The kernel is `cudabook/attention/kernels/warp_specialized.cu` (its header comment is the summary above), on
# the same Hopper pieces as rung 05 (`kit/include/hopper.cuh`, `attention/kernels/attention.cuh`). The GEMM
# track built the producer/consumer split first: [GEMM 06](../gemm/06_warp_specialized.ipynb) explains the
# mbarrier phase bit and what `setmaxnreg` asks of a kernel; this lesson does not repeat them. PTX ISA:
# [bar.sync / bar.arrive](https://docs.nvidia.com/cuda/parallel-thread-execution/#parallel-synchronization-and-communication-instructions-bar-barrier),
# [setmaxnreg](https://docs.nvidia.com/cuda/parallel-thread-execution/#miscellaneous-instructions-setmaxnreg),
# [wgmma.wait_group](https://docs.nvidia.com/cuda/parallel-thread-execution/#asynchronous-warpgroup-level-matrix-instructions-wgmma-wait-group).
# It needs sm_90a (H100, H200) to run at speed. Everything below except the timings runs without one: the
# correctness check then runs the kernel, small, in the workbook's CPU emulator.

# %%
import cudabook
print(cudabook.where())

import json
import re
import statistics

import matplotlib.pyplot as plt
from cudabook import SIMULATOR, attention, emulate, lesson, nvrtc, results
from cudabook.attention import s05_wgmma_tma as s05
from cudabook.attention import s06_warp_specialized as s06

source = s06.source()


def show(start, end):
    """Print the kernel's lines from the one containing `start` to the next containing `end` (an error naming
    them where the kernel has changed under this lesson)."""
    lesson.show_region(source, start=start, end=end)

# %% [markdown]
# ## What rung 05 waits for
#
# Inside one pass of rung 05 a warpgroup cannot start its softmax before S is back, and cannot issue P V
# before the softmax is done; the two warpgroups of a block run the same steps at the same moments, and
# `__syncthreads` keeps them there. So while both do their softmax (exponentials on the special-function
# units, maxima, sums: lesson 05 estimated the exponentials alone at half the products' time at d = 128), the
# tensor cores have nothing to do.
#
# Rung 06 takes both waits off the tensor cores' path, in two ways: the consumers take turns, so one's softmax runs
# under another's products (ping-pong); and a consumer issues the next S **together with** the previous tile's P V,
# meaning to do its softmax while P V runs (overlap inside a warpgroup; whether the compiler keeps it that way is
# measured below, in part (a): on the builds tried, only in part at d = 128 and not at all at d = 64). The picture
# below is a **schematic**: a hand-made schedule with made-up durations (a product of one consumer = 1, a softmax =
# 1.4, rescale and pack = 0.3), played out by the rules of each kernel, with two consumers (d = 128's default). It
# is not a measurement. Change the durations and see what moves.

# %%
PRODUCT, SOFTMAX, FIX, TICK = 1.0, 1.4, 0.3, 0.12     # schematic durations, not measured
STYLE = {"S": "C0", "PV": "C2", "softmax": "C1", "fix": "C4", "wait": "0.85", "TMA K": "C5", "TMA V": "C6"}
HATCH = {0: None, 1: "//", 2: ".."}                   # whose product: consumer 0, 1, 2


def schedule_05(tiles=3):
    """Rung 05: both warpgroups issue S, wait, softmax, rescale, issue P V, wait, __syncthreads, refill."""
    bars, t = [], 0.0
    for i in range(tiles):
        for c in (0, 1):                                   # the tensor cores take both warpgroups' S, then both P V
            bars += [("tensor cores", t + c * PRODUCT, PRODUCT, "S", (f"S{i}", c)),
                     (f"consumer {c}", t, 2 * PRODUCT, "wait", None),
                     (f"consumer {c}", t + 2 * PRODUCT, SOFTMAX, "softmax", None),
                     (f"consumer {c}", t + 2 * PRODUCT + SOFTMAX, FIX, "fix", None)]
        t += 2 * PRODUCT + SOFTMAX + FIX
        for c in (0, 1):
            bars += [("tensor cores", t + c * PRODUCT, PRODUCT, "PV", (f"PV{i}", c)),
                     (f"consumer {c}", t, 2 * PRODUCT, "wait", None)]
        t += 2 * PRODUCT
        bars.append(("producer", t, TICK, "TMA K", None))     # thread 0 refills the slot, after __syncthreads
        t += TICK
    return bars


def schedule_06(tiles=3, stages=2, consumers=2, product=PRODUCT, softmax=SOFTMAX, fix=FIX):
    """Rung 06 as the source asks: consumer c issues S_t and P_{t-1} V_{t-1} on its turn (after consumer c - 1's
    issue of the same t; consumer 0 after the last one's issue of t - 1), softmax under P V; the producer
    refills a slot as soon as every consumer has released it."""
    bars, tc, ready, issued, done = [], 0.0, [0.0] * consumers, {}, {}
    for t in range(tiles + 1):                             # t == tiles: the last P V, no turn-taking
        for c in range(consumers):
            who, start = f"consumer {c}", ready[c]
            if t < tiles:                                  # my turn: the one before me in the ring has issued
                start = max(start, issued.get((c - 1, t) if c > 0 else (consumers - 1, t - 1), 0.0))
            issued[(c, t)] = start
            if start > ready[c]:
                bars.append((who, ready[c], start - ready[c], "wait", None))
            for kind, i in ([("S", t)] if t < tiles else []) + ([("PV", t - 1)] if t > 0 else []):
                begin = max(tc, start)
                tc = begin + product
                bars.append(("tensor cores", begin, product, kind, (f"{kind}{i}", c)))
                done[(kind, c, i)] = tc
            if t == tiles:
                bars.append((who, start, done[("PV", c, t - 1)] - start, "wait", None))
                continue
            s_in = done[("S", c, t)]
            bars += [(who, start, s_in - start, "wait", None), (who, s_in, softmax, "softmax", None)]
            end = max(s_in + softmax, done.get(("PV", c, t - 1), 0.0))
            if end > s_in + softmax:
                bars.append((who, s_in + softmax, end - s_in - softmax, "wait", None))
            bars.append((who, end, fix, "fix", None))
            ready[c] = end + fix
    issue = 0.0                                            # the producer: K_0, K_1, V_0, K_2, V_1, ... in order
    for kind, i in [("S", 0)] + [x for t in range(1, tiles) for x in (("S", t), ("PV", t - 1))] + [("PV", tiles - 1)]:
        if i >= stages:                                    # the slot's previous tile must be released by all
            issue = max([issue] + [done[(kind, c, i - stages)] for c in range(consumers)])
        name = "TMA K" if kind == "S" else "TMA V"
        bars.append(("producer", issue, TICK, name, None))
        issue += TICK
    return bars


def draw(ax, bars, title):
    """One lane a row; a product's bar is hatched by whose it is (consumer 0 plain, 1 //, 2 ..)."""
    lanes = sorted({row for row, *_ in bars if row.startswith("consumer")}, reverse=True)
    rows = {name: i for i, name in enumerate(["producer", "tensor cores"] + lanes)}
    for row, start, length, kind, label in bars:
        ax.broken_barh([(start, length)], (rows[row], 0.8), facecolor=STYLE[kind], linewidth=0,
                       edgecolor="white", hatch=HATCH[label[1]] if label else None)
        if label:
            ax.text(start + length / 2, rows[row] + 0.4, label[0], ha="center", va="center", fontsize=7)
    ax.set_yticks([y + 0.4 for y in rows.values()], list(rows))
    ax.set_title(title, fontsize=9)
    ax.set_ylim(0, len(rows) + 0.6)


def busy(bars):
    """The schematic's span and the tensor cores' share of it."""
    span = max(s + n for _, s, n, _, _ in bars)
    return span, sum(n for row, _, n, _, _ in bars if row == "tensor cores") / span


fig, axes = plt.subplots(2, 1, figsize=(11, 5.5), sharex=True)
plans = {"05": schedule_05(), "06": schedule_06()}
draw(axes[0], plans["05"], "05: two warpgroups in step (no producer: thread 0 refills after __syncthreads)")
draw(axes[1], plans["06"], "06: a producer warpgroup, two consumers in ping-pong (as the source asks; d = 128)")
for kind, color in STYLE.items():
    axes[0].plot([], [], color=color, lw=6, label=kind)
axes[0].legend(fontsize=7, ncol=7, loc="upper right", bbox_to_anchor=(1, 1.35))
axes[1].set_xlabel("time (schematic: hand-picked durations, not a measurement); hatched: consumer 1's products")
plt.tight_layout()
plt.show()
for name, bars in plans.items():
    span, share = busy(bars)
    print(f"schematic {name}: 3 tiles in {span:.1f} time units, tensor cores busy {share:.0%} of it")

# %% [markdown]
# Read the 06 lanes from the top: consumer 0 issues S0; consumer 1 may issue only once consumer 0 has (its
# turn); from tile 1 on each issue is a pair, S_t then PV_{t-1}, and the orange softmax of S_t sits under
# that consumer's own PV_{t-1} and under the other consumer's products. In the schematic the tensor cores are
# idle only while the pipeline fills and drains. On the real GPU the softmax and the products have other
# lengths, and whether the tensor cores stay fed is what the timings at the end answer.
#
# ## Roles and registers
#
# Registers are handed out at launch, the same to every thread: 64 K registers for 1 + C warpgroups, rounded
# down to a multiple of 8 (168 a thread for 3 warpgroups, 128 for 4). The producer's one busy thread needs a
# couple of dozen; a consumer holds O (d/2 floats), S (bkv/2), P (bkv/4 registers of bf16 pairs) and the
# softmax state. `setmaxnreg.dec` returns the producer's surplus to the block's pool and `setmaxnreg.inc` takes
# it for the consumers, so the split must fit what the block was given at launch. The consumers' allowance
# depends on how many there are (`CONSUMER_REGS`: 160 for three, 240 otherwise); the cell reads what each
# default build asks for from its SASS:

# %%
def setmaxnreg(cubin):
    """(the producer's USETMAXREG.DEALLOC, the consumers' USETMAXREG.TRY_ALLOC), read from the SASS."""
    sass = nvrtc.sass_lines(cubin, r"USETMAXREG", kernel=s06.KERNEL)
    value = lambda kind: next(int(re.search(r"(0x[0-9a-f]+)\s*$", x).group(1), 16) for x in sass if kind in x)
    return value("DEALLOC"), value("TRY_ALLOC")


print(re.search(r"#define CONSUMER_REGS .*", source).group(0))
for d in s06.HEAD_DIMS:
    cubin = s06.compile_cubin(d=d)
    sass = re.findall(r"/\*([0-9a-f]{4,})\*/\s*(.*?)\s*;", nvrtc.sass(cubin, s06.KERNEL))   # (address, instruction)
    prod, cons = setmaxnreg(cubin)
    consumers = s06.config(d, False)["CONSUMERS"]
    threads = 128 * (1 + consumers)
    at_launch = 65536 // threads // 8 * 8
    print(f"\nd={d}: {consumers} consumers, {threads} threads; resource usage (registers: the cap at entry, "
          f"before setmaxnreg): {nvrtc.resource_usage(cubin)[s06.KERNEL]}")
    print(f"  at launch: 65,536 / {threads} threads = {65536 / threads:.1f} -> {at_launch} registers a thread, "
          f"{threads * at_launch:,} for the block")
    print(f"  after setmaxnreg: 128 x {prod} + {128 * consumers} x {cons} = {128 * prod + 128 * consumers * cons:,} "
          f"<= {threads * at_launch:,} (what the block got at launch)")
    print(f"  the producer frees 128 x ({at_launch} - {prod}) = {128 * (at_launch - prod):,}, "
          f"the consumers take {128 * consumers} x ({cons} - {at_launch}) = {128 * consumers * (cons - at_launch):,}")
    for i, (_, ins) in enumerate(sass):
        if "USETMAXREG" in ins:
            for addr, ins2 in sass[i - 1:i + 3]:
                print(f"    /*{addr}*/ {ins2}")
            print()
cubin = s06.compile_cubin(d=128)                           # the d = 128 build, for the SASS read below

# %% [markdown]
# In SASS the producer's decrease is `USETMAXREG.DEALLOC.CTAPOOL 0x18` (24), the consumers' increase
# `USETMAXREG.TRY_ALLOC.CTAPOOL UP0, 0xf0` (240) at d = 128 and `0xa0` (160) at d = 64: a *try*, whose success
# lands in the predicate `UP0`; a branch after it, whose target is the address just before the `TRY_ALLOC`
# (compare the addresses), tries again until the producer's `DEALLOC` has put the registers in the block's
# pool (`CTAPOOL`). Ask for more than that pool can ever hold and the consumers spin there for good. The
# kernel's `static_assert` checks the sum against 64 K; the tighter bound is what the block got at launch (the
# lines above). At d = 128 there is no slack at all (128 x 24 + 256 x 240 is exactly 384 x 168): raise
# `PRODUCER_REGS` to 32 and the sum still passes the assert, but the producer frees too little for two
# consumers at 240. At d = 64 the four warpgroups get 128 a thread at launch (65,536 / 512); after
# setmaxnreg they hold 128 x (24 + 3 x 160) = 128 x 504 of the block's 128 x 512.
#
# ## Two rings, released at different times
#
# The producer loads in the order the consumers use the tiles: K_0, then K_t before V_{t-1}. K and V have
# **separate** rings, each slot with a "full" mbarrier (the producer's `expect_tx` plus TMA's bytes) and an
# "empty" one (one arrival per consumer warpgroup). Q has a pair of its own, `qbar` (landed) and `qempty` (an
# arrival from every consumer thread once its last Q Kᵀ of the work tile is back: each thread also read the
# tile's number, which the producer overwrites next); the producer waits on `qempty` before it overwrites Q with
# the next work tile's:

# %%
show("setmaxnreg_dec<PRODUCER_REGS>", "load(&map_v, ring.v, ring.full_v, ring.empty_v, g + tiles - 1")

# %% [markdown]
# K_t is read only by S_t: a consumer releases its slot right after `wait<1>`. V_{t-1} is read by
# P_{t-1} V_{t-1}, which is still running during the softmax: its slot is released only after `wait<0>`, a
# softmax later. With one slot holding K and V together, K's half would sit idle for that softmax before the
# producer could refill it; apart, the next K lands earlier. The parities (GEMM 06 explains the rule) for two
# slots (d = 128's default; d = 64 has three: set `STAGES = 3` and see the laps stretch) and five tiles. They
# are those of a block's first work tile: on its next one the rings run on, key tile t being the rings' tile
# g + t (`g` counts the key tiles of the block's earlier work tiles), so the slots and laps start where the
# last work tile left them.

# %%
STAGES, TILES = 2, 5
order = [("K", 0)] + [x for t in range(1, TILES) for x in (("K", t), ("V", t - 1))] + [("V", TILES - 1)]
print(" load   slot  producer waits empty (parity)   consumer waits full (parity)   released after")
for kind, t in order:
    slot, lap = t % STAGES, t // STAGES
    released = ("the wait<0> of tile 0 (S_0 alone)" if (kind, t) == ("K", 0) else
                f"wait<1> of iteration {t}" if kind == "K" else
                "the wait<0> of the last P V, after the loop (the rings run on)" if t == TILES - 1 else
                f"wait<0> of iteration {t + 1}")
    print(f" {kind}_{t}    {slot:>4}  {(lap & 1) ^ 1:>29}   {lap & 1:>28}   {released}")

# %% [markdown]
# ## Overlap inside a warpgroup
#
# A consumer's iteration t (the loop runs it twice, without and with the mask; more on that below):

# %%
show("auto step = [&]", "  };")

# %% [markdown]
# The order is the whole trick:
#
# 1. **issue S_t**, commit (group 1). While it runs, **rescale O** by α_{t-1}, the factor the previous tile's
#    softmax left (O is no wgmma's accumulator at this moment: the last P V finished in iteration t-1).
# 2. **issue P_{t-1} V_{t-1}**, commit (group 2). Both groups run on the tensor cores, in that order.
# 3. **`wgmma.wait_group 1`**: wait until at most one group is pending, that is S_t is in, P V may not be.
# 4. **the softmax of S_t** on the ordinary cores: new running max m, `P = 2^(s·scale·log2 e − m)` (m in log2 units) in place of S,
#    the row sums l, and α_t = 2^(m_old − m_new), the factor O owes before P_t V_t is added.
# 5. **`wgmma.wait_group 0`**: P_{t-1} V_{t-1} is in. **Pack P_t** (bf16 pairs, the A operand of the next
#    iteration's P V).
#
# This is rung 05's arithmetic with P V deferred by one tile: O = α_{t-1} O + P_{t-1} V_{t-1}, in that order,
# one iteration late. Moving the rescale from after `wait<0>` to under S_t took 64 multiplies a thread off the
# path between one P V and the next issue; writing `2^x` as `ex2.approx.ftz` (`exp2_ftz`) instead of `exp2f`
# dropped the range fix-up ptxas wraps around a `MUFU.EX2` whose subnormal results must survive (a compare and
# two multiplies per score; with `.ftz` they are flushed to zero, which no P rounded against l >= 1 can see).
# Measured while the rung was built (H100, commit 54f69eb, which made both changes; one run of
# `tools/sweep_params.py --track attention`'s kind, not a record), the two together gained about 5 % at d = 128.
# The records below measure the rung as it is now.
#
# Why nothing of P_{t-1} may change before `wait<0>`: `WgmmaRS` reads its A operand **from registers, while it
# runs**. The registers `pa` hold P_{t-1} until P_{t-1} V_{t-1} has landed, so the softmax works on `sc` (S_t,
# a different array), and only after `wait<0>` does `pack_p` overwrite `pa` with P_t. The same goes for O: it
# is the accumulator of the running P V, so multiplying it by α_t before `wait<0>` would race with the tensor
# cores. α_t could be applied right after `wait<0>` (an earlier version did); deferring it to the next
# iteration, under S_{t+1}, is a scheduling choice that takes it off the path between two P V. The
# `wgmma_keep` calls are empty `asm volatile` statements that tell the compiler these arrays
# are live across the waits, so it does not reuse their registers early. (If the region shows an
# `#if OVERLAP ... #else` pair, the `#else` half is `overlap=False`: one product at a time, for comparison.)
#
# ## Ping-pong: a ring of named barriers
#
# With two or three consumers, the tensor cores could still take all their products at once and leave the
# softmaxes to run side by side. Ping-pong orders them: consumer c waits at named barrier 1 + c before
# issuing, and arrives at the next consumer's barrier, 1 + (c + 1) mod C, once its wgmmas are issued. With
# C = 2 that is barriers 1 and 2, each consumer handing over to the other; with C = 3, a ring 1 -> 2 -> 3 -> 1.

# %%
show("auto my_turn", "consumer 0 goes first")
for d in s06.HEAD_DIMS:
    print(f"\nd={d} ({s06.config(d, False)['CONSUMERS']} consumers):")
    for line in nvrtc.sass_lines(s06.compile_cubin(d=d), r"BAR\.(SYNC|ARV)", kernel=s06.KERNEL):
        print("  ", line)

# %% [markdown]
# In SASS they are `BAR.SYNC ..., 0x100` and `BAR.ARV ..., 0x100` (0x100 = 256 threads; the barrier's id in a
# register, or an immediate where ptxas knows it). The `BAR.SYNC 0x0` is the `__syncthreads` after the
# mbarriers' set-up. The first `BAR.ARV`, before any consumer's `BAR.SYNC`, is the head start below, predicated
# so that only the last consumer arrives; the predicate in front of a later `BAR.ARV` is the skipped hand-over
# below.
#
# `bar.sync id, 256` waits until 256 threads have arrived at barrier `id`: its own warpgroup (128) and the
# previous consumer's `bar.arrive id, 256` (128, without waiting). So consumer c passes barrier 1 + c only
# after consumer c − 1 (for consumer 0: the last one) has arrived there: however many consumers, one token goes
# round the ring, and whoever holds it issues. Who goes first: at the start of each work tile the last consumer
# arrives at barrier 1 once, so consumer 0's first `bar.sync` of the tile completes at once; consumer 1 then
# waits at barrier 2 for consumer 0's first hand-over, and so on round the ring.
#
# The counts must balance, within each work tile. Every `bar.sync` of one consumer needs exactly one
# `bar.arrive` of the one before it, and a work tile's `tiles` (its key tiles) is the same for every consumer.
# The last consumer starts the tile with one extra arrival (the head start), so it skips its hand-over after
# its last issue. Otherwise barrier 1 would end each work tile holding 128 arrivals that no `bar.sync`
# completes, and since a block goes on to its next work tile (the persistent grid), that leftover would let
# consumer 0 through a `bar.sync` of the next tile without waiting for its turn.
# Count them for one work tile, for two consumers and for three:

# %%
def handovers(tiles, consumers):
    """bar.arrive and bar.sync counts at each named barrier 1 .. consumers, as the kernel issues them."""
    arrive = {1 + c: 0 for c in range(consumers)}
    sync = dict(arrive)
    arrive[1] += 1                                         # the last consumer's head start, for consumer 0
    for t in range(tiles):
        for c in range(consumers):                         # the order the ring lets them issue in
            sync[1 + c] += 1                               # my_turn
            if not (c == consumers - 1 and t == tiles - 1):   # your_turn, except the last one's after its last issue
                arrive[1 + (c + 1) % consumers] += 1
    return arrive, sync


for consumers in (2, 3):
    for tiles in (1, 2, 64):
        arrive, sync = handovers(tiles, consumers)
        print(f"{consumers} consumers, tiles={tiles:3d}: "
              + "; ".join(f"barrier {b}: {sync[b]} bar.sync vs {arrive[b]} bar.arrive" for b in sync)
              + ("  (balanced)" if arrive == sync else "  (UNBALANCED)"))

# %% [markdown]
# (The last P V, after the loop, takes no turn: by then each consumer issues one group and waits for it.)
#
# ## Three consumers at d = 64
#
# Ping-pong hides one consumer's softmax under another's products only if those products last at least as
# long as the softmax. Count both for one consumer's tile, 64 queries x 128 keys, on one SM of an H100 SXM:
#
# - **the products**: S = Q Kᵀ is 64 x 128 x d multiply-adds and P V is 64 x d x 128, so 2 x 64 x 128 x d in
#   all: 2^20 at d = 64. Dense bf16 on the tensor cores is about 4096 flop (2048 multiply-adds) a clock per
#   SM: the 989 TFLOP/s lesson 05 used, over 132 SMs at 1.83 GHz. 2^20 / 2048: about 512 clocks.
# - **the softmax**: one exponential a score, 64 x 128 = 8192, whatever d is. The special-function units do 16
#   `ex2` a clock per SM on compute capability 9.0 (the CUDA programming guide's
#   [throughput table](https://docs.nvidia.com/cuda/cuda-c-programming-guide/#arithmetic-instructions); lesson
#   05's 3.9 TFLOP/s of special functions is the same rate): 8192 / 16, about 512 clocks too, before the
#   maxima, the sums and the packing.
#
# At d = 128 the products double and the exponentials do not:

# %%
FLOP_PER_CLOCK, EX2_PER_CLOCK = 4096, 16        # one H100 SXM SM: dense bf16 tensor cores; special-function units
for d in s06.HEAD_DIMS:
    products = 2 * 64 * 128 * d                 # multiply-adds: Q K^T (64 x 128 x d) + P V (64 x d x 128)
    tensor = 2 * products / FLOP_PER_CLOCK
    ex2 = 64 * 128 / EX2_PER_CLOCK
    print(f"d={d:3d}: a consumer tile's products {products:,} multiply-adds = {tensor:4.0f} clocks of tensor cores; "
          f"its exponentials {64 * 128:,} = {ex2:3.0f} clocks of MUFU; products / exponentials = {tensor / ex2:.1f}")

# %% [markdown]
# At d = 128 the other consumer's products (1024 clocks) cover a softmax with room to spare, and two consumers
# are enough. At d = 64 they cover it with no slack at all: the exponentials alone take as long as the
# products, and everything else a consumer does between its turns (maxima, sums, rescale, pack, the waits, the
# issue itself) is time the tensor cores sit idle. A third consumer changes the arithmetic: while one
# consumer's products run, the other two are in their softmax, so each softmax has two consumers' products to
# hide under, and a warpgroup is usually ready to issue the moment the tensor cores are free. The price: 192
# query rows a work tile (fewer tiles, more shared memory for Q) and 160 registers a consumer instead of 240,
# which d = 64's O (32 floats) fits and d = 128's does not (part (b) below compiles it). The schematic again,
# at d = 64 (a product half as long, the same softmax), with two consumers and with three:

# %%
fig, axes = plt.subplots(2, 1, figsize=(11, 6.5), sharex=True)
for ax, consumers in zip(axes, (2, 3)):
    bars = schedule_06(tiles=4, stages=3, consumers=consumers, product=PRODUCT / 2)
    span, share = busy(bars)
    draw(ax, bars, f"06 at d = 64, {consumers} consumers: tensor cores busy {share:.0%} of the span")
    print(f"schematic, d = 64, {consumers} consumers: {4 * consumers} consumer tiles in {span:.1f} time units "
          f"({span / (4 * consumers):.2f} a consumer tile), tensor cores busy {share:.0%}")
axes[1].set_xlabel("time (schematic: hand-picked durations, not a measurement); products hatched by consumer: "
                   "0 plain, 1 //, 2 ..")
plt.tight_layout()
plt.show()

# %% [markdown]
# And measured: the sweeps in `results/sweeps/` time `consumers` = 1, 2 and 3 at each head dimension, beside
# the fastest SDPA backend of the same run (a variant the kernel refuses says so):

# %%
def head_dim(workload):
    return int(re.search(r"\bd=(\d+)", workload).group(1))


def attention_sweeps():
    """[(path, sweep, {workload: its rows})] for each results/sweeps/*_attention.json (none: says so)."""
    out = []
    for path in sorted((results.RESULTS / "sweeps").glob("*_attention.json")):
        sweep, by_workload = json.loads(path.read_text()), {}
        for row in sweep["rows"]:
            by_workload.setdefault(row["workload"], []).append(row)
        out.append((path, sweep, by_workload))
    if not out:
        print("No attention sweep in results/sweeps/ yet. On an H100 or H200: "
              "`python tools/sweep_params.py --track attention`.")
    return out


for path, sweep, workloads in attention_sweeps():
    print(f"{path.name}: {sweep.get('gpu')}, commit {sweep.get('commit')}")
    for workload, rows in workloads.items():
        ok = [r for r in rows if "median_us" in r and r.get("correct")]
        sdpa = min((r for r in ok if r["stage"].startswith("sdpa")), key=lambda r: r["median_us"], default=None)
        d = head_dim(workload)
        cells = []
        for n in (1, 2, 3):
            r = next((r for r in ok if r["stage"] == "06_warp_specialized" and r.get("params") == {"consumers": n}),
                     None)
            try:
                s06.config(d, False, consumers=n)
            except ValueError:
                cells.append(f"{n}: refused")
                continue
            mark = "*" if n == s06.config(d, False)["CONSUMERS"] else " "
            cells.append(f"{n}{mark}: {r['median_us']:6.1f} µs ({sdpa['median_us'] / r['median_us']:.2f}x)"
                         if r and sdpa else f"{n}{mark}: not in this sweep")
        best = f"{sdpa['stage']} {sdpa['median_us']:.1f} µs" if sdpa else "no SDPA row"
        print(f"  {workload[len('attention '):]:36s} " + "   ".join(cells) + f"   | fastest SDPA: {best}")
        timed = [(r["median_us"], r["params"]["consumers"]) for r in ok
                 if r["stage"] == "06_warp_specialized" and list(r.get("params") or {}) == ["consumers"]]
        if timed and sdpa:
            us, n = min(timed)
            print(f"  {'':36s} -> fastest: consumers={n}, "
                  + ("faster than" if us < sdpa["median_us"] else "NOT faster than") + " the fastest SDPA")
print("\n(x: the fastest SDPA's time over this variant's, above 1 is faster than SDPA; *: the default at this d. "
      "Each sweep was taken at the commit it names.)")

# %% [markdown]
# Read the d = 64 rows from one consumer to three: what the second consumer buys (the ping-pong, and each K/V
# tile shared by twice the rows), and what the third adds on top of it. At d = 128 the kernel refuses three
# (the registers), and two is where it stays. A sweep taken before commit 5ce4fba (where causal blocks began to
# start early, the causal section below) timed its causal rows on the kernel before that change.
#
# **Tried and not kept.** The exponentials could be shared out: compute 2^x for part of the scores with a
# polynomial on the FMA units instead of `MUFU.EX2` (degree 5 in the variant tried here), the trick
# FlashAttention-4 uses on Blackwell.
# Readings of one session on an H200, the one that wrote commit 799ef51 (d = 64, not causal, 3 consumers,
# 3 stages, a block a tile, one run each, not records):
# all on MUFU 536.0 µs; 2 of S's 16 n8 column blocks on FMA 587.7 µs; 4 of them 625.4 µs; 6 of them 673.1 µs.
# Nsight Compute on the same H200 at commit 799ef51, one launch at
# the clock it locks (its base clock): with all on MUFU the tensor pipe was 57.0 % active and the XU pipe (where MUFU
# runs) at 58.8 % of its peak, FMA 20.1 %, ALU 28.0 %; with 4 blocks on FMA, tensor 49.0 %, XU 38.3 %, FMA
# 30.4 %. Neither the tensor pipe nor MUFU is saturated, so taking work off MUFU bought nothing, and the
# polynomial's instructions (several FMAs where there was one `MUFU.EX2`) only cost time.
# What holds the kernel back instead is a hypothesis, not a measurement: latency, the chain of waits, barriers
# and dependent instructions between one issue and the next. A stall profile of the same defaults leans that
# way without settling it (Nsight Compute on an H200 at commit 21368d8, one launch, not a record): the most
# frequent reasons a warp could not issue were `wait`, a fixed-latency dependency (24 % of warp cycles), and
# `dispatch_stall` (14 %), while `math_pipe_throttle`, a busy unit, was 2 %. Those shares average the
# producer's warps with the consumers', and no variant separates the waits, so this stays open.
#
# ## What the compiler did to us
#
# ### (a) The second wait, and where ptxas puts it
#
# The overlap exists only if, in the machine code, the softmax's instructions sit **between** the two waits.
# In SASS, `wgmma.wait_group 1` is `WARPGROUP.DEPBAR.LE gsb0, 0x1` and `wait_group 0` is
# `WARPGROUP.DEPBAR.LE gsb0, 0x0`, and ptxas, not the source, decides what goes between them: it may move an
# instruction past a wait, or a wait past instructions, as long as the result is the same. While this rung was
# written (NVRTC 13.0 and 13.5), a branch between the two waits (an `if (tile needs a mask) { ... }` inside the
# loop) went with ptxas hoisting the second wait above the softmax. The kernel now writes the loop twice (the
# tiles without a mask, then the tiles that need one) and masks with a select, not a branch (`mask_scores`).
# That was necessary, not enough: on those builds the exponentials still landed after the second wait in the
# unmasked loop, and how many of them ptxas leaves between the waits changes from build to build (the
# persistent kernel on NVRTC 13.5: part of them at d = 128, none at d = 64). Check what this build got: for
# each `DEPBAR 0x1`, count the exponentials (`MUFU.EX2`, one a score plus the two α) and all instructions up
# to the next `DEPBAR 0x0`, and the exponentials after it:

# %%
def between_waits(cubin):
    """For each 'DEPBAR.LE gsb0, 0x1': (MUFU.EX2 before the next '0x0', instructions before it, MUFU.EX2 from
    that '0x0' to the next HGMMA)."""
    sass = nvrtc.sass_lines(cubin, r".", kernel=s06.KERNEL)
    out = []
    for i, line in enumerate(sass):
        if re.search(r"WARPGROUP\.DEPBAR\.LE gsb0, 0x1\b", line):
            j = next(k for k in range(i + 1, len(sass)) if re.search(r"WARPGROUP\.DEPBAR\.LE gsb0, 0x0\b", sass[k]))
            k = next((k for k in range(j + 1, len(sass)) if "HGMMA" in sass[k]), len(sass))
            out.append((sum("MUFU.EX2" in x for x in sass[i:j]), j - i - 1, sum("MUFU.EX2" in x for x in sass[j:k])))
    return out


for d in (128, 64):
    cfg = s06.config(d, False)
    counts = between_waits(s06.compile_cubin(d=d))
    print(f"d={d:3d} (bkv={cfg['BKV']}: {cfg['BKV'] // 2} scores + 2 alphas a thread): "
          f"{len(counts)} pair(s) of waits in the SASS")
    for n, (under, instructions, after) in enumerate(counts, 1):
        verdict = ("no exponential under P V" if under == 0 else f"{under / (under + after):.0%} of them under P V")
        print(f"  pair {n}: {instructions:4d} instructions and {under:3d} MUFU.EX2 between the waits, "
              f"{after:3d} MUFU.EX2 after wait<0>: {verdict}")

# %% [markdown]
# Read the pairs against the source: the loop is written twice (unmasked tiles, then masked ones), so there
# should be two pairs. Where many exponentials sit between the waits, the softmax really runs under P V (ptxas
# may still leave part of it after the second wait: the last column). Where there are none, only the few
# instructions counted run under P V, and that copy of the loop waits for P V before its softmax: the
# overlap the source asks for is not in the machine code. The `wgmma_keep` statements cannot prevent that: they
# bind the front end (NVVM, which writes the PTX), not ptxas. What does bind ptxas is data: an instruction
# cannot move above the wait that produces its inputs.
#
# What the overlap buys, as the sweeps in `results/sweeps/` measured it: `overlap=False` (one product at a time)
# against the defaults, on each workload (`tools/sweep_params.py`), then in the lesson sweeps (the exercise
# cells below, d = 128 not causal, each record with its commit):

# %%
for path, sweep, workloads in attention_sweeps():
    cost = []
    for workload, rows in workloads.items():
        timed = [r for r in rows if r["stage"] == "06_warp_specialized" and "median_us" in r and r.get("correct")]
        default = next((r["median_us"] for r in timed if not r.get("params")), None)
        off = next((r["median_us"] for r in timed if r.get("params") == {"overlap": False}), None)
        if default and off:
            cost.append(f"{workload[len('attention '):]}: {100 * (off / default - 1):+.1f} %")
    print(f"{sweep.get('gpu')} at {sweep.get('commit')}, the time of overlap=False against the defaults:\n  "
          + ("\n  ".join(cost) or "no overlap=False row"))
for path in sorted((results.RESULTS / "sweeps").glob("*_lessons.json")):
    for sw in json.loads(path.read_text())["sweeps"]:
        if sw.get("stage") == "06_warp_specialized" and sw.get("param") == "overlap":
            us = {r["value"]: r["median_us"] for r in sw["rows"] if r.get("correct") and "median_us" in r}
            if True in us and False in us:
                grid = ("persistent grid" if "persistent" in (sw.get("defaults") or {})
                        else "before the persistent grid")
                print(f"{sw['gpu']} lesson sweep at {sw['commit']} ({grid}), {sw['workload'][len('attention '):]}: "
                      f"overlap=False {100 * (us[False] / us[True] - 1):+.1f} %")

# %% [markdown]
# In the `tools/sweep_params.py` sweeps the overlap is worth a few percent at d = 64, causal or not, and less
# at d = 128. The lesson sweeps at d = 128 disagree with each other: none on the H100, before the persistent
# grid; more than the tool's sweeps on the H200, with it. One timing each, on different kernels, so at d = 128
# the size of the gain is open. Where a build has no exponential between its waits (the d = 64 build counted
# above), the likely source of its gain is the rescale and the issue order (a hypothesis: no variant separates
# them), not the softmax under P V. Putting the whole softmax there for real is the next lever of this rung.
#
# ### (b) The register budget
#
# `setmaxnreg.inc` allows a consumer thread 240 registers (160 with three consumers), but ptxas decides how many
# the consumer code may use, and it need not take them all. At d = 128 with 128-key tiles a consumer holds O (64
# floats), S (64), P (32 registers of bf16 pairs) and the softmax state. While this rung was written, ptxas first
# held that code well under 240 and spilled instead (and d = 128 had to use 64-key tiles: the sweep below shows
# what they cost); the kernel's comment above its role branch records what changed it on those builds (NVRTC
# 13.0 and 13.5): with the producer's branch first in the source, the consumer code spilled at about 180
# registers; with the consumers' branch first, it did not. A measurement of one toolchain, not a rule. Compile
# both tile sizes at d = 128, the d = 64 default (three consumers at 160), and d = 128 with three consumers,
# which `s06.config` refuses (the cell builds it from the config's constants directly, to see why), and see what
# this build does: the resources, the highest register the consumer code names, the spill instructions and what
# ptxas said.

# %%
def consumer_registers(cubin):
    """The highest register named from the consumers' USETMAXREG.TRY_ALLOC on (up to a DEALLOC after it, if any),
    and the spill instructions (STL/LDL) in the whole kernel."""
    sass = nvrtc.sass_lines(cubin, r".", kernel=s06.KERNEL)
    a = next(i for i, x in enumerate(sass) if "USETMAXREG.TRY_ALLOC" in x)
    b = next((i for i in range(a, len(sass)) if "USETMAXREG.DEALLOC" in sass[i]), len(sass))
    top = max(int(r) for x in sass[a:b] for r in re.findall(r"\bR(\d+)\b", x))
    return top, sum(bool(re.match(r"(@\S+ )?(STL|LDL)\b", x)) for x in sass)


builds = {"d=128 bkv=128 (default)": s06.compile_cubin(d=128, bkv=128),
          "d=128 bkv=64": s06.compile_cubin(d=128, bkv=64),
          "d=64 bkv=128, 3 consumers (default)": s06.compile_cubin(d=64),
          "d=128 bkv=128, 3 consumers (refused)": s06.RUNG.compile({**s06.config(128, False), "CONSUMERS": 3})}
for name, cub in builds.items():
    use = nvrtc.resource_usage(cub)[s06.KERNEL]
    top, spills = consumer_registers(cub)
    cons = setmaxnreg(cub)[1]
    spilled = bool(use["stack"] or use["local"] or spills)
    print(f"{name}: {use}; highest consumer register R{top}; {spills} STL/LDL")
    print("  compile log:", nvrtc.compile_log(cub).strip() or "(empty)")
    print(f"  -> {'spills, with' if spilled else 'no spills;'} the consumer code naming registers up to R{top} "
          f"of the {cons} setmaxnreg grants"
          + (": ptxas's limit there stayed under setmaxnreg's" if spilled and top < cons - 8 else ""))
for d in s06.HEAD_DIMS:
    use = nvrtc.resource_usage(s06.compile_cubin(d=d))[s06.KERNEL]
    print(f"the default at d={d}: bkv={s06.config(d, False)['BKV']} (rung 05's: {s05.config(d, False)['BKV']}), "
          f"{'SPILLS (stack ' + str(use['stack']) + ' bytes)' if use['stack'] or use['local'] else 'no spills'}")

# %% [markdown]
# A nonzero `stack` means spills: registers parked in local memory (`STL`, reloaded by `LDL`). ptxas's
# "wgmma.mma_async instructions are serialized due to insufficient register resources" (C7512 in NVRTC 13.5's
# log; other versions number it differently) says worse:
# it then waits for each wgmma before the next, which undoes everything this rung is about. So read the lines
# above as a rule for choosing the tile and the consumers: where 128-key tiles spill at d = 128, take
# `bkv=64`; where they do not, the larger tile halves the turns and barriers per key. At d = 64 a consumer's O
# is half as large (32 floats), and 160 registers hold it with S and P; at d = 128, 160 do not, which is why
# `s06.config` refuses `consumers=3` there. The last lines print what the defaults are and whether they spill.
#
# ## Causal: stop at the diagonal, mask only there
#
# A causal block of BQ query rows (128 at d = 128, 192 at d = 64) starting at q0 needs keys up to q0 + BQ − 1
# only: `tiles` ends there (the producer never loads the tiles above the diagonal), and only tiles from
# `masked` on cross it (or reach past Nk), so only those run the masked copy of the loop. Within each head,
# causal tiles go longest first (`Work::qb`: with a block a tile, the query block counts down as blockIdx.x
# counts up, and x varies fastest, so across heads the order is a sawtooth and the last heads' short blocks fill
# the gaps at the end; the persistent grid's order is in the section on it, below).
#
# When Nq is not a multiple of BQ, the tiles cover `pad = qblocks · BQ − Nq` rows that do not exist (at
# d = 64 and N = 4096: 22 blocks of 192 rows, 128 too many). Put at the end, they would sit in the last block,
# the one that does every key tile. So a causal block starts `pad` rows early, q0 = qb · BQ − pad: the rows
# before 0 land in the first block, which does one tile. TMA fills rows outside the tensor with zeros, before
# row 0 as past Nq; every key is after such a row, so its scores are all masked, and the epilogue stores no row
# below 0.

# %%
show("struct Work {", "};")
show("const int pad", "auto key_tiles")
show("const int masked", "const int masked")
show("int t = 1;", "for (; t < tiles; ++t)")


def causal_blocks(n, bq, bkv, early=True):
    """Per query block, as the kernel computes them (Nq = Nk = n): (qb, q0, padding rows, tiles, masked tiles).
    early=False: the blocks start at qb * bq, the padding at the end (the kernel before the pad)."""
    grid = -(-n // bq)
    pad = grid * bq - n if early else 0
    out = []
    for qb in range(grid):
        q0 = qb * bq - pad
        tiles = -(-min(n, q0 + bq) // bkv)
        masked = min(n // bkv, max(q0 + 1, 0) // bkv)
        padding = max(0, -q0) + max(0, q0 + bq - n)
        out.append((qb, q0, padding, tiles, tiles - min(masked, tiles)))
    return out


n = 4096
for d in s06.HEAD_DIMS:
    cfg = s06.config(d, True)
    bq, bkv = 64 * cfg["CONSUMERS"], cfg["BKV"]
    rows = causal_blocks(n, bq, bkv)
    loaded, with_mask, full = sum(r[3] for r in rows), sum(r[4] for r in rows), len(rows) * -(-n // bkv)
    print(f"d={d:3d} bkv={bkv} BQ={bq}, N={n}: {len(rows)} blocks a head, pad = {len(rows) * bq - n}; they load "
          f"{loaded} of {full} tiles ({loaded / full:.1%}); {with_mask} of them masked ({with_mask / loaded:.1%}), "
          f"{min(r[4] for r in rows)} to {max(r[4] for r in rows)} a block")
    for label, blocks in (("now (start pad rows early)", rows),
                          ("padding at the end", causal_blocks(n, bq, bkv, early=False))):
        print(f"  {label}:")
        for qb, q0, padding, tiles, masked in (blocks[0], blocks[1], blocks[-1]):
            print(f"    block {qb:2d}: rows {q0:5d} .. {q0 + bq - 1:5d}, {padding:3d} of them padding; "
                  f"{tiles:2d} tiles, {masked} masked")
        waste = sum(padding * tiles for _, _, padding, tiles, _ in blocks)
        print(f"    padding rows x tiles they run: {waste} ({waste / max(1, sum(bq * t for *_, t, _ in blocks)):.1%} "
              f"of the rows x tiles the head runs)")

# %% [markdown]
# A block masks only the few tiles its diagonal crosses (about BQ / bkv of them, at least one), out of up to
# N / bkv: the copy of the loop that does the masking runs on a small share of the tiles (the printed
# percentage), so whatever part (a) found for it weighs little. Without causal, only a ragged last tile (Nk
# not a multiple of bkv) is masked, and no block starts early: `pad` is 0.
#
# ## Right?
#
# On an H100 or H200, the checker's ragged cases against the float64 reference, with the defaults and the
# variants the exercises use. Without a Hopper GPU, the workbook's CPU emulator runs the same kernel (`wgmma`,
# TMA and the barriers included) on a few small cases: both head dimensions, causal with Nq not a multiple of
# BQ (so the first query block starts early), and three and two consumers at d = 64. The emulated GPU has two
# SMs, so the default persistent grid has at most two blocks (never more than there are work tiles): a block
# does one tile in most of these small cases, and more in the last (two causal heads of two query blocks or
# more each); the last case also runs a grid of one block (`blocks=1`), which walks all four work tiles, its rings,
# Q barriers and hand-overs running on from tile to tile. Each case is checked against the float64 reference
# the same way.

# %%
EMULATED_CASES = [
    ("causal, Nq=200 (pad 184 at BQ=192), d=64", dict(B=1, H=1, Nq=200, Nk=200, d=64, causal=True)),
    ("ragged Nk, small scores, d=64", dict(B=1, H=2, Nq=45, Nk=150, d=64, spread=0.25)),
    ("causal, Nq=130 (pad 126 at BQ=128), d=128", dict(B=1, H=1, Nq=130, Nk=130, d=128, causal=True)),
    ("Nq != Nk, ragged, d=128", dict(B=1, H=1, Nq=70, Nk=150, d=128)),
    ("causal, 2 heads x 2 query blocks, d=64", dict(B=1, H=2, Nq=300, Nk=300, d=64, causal=True)),
]
MORE_PARAMS = {"causal, 2 heads x 2 query blocks, d=64": ({"blocks": 1},)}   # one block walks every tile
why = attention.unavailable("06_warp_specialized")
if why and not SIMULATOR:
    print(f"Not run here: {why}. (The CPU emulator works on host memory, where Numba runs in its simulator: "
          f"set CUDABOOK_SIMULATOR=1 before `import cudabook` to use it.)")
elif why:
    try:
        for name, kw in EMULATED_CASES:
            args = attention.random_problem(**kw)
            for params in ({}, {"consumers": 2}) + MORE_PARAMS.get(name, ()):
                if params == {"consumers": 2} and s06.config(kw["d"], False, **params) == s06.config(kw["d"], False):
                    continue                               # at d = 128 the default is already 2
                p = attention.upload(*args)
                p.poison()
                with emulate.emulating():
                    s06.launch(p, **params)
                verdict = attention.judge(p.result(), *args)
                print(f"{name:42s} emulated {str(params or 'defaults'):18s} {verdict.message.splitlines()[0]}")
    except emulate.HostCompilerMissing as e:
        print("Not emulated:", e)
else:
    TRIED = [p for p in ({}, {"consumers": 2}, {"pingpong": False}, {"stages": 3}, {"consumers": 1},
                         {"overlap": False}) if set(p) <= set(s06.PARAMS)]
    # every build first, at once (NVRTC compiles one a thread), then each case runs from the cache
    nvrtc.in_threads([lambda kw=kw, p=p: s06.compile_cubin(None, kw["d"], kw.get("causal", False), **p)
                      for _, kw in attention.cases() for p in TRIED])
    for name, kw in attention.cases():
        q, k, v, causal = attention.random_problem(**kw)
        for params in TRIED:
            verdict = attention.judge(attention.run("06_warp_specialized", q, k, v, causal=causal, **params),
                                      q, k, v, causal)
            print(f"{name:40s} {str(params or 'defaults'):22s} {verdict.message.splitlines()[0]}")

# %% [markdown]
# ## A block costs more than its key tiles: the persistent grid
#
# With a block per work tile (64 × consumers query rows of one head), every block pays, in series, for
# things that are not its key tiles: its launch and `setmaxnreg`, the mbarriers' set-up, Q's load and the
# first K tile's (nothing to overlap them with), S_0 with no P V beside it, the last P V with no S beside it,
# and the stores. One block fits an SM, so nothing else runs meanwhile.
#
# How much is that? Time the rung against the number of keys, at a head count whose blocks fill whole waves
# (66 heads: 2,112 blocks of 128 rows on 132 SMs, 16 waves). If the time grew in a straight line with the
# keys, the line's value at zero keys would be what the blocks cost besides their tiles; cuDNN's line, timed
# beside it, gives a yardstick. The cell draws the line through the two shortest runs and prints the slope of
# each step, to see how straight it is. A reading on an H200 (`tools/probe_attention_waves.py --nk`, kept in
# `results/readings/`), before the change below:

# %%
def grid_readings():
    path = results.RESULTS / "readings" / "H200_attention_06_grid.json"
    return json.loads(path.read_text()) if path.exists() else None


readings = grid_readings()
if readings is None:
    print("No reading in results/readings/ (H200_attention_06_grid.json): "
          "`python tools/probe_attention_waves.py --nk 1024,2048,4096,8192 --heads 66` on a Hopper GPU measures it.")
else:
    run = readings["runs"]["keys_d128"]
    cases = run["cases"]
    print(f"{readings['gpu']}, commit {run['commit']}, d = {run['d']}, {cases[0]['heads']} heads, "
          f"{cases[0]['waves']:.0f} waves")
    print(f"{'keys':>6s} {'06 µs':>8s} {'cuDNN µs':>9s}")
    for c in cases:
        print(f"{c['nk']:6d} {statistics.median(c['stage_us']):8.1f} {statistics.median(c['cudnn_us']):9.1f}")
    a, b = cases[0], cases[1]                      # the line through 1,024 and 2,048 keys
    for who, key in (("06", "stage_us"), ("cuDNN", "cudnn_us")):
        t1, t2 = statistics.median(a[key]), statistics.median(b[key])
        slope = (t2 - t1) / (b["nk"] - a["nk"])
        fixed = t1 - slope * a["nk"]
        print(f"{who:>6s}: {1024 * slope:6.1f} µs for each 1,024 keys, {fixed:5.1f} µs at zero keys "
              f"({fixed / a['waves']:.1f} µs a wave of blocks)")
    for who, key in (("06", "stage_us"), ("cuDNN", "cudnn_us")):
        steps = [1024 * (statistics.median(y[key]) - statistics.median(x[key])) / (y["nk"] - x["nk"])
                 for x, y in zip(cases, cases[1:])]
        print(f"{who:>6s}, µs for each 1,024 keys, step by step: "
              + ", ".join(f"{x['nk']:,}-{y['nk']:,}: {v:.1f}" for (x, y), v in zip(zip(cases, cases[1:]), steps)))

# %% [markdown]
# The line is not quite straight: both slopes grow with the keys, rung 06's a little more, and from 4,096
# keys to 8,192 the two cost about the same per key. So read the line through the short runs as a reading of
# the short end, not a fit of all four: there rung 06 was the faster per key, and what it lost to cuDNN was the
# fixed cost, several microseconds a wave of blocks against cuDNN's one or two. (The waves themselves were not
# the gap: 32 and 33 heads, 7.76 and exactly 8 waves, gave rung 06 the same share of cuDNN's speed,
# `waves_d128` in the same file.)
#
# The remedy is a **persistent grid** (`persistent=True`): at most one block an SM, each walking work tiles
# w = blockIdx.x, + gridDim.x, … The K and V rings run on from one tile to the next, so the producer loads the
# next tile's first K as soon as a stage is free, and its Q once every consumer has done the softmax of its
# last S of the tile (one more mbarrier, "Q empty": each consumer arrives after that softmax and the wait for
# the P V beside it, though the tensor cores stop reading Q at the wait that brings that S in). Both loads then
# land under the last P V and the stores of the tile before. The consumers run the same loop; the ping-pong's
# named barriers balance inside each tile, so the hand-over simply starts again.
#
# Causal tiles differ in length. Walked head by head, a block meets the same query block every round whenever
# the grid is a multiple of a head's query blocks (132 blocks, 22 query blocks of 192 rows at d = 64: blocks 0,
# 22, 44, 66, 88 and 110 got the longest tile every round, block 21 and the others like it the shortest; the
# first build did that, printed below as "head by head"). The kernel ranks the causal tiles
# longest first over all heads and walks every other round backwards (a snake), so that the block with the
# longest tile of one round takes the shortest of the next.
#
# The readings, each variant against cuDNN in interleaved rounds (the same file):

# %%
if readings is not None:
    print(f"{'d':>4s} {'causal':>7s} {'a block a tile':>15s} {'persistent':>11s}   (cuDNN's time / rung 06's)")
    for d in (128, 64):
        for causal in ("", "_causal"):
            one, many = readings["runs"][f"per_tile_d{d}{causal}"], readings["runs"][f"persistent_d{d}{causal}"]
            print(f"{d:4d} {str(bool(causal)):>7s} {one['cases'][0]['ratio']:14.3f}x {many['cases'][0]['ratio']:10.3f}x"
                  f"   (commit {many['commit']})")
    for d in (128, 64):
        first = readings["runs"].get(f"persistent_d{d}_causal_head_major")
        if first:
            print(f"{d:4d} causal, persistent, head by head: {first['cases'][0]['ratio']:.3f}x (commit {first['commit']})")

# %% [markdown]
# With the static stride the persistent grid gained everywhere but at d = 128 causal, where it lost a little.
# Two guesses. The L2: walked longest first over all heads, the blocks in flight read every head's K and V at
# once (64 heads, 2 MB each at d = 128), so only about two blocks share each tile the L2 brings in. The first
# build, head by head, lost as well, but under a static stride a head-by-head order spreads the work unevenly
# on its own (the count below, head_group 1), so that reading says little about the L2. Or the stride itself:
# a block a tile is scheduled as blocks free up (the hardware hands the next block to the first SM with room),
# and a static stride cannot be.
#
# To test both, the kernel has two more settings. `schedule="dynamic"`: the producer claims the block's next
# tile from a counter in global memory (`atomicAdd`) as it finishes issuing the loads of the last one, and
# hands its number to the consumers through shared memory, published by Q's mbarrier; the last block to finish
# sets the counter back to zero for the next launch. `head_group=g`: causal tiles are ranked longest first
# within groups of g heads, group after group (0: all heads at once, as above; 1: head by head), so that the
# blocks in flight read few heads' keys and values and many of them share each tile in the L2. The readings,
# each against cuDNN in interleaved rounds on one card in one session (the same file):

# %%
if readings is not None:
    runs = readings["runs"]

    def ratio(key):
        run = runs.get(key)
        return f"{run['cases'][0]['ratio']:.3f}x" if run else "–"
    for d in (128, 64):
        if f"sched_static_d{d}" not in runs:
            continue
        print(f"d = {d}, commit {runs[f'sched_static_d{d}']['commit']}: not causal: static {ratio(f'sched_static_d{d}')}, "
              f"dynamic {ratio(f'sched_dynamic_d{d}')}")
        for schedule in ("static", "dynamic"):
            print(f"   causal, {schedule:7s}: " + ", ".join(
                f"head_group {g} {ratio(f'sched_{schedule}_d{d}_causal_g{g}')}" for g in (0, 1, 2, 4, 8)
                if f"sched_{schedule}_d{d}_causal_g{g}" in runs))
    print("defaults now:", {k: s06.PARAMS[k] for k in ("persistent", "schedule", "head_group")})

# %% [markdown]
# Before reading them, a count that leaves the cache out. Give each causal tile a cost of its key tiles and
# nothing else, hand the tiles out as `struct Work` does (static: block b takes tiles b, b + 132, ... with the
# snake; dynamic: the next tile in rank order goes to the block that has done the least so far, which is about
# what claiming as blocks free up does), and compare the busiest block's key tiles with the mean. A grid ends
# when its busiest block does, so 1.00 is an even spread and anything above it is time the other SMs sit idle.

# %%
def busiest_block(d, schedule, head_group, heads=64, n=4096, sms=132):
    """The busiest block's key tiles over the mean, causal, persistent: tiles ranked and handed out as in
    struct Work (warp_specialized.cu), a tile's cost its key tiles (no cache, no fixed cost a tile)."""
    cfg = s06.config(d, True, schedule=schedule, head_group=head_group)
    bq, bkv = 64 * cfg["CONSUMERS"], cfg["BKV"]
    qblocks = -(-n // bq)
    total, group = qblocks * heads, head_group if 0 < head_group < heads else heads

    def key_tiles(w):
        k, i = divmod(w, sms)
        snake = schedule == "static" and k % 2 and (k + 1) * sms <= total       # odd full rounds backwards
        r = k * sms + sms - 1 - i if snake else w
        h0 = r // (group * qblocks) * group
        qb = qblocks - 1 - (r - h0 * qblocks) // min(group, heads - h0)
        return -(-min((qb + 1) * bq, n) // bkv)
    load, tiles_of = [0] * sms, [[] for _ in range(sms)]
    for w in range(total):
        b = w % sms if schedule == "static" else min(range(sms), key=load.__getitem__)
        load[b] += key_tiles(w)
        tiles_of[b].append(key_tiles(w))
    return max(load) / (sum(load) / sms), tiles_of


count_at = dict(heads=64, n=4096, sms=132)       # the readings' workload and card
sched_run = readings["runs"].get("sched_static_d128_causal_g0") if readings else None
if sched_run:
    count_at = dict(heads=sched_run["cases"][0]["heads"], n=sched_run["n"], sms=sched_run["sms"])
print("the busiest block's key tiles over the mean, causal, {heads} heads of {n:,} tokens on {sms} SMs:"
      .format(**count_at))
for d in (128, 64):
    for schedule in ("static", "dynamic"):
        print(f"  d = {d:3d}, {schedule:7s}: " + ", ".join(
            f"head_group {g} {busiest_block(d, schedule, g, **count_at)[0]:.2f}" for g in (0, 1, 2, 4, 8)))
for block in (0, 64):
    print(f"d = 128, static, head_group 4: block {block:2d} gets tiles of "
          f"{busiest_block(128, 'static', 4, **count_at)[1][block]} key tiles")

# %% [markdown]
# Read it in three steps.
#
# - **Claimed as blocks free up, the persistent grid is ahead of cuDNN at d = 128 causal too**, but only in
#   groups of heads. Over all heads at once (group 0) the dynamic schedule is level with the static stride, and
#   the count finds both even there: the stride was not what lost. Groups of four and eight are clearly ahead;
#   groups of one and two, which the count finds uneven, come in between. What group 0 lost to group four is
#   then not the spread of the work. The L2 guess fits it, but no cache counter was read: it is still a guess.
# - **At d = 64 the larger the group, the faster, all heads at once the fastest.** Here the count alone
#   follows the readings: the uneven groups are the slow ones. With small groups the long tiles at the head of
#   the last groups are claimed late, and the blocks that take them finish after the others; ranked over all
#   heads, the grid's last tiles are all short. Keys and values are half the size, so the L2 would weigh less
#   than at d = 128, but how much it weighs here was not measured either.
# - **With a static stride, groups are ruinous at d = 128** (and costly at d = 64). At BQ = 128 a head has 32
#   query blocks, so a group of four heads is 128 tiles, four fewer than a round of the grid: each round starts
#   four tiles further into a group and ends on the long tiles at the head of the next one. Forwards, blocks 0
#   to 3 take the round's first tiles, long ones; backwards (the snake), its last, long ones too. So they take
#   a long tile every round, and block 64 only short ones (the last lines of the count).
#
# Without the mask every tile is as long as every other, and the dynamic schedule is level with the static
# stride or a little ahead. So the defaults are the persistent grid with the dynamic schedule everywhere, and
# causal tiles over all heads at d = 64 and in groups of four at d = 128 (`PARAMS["head_group"]`, by head
# dimension). A block a tile (`persistent=False`) ignores both settings.

# %%
attention.sweep("06_warp_specialized", "persistent", [True, False])

# %% [markdown]
# ## How fast?
#
# On a Hopper GPU the next cell measures rungs 05 and 06 beside PyTorch's SDPA backends; rungs 01 to 04 come
# from this card's record (‡). Elsewhere it shows the records in `results/`.

# %%
attention.ladder_so_far("06_warp_specialized", peers=True)

# %% [markdown]
# From the records: rung 06 against rung 05 and the fastest SDPA backend of the same run, d = 128 and 64,
# causal and not. Nothing here is typed in: a workload without a record of rung 06 says so.

# %%
def attention_records():
    return [(rec, name, w) for rec in results.load_all() for name, w in rec["workloads"].items()
            if name.startswith("attention ")]


recorded_06 = False
print(f"{'record · workload':68s} {'06 µs':>9s} {'05 µs':>9s} {'06 vs 05':>9s}  fastest SDPA")
for rec, name, w in attention_records():
    st = w.get("stages", {})
    r6, r5 = st.get("06_warp_specialized", {}), st.get("05_wgmma_tma", {})
    best = attention.bench.fastest(w.get("peers", {}))
    recorded_06 |= "median_us" in r6
    us6 = f"{r6['median_us']:9,.0f}" if "median_us" in r6 else f"{'–':>9s}"
    us5 = f"{r5['median_us']:9,.0f}" if "median_us" in r5 else f"{'–':>9s}"
    ratio = (f"{r5['median_us'] / r6['median_us']:8.2f}x" if "median_us" in r6 and "median_us" in r5
             else f"{'–':>9s}")
    sdpa = f"{best[0]} {best[1]:,.0f} µs" if best else "–"
    pct = f", 06 at {r6['pct_of_sdpa']:.0f} % of it" if "pct_of_sdpa" in r6 else ""
    print(f"{rec['gpu'] + ' · ' + name[len('attention '):]:68s} {us6} {us5} {ratio}  {sdpa}{pct}")
    for duel in w.get("head_to_head", []):
        if duel.get("stage") == "06_warp_specialized" and duel.get("peer") == "sdpa_cudnn" and "ratio" in duel:
            print(f"{'':68s} interleaved, {duel['rounds']} rounds at {w.get('commit')}: cuDNN / 06 = "
                  f"{duel['ratio']:.3f}x (06 {min(duel['stage_us']):,.0f}-{max(duel['stage_us']):,.0f} µs, "
                  f"cuDNN {min(duel['peer_us']):,.0f}-{max(duel['peer_us']):,.0f} µs)")
            if "sustained" in duel:
                held = duel["sustained"]
                print(f"{'':68s} back to back, {held['seconds']:g} s each ({', '.join(held['order'])}): "
                      f"cuDNN / 06 = {held['ratio']:.3f}x")
if not recorded_06:
    print("\nNo record of rung 06 in results/ yet. To measure it, on an H100 or H200: "
          "`python -m cudabook.results attention` (or `make bench TRACKS=attention`), which writes "
          "results/<gpu>.json; this cell then shows it.")

# %% [markdown]
# Each rung and each backend of a record is timed in its own turn of the run, so the share of SDPA carries
# whatever the card's clock did between the turns. Where a record also holds a head-to-head (rung 06 and cuDNN
# timed again in interleaved rounds, which share the clock), read that line: on the H200, with the persistent
# grid and the dynamic schedule, it puts rung 06 ahead of cuDNN on all four workloads, by a hair at d = 128
# without the mask and clearly on the other three. Since f44d140 a record also runs each of the two back to back
# for seconds, as a long job does, at the card's power cap (the "back to back" line): the lead is smaller
# there on all four, most at d = 64 with the mask, where it is about halved. The H100's record is older than
# the persistent grid and has no head-to-head: its medians put rung 06 level with cuDNN on the two causal
# workloads, a little behind it at d = 128 without the mask, and ahead at d = 64 without it.
#
# What do the backends run? PyTorch's profiler names the kernel each call launched (a reading,
# `tools/probe_peer_kernels.py`; NVIDIA does not document cuDNN's names):

# %%
_ = results.show_peer_kernels("attention", "06_warp_specialized")

# %% [markdown]
# cuDNN's names carry `sm90`, `flash_fprop` and `wgmma`, so its kernels use the Hopper tensor-core instruction
# this rung uses (the names show nothing of warp specialization or TMA, and they say `f16` for these bf16
# inputs: read them with care), and a shape `64x128xd` whose last number follows the head dimension (the first
# two perhaps query rows and keys a tile; the name alone cannot say). PyTorch's own flash backend is the
# FlashAttention-2 kernel (`flash_fwd_kernel`, its template arguments 128 × 64 tiles at d = 128), written for
# the A100's `mma.sync`; that is most likely why it trails both on a Hopper GPU (the FlashAttention-3 paper, Shah
# et al. 2024, makes the same comparison).
#
# The sweep of this rung's parameters (`tools/sweep_params.py --track attention` on a Hopper GPU writes
# `results/sweeps/<gpu>_attention.json`): each variant checked and timed beside rung 05 and the SDPA backends
# of the same run. A ladder is honest only if it says where a rung does not win: the cell compares rung 06's
# defaults with rung 05 on each workload and names the fastest variant.

# %%
def suggests(params):
    """What a variant that beats the defaults suggests, in a few words."""
    what = {"bkv": lambda v: f"bkv={v}: " + ("larger tiles, half the turns, waits and barriers per key" if v == 128
                                              else "smaller tiles, fewer registers a consumer"),
            "stages": lambda v: f"stages={v}: a deeper ring, so the consumers had been waiting for tiles",
            "pingpong": lambda v: f"pingpong={v}: " + ("the turn-taking costs more than it hides" if not v
                                                       else "taking turns"),
            "overlap": lambda v: f"overlap={v}: " + ("the overlap inside a warpgroup costs more than it hides"
                                                     if not v else "the overlap"),
            "consumers": lambda v: f"consumers={v}: " + {
                1: "one consumer, no ping-pong: the turns cost more than they hide",
                2: "where the default is three, the third consumer costs (160 registers, 192-row blocks) more "
                   "than it hides",
                3: "a third consumer: one stays ready to issue while two run their softmax"}.get(v, "")}
    return "; ".join(what.get(k, lambda v: f"{k}={v}")(v) for k, v in params.items())


for path, sweep, by_workload in attention_sweeps():
    print(f"{path.name}: {sweep.get('gpu')}, commit {sweep.get('commit')}")
    for workload, rows in by_workload.items():
        print(f"\n  {workload}")
        print(f"  {'stage':22s} {'params':34s} {'µs':>9s} {'TFLOP/s':>8s} {'% SDPA':>7s}  correct")
        for r in rows:
            if "median_us" not in r:
                print(f"  {r['stage']:22s} {'':34s} {r.get('skipped', 'not run')}")
                continue
            pct = f"{r['pct_of_sdpa']:7.1f}" if "pct_of_sdpa" in r else f"{'–':>7s}"
            tf = f"{r['TFLOPs']:8.1f}" if "TFLOPs" in r else f"{'–':>8s}"
            print(f"  {r['stage']:22s} {json.dumps(r.get('params', {})):34s} {r['median_us']:9,.1f} {tf} {pct}  "
                  f"{'✓' if r.get('correct') else '✗'}")
        ok = [r for r in rows if "median_us" in r and r.get("correct")]
        base = next((r for r in ok if r["stage"] == "05_wgmma_tma"), None)
        default = next((r for r in ok if r["stage"] == "06_warp_specialized" and not r.get("params")), None)
        fastest = min((r for r in ok if r["stage"] == "06_warp_specialized"), key=lambda r: r["median_us"],
                      default=None)
        if base and default:
            ratio = base["median_us"] / default["median_us"]
            print(f"  -> 06 (defaults) runs at {ratio:.2f}x rung 05's speed here"
                  + ("" if ratio > 1 else ": NOT faster than rung 05 on this workload"))
        if default and fastest and fastest is not default:
            gain = default["median_us"] / fastest["median_us"]
            if gain > 1.03:
                print(f"  -> the fastest 06 variant, {json.dumps(fastest['params'])}, is {gain:.2f}x the defaults "
                      f"here: {suggests(fastest['params'])}")
            else:
                print("  -> no variant of 06 beats its defaults by more than 3 % here (closer is not read as a win)")

# %% [markdown]
# Rung 06 is ahead of rung 05 on every workload of every record and sweep above. What the variants say is
# which part of it pays: the second consumer (and at d = 64 the third) by a wide margin everywhere; 128-key
# tiles (fewer turns, waits and barriers a key) clearly everywhere; the ping-pong a lot at d = 128 without the
# mask, a few percent at d = 64, and next to nothing at d = 128 with the mask; the overlap inside a warpgroup
# several percent at d = 64 and less at d = 128 (part (a): where a build has no exponential between its two
# waits, as at d = 64, that gain is not the softmax under P V); one more stage nothing consistent.
# The exercise sweeps at the end run today's defaults (the persistent grid and its dynamic schedule among them,
# newer than some sweeps above: compare the commits). On the H200 they show ping-pong off costing far less at
# d = 128 than the older sweep above does; which of the defaults since took over what the turns hid is not
# measured yet.
# A variant that wins by a clear margin says which lever matters on that workload. A sweep was taken at the
# commit it names, and the kernel may have changed since: check that
# commit against the kernel you are reading before drawing conclusions.
#
# ## Predictions against the measurements
#
# Two *seeds*, optimisation plans written before any of this code (001: a double-buffered async-copy plan;
# 003: a WGMMA roadmap), state the speeds they expected step by step. `cudabook.attention.trajectory` maps each
# step to our nearest rung and sets those figures beside what the records measured, d = 128 without causal
# masking. The seeds' figures are claims, not measurements, and the mapping is by how tiles reach shared
# memory, so read each pairing with its difference: seed 003 computes on wgmma at every step (its steps 1 and 2
# sit at our scalar 03); seed 001's phase 2 keeps scalar arithmetic (it sits at our 04, which also moved to
# tensor cores); seed 003 states its targets in FP16 at d = 64 and 2K tokens (the table says "at d=64"); and
# seed 003's step after TMA is thread-block clusters, not warp specialization, so rung 06 is only its nearest
# position.

# %%
records = [rec for rec in results.load_all() if any(k.startswith("attention ") for k in rec["workloads"])]
record = next((rec for rec in records if any("06_warp_specialized" in w.get("stages", {})
                                              for w in rec["workloads"].values())), records[0] if records else None)
try:
    from cudabook.attention import trajectory
except ImportError as e:
    print(f"The plot module is missing (cudabook.attention.trajectory: {e}); nothing to plot yet.")
else:
    if record is None:
        print("No attention record in results/ to plot.")
    else:
        rows = trajectory.table(record, d=128, causal=False)
        if isinstance(rows, str):
            print(rows)
        else:                                              # [{"rung", "measured", "001", "003"}]
            keys = list(rows[0]) if rows else []
            print(f"{record['gpu']}, d=128, not causal; TFLOP/s\n" + " | ".join(keys))
            for row in rows:
                print(" | ".join("–" if row[k] in (None, "") else str(row[k]) for k in keys))
        fig = trajectory.figure(record, d=128, causal=False)
        try:
            from IPython.display import display
            display(fig)
        except ImportError:
            print("(IPython is not installed here: the figure is not shown)")
        plt.close(fig)

# %% [markdown]
# ## Exercises
#
# The sweeps below run at the benchmark's first size, d = 128 (two consumers by default).
#
# 1. **Ping-pong off.** `pingpong=False` drops the named barriers: the consumers issue whenever they are
#    ready. Predict first, with the schematic above (what does the tensor-core lane look like when both issue
#    at once?), then measure. *Hint:* the overlap inside each warpgroup stays; only the turn-taking goes. If
#    the two finish about the same: which of the two overlaps was doing the work?
# 2. **A third stage.** `stages=3` lets the producer run one more tile ahead in both rings (d = 64 has three
#    already). When does that help? *Hint:* it helps only if a consumer ever waits on a "full" barrier.
#    Compare a tile's bytes (2 x bkv x d bytes for K, the same for V) with the time of its products, and
#    remember that shared memory now holds three K and three V tiles
#    (`s06.smem_bytes(s06.config(128, False, stages=3))`).
# 3. **Why does `consumers=1` lose?** Predict before you measure. *Hint:* with one consumer there is no
#    ping-pong, each K/V tile is shared by 64 query rows instead of 128 (192 at d = 64), so more loads per FLOP,
#    and the only thing left under the softmax is that consumer's own P V. Draw it:
#    `draw(plt.gca(), schedule_06(consumers=1), "one consumer")`, and again with `product=PRODUCT / 2` (d = 64).
#
# Without an H100 or H200 there is nothing to time: the sweeps say so.

# %%
attention.sweep("06_warp_specialized", "pingpong", [True, False])
attention.sweep("06_warp_specialized", "stages", [2, 3])
attention.sweep("06_warp_specialized", "consumers", [1, 2])
if "overlap" in s06.PARAMS:            # the same kernel without the overlap inside a warpgroup
    attention.sweep("06_warp_specialized", "overlap", [True, False])

# %% [markdown]
# ## Across problem sizes
#
# The ladder above is one size. Across the sequence length N (B = 4, H = 16), d = 128 and 64, causal and not,
# recorded on a GPU with `tools/sweep_sizes.py`: rungs 04 to 06 and every SDPA backend, each point checked
# against the reference. At small N a head has few query blocks: 64 heads x N / BQ work tiles (BQ = 128 at
# d = 128, 192 at d = 64) for 132 SMs, and the fixed costs of a tile (Q's load, the pipeline filling, the
# epilogue) weigh more. The record below may predate the persistent grid, which hides part of those costs
# (its header says which settings it ran). Compare where rung 06 and the fastest backend part, and where they
# meet.

# %%
from cudabook import sizes

sizes.show("attention")

# %% [markdown]
# Back: [05 · TMA and wgmma](05_wgmma_tma.ipynb). The GEMM track's version of this split:
# [GEMM 06](../gemm/06_warp_specialized.ipynb). All the tracks: [the map](../00_tracks.ipynb).
