"""compute-sanitizer memcheck and racecheck on the GEMM track's C++ rungs (04-07), at small ragged sizes.

    python tools/sanitize_gemm.py            runs itself under both tools and prints their summaries
    python tools/sanitize_gemm.py --inner    the work itself (what the sanitizer watches)

Exits 1 if an output is wrong or a tool reports an error or a hazard.
"""
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

SHAPES = [(129, 257, 72), (64, 64, 64), (1, 1, 1), (100, 200, 7), (300, 130, 200)]
C_STAGES = ["04_mma_sync", "05_wgmma_tma", "06_warp_specialized", "07_clusters"]


def inner():
    import numpy as np

    import cudabook  # noqa: F401  (before numba)
    from cudabook import gemm
    wrong = 0
    rng = np.random.default_rng(1)
    for name in C_STAGES:
        if name not in gemm.STAGES or gemm.unavailable(name):
            print(f"{name}: skipped ({gemm.unavailable(name) if name in gemm.STAGES else 'not built'})")
            continue
        for M, N, K in SHAPES:
            a, b = gemm.random_problem(M, N, K, rng=rng)
            v = gemm.judge(gemm.run(name, a, b), a, b)
            print(f"{name} M={M} N={N} K={K}: {v.message.splitlines()[0]}")
            wrong += not v.ok
    print("sanitize_gemm:", "all outputs right" if not wrong else f"{wrong} wrong")
    return 1 if wrong else 0


def outer():
    bad = 0
    for tool in ("memcheck", "racecheck"):
        done = subprocess.run(["compute-sanitizer", "--tool", tool, sys.executable, __file__, "--inner"],
                              capture_output=True, text=True, timeout=900)
        text = done.stdout + done.stderr
        summary = [line for line in text.splitlines() if re.search(r"ERROR SUMMARY|RACECHECK SUMMARY|hazard", line)]
        print(f"--- {tool} (exit {done.returncode})")
        print("\n".join(line for line in text.splitlines() if "sanitize_gemm" in line or " M=" in line))
        print("\n".join(summary[-3:]) or text[-1500:])
        bad += done.returncode != 0 or any(re.search(r"[1-9]\d* (errors|hazards)", s) for s in summary)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(inner() if "--inner" in sys.argv else outer())
