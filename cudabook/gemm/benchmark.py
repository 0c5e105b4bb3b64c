"""The GEMM track's benchmark: C = A @ B at M = N = K = 4096 and 8192, against cuBLAS in the same process.

Peers, timed exactly as the stages are (CUDA events, launches back to back behind a sleeping kernel):
    cublas          torch.matmul on the same bf16 A and B (cuBLAS's bf16 tensor-core GEMM): the yardstick
    cublas_sgemm    torch.matmul on float32 copies with TF32 off (cuBLAS's fp32 SGEMM, no tensor cores): the
                    yardstick of the Numba rungs, which compute in fp32 on the ordinary cores
    cublaslt_fp8, cublaslt_fp8_fast
                    torch._scaled_mm on rung 08's e4m3 inputs and scales (cuBLASLt's FP8 GEMM), with its default
                    accumulation (partial sums promoted) and with use_fast_accum (the tensor cores' own sums,
                    08's arithmetic): the peers of rung 08, judged as 08 is
TFLOP/s counts 2 M N K operations. Every output, peers' too, is checked against the float64 reference.
"""
from __future__ import annotations

import contextlib

import numpy as np

from .checking import judge
from .inputs import random_problem
from .problem import upload

WORKLOADS = [dict(M=4096, N=4096, K=4096), dict(M=8192, N=8192, K=8192)]
COLUMNS = [("µs", "median_us", "{:,.1f}"), ("TFLOP/s", "TFLOPs", "{:,.1f}"),
           ("% of cuBLAS", "pct_of_cublas", "{:.1f}"), ("% of SGEMM", "pct_of_cublas_sgemm", "{:.0f}")]
REQUIRED = ("median_us", "TFLOPs", "pct_of_cublas", "correct")
PLOT_KEY, PLOT_LABEL = "pct_of_cublas", "% of cuBLAS (bf16)"
SIZE_PLAN = dict(x=("M", "N", "K"), values=(256, 512, 1024, 2048, 4096, 8192), workloads="first")   # cudabook.sizes
PEERS_FIRST = True           # the stages' % of cuBLAS needs cuBLAS's time
# tools/sweep_params.py --track gemm: rungs 07 (bf16) and 08 (FP8) at their defaults and with one lever moved,
# at both sizes, beside cuBLAS and cuBLASLt's FP8 GEMM of the same run (what the two rungs stand against)
SWEEP_VARIANTS = [(stage, extra) for stage in ("07_clusters", "08_fp8")
                  for extra in ({}, {"stages": 3}, {"group_m": 4}, {"group_m": 16}, {"cluster": 1},
                                {"mma_depth": 0}, {"store_boxes": 1}, {"bn": 128, "consumers": 1})]


def workload_name(M, N, K):
    return f"gemm M={M} N={N} K={K}"


def prepare(size, rng=None):
    args = random_problem(**size, rng=rng or np.random.default_rng())
    return args, upload(*args)


def context(problem, progress=print) -> dict:
    return {"flops": problem.flops}


def summary(ctx) -> str:
    cb = ctx.get("cublas_TFLOPs")
    return f"cuBLAS {cb:,.0f} TFLOP/s" if cb else "cuBLAS not measured"


def metrics(problem, median_us, ctx) -> dict:
    out = {"TFLOPs": round(problem.flops / (median_us * 1e-6) / 1e12, 2)}
    for peer in ("cublas", "cublas_sgemm"):
        if ctx.get(f"{peer}_us"):
            out[f"pct_of_{peer}"] = round(100 * ctx[f"{peer}_us"] / median_us, 1)
    return out


def peers(args, problem, ctx, *, repeats=25, progress=print) -> dict:
    """cuBLAS bf16 and fp32 (TF32 off) through torch on the same data; their times go into ctx."""
    from .. import bench, peers as peer_mod
    if peer_mod.skipped(progress):
        return {}
    import torch
    progress("cublas, cublas_sgemm: timing …")
    a, b = args
    dev = torch.device("cuda")
    ta = torch.from_numpy(a.view(np.int16)).to(dev).view(torch.bfloat16)
    tb = torch.from_numpy(b.view(np.int16)).to(dev).view(torch.bfloat16)
    fa, fb = ta.float(), tb.float()
    rows = {}
    tf32 = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    try:
        for name, fn in (("cublas", lambda: torch.matmul(ta, tb)), ("cublas_sgemm", lambda: torch.matmul(fa, fb))):
            try:
                got = fn()
                ms = bench.time_ms(fn, repeats=repeats, batch=10)
                host = got.to(torch.bfloat16).view(torch.int16).cpu().numpy().view(np.uint16)
                verdict = judge(host.view(a.dtype), a, b)
                rows[name] = {"median_us": round(ms * 1e3, 2), "correct": verdict.ok}
                ctx[f"{name}_us"] = rows[name]["median_us"]
            except Exception as e:  # a peer that fails is reported, not fatal
                rows[name] = {"error": f"{type(e).__name__}: {str(e).splitlines()[0][:200]}"}
        rows.update(_fp8_peers(torch, dev, a, b, repeats, progress))
    finally:
        torch.backends.cuda.matmul.allow_tf32 = tf32
        ta = tb = fa = fb = got = None            # noqa: F841  (let the tensors go, then
        peer_mod.release()                        # give their memory back to the card, for the stages)
    if "median_us" in rows.get("cublas", {}):
        ctx["cublas_TFLOPs"] = round(problem.flops / (rows["cublas"]["median_us"] * 1e-6) / 1e12, 1)
    for v in rows.values():
        if "median_us" in v:
            v.update(metrics(problem, v["median_us"], ctx))
    return rows


