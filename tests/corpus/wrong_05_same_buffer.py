"""Stage 05 that forgets to flip buffers: each thread stores its prefetched registers for window k+1 into the
buffer that holds window k, right after its own share of the interpolation, while other warps still read it."""
import numpy as np
from numba import cuda, float32, int32, uint32

from cudabook import SIMULATOR
from cudabook.resample import s05_double_buffered as s05
from cudabook.resample.s04_smem_windows import (BATCH, UNROLL, batch_bounds, buffer_words, fill_rest, fill_window,
                                                interpolate_window, load_batch, load_targets, load_times,
                                                locate_targets, per_target, store_batch, window_of, window_start,
                                                work_item)

BUG = "the next window is stored into the buffer still being read (no flip), with no barrier: a race"
SIZE = dict(B=2, S=19, T=45, D=64)
# On a GPU: one block per run, so that a block's next work item is another batch row (other data), and 33
# targets over 4 warps: the warp with one target more still reads the window when the others
# overwrite it.
GPU_SIZE = dict(B=4, S=20, T=2000, D=256)
PARAMS = (dict(buffers="shared", threads=64, targets_per_block=8, window_rows=12, chunk_cols=64, vec_bytes=4, blocks=2) if SIMULATOR
          else dict(buffers="shared", threads=128, targets_per_block=33, window_rows=12, chunk_cols=256, blocks=61))


@cuda.jit
def kernel(times, feats, feats64, targets, out, is_sorted, vec, tpb, wrows, cwmax, n_runs, n_chunks):
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
    tid = cuda.threadIdx.x
    nthr = cuda.blockDim.x
    lane = tid % 32
    warp = tid // 32
    nwarps = nthr // 32
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
        nbase = base                    # the bug: BUF - base, the other buffer
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


def launch(p):
    s05.launch(p, kernel=kernel, **PARAMS)
