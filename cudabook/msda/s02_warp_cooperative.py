"""02 warp-cooperative: a group of lanes per (image, query, head), lanes over channels, samples shared by shuffles.

Stage 01 gives each channel its own thread, so every sample's position, weights and bounds tests are computed
D times over, and each thread moves 2 bytes per load. Here a group of G lanes of one warp serves one (n, q, m):

1. Channels. A head's row of D bf16 is cut into vectors of `vec_bytes` (4 = two channels as one uint32 word,
   8 = four, 16 = eight); lane g of the group owns vector g (and g + G, g + 2G, ... when the row has more
   vectors than the group has lanes). With D a multiple of 8 every row is a whole number of 16-byte vectors,
   so every width is aligned for every D. G is the row's vector count rounded up to a power of two (at most
   32): at D = 32 with 16-byte vectors, 4 lanes a head and 8 heads a warp.
2. Samples, computed once. The L * P samples of the head are dealt out to the group's lanes: in each round
   lane g computes sample j0 + g: its position, its four corner weights with the attention weight folded in
   (zero for a corner off the map) and the row of its top-left pixel.
3. Shared by shuffles. The group then walks that round's samples one by one; `cuda.shfl_sync` hands every lane
   the four weights and the row from the lane that computed them (lane `leader + t`, inside the group), and
   each lane adds its vector of the (up to) four corner pixels. A corner whose weight is zero (off the map) is
   never read.

Every lane of a warp must reach every shuffle, so a group past the end of the problem (the last warp's spare
lanes) still takes part, with no samples, and only skips the store; a warp wholly past the end leaves at once.
Lanes whose vector lies past the row (G > vectors) likewise take part and skip the loads.

The vector width is a compile-time constant of the kernel (WORDS, 32-bit words a vector): `launch` compiles a
copy for each width (see cudabook.kit.numba_rung.specialise).

A reading, not a record (H100 SXM, 2026-11-26, seed 002's size, default parameters): 11.4 ms against rung 01's
42.7 ms with local locations, 11.5 against 46.7 ms with uniform ones; the gather of the same corners alone took
3.7 and 5.6 ms. Locality moves the gather's time but not this kernel's: memory is not what limits it yet.
"""
import math

import numpy as np
from numba import cuda, float32, int32

from ..bits import bf16_to_f32, f32_to_bf16
from ..kit.numba_rung import specialise
from ..kit.params import check_params
from ..vectors import loader, storer

NAME = "02_warp_cooperative"
TITLE = "lanes over channels, samples shared by shuffles"
PARAMS = {"vec_bytes": 16, "lanes": None, "warps_per_block": 4}
WIDTHS = {4: 1, 8: 2, 16: 4}          # vec_bytes -> 32-bit words a vector

WARP = 32
FULL_MASK = 0xFFFFFFFF
WORDS = 4                             # the kernel's own constant: 32-bit words each lane moves per access

# 8- and 16-byte accesses to uint32 arrays [N, rows, words] (one ld/st .v2/.v4 on a GPU)
load2, load4 = loader(2, 3), loader(4, 3)
store2, store4 = storer(2, 3), storer(4, 3)


@cuda.jit(device=True, forceinline=True)
def add_word(acc, k, word, w):
    """acc[k], acc[k + 1] += w * (the two bf16 channels of a uint32 word, low half first)."""
    acc[k] += w * bf16_to_f32(word & np.uint32(0xFFFF))
    acc[k + 1] += w * bf16_to_f32(word >> np.uint32(16))


@cuda.jit(device=True, forceinline=True)
def add_corner(acc, words, n, row, i, w, nwords):
    """acc += w * the vector of `nwords` words starting at word i of row `row` (one load)."""
    if nwords == 1:
        add_word(acc, 0, words[n, row, i], w)
    elif nwords == 2:
        a, b = load2(words, n, row, i)
        add_word(acc, 0, a, w)
        add_word(acc, 2, b, w)
    else:
        a, b, c, d = load4(words, n, row, i)
        add_word(acc, 0, a, w)
        add_word(acc, 2, b, w)
        add_word(acc, 4, c, w)
        add_word(acc, 6, d, w)


