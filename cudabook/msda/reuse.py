"""How many of a block's corners are the same (pixel, head): the reuse a kernel could have by loading each (pixel,
head) once for all the samples of a block, where every rung loads a corner for every sample that asks for it.

Lesson 05 measures that the L1 hands an SM at most 128 bytes a cycle, and that pieces at the same bytes of different
lines share its banks, one line a cycle; a corner (one head's D channels of one pixel) sits in a line of its own, so
each corner load costs the L1 half a cycle (the two halves of different lines together) or a whole one, even when it
hits. Samples of neighbouring queries often read the same pixels (on `local` locations a query's samples lie a few
pixels around the query's own pixel), so a block's corners repeat. Needs no GPU: this is arithmetic on the inputs.
"""
from __future__ import annotations

import numpy as np


def corner_keys(shapes, starts, loc) -> np.ndarray:
    """[N, Lq, M, L, P, 4]: each sample's four corners as pixel * M + head (the line-half a corner is), -1 for a
    corner off the map (no rung loads it for its value)."""
    shapes = np.asarray(shapes, np.int64)
    starts = np.asarray(starts, np.int64)
    loc = np.asarray(loc, np.float32)
    M = loc.shape[2]
    H = shapes[:, 0][None, None, None, :, None]
    W = shapes[:, 1][None, None, None, :, None]
    x = loc[..., 0] * W.astype(np.float32) - np.float32(0.5)
    y = loc[..., 1] * H.astype(np.float32) - np.float32(0.5)
    x0 = np.floor(x).astype(np.int64)
    y0 = np.floor(y).astype(np.int64)
    head = np.arange(M, dtype=np.int64)[None, None, :, None, None]
    keys = []
    for dy in (0, 1):
        for dx in (0, 1):
            xx, yy = x0 + dx, y0 + dy
            on = (xx >= 0) & (yy >= 0) & (xx < W) & (yy < H)
            keys.append(np.where(on, (starts[None, None, None, :, None] + yy * W + xx) * M + head, -1))
    return np.stack(keys, axis=-1)


def _runs(shapes, starts, loc, queries: int, blocks: int | None):
    """Each image's runs of `queries` consecutive queries, as corner keys [runs, queries, M, L * P * 4] (at most
    `blocks` runs an image), one image after another; a run longer than an image is refused."""
    keys = corner_keys(shapes, starts, loc)
    N, Lq, M = keys.shape[:3]
    runs = Lq // queries
    if runs == 0:
        raise ValueError(f"queries: a run of {queries} queries is longer than the {Lq} queries of an image")
    return [keys[n, :runs * queries].reshape(runs, queries, M, -1)[:blocks] for n in range(N)]


def distinct_share(shapes, starts, loc, queries: int, blocks: int | None = None) -> float:
    """Of the on-map corners that runs of `queries` consecutive queries of one image read (all heads), the share
    that are distinct (pixel, head): 1.0 when no two samples of a run share a corner. `blocks`: only the first
    that many runs of each image. The share pools the runs: their distinct corners over all their corners."""
    distinct = corners = 0
    for image in _runs(shapes, starts, loc, queries, blocks):
        for run in image:
            on = run[run >= 0]
            distinct += np.unique(on).size
            corners += on.size
    return distinct / corners if corners else 1.0


def distinct_per_block_head(shapes, starts, loc, queries: int, blocks: int | None = None) -> np.ndarray:
    """[runs, M]: how many distinct pixels each run of `queries` consecutive queries of one image reads for each
    head (on-map corners only): the rows a kernel that loads each (pixel, head) of a block once would stage, per
    head, and the K of its weights-times-pixels product. `blocks`: only the first that many runs of each image;
    the images' runs one after another."""
    M = np.shape(loc)[2]
    runs = np.concatenate(_runs(shapes, starts, loc, queries, blocks))            # [runs, queries, M, L*P*4]
    keys = np.sort(runs.transpose(0, 2, 1, 3).reshape(runs.shape[0], M, -1), axis=-1)
    first = np.ones(keys.shape, bool)                                             # a key unlike the one before it
    first[..., 1:] = keys[..., 1:] != keys[..., :-1]
    return ((keys >= 0) & first).sum(-1).astype(np.int64)


def window_pixels(shapes, starts, loc, queries: int, blocks: int | None = None) -> np.ndarray:
    """[runs, M]: for each run of `queries` consecutive queries of one image and each head, the pixels of the
    smallest rectangles, one a level, that hold every on-map corner the run reads on that level for that head,
    summed over the levels: what a kernel would copy into shared memory to serve a block's samples from there
    (times D bf16 a pixel). A level the run's corners never touch adds nothing. `blocks`: only the first that many
    runs of each image; the images' runs one after another."""
    shapes = np.asarray(shapes, np.int64)
    starts = np.asarray(starts, np.int64)
    M, L = np.shape(loc)[2], len(shapes)
    runs = np.concatenate(_runs(shapes, starts, loc, queries, blocks))             # [runs, queries, M, L*P*4]
    keys = runs.reshape(runs.shape[:3] + (L, -1)).transpose(0, 2, 3, 1, 4)          # [runs, M, L, queries, P*4]
    keys = keys.reshape(keys.shape[:3] + (-1,))
    on = keys >= 0
    y, x = np.divmod(keys // M - starts[None, None, :, None], shapes[None, None, :, 1, None])
    big = np.iinfo(np.int64).max
    span = [np.where(on, v, -1).max(-1) - np.where(on, v, big).min(-1) + 1 for v in (y, x)]
    return np.where(on.any(-1), span[0] * span[1], 0).sum(-1)                       # [runs, M]
