"""What the SM clock does while the tensor cores work without a pause: cuBLAS's bf16 GEMM (torch.matmul) run back
to back for some seconds at each size, nvidia-smi sampling the SM clock, the power draw and the throttle reasons
every 100 ms beside it. Writes results/readings/<gpu>_clocks.json (the samples, and per size the TFLOP/s of the
whole run and the median clock and power while it ran).

    python tools/probe_clocks.py [--seconds 4] [--sizes 4096 8192]      (on an NVIDIA GPU with torch and nvidia-smi)
    python tools/probe_clocks.py --rung 07_clusters --seconds 3          (cuBLAS, the rung, the rung, cuBLAS)

With --rung, a GEMM rung runs the same way on the same inputs (the benchmark's, cudabook.gemm.benchmark), twice,
between two runs of its peer (the benchmark's HEAD_TO_HEAD: cuBLAS, or cuBLASLt's FP8 GEMM for 08), so that the
order's share is seen: each run's kernel is named in the record (an FP8 peer's runs go to
<gpu>_clocks_<peer>.json). Run back to back for seconds, both meet the power cap, and their ratio is the one a
long job would see (the benchmark's interleaved rounds time a few milliseconds after a pause).

Why: a tensor-core peak on a spec sheet is quoted at the boost clock. A GEMM that keeps the tensor cores busy
draws enough power to meet the card's limit, and the clock comes down until it fits: a kernel's short timing
(a few hundred ms, as the benchmark's) may still run near the boost clock, a long one does not. The reasons are
NVML's clock event reasons (nvidia-smi's clocks_event_reasons.active): 0x1 idle, 0x4 software power cap, 0x20 or
0x40 thermal slowdown.
"""
from __future__ import annotations

import argparse
import json
import pathlib
import statistics
import subprocess
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

QUERY = "timestamp,clocks.sm,power.draw,temperature.gpu,clocks_event_reasons.active"


def _number(field: str):
    """A number of nvidia-smi's ("1575 MHz", "690.84 W", "61"), None where it says none ("[N/A]", "")."""
    try:
        return float(field.split()[0])
    except (ValueError, IndexError):
        return None


def _sample(line: str):
    """One nvidia-smi csv line -> (time.time() seconds, MHz, W, °C, reasons), each field None where nvidia-smi
    gave none; None for a line that is not a sample (no time stamp, too few fields)."""
    import datetime
    parts = [p.strip() for p in line.split(",")]
    if len(parts) != 5:
        return None
    try:
        when = datetime.datetime.strptime(parts[0], "%Y/%m/%d %H:%M:%S.%f").timestamp()
    except ValueError:
        return None
    return when, _number(parts[1]), _number(parts[2]), _number(parts[3]), parts[4] or None


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=4.0, help="how long each size runs back to back")
    ap.add_argument("--sizes", type=int, nargs="+", default=[4096, 8192])
    ap.add_argument("--out", default=None, help="the JSON file (default results/readings/<gpu>_clocks.json)")
    ap.add_argument("--rung", default=None, help="a GEMM rung to run beside its peer (07_clusters beside cuBLAS, "
                    "08_fp8 beside cuBLASLt's FP8 GEMM: the benchmark's HEAD_TO_HEAD)")
    a = ap.parse_args(argv)
    from cudabook import bench, gemm, results
    from cudabook.gemm import benchmark
    if a.rung and a.rung not in gemm.STAGES:                     # (before torch: a typo is told on any machine)
        sys.exit(f"no GEMM rung {a.rung!r}: {', '.join(gemm.STAGES)}")
    import torch
    if not torch.cuda.is_available():
        sys.exit("needs an NVIDIA GPU with torch")
    peer = dict(benchmark.HEAD_TO_HEAD).get(a.rung, "cublas")   # 08 (FP8): cuBLASLt's FP8 GEMM
    import tempfile
    device = torch.cuda.get_device_properties(torch.cuda.current_device())
    gpu_id = f"GPU-{device.uuid}"        # nvidia-smi's own index ignores CUDA_VISIBLE_DEVICES; the UUID does not
    log = tempfile.TemporaryFile(mode="w+")                      # (a pipe read only at the end would fill up)
    smi = subprocess.Popen(["nvidia-smi", f"--query-gpu={QUERY}", "--format=csv,noheader", "-lms", "100",
                            "-i", gpu_id], stdout=log, stderr=subprocess.STDOUT, text=True)
    runs = []
    try:
        time.sleep(1.0)                              # the idle clock first
        for n in a.sizes:
            args, problem = benchmark.prepare(dict(M=n, N=n, K=n))
            with benchmark.peer_calls(args, problem) as peers:
                if peer not in peers:
                    sys.exit(f"this torch has no {peer} (the peer of {a.rung})")
                kernels = {peer: peers[peer]}
                order = [peer]
                if a.rung:
                    kernels[a.rung] = lambda: gemm.stage(a.rung).launch(problem)
                    order = [peer, a.rung, a.rung, peer]
                for name in order:
                    fn = kernels[name]
                    fn()
                    torch.cuda.synchronize()
                    t0 = time.time()
                    ms = bench.run_for(fn, a.seconds, settle=0.0)   # the whole run timed: the clock's fall too
                    t1 = time.time()
                    runs.append({"size": n, "kernel": name, "seconds": round(t1 - t0, 3), "from": t0, "to": t1,
                                 "TFLOPs": round(2 * n ** 3 / (ms * 1e-3) / 1e12, 1)})
                    time.sleep(1.0)                  # cool down between runs
            del problem
    finally:
        smi.terminate()
        smi.wait()
    log.seek(0)
    text = log.read()
    samples = [s for s in (_sample(line) for line in text.splitlines()) if s]
    if not samples:
        sys.exit(f"nvidia-smi gave no samples (its output: {text.strip()[:300]!r}); an older driver may call "
                 f"the reasons clocks_throttle_reasons.active")
    for r in runs:
        during = [s for s in samples if r["from"] + 0.5 <= s[0] <= r["to"]]   # after the first half second
        mhz, watts = [s[1] for s in during if s[1] is not None], [s[2] for s in during if s[2] is not None]
        r.update(median_sm_MHz=statistics.median(mhz) if mhz else None,
                 median_W=statistics.median(watts) if watts else None,
                 reasons=sorted({s[4] for s in during if s[4]}), samples_during=len(during))
    gpu = torch.cuda.get_device_name()
    record = {"kind": "clocks under a tensor-core load", "gpu": gpu, "gpu_id": gpu_id, "commit": results._commit(),
              "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "torch": torch.__version__, "runs": runs,
              "samples": [[round(s[0], 2), s[1], s[2], s[3], s[4]] for s in samples]}
    name = results.clocks_file(results.slug(gpu), peer)
    out = pathlib.Path(a.out) if a.out else results.RESULTS / "readings" / name
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(record, indent=1) + "\n")
    for r in runs:
        print(f"{gpu} {r['size']}^3 {r['kernel']} for {r['seconds']} s: {r['TFLOPs']} TFLOP/s, SM clock "
              f"{r['median_sm_MHz']} MHz (median), {r['median_W']} W, reasons {', '.join(r['reasons'])}")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