@cuda.jit(device=True, forceinline=True)
def pack(acc, k):
    """Channels acc[k], acc[k + 1] rounded to bf16 (nearest even) and packed into one uint32 word."""
    return np.uint32(f32_to_bf16(acc[k])) | (np.uint32(f32_to_bf16(acc[k + 1])) << np.uint32(16))


@cuda.jit(device=True, forceinline=True)
def store_vector(out, n, q, i, acc, nwords):
    if nwords == 1:
        out[n, q, i] = pack(acc, 0)
    elif nwords == 2:
        store2(out, n, q, i, pack(acc, 0), pack(acc, 2))
    else:
        store4(out, n, q, i, pack(acc, 0), pack(acc, 2), pack(acc, 4), pack(acc, 6))


@cuda.jit(device=True)
def sample_corners(shapes, starts, loc, attn, n, q, m, l, p):
    """One sample's four corner weights, attention weight folded in and zero for a corner off the map, and the
    row of value holding its top-left pixel: (w00, w01, w10, w11, row); w01 is the pixel to the right."""
    H = shapes[l, 0]
    W = shapes[l, 1]
    x = loc[n, q, m, l, p, 0] * float32(W) - float32(0.5)
    y = loc[n, q, m, l, p, 1] * float32(H) - float32(0.5)
    w00 = float32(0.0)
    w01 = float32(0.0)
    w10 = float32(0.0)
    w11 = float32(0.0)
    row = int32(0)
    if x > float32(-1.0) and y > float32(-1.0) and x < float32(W) and y < float32(H):
        x0 = int32(math.floor(x))
        y0 = int32(math.floor(y))
        row = int32(starts[l] + y0 * W + x0)
        fx = x - float32(x0)
        fy = y - float32(y0)
        a = attn[n, q, m, l, p]
        if y0 >= 0 and x0 >= 0:
            w00 = a * (float32(1.0) - fy) * (float32(1.0) - fx)
        if y0 >= 0 and x0 + 1 < W:
            w01 = a * (float32(1.0) - fy) * fx
        if y0 + 1 < H and x0 >= 0:
            w10 = a * fy * (float32(1.0) - fx)
        if y0 + 1 < H and x0 + 1 < W:
            w11 = a * fy * fx
    return w00, w01, w10, w11, row


