"""Two seeds' predicted trajectories against the ladder we measured: one plot, one table.

    PREDICTIONS                                      each seed step that names a figure, mapped to our nearest rung
    measured(record, d=128, causal=False)            -> [(rung, TFLOP/s)], correct rows only, in ladder order
    sdpa_best(record, d=128, causal=False)           -> (backend, TFLOP/s) of the fastest correct SDPA, or None
    predicted(entry, record=None, d=128, causal=False, predictions=PREDICTIONS)
                                                     -> ((low, high) TFLOP/s, how it was obtained), or None
    figure(record, d=128, causal=False)              -> a matplotlib Figure (no pyplot), log TFLOP/s per rung
    table(record, d=128, causal=False)               -> [{"rung", "measured", "001", "003"}] for a lesson to print

The seeds are optimisation plans written before any code (/work/shared/seeds/001_*.txt, a double-buffered
async-copy plan; 003_*.txt, a WGMMA roadmap). Their figures are claims, not measurements: this module only
transcribes them, so that a lesson can set them beside what the rungs did. A record is a results/<gpu>.json
(cudabook.results.load_all()); its attention workloads are picked by d and causal.

Every figure a seed states is kept as the seed states it: a TFLOP/s range, a speed-up range over one of its
own earlier steps, or both. Where a step has only a speed-up, it becomes TFLOP/s by multiplying the base step's
range, and that base is the seed's own stated figure if it has one, else our measured TFLOP/s at the rung the
base step maps to; the seed's label then says so ("001 (x-factors anchored on our measured 03_tiled)").
"""
from __future__ import annotations

import math

# One entry per seed step that names a figure.
#   seed     "001" or "003"
#   step     the seed's step, shortly
#   rung     our nearest rung (why: the comment above each seed's entries)
#   status   "claimed" (the seed says it was achieved) or "predicted" (a target)
#   tflops   (low, high) TFLOP/s as the seed states it, or None
#   speedup  (low, high) times faster than the seed's step `over`, as stated, or None
#   over     the step (of the same seed) the speed-up is over, or None
#   d        the head dimension the seed attaches to the figure, where it names one
#   quote    the seed's line (whitespace squeezed, markdown and emoji dropped, its garbled "×" restored)
#
# Seed 001 compares two phases of one kernel. Phase 1 is scalar arithmetic over K/V tiles held once in shared
# memory (65 KB, one buffer): that is our 03_tiled. Phase 2 adds a double-buffered asynchronous copy of the
# K/V tiles (memcpy_async, TMA later) and keeps the arithmetic scalar ("Tensor Cores in Phase 3"). Our rung that
# brings in a double-buffered cp.async K/V ring is 04_mma_cp_async, which also moves to tensor cores: the seed's
# phase 2 is the 03 -> 04 step without the tensor cores, so at 04 our measurement has a head start the seed
# never claimed. Phase 2 states both the TFLOP/s and the speed-up over phase 1 (the two agree: 0.65 x 15-30 is
# 9.75-19.5). Its latency line (420 ms -> 30-60 ms, "7-14x") halves that; only the TFLOP/s are kept here.
#
# Seed 003 computes on WGMMA at every step; what changes from step to step is how tiles reach shared memory,
# which is also what tells our rungs 03 -> 06 apart, so the steps are mapped by that. Steps 1 and 2 load tiles
# synchronously between two barriers, nothing overlapped (the seed: one wgmma, then a loop of them): 03_tiled. Step 3
# double-buffers the tiles with cp.async: 04_mma_cp_async (mma.sync there, wgmma in the seed). Step 4 swaps
# cp.async for TMA: 05_wgmma_tma. Step 5 adds thread-block clusters sharing K tiles through distributed shared
# memory; our ladder has no cluster rung, and its step past 05 is warp specialisation, so 06_warp_specialized
# is only the nearest position, not the same technique. Each step states TFLOP/s and a speed-up over the step
# before; the speed-ups do not all agree with the TFLOP/s (step 3: 3-4 x 10-15 would be 30-60, it says 30-40),
# and the TFLOP/s are what is drawn. Steps 3 to 5 state their targets at d = 64.


