"""Speed across problem sizes, for each track's fast rungs and its peers (Triton's perf_report, for our ladders).

For each track: the last three stages this GPU can run, leaving out any whose single launch at the sweep's
largest size would be slow (more than --slow-ms: the naive rungs), or those --stages names; then, at every size
of the track's plan (its bench.SIZE_PLAN, read by cudabook.sizes), the track's benchmark as it is: its bench module's prepare, context
and peers (first where PEERS_FIRST), and for each stage: poison, launch, judge against the float64 reference,
time (cudabook.results._timing), the benchmark's figures (bench.metrics). A (size, stage) that raises is
recorded as an error and the sweep goes on; a stage whose next launch in a panel would be slower than --slow-ms
(its time here scaled by the work) is skipped from there on, saying so. Writes results/sizes/<gpu>_<track>.json
after every size (see cudabook/sizes.py for the record), and prints a short table.

    python tools/sweep_sizes.py                        # every track (a GPU)
    python tools/sweep_sizes.py --track gemm
    python tools/sweep_sizes.py --track attention --stages 05_wgmma_tma 06_warp_specialized --values 1024 4096
    python tools/sweep_sizes.py --list                 # the sizes and stages of each track (any machine)
"""
from __future__ import annotations

import argparse
import gc
import os
import pathlib
import sys
import time

os.environ.setdefault("MPLBACKEND", "Agg")
ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from cudabook import device, results  # noqa: E402  (decides simulator or GPU before numba is imported)
from cudabook import sizes as sweeps  # noqa: E402
from cudabook import track as tracks  # noqa: E402

COUNT = 3          # fast rungs a track sweeps by default
SLOW_MS = 50.0     # a launch slower than this at a size is not swept there
REPEATS = 10


def work(track, size) -> float:
    """What a launch's time grows with (FLOPs, or the bytes and samples it moves), to scale a time to a size."""
    name = tracks.get(track).NAME
    s = size
    if name == "attention":
        from cudabook.attention import benchmark
        return float(benchmark.flops(s["B"], s["H"], s["N"], s["d"], s.get("causal", False)))
    if name == "gemm":
        return 2.0 * s["M"] * s["N"] * s["K"]
    if name == "resample":
        return float(s["B"] * (s["S"] + s["T"]) * (4 + 2 * s["D"]))
    if name == "msda":
        return float(s["N"] * s["Lq"] * s["M"] * len(s["levels"]) * s["P"] * s["D"])
    raise ValueError(f"no work measure for the {name} track")


def _benchmark_records():
    """The benchmark records in results/*.json (a file that does not load is skipped)."""
    out = []
    for path in sorted(results.RESULTS.glob("*.json")):
        try:
            out.append(results.load(path))
        except Exception as e:  # a broken record only loses its estimates
            print(f"(not using {path.name} for estimates: {type(e).__name__}: {e})")
    return out


_RECORDS = []


def recorded_us(track, stage, size, card=None):
    """(µs, card) of one launch of `stage` at `size`, from the benchmark records: each recorded time scaled by
    work(size) / work(its size), the slowest of a card's workloads; this card's record where there is one, else
    the slowest card's. None where no record times the stage."""
    t = tracks.get(track)
    if not _RECORDS:
        _RECORDS.append(_benchmark_records())
    per_card = {}
    for r in _RECORDS[0]:
        for wname, w in r["workloads"].items():
            row = w.get("stages", {}).get(stage, {})
            if results.track_of(wname, w).NAME != t.NAME or "median_us" not in row or not w.get("size"):
                continue
            try:
                us = row["median_us"] * work(t, size) / work(t, w["size"])
            except (KeyError, TypeError, ZeroDivisionError):
                continue
            slug = results.slug(r["gpu"])
            per_card[slug] = max(per_card.get(slug, 0.0), us)
    if not per_card:
        return None
    if card in per_card:
        return per_card[card], card
    slug = max(per_card, key=per_card.get)
    return per_card[slug], slug


def choose(track, sizes, *, runnable=True, card=None, count=COUNT, slow_ms=SLOW_MS):
    """(stages, left out): the last `count` stages (of those this machine can run, with runnable=True; of all,
    with runnable=False) whose launch at the largest size is not slow by the records (a stage no record times
    is slow if it is a naive rung); left out: [(stage, why)], the slow ones passed over."""
    t = tracks.get(track)
    largest = max(sizes, key=lambda s: work(t, s))
    chosen, left = [], []
    for stage in reversed(t.STAGES):
        if len(chosen) == count:
            break
        if runnable and t.unavailable(stage):
            continue
        est = recorded_us(t, stage, largest, card)
        if est and slow_ms and est[0] > slow_ms * 1e3:
            left.append((stage, f"about {_ms(est[0])} a launch at {t.bench.workload_name(**largest)} "
                                f"(the {est[1]} record, scaled)"))
        elif est is None and "naive" in stage:
            left.append((stage, "a naive rung, and no record times it"))
        else:
            chosen.append(stage)
    return chosen[::-1], left


