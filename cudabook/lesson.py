"""The pieces every lesson ends with: the ladder so far, and an experiment the learner can change.

With a GPU both measure, at the track's first benchmark size, in this process, saying each step as it starts;
the ladder measures only what the lesson teaches (its rung, the rung before, the peers it asks for) and takes the
other rungs from this card's record in results/, marked so (full=True or CUDABOOK_FULL_LADDER=1: all measured
now). Inputs are drawn from this machine's seed, so their float64 reference is made once on the machine and kept
on disk (cudabook.refmemo). In the simulator there is no
clock: the ladder shows the records in results/ (measured on real GPUs, with their pedigree), and a sweep still
verifies that every setting is correct, on small inputs, and shows the sweeps recorded on GPUs
(results/sweeps/*_lessons.json, written by tools/record_sweeps.py), each with its card and commit. Both take the
track (`track="gemm"`; a call without one is an error that lists the tracks); lessons call the track's own,
bound to it: `gemm.ladder_so_far("02_smem_tiles")`, `gemm.sweep("02_smem_tiles", "tile", [8, 16, 32])`.
"""
from __future__ import annotations

from . import SIMULATOR, check, results
from . import track as tracks
from .progress import Progress  # noqa: F401  (lessons' and tools' name for it)


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


FULL_ENV = "CUDABOOK_FULL_LADDER"      # =1: every lesson measures its whole ladder, as full=True does

_WORKLOAD: dict = {}      # the workload this process measured last: {"key", "args", "problem", "ctx", "peers",
#                           "peers_done" (None, the names measured, or "all"), "seed"}


def _draw(spec, size):
    """(spec.prepare(size) with its random numbers drawn from this machine's seed, the seed): a prepare that takes
    no rng draws its own, and then there is no seed (None), and the reference is not kept on disk."""
    import inspect

    import numpy as np

    from . import refmemo
    try:
        takes_rng = "rng" in inspect.signature(spec.prepare).parameters
    except (TypeError, ValueError):
        takes_rng = False
    if not takes_rng:
        return spec.prepare(size), None
    seed = refmemo.machine_seed()
    return spec.prepare(size, rng=np.random.default_rng(seed)), seed


def _lesson_peers(spec, full):
    """The peers a lesson measures now (None: all): the track's LESSON_PEERS, all of them for a full ladder."""
    names = getattr(spec, "LESSON_PEERS", None)
    return None if full or names is None else tuple(names)


def workload(t, size, *, peers=False, progress=None, full=False) -> dict:
    """A track's workload of this size for the lesson's measurements, prepared once per process: inputs drawn
    from this machine's seed (refmemo.machine_seed: the float64 reference of inputs so drawn is made once on this
    machine and kept on disk), uploaded, the ceilings measured (spec.context), and, where the track's figures
    need them first (PEERS_FIRST) and `peers`, the peers measured (those a lesson measures, LESSON_PEERS, unless
    `full`). A later cell of the same notebook (a sweep after the ladder) reuses them, so a notebook pays once
    for what is slow at full size: drawing the inputs, the reference, the ceilings, and PyTorch's runs. One
    workload is kept at a time, to hold GPU memory to one. progress(line) hears each step (default: silent)."""
    from . import refmemo
    say = progress or (lambda *a: None)
    spec = t.bench
    key = (t.NAME, spec.workload_name(**size))
    if _WORKLOAD.get("key") != key:
        _WORKLOAD.clear()
        say(f"drawing the inputs of {key[1]} …")
        (args, problem), seed = _draw(spec, size)
        if seed is not None:
            refmemo.drawn(args, {"track": t.NAME, "workload": key[1], "size": results.json_plain(size),
                                 "seed": seed})
        say("measuring the yardstick …")
        _WORKLOAD.update(key=key, args=args, problem=problem, ctx=spec.context(problem, progress=say), peers=None,
                         peers_done=None, seed=seed)
    if peers and getattr(spec, "PEERS_FIRST", False):
        want, done = _lesson_peers(spec, full), _WORKLOAD["peers_done"]
        if done != "all" and (done is None or want is None or not set(want) <= set(done)):
            only = None if want is None else [n for n in want if n not in (done or ())]
            rows = spec.peers(_WORKLOAD["args"], _WORKLOAD["problem"], _WORKLOAD["ctx"], repeats=15, progress=say,
                              **({} if only is None else {"only": tuple(only)}))
            _WORKLOAD["peers"] = {**(_WORKLOAD["peers"] or {}), **rows}
            _WORKLOAD["peers_done"] = "all" if only is None else (*(done or ()), *only)
    return _WORKLOAD


