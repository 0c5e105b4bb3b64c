"""A rung's settings against the peer its claim is made against, all in the same interleaved rounds (GPU).

For the track's HEAD_TO_HEAD pair of the rung (its peer at its strongest), at one size (the benchmark's first
workload with --size's changes): fresh inputs; the rung at its defaults and with each of --variants, each judged
against the float64 reference; then all of them and the peer timed in the same interleaved rounds
(bench.head_to_head), so that the card's clock drifts under every one alike. Prints each one's median and the
peer's time over it (above 1, the rung's setting is ahead), and writes
results/readings/<gpu>_<track>_<stage>_settings_vs_peer.json (--out: another folder; --tag adds to the name).

    python tools/probe_params_vs_peer.py --track resample --stage 08 --size '{"D": 512}' \\
        --variants '[{"vectors_per_lane": 4}, {"threads": 256}]'
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import pathlib
import statistics
import sys

os.environ.setdefault("MPLBACKEND", "Agg")
ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from cudabook import bench, device, peers, results  # noqa: E402  (decides simulator or GPU before numba is imported)
from cudabook import track as tracks  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--track", required=True, choices=tracks.TRACKS)
    ap.add_argument("--stage", required=True, help="the rung, by name or number")
    ap.add_argument("--size", default="{}", help="changes to the benchmark's first workload (JSON)")
    ap.add_argument("--variants", default="[]", help="a JSON list of settings, each a dict of the rung's parameters")
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--tag", default="", help="added to the reading's file name (several sizes, say)")
    ap.add_argument("--out", help="the folder to write to (default results/readings/)")
    a = ap.parse_args(argv)
    t = tracks.get(a.track)
    stage = next((s for s in t.STAGES if s == a.stage or s.startswith(a.stage + "_")), None)
    if stage is None:
        print(f"{a.stage}: no such stage of {t.NAME} ({', '.join(t.STAGES)})")
        return 1
    module, judge = t.stage(stage), tracks.judge_of(t, stage)
    pair = [p for s, p in getattr(t.bench, "HEAD_TO_HEAD", ()) if s == stage]
    if not pair:
        print(f"{t.NAME} {stage}: its benchmark sets no peer against it (HEAD_TO_HEAD)")
        return 1
    why = t.unavailable(stage) or peers.available()
    if why:
        print(f"{stage} against {pair[0]} cannot run here: {why}")
        return 1
    variants = [{}] + [dict(v) for v in json.loads(a.variants)]
    size = {**t.bench.WORKLOADS[0], **json.loads(a.size)}
    name = t.bench.workload_name(**size)
    args, problem = t.bench.prepare(size)
    label = [", ".join(f"{k}={v}" for k, v in v.items()) or "defaults" for v in variants]
    correct = {}
    for lab, v in zip(label, variants):
        problem.poison()
        module.launch(problem, **v)
        correct[lab] = bool(judge(problem.result(), *args).ok)
        print(f"{name} · {stage} {lab}: right {correct[lab]}", flush=True)
    calls = {lab: (lambda v=v: module.launch(problem, **v)) for lab, v in zip(label, variants) if correct[lab]}
    with t.bench.peer_calls(args, problem) as peer_calls:
        calls[pair[0]] = peer_calls[pair[0]]
        got = bench.head_to_head(calls, rounds=a.rounds)
    us = {k: [round(ms * 1e3, 2) for ms in v] for k, v in got.items()}
    peer_us = us[pair[0]]
    rows = []
    for lab, v in zip(label, variants):
        if lab not in us:
            rows.append({"params": v, "correct": False})
            continue
        ratio = statistics.median(p / s for p, s in zip(peer_us, us[lab]))
        rows.append({"params": v, "correct": True, "us": us[lab], "peer / rung": round(ratio, 4)})
        print(f"{stage} {lab}: {statistics.median(us[lab]):,.1f} µs; {pair[0]} / it = {ratio:.3f}x", flush=True)
    print(f"{pair[0]}: {statistics.median(peer_us):,.1f} µs")
    gpu = device.gpu().name
    record = {"track": t.NAME, "stage": stage, "kind": f"{stage}'s settings and {pair[0]} in the same interleaved "
              "rounds (tools/probe_params_vs_peer.py)", "gpu": gpu, "commit": results._commit(),
              "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
              "workload": name, "size": size, "peer": pair[0], "peer_us": peer_us, "rounds": a.rounds, "rows": rows}
    print(f"wrote {results.write_reading(record, f'settings_vs_peer{a.tag}', a.out)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
