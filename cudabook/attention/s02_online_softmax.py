"""02 online softmax: one warp per query row streams over the keys; no N x N matrix anywhere.

Rung 01 writes the scores S = Q K^T / sqrt(d) to memory, reads them back for the softmax and again for P V. Here
a warp owns one query row (b, h, i) and walks the keys j = 0, 1, ... once, keeping three running quantities:

    m   the largest score seen so far
    l   the sum of exp(s_j - m) over the keys seen so far
    o   the sum of exp(s_j - m) v_j over the keys seen so far (d channels)

For each key: the score s = (q . k_j) * scale, then

    m_new = max(m, s)
    alpha = exp(m - m_new)                    (everything summed so far was relative to the old max)
    p     = exp(s - m_new)
    l     = l * alpha + p
    o     = o * alpha + p * v_j
    m     = m_new

and at the end out = o / l, rounded to bf16 once. That is exactly softmax(s) @ V: every term of l and o ends
up as exp(s_j - m_final), whatever order the maxima came in (the lesson derives it). Subtracting the running
max keeps every exponent <= 0, so nothing overflows however large the scores are.

The warp's lanes split the d channels: lane L owns channels L, L + 32, L + 64, ... (PER_LANE = d / 32 of them,
2 at d = 64, 4 at d = 128). A key's q . k is each lane's partial sum over its channels, added across the warp
by five xor-shuffles (`warp_sum`): afterwards every lane holds the same s, so every lane computes the same m,
alpha, p and l, and updates its own channels of o. Each load of a key row is 32 lanes reading 64 neighbouring
bytes, PER_LANE times.

This is the honest first version: one key at a time, five shuffles a key, and every key row read from global
memory (L2) by every query row that needs it. Rung 03 shares each key tile among many query rows in shared
memory and rescales once per tile instead of once per key.

Causal (query i sees keys j <= i, Nq == Nk): the row simply stops at key i. The loop bound is the same in all
32 lanes (one warp, one row), so every lane reaches every shuffle. A warp past the last row leaves at once,
all its lanes together.

PER_LANE is a compile-time constant of the kernel (the size of its register arrays): `launch` compiles a copy
for each head dimension (see cudabook.kit.numba_rung.specialise).
"""
import math

import numpy as np
from numba import cuda, float32

from .. import SIMULATOR
from ..bits import bf16_to_f32, f32_to_bf16
from ..kit.numba_rung import specialise
from .problem import start_launch

NAME = "02_online_softmax"
TITLE = "one warp per query row, online softmax over the keys"
PARAMS = {"warps_per_block": 1 if SIMULATOR else 4}   # the simulator runs a lone warp fastest

WARP = 32
FULL_MASK = 0xFFFFFFFF
PER_LANE = 4                  # the kernel's own constant: channels each lane owns (d / 32)


@cuda.jit(device=True, forceinline=True)
def warp_sum(x):
    """The sum of x over the 32 lanes of the warp, in every lane (a butterfly of five xor-shuffles)."""
    x += cuda.shfl_xor_sync(FULL_MASK, x, 16)
    x += cuda.shfl_xor_sync(FULL_MASK, x, 8)
    x += cuda.shfl_xor_sync(FULL_MASK, x, 4)
    x += cuda.shfl_xor_sync(FULL_MASK, x, 2)
    x += cuda.shfl_xor_sync(FULL_MASK, x, 1)
    return x


@cuda.jit
def attention_online(q, k, v, out, causal, scale):
    """q, out: uint16 [B, H, Nq, d]; k, v: uint16 [B, H, Nk, d] (bf16 bits); causal: bool; scale: 1 / sqrt(d).
    One warp per query row (b, h, i), rows numbered with i fastest."""
    B, H, Nq = q.shape[0], q.shape[1], q.shape[2]
    Nk = k.shape[2]
    lane = cuda.threadIdx.x % WARP
    row = cuda.grid(1) // WARP                  # my warp's query row, flattened
    if row >= B * H * Nq:
        return                                  # the whole warp is past the end: all its lanes leave together
    i = row % Nq
    h = (row // Nq) % H
    b = row // (Nq * H)
    qr = cuda.local.array(PER_LANE, float32)    # my channels of q ...
    o = cuda.local.array(PER_LANE, float32)     # ... and of the running output
    for c in range(PER_LANE):
        qr[c] = bf16_to_f32(q[b, h, i, lane + WARP * c])
        o[c] = float32(0.0)
    m = float32(-math.inf)                      # running max: nothing seen yet
    l = float32(0.0)                            # running sum of exp(s - m)
    # >>> lab: per key j: s = warp_sum(my part of q . k_j) * scale, the online update of m, l and o; out = o / l
    last = i + 1 if causal else Nk              # keys 0 .. last - 1
    for j in range(last):
        part = float32(0.0)
        for c in range(PER_LANE):
            part += qr[c] * bf16_to_f32(k[b, h, j, lane + WARP * c])
        s = warp_sum(part) * scale
        m_new = max(m, s)
        alpha = math.exp(m - m_new)             # rescales what was summed under the old max (0 at the first key)
        p = math.exp(s - m_new)
        l = l * alpha + p
        for c in range(PER_LANE):
            o[c] = o[c] * alpha + p * bf16_to_f32(v[b, h, j, lane + WARP * c])
        m = m_new
    for c in range(PER_LANE):
        out[b, h, i, lane + WARP * c] = f32_to_bf16(o[c] / l)
    # <<< lab


def block_threads(wpb) -> int:
    """Threads of a block of `wpb` warps; ValueError naming warps_per_block and its rule otherwise."""
    if isinstance(wpb, bool) or not isinstance(wpb, (int, np.integer)) or not 1 <= wpb <= 32:
        raise ValueError(f"{NAME}: warps_per_block must be an integer from 1 to 32 (a block holds at most 1024 "
                         f"threads), got {wpb!r}")
    return WARP * int(wpb)


def launch(p, kernel=None, **params):
    params = start_launch(p, NAME, PARAMS, params, None)
    if params is None:
        return
    threads = block_threads(params["warps_per_block"])
    B, H, Nq, Nk, d = p.shape
    blocks = (B * H * Nq * WARP + threads - 1) // threads
    kernel = specialise(kernel or attention_online, PER_LANE=d // WARP)
    kernel[blocks, threads](p.q, p.k, p.v, p.out, bool(p.causal), np.float32(p.scale))