def full_ladder(full=None) -> bool:
    """Measure the whole ladder? `full` when given, else the environment's CUDABOOK_FULL_LADDER (1: yes)."""
    import os
    if full is not None:
        return bool(full)
    return os.environ.get(FULL_ENV, "").strip().lower() not in ("", "0", "no", "false")


def live_stages(stages, upto) -> list:
    """What a lesson measures now: its own rung and the rung before it (of those this machine can run)."""
    i = stages.index(upto)
    return stages[max(0, i - 1):i + 1]


def card_record(wname, gpu):
    """Workload `wname` (with its own commit, date and machine) of this card's record in results/ (the record
    whose gpu is `gpu`), or None, with a line saying why where the records could not be read."""
    try:
        records = results.load_all()
    except results.RecordError as e:
        print(f"(the records in results/ could not be read: {e})")
        return None
    for r in records:
        if r.get("gpu") == gpu and wname in r["workloads"]:
            return results._with_pedigree(r["workloads"][wname], r, wname)
    return None


def _recorded(row, w, gpu):
    return {**row, "recorded": {"gpu": gpu, "commit": w.get("commit"), "date": w.get("date")}}


def merge_recorded(measured, stages, kept, gpu, *, peers=False):
    """The workload `measured` now (some rungs, perhaps some peers) with the rest of `stages` and of the peers
    taken from `kept` (this card's recorded workload, or None), each such row marked `recorded` with the record's
    card, commit and date; a rung the record lacks says so. Rows in the ladder's order, then the peers."""
    rows = {}
    for name in stages:
        if name in measured["stages"]:
            rows[name] = measured["stages"][name]
        elif kept is not None and name in kept["stages"]:
            rows[name] = _recorded(kept["stages"][name], kept, gpu)
        else:
            rows[name] = {"skipped": f"not measured now, and not in {'the' if kept else 'a'} record of this card"}
    peer_rows = dict(measured.get("peers") or {})
    if peers and kept is not None:
        for name, row in kept.get("peers", {}).items():
            if name not in peer_rows:
                peer_rows[name] = _recorded(row, kept, gpu)
    return {**measured, "stages": rows, "peers": peer_rows}


