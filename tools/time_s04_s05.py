"""Time stages 04 and 05 at the benchmark size, against the copy ceiling and stage 01 measured in the same run,
and sweep their main knobs a little.

    source tools/gpu_env.sh; python3 tools/time_s04_s05.py [--quick]

Prints microseconds, GB/s of the problem's minimum traffic and % of the device-to-device copy, two ways:
- "one launch": cudabook.bench (CUDA events around a single launch, median): this includes the host's time to
  launch (Numba prepares every argument in Python), since the GPU is idle until the launch arrives;
- "back to back": ten launches between the two events, divided by ten: the GPU's own time per launch.
Writes every measurement to $OUT/time_s04_s05.json when $OUT is set.
"""
from __future__ import annotations

import itertools
import json
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import cudabook  # noqa: E402  (decides GPU or simulator before numba is imported)
from cudabook import bench, check, device  # noqa: E402
from cudabook.resample import random_problem, s01_naive, upload  # noqa: E402
from cudabook.resample import s04_smem_windows as s04  # noqa: E402
from cudabook.resample import s05_double_buffered as s05  # noqa: E402
from numba import cuda  # noqa: E402

SIZE = (64, 4096, 4096, 256)
# (targets_per_block, window_rows, chunk_cols): a window of about 2 x targets_per_block rows almost always
# holds a run of sorted targets when S = T; fewer rows save shared memory but send more runs to the fallback.
SHAPES = {s04.NAME: [(16, 32, 256), (24, 48, 256), (32, 64, 256), (32, 48, 256), (48, 80, 128), (12, 28, 256)],
          s05.NAME: [(16, 32, 256), (24, 40, 256), (16, 40, 256), (32, 64, 128), (24, 48, 128), (12, 28, 256)]}
THREADS = [64, 128, 256]
BLOCKS_PER_SM = [4, 8, 16]            # an upper bound: the launch never exceeds what fits on an SM
REGISTER_CAPS = {s04.NAME: [0, 64, 80], s05.NAME: [0, 168, 128, 96]}


def own_kernel(stage):
    return s05.resample_double if stage is s05 else s04.resample_windows


