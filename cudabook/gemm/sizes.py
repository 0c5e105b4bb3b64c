"""How a GEMM's speed depends on its size: waves of tiles over the SMs, and every rung against cuBLAS from 256 to
8192 (in the manner of Triton's perf_report).

A kernel that gives each block one BM x BN tile of C launches ceil(M/BM) * ceil(N/BN) blocks. The GPU runs them
in waves of (SMs x blocks per SM). When the last wave is partly empty, those SMs idle: at M = N = 1024 with
128 x 128 tiles there are 64 tiles for 132 SMs, so half the H100 never works, whatever the kernel does. That is
most of why a first WGMMA kernel reaches only ~half of cuBLAS at 256-1024 (cuBLAS picks smaller tiles, or splits
K, for small problems) and catches up at 4096.
"""
from __future__ import annotations

import math

SIZES = (256, 512, 1024, 2048, 4096, 8192)


def tiles(M, N, BM, BN) -> int:
    return math.ceil(M / BM) * math.ceil(N / BN)


def wave_efficiency(M, N, BM, BN, sms, per_sm=1) -> float:
    """The fraction of SM time doing work when every tile takes the same time: tiles / (waves x slots)."""
    n, slots = tiles(M, N, BM, BN), sms * per_sm
    return n / (math.ceil(n / slots) * slots)


def plot_waves(sms=132, tile_shapes=((128, 128), (128, 256), (64, 64)), sizes=SIZES, ax=None):
    """Wave efficiency against size for a few tile shapes (one block per SM)."""
    import matplotlib.pyplot as plt
    if ax is None:
        _, ax = plt.subplots(figsize=(6.5, 3))
    grid = [s for s in range(128, max(sizes) + 1, 128)]
    for BM, BN in tile_shapes:
        ax.plot(grid, [100 * wave_efficiency(s, s, BM, BN, sms) for s in grid], label=f"{BM}x{BN} tiles")
    ax.set_xscale("log", base=2)
    ax.set_xticks(list(sizes), [str(s) for s in sizes])
    ax.set_xlabel("M = N")
    ax.set_ylabel("% of SM time busy")
    ax.set_ylim(0, 105)
    ax.set_title(f"wave quantization on {sms} SMs (one tile per block, one block per SM)", fontsize=9)
    ax.legend(fontsize=8)
    return ax


def sweep(stages=None, sizes=SIZES, *, repeats=10, progress=print) -> dict:
    """{size: {stage or peer: {median_us, TFLOPs, pct_of_cublas, correct}}} measured now, on this GPU: every
    rung and cuBLAS at M = N = K = size, the same way as the benchmark."""
    from .. import results
    from . import STAGES, bench
    rows = {}
    for s in sizes:
        w = results.measure_workload("gemm", dict(M=s, N=s, K=s), stages=stages or STAGES, repeats=repeats,
                                     progress=lambda *a: None, check_cases=False)
        rows[s] = {k: v for k, v in {**w["stages"], **w["peers"]}.items()}
        progress(f"{s:>5}: " + "  ".join(f"{k} {v.get('pct_of_cublas', '-')}%" for k, v in rows[s].items()
                                          if "median_us" in v))
    return rows


def plot_sweep(rows, *, key="pct_of_cublas", ax=None, title=""):
    """One line per rung: % of cuBLAS (or TFLOPs) against size."""
    import matplotlib.pyplot as plt
    if ax is None:
        _, ax = plt.subplots(figsize=(7, 3.4))
    sizes = sorted(int(s) for s in rows)
    names = []
    for s in sizes:
        names += [k for k in rows[s] if k not in names and k != "cublas"]
    for name in names:
        pts = [(s, rows[s][name][key]) for s in sizes if key in rows[s].get(name, {})]
        if pts:
            ax.plot([p[0] for p in pts], [p[1] for p in pts], "o-" if name[:2].isdigit() else "s--", label=name)
    ax.set_xscale("log", base=2)
    ax.set_xticks(sizes, [str(s) for s in sizes])
    ax.set_xlabel("M = N = K")
    ax.set_ylabel("% of cuBLAS" if key == "pct_of_cublas" else key)
    if key == "pct_of_cublas":
        ax.axhline(100, color="k", lw=0.8, ls="--")
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=7, ncol=2)
    return ax


def save_sweep(rows, folder=None):
    """results/sweeps/<gpu>_gemm_sizes.json, with the pedigree of the run (GPU, versions, commit, date)."""
    import json
    import pathlib

    from .. import results
    folder = pathlib.Path(folder or results.RESULTS / "sweeps")
    folder.mkdir(parents=True, exist_ok=True)
    record = {"kind": "gemm sizes", **results._pedigree(), "sizes": {str(k): v for k, v in rows.items()}}
    path = folder / f"{results.slug(record['machine']['gpu'])}_gemm_sizes.json"
    path.write_text(json.dumps(record, indent=1) + "\n")
    return path


def load_sweeps(folder=None) -> list[dict]:
    import json
    import pathlib

    from .. import results
    folder = pathlib.Path(folder or results.RESULTS / "sweeps")
    return [json.loads(p.read_text()) for p in sorted(folder.glob("*_gemm_sizes.json"))]


if __name__ == "__main__":
    rows = sweep()
    print("wrote", save_sweep(rows))