def ladder_so_far(upto: str, *, peers=False, track=None, size=None, full=None, sustained="closest"):
    """Measure (GPU) or show the recorded (simulator) ladder up to and including stage `upto`.

    With a GPU, at workshop pace: the rung `upto` and the rung before it are measured now (and the peers, where
    `peers`: those the track's LESSON_PEERS name), and the other rungs (and peers) come from this card's record
    in results/, marked as recorded, with its commit and date. Without a record for this card, only those two
    rungs. Of the head-to-head pairs, only the one that decides this rung's claim (the peer nearest to it) is
    also run back to back for seconds (sustained="closest"; "none": no pair, where the lesson is not about it);
    the rung before keeps its pairs' interleaved rounds but not their seconds back to back (its own lesson has
    them).
    full=True (or CUDABOOK_FULL_LADDER=1) measures the whole ladder and every peer now (`make bench` does too).
    Every step that takes seconds is said as it starts, and again every few seconds while it lasts.

    Returns what it showed, for a later cell to use: the record (a dict) with a GPU, or the
    [(record, workload)] pairs read from results/ without one, or None. Either prints as one short line, so a
    cell that ends with this call shows the plot, not the record."""
    import matplotlib.pyplot as plt
    t = tracks.get(track)
    if not SIMULATOR and not t.unavailable(upto):
        from . import device, refmemo
        full = full_ladder(full)
        spec = t.bench
        stages = [s for s in t.STAGES if s <= upto and not t.unavailable(s)]
        size = size or spec.WORKLOADS[0]
        wname = spec.workload_name(**size)
        gpu = device.gpu()
        gpu = gpu.name if gpu else "this GPU"
        kept = None if full else card_record(wname, gpu)
        live = stages if full else live_stages(stages, upto)
        if full:
            print(f"Measuring the whole ladder to {upto} now, on {gpu} ({wname}):")
        elif kept is None:
            print(f"No record of {wname} on {gpu} in results/: measuring {' and '.join(live)} only. "
                  "ladder_so_far(..., full=True), or CUDABOOK_FULL_LADDER=1, measures the whole ladder; "
                  "`make bench` records it for this card.")
        else:
            rest = [what for what, some in (("the other rungs", len(live) < len(stages)),
                                            ("the other peers", peers and _lesson_peers(spec, full) is not None))
                    if some]
            print(f"Measuring {' and '.join(live)} now on {gpu}"
                  + (f"; {' and '.join(rest)} from this card's record (‡). full=True, or CUDABOOK_FULL_LADDER=1, "
                     "measures them all." if rest else ":"))
        say = Progress()
        with refmemo.reporting(say), say.heartbeat():
            w = workload(t, size, peers=peers, progress=say, full=full)
            names = _lesson_peers(spec, full)
            measured = results.measure_workload(
                t, size, stages=live, peers=peers, repeats=15, progress=say,
                prepared=(w["args"], w["problem"], w["ctx"], w["peers"]), peer_names=names, sustained=sustained,
                sustained_stages=None if full else (upto,))
        if w.get("seed") is not None:
            measured["seed"] = w["seed"]
        record = results.record_of({wname: merge_recorded(measured, stages, kept, gpu, peers=peers)})
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


SWEEP_ENV = "CUDABOOK_RECORD_SWEEPS"    # names a JSON file: a sweep timed on a GPU is merged into it
RECORD_TOOL = "python tools/record_sweeps.py"


class RecordedSweeps(list):
    """The recorded sweeps sweep() drew from results/sweeps/ (a plain list of their entries underneath), shown
    in a notebook as one line."""

    def __repr__(self):
        names = "; ".join(f"{e.get('gpu', '?')} at {e.get('commit') or '?'}" for e in self)
        return f"<recorded sweeps: {names}>"

    def _repr_pretty_(self, p, cycle):
        p.text(repr(self))


def sweep(stage: str, param: str, values, *, fixed=None, size=None, track=None, live=None):
    """Time `stage` for each value of one launch parameter (GPU), or check each one is correct (simulator).

    With a GPU: a table and a plot of the track's figure per value. At workshop pace, a value this card's record
    (results/sweeps/<gpu>_lessons.json) already holds for the same stage, parameter, fixed settings, size and
    other defaults is shown from it, marked ‡ with its commit and date, and the others are measured now;
    live=True, CUDABOOK_FULL_LADDER=1 or CUDABOOK_RECORD_SWEEPS measures every value now. With
    CUDABOOK_RECORD_SWEEPS naming a JSON file, the sweep is also merged into that file (see save_sweep). Returns
    [(value, µs, figure, correct)]. Without one (or where this machine cannot run the stage): the simulator still
    checks every value for correctness, and the timings recorded on GPUs (results/sweeps/*_lessons.json, written
    by tools/record_sweeps.py) are shown, each labelled with its card and commit. Returns those records, or None."""
    t = tracks.get(track)
    module = t.stage(stage)
    fixed = fixed or {}
    why = t.unavailable(stage)
    if why or SIMULATOR:
        if why:
            print(f"Nothing to sweep on this machine: {why}")
        else:
            print(f"No GPU, so no timings: checking now, in the simulator, that every {param} gives correct "
                  f"results (small inputs).")
            name, inputs, label = t.grading_cases(stage)[0]
            for v in values:
                verdict = check.check_case(t, module.launch, inputs, judge=tracks.judge_of(t, stage),
                                           **{**fixed, param: v})
                print(f"  {param}={v!r:>6}: {verdict.message.splitlines()[0]}")
        return show_recorded_sweep(t, stage, param, fixed)
    import os

    from . import device
    gpu = device.gpu()
    gpu = gpu.name if gpu else "this GPU"
    kept = None
    if not (full_ladder(live) or os.environ.get(SWEEP_ENV)):
        kept = card_sweep(t, stage, param, fixed, size, gpu)
    return _timed_sweep(t, module, stage, param, values, fixed, size, gpu, kept)


