"""A checker's verdict, shared by every track: PASS or FAIL, how many elements are wrong, and a message."""
from __future__ import annotations

import concurrent.futures
import dataclasses
import os

import numpy as np


def bf16_half_ulp(x):
    """Half a bf16 unit in the last place of |x| (8 significant bits)."""
    _, e = np.frexp(np.maximum(np.abs(x), 2.0 ** -126))
    return np.ldexp(1.0, e - 9)


def tolerance(ref, slack, got):
    """Every checker's tolerance: half a bf16 ulp of the larger of |ref| and |got| (the output's own rounding),
    plus the arithmetic's `slack` (the track's bound on its float32 error), plus a hair for exact zeros."""
    return bf16_half_ulp(np.maximum(np.abs(ref), np.abs(np.nan_to_num(got)))) + slack + 1e-30


def _half_ulp_of_magnitude(a):
    """bf16_half_ulp of a >= 0 (float64), from the exponent bits alone: 2^(floor(log2 a) - 8). The same values as
    bf16_half_ulp (an infinity gives infinity there too, which no finite difference exceeds), several times
    faster: it is the whole cost of checking a benchmark's hundred million outputs."""
    bits = np.maximum(a, 2.0 ** -126).view(np.uint64) & np.uint64(0x7FF0000000000000)
    return bits.view(np.float64) * 2.0 ** -8


def _outside_block(g, r, slack):
    """outside() of one block, tolerance() worked in place: the half ulp of max(|ref|, |got|), |got| only where
    it is finite (a NaN or an infinite got is wrong whatever the tolerance)."""
    d = np.abs(g - r)                                            # NaN where got is NaN
    m = np.abs(r)
    np.maximum(m, np.abs(g), out=m, where=np.isfinite(g))
    tol = _half_ulp_of_magnitude(m)
    tol += slack
    tol += 1e-30
    return ~(d <= tol)                                           # NaN compares False


def outside(got, ref, slack, chunk=1 << 18):
    """bad: True where `got` (float64) is NaN or further from `ref` than tolerance(ref, slack, got); `slack`
    broadcasts to ref's shape. The tolerance is worked a block at a time: at a benchmark's hundred million
    outputs, its whole-array temporaries cost ten times more in fresh pages than in arithmetic."""
    got, ref = np.asarray(got), np.asarray(ref)
    slack = np.broadcast_to(slack, ref.shape)
    bad = np.empty(ref.shape, bool)
    if ref.size == 0 or ref.ndim == 0:
        bad[...] = ~(np.abs(got - ref) <= tolerance(ref, slack, got))       # NaN compares False
        return bad
    axis, inner = 0, ref.size // ref.shape[0]
    while axis + 1 < ref.ndim and inner > chunk:                # the first axis whose blocks fit a chunk
        axis += 1
        inner //= ref.shape[axis]
    step = max(1, chunk // max(inner, 1))
    blocks = [outer + (slice(s, s + step),) for outer in np.ndindex(*ref.shape[:axis])
              for s in range(0, ref.shape[axis], step)]

    def work(at):
        bad[at] = _outside_block(np.asarray(got[at], np.float64), ref[at], slack[at])

    threads = min(8, os.cpu_count() or 1, len(blocks))
    if threads > 1:                 # NumPy lets go of the interpreter in each block's arithmetic
        with concurrent.futures.ThreadPoolExecutor(threads) as pool:
            list(pool.map(work, blocks))
    else:
        for at in blocks:
            work(at)
    return bad


def small_errors_everywhere(got, ref, bad) -> bool:
    """Are the wrong outputs (mask `bad`) many (over 30 %) and only a little off (median relative error under 2 %)?
    The pattern of rounding inside a loop, where the result is right but for the last bits."""
    if bad.mean() <= 0.3:
        return False
    return np.median(np.abs(got[bad] - ref[bad]) / np.maximum(np.abs(ref[bad]), 1e-30)) < 0.02


def index_ranges(idx, most=6) -> str:
    """[3, 4, 5, 9] -> '3 .. 5, 9' (at most `most` pieces)."""
    idx = [int(i) for i in idx]
    pieces, start = [], idx[0]
    for prev, cur in zip(idx, idx[1:] + [None]):
        if cur != prev + 1:
            pieces.append(f"{start}" if start == prev else f"{start} .. {prev}")
            start = cur
    return ", ".join(pieces[:most]) + (", ..." if len(pieces) > most else "")


@dataclasses.dataclass
class Verdict:
    ok: bool
    wrong: int
    total: int
    nan: int
    shape: tuple
    message: str
    first: list = dataclasses.field(default_factory=list)   # the first wrong elements: (index..., expected, got)
    unwritten: int | None = None    # outputs that still hold the poison (check_case counts them); None: not counted

    def __bool__(self):
        return self.ok

    def __str__(self):
        return self.message


def all_nan_hint(never_written: bool | None) -> str:
    """The hint for an output that is NaN everywhere. never_written: True where every output still holds the
    poison, False where the kernel stored every NaN itself, None where the checker cannot tell them apart."""
    store = "does the kernel store to `out`, and is it launched?"
    source = ("in the CPU emulator shared memory holds NaN until a copy lands in it: a stage read where no copy "
              "landed (too few copies issued, copies to the wrong place, or a read before the wait)")
    if never_written is True:
        return f"no output was written at all: {store}"
    if never_written is False:
        return f"every output is a NaN the kernel computed from NaN, and {source}"
    return f"every output is NaN: either no output was written ({store}), or every one was computed from NaN ({source})"
