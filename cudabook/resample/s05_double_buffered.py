"""05 double buffering: keep the next loads in flight while the current ones are used.

Two ways, both here, both measured in the lesson.

buffers="shared" (the classic picture). Each block keeps two windows of stage 04 in shared memory. Before it
interpolates work item k from one buffer, each thread issues its loads for item k+1's window (a batch of 8 wide
loads into registers, plus the next item's times and targets); it interpolates item k, and only then stores the
registers into the other buffer. A load stalls a thread only at the first instruction that reads its register,
so the loads of window k+1 fly during the interpolation of item k. It costs registers (32 a thread hold the
batch across the interpolation), so fewer blocks fit on an SM, and on an H200 it was slower than stage 04
(measured while this stage was built).

buffers="registers" (the default, and the fast one). The shared window existed to read each source row once
from DRAM; the 50 MB L2 of an H100 already does that for neighbouring targets. So drop it:
  1. a prepass kernel (`find_intervals`) finds every target's interval lo and weight w once, with the row of
     source times in shared memory, and writes them to two small arrays (8 bytes a target);
  2. the streaming kernel (`resample_in_flight`) gives each warp four consecutive targets at a time: lanes 0-3
     read the four (lo, w) pairs, shuffles hand them to the whole warp, and every lane issues all eight of its
     row loads (two rows for each of four targets, 16 bytes each) before it uses the first. Registers are the
     buffers: while a lane interpolates target 1, the rows of targets 2-4 are still arriving. A persistent grid
     (SMs x blocks_per_sm) walks the groups, so many warps per SM keep even more loads in flight.
Targets in any order take the same path (each target's search is its own), so there is no fallback.

Everything of buffers="shared" (work items, windows, run bounds, fallback, layout) is stage 04's: the steps
that use a window come from s04_smem_windows, the rest from windows.py (what stages 04 and 05 build on).
"""
import numpy as np
from numba import cuda, float32, int32, uint32

from .. import SIMULATOR
from ..kit.numba_rung import twin
from .s01_naive import find_interval, weight
from .s04_smem_windows import fill_window, interpolate_window, locate_targets, window_weight
from .windows import (BATCH, UNROLL, aligned, batch_bounds, block_layout, buffer_words, compiled, fill_rest,
                      grid_size, launch_windows, lerp2, load_batch, load_element, load_targets, load_times,
                      per_target, store_batch, store_element, window_of, window_start, words, work_item)

NAME = "05_double_buffered"
TITLE = "double buffering"
PARAMS = {"buffers": "registers", "threads": 128, "blocks_per_sm": 8, "vec_bytes": 16, "blocks": 0,
          # buffers="shared" only:
          "targets_per_block": 24, "window_rows": 40, "chunk_cols": 256, "max_registers": 128}
GROUP = 4                     # targets a warp keeps in flight (buffers="registers")
SMAX = 8192                   # source times the prepass holds in shared memory (32 KB)
PRE_THREADS = 256             # prepass threads a block (each finds PRE_PER targets)
PRE_PER = 4


