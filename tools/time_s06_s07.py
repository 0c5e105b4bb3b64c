"""Time 06 cp.async and 07 TMA at the benchmark size against the copy ceilings, 03_coalesced and torch.compile,
all measured in this process; then sweep one parameter at a time.

    python tools/time_s06_s07.py [--until EPOCH | --budget SECONDS] [--quick] [--no-torch] [--json PATH]

Every time is cudabook.bench.time_ms(fn, batch=10): CUDA events around 10 launches queued back to back,
divided by 10, median of 25, after a warm-up (the GPU never waits for the host, so this is the kernels' own
time; for 07 it includes both of its launches, the prepass and the streaming kernel). GB/s counts
Problem.min_bytes (read every input once, write the output once); "% ceil" divides by the fastest of
cudabook.bench.copy_ceilings (all of them are printed). Every 06/07 variant computes the same bits, so each
is compared bit for bit with the default 07's output, which is itself checked against the float64 reference.

The sweep stops at the deadline (--until, seconds since the epoch, or --budget seconds from now) and the
table is printed last either way.
"""
from __future__ import annotations

import argparse
import ast
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import cudabook  # noqa: E402,F401  (before numba)
from cudabook import bench, check, device, peers, resample  # noqa: E402
from cudabook.resample import inputs, s06_cp_async as s06, s07_tma as s07  # noqa: E402

import numpy as np  # noqa: E402

RING = {"persistent": True, "stages": 2, "consumer_warps": 8}     # the persistent ring of stages
SWEEP_07 = [
    # one block per item (the default), one knob at a time
    {"consumer_warps": 8}, {"consumer_warps": 2}, {"d_chunk": 128}, {"targets_per_item": 64, "window_rows": 80},
    {"targets_per_item": 16, "window_rows": 32}, {"stages": 2}, {"box_rows": 16}, {"streaming_stores": True},
    {"tma_store": True},
    # the persistent ring, with each way of handing out the items
    {**RING, "schedule": "strided"}, {**RING, "schedule": "interleaved"}, {**RING, "schedule": "contiguous"},
    {**RING, "stages": 3}, {**RING, "consumer_warps": 4}, {**RING, "tma_store": True}, {**RING, "d_chunk": 128},
    # where the searches happen
    {"search": "producer"}, {"search": "inline"}, {**RING, "search": "producer"}, {**RING, "search": "inline"},
    # the one-instruction rounding, and roughly the first version of this stage
    {"bf16_cvt": False}, {**RING, "search": "inline", "schedule": "contiguous", "bf16_cvt": False},
]
SWEEP_06 = [{"stages": 3}, {"bf16_cvt": False}]
ONCE = [(s07, {}), (s07, {**RING, "schedule": "strided"}), (s06, {})]