def _step(seed, step, rung, status, tflops, quote, speedup=None, over=None, d=None) -> dict:
    """One entry of PREDICTIONS (the fields above; a speed-up, the step it is over and d where the seed states them)."""
    return dict(seed=seed, step=step, rung=rung, status=status, tflops=tflops, speedup=speedup, over=over, d=d,
                quote=quote)


PREDICTIONS = (
    _step("001", "phase 1: scalar, single buffer", "03_tiled", "claimed", (0.65, 0.65),
          "Phase 1 (Baseline) ... Compute: Scalar loops (no Tensor Cores) ... TFLOPS: 0.65"),
    _step("001", "phase 2: async double buffer", "04_mma_cp_async", "predicted", (10.0, 20.0),
          "Goal: 10-20 TFLOPS (15-30× speedup over Phase 1)", speedup=(15.0, 30.0),
          over="phase 1: scalar, single buffer"),
    _step("003", "step 1: single WGMMA", "03_tiled", "claimed", (3.0, 4.0),
          "Starting Point: 3-4 TFLOPS (Step 1 validated)"),
    _step("003", "step 2: WGMMA loop, synchronous loads", "03_tiled", "predicted", (10.0, 15.0),
          "Goal: 10-15 TFLOPS (3-4× Step 1)", speedup=(3.0, 4.0), over="step 1: single WGMMA"),
    _step("003", "step 3: cp.async software pipeline", "04_mma_cp_async", "predicted", (30.0, 40.0),
          "Goal: 30-40 TFLOPS (3-4× Step 2)", speedup=(3.0, 4.0), over="step 2: WGMMA loop, synchronous loads",
          d=64),
    _step("003", "step 4: TMA", "05_wgmma_tma", "predicted", (45.0, 55.0),
          "Goal: 45-55 TFLOPS (~1.3-1.5× Step 3)", speedup=(1.3, 1.5), over="step 3: cp.async software pipeline",
          d=64),
    _step("003", "step 5: thread-block clusters", "06_warp_specialized", "predicted", (55.0, 65.0),
          "Goal: 55-65 TFLOPS (~1.15-1.25× Step 4)", speedup=(1.15, 1.25), over="step 4: TMA", d=64),
)
SEEDS = ("001", "003")
SEED_TITLES = {"001": "001 async double-buffer plan", "003": "003 WGMMA roadmap"}
_COLORS = {"001": "#DD8452", "003": "#55A868"}


# ------------------------------------------------------------------------------------ the record

def workload(record, d=128, causal=False) -> tuple[str, dict]:
    """(name, workload) of the record's attention workload with this d and causal flag. Where several sizes
    match, the benchmark's own size (B=4 H=16 N=4096) wins, else the first."""
    from . import benchmark
    found = [(k, w) for k, w in record.get("workloads", {}).items()
             if (w.get("track") or k.split()[0]) == "attention"
             and w.get("size", {}).get("d") == d and bool(w.get("size", {}).get("causal")) == bool(causal)]
    if not found:
        raise KeyError(f"{record.get('gpu', 'this record')} has no attention workload with d={d} causal={causal}")
    standard = benchmark.workload_name(**dict(benchmark._SIZE, d=d, causal=causal))
    return next(((k, w) for k, w in found if k == standard), found[0])


def _usable(row) -> bool:
    return isinstance(row, dict) and isinstance(row.get("TFLOPs"), (int, float)) and row.get("correct") is True


def measured(record, d=128, causal=False) -> list[tuple[str, float]]:
    """(rung, TFLOP/s) for every rung of the ladder the record has a correct, timed row for, in ladder order.
    Rows skipped, failed, wrong or without TFLOP/s are left out."""
    from . import STAGES
    _, w = workload(record, d, causal)
    stages = w.get("stages", {})
    order = list(STAGES) + sorted(k for k in stages if k not in STAGES)
    return [(k, float(stages[k]["TFLOPs"])) for k in order if k in stages and _usable(stages[k])]