HEAD_TO_HEAD = (("07_clusters", "cublas"), ("08_fp8", "cublaslt_fp8_fast"))   # timed again, interleaved (results)
SUSTAINED_S = 2.0      # and each pair run back to back this long, as a long job meets the power cap (results)
# The README's lead (results.lead_lines): each top rung against the peers that do its arithmetic (bf16 in, or e4m3)
COMPARABLE = {"07_clusters": ("cublas",), "08_fp8": ("cublaslt_fp8", "cublaslt_fp8_fast")}


@contextlib.contextmanager
def peer_calls(args, problem):
    """{peer: a callable that enqueues one call} for the HEAD_TO_HEAD peers, on this workload's data (torch's
    copies of it, let go at the end)."""
    from .. import peers as peer_mod
    import torch
    from .inputs import BF16
    from .s08_fp8 import quantize
    a, b = args
    dev = torch.device("cuda")
    ta = torch.from_numpy(a.view(np.int16)).to(dev).view(torch.bfloat16)
    tb = torch.from_numpy(b.view(np.int16)).to(dev).view(torch.bfloat16)
    calls = {"cublas": lambda: torch.matmul(ta, tb)}
    if hasattr(torch, "_scaled_mm") and hasattr(torch, "float8_e4m3fn"):
        (qa, sa), (qb, sb) = quantize(a.view(BF16)), quantize(b.view(BF16))
        a8 = torch.from_numpy(qa.view(np.uint8)).to(dev).view(torch.float8_e4m3fn)
        bt8 = torch.from_numpy(np.ascontiguousarray(qb.view(np.uint8).T)).to(dev).view(torch.float8_e4m3fn)
        scale_a, scale_b = torch.tensor(sa, device=dev), torch.tensor(sb, device=dev)
        calls["cublaslt_fp8_fast"] = lambda: torch._scaled_mm(a8, bt8.t(), scale_a=scale_a, scale_b=scale_b,
                                                              out_dtype=torch.bfloat16, use_fast_accum=True)
    try:
        yield calls
    finally:
        calls.clear()
        ta = tb = a8 = bt8 = None                 # noqa: F841  (torch's copies go back to the card)
        peer_mod.release()


def _fp8_peers(torch, dev, a, b, repeats, progress) -> dict:
    """cuBLASLt's FP8 GEMM (torch._scaled_mm) on the inputs rung 08 computes with: its e4m3 A and Bt, its scales."""
    from .. import bench
    from .inputs import BF16
    from .s08_fp8 import judge as judge_fp8, quantize
    if not hasattr(torch, "_scaled_mm") or not hasattr(torch, "float8_e4m3fn"):
        return {}
    progress("cublaslt_fp8, cublaslt_fp8_fast: timing …")
    rows = {}
    try:
        (qa, sa), (qb, sb) = quantize(a.view(BF16)), quantize(b.view(BF16))
        a8 = torch.from_numpy(qa.view(np.uint8)).to(dev).view(torch.float8_e4m3fn)
        bt8 = torch.from_numpy(np.ascontiguousarray(qb.view(np.uint8).T)).to(dev).view(torch.float8_e4m3fn)
        scale_a, scale_b = torch.tensor(sa, device=dev), torch.tensor(sb, device=dev)
    except Exception as e:  # a peer that fails is reported, not fatal
        return {"cublaslt_fp8": {"error": f"{type(e).__name__}: {str(e).splitlines()[0][:200]}"}}
    for name, fast in (("cublaslt_fp8", False), ("cublaslt_fp8_fast", True)):
        def fn(fast=fast):
            return torch._scaled_mm(a8, bt8.t(), scale_a=scale_a, scale_b=scale_b, out_dtype=torch.bfloat16,
                                    use_fast_accum=fast)
        try:
            got = fn()
            ms = bench.time_ms(fn, repeats=repeats, batch=10)
            host = got.view(torch.int16).cpu().numpy().view(np.uint16)
            rows[name] = {"median_us": round(ms * 1e3, 2), "correct": judge_fp8(host.view(a.dtype), a, b).ok}
        except Exception as e:  # a peer that fails is reported, not fatal (K and N must be multiples of 16)
            rows[name] = {"error": f"{type(e).__name__}: {str(e).splitlines()[0][:200]}"}
    return rows


def consistency(row, workload, record) -> str | None:
    """Why a row's figures disagree with its own time, or None: TFLOP/s from µs and 2MNK, % of cuBLAS from
    cuBLAS's time in the same workload (each as rounded when recorded)."""
    size = workload.get("size", {})
    flops = workload.get("context", {}).get("flops") or (2 * size["M"] * size["N"] * size["K"] if size else None)
    if flops and "TFLOPs" in row:
        want = flops / (row["median_us"] * 1e-6) / 1e12
        if abs(row["TFLOPs"] - want) > 0.006 + 1e-3 * want:
            return f"TFLOPs {row['TFLOPs']} but {flops:,} FLOPs in {row['median_us']} µs is {want:.2f} TFLOP/s"
    for peer in ("cublas", "cublas_sgemm"):
        peer_us = workload.get("peers", {}).get(peer, {}).get("median_us")
        key = f"pct_of_{peer}"
        if peer_us and key in row:
            want = 100 * peer_us / row["median_us"]
            if abs(row[key] - want) > 0.06 + 1e-3 * want:
                return f"{key} {row[key]} but {peer} took {peer_us} µs against {row['median_us']} µs: {want:.1f} %"
    return None