def card_sweep(t, stage, param, fixed, size, gpu, folder=None):
    """This card's recorded sweep of (stage, param) with exactly these fixed settings and size, and with the
    stage's other defaults as they are today (results.not_today), or None: the sweep whose rows a lesson may
    show instead of measuring them again."""
    fixed, size = results.json_plain(fixed or {}), results.json_plain(size)
    for e in recorded_sweeps(t, stage, param, fixed, folder=folder):
        if e.get("gpu") != gpu or (e.get("fixed") or {}) != fixed or results.json_plain(e.get("size")) != size:
            continue
        if e.get("defaults") is None or results.not_today(t, stage, e["defaults"], ignore={param, *fixed}):
            continue
        return e
    return None


def _recorded_row(kept, v):
    """The row of value v in the recorded sweep `kept` (None: not recorded, or recorded as an error)."""
    for row in (kept or {}).get("rows", []):
        if row.get("value") == results.json_plain(v) and "error" not in row and "median_us" in row:
            return row
    return None


def _timed_sweep(t, module, stage, param, values, fixed, size, gpu="this GPU", kept=None):
    import os

    import matplotlib.pyplot as plt

    from . import refmemo
    spec = t.bench
    used = size or spec.WORKLOADS[0]
    say = Progress()
    from_record = [_recorded_row(kept, v) for v in values]
    todo = [v for v, row in zip(values, from_record) if row is None]
    if todo:
        with refmemo.reporting(say), say.heartbeat():
            w = workload(t, used, peers=True, progress=say)   # peers first where the figures need their time
        args, problem, ctx = w["args"], w["problem"], w["ctx"]
    where = f"{gpu}, {spec.workload_name(**used)}"
    all_now = len(todo) == len(values)
    if all_now:
        print(f"Measured now on {where}:")
    else:
        when = f"{kept.get('commit') or '?'} ({(kept.get('date') or '?')[:10]})"
        print(f"On {where}: ‡ recorded on this card at {when}"
              + (f"; {', '.join(repr(v) for v in todo)} measured now" if todo else "")
              + f". {t.NAME}.sweep(..., live=True), or CUDABOOK_FULL_LADDER=1, measures every value now.")
    print(_table_header(param, spec))
    rows, out = [], []
    for v, row in zip(values, from_record):
        kw = {**fixed, param: v}
        if row is not None:
            rows.append(row)
            out.append((v, row["median_us"], row.get(spec.PLOT_KEY), bool(row.get("correct"))))
            print(_table_row(param, row, spec) + "  ‡")
            continue
        try:
            problem.poison()
            module.launch(problem, **kw)
            with refmemo.reporting(say):
                ok = tracks.judge_of(t, stage)(problem.result(), *args).ok
            us = results._timing(lambda: module.launch(problem, **kw), 15)
            m = spec.metrics(problem, us, ctx)
        except Exception as e:  # a value that does not fit (too much shared memory, ...) is reported, not fatal
            row = {"value": results.json_plain(v), "error": f"{type(e).__name__}: {(str(e).splitlines() or [''])[0][:200]}"}
            out.append((v, None, None, False))
        else:
            row = {"value": results.json_plain(v), "median_us": round(us, 2),
                   **{k: results.json_plain(x) for k, x in m.items() if isinstance(results.json_plain(x), (int, float, str, bool))},
                   "correct": bool(ok)}
            out.append((v, us, m.get(spec.PLOT_KEY), ok))
        rows.append(row)
        print(_table_row(param, row, spec))
    plot_sweep(stage, param, [(gpu, rows)], spec, f"measured now on {gpu}" if all_now else
               f"on {gpu}, ‡ recorded at {kept.get('commit') or '?'}" + (", the rest measured now" if todo else ""))
    plt.show()
    path = os.environ.get(SWEEP_ENV)
    if path and all("error" in r for r in rows):
        print(f"not recorded in {path}: every value failed")
    elif path:
        entry = {"track": t.NAME, "stage": stage, "param": param, "values": results.json_plain(list(values)),
                 "fixed": results.json_plain(fixed), "size": results.json_plain(size), "workload": spec.workload_name(**used),
                 "size_used": results.json_plain(used), "plot_key": spec.PLOT_KEY, "rows": rows,
                 "defaults": results.json_plain(getattr(module, "PARAMS", {}))}
        try:
            where = save_sweep(path, entry)
            print(f"recorded in {where}")
        except Exception as e:  # the timings were shown; a file that cannot be written is said, not fatal
            print(f"could not record the sweep in {path}: {type(e).__name__}: {e}")
    return out