def sdpa_best(record, d=128, causal=False) -> tuple[str, float] | None:
    """(backend, TFLOP/s) of the fastest SDPA backend whose output was right in that workload, or None."""
    _, w = workload(record, d, causal)
    rows = {k: v for k, v in w.get("peers", {}).items() if k.startswith("sdpa_") and _usable(v)}
    if not rows:
        return None
    name = max(rows, key=lambda k: rows[k]["TFLOPs"])
    return name, float(rows[name]["TFLOPs"])


# ------------------------------------------------------------------------------------ the seeds' figures

def predicted(entry, record=None, d=128, causal=False, predictions=PREDICTIONS, _seen=()):
    """((low, high) TFLOP/s, how) for one entry, or None when it cannot be had.

    how is "stated" (the seed's own TFLOP/s), "x-factor on the seed's <step>" (a speed-up times the seed's
    figure for its base step) or "x-factor on our measured <rung>" (a speed-up times our TFLOP/s at the rung the
    base step maps to: the seed gave no figure for its base)."""
    if entry.get("tflops"):
        return tuple(entry["tflops"]), "stated"
    if not entry.get("speedup") or not entry.get("over") or entry["step"] in _seen:
        return None
    lo, hi = entry["speedup"]
    base = next((p for p in predictions if p["seed"] == entry["seed"] and p["step"] == entry["over"]), None)
    if base is None:
        return None
    if base.get("tflops") or base.get("speedup"):
        got = predicted(base, record, d, causal, predictions, _seen + (entry["step"],))
        if got is None:
            return None
        (blo, bhi), how = got
        origin = f"the seed's {base['step']}" if how == "stated" else how.split(" on ", 1)[1]
        return (blo * lo, bhi * hi), f"x-factor on {origin}"
    if record is None:
        return None
    ours = dict(measured(record, d, causal)).get(base["rung"])
    if ours is None:
        return None
    return (ours * lo, ours * hi), f"x-factor on our measured {base['rung']}"


def seed_label(seed, record=None, d=128, causal=False, predictions=PREDICTIONS) -> str:
    """The seed's legend entry: says where speed-ups were anchored on our measurements, and the seed's d where
    it differs from the workload's."""
    anchors, ds = [], set()
    for p in predictions:
        if p["seed"] != seed:
            continue
        got = predicted(p, record, d, causal, predictions)
        if got and "our measured" in got[1]:
            rung = got[1].rsplit(" ", 1)[1]
            if rung not in anchors:
                anchors.append(rung)
        if p.get("d") and p["d"] != d:
            ds.add(p["d"])
    notes = [f"x-factors anchored on our measured {', '.join(r[:2] for r in anchors)}"] if anchors else []
    notes += [f"seed's figures at d={x}" for x in sorted(ds)]
    return SEED_TITLES.get(seed, seed) + (f" ({'; '.join(notes)})" if notes else "")


def _fmt(x) -> str:
    return f"{x:,.0f}" if x >= 10 else f"{x:.2g}"


def _range(lo, hi) -> str:
    return _fmt(lo) if lo == hi else f"{_fmt(lo)}–{_fmt(hi)}"


# ------------------------------------------------------------------------------------ the plot and the table

