"""01 naive: one thread per output element (image n, query q, head m, channel c).

This is the algorithm of Deformable DETR's own CUDA kernel. Each thread walks the L levels and P points of
its query and head; for each sample it turns the normalized location into a pixel position (x W - 0.5,
y H - 0.5), splits that into the top-left pixel (x0, y0) and the fractions (fx, fy), and reads the four
pixels around it one bf16 at a time, each only if it lies on the map (a pixel off the map reads as zero).
The bilinear blend is weighted by the sample's attention weight and added up in float32; the sum is rounded
to bf16 once, at the end.

Threads run along the channels first, so the D threads of a head read D neighbouring bf16 of each corner
pixel: coalesced, 2 bytes a thread. Everything else is done D times over: all D threads of a head compute the
same positions, weights and bounds tests, and load the same locations and weights.

A sample whose pixel position is x <= -1 or x >= W (likewise y), half a pixel or more past the map's edge,
adds nothing (its corners are off the map, or at x = -1 exactly column 0 has weight fx = 0): skipped, as in the
original kernel, before the position is turned into an integer (a location far outside would overflow one).
"""
import math

import numpy as np
from numba import cuda, float32, int32

from .. import SIMULATOR
from ..bits import bf16_to_f32, f32_to_bf16
from ..kit.numba_rung import twin
from ..kit.params import check_params, check_settings

NAME = "01_naive"
TITLE = "one thread per output element"
PARAMS = {"threads": 64 if SIMULATOR else 256}     # threads a block


@cuda.jit
def msda_naive(value, shapes, starts, loc, attn, out):
    N, S, M, D = value.shape
    Lq, L, P = loc.shape[1], loc.shape[3], loc.shape[4]
    i = cuda.grid(1)
    if i >= N * Lq * M * D:
        return                                     # the ragged end of the grid
    c = i % D                                      # channels fastest: neighbouring threads, neighbouring bytes
    m = (i // D) % M
    q = (i // (D * M)) % Lq
    n = i // (D * M * Lq)
    acc = float32(0.0)
    for l in range(L):
        H = shapes[l, 0]
        W = shapes[l, 1]
        start = starts[l]
        for p in range(P):
            # >>> lab: the pixel position; skip it if half a pixel or more past the map's edge; add the on-map corners, weighted
            x = loc[n, q, m, l, p, 0] * float32(W) - float32(0.5)
            y = loc[n, q, m, l, p, 1] * float32(H) - float32(0.5)
            if x > float32(-1.0) and y > float32(-1.0) and x < float32(W) and y < float32(H):
                x0 = int32(math.floor(x))
                y0 = int32(math.floor(y))
                fx = x - float32(x0)
                fy = y - float32(y0)
                top = start + y0 * W + x0          # row of the top-left corner in value
                v = float32(0.0)
                if y0 >= 0 and x0 >= 0:
                    v += (float32(1.0) - fy) * (float32(1.0) - fx) * bf16_to_f32(value[n, top, m, c])
                if y0 >= 0 and x0 + 1 < W:
                    v += (float32(1.0) - fy) * fx * bf16_to_f32(value[n, top + 1, m, c])
                if y0 + 1 < H and x0 >= 0:
                    v += fy * (float32(1.0) - fx) * bf16_to_f32(value[n, top + W, m, c])
                if y0 + 1 < H and x0 + 1 < W:
                    v += fy * fx * bf16_to_f32(value[n, top + W + 1, m, c])
                acc += attn[n, q, m, l, p] * v
            # <<< lab
    out[n, q, m * D + c] = f32_to_bf16(acc)           # round once, at the end


def launch(p, kernel=None, **params):
    check_params(params, PARAMS)
    threads = params.get("threads", PARAMS["threads"])
    check_settings(NAME, threads=int(threads) if isinstance(threads, np.integer) else threads)
    p.require_channels(NAME)
    N, S, M, D, Lq, L, P = p.shape
    total = N * Lq * M * D
    twin(kernel or msda_naive)[(total + threads - 1) // threads, threads](p.value, p.shapes, p.starts, p.loc, p.attn,
                                                                     p.out)
