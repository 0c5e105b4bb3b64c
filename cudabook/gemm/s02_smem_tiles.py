"""02 shared tiles: a block computes a TILE x TILE tile of C from TILE x TILE tiles of A and B in shared memory.

Stage 01 loads two values from global memory for every multiply-add. Here the block walks along K one tile at
a time: its TILE x TILE threads each load one element of the A tile and one of the B tile into shared memory
(widened to float32 on the way), wait at a barrier, and then every thread does TILE multiply-adds reading only
shared memory. Each value loaded from global memory is used TILE times instead of once.

Two barriers per tile, and both are needed:
- after the loads: nobody may read the tile before every thread has written its element;
- after the multiply-adds: nobody may overwrite the tile with the next one while a slower thread still reads it.

Ragged edges: past the last row or column of C, and past K in the last tile, threads store zeros into the
tiles; a zero adds nothing to the sum, so the inner loop needs no test. Every thread stays to the end (it must
reach every barrier) and only threads inside C store.

TILE is a compile-time constant (the size of a shared array must be). `launch(p, tile=8)` compiles the same
kernel with TILE = 8: see `specialise`.
"""
import types

import numpy as np
from numba import cuda, float32

from .. import SIMULATOR
from ..bits import bf16_to_f32, f32_to_bf16
from ..track import check_params

NAME = "02_smem_tiles"
TITLE = "shared-memory tiles"
TILE = 16 if SIMULATOR else 32         # the kernel's own constant: a block is TILE x TILE threads
PARAMS = {
    "tile": TILE,                      # tile edge: TILE x TILE threads a block, 2 * TILE^2 * 4 bytes of shared memory
}


@cuda.jit
def gemm_tiled(a, b, c):
    As = cuda.shared.array((TILE, TILE), float32)       # As[i, k] = A[m0 + i, k0 + k]
    Bs = cuda.shared.array((TILE, TILE), float32)       # Bs[k, j] = B[k0 + k, n0 + j]
    tx = cuda.threadIdx.x                               # along N (and along K when loading A)
    ty = cuda.threadIdx.y                               # along M (and along K when loading B)
    n = cuda.blockIdx.x * TILE + tx
    m = cuda.blockIdx.y * TILE + ty
    M, K = a.shape
    N = b.shape[1]
    acc = float32(0.0)
    for k0 in range(0, K, TILE):                        # round up: the last tile may be partial
        # >>> lab: load As[ty, tx] and Bs[ty, tx] (zero past the edges), barrier, TILE multiply-adds, barrier
        a_val = float32(0.0)                            # zero past the edges: it adds nothing
        if m < M and k0 + tx < K:
            a_val = bf16_to_f32(a[m, k0 + tx])
        As[ty, tx] = a_val
        b_val = float32(0.0)
        if k0 + ty < K and n < N:
            b_val = bf16_to_f32(b[k0 + ty, n])
        Bs[ty, tx] = b_val
        cuda.syncthreads()                              # the tiles are complete
        for k in range(TILE):
            acc += As[ty, k] * Bs[k, tx]
        cuda.syncthreads()                              # everyone is done with them: they may be overwritten
        # <<< lab
    if m < M and n < N:
        c[m, n] = f32_to_bf16(acc)


# ----------------------------------------------------------------------------------------------------------
# Compile-time constants as launch parameters
# ----------------------------------------------------------------------------------------------------------
_SPECIALISED = {}


def python_function(kernel):
    """The Python function behind a Numba kernel (a GPU dispatcher or the simulator's kernel)."""
    fn = getattr(kernel, "py_func", None) or getattr(kernel, "fn", None)
    if fn is None:
        raise TypeError(f"kernel must be a function decorated with @cuda.jit, got {type(kernel).__name__}")
    return fn


def specialise(kernel, launch_bounds=None, **constants):
    """The same kernel compiled with some of its global constants replaced (TILE=16, say).

    Numba reads a kernel's global variables once, when it compiles, and treats them as constants: that is
    what lets `cuda.shared.array((TILE, TILE), float32)` have a size. To get another size we make a copy of
    the Python function whose globals say TILE = 16, and compile that. Kept, so each size compiles once.
    `launch_bounds` (GPU only) promises the compiler at most that many threads a block, so that it keeps
    each thread's registers within what a block of that size can have."""
    fn = python_function(kernel)
    used = {k: v for k, v in constants.items() if k in fn.__code__.co_names}    # the ones this kernel reads
    bounds = None if SIMULATOR else launch_bounds
    if bounds is None and all(fn.__globals__.get(k) == v for k, v in used.items()):
        return kernel
    key = (fn, tuple(sorted(used.items())), bounds)
    if key not in _SPECIALISED:
        g = dict(fn.__globals__, **used)
        copy = types.FunctionType(fn.__code__, g, fn.__name__, fn.__defaults__, fn.__closure__)
        _SPECIALISED[key] = cuda.jit(copy, **({} if bounds is None else {"launch_bounds": bounds}))
    return _SPECIALISED[key]


def _positive_int(name, v, *, most=None):
    if not isinstance(v, (int, np.integer)) or isinstance(v, bool) or v < 1 or (most and v > most):
        raise ValueError(f"{name} must be an integer in 1..{most or 'inf'}, got {v!r}")
    return int(v)


def launch(p, kernel=None, **params):
    check_params(params, PARAMS)
    tile = _positive_int("tile", params.get("tile", PARAMS["tile"]), most=32)   # tile^2 threads <= 1024
    kernel = specialise(kernel or gemm_tiled, TILE=tile)
    M, N, K = p.shape
    grid = ((N + tile - 1) // tile, (M + tile - 1) // tile)
    kernel[grid, (tile, tile)](p.a, p.b, p.c)
