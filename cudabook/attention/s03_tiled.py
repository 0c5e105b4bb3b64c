"""03 tiled: a block of query rows shares each tile of keys and values in shared memory; one rescale per tile.

Rung 02 gives each query row its own warp, and every warp reads every key row it needs from global memory (L2)
on its own: a key row is fetched once per query row. Here a block of WARPS warps serves BQ = WARPS * ROWS
query rows of one head (ROWS rows a warp), and walks the keys in tiles of BK = 32:

1. The block's query rows are widened to float32 into shared memory once (Qs, BQ x d).
2. For each tile of 32 keys, all the block's threads copy the tile's K and V rows into shared memory (Ks, Vs),
   widened to float32: thread t copies elements t, t + THREADS, ... of the tile, so neighbouring threads read
   neighbouring channels of a row (coalesced). Keys past Nk are written as zeros: their weight p is 0, but 0
   times whatever shared memory held before (possibly a NaN) would not be. Then a barrier: nobody may read
   the tile before every thread has written its part.
3. Each warp serves its ROWS rows; lane L owns key j0 + L of the tile. Scores first: lane L computes the dot
   products of its key row (Ks[L]) with the warp's ROWS query rows (Qs: the same address in every lane, a
   broadcast), reading each K value once for all ROWS rows, and scales them. A key a row may not see (past
   Nk, or past the diagonal when causal) gets -inf. Then, per row, the online softmax once for the whole tile:
       m_new = max(m, the tile's largest score)            (a warp max: five shuffles)
       alpha = exp(m - m_new),  p_L = exp(s_L - m_new)     (each lane its own key)
       l     = l * alpha + sum of p over the tile          (a warp sum)
   Each lane writes its p to shared memory (Ps, a row of 32 per query row), the warp synchronises
   (`syncwarp`), and every lane updates its channels L, L + 32, ... of each row's output:
       o     = o * alpha + sum over the tile's keys t of p_t * V[t]
   reading Vs[t, L + 32 c] (32 neighbouring floats: no bank conflict), once for all ROWS rows.
4. A barrier again: nobody may overwrite the tile with the next one while a slower warp still reads it.

At the end each row's o / l is rounded to bf16 once and stored.

Compared with rung 02: a key row is read from global memory once per block (BQ query rows), not once per
row; the rescale happens once per 32 keys, not once per key; the shuffles are 10 per row and tile (a max and a
sum) instead of 5 per key; and each value read from shared memory serves ROWS rows (register blocking, as in
the GEMM track's rung 03). Each tile of K and V (2 * BK * d * 2 bytes of bf16) serves 4 * BQ * BK * d
FLOPs: BQ FLOPs per byte read from global memory, whatever d.

Shared-memory details: Ks rows are padded to d + 1 floats. Lane L reads Ks[L, c] while its neighbours read
Ks[L + 1, c]: with rows of exactly d floats (a multiple of 32) all 32 addresses would fall in the same bank,
a 32-way conflict; with d + 1 they are 32 different banks. Qs is read at the same address by all lanes (a
broadcast, free) and Vs at 32 consecutive addresses (32 banks), so neither needs padding.

Causal (query i sees keys j <= i): tiles that start past the block's last row are skipped (none of the block's
rows sees any of their keys); in the tiles that cross the diagonal each lane masks its key. About half the
tiles are skipped on a square problem. The loop bound is the same for every thread of the block, so every
thread reaches every barrier; rows past Nq (in the last block of a head) are computed on zeros and not stored.

The tile shapes are compile-time constants of the kernel (the sizes of its shared and register arrays):
`launch` compiles a copy for each head dimension and block shape (see cudabook.kit.numba_rung.specialise).
"""
import math

import numpy as np
from numba import cuda, float32

from .. import SIMULATOR
from ..bits import bf16_to_f32, f32_to_bf16
from ..kit.numba_rung import specialise
from .problem import start_launch
from .s02_online_softmax import FULL_MASK, WARP, warp_sum