def sweep_key(entry) -> str:
    """What names a recorded sweep: (track, stage, param, values, fixed, size), as one canonical string."""
    import json
    return json.dumps([entry["track"], entry["stage"], entry["param"], results.json_plain(entry["values"]),
                       results.json_plain(entry.get("fixed") or {}), results.json_plain(entry.get("size"))], sort_keys=True)


def save_sweep(path, entry, pedigree=None):
    """Merge one sweep into the JSON file `path` (created if missing) and return the path.

    The file: {schema, kind, gpu, commit, dirty, source_digest, date, machine (of its latest write), sweeps: [
    {track, stage, param, values, fixed, size, workload, size_used, plot_key, rows: [{value, median_us, the
    track's figures, correct} or {value, error}], defaults (the stage's PARAMS then; older sweeps lack it), gpu,
    commit, dirty, source_digest, stage_digest (the stage's code, profile.records.stage_digest; older sweeps lack
    it), date, machine}]}. A sweep
    with the same key (sweep_key) is replaced in place; every other sweep stays, with its own pedigree. Written
    to a temporary file beside it, then renamed over it: a reader never sees half a file."""
    import json
    import pathlib
    path = pathlib.Path(path).expanduser().resolve()
    pedigree = pedigree or results._pedigree()
    gpu = pedigree.get("machine", {}).get("gpu") or "unknown"
    entry = {**results.json_plain(entry), "gpu": gpu, **{k: pedigree.get(k) for k in
                                             ("commit", "dirty", "source_digest", "date", "machine")}}
    if "track" in entry and "stage" in entry and "stage_digest" not in entry:
        from .profile.records import stage_digest     # the stage's own code: tools/stale_records.py compares it
        entry["stage_digest"] = stage_digest(entry["track"], entry["stage"])
    data = {}
    if path.exists():
        try:
            data = json.loads(path.read_text())
        except json.JSONDecodeError as e:
            raise results.RecordError(f"{path.name}: not valid JSON ({e}); not overwriting it") from None
        if not isinstance(data, dict) or not isinstance(data.get("sweeps", []), list):
            raise results.RecordError(f"{path.name}: not a file of recorded sweeps; not overwriting it")
    sweeps = list(data.get("sweeps", []))
    key = sweep_key(entry)
    for i, old in enumerate(sweeps):
        if sweep_key(old) == key:
            sweeps[i] = entry
            break
    else:
        sweeps.append(entry)
    data = {"schema": 1, "kind": "cudabook lesson sweeps", "gpu": gpu,
            **{k: pedigree.get(k) for k in ("commit", "dirty", "source_digest", "date", "machine")},
            "sweeps": sweeps}
    return results.write_json(path, data)


