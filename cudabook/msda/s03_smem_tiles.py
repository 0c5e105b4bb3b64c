"""03 shared tiles: each sample's 2 x 2 x D corners staged in shared memory, then blended from there.

This is seed 002's "optimized" kernel (deform_attn_2x2x32_optimized.cu: "loads entire 2x2x32 tiles into shared
memory cooperatively"), written for every D, and put next to rung 02 to see what the staging buys. The work is
split as in rung 02: a group of G lanes of one warp serves one (image n, query q, head m), G the head's row of
vectors rounded up to a power of two (at D = 32 with 16-byte vectors, 4 lanes a head, 8 heads a warp). Each
group owns a slice of the block's shared memory: a tile of 4 corners x D/2 words and a table of G samples.

For each round of G samples:
1. The table. Lane g computes sample j0 + g: its pixel position, the four bilinear weights with the attention
   weight folded in, and the row of value each corner sits in, or -1 for a corner off the map. It writes them
   to its group's table; the warp synchronises (`cuda.syncwarp`, all its groups), since every lane reads every
   entry.
2. For each sample t of the round:
   stage: the group copies the sample's 4 corners x D channels from global memory into its tile, the
     4 x (D / vector) vectors dealt out to all G lanes (lane g copies vectors g, g + G, ...), one `vec_bytes`
     load and one store each. A corner off the map is written as zeros: the border test happens here, once
     per vector, and the blend needs none (as with TMA's zero fill in rung 04);
   synchronise: lane g blends channels other lanes staged, so it must wait for them;
   blend: lane g adds w00 * tile[0] + w01 * tile[1] + w10 * tile[2] + w11 * tile[3] for its own vector (two
     vectors when 4-byte vectors leave a D > 64 row wider than 32 lanes), in float32;
   synchronise again: the next sample overwrites the tile, and nobody may still be reading it.
The sums are rounded to bf16 (nearest even) once, at the end, and stored as vectors.

What the measurement should show, and why (the benchmark measures it; no number is quoted here): rung 03 is
not expected to beat rung 02, and is likely slower. Shared memory pays when a staged value is read many times
(a GEMM tile is read TILE times). Here every staged vector is read exactly once, by one lane, for one sample:
the corners of one (query, head) sample are nobody else's (another head reads other channels, another query
other positions, and what neighbouring queries do share, L1 already keeps). So every vector makes the same
trip from L1/L2 as in rung 02, plus a store to shared memory, a load back, and two warp barriers per sample,
and a lane cannot start a sample's blend until the whole tile has landed. What staging does gain is small:
the blend has no branch (rung 02 tests each corner's weight before each load; here the copy tests the
corner's row instead), and lanes that rung 02 leaves idle (a row of 3 vectors in a group of 4) help copy.
Seed 002 planned to "reuse shared memory across levels", but there is nothing to reuse: each sample reads its
own 2 x 2 x D box once. The honest ladder records it as measured, and rung 04 asks whether the copy engine
(TMA) can at least take the copying off the lanes.

The vector width and the vectors each lane blends are compile-time constants of the kernel (WORDS, PER_LANE,
ACC): `launch` compiles a copy for each (see cudabook.kit.numba_rung.specialise). Every lane of a warp
reaches every barrier: a group past the end of the problem (the last warp's spare groups) does group 0's work
and stores nothing; a warp wholly past the end leaves at once.
"""
import math

import numpy as np
from numba import cuda, float32, int32, uint32

from ..kit.numba_rung import specialise
from ..kit.params import check_params
from ..vectors import loader, storer
from .s02_warp_cooperative import (WIDTHS, add_word, block_threads, grid_blocks, lane_group, load2, load4, pack,
                                   pow2_at_least, store2, store4)

NAME = "03_smem_tiles"
TITLE = "2x2xD tiles staged in shared memory"
PARAMS = {"vec_bytes": 16, "warps_per_block": 4}
SHARED_LIMIT = 48 * 1024      # dynamic shared memory a block may have without an opt-in (Numba has none)
TABLE_WORDS = 8               # a table entry: 4 corner weights (float32), 4 corner rows (int32, -1 off the map)

WARP = 32
FULL_MASK = 0xFFFFFFFF
WORDS = 4                     # the kernel's own constants: 32-bit words a vector,
PER_LANE = 1                  # vectors each lane blends (2 only for 4-byte vectors at D > 64),
ACC = 8                       # and float32 sums a lane keeps: 2 * WORDS * PER_LANE