NAME = "03_tiled"
TITLE = "K/V tiles in shared memory, one rescale per tile"
PARAMS = {"warps": 2 if SIMULATOR else 4,           # warps a block
          "rows_per_warp": 2 if SIMULATOR else 4}   # query rows each warp serves: a block serves their product
SHARED_LIMIT = 48 * 1024      # static shared memory a block may have (Numba has no opt-in beyond it)

# The kernel's own constants (launch compiles a copy for each d and block shape)
BK = WARP                     # keys a tile: one per lane
D = 64                        # the head dimension
KSTRIDE = D + 1               # floats a row of Ks: padded against bank conflicts
PER_LANE = D // WARP          # channels of o each lane owns
WARPS = 2                     # warps a block
ROWS = 2                      # query rows a warp
BQ = WARPS * ROWS             # query rows a block
THREADS = WARPS * WARP
OACC = ROWS * PER_LANE        # a lane's accumulators: PER_LANE channels of each of its ROWS rows


@cuda.jit(device=True, forceinline=True)
def warp_max(x):
    """The largest x over the 32 lanes of the warp, in every lane (five xor-shuffles)."""
    x = max(x, cuda.shfl_xor_sync(FULL_MASK, x, 16))
    x = max(x, cuda.shfl_xor_sync(FULL_MASK, x, 8))
    x = max(x, cuda.shfl_xor_sync(FULL_MASK, x, 4))
    x = max(x, cuda.shfl_xor_sync(FULL_MASK, x, 2))
    x = max(x, cuda.shfl_xor_sync(FULL_MASK, x, 1))
    return x


