"""Which recorded profiles and lesson sweeps no longer describe today's code, card by card, and the command that
records each again (on that card). Needs no GPU.

    python tools/stale_records.py              every card
    python tools/stale_records.py --gpu H200   only cards whose name contains H200
    python tools/stale_records.py --gpu H200 --record
                                               on that card (the GPU machine, from the repository's root): run
                                               each command listed, one after another, each with a time limit

A lesson on a GPU shows this card's recorded profile or sweep only while it is today's (a profile: the stage's
code digest, records.todays_code; a sweep: the stage's other defaults, results.not_today); otherwise it measures
again, live, which costs a workshop its pace (an ncu profile takes about 12 s a stage). Run this before a
session's GPU time: what it lists is what that time should record first. A sweep that recorded its stage's code
digest (sweeps since 2026-11-30) is listed here too when that code has changed, though a lesson still shows it.
Exit status 0 either way.
"""
from __future__ import annotations

import argparse
import json
import os
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
# Run as a script, this file reads records in Numba's simulator (no GPU needed) and sets _SET_SIMULATOR; imported
# (the tests), it leaves the environment alone: a NUMBA_ENABLE_CUDASIM set at import turned every Numba kernel
# decorated afterwards in that process into the simulator's, on a GPU machine too.
_SET_SIMULATOR = False


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
    *_lessons.json) taken when the stage's other defaults were not today's, or (a sweep that records its stage's
    code digest) on other code."""
    from cudabook import results
    from cudabook.profile import records
    from cudabook import track as tracks
    found = []
    for path, data in _read(folder.glob("*_lessons.json")):
        for e in data.get("sweeps", []):
            t = tracks.get(e["track"])
            why = results.not_today(t, e["stage"], e.get("defaults") or {},
                                    ignore={e["param"], *(e.get("fixed") or {})})
            if not why and e.get("stage_digest") and not records.todays_code(e["track"], e["stage"],
                                                                                e["stage_digest"]):
                why = "the code has changed since"
            if why:
                found.append({"gpu": e.get("gpu") or data.get("gpu"), "track": e["track"], "stage": e["stage"],
                              "param": e["param"], "why": why, "file": _shown(path),
                              "command": f"python tools/record_sweeps.py --track {e['track']} "
                                         f"--only {e['stage'].split('_')[0]}"})
    return found


def record(commands, limit_s: int, run=None) -> int:
    """Run each listed command (`python ...` with this Python, the GPU's own environment: not the simulator this
    tool reads records in), one after another from the repository's root, each stopped after limit_s seconds;
    print how each went. Returns how many failed."""
    import shlex
    import subprocess
    import time
    env = dict(os.environ)
    if _SET_SIMULATOR:
        env.pop("NUMBA_ENABLE_CUDASIM", None)
    run = run or subprocess.run
    failed = 0
    for command in commands:
        argv = shlex.split(command)
        argv[0] = sys.executable if argv[0] == "python" else argv[0]
        t0 = time.perf_counter()
        try:
            rc = run(argv, cwd=ROOT, env=env, timeout=limit_s).returncode
        except subprocess.TimeoutExpired:
            rc = f"stopped after {limit_s} s"
        failed += rc != 0
        print(f"  {command}: {'ok' if rc == 0 else f'FAILED ({rc})'} in {time.perf_counter() - t0:.0f} s", flush=True)
    return failed


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gpu", default="", help="only cards whose name contains this")
    ap.add_argument("--results", type=pathlib.Path, default=ROOT / "results", help="the results folder")
    ap.add_argument("--record", action="store_true", help="run the commands listed (on the card --gpu names)")
    ap.add_argument("--limit", type=int, default=300, help="--record: seconds each command may take")
    args = ap.parse_args(argv)
    for sub in ("profiles", "sweeps"):
        if not (args.results / sub).is_dir():
            ap.error(f"--results {args.results}: no {sub}/ folder there (the workbook's results folder has one)")
    if args.record and not args.gpu:
        ap.error("--record runs the commands on this machine's card: name it with --gpu (H100, H200, ...)")
    profiles = [p for p in stale_profiles(args.results / "profiles") if args.gpu in (p["gpu"] or "")]
    sweeps = [s for s in stale_sweeps(args.results / "sweeps") if args.gpu in (s["gpu"] or "")]
    if not profiles and not sweeps:
        print("Every recorded profile and lesson sweep describes today's code.")
        return 0
    if args.record:
        cards = sorted({x["gpu"] or "?" for x in profiles + sweeps})
        if len(cards) > 1:
            ap.error(f"--gpu {args.gpu!r} names {len(cards)} cards ({', '.join(cards)}): name one")
        commands = list(dict.fromkeys([p["command"] for p in profiles] + [s["command"] for s in sweeps]))
        print(f"recording {len(commands)} on {cards[0]}:")
        return 1 if record(commands, args.limit) else 0
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
    if "NUMBA_ENABLE_CUDASIM" not in os.environ:      # reading records needs no GPU; --record's commands do
        os.environ["NUMBA_ENABLE_CUDASIM"] = "1"
        _SET_SIMULATOR = True
    sys.exit(main())
