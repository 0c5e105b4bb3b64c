"""The resampling track's benchmark: one workload, the copy ceiling as its yardstick, PyTorch as its peers.

GB/s counts the fewest bytes the problem needs (`Problem.min_bytes`); % of copy compares with the fastest copy
measured in the same process (cudabook.bench.copy_ceilings).
"""
from __future__ import annotations

import numpy as np

from .. import bench
from . import inputs
from .inputs import random_problem
from .problem import upload

WORKLOADS = [dict(bench.BENCH_SIZE, sorted_targets=True)]
COLUMNS = [("µs", "median_us", "{:,.1f}"), ("GB/s", "GBps", "{:,.0f}"), ("% of copy", "pct_of_copy", "{:.1f}")]
REQUIRED = ("median_us", "GBps", "pct_of_copy", "correct")
PLOT_KEY, PLOT_LABEL = "pct_of_copy", "% of copy bandwidth"


def workload_name(B, S, T, D, sorted_targets=True):
    return f"resample B={B} S={S} T={T} D={D} {'sorted' if sorted_targets else 'unsorted'}"


def prepare(size, rng=None):
    """Fresh random inputs of this size, uploaded: (inputs, problem)."""
    size = dict(size)
    sorted_targets = size.pop("sorted_targets", True)
    args = random_problem(**size, sorted_targets=sorted_targets, rng=rng or np.random.default_rng())
    return args, upload(*args)


def context(problem, progress=print) -> dict:
    """The copy ceiling, measured now, for this problem's traffic."""
    ceilings = bench.copy_ceilings(problem.min_bytes)
    copy = max(ceilings.values())
    progress(f"copy ceiling: {copy:,.0f} GB/s (read + write of {problem.min_bytes / 1e6:.1f} MB; "
             + ", ".join(f"{k} {v:,.0f}" for k, v in ceilings.items()) + ")")
    return {"copy_GBps": round(copy, 1), "copy_ceilings_GBps": ceilings, "min_bytes": problem.min_bytes}


def summary(ctx) -> str:
    return f"copy ceiling {ctx['copy_GBps']:,.0f} GB/s"


def metrics(problem, median_us, ctx) -> dict:
    GBps = round(problem.min_bytes / (median_us * 1e-6) / 1e9, 1)
    return {"GBps": GBps, "pct_of_copy": round(100 * GBps / ctx["copy_GBps"], 1)}


def peers(args, problem, ctx, *, repeats=25, progress=print) -> dict:
    """torch eager and torch.compile on the same data, timed the same way (skipped, saying why, without torch)."""
    from .. import peers as peer_mod
    why = peer_mod.available()
    if why:
        progress(f"peers skipped: {why}")
        return {}
    ref, scale = inputs.reference_with_scale(*args)
    rows = peer_mod.measure(*args, ref, scale, repeats=repeats)
    for v in rows.values():
        if "median_us" in v:
            v.update(metrics(problem, v["median_us"], ctx))
    return rows


def consistency(row, workload, record) -> str | None:
    """Why a row's figures disagree with its own time, or None: GB/s from µs and the traffic, % from the
    ceiling (each as rounded when recorded)."""
    nbytes = workload.get("min_bytes") or workload.get("context", {}).get("min_bytes")
    copy = workload.get("context", {}).get("copy_GBps") or record.get("copy_GBps")
    if nbytes and "GBps" in row:
        want = nbytes / (row["median_us"] * 1e-6) / 1e9
        if abs(row["GBps"] - want) > 0.06 + 1e-3 * want:
            return f"GBps {row['GBps']} but {nbytes:,} bytes in {row['median_us']} µs is {want:.1f} GB/s"
    if copy and "pct_of_copy" in row and "GBps" in row:
        want = 100 * row["GBps"] / copy
        if abs(row["pct_of_copy"] - want) > 0.06 + 1e-3 * want:
            return f"pct_of_copy {row['pct_of_copy']} but {row['GBps']} GB/s of a {copy} GB/s ceiling is {want:.1f} %"
    return None