@cuda.jit(device=True, forceinline=True)
def lane_group(lanes, N, Lq, M):
    """Where this lane works, in groups of `lanes` lanes (a power of two), a group per head (n, q, m), heads
    fastest: (g, n, q, m, live, gone). g: my place in my group. live: False for a spare group past the last head,
    which gets head 0 (it takes part in the warp's shuffles and barriers, and stores nothing). gone: the whole
    warp is past the end (the same on all its lanes)."""
    lane = cuda.threadIdx.x % WARP
    g = lane % lanes
    heads = N * Lq * M
    if (cuda.grid(1) - lane) // lanes >= heads:   # my warp's first thread is past the last head's group
        return g, 0, 0, 0, False, True
    group = cuda.grid(1) // lanes                  # (n, q, m) flattened, heads fastest
    live = group < heads
    if not live:
        group = 0
    m = group % M
    q = (group // M) % Lq
    n = group // (M * Lq)
    return g, n, q, m, live, False


@cuda.jit
def msda_warp(words, shapes, starts, loc, attn, out, lanes):
    """words: value as uint32 [N, S * M, D / 2]; out: uint32 [N, Lq, M * D / 2]; lanes: G, a power of two."""
    N, Lq, M, L, P = loc.shape[0], loc.shape[1], loc.shape[2], loc.shape[3], loc.shape[4]
    half = words.shape[2]                          # words in a head's row (D / 2)
    nvec = half // WORDS                           # vectors in a head's row
    samples = L * P
    g, n, q, m, live, gone = lane_group(lanes, N, Lq, M)
    leader = cuda.threadIdx.x % WARP - g           # my group's first lane
    if gone:
        return                                     # the whole warp is past the end: all its lanes leave together
    acc = cuda.local.array(8, float32)
    for v0 in range(0, nvec, lanes):               # passes over the row's vectors (one when G covers the row)
        vec = v0 + g
        for k in range(2 * WORDS):
            acc[k] = float32(0.0)
        # >>> lab: lane g computes sample j0 + g; the group shares each sample by shuffles, adds its corners
        for j0 in range(0, samples, lanes):
            j = j0 + g
            w00, w01, w10, w11, row = float32(0.0), float32(0.0), float32(0.0), float32(0.0), int32(0)
            if live and j < samples:
                w00, w01, w10, w11, row = sample_corners(shapes, starts, loc, attn, n, q, m, j // P, j % P)
            for t in range(min(lanes, samples - j0)):
                src = leader + t
                c00 = cuda.shfl_sync(FULL_MASK, w00, src)
                c01 = cuda.shfl_sync(FULL_MASK, w01, src)
                c10 = cuda.shfl_sync(FULL_MASK, w10, src)
                c11 = cuda.shfl_sync(FULL_MASK, w11, src)
                top = cuda.shfl_sync(FULL_MASK, row, src)
                if vec < nvec:
                    W = shapes[(j0 + t) // P, 1]
                    i = vec * WORDS
                    if c00 != float32(0.0):
                        add_corner(acc, words, n, top * M + m, i, c00, WORDS)
                    if c01 != float32(0.0):
                        add_corner(acc, words, n, (top + 1) * M + m, i, c01, WORDS)
                    if c10 != float32(0.0):
                        add_corner(acc, words, n, (top + W) * M + m, i, c10, WORDS)
                    if c11 != float32(0.0):
                        add_corner(acc, words, n, (top + W + 1) * M + m, i, c11, WORDS)
        # <<< lab
        if live and vec < nvec:
            store_vector(out, n, q, m * half + vec * WORDS, acc, WORDS)


def pow2_at_least(k):
    return 1 << max(0, math.ceil(math.log2(k)))


def plan(D, vec_bytes=PARAMS["vec_bytes"], lanes=None):
    """(words a vector, vectors a row, lanes a group) for D channels."""
    if vec_bytes not in WIDTHS:
        raise ValueError(f"{NAME}: vec_bytes must be one of {sorted(WIDTHS)} (bytes each lane moves per access: two, "
                         f"four or eight bf16), got {vec_bytes!r}")
    words = WIDTHS[vec_bytes]
    nvec = D // 2 // words
    if lanes is None:
        lanes = min(WARP, pow2_at_least(nvec))
    elif isinstance(lanes, bool) or not isinstance(lanes, (int, np.integer)) or lanes < 1 or lanes > WARP \
            or lanes & (lanes - 1):
        raise ValueError(f"{NAME}: lanes (lanes a group, one group per head) must be a power of two from 1 to 32, so "
                         f"that groups tile a warp, got {lanes!r}")
    return words, nvec, int(lanes)


def grid_blocks(heads, lanes, threads) -> int:
    """Blocks of `threads` threads that give each of `heads` heads a group of `lanes` lanes."""
    groups_per_warp = WARP // lanes
    warps = (heads + groups_per_warp - 1) // groups_per_warp
    return (warps * WARP + threads - 1) // threads


def block_threads(stage, wpb) -> int:
    """Threads of a block of `wpb` warps; ValueError naming warps_per_block and its rule otherwise."""
    if isinstance(wpb, bool) or not isinstance(wpb, (int, np.integer)) or not 1 <= wpb <= 32:
        raise ValueError(f"{stage}: warps_per_block must be an integer from 1 to 32 (a block holds at most 1024 "
                         f"threads), got {wpb!r}")
    return WARP * int(wpb)


def launch(p, kernel=None, **params):
    check_params(params, PARAMS)
    threads = block_threads(NAME, params.get("warps_per_block", PARAMS["warps_per_block"]))
    p.require_channels(NAME)
    N, S, M, D, Lq, L, P = p.shape
    words, nvec, lanes = plan(D, params.get("vec_bytes", PARAMS["vec_bytes"]), params.get("lanes"))
    value_words, out_words = p.words()
    blocks = grid_blocks(N * Lq * M, lanes, threads)
    kernel = specialise(kernel or msda_warp, WORDS=words)
    kernel[blocks, threads](value_words, p.shapes, p.starts, p.loc, p.attn, out_words, np.int32(lanes))
