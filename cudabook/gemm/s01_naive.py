"""01 naive: one thread per element of C.

Thread (m, n) walks the whole row m of A and column n of B: K multiply-adds in float32, then one rounding to
bf16. threadIdx.x runs along N, so the 32 threads of a warp hold 32 neighbouring columns n of one row m: at
each step k they read the same a[m, k] (one load, broadcast to the warp) and 32 neighbouring b[k, n] (64
contiguous bytes: coalesced), and at the end they store 32 neighbouring c[m, n] (coalesced too).

Correct, and slow: every multiply-add needs two loads from global memory (4 bytes for 2 FLOPs), so the
kernel waits on memory, not on arithmetic. The caches catch most of the re-reads, but not enough.
"""
import numpy as np
from numba import cuda, float32

from .. import SIMULATOR
from ..bits import bf16_to_f32, f32_to_bf16

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


def check_params(params, allowed):
    """TypeError naming any parameter the stage does not know."""
    unknown = sorted(set(params) - set(allowed))
    if unknown:
        raise TypeError(f"unknown parameter{'s' if len(unknown) > 1 else ''} {', '.join(map(repr, unknown))}; "
                        f"this stage takes: {', '.join(allowed)}")


def launch(p, kernel=None, **params):
    check_params(params, PARAMS)
    tx, ty = params.get("threads_x", PARAMS["threads_x"]), params.get("threads_y", PARAMS["threads_y"])
    if not (isinstance(tx, (int, np.integer)) and isinstance(ty, (int, np.integer)) and tx >= 1 and ty >= 1
            and tx * ty <= 1024):
        raise ValueError(f"threads_x and threads_y must be positive integers with threads_x * threads_y <= 1024 "
                         f"(a block has at most 1024 threads), got {tx!r} and {ty!r}")
    M, N, K = p.shape
    grid = ((N + tx - 1) // tx, (M + ty - 1) // ty)
    (kernel or gemm_naive)[grid, (tx, ty)](p.a, p.b, p.c)
