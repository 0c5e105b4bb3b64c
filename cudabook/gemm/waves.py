"""Why a GEMM's speed depends on its size: waves of tiles over the SMs.

A kernel that gives each block one BM x BN tile of C launches ceil(M/BM) * ceil(N/BN) blocks. The GPU runs them
in waves of (SMs x blocks per SM). When the last wave is partly empty, those SMs idle: at M = N = 1024 with
128 x 128 tiles there are 64 tiles for 132 SMs, so half the H100 never works, whatever the kernel does.

Only the arithmetic of tiles and waves lives here. The measured side, every fast rung and cuBLAS across sizes, is
the workbook's size sweep for every track: `python tools/sweep_sizes.py --track gemm` records it on a GPU
(results/sizes/<gpu>_gemm.json), and `cudabook.sizes.show("gemm")` draws it (GEMM lesson 09).
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


def tile_of(params):
    """(BM, BN), the tile of C one block (or one pass of a persistent block) computes, from a rung's PARAMS:
    `bm` and `bn` (rungs 03, 04); `bn` and 64 rows a math warpgroup (`warpgroups`: rung 05; `consumers`: 06, 07);
    `tile` (rung 02). None for parameters that name no tile (rung 01, a peer)."""
    p = params or {}
    if "bm" in p and "bn" in p:
        return p["bm"], p["bn"]
    groups = p.get("consumers", p.get("warpgroups"))
    if "bn" in p and groups:
        return 64 * groups, p["bn"]
    if "tile" in p:
        return p["tile"], p["tile"]
    return None


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
