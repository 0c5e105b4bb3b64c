"""The resampling track's benchmark: one workload, the copy ceiling as its yardstick, PyTorch as its peers.

GB/s counts the bytes of reading every input and writing the output once (`Problem.min_bytes`); % of copy
compares with the fastest copy measured in the same process (cudabook.bench.copy_ceilings). Sorted random
targets leave some source rows unread, so a gather can beat that copy: % of needed compares with the time the
fastest copy takes for the bytes the problem cannot avoid (`inputs.needed_bytes`: only the rows some output
uses): a yardstick, not a law (a measured copy rate, below the memory's peak; a gather passes it only by moving
its bytes faster than those copies did, or by leaving write-back to the next run).
"""
from __future__ import annotations

import contextlib

import numpy as np

from .. import bench
from . import inputs, peers as torch_peers
from .inputs import random_problem
from .problem import upload

BENCH_SIZE = dict(B=64, S=4096, T=4096, D=256)
WORKLOADS = [dict(BENCH_SIZE, sorted_targets=True)]
COLUMNS = [("µs", "median_us", "{:,.1f}"), ("GB/s", "GBps", "{:,.0f}"), ("% of copy", "pct_of_copy", "{:.1f}"),
           ("% of needed", "pct_of_needed", "{:.1f}")]
REQUIRED = ("median_us", "GBps", "pct_of_copy", "correct")
PLOT_KEY, PLOT_LABEL = "pct_of_copy", "% of copy bandwidth"
SIZE_PLAN = dict(x=("D",), values=(64, 128, 256, 512), workloads="first")   # cudabook.sizes: D from 64 to 512
RECORD_KEYS = ("copy_GBps",)       # the ceiling also at a record's top level, where the first records kept it
IMAGE_NAME = "{gpu}.png"           # results/H200.png: the first track's plot has had that name since the start


def workload_name(B, S, T, D, sorted_targets=True):
    return f"resample B={B} S={S} T={T} D={D} {'sorted' if sorted_targets else 'unsorted'}"


def prepare(size, rng=None):
    """Fresh random inputs of this size, uploaded: (inputs, problem)."""
    size = dict(size)
    sorted_targets = size.pop("sorted_targets", True)
    args = random_problem(**size, sorted_targets=sorted_targets, rng=rng or np.random.default_rng())
    problem = upload(*args)
    problem.needed_bytes = inputs.needed_bytes(*args)
    return args, problem


def context(problem, progress=print) -> dict:
    """The copy ceiling, measured now, for this problem's traffic."""
    ceilings = bench.copy_ceilings(problem.min_bytes)
    copy = max(ceilings.values())
    progress(f"copy ceiling: {copy:,.0f} GB/s (read + write of {problem.min_bytes / 1e6:.1f} MB; "
             + ", ".join(f"{k} {v:,.0f}" for k, v in ceilings.items()) + ")")
    ctx = {"copy_GBps": round(copy, 1), "copy_ceilings_GBps": ceilings, "min_bytes": problem.min_bytes}
    needed = getattr(problem, "needed_bytes", None)
    if needed:
        ctx["needed_bytes"] = needed
        ctx["needed_ceiling_us"] = round(needed / (ctx["copy_GBps"] * 1e9) * 1e6, 2)
        progress(f"needed bytes: {needed / 1e6:.1f} MB ({100 * needed / problem.min_bytes:.1f} % of min_bytes), "
                 f"{ctx['needed_ceiling_us']} µs at the copy ceiling")
    return ctx


def summary(ctx) -> str:
    text = f"copy ceiling {ctx['copy_GBps']:,.0f} GB/s"
    if ctx.get("needed_ceiling_us"):
        text += f"; the needed bytes at that speed: {ctx['needed_ceiling_us']:,.1f} µs"
    return text


def metrics(problem, median_us, ctx) -> dict:
    GBps = round(problem.min_bytes / (median_us * 1e-6) / 1e9, 1)
    out = {"GBps": GBps, "pct_of_copy": round(100 * GBps / ctx["copy_GBps"], 1)}
    if ctx.get("needed_ceiling_us"):
        out["pct_of_needed"] = round(100 * ctx["needed_ceiling_us"] / median_us, 1)
    return out


PEERS = ("torch_eager", "torch_compile", "torch_compile_max_autotune")
LESSON_PEERS = ("torch_eager", "torch_compile")   # what a lesson measures now; max-autotune (minutes of compiling)
# comes from the card's record, unless the lesson measures the whole ladder (cudabook.lesson, full=True)


def peers(args, problem, ctx, *, repeats=25, progress=print, only=None) -> dict:
    """torch eager and torch.compile (default and max-autotune-no-cudagraphs) on the same data, timed the same
    way (only: those named; skipped, saying why, without torch)."""
    from .. import peers as peer_mod
    if peer_mod.skipped(progress):
        return {}
    names = [n for n in PEERS if only is None or n in only]
    ref, scale = inputs.reference_with_scale(*args)
    rows = torch_peers.measure(*args, ref, scale, repeats=repeats, names=names, progress=progress)
    peer_mod.release()                  # torch's copies of the inputs back to the card
    for v in rows.values():
        if "median_us" in v:
            v.update(metrics(problem, v["median_us"], ctx))
    return rows


HEAD_TO_HEAD = (("08_fused_gather", "torch_compile_max_autotune_pdl"),)   # timed again, interleaved (results)


@contextlib.contextmanager
def peer_calls(args, problem):
    """{peer: a callable that enqueues one call} for the HEAD_TO_HEAD peers on this workload's data (compiled
    again: inductor's caches on disk make it quick after the peers' turn), let go at the end."""
    from .. import peers as peer_mod
    inputs = torch_peers.torch_inputs(*args[:3])
    calls = {name: torch_peers.ready(name, inputs)[0] for name in {p for _, p in HEAD_TO_HEAD}}
    try:
        yield calls
    finally:
        calls.clear()
        del inputs
        peer_mod.release()


def consistency(row, workload, record) -> str | None:
    """Why a row's figures disagree with its own time, or None: GB/s from µs and the traffic, % from the
    ceiling (each as rounded when recorded)."""
    nbytes = workload.get("min_bytes") or workload.get("context", {}).get("min_bytes")
    copy = workload.get("context", {}).get("copy_GBps") or record.get("copy_GBps")
    if nbytes and "GBps" in row:
        want = nbytes / (row["median_us"] * 1e-6) / 1e9
        if abs(row["GBps"] - want) > 0.06 + 1e-3 * want:
            return f"GBps {row['GBps']} but {nbytes:,} bytes in {row['median_us']} µs is {want:.1f} GB/s"
    needed_us = workload.get("context", {}).get("needed_ceiling_us")
    if "pct_of_needed" in row:
        if not needed_us:
            return f"pct_of_needed {row['pct_of_needed']} but the workload records no needed_ceiling_us"
        want = 100 * needed_us / row["median_us"]
        if abs(row["pct_of_needed"] - want) > 0.06 + 1e-3 * want:
            return (f"pct_of_needed {row['pct_of_needed']} but the needed bytes take {needed_us} µs at the copy "
                    f"ceiling against {row['median_us']} µs: {want:.1f} %")
    if copy and "pct_of_copy" in row and "GBps" in row:
        want = 100 * row["GBps"] / copy
        if abs(row["pct_of_copy"] - want) > 0.06 + 1e-3 * want:
            return f"pct_of_copy {row['pct_of_copy']} but {row['GBps']} GB/s of a {copy} GB/s ceiling is {want:.1f} %"
    return None