@cuda.jit
def attention_tiled(q, k, v, out, causal, scale):
    """q, out: uint16 [B, H, Nq, d]; k, v: uint16 [B, H, Nk, d] (bf16 bits); causal: bool; scale: 1 / sqrt(d).
    A block per BQ query rows of one head: blocks numbered (b, h, query block), query blocks fastest."""
    Qs = cuda.shared.array((BQ, D), float32)
    Ks = cuda.shared.array((BK, KSTRIDE), float32)
    Vs = cuda.shared.array((BK, D), float32)
    Ps = cuda.shared.array((BQ, BK), float32)
    H, Nq = q.shape[1], q.shape[2]
    Nk = k.shape[2]
    tid = cuda.threadIdx.x
    lane = tid % WARP
    w = tid // WARP
    per_head = (Nq + BQ - 1) // BQ                  # query blocks a head
    h = (cuda.blockIdx.x // per_head) % H
    b = cuda.blockIdx.x // (per_head * H)
    i0 = (cuda.blockIdx.x % per_head) * BQ          # the block's first query row
    for e in range(tid, BQ * D, THREADS):           # the block's query rows, widened once (zeros past Nq)
        r = e // D
        c = e - r * D
        x = float32(0.0)
        if i0 + r < Nq:
            x = bf16_to_f32(q[b, h, i0 + r, c])
        Qs[r, c] = x
    m = cuda.local.array(ROWS, float32)             # each row's running max,
    l = cuda.local.array(ROWS, float32)             # running sum,
    o = cuda.local.array(OACC, float32)             # and my channels of its running output
    s = cuda.local.array(ROWS, float32)             # my key's score for each row, this tile
    alpha = cuda.local.array(ROWS, float32)         # each row's rescale, this tile
    for r in range(ROWS):
        m[r] = float32(-math.inf)
        l[r] = float32(0.0)
    for a in range(OACC):
        o[a] = float32(0.0)
    end = Nk
    if causal:
        end = min(Nk, i0 + BQ)                      # tiles from the block's last row on: no row sees them
    cuda.syncthreads()                              # Qs is complete
    # >>> lab: per tile: K, V tiles to shared (zeros past Nk), barrier; per row: scores, one rescale, o += P V; barrier
    for j0 in range(0, end, BK):
        for e in range(tid, BK * D, THREADS):       # the tiles: neighbouring threads, neighbouring channels
            t = e // D
            c = e - t * D
            kx = float32(0.0)
            vx = float32(0.0)
            if j0 + t < Nk:
                kx = bf16_to_f32(k[b, h, j0 + t, c])
                vx = bf16_to_f32(v[b, h, j0 + t, c])
            Ks[t, c] = kx
            Vs[t, c] = vx
        cuda.syncthreads()                          # the tiles are complete
        j = j0 + lane                               # my key of the tile
        for r in range(ROWS):
            s[r] = float32(0.0)
        for c in range(D):                          # my key's score for each of my rows:
            kc = Ks[lane, c]                        # each K value read once serves ROWS rows
            for r in range(ROWS):
                s[r] += Qs[w * ROWS + r, c] * kc
        for r in range(ROWS):                       # the online softmax, once for the whole tile
            x = float32(-math.inf)                  # a key this row may not see
            if j < Nk and (not causal or j <= i0 + w * ROWS + r):
                x = s[r] * scale
            m_new = max(m[r], warp_max(x))          # the tile's largest score first,
            alpha[r] = math.exp(m[r] - m_new)       # then one rescale for the whole tile
            p = math.exp(x - m_new)
            l[r] = l[r] * alpha[r] + warp_sum(p)
            Ps[w * ROWS + r, lane] = p
            m[r] = m_new
        cuda.syncwarp(FULL_MASK)                    # every lane's p is in Ps
        for r in range(ROWS):                       # o = o * alpha + P V, for my channels of my rows
            for c in range(PER_LANE):
                o[r * PER_LANE + c] *= alpha[r]
        for t in range(BK):
            for c in range(PER_LANE):
                vt = Vs[t, lane + WARP * c]         # each V value read once serves ROWS rows
                for r in range(ROWS):
                    o[r * PER_LANE + c] += Ps[w * ROWS + r, t] * vt
        cuda.syncthreads()                          # everyone is done with the tiles: they may be overwritten
    # <<< lab
    for r in range(ROWS):
        i = i0 + w * ROWS + r
        if i < Nq:
            for c in range(PER_LANE):
                out[b, h, i, lane + WARP * c] = f32_to_bf16(o[r * PER_LANE + c] / l[r])


def _count(name, value, most):
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or not 1 <= value <= most:
        raise ValueError(f"{NAME}: {name} must be an integer from 1 to {most}, got {value!r}")
    return int(value)


def shared_bytes(d, warps, rows_per_warp) -> int:
    """Shared memory a block needs: Qs (BQ x d), Ks (BK x (d + 1)), Vs (BK x d), Ps (BQ x BK), float32."""
    bq = warps * rows_per_warp
    return 4 * (bq * d + BK * (d + 1) + BK * d + bq * BK)


def launch(p, kernel=None, **params):
    params = start_launch(p, NAME, PARAMS, params, None)
    if params is None:
        return
    warps = _count("warps", params["warps"], 32)
    rows = _count("rows_per_warp", params["rows_per_warp"], 16)
    B, H, Nq, Nk, d = p.shape
    smem = shared_bytes(d, warps, rows)
    if smem > SHARED_LIMIT:
        raise ValueError(f"{NAME}: {warps} warps of {rows} rows each need {smem:,} bytes of shared memory at d = {d} "
                         f"(the block's query rows, a K and a V tile of {BK} keys, the weights P), more than the {SHARED_LIMIT:,} "
                         f"a block may have: use fewer warps or rows_per_warp")
    bq = warps * rows
    blocks = B * H * ((Nq + bq - 1) // bq)
    kernel = specialise(kernel or attention_tiled, D=d, KSTRIDE=d + 1, PER_LANE=d // WARP, WARPS=warps, ROWS=rows,
                        BQ=bq, THREADS=warps * WARP, OACC=rows * (d // WARP))
    kernel[blocks, warps * WARP](p.q, p.k, p.v, p.out, bool(p.causal), np.float32(p.scale))