# 8- and 16-byte accesses to a 1-D shared array of uint32 words (the tile); 4 bytes is plain indexing
sload2, sload4 = loader(2, 1, "shared-memory load"), loader(4, 1, "shared-memory load")
sstore2, sstore4 = storer(2, 1, "shared-memory store"), storer(4, 1, "shared-memory store")


@cuda.jit(device=True, forceinline=True)
def copy_vector(tile, at, words, n, row, i, nwords):
    """tile[at:at + nwords] = words[n, row, i:i + nwords]: one global load, one shared store."""
    if nwords == 1:
        tile[at] = words[n, row, i]
    elif nwords == 2:
        a, b = load2(words, n, row, i)
        sstore2(tile, at, a, b)
    else:
        a, b, c, d = load4(words, n, row, i)
        sstore4(tile, at, a, b, c, d)


@cuda.jit(device=True, forceinline=True)
def zero_vector(tile, at, nwords):
    """tile[at:at + nwords] = 0 (a corner off the map): one shared store."""
    zero = uint32(0)
    if nwords == 1:
        tile[at] = zero
    elif nwords == 2:
        sstore2(tile, at, zero, zero)
    else:
        sstore4(tile, at, zero, zero, zero, zero)


@cuda.jit(device=True, forceinline=True)
def add_staged(acc, k, tile, at, w, nwords):
    """acc[k:k + 2 * nwords] += w * the vector tile[at:at + nwords] (one shared load, two channels a word)."""
    if nwords == 1:
        add_word(acc, k, tile[at], w)
    elif nwords == 2:
        a, b = sload2(tile, at)
        add_word(acc, k, a, w)
        add_word(acc, k + 2, b, w)
    else:
        a, b, c, d = sload4(tile, at)
        add_word(acc, k, a, w)
        add_word(acc, k + 2, b, w)
        add_word(acc, k + 4, c, w)
        add_word(acc, k + 6, d, w)


@cuda.jit(device=True, forceinline=True)
def store_sums(out, n, q, i, acc, k, nwords):
    """out[n, q, i:i + nwords] = acc[k:k + 2 * nwords] rounded to bf16, as one store."""
    if nwords == 1:
        out[n, q, i] = pack(acc, k)
    elif nwords == 2:
        store2(out, n, q, i, pack(acc, k), pack(acc, k + 2))
    else:
        store4(out, n, q, i, pack(acc, k), pack(acc, k + 2), pack(acc, k + 4), pack(acc, k + 6))