class Table:
    def __init__(self, nbytes, ceiling):
        self.nbytes, self.ceiling, self.rows = nbytes, ceiling, []

    def add(self, label, us, **extra):
        gbps = self.nbytes / (us * 1e-6) / 1e9
        row = dict(label=label, us=round(us, 2), GBps=round(gbps, 1), pct=round(100 * gbps / self.ceiling, 1), **extra)
        self.rows.append(row)
        print(f"{label:58s} {us:8.1f} us {gbps:7.0f} GB/s {row['pct']:6.1f}%"
              + (f"  {extra}" if extra else ""), flush=True)
        return row

    def time(self, label, fn, **extra):
        try:
            ms = bench.time_ms(fn, batch=10)
        except Exception as e:  # a variant that cannot run here: say so, keep going
            print(f"{label:58s} FAILED: {type(e).__name__}: {str(e)[:200]}", flush=True)
            return None
        return self.add(label, ms * 1e3, **extra)

    def print(self):
        print(f"\n{'':58s} {'us':>8s}    {'GB/s':>7s}      {'% ceil':>6s}")
        for r in self.rows:
            print(f"{r['label']:58s} {r['us']:8.1f}    {r['GBps']:7.0f}      {r['pct']:6.1f}%")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--until", type=float, default=None, help="stop sweeping at this time (seconds since epoch)")
    ap.add_argument("--budget", type=float, default=None, help="stop sweeping this many seconds from now")
    ap.add_argument("--quick", action="store_true", help="no sweep")
    ap.add_argument("--no-torch", action="store_true")
    ap.add_argument("--json", default=None)
    ap.add_argument("--launch-once", action="store_true",
                    help="launch a few variants once each and stop (for ncu: ncu -k regex:resample_ ...)")
    args = ap.parse_args()
    deadline = args.until or (time.time() + args.budget if args.budget else float("inf"))

    info = device.describe()
    print(f"GPU: {info['gpu']} (cc {info.get('compute_capability')}, {info.get('sms')} SMs), driver CUDA "
          f"{info.get('driver_version')}, NVRTC {info['nvrtc']}", flush=True)
    size = bench.BENCH_SIZE
    t = time.time()
    st, sf, tt = inputs.random_problem(size["B"], size["S"], size["T"], size["D"], rng=0)
    p = resample.upload(st, sf, tt)
    ref, scale = inputs.reference_with_scale(st, sf, tt)
    print(f"problem B={size['B']} S={size['S']} T={size['T']} D={size['D']} sorted: {p.min_bytes / 1e6:.1f} MB "
          f"minimum traffic (set up in {time.time() - t:.1f} s)", flush=True)

    if args.launch_once:
        from numba import cuda
        for module, params in ONCE:
            if module is s07 and s07.unavailable():
                continue
            module.launch(p, **params)
            cuda.synchronize()
            print(f"launched {module.NAME} {params} once", flush=True)
        return

    ceilings = bench.copy_ceilings(p.min_bytes)
    ceiling = max(ceilings.values())
    print("copy ceilings (GB/s, read + write):", ", ".join(f"{k} {v:.0f}" for k, v in ceilings.items()),
          f"-> ceiling {ceiling:.0f}", flush=True)
    table = Table(p.min_bytes, ceiling)
    for k, v in ceilings.items():
        table.add(f"copy ceiling: {k}", p.min_bytes / (v * 1e9) * 1e6)

    golden = {}

    def verify(launch, params):
        """Run once on a poisoned output; bit-compare with the verified default, else check the reference."""
        p.poison()
        launch(p, **params)
        got = p.out.copy_to_host()
        if "bits" in golden and np.array_equal(got, golden["bits"]):
            return "same bits"
        v = check.compare(got.view(inputs.BF16), ref, scale)
        if v.ok and "bits" not in golden:
            golden["bits"] = got
        return "ok" if v.ok else "WRONG: " + v.message.splitlines()[0]

    def stage_row(module, label, params, **extra):
        try:
            status = verify(module.launch, params)
        except Exception as e:
            print(f"{label:58s} FAILED: {type(e).__name__}: {str(e)[:300]}", flush=True)
            return None
        if status not in ("ok", "same bits"):
            print(f"{label}: {status}", flush=True)
        return table.time(label + ("" if status in ("ok", "same bits") else " (WRONG)"),
                          lambda: module.launch(p, **params), blocks_per_sm=bps(module, params), **extra)

    def bps(module, params):
        merged = {**module.PARAMS, **params}
        extra = {"S": size["S"]} if module is s07 else {}
        cfg = module.config(size["D"], **extra, **{k: merged[k] for k in module._CONFIG_KEYS})
        for key, prep in module._prepared.items():
            if key[1] == tuple(sorted(cfg.items())) and key[2] == merged["blocks_per_sm"]:
                return prep["blocks_per_sm"]
        return None

    # ---- the rows every run needs
    hopper = s07.unavailable() is None
    if hopper:
        stage_row(s07, "07_tma (defaults)", {})
        print(f"  07 defaults: {s07.PARAMS}; {s07.plan(p)['smem']} B shared memory")
    else:
        print("07:", s07.unavailable())
    stage_row(s06, "06_cp_async (defaults)", {})
    print(f"  06 defaults: {s06.PARAMS}")
    s03 = resample.stage("03_coalesced")
    try:
        ok = check.compare(resample.run("03_coalesced", st, sf, tt), ref, scale).ok
        table.time("03_coalesced" + ("" if ok else " (WRONG)"), lambda: s03.launch(p))
    except Exception as e:
        print(f"03_coalesced FAILED: {type(e).__name__}: {str(e)[:200]}")
    if not args.no_torch:
        why = peers.available()
        if why:
            print("torch peers:", why)
        else:
            t = time.time()
            got = peers.measure(st, sf, tt, ref, scale)
            print(f"  (torch peers measured in {time.time() - t:.0f} s: {got})", flush=True)
            for name, r in got.items():
                if "median_us" in r:
                    table.add(name.replace("_", ".") + ("" if r.get("correct") else " (WRONG)"), r["median_us"])
    if hopper:
        pieces = s07.parts(p, search="prepass")
        table.time("07 part: prepass (resample_intervals) alone", pieces["prepass"])
        table.time("07 part: its streaming kernel (resample_tma) alone", pieces["main"])

    # ---- the sweep, while time lasts
    if not args.quick:
        print("\nsweep: the default with one thing changed", flush=True)
        sweep = ([(s07, v) for v in SWEEP_07 if {**s07.PARAMS, **v} != s07.PARAMS] if hopper else [])
        sweep += [(s06, v) for v in SWEEP_06]
        for module, params in sweep:
            if time.time() > deadline - 12:
                print(f"(deadline: {len(sweep) - sweep.index((module, params))} sweep rows not run)")
                break
            stage_row(module, f"{module.NAME[:2]} {params}", params)
        if hopper and time.time() < deadline - 8:
            stage_row(s07, "07_tma (defaults, again: the noise)", {})
            rows07 = [r for r in table.rows if r["label"].startswith("07 {") and "WRONG" not in r["label"]]
            if rows07:
                best = min(rows07, key=lambda r: r["us"])
                params = ast.literal_eval(best["label"][3:])   # (the label holds the parameter dict)
                stage_row(s07, f"07 {params} (the fastest, again)", params)

    if args.json or os.environ.get("OUT"):
        path = args.json or os.path.join(os.environ["OUT"], "time_s06_s07.json")
        with open(path, "w") as f:
            json.dump(dict(device=info, ceilings=ceilings, min_bytes=p.min_bytes, rows=table.rows,
                           params07=s07.PARAMS, params06=s06.PARAMS), f, indent=1, default=str)
        print("wrote", path)
    print(f"\nGPU {info['gpu']}; ceiling = max(copy_ceilings) = {ceiling:.0f} GB/s; "
          f"{p.min_bytes / 1e6:.1f} MB minimum traffic")
    table.print()


if __name__ == "__main__":
    main()