def _ms(us) -> str:
    return f"{us / 1e6:.2f} s" if us >= 1e6 else f"{us / 1e3:.1f} ms" if us >= 1e3 else f"{us:.0f} µs"


def _error(e) -> str:
    return f"{type(e).__name__}: {(str(e).splitlines() or [''])[0][:200]}"


def _free_memory():
    """Give the GPU memory of the size just measured back (Numba's pending frees, PyTorch's cache)."""
    gc.collect()
    try:
        from numba import cuda
        cuda.current_context().deallocations.clear()
    except Exception:
        pass
    try:
        import torch
    except ImportError:
        return
    try:
        if torch.cuda.is_available():
            torch.cuda.empty_cache()
    except Exception:
        pass


def _stage_names(t, names):
    """Stage names as the track spells them ("06" -> "06_warp_specialized"); ValueError for an unknown one."""
    out = []
    for n in names:
        t.stage(n)                                          # the track's own message for an unknown name
        out.append(next(s for s in t.STAGES if s == n or (n.isdigit() and int(s[:2]) == int(n))))
    return out


def measure_stage(t, stage, args, problem, ctx, repeats):
    """One (size, stage): poison, launch, judge, time, the benchmark's figures; an exception becomes `error`."""
    spec = t.bench
    module = t.stage(stage)
    try:
        problem.poison()
        module.launch(problem)
        ok = tracks.judge_of(t, stage)(problem.result(), *args).ok
        us = results._timing(lambda: module.launch(problem), repeats)
        figures = spec.metrics(problem, us, ctx)
    except Exception as e:  # one (size, stage) that fails is recorded, not fatal
        return {"error": _error(e)}
    return {"median_us": round(us, 2), **figures, "correct": bool(ok),
            "params": results.json_plain(getattr(module, "PARAMS", {}))}


def _peers(spec, args, problem, ctx, repeats, progress):
    try:
        return spec.peers(args, problem, ctx, repeats=repeats, progress=lambda *a: None)
    except Exception as e:  # peers that fail are recorded, not fatal
        progress(f"  peers: ERROR {_error(e)}")
        return {"peers": {"error": _error(e)}}


def _line(name, row, spec) -> str:
    if "median_us" not in row:
        return f"  {name:22s} {row.get('error') and 'ERROR ' + row['error'] or row.get('skipped', '')}"
    figs = "  ".join(f"{head} {fmt.format(row[k])}" for head, k, fmt in spec.COLUMNS[1:] if k in row)
    return f"  {name:22s} {row['median_us']:>11,.1f} µs  {figs}  {'correct' if row.get('correct') else 'WRONG'}"


def run_track(track, *, stages=None, values=None, peers=True, repeats=REPEATS, slow_ms=SLOW_MS, count=COUNT,
              out=None, progress=print) -> tuple[dict, pathlib.Path]:
    """Sweep one track on this GPU; (the record, the file it is in)."""
    t = tracks.get(track)
    spec = t.bench
    p = sweeps.plan(t, values)
    card = results.slug(device.gpu().name)
    if stages:
        chosen = _stage_names(t, stages)
    else:
        chosen, left = choose(t, p["sizes"], card=card, count=count, slow_ms=slow_ms)
        for stage, why in left:
            progress(f"{t.NAME}: leaving out {stage}: {why}")
    progress(f"{t.NAME}: stages {', '.join(chosen) or '(none)'}; {len(p['sizes'])} sizes; peers "
             f"{'on' if peers else 'off'}")
    pedigree = results._pedigree()
    record = {"schema": 1, "kind": sweeps.KIND, "track": t.NAME, "gpu": pedigree["machine"]["gpu"], **pedigree,
              "x": p["x"], "panels": p["panels"], "fixed": p["fixed"], "plot_key": spec.PLOT_KEY,
              "plot_label": spec.PLOT_LABEL, "stages": chosen, "peers": [], "repeats": repeats, "slow_ms": slow_ms,
              "complete": False, "seconds": 0.0, "sizes": [], "rows": []}
    too_slow = {}                                           # (panel, stage) -> why it is skipped from here on
    began = time.perf_counter()
    path = None
    for i, size in enumerate(p["sizes"]):
        started = time.perf_counter()
        wname = spec.workload_name(**size)
        progress(f"== {wname}")
        panel = sweeps.panel_key(size, p["x"])
        following = next((s for s in p["sizes"][i + 1:] if sweeps.panel_key(s, p["x"]) == panel), None)
        try:
            args, problem = spec.prepare(size)
            ctx = spec.context(problem, lambda *a: None)
        except Exception as e:  # a size that cannot be set up is recorded, not fatal
            progress(f"  ERROR {_error(e)}")
            record["sizes"].append({"size": size, "workload": wname, "error": _error(e)})
            args = problem = ctx = None
            _free_memory()
            continue
        peer_rows = {}
        first = getattr(spec, "PEERS_FIRST", False)
        if peers and first:
            peer_rows = _peers(spec, args, problem, ctx, repeats, progress)
        rows = {}
        for stage in chosen:
            why = t.unavailable(stage) or too_slow.get((panel, stage))
            if why:
                rows[stage] = {"skipped": why}
            else:
                rows[stage] = measure_stage(t, stage, args, problem, ctx, repeats)
            progress(_line(stage, rows[stage], spec))
            us = rows[stage].get("median_us")
            if us and following is not None and slow_ms:
                guess = us * work(t, following) / work(t, size)
                if guess > slow_ms * 1e3:
                    too_slow[(panel, stage)] = (
                        f"too slow from {spec.workload_name(**following)} on: a launch would take about "
                        f"{_ms(guess)} there ({_ms(us)} at {wname}, scaled by the work), over --slow-ms {slow_ms:g}")
        if peers and not first:
            peer_rows = _peers(spec, args, problem, ctx, repeats, progress)
        progress(f"  {spec.summary(ctx)}")
        for name, row in peer_rows.items():
            progress(_line(name, row, spec))
            if name not in record["peers"]:
                record["peers"].append(name)
        record["rows"] += [{"size": size, "stage": k, "peer": False, **results.json_plain(v)} for k, v in rows.items()]
        record["rows"] += [{"size": size, "stage": k, "peer": True, **results.json_plain(v)} for k, v in peer_rows.items()]
        record["sizes"].append({"size": size, "workload": wname, "context": results.json_plain(results._plain(ctx)),
                                "seconds": round(time.perf_counter() - started, 1)})
        del args, problem, ctx
        _free_memory()
        record["seconds"] = round(time.perf_counter() - began, 1)
        path = sweeps.save(record, out)                      # after every size: a run cut short keeps its sizes
    record["complete"] = True
    record["seconds"] = round(time.perf_counter() - began, 1)
    path = sweeps.save(record, out)
    return record, path


