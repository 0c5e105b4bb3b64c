"""Profiling now, on this GPU: one stage into a Profile, or a track's stages into its record."""
from __future__ import annotations

import datetime
import pathlib

from .ncu import NcuForbidden, NcuMissing, ProfileUnavailable, collect, ncu_version, require_ncu
from .records import _gpu_name, _stage_name, new_record, save_record, stage_digest, stage_entry
from .table import Profile, derive


def profile(track, stage, size=None, *, edit=None, side="edited", **params) -> Profile:
    """Profile one stage now with Nsight Compute: a GPU and ncu are needed (else ProfileUnavailable, saying
    why). `size`: the problem's size as the track's benchmark names it (dict(B=..., S=..., T=..., D=...) for
    resampling); by default the track's first benchmark workload. `params`: the stage's launch parameters.
    `edit`: the path of a kernel edit (tools/kernel_edits/) of this stage: its edited copy is profiled (`side`
    "edited"), or the kernel the edit applies to ("rung": today's, or for an edit with a BASE the one there)."""
    from .. import SIMULATOR
    from .. import track as tracks
    t = tracks.get(track)
    name = _stage_name(t, stage)
    if SIMULATOR:
        from .. import device
        raise ProfileUnavailable(f"profiling needs a GPU; this machine has none ({device.why_no_gpu()})")
    why = t.unavailable(name)
    if why:
        raise ProfileUnavailable(why)
    ncu = require_ncu()
    got = collect(ncu, t.NAME, name, size=size, params=params, edit=edit, side=side)
    version = ncu_version(ncu)
    rows = [derive(k, name) for k in got["kernels"]]
    info = got["info"]
    stages = {name: {"workload": info.get("workload"), "size": info.get("size"), "min_bytes": info.get("min_bytes"),
                     "params": params}}
    gpu = _gpu_name()
    edited = (f", edited by {pathlib.Path(edit).stem}" if side == "edited" else
              f", the kernel {pathlib.Path(edit).stem} edits") if edit else ""
    p = Profile(rows, track=t.NAME, gpu=gpu, ncu=version, stages=stages,
                label=f"measured now on {gpu} with ncu {version or '?'}{edited}",
                date=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"))
    return p


def record(track, stages=None, *, size=None, params=None, folder=None, progress=print) -> pathlib.Path:
    """Profile `stages` (all of the track's by default) on this GPU and save them to
    results/profiles/<gpu>_<track>.json, after each stage (a run cut short keeps what it measured). A stage this
    machine cannot run is recorded as skipped, saying why; one that fails, with its error."""
    from .. import SIMULATOR
    from .. import track as tracks
    t = tracks.get(track)
    if SIMULATOR:
        raise ProfileUnavailable("recording profiles needs a GPU; this machine runs the simulator")
    ncu = require_ncu()
    version = ncu_version(ncu)
    rec = new_record(t.NAME, ncu_version=version)
    params = params or {}
    path = None
    for s in stages or t.STAGES:
        name = _stage_name(t, s)
        why = t.unavailable(name)
        if why:
            rec["stages"][name] = {"skipped": why}
            progress(f"{name}: skipped: {why}")
        else:
            try:
                got = collect(ncu, t.NAME, name, size=size, params=params.get(name))
                rec["stages"][name] = dict(stage_entry(got, params.get(name)), code=stage_digest(t.NAME, name))
                progress(repr(Profile([derive(k, name) for k in got["kernels"]], label=f"{name} · ncu {version}")))
                if got["missing"]:
                    progress(f"  (this ncu does not know: {', '.join(got['missing'])})")
            except (NcuMissing, NcuForbidden):
                raise
            except ProfileUnavailable as e:
                rec["stages"][name] = {"error": str(e)[:500]}
                progress(f"{name}: ERROR {e}")
        path = save_record(rec, folder)
    return path or save_record(rec, folder)
