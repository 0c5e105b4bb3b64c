"""show(): the profile of some stages in the notebook, measured now where it can be, else as recorded."""
from __future__ import annotations

import json
import os

from .measure import profile
from .ncu import ProfileUnavailable
from .records import _stage_name, recorded, variant_folder
from .table import Profile


def _display(p):
    try:
        from IPython import get_ipython
        from IPython.display import display
        if get_ipython() is not None:
            display(p)
            return
    except ImportError:
        pass
    print(repr(p))


def _recorded_as(t, names, params, folder=None, gpu=None, only_gpu=False) -> Profile | None:
    """The recorded profile of `names`, each stage run with `params`: from `folder` if given, else each stage
    from its own record (results/profiles/ for the defaults, records.variant_folder for a variant), put
    together; None unless every stage has one, on one card, taken with these settings."""
    from .records import variant_settings
    if folder is not None:
        parts = [recorded(t.NAME, *names, folder=folder, gpu=gpu, only_gpu=only_gpu)]
    else:
        parts = [recorded(t.NAME, n, folder=variant_folder(t, n, params), gpu=gpu, only_gpu=only_gpu)
                 for n in names]
    if any(p is None for p in parts) or len({p.gpu for p in parts}) != 1:
        return None
    stages = {k: v for p in parts for k, v in p.stages.items()}
    if set(stages) != set(names) or any(variant_settings(t, n, stages[n].get("params")) !=
                                        variant_settings(t, n, params) for n in names):
        return None
    if len(parts) == 1:
        return parts[0]
    return Profile([r for p in parts for r in p], track=t.NAME, gpu=parts[0].gpu, ncu=parts[0].ncu,
                   label=parts[0].label, stages=stages, date=parts[0].date)


def _record_command(t, names, params, folder) -> tuple[str, str]:
    """The command that records what show() looks for, and the folder it writes into."""
    from .records import variant_settings
    asked = next((v for v in (variant_settings(t, n, params) for n in names) if v), {})
    flags = f" --params '{json.dumps(asked)}'" if asked else ""
    where = f" --folder {folder}" if folder is not None else ""
    into = str(folder) if folder is not None else "results/profiles/variants/" if asked else "results/profiles/"
    stages = " " + " ".join(names) if asked or folder is not None else ""
    return f"python -m cudabook.profile --record {t.NAME}{stages}{flags}{where}", into


def show(track, *stages, size=None, live=None, folder=None, **params) -> Profile | None:
    """Show the profile of one or more stages and return it (None if there is none to show).

    On a GPU with ncu it profiles the stages now, unless this card's record holds every stage asked, profiled
    with these settings (`params`; none: the defaults) and the workload's size from the code as it is today
    (records.stage_digest): then that record is shown, marked ‡ (ncu took about 12 s a stage on an H100);
    otherwise (no GPU, no ncu, no permission: it says which) it shows the profile recorded, labelled with the
    card and the date it was measured. A stage's defaults are recorded in results/profiles/, a variant in a
    folder of its own (records.variant_folder), unless `folder` names one. live=True, CUDABOOK_PROFILE=live or
    CUDABOOK_FULL_LADDER=1 always profiles now; live=False and CUDABOOK_PROFILE=recorded always show the record."""
    from .. import SIMULATOR
    from .. import track as tracks
    t = tracks.get(track)
    names = [_stage_name(t, s) for s in stages] or list(t.STAGES)
    if live is None:
        from ..lesson import full_ladder
        mode = os.environ.get("CUDABOOK_PROFILE", "").strip().lower()
        live = not SIMULATOR and mode != "recorded"
        if live and mode != "live" and not full_ladder(None) and size is None:
            kept = card_profile(t, names, folder, params)
            if kept is not None:
                commits = ", ".join(sorted({s.get("commit") or "?" for s in kept.stages.values()}))
                print(f"‡ This card's profile, recorded at {commits} from the code these stages have today: "
                      f"profile.show(..., live=True), or CUDABOOK_PROFILE=live, profiles them now.")
                _display(kept)
                return kept
    if live:
        from ..progress import Progress
        say = Progress()
        try:
            parts = []
            with say.heartbeat():
                for n in names:      # each stage: a process under ncu that prepares the workload and replays
                    say(f"profiling {t.NAME} {n} now with ncu …")
                    parts.append(profile(t.NAME, n, size, **params))
            say("done")
            p = Profile([r for part in parts for r in part], track=t.NAME, gpu=parts[0].gpu, ncu=parts[0].ncu,
                        label=parts[0].label, stages={k: v for part in parts for k, v in part.stages.items()},
                        date=parts[0].date)
            _display(p)
            return p
        except ProfileUnavailable as e:
            print(f"No live profile: {e}\n")
    p = _recorded_as(t, names, params, folder)
    if p is None or not p:
        with_ = f" with {params}" if params else ""
        command, into = _record_command(t, names, params, folder)
        print(f"No profile of {t.NAME} {', '.join(names)}{with_} recorded yet: profiles are recorded on a GPU with "
              f"`{command}` (into {into}).")
        return None
    _display(p)
    return p


