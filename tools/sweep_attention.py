"""The attention track's Hopper rungs (05, 06), their parameters swept on this GPU at the benchmark's size
(B=4 H=16 N=4096, d = 128 and 64, causal and not): each variant checked against the float64 reference
(attention.judge: a sample of heads and rows), timed with CUDA events (back-to-back launches, median), beside
the fastest SDPA backend of the same run. Writes results/sweeps/<gpu>_attention.json.

    python tools/sweep_attention.py [d ...]
"""
import json
import sys

import numpy as np

from cudabook import attention, bench, device, results
from cudabook.attention import benchmark

VARIANTS = [("05_wgmma_tma", {}), ("06_warp_specialized", {})]
VARIANTS += [("06_warp_specialized", dict(bkv=b, **extra)) for b in (64, 128)
             for extra in ({}, {"pingpong": False}, {"overlap": False}, {"stages": 3})]
VARIANTS += [("06_warp_specialized", {"consumers": 1})]


def main():
    gpu = device.gpu()
    if gpu is None:
        sys.exit(f"needs a GPU: {device.why_no_gpu()}")
    dims = [int(a) for a in sys.argv[1:]] or [128, 64]
    rows = []
    for size in benchmark.WORKLOADS:
        if size["d"] not in dims:
            continue
        name = benchmark.workload_name(**size)
        args, problem = benchmark.prepare(size, rng=np.random.default_rng(0))
        ctx = benchmark.context(problem)
        peers = benchmark.peers(args, problem, ctx, repeats=10, progress=lambda *a: None)
        print(f"{name}: {benchmark.summary(ctx)}")
        for stage, params in VARIANTS:
            module = attention.stage(stage)
            try:
                problem.poison()
                module.launch(problem, **params)
                ok = attention.judge(problem.result(), *args).ok
                ms = bench.time_ms(lambda: module.launch(problem, **params), repeats=10, batch=5)
            except Exception as e:  # a variant that does not fit is reported, not fatal
                print(f"  {stage:22s} {str(params):34s} not run: {type(e).__name__}: {e}")
                continue
            row = {"workload": name, "stage": stage, "params": params, "median_us": round(ms * 1e3, 1),
                   "correct": ok, **benchmark.metrics(problem, ms * 1e3, ctx)}
            rows.append(row)
            print(f"  {stage:22s} {str(params):34s} {ms * 1e3:9.1f} us {row['TFLOPs']:7.1f} TFLOP/s "
                  f"{row.get('pct_of_sdpa', float('nan')):6.1f} % of SDPA  {'ok' if ok else 'WRONG'}")
        rows += [{"workload": name, "stage": k, **v} for k, v in peers.items()]
    record = {"gpu": gpu.name, "commit": results._commit(), "source_digest": results.source_digest(), "rows": rows}
    out = results.RESULTS / "sweeps" / f"{results.slug(gpu.name)}_attention.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(record, indent=1) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
