"""The attention track's benchmark: B = 4 batches of H = 16 heads, N = 4096 queries and keys, d = 128 and 64,
causal and not, against PyTorch's scaled_dot_product_attention (SDPA) in the same process.

Peers, timed exactly as the stages are (CUDA events, launches back to back behind a sleeping kernel), on the
same bf16 q, k, v, each SDPA backend that runs on this machine, forced with torch.nn.attention.sdpa_kernel:
    sdpa_flash       FlashAttention (2, or 3 where PyTorch has it)
    sdpa_cudnn       cuDNN's fused attention
    sdpa_efficient   the memory-efficient kernel (xFormers')
A backend that refuses the problem (or is missing from this PyTorch) is recorded as not run, with the reason.

Figures of a row:
    TFLOPs       4 B H Nq Nk d operations (two matrix products of 2 Nq Nk d each per head) per second, half of
                 that when causal: the masked half is work nobody needs, so it does not count
    pct_of_sdpa  the fastest SDPA backend's time (of those that are right) against the row's
Every output, the peers' too, is checked against the float64 reference: at this size a random sample of 8 heads
x 192 rows against float64, and every element for NaN and for staying within the range of v (checking.py).
"""
from __future__ import annotations

import contextlib

import numpy as np

from .checking import judge
from .inputs import random_problem
from .problem import upload

_SIZE = dict(B=4, H=16, N=4096)
WORKLOADS = [dict(_SIZE, d=d, causal=causal) for d in (128, 64) for causal in (False, True)]
COLUMNS = [("µs", "median_us", "{:,.1f}"), ("TFLOP/s", "TFLOPs", "{:,.1f}"), ("% of SDPA", "pct_of_sdpa", "{:.1f}")]
REQUIRED = ("median_us", "TFLOPs", "correct")
PLOT_KEY, PLOT_LABEL = "pct_of_sdpa", "% of SDPA (its fastest backend)"
SIZE_PLAN = dict(x=("N",), values=(512, 1024, 2048, 4096, 8192), workloads="all")   # cudabook.sizes: d x causal panels
PEERS_FIRST = True           # % of SDPA needs SDPA's time
BACKENDS = (("sdpa_flash", "FLASH_ATTENTION"), ("sdpa_cudnn", "CUDNN_ATTENTION"),
            ("sdpa_efficient", "EFFICIENT_ATTENTION"))
# tools/sweep_params.py: the fast rungs' parameters, swept on a GPU at the benchmark's size
SWEEP_VARIANTS = ([("05_wgmma_tma", {}), ("06_warp_specialized", {})]
                  + [("06_warp_specialized", extra)
                     for extra in ({"bkv": 64}, {"pingpong": False}, {"overlap": False}, {"persistent": False},
                                   {"persistent": True}, {"persistent": True, "schedule": "dynamic"})]
                  + [("06_warp_specialized", {"consumers": c}) for c in (1, 2, 3)]      # 3: d = 64 only
                  + [("06_warp_specialized", {"stages": s}) for s in (2, 3, 4)])


def workload_name(B, H, N, d, causal=False):
    return f"attention B={B} H={H} N={N} d={d} causal={bool(causal)}"


def flops(B, H, N, d, causal=False) -> int:
    """4 B H N^2 d, half of it when causal (Problem.flops for Nq = Nk = N)."""
    total = 4 * B * H * N * N * d
    return total // 2 if causal else total


def prepare(size, rng=None):
    """Fresh random inputs of this size, uploaded: (inputs, problem)."""
    args = random_problem(size["B"], size["H"], size["N"], size["N"], size["d"], causal=size.get("causal", False),
                          rng=rng or np.random.default_rng())
    return args, upload(*args)


def context(problem, progress=print) -> dict:
    return {"flops": problem.flops}


def summary(ctx) -> str:
    if not ctx.get("sdpa_us"):
        return "SDPA not measured"
    return f"SDPA ({ctx.get('sdpa_best', '?')}) {ctx['sdpa_TFLOPs']:,.0f} TFLOP/s"


def metrics(problem, median_us, ctx) -> dict:
    out = {"TFLOPs": round(problem.flops / (median_us * 1e-6) / 1e12, 2)}
    if ctx.get("sdpa_us"):
        out["pct_of_sdpa"] = round(100 * ctx["sdpa_us"] / median_us, 1)
    return out


def fastest(rows) -> tuple[str, float] | None:
    """(name, µs) of the fastest SDPA backend among those whose output is right (of all that ran, if none is)."""
    timed = {k: v for k, v in rows.items() if k.startswith("sdpa_") and "median_us" in v}
    pool = {k: v for k, v in timed.items() if v.get("correct")} or timed
    if not pool:
        return None
    name = min(pool, key=lambda k: pool[k]["median_us"])
    return name, pool[name]["median_us"]


