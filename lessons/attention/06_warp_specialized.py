# %% [markdown]
# # Attention 06 · Warp specialization: a producer, two consumers taking turns at the tensor cores
#
# Rung 05 put both products on `wgmma` and the copies on TMA, and still every warpgroup does one thing at a
# time: wait for K, issue S = Q Kᵀ, **wait**, softmax, issue O += P V, **wait**, `__syncthreads`, refill. This
# rung keeps rung 05's tensor maps, wgmma shapes and online softmax, and rearranges the block so that nobody
# waits for what it does not need yet:
#
# ```
#   warpgroup 0, the producer (one thread; setmaxnreg.dec 24):
#     Q once, K_0, then for t = 1, 2, ...: K_t, V_{t-1}
#     into two rings (K and V), each slot with a "full" and an "empty" mbarrier
#   warpgroups 1 and 2, the consumers (64 query rows each; setmaxnreg.inc 240), iteration t:
#     wait full K_t, full V_{t-1}; wait for my turn (bar.sync)
#     issue S_t = Q K_tᵀ; rescale O by α_{t-1}   <- while S_t runs
#     issue O += P_{t-1} V_{t-1}; your turn (bar.arrive)
#     wait<1>  (S_t is in)            release K_t
#     softmax of S_t -> α_t           <- meant to run while P_{t-1} V_{t-1} is on the tensor cores
#     wait<0>  (P V is in)            release V_{t-1}
#     pack P_t = bf16(S_t)
# ```
#
# The kernel is `cudabook/attention/kernels/warp_specialized.cu` (its header comment is the summary above), on
# the same Hopper pieces as rung 05 (`kit/include/hopper.cuh`, `attention/kernels/attention.cuh`). The GEMM
# track built the producer/consumer split first: [GEMM 06](../gemm/06_warp_specialized.ipynb) explains the
# mbarrier phase bit and what `setmaxnreg` asks of a kernel; this lesson does not repeat them. PTX ISA:
# [bar.sync / bar.arrive](https://docs.nvidia.com/cuda/parallel-thread-execution/#parallel-synchronization-and-communication-instructions-bar-barrier),
# [setmaxnreg](https://docs.nvidia.com/cuda/parallel-thread-execution/#miscellaneous-instructions-setmaxnreg),
# [wgmma.wait_group](https://docs.nvidia.com/cuda/parallel-thread-execution/#asynchronous-warpgroup-level-matrix-instructions-wgmma-wait-group).
# It needs sm_90a (H100, H200); everything below except the timings and the correctness check runs without one.

# %%
import cudabook
print(cudabook.where())

import re

import matplotlib.pyplot as plt
from cudabook import attention, lesson, nvrtc, results
from cudabook.attention import s05_wgmma_tma as s05
from cudabook.attention import s06_warp_specialized as s06

source = s06.source()


def show(start, end):
    """Print the kernel's lines from the one containing `start` to the next containing `end`."""
    if start in source and end in source[source.index(start):]:
        lesson.show_region(source, start=start, end=end)
    else:
        print(f"(the kernel has changed: no {start!r} ... {end!r} in it; read {s06.SOURCE.name} itself)")

# %% [markdown]
# ## What rung 05 waits for
#
# Inside one pass of rung 05 a warpgroup cannot start its softmax before S is back, and cannot issue P V
# before the softmax is done; the two warpgroups of a block run the same steps at the same moments, and
# `__syncthreads` keeps them there. So while both do their softmax (exponentials on the special-function
# units, maxima, sums: lesson 05 estimated the exponentials alone at half the products' time at d = 128), the
# tensor cores have nothing to do.
#
# Rung 06 takes both waits off the tensor cores' path, in two ways: the two consumers take turns, so one's
# softmax runs under the other's products (ping-pong); and a consumer issues the next S **together with** the
# previous tile's P V, meaning to do its softmax while P V runs (overlap inside a warpgroup; whether the
# compiler keeps it that way is measured below, in part (a): on the builds tried, it did not). The picture below is a **schematic**: a hand-made schedule with
# made-up durations (a product of one consumer = 1, a softmax = 1.4, rescale and pack = 0.3), played out by
# the rules of each kernel. It is not a measurement. Change the durations and see what moves.