@cuda.jit
def resample_double(times, feats, feats64, targets, out, is_sorted, vec, tpb, wrows, cwmax, n_runs, n_chunks):
    # Dynamic shared memory, in 4-byte words: two buffers of [window: wrows * cwmax][its times: wrows]
    # [its targets: tpb], then [each target's interval: tpb][its weight: tpb][the runs' intervals: 2 * BATCH].
    sm32 = cuda.shared.array(0, uint32)
    smf = cuda.shared.array(0, float32)
    smi = cuda.shared.array(0, int32)
    TOFF = wrows * cwmax                # times, within a buffer
    XOFF = TOFF + wrows                 # targets, within a buffer
    BUF = buffer_words(wrows, cwmax, tpb)
    LOFF = 2 * BUF
    WOFF = LOFF + tpb
    BOFF = WOFF + tpb
    tid, nthr, lane, warp, nwarps = block_layout()
    S = times.shape[1]
    T = targets.shape[1]
    Dc = out.shape[2]
    G = cuda.gridDim.x
    n_items = times.shape[0] * n_runs * n_chunks
    item = cuda.blockIdx.x
    # Prologue: the bounds of the first BATCH items, and the first window loaded the plain way.
    if is_sorted:
        batch_bounds(times, targets, smi, BOFF, item, G, n_items, n_runs, n_chunks, tpb, cwmax, Dc, tid, nthr)
    cuda.syncthreads()
    b, t0, nt, c0, cw = work_item(item, n_runs, n_chunks, tpb, cwmax, T, Dc)
    row0, span = window_of(smi, BOFF, is_sorted, wrows)
    if span <= wrows:
        fill_window(feats, feats64, times, sm32, smf, 0, TOFF, b, row0, span, c0, cw, vec, tid, nthr)
        load_targets(targets, smf, XOFF, b, t0, nt, tid, nthr)
    k = 0
    while item < n_items:               # the persistent loop; item k's window is in buffer k % 2
        base = (k % 2) * BUF
        nbase = BUF - base
        nitem = item + G
        if (k + 1) % BATCH == 0 and is_sorted:
            batch_bounds(times, targets, smi, BOFF, nitem, G, n_items, n_runs, n_chunks, tpb, cwmax, Dc, tid,
                         nthr)
        cuda.syncthreads()              # window k is complete; everyone is done with buffer (k + 1) % 2
        if span <= wrows:
            locate_targets(smf, smi, base + TOFF, base + XOFF, LOFF, WOFF, nt, span, tid, nthr)
        nb, nt0, nnt, nc0, ncw = work_item(nitem, n_runs, n_chunks, tpb, cwmax, T, Dc)
        nrow0 = 0
        nspan = wrows + 1
        if nitem < n_items:
            nrow0, nspan = window_of(smi, BOFF + 2 * ((k + 1) % BATCH), is_sorted, wrows)
        cuda.syncthreads()              # targets located; everyone has read the next item's bounds
        pspan = 0                       # rows to prefetch: none if there is no next window
        pnt = 0
        if nitem < n_items and nspan <= wrows:
            pspan = nspan
            pnt = nnt
        cwl, q, rem, step, wrap, r, j, off = window_start(tid, nthr, nb, nrow0, nc0, ncw, vec, S, Dc)
        (a0, a1, a2, a3, b0, b1, b2, b3, c0_, c1, c2, c3, d0, d1, d2, d3, e0, e1, e2, e3, f0, f1, f2, f3,
         g0, g1, g2, g3, h0, h1, h2, h3, r, j, off) = load_batch(feats, feats64, pspan, cwl, vec, q, rem, step,
                                                                 wrap, r, j, off)    # in flight from here on
        tv = np.float32(0.0)
        if tid < pspan:
            tv = times[nb, nrow0 + tid]
        xv = np.float32(0.0)
        if tid < pnt:
            xv = targets[nb, nt0 + tid]
        if span <= wrows:
            interpolate_window(sm32, smf, smi, out, base, LOFF, WOFF, b, t0, nt, c0, cw, vec, warp, nwarps, lane)
        else:
            per_target(times, feats, targets, out, b, t0, nt, c0, cw, warp, nwarps, lane)
        store_batch(sm32, nbase + tid * vec, tid, nthr, pspan * cwl, vec, a0, a1, a2, a3, b0, b1, b2, b3,
                    c0_, c1, c2, c3, d0, d1, d2, d3, e0, e1, e2, e3, f0, f1, f2, f3, g0, g1, g2, g3, h0, h1, h2,
                    h3)                 # the first use of the registers: here a thread may wait for its loads
        if tid < pspan:
            smf[nbase + TOFF + tid] = tv
        if tid < pnt:
            smf[nbase + XOFF + tid] = xv
        fill_rest(feats, feats64, sm32, nbase, pspan, cwl, vec, q, rem, step, wrap, tid + UNROLL * nthr, r, j, off,
                  nthr)                 # a window larger than one batch: the rest, the plain way
        load_times(times, smf, nbase + TOFF, nb, nrow0, pspan, tid + nthr, nthr)
        load_targets(targets, smf, nbase + XOFF, nb, nt0, pnt, tid + nthr, nthr)
        item = nitem
        b = nb
        t0 = nt0
        nt = nnt
        c0 = nc0
        cw = ncw
        row0 = nrow0
        span = nspan
        k += 1


