"""A rung's variants against the peer its claim is made on, in interleaved rounds, at several sizes (GPU).

For each size of the track's plan (cudabook.sizes; --values for the x values): fresh inputs, each variant of
the rung (its parameters as JSON; {} for the defaults) checked once against the float64 reference, then every
variant and the track's HEAD_TO_HEAD peer for that rung timed in the same interleaved rounds
(bench.head_to_head, so they share the card's clock). Prints the peer's time over each variant's (above 1, the
variant is ahead) and writes the rounds as JSON (as results/readings/<gpu>_<track>_<stage>_<what>.json, for
cudabook.results.readings).

    python tools/probe_head_to_head.py --track resample --stage 08 --values 64 256 512 \\
        --variants '{}' '{"trigger": true}' --out probe.json
"""
from __future__ import annotations

import argparse
import json
import os
import pathlib
import statistics
import sys

os.environ.setdefault("MPLBACKEND", "Agg")
ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from cudabook import bench, device, results  # noqa: E402  (decides simulator or GPU before numba is imported)
from cudabook import sizes as sweeps  # noqa: E402
from cudabook import track as tracks  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--track", required=True, choices=tracks.TRACKS)
    ap.add_argument("--stage", required=True, help="the rung, by name or number")
    ap.add_argument("--values", nargs="+", type=int, help="the x values of the track's size plan")
    ap.add_argument("--variants", nargs="+", default=["{}"], help="the rung's parameters, JSON, one per variant")
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--out", help="where to write the rounds (JSON)")
    a = ap.parse_args(argv)
    t = tracks.get(a.track)
    stage = next((s for s in t.STAGES if s == a.stage or s.startswith(a.stage + "_")), None)
    if stage is None:
        print(f"no stage {a.stage!r} in {t.NAME}: {', '.join(t.STAGES)}")
        return 2
    why = t.unavailable(stage)
    if why:
        print(f"{stage} cannot run here: {why}")
        return 1
    peers = [p for s, p in getattr(t.bench, "HEAD_TO_HEAD", ()) if s == stage]
    if not peers:
        print(f"{t.NAME}'s benchmark names no HEAD_TO_HEAD peer for {stage}")
        return 2
    module, judge = t.stage(stage), tracks.judge_of(t, stage)
    variants = {v: json.loads(v) for v in a.variants}
    plan = sweeps.plan(t, a.values)
    import datetime
    record = {"track": t.NAME, "stage": stage,
              "kind": f"{t.NAME} {stage}: variants against {', '.join(peers)} in interleaved rounds",
              "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
              "gpu": device.gpu().name, "commit": results._commit(), "x": plan["x"], "cases": []}
    for size in plan["sizes"]:
        args, problem = t.bench.prepare(size)
        correct = {}
        for name, params in variants.items():
            problem.poison()
            module.launch(problem, **params)
            correct[name] = bool(judge(problem.result(), *args).ok)
        with t.bench.peer_calls(args, problem) as calls:
            timed = {f"{stage} {name}": (lambda p=params: module.launch(problem, **p))
                     for name, params in variants.items()}
            timed.update({p: calls[p] for p in peers})
            got = bench.head_to_head(timed, rounds=a.rounds)
        case = {"size": size, "correct": correct, "us": {k: [round(ms * 1e3, 2) for ms in v] for k, v in got.items()}}
        for peer in peers:
            for name in variants:
                key = f"{stage} {name}"
                ratio = statistics.median(b / s for s, b in zip(got[key], got[peer]))
                case.setdefault("ratios", {})[f"{peer} / {name}"] = round(ratio, 4)
                print(f"{size}: {peer} / {stage} {name} = "
                      f"{ratio:.3f}x (median of {a.rounds} rounds; {stage} {statistics.median(got[key]) * 1e3:,.1f} µs, "
                      f"{peer} {statistics.median(got[peer]) * 1e3:,.1f} µs), correct={correct[name]}", flush=True)
        record["cases"].append(case)
        del problem
    if a.out:
        pathlib.Path(a.out).write_text(json.dumps(record, indent=1) + "\n")
        print(f"wrote {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