def card_profile(t, names, folder=None, params=None) -> Profile | None:
    """This GPU's recorded profile of every stage in `names`, each profiled with `params` (none: at its defaults),
    on the track's first workload, from the code it has today (its recorded stage_digest is today's), or None."""
    from .records import _gpu_name, todays_code
    gpu = _gpu_name()
    p = _recorded_as(t, names, params or {}, folder, gpu=gpu, only_gpu=True)
    if p is None:
        return None
    default = t.bench.workload_name(**t.bench.WORKLOADS[0])       # what a lesson's profile cell profiles
    for name in names:
        info = p.stages[name]
        if info.get("workload") != default or not todays_code(t.NAME, name, info.get("code")):
            return None
    return p


def _cell(value, spec, width) -> str:
    return f"{'–':>{width}s}" if value is None else f"{value:{width}{spec}}"


def variants(track, stage, settings, gpu=None) -> list[dict]:
    """Print one card's recorded profiles of `stage` at its defaults and with each of `settings` (a list of
    dicts of launch settings; their records: records.variant_folder), a line each: time (and as a share of the
    defaults'), DRAM bytes read and % of DRAM peak, L2 hit rate. The card: `gpu` (that card only), else this
    GPU if it has the defaults' record, else the card of the latest. A variant recorded on another workload than
    the defaults' is listed as such, not compared. Returns the rows printed ([] when nothing is recorded)."""
    from .. import track as tracks
    t = tracks.get(track)
    name = _stage_name(t, stage)
    base = _recorded_as(t, [name], {}, gpu=gpu, only_gpu=gpu is not None)
    if base is None:
        where = f" on {gpu}" if gpu else ""
        print(f"No profile of {t.NAME} {name}{where} recorded yet (python -m cudabook.profile --record {t.NAME} "
              f"{name}).")
        return []
    workload = (base.stages.get(name) or {}).get("workload")
    rows, missing, other = [], [], []
    for params in [{}] + list(settings):
        p = _recorded_as(t, [name], params, gpu=base.gpu, only_gpu=True)
        k = p.kernel(name) if p is not None else None
        if not k:
            missing.append(params)
            continue
        if (p.stages.get(name) or {}).get("workload") != workload:
            other.append((params, (p.stages.get(name) or {}).get("workload")))
            continue
        rows.append({"params": params, "commit": (p.stages.get(name) or {}).get("commit"), **k})
    first = rows[0]["duration_us"] if rows and not rows[0]["params"] else None
    print(f"{base.gpu}, {t.NAME} {name} under ncu ({workload}):")
    print(f"  {'settings':30s} {'µs':>9s} {'× defaults':>11s} {'DRAM MB read':>13s} {'DRAM % of peak':>15s} "
          f"{'L2 hit %':>9s}  commit")
    for r in rows:
        label = ", ".join(f"{k}={v!r}" for k, v in r["params"].items()) or "defaults"
        share = f"{r['duration_us'] / first:.3f}" if first and r.get("duration_us") else "–"
        print(f"  {label:30s} {_cell(r.get('duration_us'), ',.1f', 9)} {share:>11s} "
              f"{_cell(r.get('dram_read_MB'), ',.1f', 13)} {_cell(r.get('dram_pct'), '.1f', 15)} "
              f"{_cell(r.get('l2_hit_pct'), '.1f', 9)}  {r.get('commit') or '?'}")
    for params, w in other:
        print(f"  {', '.join(f'{k}={v!r}' for k, v in params.items())}: recorded on another workload ({w}), "
              f"not compared")
    for params in missing:
        print(f"  {', '.join(f'{k}={v!r}' for k, v in params.items()) or 'defaults'}: not recorded on {base.gpu} "
              f"({_record_command(t, [name], params, None)[0]})")
    return rows
