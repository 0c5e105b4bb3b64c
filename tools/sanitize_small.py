"""Run the C++ rungs (resampling 06 cp.async, 07 TMA and 08 fused gather, deformable attention 04 and 05, attention 04 on) on
small problems, for compute-sanitizer.

    compute-sanitizer --tool memcheck  python tools/sanitize_small.py
    compute-sanitizer --tool racecheck python tools/sanitize_small.py

Small sizes keep the sanitizer fast; the cases still cover several items per block (a persistent grid of 2
blocks), the pipeline wrapping round its ring, window fallbacks, unsorted targets and the odd-D fallback.
Exits 1 if any output is wrong.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import cudabook  # noqa: E402,F401  (before numba)
from cudabook import check, device  # noqa: E402
from cudabook.resample import s06_cp_async as s06, s07_tma as s07, s08_fused_gather as s08  # noqa: E402

CASES = [  # (B, S, T, D, sorted, params)
    (2, 300, 500, 64, True, {}),
    (2, 300, 500, 64, False, {}),
    (1, 90, 200, 24, True, {"window_rows": 8, "stages": 2}),
    (1, 40, 70, 7, True, {}),
]


def main():
    failures = 0
    stages = [(s06, {"blocks": 2}), (s06, {"blocks": 2, "schedule": "strided"}), (s08, {}), (s08, {"search": "lane"}),
              (s08, {"search": "prepass"}), (s08, {"targets_per_warp": 32, "unroll": 2}),
              (s08, {"vectors_per_lane": 4, "min_blocks": 8})]
    if device.requirement_unmet((9, 0), "07") is None:
        stages += [(s07, {"blocks": 2}), (s07, {"blocks": 2, "tma_store": True}),
                   (s07, {"blocks": 2, "tensor_map": "cuda_core"}),
                   (s07, {"blocks": 2, "schedule": "strided"}),
                   (s07, {"self_search_blocks": 3}),                  # the first blocks find their own pairs
                   (s07, {"blocks": 2, "times_tma": True})]      # last: the newest path
    for module, base in stages:
        for B, S, T, D, is_sorted, params in CASES:
            kw = {**base, **{k: v for k, v in params.items() if k in module.PARAMS}}   # (08 has no window)
            verdict = check.check_launch(module.launch, B, S, T, D, sorted_targets=is_sorted, rng=1, **kw)
            print(f"{module.NAME} B={B} S={S} T={T} D={D} sorted={is_sorted} {kw}: {verdict.message.splitlines()[0]}")
            failures += not verdict.ok
    failures += other_tracks()
    print("sanitize_small:", "all outputs right" if not failures else f"{failures} wrong")
    return 1 if failures else 0


def other_tracks() -> int:
    """The deformable attention and attention tracks' C++ rungs, each output against the float64 reference."""
    import numpy as np
    from cudabook import attention, msda
    bad = 0
    rng = np.random.default_rng(0)
    args = msda.random_problem(2, 37, 3, ((9, 7), (5, 4), (2, 3)), 4, 32, borders=0.3, rng=rng)
    for stage, params in (("04_tma_boxes", {}), ("05_lane_groups", {}), ("05_lane_groups", {"vectors": 2}),
                          ("05_lane_groups", {"branchless": False})):
        why = msda.unavailable(stage)
        verdict = None if why else msda.judge(msda.run(stage, *args, **params), *args)
        print(f"msda {stage} {params}: {why or ('right' if verdict.ok else verdict.message.splitlines()[0])}")
        bad += bool(verdict is not None and not verdict.ok)
    for (B, H, Nq, Nk, d), causal in (((1, 2, 77, 77, 64), True), ((2, 1, 50, 130, 128), False)):
        inputs = attention.random_problem(B, H, Nq, Nk, d, causal=causal, rng=rng)
        for stage in [s for s in attention.STAGES if s >= "04"]:
            why = attention.unavailable(stage)
            verdict = None if why else attention.judge(attention.run(stage, *inputs[:3], causal=causal), *inputs)
            print(f"attention {stage} B={B} H={H} Nq={Nq} Nk={Nk} d={d} causal={causal}: "
                  f"{why or ('right' if verdict.ok else verdict.message.splitlines()[0])}")
            bad += bool(verdict is not None and not verdict.ok)
    return bad


if __name__ == "__main__":
    sys.exit(main())
