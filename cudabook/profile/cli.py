"""The command line (python -m cudabook.profile), and the driver program that ncu profiles (--run)."""
from __future__ import annotations

import json
import pathlib
import sys

from .measure import profile, record
from .ncu import ROOT, ProfileUnavailable
from .records import _stage_name, variant_folder


def _drive(track, stage, info_path, size=None, params=None, edit=None, side="edited") -> int:
    """Inside ncu: upload the problem, launch once (compile, warm up), then once between cuProfilerStart and
    cuProfilerStop. Writes what it ran (workload, size, minimum traffic) or why it could not to info_path.
    `edit`: a kernel edit's path (tools/kernel_edits/): the stage launches the edited copy of its kernel, or with
    `side` "rung" the kernel the edit applies to (for an edit with a BASE, the one at BASE)."""
    info = {}
    try:
        from .. import SIMULATOR          # (the package, imported first, chose GPU or simulator)
        from .. import track as tracks
        if SIMULATOR:
            raise ProfileUnavailable("the profiled program found no GPU")
        from numba import cuda
        t = tracks.get(track)
        why = t.unavailable(stage)
        if why:
            raise ProfileUnavailable(why)
        size = size if size is not None else dict(t.bench.WORKLOADS[0])
        args, problem = t.bench.prepare(dict(size))
        module = t.stage(stage)
        params = dict(params or {})
        if edit:
            from .. import edits
            change = edits.load(edit)
            if side == "edited":
                params["kernel"] = edits.edited_source(change)
                if hasattr(change, "host"):              # a host change the edited text needs
                    change.host(module)
            elif hasattr(change, "BASE"):
                params["kernel"] = edits.rung_text(change, module)
        problem.poison()
        module.launch(problem, **params)
        cuda.synchronize()
        cuda.profile_start()
        module.launch(problem, **params)
        cuda.synchronize()
        cuda.profile_stop()
        params.pop("kernel", None)
        info = {"workload": t.bench.workload_name(**size), "size": size,
                "min_bytes": getattr(problem, "min_bytes", None), "params": params, "edit": edit,
                "side": side if edit else None}
        code = 0
    except Exception as e:  # reported through the info file, read by the parent
        info = {"error": f"{type(e).__name__}: {e}"}
        code = 1
    pathlib.Path(info_path).write_text(json.dumps(info, default=str))
    return code


def main(argv=None) -> int:
    """python -m cudabook.profile TRACK STAGE...             profile now and print the table
    python -m cudabook.profile --record TRACK [STAGE...]   profile and save results/profiles/<gpu>_<track>.json
    python -m cudabook.profile --show TRACK [STAGE...]     the recorded profile
    --params JSON: the stages' launch settings (a variant: recorded in results/profiles/variants/, a folder for
    each stage and settings); --folder DIR: the records' folder instead
    python -m cudabook.profile --edit EDIT TRACK [STAGE]  profile now the edited copy of a rung's kernel (a file
    of tools/kernel_edits/, or its name) and the kernel it edits (for an adopted edit, the rung at its BASE),
    and write both to results/readings/<gpu>_<track>_<stage>_profile_edit_<edit>.json (--folder: elsewhere)
    (--run TRACK STAGE --info PATH [--size JSON] [--params JSON] is the driver ncu runs.)"""
    import argparse
    ap = argparse.ArgumentParser(prog="python -m cudabook.profile", description=main.__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--run", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--record", action="store_true")
    ap.add_argument("--show", action="store_true")
    ap.add_argument("--info", help=argparse.SUPPRESS)
    ap.add_argument("--size", type=json.loads, help="the problem's size as JSON, e.g. '{\"B\": 8, ...}'")
    ap.add_argument("--params", type=json.loads, help="the stage's launch parameters as JSON")
    ap.add_argument("--folder", help="the records' folder (default results/profiles/)")
    ap.add_argument("--edit", help="a kernel edit (tools/kernel_edits/): profile its edited copy of the rung")
    ap.add_argument("--side", choices=("rung", "edited"), default="edited", help=argparse.SUPPRESS)
    ap.add_argument("track")
    ap.add_argument("stages", nargs="*")
    a = ap.parse_args(argv)
    if a.run:
        return _drive(a.track, a.stages[0], a.info, a.size, a.params, a.edit, a.side)
    if argv is None:                   # from the shell: `timeout` sends SIGTERM; end ncu and its program too
        import signal

        def stop(signum, frame):
            raise SystemExit(128 + signum)
        signal.signal(signal.SIGTERM, stop)
    if a.params is not None and not isinstance(a.params, dict):
        ap.error(f"--params: a JSON object of settings, e.g. '{{\"threads\": 128}}', got {a.params!r}")
    if a.params and not a.stages:
        ap.error("--params needs the stages it applies to")
    if a.edit:
        if a.record or a.show:
            ap.error("--edit profiles now: a record describes the rungs as they are")
        from .. import edits
        from .. import track as tracks
        e = edits.load(a.edit)
        t = tracks.get(a.track)
        if t.NAME != e.TRACK or any(_stage_name(t, s) != e.STAGE for s in a.stages):
            ap.error(f"the edit {a.edit} edits {e.TRACK} {e.STAGE}, not {a.track} {' '.join(a.stages)}")
    try:
        if a.record:
            from .. import track as tracks
            t = tracks.get(a.track)
            if a.params and not a.folder:      # each stage's variant in its own folder (records.variant_folder)
                if a.size:
                    ap.error("--size with --params needs --folder: a variant's own folder holds the benchmark's size")
                paths = [record(a.track, [s], params={_stage_name(t, s): a.params},
                                folder=variant_folder(t, s, a.params)) for s in a.stages]
            else:
                params = {_stage_name(t, s): a.params for s in a.stages} if a.params else None
                paths = [record(a.track, a.stages or None, size=a.size, params=params, folder=a.folder)]
            for path in paths:
                print(f"wrote {path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}")
        elif a.show:
            from .display import show
            show(a.track, *a.stages, live=False, folder=a.folder, **(a.params or {}))
        elif a.edit:                       # (profile_edit adds the edit's PARAMS)
            from .edits import profile_edit
            path = profile_edit(a.track, a.edit, a.size, folder=a.folder, **(a.params or {}))
            print(f"wrote {path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}")
        else:
            for s in a.stages:
                print(repr(profile(a.track, s, a.size, **(a.params or {}))), "\n")
    except ProfileUnavailable as e:
        print(e, file=sys.stderr)
        return 2
    return 0
