"""Scratch: correctness + a tile/stage sweep of GEMM 04 against torch.matmul (cuBLAS), on one GPU.

    python tools/gemm_s04_try.py            # everything; logs a table at the end
    python tools/gemm_s04_try.py --small    # one 129x257x72 product (for compute-sanitizer)
"""
import os
import sys
import time

import numpy as np

import cudabook  # noqa: F401
from cudabook import bench, device, gemm, nvrtc
from cudabook.gemm import s04_mma_sync as s04

if "--small" in sys.argv:
    a, b = gemm.random_problem(129, 257, 72)
    v = gemm.judge(gemm.run("04_mma_sync", a, b), a, b)
    print(v)
    sys.exit(0 if v.ok else 1)

if "--ncu" in sys.argv:   # one launch each, swizzled then plain, for ncu's bank-conflict counters
    a, b = gemm.random_problem(2048, 2048, 2048)
    p = gemm.upload(a, b)
    for sw in (True, False):
        s04.launch(p, swizzle=sw)
    from numba import cuda
    cuda.synchronize()
    sys.exit(0)

out_dir = os.environ.get("OUT", "/tmp")
lines = []


def say(*x):
    s = " ".join(str(v) for v in x)
    print(s, flush=True)
    lines.append(s)


g = device.gpu()
say(f"GPU: {g.name} (cc {g.cc}), {g.sms} SMs")

CONFIGS = {
    "128x256 w2x4 bk32 s4 (default)": dict(),
    "128x256 w2x4 bk32 s3": dict(stages=3),
    "128x256 w2x4 bk32 s2": dict(stages=2),
    "128x128 w2x2 bk32 s4": dict(bn=128, warps_n=2),
    "128x256 w2x4 bk32 s4 noswz": dict(swizzle=False),
}

# correctness of every config on a ragged and an aligned problem
for name, cfg in CONFIGS.items():
    for (M, N, K) in [(333, 517, 200), (512, 512, 512), (129, 257, 72)]:
        a, b = gemm.random_problem(M, N, K)
        try:
            v = gemm.judge(gemm.run("04_mma_sync", a, b, **cfg), a, b)
            ok = v.ok
        except Exception as e:  # noqa: BLE001
            ok, v = False, f"{type(e).__name__}: {e}"
        if not ok:
            say(f"WRONG {name} {M}x{N}x{K}: {str(v)[:600]}")
say("correctness sweep done")

for name, cfg in [("default", {}), ("128x256 w2x4", dict(bn=256, warps_n=4, stages=3)),
                  ("128x128 w2x4", dict(warps_n=4))]:
    cub = s04.compile_cubin(nvrtc.default_arch(), **cfg)
    say(f"resources {name}: {nvrtc.resource_usage(cub).get(s04.KERNEL)}")

import torch  # noqa: E402

rows = []


def torch_ms(p):
    ta = torch.from_numpy(p.host_a.view(np.int16)).cuda().view(torch.bfloat16)
    tb = torch.from_numpy(p.host_b.view(np.int16)).cuda().view(torch.bfloat16)
    tc = torch.empty((ta.shape[0], tb.shape[1]), dtype=torch.bfloat16, device="cuda")
    torch.matmul(ta, tb, out=tc)
    torch.cuda.synchronize()
    ours = p.result().astype(np.float32)
    theirs = tc.view(torch.int16).cpu().numpy().view(np.uint16).view(gemm.BF16).astype(np.float32)
    diff = float(np.max(np.abs(ours - theirs)))
    t = bench.time_ms(lambda: torch.matmul(ta, tb, out=tc), warmup=3, repeats=15, batch=3)
    return t, diff


for n in (4096, 8192):
    t0 = time.time()
    a, b = gemm.random_problem(n, n, n)
    p = gemm.upload(a, b)
    flops = 2 * n ** 3
    results = {}
    names = list(CONFIGS) if n == 4096 else None
    for name in (names or []):
        cfg = CONFIGS[name]
        try:
            ms = bench.time_ms(lambda: s04.launch(p, **cfg), warmup=3, repeats=15, batch=3)
            results[name] = ms
            say(f"{n}: {name:32s} {ms:8.3f} ms {flops / ms / 1e9:7.1f} TFLOP/s")
        except Exception as e:  # noqa: BLE001
            say(f"{n}: {name} failed: {type(e).__name__}: {e}")
    if n == 8192:
        best = sorted(best4096, key=best4096.get)[:2]
        for name in best + ["128x256 w2x4 bk32 s4 noswz"]:
            if name in results:
                continue
            ms = bench.time_ms(lambda: s04.launch(p, **CONFIGS[name]), warmup=2, repeats=7, batch=2)
            results[name] = ms
            say(f"{n}: {name:32s} {ms:8.3f} ms {flops / ms / 1e9:7.1f} TFLOP/s")
    else:
        best4096 = {k: v for k, v in results.items() if "noswz" not in k and "group1" not in k and "v1" not in k}
    # ours must be in p.c for the comparison with torch: run the best once more
    bestname = min((k for k in results if "noswz" not in k), key=results.get)
    p.poison()
    s04.launch(p, **CONFIGS[bestname])
    tms, diff = torch_ms(p)
    say(f"{n}: torch.matmul (cuBLAS)              {tms:8.3f} ms {flops / tms / 1e9:7.1f} TFLOP/s; "
        f"max |ours - torch| = {diff:.3g}")
    for name, ms in results.items():
        rows.append((n, name, ms, flops / ms / 1e9, 100 * tms / ms))
    rows.append((n, "torch.matmul", tms, flops / tms / 1e9, 100.0))
    if n == 4096:
        v = gemm.judge(p.result(), a, b)
        say(f"4096 judge ({bestname}): {v.message.splitlines()[0]}")
    say(f"({n} took {time.time() - t0:.0f} s)")
    del p

say("")
say(f"GPU: {g.name}")
say(f"{'n':>5} {'config':34s} {'ms':>8} {'TFLOP/s':>8} {'% cuBLAS':>9}")
for n, name, ms, tf, pct in rows:
    say(f"{n:5d} {name:34s} {ms:8.3f} {tf:8.1f} {pct:8.1f}%")
with open(os.path.join(out_dir, "table.txt"), "w") as f:
    f.write("\n".join(lines) + "\n")
