"""show(): the profile of some stages in the notebook, measured now where it can be, else as recorded."""
from __future__ import annotations

import os

from .measure import profile
from .ncu import ProfileUnavailable
from .records import _stage_name, recorded
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


def show(track, *stages, size=None, live=None, folder=None, **params) -> Profile | None:
    """Show the profile of one or more stages and return it (None if there is none to show).

    On a GPU with ncu it profiles the stages now; otherwise (no GPU, no ncu, no permission: it says which) it
    shows the profile recorded in results/profiles/, labelled with the card and the date it was measured.
    live=False always shows the record; CUDABOOK_PROFILE=recorded does the same for every call."""
    from .. import SIMULATOR
    from .. import track as tracks
    t = tracks.get(track)
    names = [_stage_name(t, s) for s in stages] or list(t.STAGES)
    if live is None:
        live = not SIMULATOR and os.environ.get("CUDABOOK_PROFILE", "live") != "recorded"
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
    if p is None or not p:
        print(f"No profile of {t.NAME} {', '.join(names)} recorded yet: profiles are recorded on a GPU with "
              f"`python -m cudabook.profile --record {t.NAME}` (into results/profiles/).")
        return None
    _display(p)
    return p