def list_plans(names, *, values=None, count=COUNT, slow_ms=SLOW_MS, stages=None):
    """Print each track's sizes and the stages the sweep would run, chosen as if every stage were available."""
    for name in names:
        t = tracks.get(name)
        p = sweeps.plan(t, values)
        if stages:
            chosen, left = _stage_names(t, stages), []
        else:
            chosen, left = choose(t, p["sizes"], runnable=False, count=count, slow_ms=slow_ms)
        panels = (f"; a panel per {' x '.join(p['panels'])}" if p["panels"] else "")
        fixed = ", ".join(f"{k}={v}" for k, v in p["fixed"].items())
        print(f"{t.NAME}: {len(p['sizes'])} sizes, {' = '.join(p['x'])} in {', '.join(map(str, p['values']))}"
              f"{panels}; fixed {fixed or 'nothing'}")
        print(f"  stages (as if every stage were available): {', '.join(chosen) or '(none)'}")
        for stage, why in left:
            print(f"  left out: {stage}: {why}")
        print(f"  peers: the {t.NAME} benchmark's ({'before' if getattr(t.bench, 'PEERS_FIRST', False) else 'after'}"
              f" the stages)")
        for size in p["sizes"]:
            print(f"    {t.bench.workload_name(**size)}")
    return 0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--track", action="append", choices=tracks.TRACKS,
                    help="a track to sweep (repeatable; default: every track)")
    ap.add_argument("--stages", nargs="+", help="the stages to sweep, by name or number (one --track only); "
                                                "default: the last three this GPU runs that are not slow")
    ap.add_argument("--values", nargs="+", type=int, help="the x values (N, M=N=K, D, Lq) instead of the plan's "
                                                          "(one --track only)")
    ap.add_argument("--no-peers", action="store_true", help="leave the peers out (no PyTorch time)")
    ap.add_argument("--repeats", type=int, default=REPEATS, help=f"timed batches per measurement ({REPEATS})")
    ap.add_argument("--slow-ms", type=float, default=SLOW_MS,
                    help=f"skip a stage at sizes where one launch would take longer (ms; {SLOW_MS:g}; 0: never)")
    ap.add_argument("--count", type=int, default=COUNT, help=f"how many fast rungs by default ({COUNT})")
    ap.add_argument("--out", help="the folder to write to (default results/sizes/)")
    ap.add_argument("--list", action="store_true", help="print the sizes and stages of each track, run nothing")
    a = ap.parse_args(argv)
    names = a.track or list(tracks.TRACKS)
    if (a.stages or a.values) and len(names) != 1:
        ap.error("--stages and --values need exactly one --track")
    if a.list:
        return list_plans(names, values=a.values, count=a.count, slow_ms=a.slow_ms, stages=a.stages)
    if device.gpu() is None:
        print(f"needs a GPU: {device.why_no_gpu()}. `python tools/sweep_sizes.py --list` shows what it would run.")
        return 2
    for name in names:
        record, path = run_track(name, stages=a.stages, values=a.values, peers=not a.no_peers, repeats=a.repeats,
                                 slow_ms=a.slow_ms, count=a.count, out=a.out)
        print(f"\n{name} on {record['gpu']} ({record['seconds']:.0f} s), {record['plot_label']}:")
        print(sweeps.format_table(sweeps.table(record)))
        print("\nµs:")
        print(sweeps.format_table(sweeps.table(record, "median_us")))
        print(f"\nwrote {path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