# %%
PRODUCT, SOFTMAX, FIX, TICK = 1.0, 1.4, 0.3, 0.12     # schematic durations, not measured
ROWS = {"consumer 0": 3, "consumer 1": 2, "tensor cores": 1, "producer": 0}
STYLE = {"S": "C0", "PV": "C2", "softmax": "C1", "fix": "C4", "wait": "0.85", "TMA K": "C5", "TMA V": "C6"}


def schedule_05(tiles=3):
    """Rung 05: both warpgroups issue S, wait, softmax, rescale, issue P V, wait, __syncthreads, refill."""
    bars, t = [], 0.0
    for i in range(tiles):
        for c in (0, 1):                                   # the tensor cores take both warpgroups' S, then both P V
            bars += [("tensor cores", t + c * PRODUCT, PRODUCT, "S", f"S{i}" + "'" * c),
                     (f"consumer {c}", t, 2 * PRODUCT, "wait", ""),
                     (f"consumer {c}", t + 2 * PRODUCT, SOFTMAX, "softmax", ""),
                     (f"consumer {c}", t + 2 * PRODUCT + SOFTMAX, FIX, "fix", "")]
        t += 2 * PRODUCT + SOFTMAX + FIX
        for c in (0, 1):
            bars += [("tensor cores", t + c * PRODUCT, PRODUCT, "PV", f"PV{i}" + "'" * c),
                     (f"consumer {c}", t, 2 * PRODUCT, "wait", "")]
        t += 2 * PRODUCT
        bars.append(("producer", t, TICK, "TMA K", ""))       # thread 0 refills the slot, after __syncthreads
        t += TICK
    return bars


def schedule_06(tiles=3, stages=2):
    """Rung 06 as the source asks: consumer c issues S_t and P_{t-1} V_{t-1} on its turn, softmax under P V; the
    producer refills a slot as soon as both consumers have released it."""
    bars, tc, ready, issued, done = [], 0.0, [0.0, 0.0], {}, {}
    for t in range(tiles + 1):                             # t == tiles: the last P V, no turn-taking
        for c in (0, 1):
            who, start = f"consumer {c}", ready[c]
            if t < tiles:                                  # my turn: the other has issued its previous group
                start = max(start, issued.get((1, t - 1) if c == 0 else (0, t), 0.0))
            issued[(c, t)] = start
            if start > ready[c]:
                bars.append((who, ready[c], start - ready[c], "wait", ""))
            for kind, i in ([("S", t)] if t < tiles else []) + ([("PV", t - 1)] if t > 0 else []):
                begin = max(tc, start)
                tc = begin + PRODUCT
                bars.append(("tensor cores", begin, PRODUCT, kind, f"{kind}{i}" + "'" * c))
                done[(kind, c, i)] = tc
            if t == tiles:
                bars.append((who, start, done[("PV", c, t - 1)] - start, "wait", ""))
                continue
            s_in = done[("S", c, t)]
            bars += [(who, start, s_in - start, "wait", ""), (who, s_in, SOFTMAX, "softmax", "")]
            end = max(s_in + SOFTMAX, done.get(("PV", c, t - 1), 0.0))
            if end > s_in + SOFTMAX:
                bars.append((who, s_in + SOFTMAX, end - s_in - SOFTMAX, "wait", ""))
            bars.append((who, end, FIX, "fix", ""))
            ready[c] = end + FIX
    issue = 0.0                                            # the producer: K_0, K_1, V_0, K_2, V_1, ... in order
    for kind, i in [("S", 0)] + [x for t in range(1, tiles) for x in (("S", t), ("PV", t - 1))] + [("PV", tiles - 1)]:
        if i >= stages:                                    # the slot's previous tile must be released by both
            issue = max(issue, done[(kind, 0, i - stages)], done[(kind, 1, i - stages)])
        name = "TMA K" if kind == "S" else "TMA V"
        bars.append(("producer", issue, TICK, name, ""))
        issue += TICK
    return bars


