"""Does the last wave cost attention 06 its distance from cuDNN? Rung 06 against SDPA's cuDNN backend at head
counts whose blocks fill a whole number of waves and at counts that leave a part-filled last wave.

A block of rung 06 owns 64 x consumers query rows of one (batch, head) and every key; one block fits an SM. At
the benchmark's size (B = 4, H = 16, N = 4096, d = 128: 2,048 blocks of 128 rows) an H100 or H200 (132 SMs)
runs 15.5 waves, so the last wave leaves half the SMs idle for a block's time. If the wave count is the gap,
rung 06 against cuDNN should improve where the blocks fill whole waves (B H = 33 or 66 heads: 8 and 16 waves).

Each case times the two in six interleaved rounds (bench.head_to_head) and checks rung 06's output once.
Usage (GPU): python tools/probe_attention_waves.py [--d 128] [--heads 32,33,64,66] [--out FILE]
"""
from __future__ import annotations

import argparse
import json
import pathlib
import statistics
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--d", type=int, default=128)
    ap.add_argument("--n", type=int, default=4096)
    ap.add_argument("--heads", default="32,33,64,66", help="B x H totals (B = 1, H = this)")
    ap.add_argument("--nk", default=None, help="keys, comma-separated (default: N): the time a block takes "
                    "against its key tiles, whose intercept is what a block costs besides its tiles")
    ap.add_argument("--causal", action="store_true")
    ap.add_argument("--params", default="{}", help="rung 06's parameters, JSON")
    ap.add_argument("--out", default=None)
    a = ap.parse_args(argv)

    import numpy as np
    from numba import cuda

    import time

    from cudabook import bench, results
    from cudabook.attention import benchmark as bm
    from cudabook.attention import s06_warp_specialized as s06
    from cudabook.attention.checking import judge

    params = json.loads(a.params)
    why = s06.unavailable()
    if why:
        print(f"rung 06 cannot run here: {why}")
        return 1
    sms = cuda.get_current_device().MULTIPROCESSOR_COUNT
    cfg = s06.config(a.d, a.causal, **params)
    rows_a_block = 64 * cfg["CONSUMERS"]
    cases = []
    from cudabook.attention.inputs import random_problem
    from cudabook.attention.problem import upload
    for heads, nk in ((int(h), int(k)) for h in a.heads.split(",") for k in (a.nk or str(a.n)).split(",")):
        args = random_problem(1, heads, a.n, nk, a.d, causal=a.causal, rng=np.random.default_rng(heads))
        problem = upload(*args)
        s06.launch(problem, **params)
        cuda.synchronize()
        ok = judge(problem.out.copy_to_host(), *args).ok
        blocks = heads * -(-a.n // rows_a_block)
        with bm.peer_calls(args, problem) as calls:
            timed = bench.head_to_head({"06": lambda: s06.launch(problem, **params), "sdpa_cudnn": calls["sdpa_cudnn"]})
        ratios = [p / s for s, p in zip(timed["06"], timed["sdpa_cudnn"])]
        case = dict(heads=heads, nk=nk, blocks=blocks, waves=round(blocks / sms, 3), correct=ok,
                    stage_us=[round(1e3 * t, 2) for t in timed["06"]],
                    cudnn_us=[round(1e3 * t, 2) for t in timed["sdpa_cudnn"]],
                    ratio=round(statistics.median(ratios), 4))
        cases.append(case)
        print(f"B H = {heads:3d}, Nk = {nk:5d}: {blocks:5d} blocks, {case['waves']:6.2f} waves, 06 "
              f"{statistics.median(case['stage_us']):8.1f} µs, cuDNN {statistics.median(case['cudnn_us']):8.1f} µs, "
              f"cuDNN / 06 = {case['ratio']:.3f}x, correct={ok}", flush=True)
        del problem
    gpu = cuda.get_current_device().name
    gpu = gpu.decode() if isinstance(gpu, bytes) else gpu
    out = dict(kind="attention 06 against cuDNN by the waves its blocks fill", gpu=gpu, commit=results._commit(),
               date=time.strftime("%Y-%m-%dT%H:%M:%S%z"), d=a.d, n=a.n, causal=a.causal, params=params, sms=sms,
               cases=cases)
    path = pathlib.Path(a.out) if a.out else results.RESULTS / "readings" / f"{results.slug(gpu)}_attention_waves.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(out, indent=1) + "\n")
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
