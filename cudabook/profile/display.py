"""show(): the profile of some stages in the notebook, measured now where it can be, else as recorded."""
from __future__ import annotations

import json
import os

from .measure import profile
from .ncu import ProfileUnavailable
from .records import _stage_name, recorded, variant_folder
from .table import Profile
from ..results import json_plain


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


def show(track, *stages, size=None, live=None, folder=None, **params) -> Profile | None:
    """Show the profile of one or more stages and return it (None if there is none to show).

    On a GPU with ncu it profiles the stages now, unless this card's record holds every stage asked, profiled at
    its defaults and the workload's size from the code as it is today (records.stage_digest): then that record is
    shown, marked ‡ (ncu took about 12 s a stage on an H100); otherwise (no GPU, no ncu, no permission: it says
    which) it shows the profile recorded in results/profiles/, labelled with the card and the date it was
    measured. live=True, CUDABOOK_PROFILE=live or CUDABOOK_FULL_LADDER=1 always profiles now; live=False and
    CUDABOOK_PROFILE=recorded always show the record."""
    from .. import SIMULATOR
    from .. import track as tracks
    t = tracks.get(track)
    names = [_stage_name(t, s) for s in stages] or list(t.STAGES)
    if folder is None and params and len(names) == 1:      # a variant's record lives in a folder of its own
        folder = variant_folder(t.NAME, names[0], params)
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
        from ..lesson import Progress
        say = Progress()
        try:
            parts = []
            for n in names:          # each stage: a process under ncu that prepares the workload and replays
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
    p = recorded(t.NAME, *names, folder=folder)
    asked = json_plain(params)
    if p is not None and any(json_plain(p.stages.get(n, {}).get("params") or {}) != asked for n in names):
        print(f"The recorded profile of {t.NAME} {', '.join(names)} was taken with other settings than {params}: "
              f"not shown.")
        p = None
    if p is None or not p:
        flags = f" --params '{json.dumps(asked)}'" if params else ""
        where = f" --folder {folder}" if folder and not (params and len(names) == 1) else ""
        print(f"No profile of {t.NAME} {', '.join(names)}{' with ' + str(params) if params else ''} recorded yet: "
              f"profiles are recorded on a GPU with `python -m cudabook.profile --record {t.NAME}"
              f"{' ' + ' '.join(names) if params else ''}{flags}{where}` (into results/profiles/).")
        return None
    _display(p)
    return p


def card_profile(t, names, folder=None, params=None) -> Profile | None:
    """This GPU's recorded profile of every stage in `names`, each profiled with `params` (none: at its defaults),
    on the track's first workload, from the code it has today (its recorded stage_digest is today's), or None."""
    from .records import _gpu_name, todays_code
    gpu = _gpu_name()
    p = recorded(t.NAME, *names, folder=folder, gpu=gpu)
    if p is None or p.gpu != gpu or set(p.stages) != set(names):
        return None
    default = t.bench.workload_name(**t.bench.WORKLOADS[0])       # what a lesson's profile cell profiles
    for name in names:
        info = p.stages[name]
        if json_plain(info.get("params") or {}) != json_plain(params or {}) or info.get("workload") != default \
                or not todays_code(t.NAME, name, info.get("code")):
            return None
    return p


def variants(track, stage, settings, gpu=None) -> list[dict]:
    """Print one card's recorded profiles of `stage` at its defaults and with each of `settings` (a list of
    dicts of launch settings; their records: records.variant_folder), a line each: time (and as a share of the
    defaults'), DRAM bytes read and % of DRAM peak, L2 hit rate. The card: `gpu`, else this GPU if it has the
    defaults' record, else the card of the latest. Returns the rows printed ([] when nothing is recorded)."""
    from .. import track as tracks
    t = tracks.get(track)
    name = _stage_name(t, stage)
    base = recorded(t.NAME, name, gpu=gpu)
    if base is None:
        print(f"No profile of {t.NAME} {name} recorded yet (python -m cudabook.profile --record {t.NAME} {name}).")
        return []
    rows, missing = [], []
    for params in [{}] + list(settings):
        p = recorded(t.NAME, name, gpu=base.gpu, folder=variant_folder(t.NAME, name, params) if params else None)
        k = p.kernel(name) if p is not None and p.gpu == base.gpu else None
        if not k or json_plain((p.stages.get(name) or {}).get("params") or {}) != json_plain(params):
            missing.append(params)
            continue
        rows.append({"params": params, "commit": (p.stages.get(name) or {}).get("commit"), **k})
    first = rows[0]["duration_us"] if rows and not rows[0]["params"] else None
    print(f"{base.gpu}, {t.NAME} {name} under ncu ({(base.stages.get(name) or {}).get('workload')}):")
    print(f"  {'settings':30s} {'µs':>9s} {'× defaults':>11s} {'DRAM MB read':>13s} {'DRAM % of peak':>15s} "
          f"{'L2 hit %':>9s}  commit")
    for r in rows:
        label = ", ".join(f"{k}={v!r}" for k, v in r["params"].items()) or "defaults"
        share = f"{r['duration_us'] / first:.3f}" if first else "–"
        dram = "–" if r.get("dram_pct") is None else f"{r['dram_pct']:.1f}"
        print(f"  {label:30s} {r['duration_us']:9,.1f} {share:>11s} {r['dram_read_MB']:13,.1f} {dram:>15s} "
              f"{r['l2_hit_pct']:9.1f}  {r.get('commit') or '?'}")
    for params in missing:
        print(f"  {', '.join(f'{k}={v!r}' for k, v in params.items()) or 'defaults'}: not recorded on {base.gpu} "
              f"(python -m cudabook.profile --record {t.NAME} {name}"
              + (f" --params '{json.dumps(json_plain(params))}'" if params else "") + ")")
    return rows