def draw(ax, bars, title):                                 # a label ending in ' is consumer 1's product: hatched
    for row, start, length, kind, label in bars:
        ax.broken_barh([(start, length)], (ROWS[row], 0.8), facecolor=STYLE[kind], linewidth=0,
                       edgecolor="white", hatch="//" if "'" in label else None)
        if label:
            ax.text(start + length / 2, ROWS[row] + 0.4, label.strip("'"), ha="center", va="center", fontsize=7)
    ax.set_yticks([y + 0.4 for y in ROWS.values()], list(ROWS))
    ax.set_title(title, fontsize=9)
    ax.set_ylim(0, 4.6)


fig, axes = plt.subplots(2, 1, figsize=(11, 5.5), sharex=True)
plans = {"05": schedule_05(), "06": schedule_06()}
draw(axes[0], plans["05"], "05: two warpgroups in step (no producer: thread 0 refills after __syncthreads)")
draw(axes[1], plans["06"], "06: a producer warpgroup, two consumers in ping-pong (as the source asks)")
for kind, color in STYLE.items():
    axes[0].plot([], [], color=color, lw=6, label=kind)
axes[0].legend(fontsize=7, ncol=7, loc="upper right", bbox_to_anchor=(1, 1.35))
axes[1].set_xlabel("time (schematic: hand-picked durations, not a measurement); hatched: consumer 1's products")
plt.tight_layout()
plt.show()
for name, bars in plans.items():
    span = max(s + n for _, s, n, _, _ in bars)
    busy = sum(n for row, _, n, _, _ in bars if row == "tensor cores")
    print(f"schematic {name}: 3 tiles in {span:.1f} time units, tensor cores busy {busy / span:.0%} of it")

# %% [markdown]
# Read the 06 lanes from the top: consumer 0 issues S0; consumer 1 may issue only once consumer 0 has (its
# turn); from tile 1 on each issue is a pair, S_t then PV_{t-1}, and the orange softmax of S_t sits under
# that consumer's own PV_{t-1} and under the other consumer's products. In the schematic the tensor cores are
# idle only while the pipeline fills and drains. On the real GPU the softmax and the products have other
# lengths, and whether the tensor cores stay fed is what the timings at the end answer.
#
# ## Roles and registers
#
# Registers are handed out at launch, the same to every thread: 64 K registers for 3 warpgroups is 170 a
# thread, rounded down to a multiple of 8. The producer's one busy thread needs a couple of dozen; a consumer
# holds O (d/2 floats), S (bkv/2), P (bkv/4 registers of bf16 pairs) and the softmax state. `setmaxnreg.dec` returns the
# producer's surplus to the block's pool and `setmaxnreg.inc` takes it for the consumers, so the split must
# fit what the block was given at launch:

# %%
regs = {name: int(re.search(rf"#define {name} (\d+)", source).group(1)) for name in ("PRODUCER_REGS", "CONSUMER_REGS")}
prod, cons = regs["PRODUCER_REGS"], regs["CONSUMER_REGS"]
threads = 128 * (1 + 2)
at_launch = 65536 // threads // 8 * 8
print(f"at launch: 65,536 / {threads} threads = {65536 / threads:.1f} -> {at_launch} registers a thread, "
      f"{threads * at_launch:,} for the block")
print(f"after setmaxnreg: 128 x {prod} + 256 x {cons} = {128 * prod + 256 * cons:,} <= "
      f"{threads * at_launch:,} (what the block got at launch)")
print(f"  the producer frees 128 x ({at_launch} - {prod}) = {128 * (at_launch - prod):,}, "
      f"the consumers take 256 x ({cons} - {at_launch}) = {256 * (cons - at_launch):,}")
