"""01 naive: attention as the formula reads, in three kernels, with the scores S stored in global memory.

    1. scores:   S[b, h, i, j] = scale * q[b, h, i] . k[b, h, j]      one thread per score, float32
                 (-inf where query i may not see key j: j > i when causal)
    2. softmax:  each row of S becomes P = exp(S - m) / l in place     one thread per row
                 (m the row's max, l = sum of exp(S - m))
    3. P @ V:    out[b, h, i, c] = sum_j P[b, h, i, j] v[b, h, j, c]  one thread per output, rounded to bf16 once

Each kernel is the simplest thing that works. The scores kernel is a naive matrix product, laid out as rung 01 of
the GEMM track: blocks of 32 x (threads / 32) threads, x along the keys j, y along the queries i, one head a
grid layer z. A warp holds 32 neighbouring keys of one query: it reads the same q[i, c] (a broadcast) and 32 key
rows d elements apart (the caches catch the re-reads), and writes 32 neighbouring scores (coalesced). The
softmax gives a whole row to one thread, which walks it three times (max, exp and sum, divide). P @ V is laid
out like the scores, x along the channels c: a warp reads one P[i, j] (a broadcast) and 32 neighbouring values
of v's row j (coalesced).

Where memory runs out: S is B * H * Nq * Nk float32 values, written by the scores kernel, read and rewritten by
the softmax, read again by P @ V. At the benchmark's size (B = 4, H = 16, N = 4096) that is 4.3 GB, 16 times the
0.27 GB of q, k, v and out together (d = 128), and it grows with N^2: at N = 32768 it would be 275 GB, more than
any GPU holds. `score_bytes` says how much S needs; launch refuses, with that number, when the GPU does not have
it free. The later rungs never store S.

The causal mask costs nothing here and saves nothing: the masked half of S is computed as -inf, turned into
zeros by the softmax, and multiplied through by P @ V like the rest.
"""
import math

import numpy as np
from numba import cuda, float32

from .. import SIMULATOR
from ..bits import bf16_to_f32, f32_to_bf16
from ..kit.numba_rung import twin
from ..kit.params import check_settings
from .problem import start_launch

NAME = "01_naive"
TITLE = "three kernels: scores, softmax, P @ V, with S in memory"
PARAMS = {"threads": 32 if SIMULATOR else 256}     # threads a block (a multiple of 32), in each of the kernels
WARP = 32


def score_bytes(B, H, Nq, Nk) -> int:
    """Bytes of S, the float32 scores of every query against every key of every head."""
    return 4 * B * H * Nq * Nk


def require_memory(nbytes, free=None, total=None):
    """MemoryError saying how much S needs and what the GPU has, unless `nbytes` fit in its free memory (asked
    of the GPU when `free` is not given)."""
    if free is None:
        free, total = cuda.current_context().get_memory_info()
    if nbytes > free:
        of = f" of {total / 1e9:,.0f} GB" if total and math.isfinite(total) else ""
        raise MemoryError(f"{NAME} stores S, the float32 scores of every query against every key (B * H * Nq * Nk "
                          f"* 4 bytes): {nbytes / 1e9:,.1f} GB here, and this GPU has {free / 1e9:,.1f} GB "
                          f"free{of}. S grows with the square of N; the fused rungs (02 on) never store it")


@cuda.jit(device=True, forceinline=True)
def grid_cell(H):
    """(x, y, b, h) of this thread in a 2-D kernel's grid: its column x and row y over all blocks, and the head
    (b, h) of its grid layer z = b * H + h."""
    x = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    y = cuda.blockIdx.y * cuda.blockDim.y + cuda.threadIdx.y
    return x, y, cuda.blockIdx.z // H, cuda.blockIdx.z % H