def main(quick=False):
    g = device.gpu()
    if g is None:
        sys.exit("timings need a GPU: " + str(device.why_no_gpu()))
    info = device.describe()
    head = (f"GPU: {g.name} (cc {g.cc}, {g.sms} SMs, driver CUDA {g.driver_version}); numba-cuda "
            f"{info['packages']['numba-cuda']}, numpy {info['packages']['numpy']}")
    print(head)
    B, S, T, D = SIZE
    p = upload(*random_problem(B, S, T, D, rng=0))
    record = {"gpu": info, "size": dict(B=B, S=S, T=T, D=D), "min_bytes": p.min_bytes, "rows": []}
    t_start = time.time()

    copy = bench.copy_GBps(p.min_bytes)
    n = p.min_bytes // 2 // 4
    src = cuda.to_device(np.arange(n, dtype=np.int32))
    dst = cuda.device_array_like(src)
    copy_ms10 = bench.time_ms(lambda: [dst.copy_to_device(src) for _ in range(10)], warmup=1, repeats=10)
    copy_b2b = 2 * n * 4 / (copy_ms10 * 1e-4) / 1e9
    del src, dst
    record.update(copy_GBps=copy, copy_back_to_back_GBps=copy_b2b)

    def timed(label, stage, repeats=25, show=True, **params):
        r = bench.measure_stage(stage.launch, p, repeats=repeats, **params)
        ms10 = bench.time_ms(lambda: [stage.launch(p, **params) for _ in range(10)], warmup=1,
                             repeats=max(5, repeats // 5))
        row = dict(stage=stage.NAME, label=label, params={k: v for k, v in params.items() if k != "kernel"},
                   median_us=r["median_us"], GBps=r["GBps"], pct_copy=round(100 * r["GBps"] / copy, 1),
                   b2b_us=round(ms10 * 100, 2))
        row["b2b_GBps"] = round(p.min_bytes / (row["b2b_us"] * 1e-6) / 1e9, 1)
        row["b2b_pct"] = round(100 * row["b2b_GBps"] / copy, 1)
        record["rows"].append(row)
        if show:
            print(f"  {label:44.44s} {row['median_us']:7.1f} us {row['GBps']:6.0f} GB/s {row['pct_copy']:5.1f}% "
                  f"| b2b {row['b2b_us']:6.1f} us {row['b2b_GBps']:6.0f} GB/s {row['b2b_pct']:5.1f}%")
        return row

    def host_us(stage, **params):
        """Host time to enqueue one launch (the Python side), averaged over 20 launches."""
        stage.launch(p, **params)
        cuda.synchronize()
        t = time.perf_counter()
        for _ in range(20):
            stage.launch(p, **params)
        dt = (time.perf_counter() - t) / 20 * 1e6
        cuda.synchronize()
        return round(dt, 1)

    def occupancy(stage, params):
        return s04.occupancy(p, own_kernel(stage), 2 if stage is s05 else 1, **{**stage.PARAMS, **params})

    print("\n  stage / params                               one launch: us  GB/s  %copy | back to back: us GB/s %copy")
    base_rows = {"01": timed("01_naive (default)", s01_naive)}
    for name in ("s02_warp_shuffles", "s03_coalesced"):
        try:
            mod = __import__(f"cudabook.resample.{name}", fromlist=["launch"])
            base_rows[name[1:3]] = timed(f"{mod.NAME} (default)", mod)
        except Exception as e:  # another helper's stage: optional here
            print(f"  {name}: not timed ({type(e).__name__}: {str(e)[:100]})")
    d04 = timed("04_smem_windows (default)", s04)
    d05 = timed("05_double_buffered (default)", s05)
    record["host_us_per_launch"] = {"01": host_us(s01_naive), "04": host_us(s04), "05": host_us(s05)}
    print(f"  host time to enqueue one launch (us): {record['host_us_per_launch']}")
    for stage in (s04, s05):
        print(f"  {stage.NAME} default: {occupancy(stage, {})}")

    best = {}
    for stage in (s04, s05):
        rows = []
        configs = list(itertools.product(THREADS, SHAPES[stage.NAME], BLOCKS_PER_SM, REGISTER_CAPS[stage.NAME]))
        if quick:
            configs = configs[::7]
        for threads, (tpb, wrows, chunk), bps, cap in configs:
            params = dict(threads=threads, targets_per_block=tpb, window_rows=wrows, chunk_cols=chunk,
                          blocks_per_sm=bps, max_registers=cap)
            try:
                rows.append(timed(f"sweep {params}", stage, repeats=10, show=False, **params))
            except ValueError:
                continue          # too much shared memory, or too many registers for this many threads
        rows.sort(key=lambda r: r["b2b_us"])
        knob = {}
        for r in rows:
            q = r["params"]
            for key in (("threads", q["threads"]), ("bps", q["blocks_per_sm"]), ("regs", q["max_registers"]),
                        ("shape", (q["targets_per_block"], q["window_rows"], q["chunk_cols"]))):
                knob[key] = min(knob.get(key, 1e9), r["b2b_us"])
        print(f"\n{stage.NAME}: {len(rows)} configurations; best back-to-back us by knob: "
              + "; ".join(f"{k[0]}={k[1]}: {v:.0f}" for k, v in sorted(knob.items(), key=str)))
        top = [timed(str(r["params"])[1:-1], stage, repeats=25, **r["params"]) for r in rows[:4]]
        winner = min(top, key=lambda r: r["median_us"])
        for vec in (8, 4):
            timed(f"best, vec_bytes={vec}", stage, **{**winner["params"], "vec_bytes": vec})
        winner["occupancy"] = occupancy(stage, winner["params"])
        best[stage.NAME] = winner
        print(f"  winner: {winner['occupancy']}")
        for label, params in (("default", {}), ("winner", winner["params"])):
            print(f"  {label} occupancy: {occupancy(stage, params)}")

    print("\ncorrectness at this size (fresh inputs):")
    for stage in (s04, s05):
        w = best[stage.NAME]
        params = w["params"]
        for label, prm in (("default", {}), ("winner", params)):
            v = check.check_launch(stage.launch, B, S, T, D, **prm)
            print(f"  {stage.NAME} {label}: {v.message.splitlines()[0]}")
    record["best"] = best

    print(f"\nsummary: {head}")
    print(f"B={B} S={S} T={T} D={D}, sorted targets, {p.min_bytes / 1e6:.1f} MB of minimum traffic")
    print(f"copy ceiling (bench.copy_GBps): {copy:.0f} GB/s; % of copy below is of this, both columns "
          f"(ten copies back to back: {copy_b2b:.0f} GB/s, bound by the host's time per Numba copy call)")
    for label, row in [*((f"{k} default", r) for k, r in base_rows.items()), ("04 default", d04),
                       ("05 default", d05), ("04 best", best[s04.NAME]), ("05 best", best[s05.NAME])]:
        extra = ""
        print(f"  {label:11s} one launch {row['median_us']:7.1f} us {row['pct_copy']:5.1f}% | back to back "
              f"{row['b2b_us']:6.1f} us {row['b2b_GBps']:6.0f} GB/s {row['b2b_pct']:5.1f}%  {extra}"
              f"{row['params'] or ''}")
    print(f"({time.time() - t_start:.0f} s)")
    out = os.environ.get("OUT")
    if out:
        with open(os.path.join(out, "time_s04_s05.json"), "w") as f:
            json.dump(record, f, indent=1, default=str)


if __name__ == "__main__":
    main(quick="--quick" in sys.argv)
