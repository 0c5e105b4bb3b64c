"""Record one block of a stage as it runs: the stage's STAMPS (cudabook.kit.stamps) compiled into a copy of its
kernel, on the benchmark's first workload (GPU).

For each stage: the plain kernel and the stamped copy timed back to back (what the stamps cost), the stamped
copy's result judged against the float64 reference, then one more stamped launch whose stamps are kept:
results/readings/<gpu>_<track>_<stage>_stamps.json (--out: another folder). A lesson draws it with
timeline.show_stamps(track, stage).

    python tools/probe_stamps.py --track gemm --stage 05 06 07
    python tools/probe_stamps.py --track gemm --stage 05 --twice issue

--thread N: thread N of each warpgroup stamps instead of its first (warp N // 32 of it).

--twice LABEL puts a second stamp right beside the point LABEL, one that fires just before it: the state between
the two, "a stamp", is what one stamp costs the warpgroup. Written to <gpu>_<track>_<stage>_stamps_twice.json,
so that the stage's own record stands.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import pathlib
import sys

os.environ.setdefault("MPLBACKEND", "Agg")
ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from cudabook import bench, device, results  # noqa: E402  (decides simulator or GPU before numba is imported)
from cudabook import track as tracks  # noqa: E402
from cudabook.kit import stamps  # noqa: E402


TWIN = "a stamp"        # --twice: the state from the extra stamp to the point's own, i.e. one stamp's cost


def _stage_named(t, want):
    """The track's stage named `want` ("05" or "05_wgmma_tma"), or None."""
    return next((s for s in t.STAGES if s == want or s.startswith(want + "_")), None)


def _wrong_arguments(a) -> list:
    """What is wrong with the command line, a sentence each: a stage that is not the track's or has no STAMPS, a
    --twice label that is not one of a stage's stamps, a --thread outside a warpgroup."""
    t, problems = tracks.get(a.track), []
    if not 0 <= a.thread < 128:
        problems.append(f"--thread {a.thread}: a thread of a warpgroup, 0-127")
    for want in a.stage:
        stage = _stage_named(t, want)
        points = getattr(t.stage(stage), "STAMPS", None) if stage else None
        if not points:
            with_stamps = [s for s in t.STAGES if getattr(t.stage(s), "STAMPS", None)]
            problems.append(f"--stage {want}: no stage of {t.NAME} with STAMPS ({', '.join(with_stamps)})")
        elif a.twice and all(p.label != a.twice for p in points):
            problems.append(f"--twice {a.twice!r}: no stamp of {stage} is labelled so "
                            f"({', '.join(p.label for p in points)})")
    return problems


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--track", required=True, choices=tracks.TRACKS)
    ap.add_argument("--stage", nargs="+", required=True, help="stages, by name or number")
    ap.add_argument("--block", type=int, default=0, help="the block that stamps (blockIdx.x; y and z 0)")
    ap.add_argument("--out", help="the folder to write to (default results/readings/)")
    ap.add_argument("--twice", help="a point's label: stamp it twice, back to back, to measure a stamp's cost")
    ap.add_argument("--thread", type=int, default=0, help="which thread of each warpgroup stamps (0-127; with "
                    "a thread other than 0 the reading's kind ends in _thread<N>)")
    a = ap.parse_args(argv)
    problems = _wrong_arguments(a)
    if problems:                                  # told before the GPU is touched, on any machine
        sys.exit("\n".join(problems))
    import numpy as np
    from numba import cuda
    t = tracks.get(a.track)
    folder = pathlib.Path(a.out) if a.out else results.RESULTS / "readings"
    folder.mkdir(parents=True, exist_ok=True)
    size = t.bench.WORKLOADS[0]
    args, problem = t.bench.prepare(size)
    for want in a.stage:
        stage = _stage_named(t, want)
        module = t.stage(stage)
        why = t.unavailable(stage)
        if why:
            print(f"{stage} cannot run here: {why}")
            continue
        points = tuple(module.STAMPS)
        if a.twice:
            twin = next(p for p in points if p.label == a.twice)
            points += (stamps.Point(TWIN, twin.pattern, twin.before, twin.nth),)   # fires just before the twin
        buf = cuda.to_device(np.zeros(stamps.words(), np.uint64))
        text = stamps.instrument(module.source(), module.KERNEL, points, device.address(buf), block=a.block,
                                 thread=a.thread)
        plain = lambda: module.launch(problem)                       # noqa: E731
        stamped = lambda: module.launch(problem, kernel=text)        # noqa: E731
        problem.poison()
        stamped()
        verdict = tracks.judge_of(t, stage)(problem.result(), *args)
        got = bench.head_to_head({"plain": plain, "stamped": stamped}, rounds=4)
        stamped()
        cuda.synchronize()
        warpgroups = stamps.decode(buf.copy_to_host(), points)
        record = {"kind": "one block's stamps (cudabook.kit.stamps, tools/probe_stamps.py)", "track": t.NAME,
                  "stage": stage, "gpu": device.gpu().name, "commit": results._commit(),
                  "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S%z"),
                  "workload": t.bench.workload_name(**size), "block": a.block, "correct": bool(verdict.ok),
                  "plain_us": round(1e3 * sorted(got["plain"])[len(got["plain"]) // 2], 2),
                  "stamped_us": round(1e3 * sorted(got["stamped"])[len(got["stamped"]) // 2], 2),
                  "points": [p.label for p in points], "warpgroups": warpgroups}
        if a.twice:
            record["twice"] = a.twice
        record["thread"] = a.thread
        kind = ("stamps_twice" if a.twice else "stamps") + (f"_thread{a.thread}" if a.thread else "")
        path = folder / f"{results.slug(device.gpu().name)}_{t.NAME}_{stage}_{kind}.json"
        path.write_text(json.dumps(record, indent=1) + "\n")
        shares = stamps.summary(record)
        print(f"{stage}: plain {record['plain_us']:,.1f} µs, stamped {record['stamped_us']:,.1f} µs, "
              f"correct={record['correct']}; " + "; ".join(
                  f"wg{wg} " + ", ".join(f"{k} {100 * v:.0f}%" for k, v in sorted(s.items(), key=lambda kv: -kv[1])
                                         if v >= 0.01) for wg, s in shares.items()) + f" -> {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
