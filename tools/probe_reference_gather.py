"""The deformable-attention reference gather in both orders of its groups, and rung 05, in interleaved rounds (GPU).

The reference gather (cudabook.msda.benchmark: every sample's four corners loaded, no arithmetic) can take its
groups heads fastest, as rung 02 does, or head by head, as rung 05 has since it adopted
tools/kernel_edits/msda05_heads_outer_wide.py; the benchmark times both and keeps the faster (benchmark.context).
This probe shows how far the order moves it, beside rung 05: for each workload of the benchmark,
fresh inputs, both orders' folds checked against each other (every group's XOR of its corners), then the gather
in both orders and rung 05 timed in the same interleaved rounds (bench.head_to_head). Prints the median times
and writes the rounds to results/readings/<gpu>_msda_05_lane_groups_reference_order.json (--out: another
folder), which cudabook.results.readings reads.

    python tools/probe_reference_gather.py
"""
from __future__ import annotations

import argparse
import datetime
import os
import pathlib
import statistics
import sys

os.environ.setdefault("MPLBACKEND", "Agg")
ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from cudabook import bench, device, results  # noqa: E402  (decides simulator or GPU before numba is imported)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--out", help="the folder to write to (default results/readings/)")
    a = ap.parse_args(argv)
    from cudabook import SIMULATOR
    if SIMULATOR:
        print(f"needs a GPU: {device.why_no_gpu()}")
        return 1
    import numpy as np
    from cudabook.msda import benchmark, s05_lane_groups as s05
    why = s05.unavailable()
    if why:
        print(f"rung 05 cannot run here: {why}")
        return 1
    record = {"track": "msda", "stage": "05_lane_groups",
              "kind": "the reference gather heads fastest and head by head, and rung 05, in interleaved rounds",
              "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
              "gpu": device.gpu().name, "commit": results._commit(), "cases": []}
    for size in benchmark.WORKLOADS:
        name = benchmark.workload_name(**size)
        args, problem = benchmark.prepare(size)
        same = bool(np.array_equal(benchmark.gather_fold(problem, False), benchmark.gather_fold(problem, True)))
        calls = {f"gather, {order}": benchmark._gather_launch(problem, order == benchmark.GATHER_ORDERS[1])[2]
                 for order in benchmark.GATHER_ORDERS}
        got = bench.head_to_head({**calls, "rung 05": lambda: s05.launch(problem)}, rounds=a.rounds)
        us = {k: [round(ms * 1e3, 2) for ms in v] for k, v in got.items()}
        record["cases"].append({"workload": name, "same_folds": same, "us": us})
        print(f"{name}: " + ", ".join(f"{k} {statistics.median(v):,.1f} µs" for k, v in us.items())
              + f" (medians of {a.rounds} rounds; the two orders' folds {'agree' if same else 'DIFFER'})",
              flush=True)
        del problem
    print(f"wrote {results.write_reading(record, 'reference_order', a.out)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
