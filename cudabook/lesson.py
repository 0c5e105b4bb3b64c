"""The pieces every lesson ends with: the ladder so far, and an experiment the learner can change.

With a GPU both measure, at the track's first benchmark size, in this process. In the simulator there is no
clock: the ladder shows the records in results/ (measured on real GPUs, with their pedigree), and a sweep still
verifies that every setting is correct, on small inputs. Both take the track (`track="gemm"`); the resampling
lessons, the first track, leave it out.
"""
from __future__ import annotations

from . import SIMULATOR, results
from . import track as tracks


class Measured(dict):
    """The record ladder_so_far just measured (a plain dict underneath), shown in a notebook as one line, not
    as its few thousand characters: the table and the plot already say what it holds."""

    def __repr__(self):
        return f"<measured ladder: {', '.join(self.get('workloads', {})) or 'no workloads'}>"

    def _repr_pretty_(self, p, cycle):
        p.text(repr(self))


class Recorded(list):
    """The [(record, workload name)] pairs ladder_so_far drew from results/ (a plain list underneath), shown in
    a notebook as one line."""

    def __repr__(self):
        names = "; ".join(f"{r.get('gpu', '?')} · {k}" for r, k in self)
        return f"<recorded ladders: {names}>"

    def _repr_pretty_(self, p, cycle):
        p.text(repr(self))


def ladder_so_far(upto: str, *, peers=False, track="resample", size=None):
    """Measure (GPU) or show the recorded (simulator) ladder up to and including stage `upto`.

    Returns what it showed, for a later cell to use: the fresh record (a dict) with a GPU, or the
    [(record, workload)] pairs read from results/ without one, or None. Either prints as one short line, so a
    cell that ends with this call shows the plot, not the record."""
    import matplotlib.pyplot as plt
    t = tracks.get(track)
    if not SIMULATOR and not t.unavailable(upto):
        stages = [s for s in t.STAGES if s <= upto and not t.unavailable(s)]
        size = size or t.bench.WORKLOADS[0]
        record = results.record_of({t.bench.workload_name(**size): results.measure_workload(
            t, size, stages=stages, peers=peers, repeats=15, progress=lambda *a: None)})
        print(results.table(record))
        results.plot(record, upto=upto, peers=peers)
        plt.show()
        return Measured(record)
    recorded = [(r, k) for r in results.load_all() for k, _ in results._workloads(r, t.NAME)]
    if not recorded:
        print(f"Nothing measured here, and no {t.NAME} records in results/ yet.")
        return None
    fig, axes = plt.subplots(1, len(recorded), figsize=(7 * len(recorded), 3.2), squeeze=False)
    for ax, (r, k) in zip(axes[0], recorded):
        results.plot(r, upto=upto, ax=ax, peers=peers, workload=k)
    why = t.unavailable(upto) or "this machine has no GPU"
    fig.suptitle(f"recorded in results/ ({why.split(';')[0]})", fontsize=9)
    fig.tight_layout()
    plt.show()
    return Recorded(recorded)


def sweep(stage: str, param: str, values, *, fixed=None, size=None, track="resample"):
    """Time `stage` for each value of one launch parameter (GPU), or check each one is correct (simulator)."""
    import matplotlib.pyplot as plt
    t = tracks.get(track)
    module = t.stage(stage)
    fixed = fixed or {}
    why = t.unavailable(stage)
    if why:
        print(f"Nothing to sweep on this machine: {why}")
        return None
    if SIMULATOR:
        print(f"No GPU, so no timings: checking that every {param} gives correct results instead.")
        name, inputs, label = t.grading_cases(stage)[0]
        for v in values:
            verdict = tracks.check_case(t, module.launch, inputs, **{**fixed, param: v})
            print(f"  {param}={v!r:>6}: {verdict.message.splitlines()[0]}")
        return None
    spec = t.bench
    args, problem = spec.prepare(size or spec.WORKLOADS[0])
    ctx = spec.context(problem, progress=lambda *a: None)
    if getattr(spec, "PEERS_FIRST", False):
        spec.peers(args, problem, ctx, repeats=15, progress=lambda *a: None)
    rows = []
    for v in values:
        kw = {**fixed, param: v}
        problem.poison()
        module.launch(problem, **kw)
        ok = t.judge(problem.result(), *args).ok
        us = results._timing(lambda: module.launch(problem, **kw), 15)
        m = spec.metrics(problem, us, ctx)
        rows.append((v, us, m.get(spec.PLOT_KEY), ok))
        figures = "  ".join(f"{k} {m[k]}" for _, k, _ in spec.COLUMNS[1:] if k in m)
        print(f"  {param}={v!r:>6}: {us:9.1f} µs  " + figures
              + f"  {'correct' if ok else 'WRONG'}")
    fig, ax = plt.subplots(figsize=(6, 3))
    ax.plot([str(r[0]) for r in rows], [r[2] for r in rows], "o-")
    ax.set_xlabel(param)
    ax.set_ylabel(spec.PLOT_LABEL)
    ax.set_title(f"{stage}: {param} sweep", fontsize=9)
    ax.set_ylim(0, max(105, *(r[2] or 0 for r in rows)))
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
