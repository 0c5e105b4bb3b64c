"""compute-sanitizer memcheck and racecheck on the C++ rungs of a track, on small problems: resampling 06 cp.async,
07 TMA and 08 fused gather; GEMM 04-07 at small ragged sizes; deformable attention 04 and 05; attention 04 on.

    python tools/sanitize.py --track gemm              runs itself under both tools and prints their summaries
    python tools/sanitize.py --inner --track resample  the work itself (what the sanitizer watches):
    compute-sanitizer --tool memcheck  python tools/sanitize.py --inner --track resample msda attention
    python tools/sanitize.py --list                    the tracks and what each runs (any machine)

Without --track, every track. Small sizes keep the sanitizer fast; the resampling cases still cover several items
per block (a persistent grid of 2 blocks), the pipeline wrapping round its ring, window fallbacks, unsorted
targets and the odd-D fallback. Exits 1 if an output is wrong, or (run outside the sanitizer) a tool reports an
error or a hazard.
"""
import argparse
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

TRACKS = ("resample", "gemm", "msda", "attention")

RESAMPLE_CASES = [  # (B, S, T, D, sorted, params)
    (2, 300, 500, 64, True, {}),
    (2, 300, 500, 64, False, {}),
    (1, 90, 200, 24, True, {"window_rows": 8, "stages": 2}),
    (1, 40, 70, 7, True, {}),
]
GEMM_SHAPES = [(129, 257, 72), (64, 64, 64), (1, 1, 1), (100, 200, 7), (300, 130, 200)]
GEMM_STAGES = ["04_mma_sync", "05_wgmma_tma", "06_warp_specialized", "07_clusters"]
# Stream-K's fix-up (workspace, flags, the ring reused): forced on 3 clusters, so that units are cut in pieces
GEMM_VARIANTS = [("07_clusters", {"stream_k": True, "blocks": 6}), ("08_fp8", {"stream_k": True, "blocks": 6})]
RUNS = {"resample": "06 cp.async, 07 TMA (on Hopper), 08 fused gather, with their variants, on four small problems",
        "gemm": f"{', '.join(GEMM_STAGES)} at M x N x K in {GEMM_SHAPES}; {GEMM_VARIANTS} at the same",
        "msda": "04_tma_boxes, 05_lane_groups (vectors=2, branchless=False) on small problems with borders, M 3 and 4",
        "attention": "every rung from 04 on, causal and not, d = 64 and 128, ragged"}


def resample(rng) -> int:
    from cudabook import device
    from cudabook.resample import checking as check, s06_cp_async as s06, s07_tma as s07, s08_fused_gather as s08
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
        for B, S, T, D, is_sorted, params in RESAMPLE_CASES:
            kw = {**base, **{k: v for k, v in params.items() if k in module.PARAMS}}   # (08 has no window)
            verdict = check.check_launch(module.launch, B, S, T, D, sorted_targets=is_sorted, rng=1, **kw)
            print(f"{module.NAME} B={B} S={S} T={T} D={D} sorted={is_sorted} {kw}: {verdict.message.splitlines()[0]}")
            failures += not verdict.ok
    return failures


def gemm(rng) -> int:
    from cudabook import gemm
    from cudabook import track as tracks
    wrong = 0
    for name, params in [(stage, {}) for stage in GEMM_STAGES] + GEMM_VARIANTS:
        if name not in gemm.STAGES or gemm.unavailable(name):
            print(f"{name}: skipped ({gemm.unavailable(name) if name in gemm.STAGES else 'not built'})")
            continue
        judge = tracks.judge_of("gemm", name)   # 08 judges against its e4m3-quantised inputs
        for M, N, K in GEMM_SHAPES:
            a, b = gemm.random_problem(M, N, K, rng=rng)
            v = judge(gemm.run(name, a, b, **params), a, b)
            print(f"{name} {params or ''} M={M} N={N} K={K}: {v.message.splitlines()[0]}")
            wrong += not v.ok
    return wrong


def msda(rng) -> int:
    from cudabook import msda
    bad = 0
    for M in (3, 4):                  # rung 05 takes its items head by head for an odd M, two heads at a time else
        args = msda.random_problem(2, 37, M, ((9, 7), (5, 4), (2, 3)), 4, 32, borders=0.3, rng=rng)
        for stage, params in (("04_tma_boxes", {}), ("05_lane_groups", {}), ("05_lane_groups", {"vectors": 2}),
                              ("05_lane_groups", {"branchless": False})):
            why = msda.unavailable(stage)
            verdict = None if why else msda.judge(msda.run(stage, *args, **params), *args)
            print(f"msda {stage} M={M} {params}: "
                  f"{why or ('right' if verdict.ok else verdict.message.splitlines()[0])}")
            bad += bool(verdict is not None and not verdict.ok)
    return bad


def attention(rng) -> int:
    from cudabook import attention
    bad = 0
    for (B, H, Nq, Nk, d), causal in (((1, 2, 77, 77, 64), True), ((2, 1, 50, 130, 128), False)):
        inputs = attention.random_problem(B, H, Nq, Nk, d, causal=causal, rng=rng)
        for stage in [s for s in attention.STAGES if s >= "04"]:
            why = attention.unavailable(stage)
            verdict = None if why else attention.judge(attention.run(stage, *inputs[:3], causal=causal), *inputs)
            print(f"attention {stage} B={B} H={H} Nq={Nq} Nk={Nk} d={d} causal={causal}: "
                  f"{why or ('right' if verdict.ok else verdict.message.splitlines()[0])}")
            bad += bool(verdict is not None and not verdict.ok)
    return bad


def inner(tracks) -> int:
    import cudabook  # noqa: F401  (before numba)
    import numpy as np
    work = {"resample": resample, "gemm": gemm, "msda": msda, "attention": attention}
    shared = np.random.default_rng(0)      # msda's problem, then attention's, from one stream (as they always were)
    rngs = {"resample": None, "gemm": np.random.default_rng(1), "msda": shared, "attention": shared}
    wrong = sum(work[t](rngs[t]) for t in TRACKS if t in tracks)
    print("sanitize:", "all outputs right" if not wrong else f"{wrong} wrong")
    return 1 if wrong else 0


def outer(tracks) -> int:
    bad = 0
    for tool in ("memcheck", "racecheck"):
        done = subprocess.run(["compute-sanitizer", "--tool", tool, sys.executable, __file__, "--inner", "--track",
                               *tracks], capture_output=True, text=True, timeout=900)
        text = done.stdout + done.stderr
        summary = [line for line in text.splitlines() if re.search(r"ERROR SUMMARY|RACECHECK SUMMARY|hazard", line)]
        print(f"--- {tool} (exit {done.returncode})")
        print("\n".join(line for line in text.splitlines() if line.startswith("sanitize:") or " M=" in line
                        or " B=" in line or line.startswith("msda ")))
        print("\n".join(summary[-3:]) or text[-1500:])
        bad += done.returncode != 0 or any(re.search(r"[1-9]\d* (errors|hazards)", s) for s in summary)
    return 1 if bad else 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--track", nargs="+", choices=TRACKS, default=list(TRACKS), help="the tracks (default all)")
    parser.add_argument("--inner", action="store_true", help="only the work, for a sanitizer already watching")
    parser.add_argument("--list", action="store_true", help="say what each track runs, run nothing")
    args = parser.parse_args(argv)
    if args.list:
        for t in args.track:
            print(f"{t}: {RUNS[t]}")
        return 0
    return inner(args.track) if args.inner else outer(args.track)


if __name__ == "__main__":
    sys.exit(main())