def figure(record, d=128, causal=False, predictions=PREDICTIONS):
    """Our measured TFLOP/s per rung (a line, values written), each seed's predicted range at the rung its step
    maps to (a shaded bar; a hollow marker for what the seed says it already reached), a dotted line through
    each seed's steps, and the fastest correct SDPA backend of the same workload (dashed). Log TFLOP/s.
    Artists carry gids: "measured", "sdpa", "seed <seed> <step>" (bars and markers), "seed <seed> trajectory"."""
    from matplotlib.figure import Figure

    from . import STAGES
    wname, _ = workload(record, d, causal)
    rungs = list(STAGES)
    ours = [(r, v) for r, v in measured(record, d, causal) if r in rungs]
    x_of = {r: i for i, r in enumerate(rungs)}

    fig = Figure(figsize=(10, 5.2))
    ax = fig.add_subplot()
    ax.set_yscale("log")
    values = [v for _, v in ours]

    width, offsets = 0.22, {s: (i - (len(SEEDS) - 1) / 2) * 0.26 for i, s in enumerate(SEEDS)}
    claim_label = "hollow: what a seed says it already reached"
    for seed in SEEDS:
        color, label = _COLORS.get(seed, "gray"), seed_label(seed, record, d, causal, predictions)
        path, labelled = [], False
        for p in predictions:
            if p["seed"] != seed or p["rung"] not in x_of:
                continue
            got = predicted(p, record, d, causal, predictions)
            if got is None:
                continue
            (lo, hi), _how = got
            x = x_of[p["rung"]] + offsets.get(seed, 0.0)
            mid = math.sqrt(lo * hi)
            path.append((x, mid))
            values += [lo, hi]
            if p["status"] == "claimed":
                art = ax.errorbar([x], [mid], yerr=[[mid - lo], [hi - mid]], fmt="D", mfc="white", color=color,
                                  ms=6, capsize=3, zorder=3, label=claim_label)
                claim_label = None
                art[0].set_gid(f"seed {seed} {p['step']}")
            else:
                bar = ax.bar([x], [max(hi - lo, lo * 0.02)], bottom=[lo], width=width, color=color, alpha=0.35,
                             edgecolor=color, label=None if labelled else label, zorder=2)
                bar.patches[0].set_gid(f"seed {seed} {p['step']}")
                labelled = True
            ax.annotate(_range(lo, hi), (x + width / 2, hi), xytext=(2, 0), textcoords="offset points",
                        fontsize=7, color=color, va="bottom")
        if path:
            (line,) = ax.plot([x for x, _ in path], [y for _, y in path], ls=":", color=color, lw=1,
                              label=None if labelled else label)
            line.set_gid(f"seed {seed} trajectory")

    if ours:
        (line,) = ax.plot([x_of[r] for r, _ in ours], [v for _, v in ours], marker="o", color="#4C72B0", lw=2,
                          label="measured (this record)", zorder=4)
        line.set_gid("measured")
        for r, v in ours:
            ax.annotate(_fmt(v), (x_of[r], v), xytext=(-4, 6), textcoords="offset points", ha="right",
                        fontsize=8, color="#4C72B0", fontweight="bold")

    best = sdpa_best(record, d, causal)
    if best:
        line = ax.axhline(best[1], color="black", ls="--", lw=1,
                          label=f"fastest SDPA measured ({best[0]}, {best[1]:,.0f} TFLOP/s)")
        line.set_gid("sdpa")
        values.append(best[1])

    if values:
        ax.set_ylim(min(values) / 2, max(values) * 2.5)
    ax.set_xticks(range(len(rungs)))
    ax.set_xticklabels(rungs, rotation=20, fontsize=8)
    ax.set_xlim(-0.6, len(rungs) - 0.4)
    ax.set_ylabel("TFLOP/s (log)")
    ax.set_title(f"{record.get('gpu', '?')}: {wname}\nseeds' predicted trajectories against the measured ladder",
                 fontsize=9)
    ax.grid(axis="y", which="major", alpha=0.3)
    ax.legend(fontsize=7, loc="upper left")
    fig.tight_layout()
    return fig


def table(record, d=128, causal=False, predictions=PREDICTIONS) -> list[dict]:
    """One row per rung of the ladder: {"rung", "measured" (TFLOP/s or None), "001", "003"}, a seed's cell being
    its figures for that rung as text ("10–20 (phase 2: async double buffer)"; "claimed" where the seed says it
    was reached; "x-factor on ..." where a speed-up was converted), or "" where it names none."""
    from . import STAGES
    ours = dict(measured(record, d, causal))
    rows = []
    for rung in STAGES:
        row = {"rung": rung, "measured": ours.get(rung)}
        for seed in SEEDS:
            cells = []
            for p in predictions:
                if p["seed"] != seed or p["rung"] != rung:
                    continue
                got = predicted(p, record, d, causal, predictions)
                if got is None:
                    continue
                (lo, hi), how = got
                notes = [p["step"]] + (["claimed"] if p["status"] == "claimed" else []) \
                    + ([how] if how != "stated" else []) \
                    + ([f"at d={p['d']}"] if p.get("d") and p["d"] != d else [])
                cells.append(f"{_range(lo, hi)} ({'; '.join(notes)})")
            row[seed] = "; ".join(cells)
        rows.append(row)
    return rows