# ----------------------------------------------------------------------------------------------------------
# buffers="registers": a prepass for the searches, then four targets' loads in flight a warp
# ----------------------------------------------------------------------------------------------------------
@cuda.jit(device=True, forceinline=True)
def store_below(st, j, n, v):
    """st[j] = v where j < n (the loads past the row's end were clamped to its last element: not stored)."""
    if j < n:
        st[j] = v


@cuda.jit(device=True)
def copy_times_row(times, b, st, tid, nthr):
    """Row b of the source times to shared memory: eight loads in flight a thread before the first store (a
    plain loop would wait for each load in turn)."""
    S = times.shape[1]
    i = tid
    while i < S:
        v0 = times[b, i]
        v1 = times[b, min(i + nthr, S - 1)]
        v2 = times[b, min(i + 2 * nthr, S - 1)]
        v3 = times[b, min(i + 3 * nthr, S - 1)]
        v4 = times[b, min(i + 4 * nthr, S - 1)]
        v5 = times[b, min(i + 5 * nthr, S - 1)]
        v6 = times[b, min(i + 6 * nthr, S - 1)]
        v7 = times[b, min(i + 7 * nthr, S - 1)]
        st[i] = v0
        store_below(st, i + nthr, S, v1)
        store_below(st, i + 2 * nthr, S, v2)
        store_below(st, i + 3 * nthr, S, v3)
        store_below(st, i + 4 * nthr, S, v4)
        store_below(st, i + 5 * nthr, S, v5)
        store_below(st, i + 6 * nthr, S, v6)
        store_below(st, i + 7 * nthr, S, v7)
        i += 8 * nthr


@cuda.jit(device=True)
def put_interval(times, st, shared, b, t, li, x, lo, wt):
    """Target t's interval li (found in shared memory) or, if not `shared`, its search in global memory (stage
    01's), and its weight -> lo[b * T + t], wt[b * T + t]."""
    T = lo.shape[0] // times.shape[0]
    if shared:
        w = window_weight(st, 0, li, x)
    else:
        li = find_interval(times, b, x)
        w = weight(times, b, li, x)
    lo[b * T + t] = li
    wt[b * T + t] = w


@cuda.jit(device=True, forceinline=True)
def halve(st, li, half, x):
    """One step of a branch-free binary search: the candidates [li, li + 2 * half) -> the half that holds x."""
    return li + half if st[li + half] <= x else li


@cuda.jit
def find_intervals(times, targets, lo, wt):
    """lo[b * T + t], wt[b * T + t]: every target's interval and weight; a block takes PRE_PER * blockDim.x
    targets of one batch row, PRE_PER (4) a thread. Their loads are issued first, so that they fly while the
    block copies the row of source times to shared memory (when it fits, S <= SMAX, and is not much longer
    than the block's targets). Then each thread runs its four binary searches side by side, one step of each
    in turn: four independent shared-memory loads in flight instead of one, and no branches (read on an H200
    while this stage was built, not a results/ record: 7 us for the benchmark's 262,144 targets, against 11 us
    searching one target after the other)."""
    st = cuda.shared.array(SMAX, float32)
    S = times.shape[1]
    T = targets.shape[1]
    nthr = cuda.blockDim.x
    tid = cuda.threadIdx.x
    per_block = PRE_PER * nthr
    ntb = (T + per_block - 1) // per_block
    b = cuda.blockIdx.x // ntb
    t = (cuda.blockIdx.x - b * ntb) * per_block + tid      # this thread's targets: t, t + nthr, ... (PRE_PER)
    end = min(t - tid + per_block, T)
    x0 = targets[b, min(t, T - 1)]
    x1 = targets[b, min(t + nthr, T - 1)]
    x2 = targets[b, min(t + 2 * nthr, T - 1)]
    x3 = targets[b, min(t + 3 * nthr, T - 1)]
    shared = S <= SMAX and S <= 16 * per_block
    l0 = int32(0)
    l1 = int32(0)
    l2 = int32(0)
    l3 = int32(0)
    if shared:
        copy_times_row(times, b, st, tid, nthr)
        cuda.syncthreads()
        n = int32(S - 1)               # the candidates: [l, l + n), for each of the four
        while n > 1:
            half = n >> 1
            l0 = halve(st, l0, half, x0)
            l1 = halve(st, l1, half, x1)
            l2 = halve(st, l2, half, x2)
            l3 = halve(st, l3, half, x3)
            n -= half
    if t < end:
        put_interval(times, st, shared, b, t, l0, x0, lo, wt)
    if t + nthr < end:
        put_interval(times, st, shared, b, t + nthr, l1, x1, lo, wt)
    if t + 2 * nthr < end:
        put_interval(times, st, shared, b, t + 2 * nthr, l2, x2, lo, wt)
    if t + 3 * nthr < end:
        put_interval(times, st, shared, b, t + 3 * nthr, l3, x3, lo, wt)