@cuda.jit
def msda_tiles(words, shapes, starts, loc, attn, out, lanes):
    """words: value as uint32 [N, S * M, D / 2]; out: uint32 [N, Lq, M * D / 2]; lanes: G, a power of two.
    Dynamic shared memory: per group of the block, its tile (4 corners x D / 2 words) then its table (G entries
    of TABLE_WORDS words)."""
    tile = cuda.shared.array(0, uint32)            # three views of the same dynamic shared memory
    weights = cuda.shared.array(0, float32)
    rows = cuda.shared.array(0, int32)
    N, Lq, M, L, P = loc.shape[0], loc.shape[1], loc.shape[2], loc.shape[3], loc.shape[4]
    half = words.shape[2]                          # words in a head's row (D / 2)
    nvec = half // WORDS                           # vectors in a head's row
    samples = L * P
    g, n, q, m, live, gone = lane_group(lanes, N, Lq, M)    # a spare group (not live) does group 0's work
    if gone:
        return                                     # the whole warp is past the end: all its lanes leave together
    TILE = (cuda.threadIdx.x // lanes) * (4 * half + TABLE_WORDS * lanes)    # my group's slice of shared memory
    TABLE = TILE + 4 * half
    acc = cuda.local.array(ACC, float32)
    for k in range(ACC):
        acc[k] = float32(0.0)
    for j0 in range(0, samples, lanes):
        # >>> lab: tabulate sample j0 + g, sync; per sample: stage 2x2xD (zeros off the map), sync, blend, sync
        j = j0 + g
        if j < samples:
            l = j // P
            p = j % P
            H = shapes[l, 0]
            W = shapes[l, 1]
            x = loc[n, q, m, l, p, 0] * float32(W) - float32(0.5)
            y = loc[n, q, m, l, p, 1] * float32(H) - float32(0.5)
            w00, w01, w10, w11 = float32(0.0), float32(0.0), float32(0.0), float32(0.0)
            r00, r01, r10, r11 = int32(-1), int32(-1), int32(-1), int32(-1)
            if x > float32(-1.0) and y > float32(-1.0) and x < float32(W) and y < float32(H):
                x0 = int32(math.floor(x))
                y0 = int32(math.floor(y))
                fx = x - float32(x0)
                fy = y - float32(y0)
                a = attn[n, q, m, l, p]
                w00 = a * (float32(1.0) - fy) * (float32(1.0) - fx)
                w01 = a * (float32(1.0) - fy) * fx
                w10 = a * fy * (float32(1.0) - fx)
                w11 = a * fy * fx
                top = (starts[l] + y0 * W + x0) * M + m        # row of the top-left corner in words
                if y0 >= 0 and x0 >= 0:
                    r00 = top
                if y0 >= 0 and x0 + 1 < W:
                    r01 = top + M
                if y0 + 1 < H and x0 >= 0:
                    r10 = top + W * M
                if y0 + 1 < H and x0 + 1 < W:
                    r11 = top + (W + 1) * M
            mine = TABLE + TABLE_WORDS * g
            weights[mine] = w00
            weights[mine + 1] = w01
            weights[mine + 2] = w10
            weights[mine + 3] = w11
            rows[mine + 4] = r00
            rows[mine + 5] = r01
            rows[mine + 6] = r10
            rows[mine + 7] = r11
        cuda.syncwarp(FULL_MASK)                   # the table is complete
        for t in range(min(lanes, samples - j0)):
            entry = TABLE + TABLE_WORDS * t        # sample j0 + t
            for e in range(g, 4 * nvec, lanes):    # stage: 4 corners x nvec vectors, dealt out to the group
                c = e // nvec
                v = e - c * nvec
                at = TILE + c * half + v * WORDS
                r = rows[entry + 4 + c]
                if r >= 0:
                    copy_vector(tile, at, words, n, r, v * WORDS, WORDS)
                else:
                    zero_vector(tile, at, WORDS)   # off the map: zeros, so the blend needs no border test
            cuda.syncwarp(FULL_MASK)               # the tile is complete: other lanes staged my channels
            for k in range(PER_LANE):              # blend: my vector(s) of the four corners
                v = g + k * lanes
                if v < nvec:
                    for c in range(4):
                        add_staged(acc, 2 * WORDS * k, tile, TILE + c * half + v * WORDS, weights[entry + c], WORDS)
            cuda.syncwarp(FULL_MASK)               # everyone is done with the tile before the next sample's
        # <<< lab
    if live:
        for k in range(PER_LANE):
            v = g + k * lanes
            if v < nvec:
                store_sums(out, n, q, m * half + v * WORDS, acc, 2 * WORDS * k, WORDS)


def plan(D, vec_bytes=PARAMS["vec_bytes"]):
    """(words a vector, vectors a row, lanes a group, vectors each lane blends) for D channels."""
    if isinstance(vec_bytes, bool) or vec_bytes not in WIDTHS:
        raise ValueError(f"{NAME}: vec_bytes must be one of {sorted(WIDTHS)} (bytes each lane moves per access: two, "
                         f"four or eight bf16), got {vec_bytes!r}")
    words = WIDTHS[vec_bytes]
    nvec = D // 2 // words
    lanes = min(WARP, pow2_at_least(nvec))
    return words, nvec, lanes, -(-nvec // lanes)


def shared_bytes(D, lanes, threads):
    """Dynamic shared memory a block needs: per group of `lanes` lanes, a tile of 4 x D / 2 words and a table of
    `lanes` entries."""
    return 4 * (threads // lanes) * (4 * (D // 2) + TABLE_WORDS * lanes)


def launch(p, kernel=None, **params):
    check_params(params, PARAMS)
    threads = block_threads(NAME, params.get("warps_per_block", PARAMS["warps_per_block"]))
    p.require_channels(NAME)
    N, S, M, D, Lq, L, P = p.shape
    words, nvec, lanes, per_lane = plan(D, params.get("vec_bytes", PARAMS["vec_bytes"]))
    smem = shared_bytes(D, lanes, threads)
    if smem > SHARED_LIMIT:
        raise ValueError(f"{NAME}: {threads // WARP} warps a block need {smem:,} bytes of shared memory at D = {D} "
                         f"(a tile and a table per group of {lanes} lanes), more than the {SHARED_LIMIT:,} a block "
                         f"may have without an opt-in: use fewer warps_per_block")
    value_words, out_words = p.words()
    blocks = grid_blocks(N * Lq * M, lanes, threads)
    kernel = specialise(kernel or msda_tiles, WORDS=words, PER_LANE=per_lane, ACC=2 * words * per_lane)
    kernel[blocks, threads, 0, smem](value_words, p.shapes, p.starts, p.loc, p.attn, out_words, np.int32(lanes))
