"""The deformable-attention rungs' parameters, swept on this GPU at the benchmark's size: rung 05's block size,
branchless loads and vectors a lane, rung 02's vector width, each variant checked against the float64 reference on a slice of the
output, timed with CUDA events (back-to-back launches, median). Writes results/sweeps/<gpu>_msda.json.

    python tools/sweep_msda.py [local|uniform]
"""
import json
import sys

import numpy as np

from cudabook import bench, device, msda, results
from cudabook.msda import benchmark

VARIANTS = [("02_warp_cooperative", {}), ("02_warp_cooperative", {"vec_bytes": 8}),
            ("05_lane_groups", {"threads": 128}), ("05_lane_groups", {"threads": 256}),
            ("05_lane_groups", {"threads": 512}), ("05_lane_groups", {"threads": 256, "branchless": False})]
VARIANTS += [("05_lane_groups", {"threads": t, "vectors": v}) for v in (2, 4) for t in (128, 256, 512)]


def main():
    locations = sys.argv[1] if len(sys.argv) > 1 else "local"
    gpu = device.gpu()
    if gpu is None:
        sys.exit(f"needs a GPU: {device.why_no_gpu()}")
    size = dict(benchmark.WORKLOADS[0], locations=locations)
    args, problem = benchmark.prepare(size, rng=np.random.default_rng(0))
    few = tuple(a[:1] if i in (0, 3, 4) else a for i, a in enumerate(args))          # image 0: the check
    want = msda.to_bf16(msda.reference(*few)).astype(np.float32)
    rows = []
    for stage, params in VARIANTS:
        module = msda.stage(stage)
        problem.poison()
        module.launch(problem, **params)
        got = problem.result()[:1].astype(np.float32)
        err = float(np.nanmax(np.abs(got - want))) if not np.isnan(got).any() else float("nan")
        ms = bench.time_ms(lambda: module.launch(problem, **params), repeats=15)
        rows.append({"stage": stage, "params": params, "median_us": round(ms * 1e3, 1),
                     "max_abs_err_image0": err})
        print(f"{stage:22s} {str(params):40s} {ms * 1e3:10.1f} us   max |err| on image 0: {err:.3g}")
    record = {"gpu": gpu.name, "workload": benchmark.workload_name(**size), "commit": results._commit(),
              "source_digest": results.source_digest(), "rows": rows}
    out = results.RESULTS / "sweeps" / f"{results.slug(gpu.name)}_msda_{locations}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(record, indent=1) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
