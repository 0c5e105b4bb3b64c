"""The pieces every lesson ends with: the ladder so far, and an experiment the learner can change.

With a GPU both measure, at the benchmark size, in this process. In the simulator there is no clock: the
ladder shows the records in results/ (measured on real GPUs, with their pedigree), and a sweep still
verifies that every setting is correct, on small inputs.
"""
from __future__ import annotations

import numpy as np

from . import SIMULATOR, bench, check, results
from . import resample


def ladder_so_far(upto: str, *, peers=False):
    """Measure (GPU) or show the recorded (simulator) ladder up to and including stage `upto`."""
    import matplotlib.pyplot as plt
    if not SIMULATOR and not resample.unavailable(upto):
        stages = [s for s in resample.STAGES if s <= upto]
        record = results.run_ladder(stages, peers=peers, repeats=15, progress=lambda *a: None)
        print(results.table(record))
        results.plot(record, upto=upto, peers=peers)
        plt.show()
        return record
    records = results.load_all()
    if not records:
        print("Nothing measured here, and no records in results/ yet.")
        return None
    fig, axes = plt.subplots(1, len(records), figsize=(7 * len(records), 3.2), squeeze=False)
    for ax, r in zip(axes[0], records):
        results.plot(r, upto=upto, ax=ax, peers=peers)
    why = resample.unavailable(upto) or "this machine has no GPU"
    fig.suptitle(f"recorded in results/ ({why.split(';')[0]})", fontsize=9)
    fig.tight_layout()
    plt.show()
    return records


def sweep(stage: str, param: str, values, *, fixed=None, size=None):
    """Time `stage` for each value of one launch parameter (GPU), or check each one is correct (simulator)."""
    import matplotlib.pyplot as plt
    module = resample.stage(stage)
    fixed = fixed or {}
    why = resample.unavailable(stage)
    if why:
        print(f"Nothing to sweep on this machine: {why}")
        return None
    if SIMULATOR:
        print(f"No GPU, so no timings: checking that every {param} gives correct results instead.")
        for v in values:
            verdict = check.check_launch(module.launch, 1, 20, 12, 9, **{**fixed, param: v})
            print(f"  {param}={v!r:>6}: {verdict.message.splitlines()[0]}")
        return None
    size = dict(size or bench.BENCH_SIZE)
    st, sf, tt = resample.random_problem(**size, rng=np.random.default_rng())
    ref, scale = resample.inputs.reference_with_scale(st, sf, tt)
    p = resample.upload(st, sf, tt)
    copy = bench.copy_GBps(p.min_bytes)
    rows = []
    for v in values:
        kw = {**fixed, param: v}
        p.poison()
        module.launch(p, **kw)
        ok = check.compare(p.result(), ref, scale).ok
        m = bench.measure_stage(module.launch, p, repeats=15, **kw)
        rows.append((v, m["median_us"], 100 * m["GBps"] / copy, ok))
        print(f"  {param}={v!r:>6}: {m['median_us']:9.1f} µs  {100 * m['GBps'] / copy:5.1f} % of copy"
              f"  {'correct' if ok else 'WRONG'}")
    fig, ax = plt.subplots(figsize=(6, 3))
    ax.plot([str(r[0]) for r in rows], [r[2] for r in rows], "o-")
    ax.set_xlabel(param)
    ax.set_ylabel("% of copy bandwidth")
    ax.set_title(f"{stage}: {param} sweep", fontsize=9)
    ax.set_ylim(0, 105)
    plt.show()
    return rows


def show_region(source: str, *, context: int = 0, start: str | None = None, end: str | None = None):
    """Print part of a CUDA C++ kernel, numbered: from the first line containing `start` to the next line
    containing `end` (by default the lab region, between `// >>> lab` and `// <<< lab`), plus `context` lines
    either side. The lab markers themselves are not printed."""
    lines = source.splitlines()
    start, end = start or "// >>> lab", end or "// <<< lab"
    begin = next((i for i, line in enumerate(lines) if start in line), None)
    stop = next((i for i, line in enumerate(lines) if begin is not None and i >= begin and end in line), None)
    if begin is None or stop is None:
        begin, stop = 0, len(lines) - 1
    first = max(begin - context, 0)
    for n in range(first, min(stop + 1 + context, len(lines))):
        if "// >>> lab" in lines[n] or "// <<< lab" in lines[n]:
            continue
        print(f"{n + 1:4d}  {lines[n]}")