@cuda.jit
def attention_scores(q, k, s, causal, scale):
    """s[b, h, i, j] = scale * q[b, h, i] . k[b, h, j] in float32, -inf where query i may not see key j.
    x runs along the keys j, y along the queries i, z over the heads (b, h)."""
    H, Nq, Nk, d = q.shape[1], q.shape[2], k.shape[2], q.shape[3]
    j, i, b, h = grid_cell(H)
    if i >= Nq or j >= Nk:
        return                                     # the ragged edges of the grid
    if causal and j > i:
        s[b, h, i, j] = float32(-math.inf)         # query i sees keys 0 .. i only
        return
    acc = float32(0.0)
    for c in range(d):                             # bf16 x bf16 is exact in float32; the sum is float32
        acc += bf16_to_f32(q[b, h, i, c]) * bf16_to_f32(k[b, h, j, c])
    s[b, h, i, j] = acc * scale


@cuda.jit
def attention_softmax(s):
    """Each row of s, in place: p_j = exp(s_j - m) / l, m = the row's max, l = sum_j exp(s_j - m)."""
    B, H, Nq, Nk = s.shape[0], s.shape[1], s.shape[2], s.shape[3]
    r = cuda.grid(1)
    if r >= B * H * Nq:
        return
    i = r % Nq
    h = (r // Nq) % H
    b = r // (Nq * H)
    # >>> lab: the row's max m; then p_j = exp(s_j - m) and their sum l; then divide every p_j by l
    m = float32(-math.inf)
    for j in range(Nk):
        m = max(m, s[b, h, i, j])                  # subtracting m keeps every exp(s_j - m) in (0, 1]
    l = float32(0.0)
    for j in range(Nk):
        p = math.exp(s[b, h, i, j] - m)            # 0 where s is -inf (a masked key)
        s[b, h, i, j] = p
        l += p
    for j in range(Nk):
        s[b, h, i, j] = s[b, h, i, j] / l
    # <<< lab


@cuda.jit
def attention_pv(p, v, out):
    """out[b, h, i, c] = sum_j p[b, h, i, j] * v[b, h, j, c], summed in float32, rounded to bf16 once.
    x runs along the channels c, y along the queries i, z over the heads (b, h)."""
    H, Nq, Nk, d = p.shape[1], p.shape[2], p.shape[3], v.shape[3]
    c, i, b, h = grid_cell(H)
    if i >= Nq or c >= d:
        return
    acc = float32(0.0)
    for j in range(Nk):
        acc += p[b, h, i, j] * bf16_to_f32(v[b, h, j, c])
    out[b, h, i, c] = f32_to_bf16(acc)


def scores_buffer(p):
    """S for this problem, float32 [B, H, Nq, Nk]: made once (MemoryError first if it cannot fit), then kept."""
    B, H, Nq, Nk, d = p.shape

    def make():
        require_memory(score_bytes(B, H, Nq, Nk))
        return cuda.device_array((B, H, Nq, Nk), np.float32)
    return p.scratch("01_naive scores", (B, H, Nq, Nk), np.float32, make)


def launch(p, kernel=None, **params):
    """The three kernels, one after the other (`kernel` replaces the softmax, the lab's kernel)."""
    params = start_launch(p, NAME, PARAMS, params, None)
    if params is None:
        return
    threads = params["threads"]
    threads = int(threads) if isinstance(threads, np.integer) else threads
    B, H, Nq, Nk, d = p.shape
    check_settings(NAME, threads=threads, threads_multiple=WARP)
    rows = threads // WARP                                             # query rows a block of the 2-D kernels
    check_settings(NAME, grid_y=(Nq + rows - 1) // rows)
    if B * H > 65535:
        raise ValueError(f"{NAME}: B * H = {B * H:,} heads, one grid layer (z) each, and a GPU allows at most "
                         f"65,535: split the batch")
    s = scores_buffer(p)

    def tiles(n, per):
        return (n + per - 1) // per
    attention_scores[(tiles(Nk, WARP), tiles(Nq, rows), B * H), (WARP, rows)](p.q, p.k, s, bool(p.causal),
                                                                               np.float32(p.scale))
    twin(kernel or attention_softmax)[tiles(B * H * Nq, threads), threads](s)
    attention_pv[(tiles(d, WARP), tiles(Nq, rows), B * H), (WARP, rows)](s, p.v, p.out)