cubin = s06.compile_cubin(d=128)
print("\nresource usage (registers: the cap at entry, before setmaxnreg):", nvrtc.resource_usage(cubin)[s06.KERNEL])
sass = re.findall(r"/\*([0-9a-f]{4,})\*/\s*(.*?)\s*;", nvrtc.sass(cubin, s06.KERNEL))   # (address, instruction)
for i, (_, ins) in enumerate(sass):
    if "USETMAXREG" in ins:
        for addr, ins2 in sass[i - 1:i + 3]:
            print(f"  /*{addr}*/ {ins2}")
        print()

# %% [markdown]
# In SASS the producer's decrease is `USETMAXREG.DEALLOC.CTAPOOL 0x18` (24), the consumers' increase
# `USETMAXREG.TRY_ALLOC.CTAPOOL UP0, 0xf0` (240): a *try*, whose success lands in the predicate `UP0`; a
# branch after it, whose target is the address just before the `TRY_ALLOC` (compare the addresses), tries
# again until the producer's `DEALLOC` has put the registers in the block's pool (`CTAPOOL`). Ask for more than
# that pool can ever hold and the consumers spin there for good. The kernel's `static_assert` checks the sum
# against 64 K; the tighter bound is what the block got at launch (the lines above): raise `PRODUCER_REGS` to
# 32 and the sum still passes the assert, but the producer frees too little for two consumers at 240.
#
# ## Two rings, released at different times
#
# The producer loads in the order the consumers use the tiles: K_0, then K_t before V_{t-1}. K and V have
# **separate** rings, each slot with a "full" mbarrier (the producer's `expect_tx` plus TMA's bytes) and an
# "empty" one (one arrival per consumer warpgroup):

# %%
show("setmaxnreg_dec<PRODUCER_REGS>", "load(&map_v, ring.v, ring.full_v, ring.empty_v, tiles - 1);")

# %% [markdown]
# K_t is read only by S_t: a consumer releases its slot right after `wait<1>`. V_{t-1} is read by
# P_{t-1} V_{t-1}, which is still running during the softmax: its slot is released only after `wait<0>`, a
# softmax later. With one slot holding K and V together, K's half would sit idle for that softmax before the
# producer could refill it; apart, the next K lands earlier. The parities (GEMM 06 explains the rule) for two
# slots and five tiles:

