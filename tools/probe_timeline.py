"""A measured timeline of a stage's kernels over a few calls back to back: each kernel's start and end as CUPTI
saw them (through torch.profiler), queued behind a sleeping kernel so that the host's launches leave no gaps,
for each of some settings (by default programmatic dependent launch on and
off), at the track's benchmark size. Writes results/readings/<gpu>_<track>_<stage>_timeline.json; the lessons
draw it (cudabook.timeline.show).

    python tools/probe_timeline.py --track resample --stage 07_tma [--calls 6] [--settings '{"pdl": true}' '{"pdl": false}']

What it can show: when CUPTI saw each kernel start and end, so the gap between two kernels, or their overlap.
A kernel launched with PDL may start (its blocks resident, waiting in griddepcontrol.wait) before the kernel
before it is seen to end; CUPTI does not document at what granularity it stamps a kernel's end (the last block's
exit, or its completion a little later). What it cannot show: anything inside a kernel (when its blocks passed
the wait, how its tail drains).
"""
from __future__ import annotations

import argparse
import json
import pathlib
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
HOLD_US = 3000           # a sleeping kernel first, long enough for the host to queue every call behind it
sys.path.insert(0, str(ROOT))


def kernel_spans(trace: dict) -> list[dict]:
    """The kernels of a chrome trace (torch.profiler's export), in start order: name, start and end in µs."""
    spans = [{"name": e["name"], "start_us": float(e["ts"]), "end_us": float(e["ts"]) + float(e.get("dur", 0.0))}
             for e in trace.get("traceEvents", []) if e.get("cat") == "kernel" and e.get("ph") == "X"]
    return sorted(spans, key=lambda s: s["start_us"])


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--track", required=True)
    ap.add_argument("--stage", required=True)
    ap.add_argument("--calls", type=int, default=6, help="calls back to back in each timeline")
    ap.add_argument("--settings", type=json.loads, nargs="+", default=None,
                    help="launch settings, one timeline each (default: pdl true and false where the stage has "
                         "a pdl setting, else its defaults)")
    ap.add_argument("--out", default=None)
    a = ap.parse_args(argv)
    import numpy as np
    import torch
    from torch.profiler import ProfilerActivity, profile

    from cudabook import bench, device, results
    from cudabook import track as tracks
    from numba import cuda
    t = tracks.get(a.track)
    gpu = device.gpu()
    if gpu is None:
        sys.exit(f"needs a GPU: {device.why_no_gpu()}")
    why = t.unavailable(a.stage)
    if why:
        sys.exit(why)
    module = t.stage(a.stage)
    if a.settings is None:
        a.settings = [{"pdl": True}, {"pdl": False}] if "pdl" in getattr(module, "PARAMS", {}) else [{}]
    size = dict(t.bench.WORKLOADS[0])
    args, problem = t.bench.prepare(size, rng=np.random.default_rng(0))
    runs = []
    for settings in a.settings:
        for _ in range(3):                       # compiled and warm
            module.launch(problem, **settings)
        cuda.synchronize()
        time.sleep(0.2)
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            bench._sleeper()[1, 1](HOLD_US)      # the GPU sleeps while the host queues every call
            queued = time.perf_counter()
            for _ in range(a.calls):
                module.launch(problem, **settings)
            queued = time.perf_counter() - queued
            cuda.synchronize()
        if queued * 1e6 > 0.8 * HOLD_US:
            print(f"  warning: queueing the {a.calls} calls took {queued * 1e6:,.0f} µs of the {HOLD_US:,} µs the "
                  f"GPU slept: later calls may have waited for the host, and their gaps are the host's")
        with tempfile.TemporaryDirectory() as tmp:
            path = pathlib.Path(tmp) / "trace.json"
            prof.export_chrome_trace(str(path))
            spans = [s for s in kernel_spans(json.loads(path.read_text())) if "sleep_us" not in s["name"]]
        if spans:
            t0 = spans[0]["start_us"]
            for s in spans:
                s["start_us"], s["end_us"] = round(s["start_us"] - t0, 3), round(s["end_us"] - t0, 3)
        per = len(spans) // a.calls if spans and len(spans) % a.calls == 0 else None
        runs.append({"settings": settings, "kernels": spans, "per_call": per, "queue_us": round(queued * 1e6, 1)})
        print(f"{a.track} {module.NAME} {settings}:")
        for s in spans:
            print(f"  {s['start_us']:10.2f} .. {s['end_us']:10.2f} µs  {s['name'][:60]}")
    record = {"kind": "kernel timeline (CUPTI through torch.profiler)", "gpu": gpu.name, "track": t.NAME,
              "stage": module.NAME, "workload": t.bench.workload_name(**size), "calls": a.calls,
              "commit": results._commit(), "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
              "torch": torch.__version__, "runs": runs}
    out = pathlib.Path(a.out) if a.out else (results.RESULTS / "readings" /
                                             f"{results.slug(gpu.name)}_{t.NAME}_{module.NAME}_timeline.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(record, indent=1) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
