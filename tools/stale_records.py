"""Which recorded profiles and lesson sweeps no longer describe today's code, card by card, and the command that
records each again (on that card). Needs no GPU.

    python tools/stale_records.py              every card
    python tools/stale_records.py --gpu H200   only cards whose name contains H200

A lesson on a GPU shows this card's recorded profile or sweep only while it is today's (a profile: the stage's
code digest, records.todays_code; a sweep: the stage's other defaults, results.not_today); otherwise it measures
again, live, which costs a workshop its pace (an ncu profile takes about 12 s a stage). Run this before a
session's GPU time: what it lists is what that time should record first. Exit status 0 either way.
"""
from __future__ import annotations

import argparse
import json
import os
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("NUMBA_ENABLE_CUDASIM", "1")      # (reading records needs no GPU)


def _shown(path: pathlib.Path) -> str:
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def _read(paths):
    """(path, its JSON) for each of `paths` that reads as JSON, in order."""
    for path in sorted(paths):
        try:
            yield path, json.loads(path.read_text())
        except (OSError, ValueError):
            continue


def stale_profiles(folder: pathlib.Path) -> list[dict]:
    """[{gpu, track, stages, params, command}] for every profile record under `folder` (results/profiles and its
    variants/) holding a stage whose code digest is not today's."""
    from cudabook.profile.records import todays_code
    found = []
    for path, record in _read(folder.rglob("*.json")):
        track = record.get("track")
        if record.get("kind") != "ncu profile" or not track:
            continue
        by_params: dict[str, list[str]] = {}
        for stage, info in record.get("stages", {}).items():
            if not todays_code(track, stage, info.get("code")):
                by_params.setdefault(json.dumps(info.get("params") or {}, sort_keys=True), []).append(stage)
        for params, stages in by_params.items():
            numbers = " ".join(sorted(s.split("_")[0] for s in stages))
            command = f"python -m cudabook.profile --record {track} {numbers}"
            if params != "{}":
                command += f" --params '{params}'"
            found.append({"gpu": record.get("gpu"), "track": track, "stages": sorted(stages),
                          "params": json.loads(params), "file": _shown(path), "command": command})
    return found


def stale_sweeps(folder: pathlib.Path) -> list[dict]:
    """[{gpu, track, stage, param, why, command}] for every lesson sweep under `folder` (results/sweeps/
    *_lessons.json) taken when the stage's other defaults were not today's."""
    from cudabook import results
    from cudabook import track as tracks
    found = []
    for path, data in _read(folder.glob("*_lessons.json")):
        for e in data.get("sweeps", []):
            t = tracks.get(e["track"])
            why = results.not_today(t, e["stage"], e.get("defaults") or {},
                                    ignore={e["param"], *(e.get("fixed") or {})})
            if why:
                found.append({"gpu": e.get("gpu") or data.get("gpu"), "track": e["track"], "stage": e["stage"],
                              "param": e["param"], "why": why, "file": _shown(path),
                              "command": f"python tools/record_sweeps.py --track {e['track']} "
                                         f"--only {e['stage'].split('_')[0]}"})
    return found


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gpu", default="", help="only cards whose name contains this")
    ap.add_argument("--results", type=pathlib.Path, default=ROOT / "results", help="the results folder")
    args = ap.parse_args(argv)
    for sub in ("profiles", "sweeps"):
        if not (args.results / sub).is_dir():
            ap.error(f"--results {args.results}: no {sub}/ folder there (the workbook's results folder has one)")
    profiles = [p for p in stale_profiles(args.results / "profiles") if args.gpu in (p["gpu"] or "")]
    sweeps = [s for s in stale_sweeps(args.results / "sweeps") if args.gpu in (s["gpu"] or "")]
    if not profiles and not sweeps:
        print("Every recorded profile and lesson sweep describes today's code.")
        return 0
    for gpu in sorted({x["gpu"] or "?" for x in profiles + sweeps}):
        print(f"{gpu}:")
        for p in (p for p in profiles if (p["gpu"] or "?") == gpu):
            with_ = f" with {p['params']}" if p["params"] else ""
            print(f"  profile of {p['track']} {', '.join(p['stages'])}{with_}: the code has changed since "
                  f"({p['file']})\n    {p['command']}")
        commands = {}
        for s in (s for s in sweeps if (s["gpu"] or "?") == gpu):
            print(f"  sweep of {s['track']} {s['stage']} {s['param']}: {s['why']}")
            commands[s["command"]] = None
        for c in commands:
            print(f"    {c}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
