"""Profiles of kernel edits (tools/kernel_edits/): an edited copy of a rung's kernel and the kernel it edits,
profiled one after the other on the same card and workload, kept as a reading that a lesson prints.

    python -m cudabook.profile --edit msda05_heads_outer_wide msda          # on a GPU: writes the reading
    cudabook.profile.show_edits("msda", "05_lane_groups")                  # anywhere: prints every card's

For an edit the rung has adopted since (it names a BASE), "rung" is the kernel at BASE, the one it edited, so
the reading keeps the before and after of a change that is now the rung.
"""
from __future__ import annotations

import datetime
import json
import pathlib

from .measure import profile
from .records import _gpu_name, _stage_name
from .table import Profile


def profile_edit(track, edit, size=None, *, folder=None, **params) -> pathlib.Path:
    """Profile the kernel `edit` edits and its edited copy (a GPU and ncu needed) on `size` (the track's first
    benchmark workload by default), print both, and add them to the card's reading of this edit,
    <folder>/<gpu>_<track>_<stage>_profile_edit_<edit>.json (results/readings/ by default; a workload profiled
    before is replaced). Returns the reading's path."""
    from .. import edits
    from .. import results
    from .. import track as tracks
    change = edits.load(edit)
    t = tracks.get(track)
    stage = _stage_name(t, change.STAGE)
    params = {**getattr(change, "PARAMS", {}), **params}
    path = str(pathlib.Path(change.__file__))
    rows = {}
    for side in ("rung", "edited"):
        p = profile(t.NAME, stage, size, edit=path, side=side, **params)
        print(repr(p), "\n")
        rows[side] = p
    gpu = _gpu_name()
    name = pathlib.Path(path).stem
    folder = pathlib.Path(folder) if folder else results.RESULTS / "readings"
    where = folder / f"{results.slug(gpu)}_{t.NAME}_{stage}_profile_edit_{name}.json"
    record = json.loads(where.read_text()) if where.exists() else {
        "track": t.NAME, "stage": stage, "gpu": gpu, "edit": name,
        "kind": f"{t.NAME} {stage}: Nsight Compute profiles of a kernel edit and of the kernel it edits"}
    workload = rows["rung"].workload
    record.update(what=(change.__doc__ or "").strip(), rung_at=getattr(change, "BASE", None), ncu=rows["rung"].ncu,
                  commit=results._commit(),
                  date=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"))
    cases = [c for c in record.get("cases", []) if c["workload"] != workload]
    cases.append({"workload": workload, "params": params, "commit": record["commit"],
                  "rung": list(rows["rung"]), "edited": list(rows["edited"])})
    record["cases"] = cases
    return results.write_reading(record, f"profile_edit_{name}", folder)


def show_edits(track, stage, out=print) -> int:
    """Print every card's profiles of edits of (track, stage) (results/readings/*_profile_edit_*.json): per edit
    and workload, the kernel it edits and the edited copy, a table each. Returns how many readings it printed."""
    from .. import results
    from .. import track as tracks
    t = tracks.get(track)
    stage = _stage_name(t, stage)
    found = []
    for path in sorted((results.RESULTS / "readings").glob(f"*_{t.NAME}_{stage}_profile_edit_*.json")):
        rd = json.loads(path.read_text())
        if rd.get("track") == t.NAME and rd.get("stage") == stage:
            found.append(rd)
    for rd in sorted(found, key=lambda r: r.get("date") or ""):
        before = f"the rung at {rd['rung_at']}, before it adopted the edit" if rd.get("rung_at") else "the rung"
        out(f"{rd['edit']} · {rd['gpu']} · ncu {rd.get('ncu')}: {(rd.get('what') or '').splitlines()[0]}")
        for case in rd["cases"]:
            rows = [dict(r, stage=f"{stage[:2]} {side}") for side in ("rung", "edited") for r in case[side]]
            out(repr(Profile(rows, label=f"{case['workload']} · commit {case['commit']} · rung: {before}")))
            out("")
    if not found:
        out(f"no profile of an edited {t.NAME} {stage} kernel in results/readings/ (python -m cudabook.profile "
            f"--edit EDIT {t.NAME} on a GPU)")
    return len(found)