def _backend_error(e) -> str:
    text = " ".join(str(e).split())
    return f"not run: {type(e).__name__}: {text[:240]}"


def peers(args, problem, ctx, *, repeats=25, progress=print) -> dict:
    """SDPA with each backend on the same data, timed the same way; the fastest right one's time goes into ctx.
    Without torch (or without a GPU for it) there are no peers, and the table has no % of SDPA."""
    from .. import bench, peers as peer_mod
    why = peer_mod.available()
    if why:
        progress(f"SDPA peers skipped: {why}; the table will have no % of SDPA")
        return {}
    import torch
    import torch.nn.functional as F
    try:
        from torch.nn.attention import SDPBackend, sdpa_kernel
    except ImportError as e:
        progress(f"SDPA peers skipped: this PyTorch has no torch.nn.attention.sdpa_kernel ({e})")
        return {}
    q, k, v, causal = args
    dev = torch.device("cuda")
    tensors = [torch.from_numpy(np.ascontiguousarray(x).view(np.int16)).to(dev).view(torch.bfloat16)
               for x in (q, k, v)]
    rows = {}
    progress(f"SDPA backends: timing {', '.join(name for name, _ in BACKENDS)} …")
    for name, backend in BACKENDS:
        try:
            chosen = getattr(SDPBackend, backend)
        except AttributeError:
            rows[name] = {"skipped": f"not run: this PyTorch has no SDPBackend.{backend}"}
            continue

        def call():
            return F.scaled_dot_product_attention(*tensors, is_causal=causal)
        try:
            with sdpa_kernel([chosen]):
                got = call()
                ms = bench.time_ms(call, repeats=repeats, batch=10)
            host = got.view(torch.int16).cpu().numpy().view(np.uint16)
            del got
            rows[name] = {"median_us": round(ms * 1e3, 2), "correct": judge(host, *args).ok}
        except Exception as e:  # a backend that refuses the problem is reported, not fatal
            rows[name] = {"skipped": _backend_error(e)}
        progress(f"{name}: {rows[name]}")
    tensors.clear()
    peer_mod.release()                            # leave the memory to the stages (rung 01 stores S: gigabytes)
    best = fastest(rows)
    if best:
        ctx["sdpa_best"], ctx["sdpa_us"] = best
        ctx["sdpa_TFLOPs"] = round(problem.flops / (best[1] * 1e-6) / 1e12, 1)
    for row in rows.values():
        if "median_us" in row:
            row.update(metrics(problem, row["median_us"], ctx))
    return rows


HEAD_TO_HEAD = (("06_warp_specialized", "sdpa_cudnn"), ("06_warp_specialized", "sdpa_flash"))   # (results)
SUSTAINED_S = 2.0      # and each pair run back to back this long, as a long job meets the power cap (results)


@contextlib.contextmanager
def peer_calls(args, problem):
    """{backend's row name: a callable that enqueues one SDPA call with that backend alone} on this workload's
    data (torch's copies of it, let go at the end)."""
    from .. import peers as peer_mod
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel
    q, k, v, causal = args
    dev = torch.device("cuda")
    tensors = [torch.from_numpy(np.ascontiguousarray(x).view(np.int16)).to(dev).view(torch.bfloat16)
               for x in (q, k, v)]

    def call_with(chosen):
        def call():
            with sdpa_kernel([chosen]):
                return F.scaled_dot_product_attention(*tensors, is_causal=causal)
        return call
    calls = {name: call_with(getattr(SDPBackend, backend)) for name, backend in BACKENDS
             if hasattr(SDPBackend, backend)}
    try:
        yield calls
    finally:
        calls.clear()
        tensors.clear()
        peer_mod.release()


def consistency(row, workload, record) -> str | None:
    """Why a row's figures disagree with its own time, or None: TFLOP/s from µs and the FLOP count, % of SDPA
    from the fastest SDPA backend's time in the same workload (each as rounded when recorded)."""
    size = workload.get("size", {})
    count = workload.get("context", {}).get("flops") or (flops(**size) if size else None)
    us = row["median_us"]
    if count and "TFLOPs" in row:
        want = count / (us * 1e-6) / 1e12
        if abs(row["TFLOPs"] - want) > 0.006 + 1e-3 * want:
            return f"TFLOPs {row['TFLOPs']} but {count:,} FLOPs in {us} µs is {want:.2f} TFLOP/s"
    best = fastest(workload.get("peers", {}))
    if "pct_of_sdpa" in row:
        if not best:
            return f"pct_of_sdpa {row['pct_of_sdpa']} but no SDPA backend was timed in this workload"
        want = 100 * best[1] / us
        if abs(row["pct_of_sdpa"] - want) > 0.06 + 1e-3 * want:
            return f"pct_of_sdpa {row['pct_of_sdpa']} but {best[0]} took {best[1]} µs against {us} µs: {want:.1f} %"
    return None