def recorded_sweeps(track, stage, param, fixed=None, folder=None) -> list[dict]:
    """The recorded sweeps of (track, stage, param) in results/sweeps/*_lessons.json, one per card.

    The values swept may differ from the caller's (a lesson sweeps fewer in the simulator), so they are not
    matched. `fixed` is: a record with the same fixed settings is preferred, else one that fixes the same
    parameters to other values (a lesson may fix a smaller setting in the simulator); then the lesson's own
    size before any other, then the latest. Each entry carries its card (gpu), commit and date."""
    import json
    import pathlib
    t = tracks.get(track)
    fixed = results.json_plain(fixed or {})
    folder = pathlib.Path(folder) if folder is not None else pathlib.Path(results.RESULTS) / "sweeps"
    best = {}
    for path in sorted(folder.glob("*_lessons.json")):
        try:
            data = json.loads(path.read_text())
            sweeps = data.get("sweeps", [])
        except Exception as e:
            print(f"(skipping {path.name}: {type(e).__name__}: {e})")
            continue
        for e in sweeps:
            if not isinstance(e, dict) or (e.get("track"), e.get("stage"), e.get("param")) != (t.NAME, stage, param):
                continue
            theirs = e.get("fixed") or {}
            if theirs == fixed:
                rank = 2
            elif set(theirs) == set(fixed):
                rank = 1
            else:
                continue
            e = {**e, "gpu": e.get("gpu") or data.get("gpu") or "unknown", "file": path.name}
            for k in ("commit", "date", "source_digest"):
                e.setdefault(k, data.get(k))
            score = (rank, e.get("size") is None, e.get("date") or "")
            if e["gpu"] not in best or score > best[e["gpu"]][0]:
                best[e["gpu"]] = (score, e)
    return [e for _, e in best.values()]


def show_recorded_sweep(track, stage, param, fixed=None):
    """Print and plot the sweeps recorded on GPUs (recorded_sweeps); say how to record one if there is none."""
    import matplotlib.pyplot as plt
    t = tracks.get(track)
    found = recorded_sweeps(t, stage, param, fixed)
    if not found:
        print(f"No recorded {param} sweep of {t.NAME} {stage} in results/sweeps/ either: on a GPU, "
              f"`{RECORD_TOOL} --track {t.NAME} --only {stage}` records it (without options, every lesson's "
              f"sweeps) into results/sweeps/<gpu>_lessons.json.")
        return None
    spec = t.bench
    for e in found:
        note = ""
        if (e.get("fixed") or {}) != results.json_plain(fixed or {}):
            note = (f", with {', '.join(f'{k}={v!r}' for k, v in e['fixed'].items())} where this call has "
                    f"{', '.join(f'{k}={v!r}' for k, v in (fixed or {}).items())}")
        print(f"Recorded on {e['gpu']} at {e.get('commit') or '?'} ({(e.get('date') or '?')[:10]}), "
              f"{e.get('workload', '?')}{note}: timings from that run, not measured on this machine.")
        other = results.not_today(t, stage, e.get("defaults"), ignore={param, *(e.get("fixed") or {})})
        if other:
            print(f"  Its other settings were then the stage's defaults, which have changed since: {other}.")
        print(_table_header(param, spec))
        for row in e.get("rows", []):
            print(_table_row(param, row, spec))
    cards = "; ".join(f"{e['gpu']} at {e.get('commit') or '?'}" for e in found)
    plot_sweep(stage, param, [(e["gpu"], e.get("rows", [])) for e in found], spec, f"recorded on {cards}")
    plt.show()
    return RecordedSweeps(found)


def recorded_against(track, stage, param, against, fixed=None):
    """Print what a lesson's prose reads off the recorded sweeps of (track, stage, param) (recorded_sweeps: one
    per card), so that the prose need not type it: each value's time as a multiple of the time at `against`, with
    the difference in percent and in µs, one line a card with its commit."""
    found = recorded_sweeps(track, stage, param, fixed)
    for e in found:
        us = {r["value"]: r["median_us"] for r in e.get("rows", []) if "median_us" in r}
        where = f"{e['gpu']} at {e.get('commit') or '?'}" + "".join(f", {k}={v!r}"
                                                                  for k, v in (e.get("fixed") or {}).items())
        if against not in us:
            print(f"{where}: no time at {param}={against!r} in its {param} sweep")
            continue
        cells = ", ".join(f"{v!r} {t / us[against]:.2f}x ({100 * (t / us[against] - 1):+.1f} %, "
                          f"{t - us[against]:+,.1f} µs)" for v, t in us.items() if v != against)
        print(f"{where}, time against {param}={against!r}: {cells}")
    if not found:
        print(f"No recorded {param} sweep of {tracks.get(track).NAME} {stage} to read.")


