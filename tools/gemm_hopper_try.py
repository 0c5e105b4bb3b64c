"""Scratch: correctness and timing of the Hopper GEMM rungs (05-07) against cuBLAS (torch.matmul), one process.

    python tools/gemm_hopper_try.py RUNG [--sizes 4096,8192] [--variants JSON] [--check-only]
RUNG: 05, 06 or 07. Prints a table; cuBLAS is timed in the same process on the same data.
"""
import argparse
import json
import sys
import time

import numpy as np

import cudabook  # noqa: F401
from cudabook import bench, device, gemm
from cudabook.gemm import checking

EXTRA = [("1000^3", 1000, 1000, 1000), ("129x257x72", 129, 257, 72), ("8x8x8", 8, 8, 8), ("K=7", 100, 64, 7),
         ("N=1", 300, 1, 300), ("M ragged big", 1037, 600, 520)]


SMALL = [("129x257x72", 129, 257, 72), ("K=7", 100, 64, 7), ("333x517x200", 333, 517, 200)]


def check(mod, params, shapes, rng):
    ok = True
    for name, M, N, K in shapes:
        a, b = gemm.random_problem(M, N, K, rng=rng)
        p = gemm.upload(a, b)
        p.poison()
        mod.launch(p, **params)
        v = gemm.judge(p.result(), a, b)
        if not v.ok:
            ok = False
            print(f"  FAIL {mod.NAME} {params} {name} ({M},{N},{K}):\n{v}")
    return ok


def torch_of(p):
    import torch
    ta = torch.from_numpy(p.host_a.view(np.int16)).view(torch.bfloat16).cuda()
    tb = torch.from_numpy(p.host_b.view(np.int16)).view(torch.bfloat16).cuda()
    return ta, tb


def _raw_clusters(mod):
    from cuda.bindings import driver as drv
    out = []
    for kern in mod.s05._prepared.values():
        if kern.name != mod.KERNEL:
            continue
        conf = drv.CUlaunchConfig()
        conf.gridDimX, conf.gridDimY, conf.gridDimZ = 132, 1, 1
        conf.blockDimX, conf.blockDimY, conf.blockDimZ = 384, 1, 1
        conf.sharedMemBytes = 200000
        out.append(drv.cuOccupancyMaxActiveClusters(kern.function, conf))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("rung")
    ap.add_argument("--sizes", default="4096,8192")
    ap.add_argument("--variants", default="[{}]")
    ap.add_argument("--check-only", action="store_true")
    ap.add_argument("--no-check", action="store_true")
    ap.add_argument("--small", action="store_true", help="check only a few small ragged shapes (for sanitizers)")
    args = ap.parse_args()
    mod = gemm.stage(args.rung)
    variants = json.loads(args.variants)
    g = device.gpu()
    print(f"GPU: {g.name} ({g.sms} SMs), {mod.NAME}")
    rng = np.random.default_rng(1)
    if not args.no_check:
        for params in variants:
            t0 = time.time()
            shapes = SMALL if args.small else checking.cases(simulator=False) + EXTRA
            ok = check(mod, params, shapes, rng)
            print(f"check {params}: {'PASS' if ok else 'FAIL'} ({time.time() - t0:.1f} s)")
    if args.check_only:
        return
    import torch
    rows = []
    for n in [int(s) for s in args.sizes.split(",")]:
        a, b = gemm.random_problem(n, n, n, rng=rng)
        p = gemm.upload(a, b)
        ta, tb = torch_of(p)
        tc = torch.empty((n, n), dtype=torch.bfloat16, device="cuda")
        flops = 2.0 * n ** 3
        t_cublas = bench.time_ms(lambda: torch.matmul(ta, tb, out=tc), repeats=30)
        ref = tc.float()
        rows.append((n, "cuBLAS (torch.matmul)", t_cublas, flops / t_cublas / 1e9, 100.0, ""))
        for params in variants:
            try:
                mod.launch(p, **params)
                got = torch.from_numpy(p.result().view(np.int16)).view(torch.bfloat16).cuda().float()
                err = f"{(got - ref).abs().max().item():.3g}/{int((got != ref).sum().item())}"
                t = bench.time_ms(lambda: mod.launch(p, **params), repeats=30)
                rows.append((n, json.dumps(params), t, flops / t / 1e9, 100.0 * t_cublas / t, err))
            except Exception as e:  # noqa: BLE001
                rows.append((n, json.dumps(params), float("nan"), float("nan"), float("nan"), repr(e)[:80]))
            print(rows[-1], flush=True)
    print(f"\n{mod.NAME} on {g.name}")
    print(f"{'n':>5} {'variant':60} {'ms':>8} {'TFLOP/s':>8} {'%cuBLAS':>8} maxdiff_vs_cuBLAS")
    for n, v, t, tf, pc, err in rows:
        print(f"{n:>5} {v:60} {t:8.3f} {tf:8.1f} {pc:8.1f} {err}")


if __name__ == "__main__":
    sys.exit(main())