@cuda.jit
def resample_in_flight(feats, feats64, lo, wt, out, S, T, vec):
    """A warp takes four consecutive targets (of the flattened B * T) and one stretch of 32 * vec words of
    their rows; a persistent grid walks the (group, stretch) units. `feats`/`out` are word views (stage 04's
    layout), `vec` words a load."""
    lane = cuda.threadIdx.x % 32
    warp = (cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x) // 32
    nwarps = cuda.gridDim.x * cuda.blockDim.x // 32
    n = lo.shape[0]
    Dc = out.shape[2]
    span = 32 * vec
    stretches = (Dc + span - 1) // span
    units = (n + GROUP - 1) // GROUP * stretches
    u = warp
    while u < units:                    # the same for every lane of a warp: the shuffles below see all 32
        g = u // stretches
        i = GROUP * g                   # the group's first target
        j = (u - g * stretches) * span + lane * vec     # this lane's first word in a row
        ok = j < Dc
        # lanes 0-3 read target i+q's (lo, w); a shuffle gives each lane all four
        k = min(i + lane % GROUP, n - 1)
        row = ((k // T) * S + lo[k]) * Dc
        w = wt[k]
        r0 = cuda.shfl_sync(0xFFFFFFFF, row, 0) + j
        r1 = cuda.shfl_sync(0xFFFFFFFF, row, 1) + j
        r2 = cuda.shfl_sync(0xFFFFFFFF, row, 2) + j
        r3 = cuda.shfl_sync(0xFFFFFFFF, row, 3) + j
        w0 = cuda.shfl_sync(0xFFFFFFFF, w, 0)
        w1 = cuda.shfl_sync(0xFFFFFFFF, w, 1)
        w2 = cuda.shfl_sync(0xFFFFFFFF, w, 2)
        w3 = cuda.shfl_sync(0xFFFFFFFF, w, 3)
        o = i * Dc + j
        # >>> lab: issue all eight row loads of the four targets first, then interpolate and store each target
        a0, a1, a2, a3 = load_element(feats, feats64, r0, ok, vec)
        c0, c1, c2, c3 = load_element(feats, feats64, r0 + Dc, ok, vec)
        d0, d1, d2, d3 = load_element(feats, feats64, r1, ok, vec)
        e0, e1, e2, e3 = load_element(feats, feats64, r1 + Dc, ok, vec)
        f0, f1, f2, f3 = load_element(feats, feats64, r2, ok, vec)
        g0, g1, g2, g3 = load_element(feats, feats64, r2 + Dc, ok, vec)
        h0, h1, h2, h3 = load_element(feats, feats64, r3, ok, vec)
        k0, k1, k2, k3 = load_element(feats, feats64, r3 + Dc, ok, vec)
        store_element(out, o, ok, vec, lerp2(a0, c0, w0), lerp2(a1, c1, w0), lerp2(a2, c2, w0), lerp2(a3, c3, w0))
        store_element(out, o + Dc, ok and i + 1 < n, vec,
                      lerp2(d0, e0, w1), lerp2(d1, e1, w1), lerp2(d2, e2, w1), lerp2(d3, e3, w1))
        store_element(out, o + 2 * Dc, ok and i + 2 < n, vec,
                      lerp2(f0, g0, w2), lerp2(f1, g1, w2), lerp2(f2, g2, w2), lerp2(f3, g3, w2))
        store_element(out, o + 3 * Dc, ok and i + 3 < n, vec,
                      lerp2(h0, k0, w3), lerp2(h1, k1, w3), lerp2(h2, k2, w3), lerp2(h3, k3, w3))
        # <<< lab
        u += nwarps


_scratch: dict = {}


def intervals_buffer(n: int):
    """The prepass's output arrays (lo int32 [n], w float32 [n]), allocated once per size and reused:
    allocating can synchronise the GPU, which must never happen inside a timed launch after the first. Each
    launch writes them before it reads them, in stream order."""
    if SIMULATOR:
        return cuda.device_array(n, np.int32), cuda.device_array(n, np.float32)
    key = (id(cuda.current_context()), n)
    if key not in _scratch:
        if len(_scratch) >= 4:
            _scratch.pop(next(iter(_scratch)))
        _scratch[key] = cuda.device_array(n, np.int32), cuda.device_array(n, np.float32)
    return _scratch[key]


def vec_words(p, vec_bytes):
    """Words a load (4, 2 or 1) for this problem: as wide as vec_bytes allows, D divides and the arrays'
    alignment permits (odd D: one uint16 word)."""
    if vec_bytes not in (16, 8, 4):
        raise ValueError(f"vec_bytes must be 16, 8 or 4, got {vec_bytes!r}")
    D = p.shape[3]
    Dc = D if D % 2 else D // 2
    vec = 1 if D % 2 else vec_bytes // 4
    while vec > 1 and (Dc % vec or not (aligned(p.feats, 4 * vec) and aligned(p.out, 4 * vec))):
        vec //= 2
    return vec


def launch_in_flight(p, kernel, threads, blocks_per_sm, vec_bytes, blocks):
    B, S, T, D = p.shape
    if threads < 32 or threads % 32 or threads > 1024:
        raise ValueError(f"threads must be a multiple of 32 between 32 and 1024, got {threads}")
    vec = vec_words(p, vec_bytes)
    if T == 0:
        return
    n = B * T
    lo, wt = intervals_buffer(n)
    pre_threads = 32 if SIMULATOR else PRE_THREADS
    find_intervals[B * ((T + PRE_PER * pre_threads - 1) // (PRE_PER * pre_threads)), pre_threads](
        p.times, p.targets, lo, wt)
    kernel = twin(kernel)
    fw, f64, ow, Dc = words(p)
    args = (fw, f64, lo, wt, ow, np.int32(S), np.int32(T), np.int32(vec))
    found = compiled(kernel, args, threads, 0)
    units = (n + GROUP - 1) // GROUP * ((Dc + 32 * vec - 1) // (32 * vec))
    grid = grid_size((units * 32 + threads - 1) // threads, blocks_per_sm, blocks, found[1] if found else None,
                     stage=NAME)
    kernel[grid, threads](*args)


def launch(p, kernel=None, buffers=PARAMS["buffers"], threads=PARAMS["threads"],
           blocks_per_sm=PARAMS["blocks_per_sm"], vec_bytes=PARAMS["vec_bytes"], blocks=PARAMS["blocks"],
           targets_per_block=PARAMS["targets_per_block"], window_rows=PARAMS["window_rows"],
           chunk_cols=PARAMS["chunk_cols"], max_registers=PARAMS["max_registers"]):
    """Stage 05. buffers="registers": the prepass and resample_in_flight (`kernel` replaces the latter);
    buffers="shared": stage 04's windows, two of them, resample_double (`kernel` replaces it)."""
    if buffers == "registers":
        launch_in_flight(p, kernel or resample_in_flight, threads, blocks_per_sm, vec_bytes, blocks)
    elif buffers == "shared":
        launch_windows(p, kernel or resample_double, 2, threads, targets_per_block, window_rows, chunk_cols,
                       blocks_per_sm, vec_bytes, max_registers, blocks, stage="04_smem_windows")  # 04's launch
    else:
        raise ValueError(f"buffers must be 'registers' or 'shared', got {buffers!r}")
