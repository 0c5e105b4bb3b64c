"""Time 06 cp.async and 07 TMA at the benchmark size, against the copy ceiling, the Numba rungs and
torch.compile, all measured in this process; then sweep pipeline depth and box/window shapes.

    python tools/time_s06_s07.py [--quick] [--no-torch] [--no-sweep] [--json results.json]

Two timings per kernel, both with CUDA events on the legacy default stream after a warm-up:
  single  cudabook.bench.time_ms: events around ONE launch, median of 25. The host's launch work (Python,
          the driver) happens while the start event has already fired, so it is included.
  queued  events around 20 back-to-back launches, divided by 20, median of 5: the GPU never waits for the
          host, so this is the kernel's own time.
GB/s counts Problem.min_bytes (read every input once, write the output once); % of copy divides by the
device-to-device copy bandwidth measured the same way.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import cudabook  # noqa: E402  (before numba)
from cudabook import bench, check, device, resample  # noqa: E402
from cudabook.resample import inputs, s06_cp_async as s06, s07_tma as s07  # noqa: E402
from numba import cuda  # noqa: E402

import numpy as np  # noqa: E402


def queued_ms(fn, n=20, repeats=5):
    for _ in range(3):
        fn()
    cuda.synchronize()
    out = []
    for _ in range(repeats):
        start, stop = cuda.event(), cuda.event()
        start.record()
        for _ in range(n):
            fn()
        stop.record()
        stop.synchronize()
        out.append(cuda.event_elapsed_time(start, stop) / n)
    return statistics.median(out)


class Table:
    def __init__(self, nbytes, copy_single, copy_queued):
        self.nbytes, self.copy = nbytes, {"single": copy_single, "queued": copy_queued}
        self.rows = []

    def add(self, label, fn, **extra):
        try:
            single = bench.time_ms(fn)
            queued = queued_ms(fn)
        except Exception as e:  # a variant that cannot run here: say so, keep going
            print(f"{label:52s} FAILED: {type(e).__name__}: {str(e)[:200]}")
            return None
        row = dict(label=label, single_us=single * 1e3, queued_us=queued * 1e3,
                   single_GBps=self.nbytes / (single * 1e-3) / 1e9, queued_GBps=self.nbytes / (queued * 1e-3) / 1e9,
                   **extra)
        row["single_pct"] = 100 * row["single_GBps"] / self.copy["single"]
        row["queued_pct"] = 100 * row["queued_GBps"] / self.copy["queued"]
        self.rows.append(row)
        print(f"{label:52s} {row['single_us']:8.1f} {row['single_GBps']:7.0f} {row['single_pct']:6.1f}%"
              f" | {row['queued_us']:8.1f} {row['queued_GBps']:7.0f} {row['queued_pct']:6.1f}%"
              + (f"  {extra}" if extra else ""), flush=True)
        return row


def header():
    print(f"{'':52s} {'single: us':>10s} {'GB/s':>7s} {'%copy':>7s} | {'queued: us':>10s} {'GB/s':>7s} {'%copy':>7s}")


def torch_peer(st, sf, tt, table, ref, scale):
    try:
        import torch
    except ImportError:
        print("torch is not installed: no torch.compile peer")
        return
    times = torch.from_numpy(st).cuda()
    feats = torch.from_numpy(sf.view(np.int16)).cuda().view(torch.bfloat16)
    targets = torch.from_numpy(tt).cuda()

    def resample_torch(times, feats, targets):
        S, D = times.shape[1], feats.shape[2]
        hi = torch.searchsorted(times, targets, right=True).clamp_(1, S - 1)
        lo = hi - 1
        t0, t1 = torch.gather(times, 1, lo), torch.gather(times, 1, hi)
        w = ((targets - t0) / (t1 - t0)).clamp(0.0, 1.0)
        a = torch.gather(feats, 1, lo.unsqueeze(-1).expand(-1, -1, D)).float()
        c = torch.gather(feats, 1, hi.unsqueeze(-1).expand(-1, -1, D)).float()
        return (a + w.unsqueeze(-1) * (c - a)).to(torch.bfloat16)

    for label, fn in (("torch eager", resample_torch), ("torch.compile", torch.compile(resample_torch))):
        try:
            t = time.time()
            got = fn(times, feats, targets)
            torch.cuda.synchronize()
            print(f"  ({label}: first call {time.time() - t:.1f} s)")
        except Exception as e:
            print(f"{label}: FAILED {type(e).__name__}: {str(e)[:300]}")
            continue
        verdict = check.compare(got.view(torch.int16).cpu().numpy().view(inputs.BF16), ref, scale)
        print(f"  ({label} output: {verdict.message.splitlines()[0]})")
        table.add(label, lambda: fn(times, feats, targets), torch=torch.__version__)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="defaults only, no sweep")
    ap.add_argument("--no-torch", action="store_true")
    ap.add_argument("--no-sweep", action="store_true")
    ap.add_argument("--json", default=None)
    args = ap.parse_args()

    info = device.describe()
    print(f"GPU: {info['gpu']} (cc {info.get('compute_capability')}, {info.get('sms')} SMs), driver CUDA "
          f"{info.get('driver_version')}, NVRTC {info['nvrtc']}, packages {info['packages']}")
    size = bench.BENCH_SIZE
    t = time.time()
    st, sf, tt = inputs.random_problem(size["B"], size["S"], size["T"], size["D"], rng=0)
    p = resample.upload(st, sf, tt)
    ref, scale = inputs.reference_with_scale(st, sf, tt)
    print(f"problem B={size['B']} S={size['S']} T={size['T']} D={size['D']}: {p.min_bytes / 1e6:.1f} MB minimum "
          f"traffic (set up in {time.time() - t:.1f} s)")

    golden = {}

    def verify(label, launch, full=False, **params):
        p.poison()
        launch(p, **params)
        got = p.out.copy_to_host()
        if not full and launch in golden:    # every variant of a stage computes the same bits: compare exactly
            same = np.array_equal(got, golden[launch])
            print(f"  check {label} {params}: " + ("bit-identical to the verified default" if same else "DIFFERS"))
            if same:
                return True
        v = check.compare(got.view(inputs.BF16), ref, scale)
        print(f"  check {label} {params}: {v.message.splitlines()[0]}")
        if v.ok and launch not in golden:
            golden[launch] = got
        return v.ok

    # the copy ceiling, both ways
    n = max(p.min_bytes // 2 // 4, 1 << 20)
    src = cuda.to_device(np.arange(n, dtype=np.int32))
    dst = cuda.device_array_like(src)
    copy_bytes = 2 * n * 4
    copy_single = copy_bytes / (bench.time_ms(lambda: dst.copy_to_device(src)) * 1e-3) / 1e9
    copy_queued = copy_bytes / (queued_ms(lambda: dst.copy_to_device(src)) * 1e-3) / 1e9
    print(f"copy ceiling (device-to-device, {copy_bytes / 1e6:.0f} MB moved): single {copy_single:.0f} GB/s, "
          f"queued {copy_queued:.0f} GB/s; bench.copy_GBps says {bench.copy_GBps(p.min_bytes):.0f} GB/s")
    table = Table(p.min_bytes, copy_single, copy_queued)
    header()
    table.add("copy ceiling (cudaMemcpy DtoD)", lambda: dst.copy_to_device(src))
    sm_copy = _sm_copy(src, dst)
    if sm_copy:
        table.add("copy by SM kernel (16-byte loads/stores)", sm_copy)

    for name in resample.STAGES:
        if name in ("06_cp_async", "07_tma") or resample.unavailable(name):
            continue
        module = resample.stage(name)
        try:
            ok = verify(name, module.launch) if name == "01_naive" else True   # (the others: their own tests)
        except Exception as e:
            print(f"{name}: FAILED {type(e).__name__}: {str(e)[:200]}")
            continue
        table.add(name + ("" if ok else " (WRONG OUTPUT)"), lambda m=module: m.launch(p))

    variants = [(s06, "06_cp_async", {})]
    if s07.unavailable() is None:
        variants += [(s07, "07_tma (driver map)", {}), (s07, "07_tma (cuda.core map)", {"tensor_map": "cuda_core"}),
                     (s07, "07_tma + TMA store (3 stages: 2 blocks/SM)", {"tma_store": True, "stages": 3}),
                     (s07, "07_tma + streaming stores", {"streaming_stores": True})]
    else:
        print("07:", s07.unavailable())
    for module, label, params in variants:
        ok = verify(label, module.launch, full=True, **params)
        plan = module.plan(p, **params)
        table.add(label + ("" if ok else " (WRONG OUTPUT)"), lambda m=module, kw=params: m.launch(p, **kw),
                  blocks_per_sm=_bps(module, params, p), smem=plan["smem"])

    if not args.no_torch:
        torch_peer(st, sf, tt, table, ref, scale)

    if not (args.quick or args.no_sweep):
        print("\nsweep (each row: the default with one thing changed)")
        header()
        sweeps = [(s06, {"stages": s}) for s in (2, 3, 6)]
        sweeps += [(s06, {"schedule": "strided"}), (s06, {"threads": 128})]
        sweeps += [(s06, {"targets_per_item": tw, "window_rows": tw + 16}) for tw in (16, 64)]
        if s07.unavailable() is None:
            sweeps += [(s07, {"schedule": "strided"})]
            sweeps += [(s07, {"stages": s}) for s in (2, 3, 6)]
            sweeps += [(s07, {"box_rows": b}) for b in (1, 2, 16)] + [(s07, {"box_rows": 48, "window_rows": 48})]
            sweeps += [(s07, {"targets_per_item": tw, "window_rows": tw + 16}) for tw in (16, 64)]
            sweeps += [(s07, {"consumer_warps": w}) for w in (4, 16)]
            sweeps += [(s07, {"blocks_per_sm": 1}), (s07, {"l2_promotion": "128B"}), (s07, {"d_chunk": 128})]
            # last: the newest path (a kernel fault would end this process's CUDA context)
            sweeps += [(s07, {"times_tma": True}), (s07, {"times_tma": True, "schedule": "strided"}),
                       (s07, {"times_tma": True, "tensor_map": "cuda_core"})]
        for module, params in sweeps:
            try:
                ok = verify(module.NAME, module.launch, **params)
            except Exception as e:
                print(f"{module.NAME} {params}: FAILED {type(e).__name__}: {str(e)[:200]}")
                continue
            table.add(f"{module.NAME} {params}" + ("" if ok else " (WRONG)"),
                      lambda m=module, kw=params: m.launch(p, **kw), blocks_per_sm=_bps(module, params, p),
                      sweep=params)

    if args.json:
        with open(args.json, "w") as f:
            json.dump(dict(device=info, copy_GBps=table.copy, min_bytes=p.min_bytes, rows=table.rows), f, indent=1,
                      default=str)
        print("wrote", args.json)


COPY_SRC = r'''
extern "C" __global__ void copy16(const uint4* __restrict__ src, uint4* __restrict__ dst, long long n) {
    long long stride = (long long)gridDim.x * blockDim.x;
    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    for (; i + 3 * stride < n; i += 4 * stride) {      // four independent 16-byte loads in flight
        uint4 a = __ldg(src + i), b = __ldg(src + i + stride), c = __ldg(src + i + 2 * stride),
              d = __ldg(src + i + 3 * stride);
        dst[i] = a; dst[i + stride] = b; dst[i + 2 * stride] = c; dst[i + 3 * stride] = d;
    }
    for (; i < n; i += stride) dst[i] = __ldg(src + i);
}
'''


def _sm_copy(src, dst):
    """A copy done by the SMs (not cudaMemcpy): the same bytes, 16-byte vectors, grid of 4 blocks per SM."""
    import ctypes
    from cudabook import nvrtc
    try:
        kern = nvrtc.load(nvrtc.compile(COPY_SRC, name="copy16.cu"), "copy16")
    except Exception as e:
        print("SM copy kernel: FAILED", e)
        return None
    n = src.size * 4 // 16
    grid = device.gpu().sms * 4
    args = [src.device_ctypes_pointer.value, dst.device_ctypes_pointer.value, n]
    return lambda: kern.launch(grid, 512, args, (ctypes.c_void_p, ctypes.c_void_p, ctypes.c_longlong))


def _bps(module, params, p):
    """Blocks per SM that launch() used for these parameters."""
    B, S, T, D = p.shape
    merged = {**module.PARAMS, **params}
    extra = {"S": S} if module is s07 else {}
    cfg = module.config(D, **extra, **{k: merged[k] for k in module._CONFIG_KEYS})
    for key, prep in module._prepared.items():
        if key[1] == tuple(sorted(cfg.items())) and key[2] == merged["blocks_per_sm"]:
            return prep["blocks_per_sm"]
    return None


if __name__ == "__main__":
    main()