def _table_header(param, spec) -> str:
    width = max(len(param), 9)
    cells = [f"{head:>10}" for head, _, _ in spec.COLUMNS]
    return f"  {param:>{width}}  " + "  ".join(cells) + "  correct"


def _table_row(param, row, spec) -> str:
    """One value's line under _table_header: µs, the track's figures, correct (or the error)."""
    width = max(len(param), 9)
    v = row.get("value")
    head = f"  {(repr(v) if isinstance(v, str) else str(v)):>{width}}  "
    if "error" in row:
        return head + f"ERROR {row['error']}"
    cells = []
    for _, key, fmt in spec.COLUMNS:
        x = row.get(key)
        cells.append(f"{fmt.format(x) if isinstance(x, (int, float)) else '–':>10}")
    return head + "  ".join(cells) + f"  {'✓' if row.get('correct') else '✗ WRONG'}"


def plot_sweep(stage, param, series, spec, subtitle=""):
    """The sweep's plot: the track's figure (spec.PLOT_KEY) per value of `param`, a line per card.

    series: [(label, rows)], rows as dicts {value, median_us, the figures, correct} (a row with an error or
    without the figure is left out). Used for sweeps measured now and for recorded ones alike."""
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(6, 3))
    top = 105
    for label, rows in series:
        pts = [(str(r.get("value")), r[spec.PLOT_KEY]) for r in rows
               if isinstance(r.get(spec.PLOT_KEY), (int, float))]
        if pts:
            ax.plot([p[0] for p in pts], [p[1] for p in pts], "o-", label=label)
            top = max(top, *(p[1] for p in pts))
    ax.set_xlabel(param)
    ax.set_ylabel(spec.PLOT_LABEL)
    ax.set_title(f"{stage}: {param} sweep" + (f", {subtitle}" if subtitle else ""), fontsize=9)
    ax.set_ylim(0, top * 1.05 if top > 105 else top)
    if len(series) > 1:
        ax.legend(fontsize=7)
    return ax


def show_region(source: str, *, context: int = 0, start: str | None = None, end: str | None = None,
                tag: str | None = None):
    """Print part of a CUDA C++ kernel, numbered: from the first line containing `start` to the next line
    containing `end` (by default the lab region: the untagged `// >>> lab:`, or with `tag` the one marked
    `// >>> lab[tag]:`, to its `// <<< lab`), plus `context` lines either side. The lab markers themselves are
    not printed. A `start`, `end` or `tag` the source does not have (the kernel changed under the lesson) is an
    error that names it, never the whole file printed instead."""
    from .notebooks import LAB_BEGIN, LAB_END
    lines = source.splitlines()
    if start is None:
        begin = next((i for i, line in enumerate(lines)
                      if (m := LAB_BEGIN.match(line)) and m.group(3) == tag), None)
        if begin is None:
            raise ValueError(f"show_region: the source has no lab region "
                             f"{f'// >>> lab[{tag}]:' if tag else '// >>> lab:'}")
    else:
        begin = next((i for i, line in enumerate(lines) if start in line), None)
        if begin is None:
            raise ValueError(f"show_region: no line of the source contains start={start!r}")
    stop = next((i for i, line in enumerate(lines) if i >= begin and (end in line if end else LAB_END.match(line))),
                None)
    if stop is None:
        raise ValueError(f"show_region: no line from line {begin + 1} on contains end={end or '// <<< lab'!r}")
    first = max(begin - context, 0)
    for n in range(first, min(stop + 1 + context, len(lines))):
        if LAB_BEGIN.match(lines[n]) or LAB_END.match(lines[n]):
            continue
        print(f"{n + 1:4d}  {lines[n]}")
