"""01 naive: one thread per element of C.

Thread (m, n) walks the whole row m of A and column n of B: K multiply-adds in float32, then one rounding to
bf16. threadIdx.x runs along N, so the 32 threads of a warp hold 32 neighbouring columns n of one row m: at
each step k they read the same a[m, k] (one load, broadcast to the warp) and 32 neighbouring b[k, n] (64
contiguous bytes: coalesced), and at the end they store 32 neighbouring c[m, n] (coalesced too).

Correct, and slow: every multiply-add needs two loads from global memory (4 bytes for 2 FLOPs). The caches
catch most of the re-reads, and what holds the kernel is issuing those loads and the instructions around each
FMA, not DRAM bandwidth (lesson 01's profile).
"""
import numpy as np
from numba import cuda, float32

from .. import SIMULATOR
from ..bits import bf16_to_f32, f32_to_bf16
from ..kit.numba_rung import twin
from ..kit.params import check_params

NAME = "01_naive"
TITLE = "one thread per element of C"
PARAMS = {
    "threads_x": 16 if SIMULATOR else 32,    # threads of a block along N (a warp's 32 columns on a GPU)
    "threads_y": 4 if SIMULATOR else 8,      # threads of a block along M: threads_x * threads_y <= 1024
}


@cuda.jit
def gemm_naive(a, b, c):
    # >>> lab: one thread per element of C: n from the x indices, m from the y indices, guard the edges
    n = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x      # x runs along N: coalesced b and c
    m = cuda.blockIdx.y * cuda.blockDim.y + cuda.threadIdx.y
    if m >= c.shape[0] or n >= c.shape[1]:
        return                                                    # the ragged edge of the grid
    acc = float32(0.0)
    for k in range(a.shape[1]):
        acc += bf16_to_f32(a[m, k]) * bf16_to_f32(b[k, n])
    c[m, n] = f32_to_bf16(acc)                                    # round once, at the end
    # <<< lab


def launch(p, kernel=None, **params):
    check_params(params, PARAMS)
    tx, ty = params.get("threads_x", PARAMS["threads_x"]), params.get("threads_y", PARAMS["threads_y"])
    if not (isinstance(tx, (int, np.integer)) and isinstance(ty, (int, np.integer)) and tx >= 1 and ty >= 1
            and tx * ty <= 1024):
        raise ValueError(f"threads_x and threads_y must be positive integers with threads_x * threads_y <= 1024 "
                         f"(a block has at most 1024 threads), got {tx!r} and {ty!r}")
    M, N, K = p.shape
    grid = ((N + tx - 1) // tx, (M + ty - 1) // ty)
    twin(kernel or gemm_naive)[grid, (tx, ty)](p.a, p.b, p.c)


# ----------------------------------------------------------------------------------------------------------
# For the lessons: arithmetic intensity and the roofline
# ----------------------------------------------------------------------------------------------------------
# Spec-sheet values of an H100 SXM (NVIDIA's datasheet, dense, no sparsity): what the roofline is drawn
# against when this machine has no GPU to measure.
H100_SXM = {"name": "H100 SXM (spec sheet)", "GBps": 3350.0, "fp32_TFLOPs": 67.0, "bf16_TFLOPs": 989.0}


def intensity(stage, **params):
    """FLOPs per byte a rung's blocks request from global memory, counting what one warp-wide (or block-wide)
    load brings in once, and nothing the caches might save. bf16 is 2 bytes."""
    if stage == "01_naive":
        # a warp: 32 columns of one row; at each k one a (2 bytes, broadcast) and 32 b (64 bytes), 64 FLOPs
        return 64 / 66
    if stage == "02_smem_tiles":
        t = params.get("tile", 32)
        return 2 * t ** 3 / (2 * 2 * t * t)            # a tile step: 2 t^3 FLOPs, 2 t^2 values of 2 bytes
    if stage == "03_register_blocking":
        bm, bn = params.get("bm", 128), params.get("bn", 128)
        return 2 * bm * bn / (2 * (bm + bn))            # a k step: 2 bm bn FLOPs, (bm + bn) values of 2 bytes
    raise ValueError(f"no intensity for {stage!r}")


def draw_roofline(ax, points, peaks=H100_SXM):
    """Log-log roofline: attainable TFLOP/s = min(fp32 peak, intensity x bandwidth), with `points`
    [(label, FLOPs per byte, measured TFLOP/s or None)] marked on it."""
    x = np.logspace(-1, 3.3, 200)
    bw = peaks["GBps"] / 1000                           # TB/s: TFLOP/s per FLOP/byte
    ax.loglog(x, np.minimum(peaks["fp32_TFLOPs"], x * bw), "k-", lw=1.5, label="fp32 roof (CUDA cores)")
    ax.loglog(x, np.minimum(peaks["bf16_TFLOPs"], x * bw), "k:", lw=1, label="bf16 roof (tensor cores)")
    for i, (label, fi, measured) in enumerate(points):
        color = f"C{i}"
        ax.axvline(fi, color=color, lw=0.8, ls="--")
        ax.plot([fi], [min(peaks["fp32_TFLOPs"], fi * bw)], "o", color=color, mfc="none",
                label=f"{label}: {fi:.3g} FLOP/B")
        if measured:
            ax.plot([fi], [measured], "*", ms=12, color=color)
    ax.set_xlabel("FLOPs per byte from global memory")
    ax.set_ylabel("TFLOP/s")
    ax.set_title(f"roofline of {peaks['name']}: {peaks['GBps']:,.0f} GB/s, {peaks['fp32_TFLOPs']:g} TFLOP/s fp32",
                 fontsize=9)
    ax.legend(fontsize=7, loc="lower right")


def measured_TFLOPs(record, stage):
    """TFLOP/s of `stage` in what lesson.ladder_so_far returned (a fresh record, or [(record, workload)] read
    from results/), at its first workload; None if it has none."""
    if not record:
        return None
    pairs = [(record, k) for k in record.get("workloads", {})] if isinstance(record, dict) else list(record)
    for r, k in pairs:
        row = r.get("workloads", {}).get(k, {}).get("stages", {}).get(stage, {})
        if row.get("TFLOPs"):
            return row["TFLOPs"]
    return None