# %%
STAGES, TILES = 2, 5
order = [("K", 0)] + [x for t in range(1, TILES) for x in (("K", t), ("V", t - 1))] + [("V", TILES - 1)]
print(" load   slot  producer waits empty (parity)   consumer waits full (parity)   released after")
for kind, t in order:
    slot, lap = t % STAGES, t // STAGES
    released = ("the wait<0> of tile 0 (S_0 alone)" if (kind, t) == ("K", 0) else
                f"wait<1> of iteration {t}" if kind == "K" else
                "never: the last P V, after the loop, needs no refill" if t == TILES - 1 else
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
# Measured while the rung was built (H100, one run of `tools/sweep_params.py --track attention`'s kind, not a
# record), the two together gained about 5 % at d = 128; the records below measure the rung as it is now.
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
# ## Ping-pong: two named barriers
#
# With two consumers, the tensor cores could still take both consumers' products at once and leave both
# softmaxes to run side by side. Ping-pong orders them: consumer c waits at named barrier 1 + c before
# issuing, and arrives at the other's barrier (2 − c) once its wgmmas are issued.

# %%
show("auto my_turn", "consumer 0 goes first")
print()
for line in nvrtc.sass_lines(cubin, r"BAR\.(SYNC|ARV)", kernel=s06.KERNEL):
    print("  ", line)

# %% [markdown]
# In SASS they are `BAR.SYNC ..., 0x100` and `BAR.ARV ..., 0x100` (0x100 = 256 threads, the barrier's id in a
# register; the `BAR.SYNC 0x0` is the `__syncthreads` after the mbarriers' set-up).
#
# `bar.sync id, 256` waits until 256 threads have arrived at barrier `id`: its own warpgroup (128) and the
# other's `bar.arrive id, 256` (128, without waiting). So consumer 0 passes barrier 1 only after consumer 1 has
# arrived there, and the other way round. Who goes first: consumer 1 arrives at barrier 1 once before its
# loop, so consumer 0's first `bar.sync` completes at once, and consumer 1 then waits at barrier 2 for consumer
# 0's first hand-over.
#
# The counts must balance. Every `bar.sync` of one consumer needs exactly one `bar.arrive` of the other, and a
# block's `tiles` is the same for both. Consumer 1 starts with one extra arrival (the head start), so it skips
# its hand-over after its last issue. Otherwise barrier 1 would end the block holding 128 arrivals that no
# `bar.sync` ever completes, and in a kernel that went on to another tile (a persistent kernel), that
# leftover would let consumer 0 through its next `bar.sync` without waiting for its turn. Count them:

# %%
def handovers(tiles):
    arrive, sync = {1: 1, 2: 0}, {1: 0, 2: 0}          # consumer 1's head start at barrier 1
    for t in range(tiles):
        sync[1] += 1                                       # consumer 0: my_turn
        arrive[2] += 1                                     # consumer 0: your_turn
        sync[2] += 1                                       # consumer 1: my_turn
        arrive[1] += t != tiles - 1                        # consumer 1: your_turn, except after its last issue
    return arrive, sync


for tiles in (1, 2, 64):
    arrive, sync = handovers(tiles)
    print(f"tiles={tiles:3d}: barrier 1: {sync[1]} bar.sync (consumer 0) vs {arrive[1]} bar.arrive (consumer 1); "
          f"barrier 2: {sync[2]} bar.sync (consumer 1) vs {arrive[2]} bar.arrive (consumer 0)")

# %% [markdown]
# (The last P V, after the loop, takes no turn: by then each consumer issues one group and waits for it.)
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
# That was necessary, not enough: on those builds the exponentials still land after the second wait in the
# unmasked loop. Check what this build got: for each `DEPBAR 0x1`, count the exponentials
# (`MUFU.EX2`, one a score plus the two α) and all instructions up to the next `DEPBAR 0x0`, and the
# exponentials after it:

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
# overlap the source asks for is not in the machine code. (In the H100 sweep recorded in results/sweeps/, with
# bkv = 128, `overlap=False` costs 2–3 % at d = 128 and about 1 % at d = 64 without the causal mask, and is a
# few percent faster at d = 64 causal: what the overlap buys is small, and comes from the rescale and the issue
# order, not the softmax under P V. Putting it there for real is the next lever of this rung.) The `wgmma_keep`
# statements cannot prevent that: they bind the front end (NVVM, which writes the PTX), not ptxas. What
# does bind ptxas is data: an instruction cannot move above the wait that produces its inputs.
#
# ### (b) The register budget
#
# `setmaxnreg.inc 240` allows a consumer thread 240 registers, but ptxas decides how many the consumer code
# may use, and it need not take them all. At d = 128 with 128-key tiles a consumer holds O (64 floats), S (64),
# P (32 registers of bf16 pairs) and the softmax state. While this rung was written, ptxas first held that code
# well under 240 and spilled instead (and d = 128 had to use 64-key tiles: the sweep below shows what they cost);
# the kernel's comment above its role branch records what changed it on those builds (NVRTC 13.0 and 13.5): with
# the producer's branch first in the source, the consumer code spilled at about 180 registers; with the
# consumers' branch first, it did not. A measurement of one toolchain, not a rule. Compile both tile sizes at d = 128 and see
# what this build does: the resources, the highest register the consumer code names, the spill instructions
# and what ptxas said.

# %%
def consumer_registers(cubin):
    """The highest register named from the consumers' USETMAXREG.TRY_ALLOC on (up to a DEALLOC after it, if any),
    and the spill instructions (STL/LDL) in the whole kernel."""
    sass = nvrtc.sass_lines(cubin, r".", kernel=s06.KERNEL)
    a = next(i for i, x in enumerate(sass) if "USETMAXREG.TRY_ALLOC" in x)
    b = next((i for i in range(a, len(sass)) if "USETMAXREG.DEALLOC" in sass[i]), len(sass))
    top = max(int(r) for x in sass[a:b] for r in re.findall(r"\bR(\d+)\b", x))
    return top, sum(bool(re.match(r"(@\S+ )?(STL|LDL)\b", x)) for x in sass)


for bkv in (128, 64):
    cub = s06.compile_cubin(d=128, bkv=bkv)
    use = nvrtc.resource_usage(cub)[s06.KERNEL]
    top, spills = consumer_registers(cub)
    spilled = bool(use["stack"] or use["local"] or spills)
    print(f"d=128 bkv={bkv}: {use}; highest consumer register R{top}; {spills} STL/LDL")
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
# above as a rule for choosing the tile: where 128-key tiles spill at d = 128, take `bkv=64`; where they do
# not, the larger tile halves the turns and barriers per key. The last lines print what the defaults are and
# whether they spill. At d = 64 a consumer's O is half as large (32 floats): less pressure either way.
#
# ## Causal: stop at the diagonal, mask only there
#
# A causal block of BQ = 128 query rows starting at q0 needs keys up to q0 + 127 only: `tiles` ends there (the
# producer never loads the tiles above the diagonal), and only tiles from `masked` on cross it (or reach past
# Nk), so only those run the masked copy of the loop. Within each head, causal blocks are launched longest
# first (`qb = gridDim.x − 1 − blockIdx.x`; x, the query block, varies fastest, so across heads the order is a
# sawtooth), and the last heads' short blocks fill the gaps at the end.

# %%
show("const int qb =", "const int tiles")
show("const int masked", "const int masked")
show("int t = 1;", "for (; t < tiles; ++t)")
for d in s06.HEAD_DIMS:
    cfg = s06.config(d, True)
    bq, bkv, n = 64 * cfg["CONSUMERS"], cfg["BKV"], 4096
    rows = []
    for qb in range(n // bq):
        q0 = qb * bq
        tiles = -(-min(n, q0 + bq) // bkv)
        masked = min(n // bkv, (q0 + 1) // bkv)
        rows.append((qb, tiles, tiles - min(masked, tiles)))
    loaded, with_mask = sum(r[1] for r in rows), sum(r[2] for r in rows)
    print(f"d={d:3d} bkv={bkv} BQ={bq}, N={n}: blocks load {loaded} of {len(rows) * (n // bkv)} tiles "
          f"({loaded / (len(rows) * (n // bkv)):.1%}); {with_mask} of them masked ({with_mask / loaded:.1%}); "
          f"blocks (qb: tiles, masked): {rows[0][0]}: {rows[0][1:]}, {rows[1][0]}: {rows[1][1:]}, ..., "
          f"{rows[-1][0]}: {rows[-1][1:]}")

# %% [markdown]
# A block masks only the one or two tiles its diagonal crosses (BQ / bkv of them, at least one), out of up to
# N / bkv: the copy of the loop that does the masking runs on a small share of the tiles (the printed
# percentage), so whatever part (a) found for it weighs little. Without causal, only a ragged last tile (Nk
# not a multiple of bkv) is masked.
#
# ## Right?
#
# On an H100 or H200, the checker's ragged cases against the float64 reference, with the defaults and the
# variants the exercises use. The CPU emulator does not run `wgmma`: without a Hopper GPU this cell says so.

# %%
why = attention.unavailable("06_warp_specialized")
if why:
    print("Not run here:", why)
else:
    for name, kw in attention.cases():
        q, k, v, causal = attention.random_problem(**kw)
        for params in ({}, {"pingpong": False}, {"stages": 3}, {"consumers": 1}, {"overlap": False}):
            if not set(params) <= set(s06.PARAMS):
                continue
            verdict = attention.judge(attention.run("06_warp_specialized", q, k, v, causal=causal, **params),
                                      q, k, v, causal)
            print(f"{name:40s} {str(params or 'defaults'):22s} {verdict.message.splitlines()[0]}")

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
if not recorded_06:
    print("\nNo record of rung 06 in results/ yet. To measure it, on an H100 or H200: "
          "`python -m cudabook.results attention` (or `make bench TRACKS=attention`), which writes "
          "results/<gpu>.json; this cell then shows it.")

# %% [markdown]
# The sweep of this rung's parameters (`tools/sweep_params.py --track attention` on a Hopper GPU writes
# `results/sweeps/<gpu>_attention.json`): each variant checked and timed beside rung 05 and the SDPA backends
# of the same run. A ladder is honest only if it says where a rung does not win: the cell compares rung 06's
# defaults with rung 05 on each workload and names the fastest variant.

# %%
import json

sweeps = sorted((results.RESULTS / "sweeps").glob("*_attention.json"))
if not sweeps:
    print("No attention sweep in results/sweeps/ yet. On an H100 or H200: "
          "`python tools/sweep_params.py --track attention`.")


def suggests(params):
    """What a variant that beats the defaults suggests, in a few words."""
    what = {"bkv": lambda v: f"bkv={v}: " + ("larger tiles, half the turns, waits and barriers per key" if v == 128
                                              else "smaller tiles, fewer registers a consumer"),
            "stages": lambda v: f"stages={v}: a deeper ring, so the consumers had been waiting for tiles",
            "pingpong": lambda v: f"pingpong={v}: " + ("the turn-taking costs more than it hides" if not v
                                                       else "taking turns"),
            "overlap": lambda v: f"overlap={v}: " + ("the overlap inside a warpgroup costs more than it hides"
                                                     if not v else "the overlap"),
            "consumers": lambda v: f"consumers={v}"}
    return "; ".join(what.get(k, lambda v: f"{k}={v}")(v) for k, v in params.items())


for path in sweeps:
    sweep = json.loads(path.read_text())
    print(f"{path.name}: {sweep.get('gpu')}, commit {sweep.get('commit')}")
    by_workload = {}
    for row in sweep["rows"]:
        by_workload.setdefault(row["workload"], []).append(row)
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
# Where rung 06 loses to rung 05, the lesson's own evidence points at suspects. Part (a): a copy of the loop with
# no exponential between its two waits has no overlap inside the warpgroup, and then rung 06 pays for a
# producer warpgroup and the hand-overs and gets little back. Part (b): the tile size, which decides how many
# turns, waits and barriers each key costs. A variant that wins by a clear margin says which lever matters on
# that workload. A sweep was taken at the commit it names, and the kernel may have changed since: check that
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
# 1. **Ping-pong off.** `pingpong=False` drops the named barriers: both consumers issue whenever they are
#    ready. Predict first, with the schematic above (what does the tensor-core lane look like when both issue
#    at once?), then measure. *Hint:* the overlap inside each warpgroup stays; only the turn-taking goes. If
#    the two finish about the same: which of the two overlaps was doing the work?
# 2. **A third stage.** `stages=3` lets the producer run one more tile ahead in both rings. When does that
#    help? *Hint:* it helps only if a consumer ever waits on a "full" barrier. Compare a tile's bytes (2 x bkv
#    x d bytes for K, the same for V) with the time of its products, and remember that shared memory now
#    holds three K and three V tiles (`s06.smem_bytes(s06.config(128, False, stages=3))`).
# 3. **Why does `consumers=1` lose?** Predict before you measure. *Hint:* with one consumer there is no
#    ping-pong, each K/V tile is shared by 64 query rows instead of 128 (twice the loads per FLOP), and the
#    only thing left under the softmax is that consumer's own P V. Adapt `schedule_06` to one consumer and
#    draw it.
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
# against the reference. At small N a head has few query blocks: 64 heads x N / 128 blocks for 132 SMs, and the
# fixed costs of a block (Q's load, the pipeline filling, the epilogue) weigh more. Compare where rung 06 and the
# fastest backend part, and where they meet.

# %%
from cudabook import sizes

sizes.show("attention")

# %% [markdown]
# Back: [05 · TMA and wgmma](05_wgmma_tma.ipynb). The GEMM track's version of this split:
# [GEMM 06](../gemm/06_warp_specialized.ipynb). All the tracks: [the map](../00_tracks.ipynb).
